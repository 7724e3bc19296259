"""Kubespray MgmtDriver for OpenStack Tacker.

The Tacker entry point is :mod:`mgmt_driver.kubespray_mgmt`; everything else
is importable and usable without Tacker (see :mod:`mgmt_driver.adapters.cli`).

Where each operation lives: :mod:`mgmt_driver.operations.lcm` composes every
LCM operation once (instantiate, scale out/in, heal begin/finish,
whole-VNF heal, terminate, upgrade, relabel); the adapters
(:class:`mgmt_driver.adapters.v1.LcmHooks` for Tacker v1,
:mod:`mgmt_driver.adapters.v2`, :mod:`mgmt_driver.adapters.cli` and the demo)
only turn their inputs into its arguments.  The steps are the context's
(:class:`mgmt_driver.session.driver.ClusterDriver`), the gateways'
(:mod:`mgmt_driver.operations.gateways`), the control plane's
(:mod:`mgmt_driver.operations.controlplane`) and day 2's
(:mod:`mgmt_driver.operations.day2`).

How the steps reach hosts: through the one connection interface of
:mod:`mgmt_driver.remote.connection` (SSH in :mod:`mgmt_driver.remote.ssh`, the
dry run in :mod:`mgmt_driver.remote.plan`, the test site's and the unit tests'
doubles); what they run there as shell programs are files,
``mgmt_driver/remote/scripts/NAME.sh``, sent by
:mod:`mgmt_driver.remote.programs`.

How a request becomes what the steps read: :mod:`mgmt_driver.model.params`
holds the request's rules and builds the spec of :mod:`mgmt_driver.model.core`;
the checks share the kit of :mod:`mgmt_driver.model.validation` (every problem
at once, sorted by field); the grammar of labels and taints is
:mod:`mgmt_driver.model.labels`'; a scale or heal request's overrides are laid
over the instantiation's by :mod:`mgmt_driver.model.merging`; a PATCH's
metadata is read by :func:`mgmt_driver.operations.upgrade.check_metadata`.
"""

import importlib
import warnings

DRIVER_NAME = 'mgmt-drivers-kubespray'

#: Module paths of the flat layout that code outside this package names,
#: by old name: ``(new path, deprecated)``.  The v1 shim
#: (:mod:`mgmt_driver.kubespray_mgmt`) is byte-stable, because Tacker
#: compares its hash with the copy in every onboarded CSAR: its two
#: imports keep their old paths for good, without a warning.  The v2
#: script of packages built before the layers (``from mgmt_driver import
#: v2``) works for one more release, with a DeprecationWarning.
MOVED = {
    'driver': ('mgmt_driver.adapters.v1', False),
    'tacker_compat': ('mgmt_driver.common.tacker_compat', False),
    'v2': ('mgmt_driver.adapters.v2', True),
}


def __getattr__(name):
    """``from mgmt_driver import <old name>``: the module now at its new
    path (:data:`MOVED`)."""
    try:
        path, deprecated = MOVED[name]
    except KeyError:
        raise AttributeError('module %r has no attribute %r'
                             % (__name__, name)) from None
    if deprecated:
        warnings.warn('mgmt_driver.%s is now %s; the old path goes in the '
                      'next release: rebuild the VNF package with '
                      '"kubespray-mgmt csar build"' % (name, path),
                      DeprecationWarning, stacklevel=2)
    module = importlib.import_module(path)
    globals()[name] = module  # once: "from ... import" asks twice
    return module
