"""Tacker 16's real conductor over the local site, for test_conductor.

Real: ``Conductor.instantiate/terminate/heal/scale/rollback`` (error
points, retry and rollback paths, the ``coordination`` lock over a tooz
file backend), ``VnfLcmDriver`` whole (its ``DriverManager`` loading our
entry point, the SHA-256 check against the CSAR built by ``kubespray-mgmt
csar build``, VNFD parsing, hook selection), and in our driver
everything down to Tacker's ``HeatClient`` and ``NfvoPlugin``.

Faked, each at the smallest boundary we found (see :func:`tacker_seams`):

* the OpenStack infra driver (``FakeInfra``): Heat stack create, delete,
  scale, heal, and the VNFC lists it writes into ``instantiated_vnf_info``;
  it also changes the local site as re-created VMs would (empty LB, new
  host key, cluster gone with its VMs); with gateways (``GatewayVnf``,
  ``GatewayLab``) the HA-LB package's stack: an ``lb_instance`` group and
  the VIP port;
* ``HeatClient`` (the driver's Heat lookups) -> ``FakeHeat`` of the VNF;
* the database: ``save``/``create``/``get`` of Tacker's objects, the VIM
  lookup (``VimClient.get_vim``), the package lookups of ``vnflcm.utils``
  and the conductor's status, placement, grant and notification helpers;
  for a PATCH (``Conductor.update``), only the query that writes the
  instance's row: Tacker's own ``_update_vnf_instances`` merges the
  body into it (:class:`InstanceRows`);
* ``NfvoPlugin`` (VIM registration) -> :class:`FakeNfvo`;
* RPC notifications and the VNFM plugin's status updates (mocks).
"""

import copy
import json
import os
import pathlib
import shutil
import subprocess
import time
import types
import uuid
from unittest import mock

from mgmt_localsite import lab as lab_mod
from mgmt_localsite import site as site_mod

from mgmt_driver.model import core
from mgmt_driver.state import registry
from tests.functional import tacker_fakes

MASTER, WORKER, LB = (core.ROLE_MASTER, core.ROLE_WORKER,
                      core.ROLE_EXTERNAL_LB)
ASPECTS = {'master_instance': MASTER, 'worker_instance': WORKER,
           'lb_instance': LB}
VDUS = {MASTER: 'masterNode', WORKER: 'workerNode', LB: 'externalLB'}
#: The HA-LB package's VIP port (a top-stack resource).
VIP_CP = 'externalLB_VIP_CP'
KEEPALIVED = shutil.which('keepalived') or '/usr/sbin/keepalived'
OPENSTACK_VIM = 'c0ffee00-0000-4000-8000-00000000beef'
TENANT = 'conductor-test-project'


class FakeNfvo:
    """The NfvoPlugin methods the VIM registry calls (its database)."""

    def __init__(self):
        self.vims = {}

    def get_vims(self, context, filters=None):
        # Tacker's filters: {field: [accepted values]} (name or id here).
        return [v for v in self.vims.values()
                if all(v.get(field) in values
                       for field, values in (filters or {}).items())]

    def create_vim(self, context, vim):
        body = vim['vim']
        vim_id = str(uuid.uuid4())
        self.vims[vim_id] = {'id': vim_id, 'name': body['name'],
                             'auth_url': body['auth_url'], 'body': body}
        return self.vims[vim_id]

    def delete_vim(self, context, vim_id):
        del self.vims[vim_id]


class FakeInfra:
    """Tacker's OpenStack infra driver: Heat over :class:`TackerVnf`.

    :param lab: the started :class:`~mgmt_localsite.lab.Lab`.
    :param objects: ``tacker.objects``.
    """

    def __init__(self, lab, objects):
        self.lab = lab
        self.objects = objects
        self.vnf = None          # tacker_fakes.TackerVnf
        self.layout = None       # (masters, workers[, gateways])
        self.free_workers = []   # addresses for scale-out
        self.free_gateways = []  # addresses for a gateway scale-out
        self.calls = []

    # --- DriverManager's interface ------------------------------------

    def invoke(self, vim_type, method, **kwargs):
        self.calls.append(method)
        return getattr(self, method)(**kwargs)

    # --- instantiate / terminate --------------------------------------

    def pre_instantiation_vnf(self, **kwargs):
        return {}

    def instantiate_vnf(self, vnf_instance, instantiate_vnf_req, vnfd_dict,
                        **kwargs):
        extra = instantiate_vnf_req.additional_params
        if len(self.layout) == 3:  # gateways behind the lab's VIP
            self.vnf = GatewayVnf(extra, *self.layout, vip=self.lab.lb)
        else:
            self.vnf = tacker_fakes.TackerVnf(extra, *self.layout,
                                              self.lab.lb)
        self.vnf.id = vnf_instance.id
        info = vnf_instance.instantiated_vnf_info
        if info is None or not info.obj_attr_is_set('flavour_id'):
            info = vnf_instance.instantiated_vnf_info = \
                self.objects.InstantiatedVnfInfo(
                    flavour_id=instantiate_vnf_req.flavour_id,
                    scale_status=[])
        info.instance_id = vnfd_dict['instance_id'] = self.vnf.top
        info.additional_params = instantiate_vnf_req.additional_params
        self.lab.haproxy.start()  # a new LB VM: HAProxy not configured
        return self.vnf.top

    def create_wait(self, **kwargs):
        pass

    def post_vnf_instantiation(self, vnf_instance, **kwargs):
        self.write_vnfcs(vnf_instance)

    def delete(self, **kwargs):
        self.vnf.heat.stacks = {}
        self.vnf.vms = []
        self.lab.haproxy.stop()
        self._forget_cluster()

    def delete_wait(self, **kwargs):
        pass

    def _forget_cluster(self):
        """Every VM is gone: so are Kubernetes and the LB's files."""
        if self.lab.site.state() is not None:
            site_mod.forget_cluster(self.lab.site)
        kubeconfig = self.lab.sshd.home() / '.kube' / 'config'
        if kubeconfig.exists():
            kubeconfig.unlink()

    # --- scale --------------------------------------------------------

    def _group(self, aspect):
        return self.vnf.heat.stacks[self.vnf.top][aspect].physical_resource_id

    def _members(self, aspect):
        role = ASPECTS[aspect]
        return [vm for vm in self.vnf.vms if vm.role == role]

    def get_scale_ids(self, vnf_dict, **kwargs):
        return [vm.stack_id for vm in self._members(vnf_dict['policy_name'])]

    def get_scale_in_ids(self, vnf_dict, number_of_steps, **kwargs):
        aspect = vnf_dict['policy_name']
        members = self._members(aspect)
        victims = members[:number_of_steps]  # Heat's oldest first
        return ([vm.stack_id for vm in victims],
                [vm.member for vm in victims], self._group(aspect),
                len(members) - len(victims))

    def _free(self, role):
        return self.free_gateways if role == LB else self.free_workers

    def scale(self, policy, **kwargs):
        role = ASPECTS[policy['name']]
        if policy['action'] == 'out':
            self.vnf.add_vm(role, self._free(role).pop(0))
        else:
            victim = self._members(policy['name'])[0]
            self.vnf.remove_vm(victim)
            self._free(role).append(victim.address)
        return 'event-' + uuid.uuid4().hex[:6]

    def scale_wait(self, **kwargs):
        pass

    def scale_update_wait(self, **kwargs):
        pass

    def scale_resource_update(self, vnf_instance, **kwargs):
        self.write_vnfcs(vnf_instance)

    def get_rollback_ids(self, aspect_id, **kwargs):
        newest = self._members(aspect_id)[-1:]
        return ([vm.stack_id for vm in newest], [vm.member for vm in newest],
                self._group(aspect_id))

    def scale_in_reverse(self, scale_name_list, **kwargs):
        for vm in [vm for vm in self.vnf.vms if vm.member in scale_name_list]:
            self.vnf.remove_vm(vm)
            self._free(vm.role).append(vm.address)

    # --- heal ---------------------------------------------------------

    def heal_vnf(self, heal_vnf_request, **kwargs):
        for vm in self.vnf.vms:
            if vm.vnfc_id in heal_vnf_request.vnfc_instance_id:
                self.vnf.recreate_vm(vm)
                if vm.role == LB:
                    self.empty_lb(vm.address)
                # A VM whose sshd died answers again once re-created.
                sshd = getattr(self.lab, 'aside', {}).get(vm.address)
                if sshd is not None:
                    sshd.start()

    def empty_lb(self, address=None):
        """The LB VM (the gateway at *address*) comes back from its
        image: nothing configured, a new host key.  Gateways share the
        lab's one HAProxy and home: both start over."""
        self.lab.haproxy.start()
        kubeconfig = self.lab.sshd.home() / '.kube' / 'config'
        if kubeconfig.exists():
            kubeconfig.unlink()
        new_host_key(self.lab.root / 'known_hosts', address or self.lab.lb,
                     self.lab.root, getattr(self, 'records_dirs', ()))

    def heal_vnf_wait(self, **kwargs):
        pass

    def post_heal_vnf(self, vnf_instance, **kwargs):
        self.write_vnfcs(vnf_instance)

    # --- what Tacker records ------------------------------------------

    def write_vnfcs(self, vnf_instance):
        """``vnfc_resource_info`` as the real driver reads it from Heat."""
        info = vnf_instance.instantiated_vnf_info
        info.vnfc_resource_info = [self.objects.VnfcResourceInfo(
            id=vm.vnfc_id, vdu_id=VDUS[vm.role],
            compute_resource=self.objects.ResourceHandle(
                resource_id=vm.server_id,
                vim_level_resource_type=tacker_fakes.SERVER),
            vnfc_cp_info=[], storage_resource_ids=[])
            for vm in (self.vnf.vms if self.vnf else [])]


class GatewayVnf(tacker_fakes.TackerVnf):
    """The HA-LB package's stack: the gateways are members of the
    ``lb_instance`` scaling group (nested stacks like a worker's), the
    VIP a port of the top stack (``externalLB_VIP_CP``).

    :param gateways: the gateways' addresses (SSH and cluster).
    :param vip: the VIP port's address.
    """

    def __init__(self, additional_params, masters, workers, gateways, vip):
        self.vip = vip
        super().__init__(additional_params, masters, workers, gateways)

    def build(self, masters, workers, gateways):
        self.top = 'stack-' + uuid.uuid4().hex[:8]
        self.heat.stacks = {self.top: {VIP_CP: tacker_fakes._resource(
            VIP_CP, tacker_fakes.PORT, uuid.uuid4().hex,
            fixed_ips=[{'ip_address': self.vip}])}}
        self.vms = []
        for aspect in ASPECTS:
            group = 'group-' + uuid.uuid4().hex[:8]
            self.heat.stacks[group] = {}
            self.heat.stacks[self.top][aspect] = tacker_fakes._resource(
                aspect, tacker_fakes.GROUP, group)
        for role, addresses in ((MASTER, masters), (WORKER, workers),
                                (LB, gateways)):
            for address in addresses:
                self.add_vm(role, address)

    def _group(self, role):
        aspect = next(a for a, r in ASPECTS.items() if r == role)
        return self.heat.stacks[self.top][aspect].physical_resource_id


_RECORD_SCRIPT = """#!/bin/sh
# Local site: "record WHAT [FILE]" notes which gateway (the address its
# SSH session reached) did WHAT.  "record check FILE" keeps a copy of
# FILE and checks it with the real keepalived -t; keepalived not being
# root here refuses "script_user root", so the copy it checks names the
# session's user instead.
umask 077
gateway=$(printf '%%s' "$SSH_CONNECTION" | cut -d' ' -f3)
echo "$gateway $1" >>%(log)s
[ "$1" = check ] || exit 0
cp -- "$2" %(dir)s/"$gateway".conf
sed "s/^    script_user root$/    script_user $(id -un)/" "$2" \\
    >%(dir)s/"$gateway".check
exec %(keepalived)s -t -f %(dir)s/"$gateway".check
"""


class GatewayLab(lab_mod.Lab):
    """A local site whose LB is several gateways behind a VIP.

    The gateways are SSH addresses of the site's sshd, held by a veth
    interface it creates (``ip -o addr`` finds them there; keepalived
    refuses the loopback interface).  They share the site's one HAProxy,
    listening on the VIP (the lab's ``lb``), and its one file.
    keepalived is checked for real (``keepalived -t``, as the SSH user)
    but not run: its check, reload and stop commands go through a
    recorder that notes the gateway that ran them and keeps each
    gateway's checked file.

    :param gateways: every gateway address the cluster may use.
    :param link: the veth interface's name (its peer: ``<link>p``).
    """

    def __init__(self, ansible, vip, masters, workers, gateways,
                 link='kmgmt-gw'):
        super().__init__(ansible, vip, masters, workers)
        self.gateways = list(gateways)
        self.link = link
        self.link_up = False

    def _start_sshd(self, addresses):
        super()._start_sshd(addresses + self.gateways)

    def _start(self):
        self._add_link()
        super()._start()
        record = self.root / 'gateways'
        record.mkdir(mode=0o755)
        site_mod.chown(record, self.sshd.user)
        script = record / 'record'
        script.write_text(_RECORD_SCRIPT % {
            'log': record / 'calls.log', 'dir': record / 'checked',
            'keepalived': KEEPALIVED})
        script.chmod(0o755)
        (record / 'checked').mkdir(mode=0o755)
        site_mod.chown(record / 'checked', self.sshd.user)
        for name, value in (
                ('keepalived_config_path', str(record / 'keepalived.conf')),
                ('keepalived_check_command', '%s check' % script),
                ('keepalived_reload_command', '%s reload' % script),
                ('keepalived_stop_command', '%s stop' % script)):
            self.conf.set_override(name, value, group='kubespray_mgmt')
        self.additional_params = copy.deepcopy(self.additional_params)
        self.additional_params[core.ROOT]['external_lb_param'].update(
            aspect_id='lb_instance', vip_cp_name=VIP_CP, vrrp_router_id=51,
            vrrp_password='Gw:pass1')

    def _add_link(self):
        ip = ['ip']
        subprocess.run(ip + ['link', 'add', self.link, 'type', 'veth',
                             'peer', 'name', self.link + 'p'], check=True)
        self.link_up = True
        for address in self.gateways:
            subprocess.run(ip + ['addr', 'add', address + '/32', 'dev',
                                 self.link], check=True)
        for name in (self.link, self.link + 'p'):
            subprocess.run(ip + ['link', 'set', name, 'up'], check=True)

    def stop(self):
        super().stop()
        if self.link_up:
            subprocess.run(['ip', 'link', 'del', self.link], check=False)
            self.link_up = False

    def calls(self):
        """``[(gateway, what)]`` recorded, oldest first."""
        log = pathlib.Path(self.root) / 'gateways' / 'calls.log'
        if not log.exists():
            return []
        return [tuple(line.split(' ', 1))
                for line in log.read_text().splitlines()]

    def checked(self, gateway):
        """The keepalived file *gateway* last had checked, or None."""
        path = self.root / 'gateways' / 'checked' / (gateway + '.conf')
        return path.read_text() if path.exists() else None

    @staticmethod
    def unavailable():
        """Why the lab cannot run here (it creates an interface)."""
        if os.geteuid() != 0:
            return 'optional: gateways need root (a veth interface)'
        if not os.access(KEEPALIVED, os.X_OK):
            return 'optional: keepalived is not installed'
        return None


def new_host_key(known_hosts, address, scratch, records_dirs=()):
    """Record another host key for *address*, as a re-created VM has
    (and in the records that own its old one: ``site.swap_host_key``)."""
    key = scratch / ('hostkey-' + uuid.uuid4().hex[:6])
    subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-f',
                    str(key)], check=True)
    kind, blob = key.with_suffix('.pub').read_text().split()[:2]
    site_mod.swap_host_key(known_hosts, address, '%s %s' % (kind, blob),
                           records_dirs)


class HookLog:
    """Every hook Tacker's VnfLcmDriver invoked, with its duration."""

    def __init__(self):
        self.entries = []   # (scenario, driver, hook, seconds, outcome)
        self.scenario = None

    def wrap(self, manager):
        real = manager.invoke

        def invoke(type_, method_name, **kwargs):
            start = time.monotonic()
            outcome = 'ok'
            try:
                return real(type_, method_name, **kwargs)
            except Exception as exc:
                outcome = 'raised %s' % type(exc).__name__
                raise
            finally:
                self.entries.append((self.scenario, type_, method_name,
                                     time.monotonic() - start, outcome))
        return invoke

    def hooks(self, scenario):
        """``[(driver, hook, outcome)]`` of *scenario*."""
        return [(d, h, o) for s, d, h, _, o in self.entries if s == scenario]

    def table(self):
        lines = ['%-34s %-24s %-22s %8s  %s' % (
            'scenario', 'driver', 'hook', 'seconds', 'outcome')]
        for scenario, drv, hook, seconds, outcome in self.entries:
            lines.append('%-34s %-24s %-22s %8.2f  %s' % (
                scenario, drv, hook, seconds, outcome))
        return '\n'.join(lines)


def vim_record(region='RegionOne'):
    """What ``VimClient.get_vim`` returns for the default OpenStack VIM."""
    return {'vim_id': OPENSTACK_VIM, 'vim_name': 'openstack',
            'vim_type': 'openstack', 'tenant': TENANT,
            'vim_auth': {'auth_url': 'http://127.0.0.1:5000/v3',
                         'username': 'nfv', 'password': 'not-used'},
            'placement_attr': {'regions': [region]}, 'extra': {}}


def tacker_seams(patch, infra, nfvo, package_dir, package_id, ops):
    """Apply the fakes of the module docstring with *patch*
    (a ``pytest.MonkeyPatch``); *ops* records the op occurrences."""
    from tacker import objects
    from tacker.common import driver_manager
    from tacker.vnflcm import utils as vnflcm_utils
    from tacker.vnflcm import vnflcm_driver
    from tacker.vnfm import vim_client
    from tacker.vnfm.infra_drivers.openstack import heat_client

    patch.setattr(vim_client.VimClient, 'get_vim',
                  lambda self, context, vim_id=None, region_name=None:
                  copy.deepcopy(vim_record()))
    patch.setattr(vnflcm_utils, '_get_vnf_package_path',
                  lambda context, vnfd_id: package_dir[vnfd_id])
    patch.setattr(vnflcm_utils, '_get_vnf_package_id',
                  lambda context, vnfd_id: package_id)
    for cls in (objects.VnfInstance, objects.InstantiatedVnfInfo,
                objects.VnfLcmOpOcc):
        patch.setattr(cls, 'save', lambda self, *a, **k: None)
    patch.setattr(objects.VnfResourceList, 'get_by_vnf_instance_id',
                  classmethod(lambda cls, context, vnf_id: []))
    patch.setattr(objects.VnfInstance, 'get_by_id', classmethod(
        lambda cls, context, vnf_id: ops.instances[vnf_id]))
    # _scale_vnf builds a new infra DriverManager: hand it ours.
    real_manager = driver_manager.DriverManager
    patch.setattr(vnflcm_driver, 'driver_manager', types.SimpleNamespace(
        DriverManager=lambda namespace, names: infra
        if namespace == 'tacker.tacker.vnfm.drivers'
        else real_manager(namespace, names)))
    patch.setattr(heat_client, 'HeatClient',
                  lambda *args, **kwargs: infra.vnf.heat)
    patch.setattr(registry.TackerVimRegistry, '_nfvo', lambda self: nfvo)
    _patch_seams(patch, ops)


def _patch_seams(patch, ops):
    """The database under a v1 PATCH (``Conductor.update``)."""
    from tacker import objects
    from tacker.objects import vnf_instance

    # Tacker's merge without its transaction, writing through our rows
    # (a second world patches over the first: already unwrapped).
    merge = vnf_instance._update_vnf_instances
    patch.setattr(vnf_instance, '_update_vnf_instances',
                  getattr(merge, '__wrapped__', merge))
    patch.setattr(vnf_instance, 'api', InstanceRows(ops.instances))
    patch.setattr(objects.VnfLcmOpOcc, 'create', lambda self: None)
    patch.setattr(objects.VNF, 'save', lambda self: ops.vnf_status.update(
        {self.id: self.status}))


class InstanceRows:
    """``tacker.db.db_sqlalchemy.api`` as ``_update_vnf_instances`` uses
    it: ``model_query(context, VnfInstance).filter_by(id=).update(values)``
    sets *values* on the in-memory instance, as reading the row back
    would (the object's fields coerce them: ``vnf_metadata`` holds
    strings).  Any other query is an error: nothing else is modelled.

    :param instances: ``{id: VnfInstance}`` (:attr:`OpOccs.instances`).
    """

    def __init__(self, instances):
        self.instances = instances
        self.instance_id = None

    def model_query(self, context, model, *args, **kwargs):
        from tacker.db.db_sqlalchemy import models

        assert model is models.VnfInstance, model
        return self

    def filter_by(self, id):
        self.instance_id = id
        return self

    def update(self, values, synchronize_session=None):
        instance = self.instances[self.instance_id]
        for name, value in values.items():
            setattr(instance, name, value)


class OpOccs:
    """The op occurrences the conductor reports (its DB and RPC)."""

    def __init__(self):
        self.reports = []   # dicts of _send_lcm_op_occ_notification
        self.notifications = []  # send_notification's (a PATCH's)
        self.instances = {}
        self.vnf_status = {}   # VNF id -> status Tacker saved

    def last(self):
        return self.reports[-1]

    def result(self, occ_id):
        """The RESULT notification of op occurrence *occ_id*: what Tacker
        also saved in it (``operationState``, ``error``,
        ``changed_info``)."""
        [found] = [n for n in self.notifications
                   if n['vnfLcmOpOccId'] == occ_id and
                   n['notificationStatus'] == 'RESULT']
        return found


def conductor_without_db(patch, lcm_driver, infra, ops):
    """A ``Conductor`` built without its constructor (RPC, DB, periodic
    tasks), its database helpers replaced by recorders."""
    from tacker.conductor import conductor_server

    cls = conductor_server.Conductor
    conductor = object.__new__(cls)
    conductor.vnflcm_driver = lcm_driver
    conductor.vnf_manager = infra
    conductor.vnfm_plugin = mock.Mock()

    def noop(self, *args, **kwargs):
        return None

    for name in ('_instantiate_grant', '_terminate_grant', '_heal_grant',
                 '_scale_grant', '_change_vnf_status',
                 '_update_vnf_attributes', '_create_placement',
                 '_update_placement', '_delete_placement',
                 '_update_vnf_attributes_stack_param',
                 '_add_additional_vnf_info'):
        patch.setattr(cls, name, noop)

    def report(self, context, vnf_lcm_op_occs_id, operation_state,
               error=None, error_point=None, **kwargs):
        ops.reports.append({'id': vnf_lcm_op_occs_id,
                            'state': operation_state, 'error': error,
                            'error_point': error_point})
    patch.setattr(cls, '_send_lcm_op_occ_notification', report)
    patch.setattr(cls, 'send_notification',
                  lambda self, context, notification:
                  ops.notifications.append(copy.deepcopy(notification)))
    return conductor


def lcm_driver_without_db(mgmt_manager, infra, hook_log):
    """Tacker's ``VnfLcmDriver`` with its real mgmt-driver manager and
    hashes, our infra driver, and mocks for RPC and the VNFM plugin."""
    from tacker.vnflcm import vnflcm_driver

    driver = object.__new__(vnflcm_driver.VnfLcmDriver)
    driver._mgmt_manager = mgmt_manager
    driver._mgmt_manager.invoke = hook_log.wrap(mgmt_manager)
    driver._mgmt_driver_hash = driver._init_mgmt_driver_hash()
    driver._vnf_manager = infra
    driver._vnfm_plugin = mock.Mock()
    driver.rpc_api = mock.Mock()
    return driver


def scale_group(vnf, aspect):
    """``vnf_dict['attributes']['scale_group']`` as Tacker keeps it."""
    role = ASPECTS[aspect]
    count = len([vm for vm in vnf.vms if vm.role == role])
    return json.dumps({'scaleGroupDict': {aspect: {
        'vdu': [VDUS[role]], 'num': 1, 'maxLevel': 8, 'initialNum': 0,
        'initialLevel': 0, 'default': count}}})


def namespace(**kwargs):
    return types.SimpleNamespace(**kwargs)
