"""Tacker v2 (``tacker/sol_refactored``): the hooks as a package script.

Tacker's v2 conductor runs ``Scripts/kubespray_mgmt_v2.py`` of the VNF
package with its own interpreter, a pickled dict on stdin (``operation``,
``request``, ``vnf_instance``, ``grant_request``, ``grant_response``,
``tmp_csar_dir``, ``user_script_err_handling_data``) and reads a pickled
dict from stdout; a non-zero exit fails the operation with stderr as its
detail.  The script only calls :func:`main`; this module maps v2's
camelCase dicts onto the inputs :class:`mgmt_driver.adapters.v1.LcmHooks`
already takes, so v1 and v2 share every step of the core.

What differs from v1, and where it is handled here:

* **Parameters**: v2 does not keep the instantiate ``additionalParams``.
  The validated request is kept in ``<records_dir>/v2/<instance id>.json``
  (mode 0600, beside the driver's own records, :class:`SpecStore`) and
  read back by every later operation, so scale and heal requests carry
  only what changes, as in v1; with several conductors, in the state
  directory they share (:mod:`mgmt_driver.state.statestore`): an operation
  that does not find them refuses, naming the path and the option.  It
  is not put in the instance's ``extensions`` or ``metadata``: those are
  shown by Tacker's API, and the parameters hold passwords.
* **Nodes**: each ``instantiatedVnfInfo.vnfcResourceInfo`` names its
  server (``computeResource.resourceId``) and the Heat stack holding it
  (``metadata.stack_id``: with Tacker's StandardUserData, the VDU's
  nested stack ``<VDU>-<index>``, where its ports and floating IPs are).
  A VNFC's role is the role whose ``ssh_cp_name`` that stack holds.
* **Which VMs an operation touches**: the grant request's
  ``removeResources`` (COMPUTE, by server id), as Tacker's infra driver
  uses them.  The stacks healed by ``heal_start`` reach ``heal_end``
  (where the servers have new ids) through
  ``user_script_err_handling_data``.
* **Calls**: v2 calls ``*_start`` and ``*_end`` of every operation, and
  a retry runs both again; ``scale_start`` of a scale-out and
  ``scale_end`` of a scale-in have nothing to do.  Rollbacks:
  ``instantiate_rollback_end`` releases what instantiate set up (as v1's
  ``terminate_end`` after a rollback), ``scale_rollback_end`` takes the
  workers of the rolled-back scale-out (their VMs are gone) out of
  Kubernetes, the inventory and HAProxy.
* **Kubernetes VIM**: the v1 VIM registry needs Tacker's database, which
  a v2 script does not have: the cluster's kubeconfig is written to
  ``[kubespray_mgmt] kubeconfig_dir`` instead (mode 0600), and deleted at
  terminate.
* **Configuration**: the script reads ``[kubespray_mgmt]`` from the
  config files named by ``KUBESPRAY_MGMT_CONFIG_FILES`` (comma
  separated), or else from oslo.config's default ``tacker.conf``
  locations.
"""

import contextlib
import datetime
import ipaddress
import json
import logging as std_logging
import os
import pickle
import sys
import time
import traceback
import types
import typing
import uuid

from mgmt_driver.adapters import v1
from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.common import safetext
from mgmt_driver.common import untrusted
from mgmt_driver.model import core
from mgmt_driver.model import nodes as nodes_mod
from mgmt_driver.operations import autoheal
from mgmt_driver.operations import gates
from mgmt_driver.operations import lcm
from mgmt_driver.operations import rolling
from mgmt_driver.operations import upgrade as upgrade_mod
from mgmt_driver.remote import heat
from mgmt_driver.state import healfleet
from mgmt_driver.state import records as records_mod
from mgmt_driver.state import registry
from mgmt_driver.state import sharedfiles
from mgmt_driver.state import statestore

LOG = safetext.logger(__name__)

#: The VNFD artifact key of the v2 script, and the script's package path.
ARTIFACT = 'mgmt-drivers-kubespray-v2'
SCRIPT = 'Scripts/kubespray_mgmt_v2.py'
#: The coordinate-VNF script's package path: both
#: ``lcm-operation-coordinate-new-vnf`` and ``-old-vnf`` name it.
COORDINATE_SCRIPT = 'Scripts/kubespray_coordinate_v2.py'
#: Environment variable naming the config files the script reads.
CONFIG_ENV = 'KUBESPRAY_MGMT_CONFIG_FILES'
#: Our key in ``user_script_err_handling_data``.
DATA_KEY = 'kubespray_mgmt'
#: The instance's (and a PATCH's) metadata field, as messages name it.
METADATA = 'metadata'
OPENSTACK_VIM_PREFIX = 'ETSINFV.OPENSTACK_KEYSTONE'
_ROLES = (core.ROLE_MASTER, core.ROLE_WORKER, core.ROLE_EXTERNAL_LB)

#: The package's templates: the scripts ``csar build`` copies.
_TEMPLATES = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'templates')


def script_path():
    """The installed script ``csar build`` packages as :data:`SCRIPT`."""
    return os.path.join(_TEMPLATES, 'kubespray_mgmt_v2.py')


def coordinate_script_path():
    """The installed script ``csar build`` packages as
    :data:`COORDINATE_SCRIPT`."""
    return os.path.join(_TEMPLATES, 'kubespray_coordinate_v2.py')


# ------------------------------------------------------------ parameters


class SpecStore:
    """The instantiate ``additionalParams`` of each v2 instance.

    :param directory: where ``<instance id>.json`` files live.
    """

    def __init__(self, directory):
        self.directory = directory

    @classmethod
    def from_conf(cls, conf=None):
        return cls(os.path.join(records_mod.default_directory(conf), 'v2'))

    def path(self, instance_id):
        """``<directory>/<instance id>.json``.

        :raises MgmtDriverParamInvalid: the id is not a safe file name
            (the rule of the driver's records).
        """
        return records_mod.RecordStore(self.directory).path(instance_id)

    def save(self, instance_id, additional_params):
        """Keep *additional_params* (mode 0600, replaced atomically)."""
        path = self.path(instance_id)
        sharedfiles.ensure_directory(path)
        sharedfiles.replace(path, json.dumps(additional_params,
                                             sort_keys=True))

    def load(self, instance_id):
        """The kept parameters, or None when there are none.

        :raises InstanceRecordInvalid: the file cannot be read.
        """
        path = self.path(instance_id)
        try:
            with open(path, encoding='utf-8') as f:
                data = untrusted.load_json(f.read())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise exceptions.InstanceRecordInvalid(
                path=path, instance=instance_id,
                reason=getattr(exc, 'strerror', None) or str(exc))
        if not isinstance(data, dict):
            raise exceptions.InstanceRecordInvalid(
                path=path, instance=instance_id, reason='not a mapping')
        return data

    def remove(self, instance_id):
        """Forget the parameters; absent is fine."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path(instance_id))


# ------------------------------------------------------------ v2 dicts


def _info(inst):
    return (inst or {}).get('instantiatedVnfInfo') or {}


def _vnfcs(inst):
    return _info(inst).get('vnfcResourceInfo') or []


def _removed_servers(grant_request):
    """Server ids of the grant request's COMPUTE ``removeResources``."""
    return [(r.get('resource') or {}).get('resourceId')
            for r in (grant_request or {}).get('removeResources') or []
            if r.get('type') == 'COMPUTE']


def _stack_of(vnfc, instance_id):
    stack = (vnfc.get('metadata') or {}).get('stack_id')
    if not stack:
        raise exceptions.MgmtDriverNotFound(
            param='vnfcResourceInfo %s metadata.stack_id (VNF instance %s)'
                  % (vnfc.get('id'), instance_id))
    return stack


def stacks_of_servers(inst, server_ids):
    """The Heat stacks of the VNFCs whose servers are *server_ids*."""
    wanted = set(server_ids)
    return sorted({_stack_of(v, inst.get('id')) for v in _vnfcs(inst)
                   if (v.get('computeResource') or {}).get('resourceId')
                   in wanted})


def healed_servers(inst, request, grant_request):
    """Server ids a heal request re-creates ([] for the whole VNF).

    :raises MgmtDriverNotFound: a ``vnfcInstanceId`` is not a VNFC of the
        instance.
    """
    vnfc_ids = request.get('vnfcInstanceId')
    if not vnfc_ids:
        return []
    removed = [s for s in _removed_servers(grant_request) if s]
    if removed:
        return removed
    # No grant request: the ids name vnfcInfo entries.
    infos = {i.get('id'): i.get('vnfcResourceInfoId')
             for i in _info(inst).get('vnfcInfo') or []}
    servers = {v.get('id'): (v.get('computeResource') or {}).get(
        'resourceId') for v in _vnfcs(inst)}
    missing = [v for v in vnfc_ids if infos.get(v) not in servers]
    if missing:
        raise exceptions.MgmtDriverNotFound(
            param='vnfcInstanceId %s (not a VNFC of VNF instance %s)'
                  % (', '.join(map(str, missing)), inst.get('id')))
    return [servers[infos[v]] for v in vnfc_ids]


def instance_view(inst, additional_params):
    """A v1-shaped view of a v2 instance for :class:`~v1.LcmHooks`.

    :param additional_params: the instantiate parameters that apply.
    """
    return types.SimpleNamespace(
        id=inst.get('id'), vnfd_id=inst.get('vnfdId'),
        vim_connection_info=[], v2=inst,
        vnf_metadata=dict(inst.get('metadata') or {}),
        instantiated_vnf_info=types.SimpleNamespace(
            additional_params=additional_params,
            flavour_id=_info(inst).get('flavourId'),
            vnfc_resource_info=[]))


def request_view(req, **extra):
    """A v1-shaped view of a v2 request (``additionalParams``, ``type``,
    ``vnfcInstanceId``) plus *extra* attributes."""
    req = req or {}
    return types.SimpleNamespace(
        additional_params=dict(req.get('additionalParams') or {}),
        type=req.get('type'),
        vnfc_instance_id=list(req.get('vnfcInstanceId') or []), **extra)


# ------------------------------------------------------------ Heat


class V2NodeFinder:
    """The VMs of a v2 instance, their addresses read from Heat.

    :param heat: an object with the v2 ``HeatClient`` method
        ``get_resource_info(stack_id, name)`` (a resource dict, or None
        when Heat does not have it).
    """

    def __init__(self, heat):
        self._heat = heat

    def _resource(self, stack_id, name):
        try:
            return self._heat.get_resource_info(stack_id, name)
        except Exception as exc:  # an HTTP or auth error
            raise exceptions.MgmtDriverOtherError(
                error_message='Heat lookup of %s in stack %s failed: %s'
                              % (name, stack_id, type(exc).__name__))

    @staticmethod
    def _address(resource):
        # Heat's answer is checked like any remote data: a shape other
        # than Neutron's, or a value that is no IP address, gives no
        # address (the caller names the field).
        attributes = resource.get('attributes') \
            if isinstance(resource, dict) else None
        if not isinstance(attributes, dict):
            return None
        if attributes.get('floating_ip_address') is not None:
            return _ip_or_none(attributes['floating_ip_address'])
        fixed = attributes.get('fixed_ips')
        first = fixed[0] if isinstance(fixed, list) and fixed else None
        address = first.get('ip_address') if isinstance(first, dict) \
            else None
        return _ip_or_none(address)

    def _role_of(self, stack_id, spec):
        """The :class:`_VmKind` whose ``ssh_cp_name`` *stack_id* holds,
        and that resource; ``(None, None)`` if none."""
        for kind in _vm_kinds(spec):
            resource = self._resource(stack_id, kind.ssh_cp_name) \
                if kind.ssh_cp_name else None
            if resource is not None:
                return kind, resource
        return None, None

    def vm(self, vnfc, spec, instance_id):
        """One VNFC as a ``heat.VmRecord`` (None: its stack has no CP of
        any role, or the VM is gone)."""
        stack_id = _stack_of(vnfc, instance_id)
        kind, ssh_res = self._role_of(stack_id, spec)
        if kind is None:
            LOG.warning('VNF instance %s: VNFC %s left out: Heat stack %s '
                        'has none of the ssh_cp_name resources (the VM is '
                        'gone, or the parameters name other CPs)',
                        instance_id, vnfc.get('id'), stack_id)
            return None
        ssh_ip = self._address(ssh_res)
        nic_cp = kind.nic_cp_name
        nic_res = self._resource(stack_id, nic_cp) if nic_cp else ssh_res
        nic_ip = self._address(nic_res) if nic_res else None
        if not ssh_ip or not nic_ip:
            raise exceptions.MgmtDriverNotFound(
                param='%s.%s (no IP address in Heat stack %s)' % (
                    kind.section, 'ssh_cp_name' if not ssh_ip
                    else 'nic_cp_name', stack_id))
        return heat.VmRecord(
            address=core.NodeAddress(role=kind.role, ssh_ip=ssh_ip,
                                     nic_ip=nic_ip,
                                     source='heat:%s' % stack_id,
                                     pool=kind.pool),
            server_id=(vnfc.get('computeResource') or {}).get('resourceId'),
            stack_id=stack_id, member_name=None)

    def cluster_vms(self, inst, spec):
        """Every VM of *inst*, masters in creation order."""
        vnfcs = sorted(_vnfcs(inst), key=lambda v: (
            str((v.get('metadata') or {}).get('creation_time') or ''),
            str(v.get('id'))))
        found = [self.vm(v, spec, inst.get('id')) for v in vnfcs]
        return [r for r in found if r is not None]


def _ip_or_none(value):
    try:
        return str(ipaddress.ip_address(value)) if isinstance(value, str) \
            else None
    except ValueError:
        return None


class _VmKind(typing.NamedTuple):
    """What a VNFC's Heat stack can be: a VM of *role*, in *pool* or not,
    told by its ``ssh_cp_name``; *section* is where the names are."""

    role: str
    pool: str | None
    ssh_cp_name: str | None
    nic_cp_name: str | None
    section: str


def _vm_kinds(spec):
    """Masters, workers, gateways, then each aspect pool's workers (a
    pool's CP names are its own: :mod:`mgmt_driver.model.params` refuses one
    that a role or another pool has)."""
    kinds = []
    for role in _ROLES:
        group = {core.ROLE_MASTER: spec.master,
                 core.ROLE_WORKER: spec.worker,
                 core.ROLE_EXTERNAL_LB: spec.external_lb}[role]
        kinds.append(_VmKind(role, None, group.ssh_cp_name,
                             group.nic_cp_name, heat.section_path(role)))
    for pool in spec.node_pools:
        if pool.ssh_cp_name:
            kinds.append(_VmKind(core.ROLE_WORKER, pool.name,
                                 pool.ssh_cp_name, pool.nic_cp_name,
                                 heat.section_path(core.ROLE_WORKER,
                                                   pool.name)))
    return kinds


def tacker_heat_client(inst):
    """Tacker v2's own Heat client for the instance's OpenStack VIM."""
    from tacker.sol_refactored import objects
    from tacker.sol_refactored.infra_drivers.openstack import heat_utils
    objects.register_all()
    vim = openstack_vim(inst)
    return heat.VimHeat(heat_utils.HeatClient(
        objects.VimConnectionInfo.from_dict(vim)), vim_urls(vim))


def openstack_vim(inst):
    """The instance's OpenStack ``vimConnectionInfo`` entry (as Tacker
    keeps it: from the request inline, from its VIM registry, or merged
    from a PATCH).

    :raises MgmtDriverNotFound: the instance has none.
    """
    infos = (inst.get('vimConnectionInfo') or {}).values()
    vim = next((v for v in infos if str(v.get('vimType', '')).startswith(
        OPENSTACK_VIM_PREFIX)), None)
    if vim is None:
        raise exceptions.MgmtDriverNotFound(
            param='vimConnectionInfo (no OpenStack VIM in VNF instance %s)'
                  % inst.get('id'))
    return vim


#: The ``interfaceInfo`` keys naming a URL Tacker v2's Heat client may
#: use: Keystone's (``endpoint``), or with OAuth2 mTLS Heat's own and the
#: token endpoint.
_VIM_URL_KEYS = ('endpoint', 'heatEndpoint', 'tokenEndpoint')


def vim_urls(vim):
    """The URLs of one v2 ``vimConnectionInfo`` entry that Tacker's Heat
    client may use: each of them must be the operator's for its Heat to
    vouch (:func:`mgmt_driver.remote.trust.vim_vouches`).  Whether the entry
    came from Tacker's VIM registry or inline from the tenant's request or
    PATCH, the URL is what is reached."""
    interface = vim.get('interfaceInfo') if isinstance(vim, dict) else None
    if not isinstance(interface, dict):
        return ()
    return tuple(interface[key] for key in _VIM_URL_KEYS
                 if interface.get(key) is not None)


# ------------------------------------------------------------ registry


class KubeconfigVims:
    """:class:`~registry.KubeconfigRegistry` behind the v1 VIM registry's
    calls (which take a context and the instance first)."""

    def __init__(self, directory):
        self._files = registry.KubeconfigRegistry(directory)

    def check_free(self, context, name, owned_id=None):
        self._files.check_free(name, owned_id)

    def register(self, context, vnf_instance, access, owned_id=None):
        return self._files.register(access, owned_id)

    def unregister(self, context, vnf_instance, vim_id):
        return self._files.unregister(vim_id)


# ------------------------------------------------------------ hooks


class V2Hooks(v1.LcmHooks):
    """:class:`~v1.LcmHooks` over v2's instance layout.

    Takes the same arguments; *heat_factory* is ``(inst dict)`` -> a v2
    ``HeatClient`` (default: :func:`tacker_heat_client`).
    """

    def __init__(self, conf=None, heat_factory=None, **kwargs):
        conf = conf or kconf.CONF
        kwargs.setdefault('vim_registry', KubeconfigVims(os.path.expanduser(
            conf.kubespray_mgmt.kubeconfig_dir)))
        super().__init__(conf, **kwargs)
        self._v2_heat = heat_factory or tacker_heat_client
        #: What this script call learnt for its ClusterDriver
        #: (mgmt_driver.operations.autoheal): each node's identity labels (from
        #: the instance, by :meth:`_vms`), and the nodes an automatic heal
        #: found not Ready (by :meth:`_check_automatic`), known dead.
        self._node_identity = None
        self._known_dead = frozenset()
        #: Wall clock of the fleet's leases and observations.
        self.clock = time.time

    def _vms(self, context, vnf_instance, request, spec):
        if spec.nodes is not None:
            return super()._vms(context, vnf_instance, request, spec)
        inst = vnf_instance.v2
        client = self._v2_heat(inst)
        records = V2NodeFinder(client).cluster_vms(inst, spec)
        self._check_vouched(spec, records, client)
        cluster = nodes_mod.build_nodes(
            spec, [r.address for r in records],
            path='VNF instance %s' % inst.get('id'))
        by_name = {nodes_mod.node_name(r.address.role, r.address.nic_ip): r
                   for r in records}
        # Each node's VNF instance and VNFC, as Tacker's auto-heal alerts
        # name them: labelled at every inventory write (_driver).
        names = set(cluster.names)
        self._node_identity = autoheal.identity_of(inst, {
            name: r.server_id for name, r in by_name.items()
            if name in names})
        return cluster, by_name

    def _driver(self, context, vnf_instance, spec, pool, operation,
                *args, **kwargs):
        drv = super()._driver(context, vnf_instance, spec, pool, operation,
                              *args, **kwargs)
        drv.node_identity = self._node_identity
        drv.known_dead = self._known_dead
        return drv

    def heal_start(self, context, vnf_instance, request, grant,
                   grant_request, **kwargs):
        """As v1's; an automatic heal (:func:`mgmt_driver.operations.autoheal.
        is_automatic`) passes the guard rails first, the fleet's
        (:mod:`mgmt_driver.state.healfleet`) and its cluster's; the place
        it takes in flight is given back if this hook fails."""
        automatic = getattr(request, 'automatic', False)
        if automatic:
            self._check_automatic(context, vnf_instance, request)
        try:
            super().heal_start(context, vnf_instance, request, grant,
                               grant_request, **kwargs)
        except BaseException:
            if automatic:
                self._fleet_release(vnf_instance)
            raise

    def heal_end(self, context, vnf_instance, request, grant,
                 grant_request, **kwargs):
        """As v1's; the heal's place in flight, if it holds one, is
        renewed while it runs and released when it ends (succeeded or
        failed)."""
        self._fleet_quietly(healfleet.renew, vnf_instance,
                            healfleet.limits(self.conf), self.clock())
        try:
            super().heal_end(context, vnf_instance, request, grant,
                             grant_request, **kwargs)
        finally:
            self._fleet_release(vnf_instance)

    def _check_automatic(self, context, vnf_instance, request):
        """The fleet's rules (:func:`mgmt_driver.state.healfleet.admit`),
        then :func:`mgmt_driver.operations.autoheal.check_heal`, over
        Kubernetes' node list, before any change."""
        spec = self._spec(context, vnf_instance, request, 'heal')
        cluster, records = self._vms(context, vnf_instance, request, spec)
        healed = self._healed(vnf_instance, request, records)
        with self._pool_factory() as pool:
            drv = self._driver(context, vnf_instance, spec, pool,
                               'heal_start')
            drv.step('automatic heal of %s: checking the guard rails',
                     ', '.join(healed) or 'no node')
            nodes = drv.kubectl_client(cluster).nodes()
        ready = gates.readiness(nodes)
        self._fleet_admit(vnf_instance, spec.ansible.ip_address, cluster,
                          ready)
        limit = self.conf[kconf.GROUP].auto_heal_max_unhealthy_percent
        try:
            autoheal.check_heal(cluster, ready, healed, limit)
        except autoheal.AutoHealRefused:
            self._fleet_release(vnf_instance)
            raise
        # Checked: every node healed is not Ready.  Its removal
        # (gates.undrained) drains none of them, whatever the
        # readiness read then says: the VMs are re-created anyway.
        self._known_dead = frozenset(healed)

    def _fleet_path(self):
        return healfleet.path_in(self._store().directory)

    def _fleet_admit(self, vnf_instance, server, cluster, ready):
        observed = (len(cluster.names),
                    sum(1 for n in cluster.names if ready.get(n) != 'True'))
        refused = healfleet.admit(
            self._fleet_path(), healfleet.fleet_nodes(self._store()),
            vnf_instance.id, observed, server, healfleet.limits(self.conf),
            self.clock())
        if refused is not None:
            raise autoheal.refusal(*refused)

    def _fleet_release(self, vnf_instance):
        self._fleet_quietly(healfleet.release, vnf_instance)

    def _fleet_quietly(self, change, vnf_instance, *args):
        """Renew or release the instance's place in flight; a failure
        never fails the heal."""
        try:
            change(self._fleet_path(), vnf_instance.id, *args)
        except (OSError, exceptions.StateStoreUnusable) as exc:
            # INFO: under v2 a warning reaches the tenant; the lease
            # expires anyway ([kubespray_mgmt] auto_heal_lease).
            LOG.info('VNF instance %s: its automatic heal\'s place in '
                     'flight is not updated (it expires): %s',
                     vnf_instance.id, exc)

    def _resolve_vip(self, context, vnf_instance, request, spec):
        # v2's stacks are laid out per VM; no VIP port is looked up there.
        raise exceptions.ParamsInvalid([
            '%s.external_lb_param.vip_cp_name: not supported with Tacker '
            'v2; give the address as external_lb_param.vip' % core.ROOT])

    def instantiate_end(self, context, vnf_instance, request, grant,
                        grant_request, keep=None, **kwargs):
        """As v1's, calling *keep* once the parameters are valid and
        before any remote work."""
        spec = self._spec(context, vnf_instance, request, 'instantiate')
        # v2's VIM is a kubeconfig file named after it: refused now, not
        # when the file is written after the whole instantiate.
        registry.check_file_name(self._vim_name(spec, vnf_instance))
        if keep is not None:
            keep()
        self._instantiate(context, vnf_instance, request, spec)

    def _healed(self, vnf_instance, request, records):
        stacks = set(request.healed_stacks)
        return [name for name, r in records.items()
                if r is not None and r.stack_id in stacks]

    def rolling(self, vnf_instance, hook, body):
        """One hook of a rolling replacement
        (:mod:`mgmt_driver.operations.rolling`) under the instance's state
        lock: *body* is called with ``(drv, cluster, {name: VmRecord}, vim
        name, vims)``.

        The spec is the kept one: the request's ``additionalParams``
        are Tacker's (``vdu_params``...), not the driver's.
        """
        request = request_view({})
        with statestore.guard(self.conf, self._store(), vnf_instance, hook,
                              request):
            spec = self._spec(None, vnf_instance, request, 'heal')
            self._need_heat(spec, 'a rolling replacement')
            cluster, records = self._vms(None, vnf_instance, request, spec)
            with self._pool_factory() as pool:
                return body(self._driver(None, vnf_instance, spec, pool,
                                         hook, request, cluster, records),
                            cluster, records,
                            self._vim_name(spec, vnf_instance),
                            self._vims(None, vnf_instance))

    def scale_rollback_end(self, context, vnf_instance, request):
        """A rolled-back scale-out: its VMs are gone; take what is left of
        them out of Kubernetes
        (:meth:`~mgmt_driver.operations.membership.reconcile`), the inventory
        and HAProxy."""
        spec = self._spec(context, vnf_instance, request, 'scale')
        cluster, _ = self._vms(context, vnf_instance, request, spec)
        with self._pool_factory() as pool:
            lcm.scale_out_rollback(
                self._driver(context, vnf_instance, spec, pool,
                             'scale_rollback_end'), cluster)


class Operation:
    """One script call: the v2 input, mapped for :class:`V2Hooks`.

    :param data: the unpickled input dict.
    :param hooks: a :class:`V2Hooks`.
    :param store: a :class:`SpecStore`.
    """

    def __init__(self, data, hooks, store):
        self.name = data.get('operation')
        self.req = data.get('request') or {}
        self.inst = data.get('vnf_instance') or {}
        self.grant_request = data.get('grant_request')
        self.csar_dir = data.get('tmp_csar_dir')
        self.carried = dict((data.get('user_script_err_handling_data') or
                             {}).get(DATA_KEY) or {})
        self.hooks = hooks
        self.store = store
        self.output = {}

    @property
    def instance_id(self):
        return self.inst.get('id')

    def _stored(self):
        kept = self.store.load(self.instance_id)
        if kept is None:
            raise self._missing()
        return kept

    def _missing(self):
        return statestore.missing_state(
            self.instance_id, self.name,
            'the instantiate parameters kept for Tacker v2',
            self.store.path(self.instance_id))

    def _kept_or_released(self):
        """The kept parameters; None when terminate already released
        the instance (a retry); refused when this store lacks them."""
        kept = self.store.load(self.instance_id)
        if kept is None and self.hooks._store().state(
                self.instance_id) != records_mod.RELEASED:
            raise self._missing()
        return kept

    def _view(self, kept=None):
        return instance_view(self.inst, self._stored() if kept is None
                             else kept)

    def _carry(self, **values):
        self.carried.update(values)
        self.output['user_script_err_handling_data'] = {
            DATA_KEY: dict(self.carried)}

    # Operations.

    def instantiate_end(self):
        additional = self.req.get('additionalParams') or {}
        # Kept before any remote work: the rollback and a retry find it.
        self.hooks.instantiate_end(
            None, instance_view(self.inst, {}), request_view(self.req),
            None, None,
            keep=lambda: self.store.save(self.instance_id, additional))

    def instantiate_rollback_end(self):
        kept = self.store.load(self.instance_id)
        if kept is None:
            kept = self.req.get('additionalParams') or {}
        # As v1's rollback: no request (what instantiate left may be
        # nothing at all, so no record is needed).
        self._release(instance_view(self.inst, kept), None)

    def terminate_start(self):
        kept = self._kept_or_released()
        if kept is not None:
            self.hooks.terminate_start(None, self._view(kept),
                                       request_view(self.req), None, None)

    def terminate_end(self):
        self._release(instance_view(self.inst,
                                    self._kept_or_released() or {}),
                      request_view({}))

    def _release(self, view, request):
        # The v1 hook without terminate request parameters.
        self.hooks.terminate_end(None, view, request, None, None)
        self.store.remove(self.instance_id)

    def scale_start(self):
        if self.req.get('type') != 'SCALE_IN':
            return  # a scale-out: its VMs do not exist yet
        victims = stacks_of_servers(self.inst, _removed_servers(
            self.grant_request))
        self.hooks.scale_start(None, self._view(), request_view(self.req),
                               None, None, scale_out_id_list=victims)

    def scale_end(self):
        if self.req.get('type') != 'SCALE_OUT':
            return  # a scale-in: scale_start removed the workers
        self.hooks.scale_end(None, self._view(), request_view(self.req),
                             None, None)

    def scale_rollback_end(self):
        self.hooks.scale_rollback_end(None, self._view(),
                                      request_view(self.req))

    def heal_start(self):
        stacks = stacks_of_servers(self.inst, healed_servers(
            self.inst, self.req, self.grant_request))
        self._carry(healed_stacks=stacks)
        self.hooks.heal_start(None, self._view(), request_view(
            self.req, healed_stacks=stacks,
            automatic=autoheal.is_automatic(self.req)), None, None)

    def heal_end(self):
        request = request_view(self.req, healed_stacks=list(
            self.carried.get('healed_stacks') or []))
        self.hooks.heal_end(None, self._view(), request, None, None)

    # Rolling replacement (Change current VNF package).

    def _progress_store(self):
        return SpecStore(os.path.join(self.store.directory, 'rolling'))

    def _load_progress(self, operation_id):
        """The record of operation *operation_id*, or None (none, or
        another operation's, which this one replaces)."""
        store = self._progress_store()
        data = store.load(self.instance_id)
        if data is None or data.get('operation') != operation_id:
            return None
        return rolling.Progress.from_dict(data, store.path(self.instance_id))

    def _save_progress(self, progress):
        self._progress_store().save(self.instance_id, progress.to_dict())

    def _rolling_order(self, records):
        """The replaced VNFCs as :class:`rolling.Step`, in the order
        Tacker replaces them (``vnfcResourceInfo`` order)."""
        removed = set(_removed_servers(self.grant_request))
        names = {r.server_id: (name, r.address.role)
                 for name, r in records.items() if r is not None}
        steps = []
        for vnfc in _vnfcs(self.inst):
            server = (vnfc.get('computeResource') or {}).get('resourceId')
            if server not in removed:
                continue
            if server not in names:
                raise exceptions.MgmtDriverNotFound(
                    param='the node of VNFC %s (server %s: no role\'s '
                          'ssh_cp_name in its Heat stack)'
                          % (vnfc.get('id'), server))
            steps.append(rolling.Step(str(vnfc.get('id')), *names[server]))
        return steps

    def _rolling_start(self, direction):
        operation_id = (self.grant_request or {}).get('vnfLcmOpOccId')

        def body(drv, cluster, records, vim_name, vims):
            progress = self._load_progress(operation_id) or \
                rolling.Progress(operation_id, self._rolling_order(records))
            problems = rolling.check_plan(
                [n.name for n in cluster.masters], progress.order)
            if problems:
                gates.refuse('the plan (nothing was changed)', problems,
                             'Replace these VNFCs another way (heal).')
            if direction == rolling.ROLLBACK:
                # Back first, so that one node at a time holds: the
                # rollback takes it out again when its turn comes.
                for node in progress.nodes(rolling.OUT):
                    rolling.bring_back(drv, cluster, progress, node,
                                       self._save_progress, vim_name, vims)
                    progress.set(node, rolling.REPLACED)
            progress.direction = direction
            self._save_progress(progress)
            if progress.order:
                rolling.take_out(drv, cluster, progress,
                                 progress.order[0].node,
                                 self._save_progress)
        self.hooks.rolling(self._view(), self.name, body)

    def _rolling_end(self, wanted):
        operation_id = (self.grant_request or {}).get('vnfLcmOpOccId')

        def body(drv, cluster, records, vim_name, vims):
            progress = self._load_progress(operation_id)
            if progress is None:
                return
            left = [s.node for s in progress.order
                    if progress.state(s.node) != wanted]
            if left:
                gates.refuse('the end of the rolling replacement', [
                    'not done: %s' % ', '.join(left)], progress.summary())
            self._progress_store().remove(self.instance_id)
        self.hooks.rolling(self._view(), self.name, body)

    def change_current_package_start(self):
        self._rolling_start(rolling.FORWARD)

    def change_current_package_end(self):
        self._rolling_end(rolling.REPLACED)

    def change_current_package_rollback_start(self):
        self._rolling_start(rolling.ROLLBACK)

    def change_current_package_rollback_end(self):
        self._rolling_end(rolling.PENDING)

    def coordinate_vnf(self):
        """The coordinate-VNF script's call after Tacker replaced one
        VNFC's VM: bring it back, take the next one out."""
        param = self.req
        operation_id = (param.get('LcmCoordRequest') or {}).get(
            'vnfLcmOpOccId')
        direction = rolling.ROLLBACK if param.get('is_rollback') \
            else rolling.FORWARD
        vnfc_id = {i.get('id'): i.get('vnfcResourceInfoId') for i in
                   _info(self.inst).get('vnfcInfo') or []}.get(
            param.get('vnfc_info_id'))

        def body(drv, cluster, records, vim_name, vims):
            progress = self._load_progress(operation_id)
            if progress is None or progress.direction != direction:
                raise exceptions.MgmtDriverNotFound(
                    param='the rolling replacement record of operation %s '
                          '(%s): the VNFD must run the driver\'s script '
                          'for change_current_package_start and '
                          'change_current_package_rollback_start'
                          % (operation_id, direction))
            step = progress.step_of_vnfc(vnfc_id)
            rolling.bring_back(drv, cluster, progress, step.node,
                               self._save_progress, vim_name, vims)
            following = progress.after(step.node)
            if following is not None:
                rolling.take_out(drv, cluster, progress, following.node,
                                 self._save_progress)
        self.hooks.rolling(self._view(), self.name, body)

    def modify_information_end(self):
        """A PATCH whose metadata names ``kube_version`` upgrades the
        cluster, one with the ``relabel_*`` keys relabels nodes (v1's
        hook, its messages naming ``metadata``).  Tacker v2
        merged the request's metadata into the instance before this call
        and saves the instance only if it succeeds; a failure is retried
        whole."""
        if not self.inst.get('instantiatedVnfInfo'):
            return self.nothing()
        wanted = upgrade_mod.check_metadata(self.inst.get('metadata') or {},
                                            METADATA)
        if wanted.empty:
            return self.nothing()
        self.hooks.modify_information_end(
            None, self._view(), request_view(self.req), None, None,
            metadata_field=METADATA)

    def nothing(self):
        LOG.info('%s: nothing to do for VNF instance %s', self.name,
                 self.instance_id)

    def run(self):
        """Run the operation holding the instance's state lock, on the
        shared store (:mod:`mgmt_driver.state.statestore`).

        :returns: the output dict for Tacker.
        """
        method = getattr(self, OPERATIONS.get(self.name, 'nothing'))
        if method == self.nothing:
            method()
            return self.output
        conf = self.hooks.conf
        statestore.check_identity(conf)
        with statestore.instance_lock(
                self.hooks._store(), self.instance_id, self.name,
                conf[kconf.GROUP].state_lock_wait):
            method()
        return self.output


#: v2 script operation -> :class:`Operation` method.  Others (the
#: ``*_start`` hooks of instantiate, of modify and of the other
#: rollbacks, change_ext_conn) have nothing to do.  ``coordinate_vnf``
#: is no Tacker hook: :func:`coordinate_main` calls it.
OPERATIONS = {name: name for name in (
    'instantiate_end', 'instantiate_rollback_end', 'terminate_start',
    'terminate_end', 'scale_start', 'scale_end', 'scale_rollback_end',
    'heal_start', 'heal_end', 'modify_information_end',
    'change_current_package_start', 'change_current_package_end',
    'change_current_package_rollback_start',
    'change_current_package_rollback_end', 'coordinate_vnf')}


def run(data, conf=None, **hook_options):
    """Run one v2 script call.

    :param data: the unpickled input dict.
    :param hook_options: passed to :class:`V2Hooks` (tests inject fakes).
    :returns: the output dict (may be empty).
    """
    return operation(data, conf, **hook_options).run()


def operation(data, conf=None, spec_store=None, **hook_options):
    """The :class:`Operation` of one v2 script call."""
    conf = conf or kconf.CONF
    csar_dir = data.get('tmp_csar_dir')
    hook_options.setdefault('package_dir_of', lambda context, inst: csar_dir)
    return Operation(data, V2Hooks(conf, **hook_options),
                     spec_store or SpecStore.from_conf(conf))


# ------------------------------------------------------------ the script


def load_conf(conf=None, environ=None):
    """Read ``[kubespray_mgmt]`` (see the module docstring)."""
    conf = conf or kconf.CONF
    files = [f for f in (environ or os.environ).get(CONFIG_ENV, '').split(
        ',') if f.strip()]
    conf([], project='tacker', default_config_files=files or None)
    return conf


@contextlib.contextmanager
def stdout_reserved():
    """Send everything written to stdout (fd 1) to stderr meanwhile.

    :returns: a binary stream of the real stdout, for the result only.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    real_stdout, sys.stdout = sys.stdout, sys.stderr
    try:
        with os.fdopen(os.dup(saved), 'wb') as result:
            yield result
    finally:
        # What a handler kept the old sys.stdout for buffered goes to
        # stderr too, before fd 1 is the real stdout again.
        real_stdout.flush()
        sys.stdout = real_stdout
        os.dup2(saved, 1)
        os.close(saved)


#: Where, in the v2 records directory, the script writes the details of
#: a failure that is not one of the driver's own errors; the file is
#: renamed ``.1`` (the older one dropped) once past ERROR_LOG_BYTES.
ERROR_LOG = 'errors.log'
ERROR_LOG_BYTES = 1024 * 1024


def main(stdin=None, read=pickle.load):
    """The script's body: pickle in, pickle out, exit status.

    :param read: turns the input stream into the operation's dict.
    :returns: 0, or 1 after writing the reason to stderr (see
        :func:`failure_line`).
    """
    stdin = stdin or sys.stdin.buffer
    with stdout_reserved() as result:
        _log_warnings_to_stderr()
        name, call, status = '(unknown operation)', None, 0
        try:
            data = read(stdin)
            name = data.get('operation', name)
            load_conf()
            call = operation(data)
            call.run()
        except Exception as exc:  # reported to Tacker through stderr
            sys.stderr.write(failure_line(name, exc) + '\n')
            sys.stderr.flush()
            status = 1
        if call is not None:
            # Also after a failure: Tacker keeps the carried data for the
            # retry or rollback.
            result.write(pickle.dumps(call.output))
    return status


def coordinate_main(stdin=None):
    """The coordinate-VNF script's body (:data:`COORDINATE_SCRIPT`):
    as :func:`main`, its input Tacker's ``vnfc_param`` (see
    :func:`coordinate_input`).

    :returns: 0, or 1 after writing the reason to stderr.
    """
    return main(stdin, read=coordinate_input)


def coordinate_input(stdin):
    """The :class:`Operation` input of a coordinate-VNF script call.

    Tacker 16 (``openstack.py`` ``_execute_coordinate_vnf_script``)
    pickles the request's ``vdu_params`` entry of the VNFC (its
    ``new_vnfc_param`` or ``old_vnfc_param``) with ``ssh_ip``,
    ``is_rollback``, ``vnfc_info_id``, ``LcmCoordRequest`` and the
    instance (``inst``); the login it carries is not used (the kept
    parameters say how to reach each node) and goes no further.

    :raises MgmtDriverParamInvalid: the input is not such a mapping.
    """
    param = pickle.load(stdin)
    if not isinstance(param, dict) or not isinstance(param.get('inst'),
                                                     dict):
        raise exceptions.MgmtDriverParamInvalid(
            param='coordinate-VNF input (no inst mapping)')
    return {'operation': 'coordinate_vnf', 'vnf_instance': param['inst'],
            'request': {key: param.get(key) for key in (
                'LcmCoordRequest', 'is_rollback', 'vnfc_info_id')}}


def _log_warnings_to_stderr():
    """Warnings on stderr (Tacker shows it when the script fails),
    escaped, unless a handler is already set."""
    root = std_logging.getLogger()
    if not root.handlers:
        root.addHandler(safetext.EscapingHandler(
            lambda text: print(text, file=sys.stderr, flush=True),
            std_logging.WARNING, '%(levelname)s:%(name)s:%(message)s'))


def failure_line(name, exc):
    """The one line Tacker shows the tenant for the failure *exc* of
    operation *name*.

    Only the driver's own errors say what failed: any other exception
    (a parse error quoting a line of tacker.conf, an OSError naming a
    path of the conductor host, a bug) becomes a generic line with an
    error id, and its details go to :data:`ERROR_LOG` on the conductor
    host, which the tenant cannot read.  Tacker logs the script's
    stderr only at DEBUG, so a line there would not reach the operator
    either.
    """
    if exceptions.is_driver_error(exc):
        return 'kubespray-mgmt %s failed: %s' % (safetext.clip(name), exc)
    error_id = uuid.uuid4().hex[:12]
    kept = _keep_details(error_id, name)
    return ('kubespray-mgmt %s failed: an internal error of the driver '
            '(error id %s); %s' % (
                safetext.clip(name), error_id,
                'the operator finds its details under that id in the '
                'driver\'s v2 error log on the conductor host (%s in its '
                'records directory)' % ERROR_LOG if kept else
                'its details could not be kept; the operator can run '
                'the operation again with the conductor\'s log at DEBUG'))


def _keep_details(error_id, name):
    """Append the traceback of the exception being handled to the error
    log (mode 0600).  :returns: False when it cannot be written."""
    path = os.path.join(_v2_records_directory(), ERROR_LOG)
    try:
        sharedfiles.ensure_directory(path)
        if os.path.isfile(path) and os.path.getsize(path) > ERROR_LOG_BYTES:
            os.replace(path, path + '.1')
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT |
                     os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, 'a', encoding='utf-8') as log:
            log.write('%s error id %s, operation %s, pid %d:\n%s\n' % (
                datetime.datetime.now(datetime.timezone.utc).isoformat(),
                error_id, safetext.clip(name), os.getpid(),
                traceback.format_exc()))
        return True
    except OSError:
        return False


def _v2_records_directory():
    """The v2 records directory, also when the configuration could not
    be read (then its default beside the default known_hosts file)."""
    try:
        return SpecStore.from_conf().directory
    except Exception:  # the configuration failed to load
        group = {opt.dest: opt.default for opt in kconf.ALL_OPTS}
        return os.path.join(os.path.dirname(os.path.expanduser(
            group['known_hosts_file'])), 'records', 'v2')
