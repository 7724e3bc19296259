"""Kubespray MgmtDriver for OpenStack Tacker.

The Tacker entry point is :mod:`mgmt_driver.kubespray_mgmt`; everything else
is importable and usable without Tacker (see :mod:`mgmt_driver.cli`).

Where each operation lives: :mod:`mgmt_driver.operations` composes every
LCM operation once (instantiate, scale out/in, heal begin/finish,
whole-VNF heal, terminate, upgrade, relabel); the adapters
(:class:`mgmt_driver.driver.LcmHooks` for Tacker v1, :mod:`mgmt_driver.v2`,
:mod:`mgmt_driver.cli` and the demo) only turn their inputs into its
arguments.  The steps are the context's
(:class:`mgmt_driver.driver.ClusterDriver`), the gateways'
(:mod:`mgmt_driver.gateways`), the control plane's
(:mod:`mgmt_driver.controlplane`) and day 2's (:mod:`mgmt_driver.day2`).

How the steps reach hosts: through the one connection interface of
:mod:`mgmt_driver.connection` (SSH in :mod:`mgmt_driver.ssh`, the dry run
in :mod:`mgmt_driver.plan`, the test site's and the unit tests' doubles);
what they run there as shell programs are files,
``mgmt_driver/scripts/NAME.sh``, sent by :mod:`mgmt_driver.remote`.

How a request becomes what the steps read: :mod:`mgmt_driver.params`
holds the request's rules and builds the spec of :mod:`mgmt_driver.model`;
the checks share the kit of :mod:`mgmt_driver.validation` (every problem
at once, sorted by field); the grammar of labels and taints is
:mod:`mgmt_driver.labels`'; a scale or heal request's overrides are laid
over the instantiation's by :mod:`mgmt_driver.merging`; a PATCH's
metadata is read by :func:`mgmt_driver.upgrade.check_metadata`.
"""

DRIVER_NAME = 'mgmt-drivers-kubespray'
