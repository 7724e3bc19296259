"""Tacker 16's real conductor drives our driver against the local site.

``Conductor.instantiate/scale/heal/terminate/rollback`` and the whole
``VnfLcmDriver`` run as in tacker-conductor (what is faked, and where:
``tests/integration/conductor_site.py``); the hooks they pick run our
driver against one local site for the module (sshd, ansible-playbook with
the kubespray double, HAProxy on 127.0.7.x).  After every scenario the
cluster is checked against Heat's VMs: Kubernetes nodes, etcd members,
the backends HAProxy serves, the inventory, the LB's kubeconfig and the
registered VIM.  The scenarios share one VNF and run in file order.

The HA-LB package's scenarios (gateways behind a VIP: instantiate with
two, scale the ``lb_instance`` aspect out and in, heal a gateway,
terminate) run on a second site on 127.0.19.x
(:class:`~tests.integration.conductor_site.GatewayLab`): the gateways
share its HAProxy and its files, so what is checked per gateway is what
its SSH session ran (keepalived's check, reload, stop) and the
keepalived file it had checked (its peers).

``pytest -s`` prints the hooks Tacker invoked per scenario, with times.
"""

import copy
import json
import shutil
import time
import uuid

import pytest
import yaml
from oslo_utils import timeutils

pytest.importorskip('tacker')
# Registers CLI options: must happen at collection, before the session's
# tacker_conf fixture parses the (empty) command line.
from mgmt_localsite import site as site_mod  # noqa: E402
from tacker.conductor import conductor_server  # noqa: E402,F401

from mgmt_driver.common import conf as kconf  # noqa: E402
from mgmt_driver.state import registry  # noqa: E402
from tests import packages  # noqa: E402
from tests.functional.test_faults import FaultLab  # noqa: E402
from tests.functional.test_faults import kill_vm_sshd  # noqa: E402
from tests.integration import conductor_site as cs  # noqa: E402
from tests.unit.test_keepalived import block  # noqa: E402

ANSIBLE = '127.0.7.10'
LB_ADDRESS = '127.0.7.20'
MASTERS = ['127.0.7.%d' % i for i in range(31, 34)]
WORKERS = ['127.0.7.%d' % i for i in range(41, 47)]
OURS = 'mgmt-drivers-kubespray'
NOOP = 'vnflcm_noop'
SIMPLE = packages.DESCRIPTOR_IDS['kubespray_simple']
HA = packages.DESCRIPTOR_IDS['kubespray_ha']
HA_LB = packages.DESCRIPTOR_IDS['kubespray_ha_lb']
# The gateways' site: its own range, its own sshd, HAProxy on the VIP.
GW_ANSIBLE = '127.0.19.10'
VIP = '127.0.19.20'
GATEWAYS = ['127.0.19.%d' % i for i in range(21, 24)]
GW_MASTERS = ['127.0.19.31']
GW_WORKERS = ['127.0.19.41']
#: tacker.objects.fields.ErrorPoint.VNF_CONFIG_END
EP_VNF_CONFIG_END = 6


class World:
    """The conductor, the site and the one VNF instance under test."""

    def __init__(self, lab, conductor, infra, nfvo, ops, hook_log,
                 objects, context):
        self.lab, self.conductor, self.infra = lab, conductor, infra
        self.nfvo, self.ops, self.log = nfvo, ops, hook_log
        self.objects, self.context = objects, context
        self.instance = None
        self.masters = self.workers = None

    # --- requests as the API controller builds them -------------------

    def new_instance(self, vnfd_id, flavour):
        vim = self.objects.VimConnectionInfo(
            id=str(uuid.uuid4()), vim_id=cs.OPENSTACK_VIM,
            vim_type='openstack', access_info={}, interface_info={},
            extra={})
        self.instance = self.objects.VnfInstance(
            context=self.context, id=str(uuid.uuid4()), vnfd_id=vnfd_id,
            vnf_pkg_id=str(uuid.uuid4()), vnf_instance_name=None,
            instantiation_state='NOT_INSTANTIATED', tenant_id=cs.TENANT,
            vim_connection_info=[vim], vnf_metadata={},
            instantiated_vnf_info=None)
        self.ops.instances[self.instance.id] = self.instance
        self.flavour = flavour
        return self.instance

    def instantiate_request(self):
        body = {'flavour_id': self.flavour,
                'additional_params': self.lab.additional_params}
        return self.objects.InstantiateVnfRequest.obj_from_primitive(
            body, self.context)

    def vnf_dict(self, before_error_point, status='ACTIVE'):
        return {'id': self.instance.id, 'status': status,
                'before_error_point': before_error_point,
                'vnfd': {'attributes': {}}, 'attributes': {}}

    # --- operations -----------------------------------------------------

    def instantiate(self, masters, workers, error_point=None,
                    gateways=None):
        self.infra.layout = (masters, workers) + (
            (gateways,) if gateways else ())
        self.conductor.instantiate(
            self.context, self.instance,
            self.vnf_dict(error_point or 0, 'INACTIVE'),
            self.instantiate_request(), str(uuid.uuid4()))
        return self.ops.last()

    def scale(self, kind, error_point=0, aspect='worker_instance'):
        request = self.objects.ScaleVnfRequest(
            type=kind, aspect_id=aspect, number_of_steps=1,
            additional_params={'is_reverse': 'False'})
        info = self.scale_info(request, error_point, 'SCALE')
        try:
            self.conductor.scale(self.context, info, self.instance, request)
        except Exception as exc:  # an RPC cast: nobody sees it
            return {'state': 'FAILED_TEMP', 'error': str(exc),
                    'error_point': info['vnf_lcm_op_occ'].error_point,
                    'request': request}
        return {'state': info['vnf_lcm_op_occ'].operation_state,
                'request': request}

    def scale_info(self, request, error_point, operation):
        level = self.scale_level(request.aspect_id)
        after = level + (1 if request.type == 'SCALE_OUT' else -1)
        occ = self.objects.VnfLcmOpOcc(
            context=self.context, id=str(uuid.uuid4()),
            operation=operation, operation_state='STARTING',
            vnf_instance_id=self.instance.id, error_point=error_point,
            operation_params=json.dumps(request.obj_to_primitive()))
        return dict(self.vnf_dict(error_point),
                    vnf_lcm_op_occ=occ, notification={},
                    instance_id=self.instance.instantiated_vnf_info
                    .instance_id, scale_level=level,
                    after_scale_level=after,
                    attributes={'scale_group': cs.scale_group(
                        self.infra.vnf, request.aspect_id)})

    def scale_level(self, aspect):
        for status in self.instance.instantiated_vnf_info.scale_status or []:
            if status.aspect_id == aspect:
                return status.scale_level
        return 0

    def rollback_scale(self, failed):
        request = failed['request']
        info = self.scale_info(request, failed['error_point'], 'SCALE')
        info['vnf_lcm_op_occ'].error_point = failed['error_point']
        self.conductor.rollback(self.context, info, self.instance,
                                {'type': request.type,
                                 'aspect_id': request.aspect_id,
                                 'number_of_steps': 1,
                                 'additional_params': {}})
        return info['vnf_lcm_op_occ'].operation_state

    def rollback_instantiate(self, failed):
        occ = self.objects.VnfLcmOpOcc(
            context=self.context, id=str(uuid.uuid4()),
            operation='INSTANTIATE', operation_state='FAILED_TEMP',
            vnf_instance_id=self.instance.id,
            error_point=failed['error_point'])
        info = dict(self.vnf_dict(failed['error_point'], 'ERROR'),
                    vnf_lcm_op_occ=occ, notification={})
        self.conductor.rollback(self.context, info, self.instance, {})
        return occ.operation_state

    def heal(self, vms=(), error_point=0):
        request = self.objects.HealVnfRequest(
            vnfc_instance_id=[vm.vnfc_id for vm in vms], cause='test',
            additional_params={})
        self.conductor.heal(self.context, self.instance,
                            self.vnf_dict(error_point), request,
                            str(uuid.uuid4()))
        return self.ops.last()

    def modify(self, body):
        """``PATCH /vnflcm/v1/vnf_instances/{id}`` with *body*: the
        controller's ``body_data`` and op occurrence, then
        ``Conductor.update`` (an RPC cast: nobody sees what it raises).

        :returns: the operation's RESULT notification.
        """
        occ_id = str(uuid.uuid4())
        occ = {'vnf_instance_id': self.instance.id, 'id': occ_id,
               'state_entered_time': timeutils.utcnow(),
               'operationParams': str(body),
               'tenant_id': cs.TENANT}
        body_data = {'vnf_instance_name': body.get('vnfInstanceName'),
                     'vnf_instance_description': body.get(
                         'vnfInstanceDescription'),
                     'vnfd_id': body.get('vnfdId'),
                     'metadata': copy.deepcopy(body.get('metadata')),
                     'vim_connection_info': body.get('vimConnectionInfo')}
        try:
            self.conductor.update(self.context, occ, body_data, {},
                                  self.instance.vnfd_id)
        except Exception:  # noqa: S110 (recorded in the notification)
            pass
        return self.ops.result(occ_id)

    def terminate(self):
        request = self.objects.TerminateVnfRequest(
            termination_type='GRACEFUL', graceful_termination_timeout=60,
            additional_params={})
        self.conductor.terminate(self.context, str(uuid.uuid4()),
                                 self.instance, request,
                                 self.vnf_dict(0))
        return self.ops.last()

    # --- checks ---------------------------------------------------------

    def vms(self, role):
        return [vm.address for vm in self.infra.vnf.vms if vm.role == role]

    def check(self):
        """The cluster matches Heat's VMs, everywhere we can look."""
        masters, workers = self.vms(cs.MASTER), self.vms(cs.WORKER)
        assert self.lab.check(masters, workers) == []
        workspace = self.lab.workspace(self.instance.id)
        inventory = site_mod.read_inventory(workspace)
        names = sorted(site_mod.name_of(cs.MASTER, a) for a in masters)
        assert sorted(inventory['kube_control_plane']) == names
        assert sorted(inventory['etcd']) == names
        assert sorted(inventory['kube_node']) == sorted(
            site_mod.name_of(cs.WORKER, a) for a in workers)
        self.check_access()

    def check_access(self):
        name = registry.default_vim_name(self.instance.id)
        [vim] = [v for v in self.nfvo.vims.values() if v['name'] == name]
        assert vim['auth_url'] == 'https://%s:%d' % (self.lab.lb,
                                                     self.lab.api_port)
        attached = [i.vim_id for i in self.instance.vim_connection_info]
        assert vim['id'] in attached
        kubeconfig = self.lab.sshd.home() / '.kube' / 'config'
        doc = yaml.safe_load(kubeconfig.read_text())
        assert doc['clusters'][0]['cluster']['server'] == vim['auth_url']

    def check_gone(self):
        """Nothing of the cluster is left after terminate or rollback."""
        assert not self.lab.workspace(self.instance.id).exists()
        assert self.nfvo.vims == {}
        assert all(i.vim_type != 'kubernetes'
                   for i in self.instance.vim_connection_info)


def _use_lab(tacker_conf, lab):
    """Point Tacker's ``[kubespray_mgmt]`` options at *lab*."""
    for opt in kconf.list_opts()[0][1]:
        tacker_conf.set_override(opt.name, lab.conf[kconf.GROUP][opt.name],
                                 group=kconf.GROUP)


def _conductor_world(lab, infra, tacker_conf, onboarded, objects,
                     admin_context, patch):
    """A :class:`World` over the started *lab*: the seams patched with
    *patch*, Tacker's options pointing at *lab*."""
    from tacker.common import driver_manager

    _use_lab(tacker_conf, lab)
    hook_log = cs.HookLog()
    nfvo = cs.FakeNfvo()
    ops = cs.OpOccs()
    package_dirs = {packages.DESCRIPTOR_IDS[name]: entry[3]
                    for name, entry in onboarded.items()}
    cs.tacker_seams(patch, infra, nfvo, package_dirs, str(uuid.uuid4()),
                    ops)
    manager = driver_manager.DriverManager(
        packages.MGMT_NAMESPACE, tacker_conf.tacker.vnflcm_mgmt_driver)
    lcm = cs.lcm_driver_without_db(manager, infra, hook_log)
    conductor = cs.conductor_without_db(patch, lcm, infra, ops)
    world = World(lab, conductor, infra, nfvo, ops, hook_log, objects,
                  admin_context)
    world.package_dirs = package_dirs
    return world


@pytest.fixture(scope='module')
def world(tacker_conf, onboarded, objects, admin_context,
          tmp_path_factory):
    reason = site_mod.unavailable()
    if reason:
        pytest.skip(reason)
    from tacker.common import coordination

    patch = pytest.MonkeyPatch()
    # Each master has an sshd of its own, so that its VM can die.
    lab = FaultLab(ANSIBLE, LB_ADDRESS, MASTERS, WORKERS, aside=MASTERS)
    world = None
    try:
        lab.start()
        tacker_conf.set_override(
            'backend_url', 'file://%s' % tmp_path_factory.mktemp('locks'),
            group='coordination')
        coordination.COORDINATOR.start()
        world = _conductor_world(lab, cs.FakeInfra(lab, objects),
                                 tacker_conf, onboarded, objects,
                                 admin_context, patch)
        yield world
    finally:
        if world is not None:
            print('\n' + world.log.table())
        coordination.COORDINATOR.stop()
        for opt in kconf.list_opts()[0][1]:
            tacker_conf.clear_override(opt.name, group=kconf.GROUP)
        tacker_conf.clear_override('backend_url', group='coordination')
        patch.undo()
        lab.stop()


@pytest.fixture(scope='module')
def gateway_world(world, tacker_conf, onboarded, objects, admin_context):
    """A second site (127.0.19.x) whose LB is gateways behind a VIP
    (:class:`~tests.integration.conductor_site.GatewayLab`), its own
    conductor seams over *world*'s, which are back afterwards."""
    reason = cs.GatewayLab.unavailable()
    if reason:
        pytest.skip(reason)
    patch = pytest.MonkeyPatch()
    lab = cs.GatewayLab(GW_ANSIBLE, VIP, GW_MASTERS, GW_WORKERS,
                        GATEWAYS)
    gw = None
    try:
        lab.start()
        gw = _conductor_world(lab, cs.FakeInfra(lab, objects), tacker_conf,
                              onboarded, objects, admin_context, patch)
        yield gw
    finally:
        if gw is not None:
            print('\n' + gw.log.table())
        patch.undo()
        _use_lab(tacker_conf, world.lab)
        lab.stop()


def _timed(world, request):
    world.log.scenario = request.node.name.replace('test_', '')
    start = time.monotonic()
    yield world
    print('\n%s: %.1f s' % (request.node.name, time.monotonic() - start))


@pytest.fixture
def scenario(world, request):
    yield from _timed(world, request)


@pytest.fixture
def gw_scenario(gateway_world, request):
    yield from _timed(gateway_world, request)


def test_instantiate(scenario):
    w = scenario
    w.new_instance(SIMPLE, 'simple')
    w.infra.free_workers = WORKERS[2:]
    report = w.instantiate(MASTERS[:1], WORKERS[:2])
    assert report['state'] == 'COMPLETED', report
    assert w.log.hooks('instantiate') == [
        (NOOP, 'instantiate_start', 'ok'), (OURS, 'instantiate_end', 'ok')]
    w.check()


def _worker_name(address):
    return site_mod.name_of(cs.WORKER, address)


def test_scale_out_fails_then_retry(scenario):
    """scale_end fails on the new worker: FAILED_TEMP at VNF_CONFIG_END.
    Tacker's retry runs no hook and completes with the VM not joined."""
    w = scenario
    new = w.infra.free_workers[0]
    w.lab.site.inject_failure('scale.yml', host=_worker_name(new))
    failed = w.scale('SCALE_OUT')
    assert failed['state'] == 'FAILED_TEMP'
    assert failed['error_point'] == EP_VNF_CONFIG_END
    assert 'roll it back' in failed['error']
    assert w.log.hooks('scale_out_fails_then_retry') == [
        (OURS, 'scale_end', 'raised PlaybookFailed')]
    # Taken out again: the cluster is Heat's VMs but the new one.
    joined = [a for a in w.vms(cs.WORKER) if a != new]
    assert w.lab.check(w.vms(cs.MASTER), joined) == []

    w.log.scenario = 'scale_out_retry'
    retried = w.scale('SCALE_OUT', error_point=failed['error_point'])
    assert retried['state'] == 'COMPLETED'
    assert w.log.hooks('scale_out_retry') == []
    assert new in w.vms(cs.WORKER)
    assert w.lab.check(w.vms(cs.MASTER), joined) == []


def test_scale_out(scenario):
    """The next scale-out joins its own VM and the one left by the
    retried scale-out: scale_end only, with the new member's stack id."""
    w = scenario
    report = w.scale('SCALE_OUT')
    assert report['state'] == 'COMPLETED'
    assert w.log.hooks('scale_out') == [(OURS, 'scale_end', 'ok')]
    w.check()


def test_scale_out_fails_then_rollback(scenario):
    """Rollback of a failed scale_end: no hook, Heat deletes the VM."""
    w = scenario
    before = w.vms(cs.WORKER)
    new = w.infra.free_workers[0]
    w.lab.site.inject_failure('scale.yml', host=_worker_name(new))
    failed = w.scale('SCALE_OUT')
    assert failed['state'] == 'FAILED_TEMP'
    w.log.scenario = 'scale_out_rollback'
    assert w.rollback_scale(failed) == 'ROLLED_BACK'
    assert w.log.hooks('scale_out_rollback') == []
    assert w.vms(cs.WORKER) == before
    w.check()


def test_scale_in(scenario):
    w = scenario
    victim = w.vms(cs.WORKER)[0]
    report = w.scale('SCALE_IN')
    assert report['state'] == 'COMPLETED'
    assert w.log.hooks('scale_in') == [(OURS, 'scale_start', 'ok')]
    assert victim not in w.vms(cs.WORKER)
    w.check()


def test_heal_worker(scenario):
    w = scenario
    sick = w.infra.vnf.vm(w.vms(cs.WORKER)[0])
    server = sick.server_id
    report = w.heal([sick])
    assert report['state'] == 'COMPLETED', report
    assert sick.server_id != server
    assert w.log.hooks('heal_worker') == [(OURS, 'heal_start', 'ok'),
                                          (OURS, 'heal_end', 'ok')]
    w.check()


def test_heal_load_balancer(scenario):
    """The LB VM comes back empty with a new host key."""
    w = scenario
    report = w.heal([w.infra.vnf.vm(LB_ADDRESS)])
    assert report['state'] == 'COMPLETED', report
    assert w.log.hooks('heal_load_balancer') == [
        (OURS, 'heal_start', 'ok'), (OURS, 'heal_end', 'ok')]
    w.check()


def test_heal_whole_vnf(scenario):
    """Heat deletes and re-creates every VM (new addresses here)."""
    w = scenario
    w.infra.free_workers = [a for a in WORKERS if a not in WORKERS[3:5]]
    w.infra.layout = (MASTERS[1:2], WORKERS[3:5])
    report = w.heal()
    assert report['state'] == 'COMPLETED', report
    assert w.log.hooks('heal_whole_vnf') == [(OURS, 'heal_start', 'ok'),
                                             (OURS, 'heal_end', 'ok')]
    assert w.vms(cs.MASTER) == MASTERS[1:2]
    w.check()


def _versions(w):
    return {n['kubelet_version'] for n in w.lab.site.nodes().values()}


def test_modify_upgrades_the_cluster(scenario):
    """Tacker's v1 PATCH with ``samples/modify_upgrade.json``: Tacker
    merges the metadata into the instance's, then our
    modify_information_end upgrades every node, a worker at a time."""
    w = scenario
    w.instance.vnf_metadata = {'owner': 'ops'}
    assert _versions(w) == {'v1.33.5'}
    runs = len(w.lab.site.runs())
    body = json.loads((packages.SAMPLES_DIR / 'modify_upgrade.json')
                      .read_text())
    result = w.modify(body)
    assert result['operationState'] == 'COMPLETED', result.get('error')
    assert w.log.hooks('modify_upgrades_the_cluster') == [
        (NOOP, 'modify_information_start', 'ok'),
        (OURS, 'modify_information_end', 'ok')]
    merged = dict(body['metadata'], owner='ops')
    assert w.instance.vnf_metadata == merged
    assert result['changed_info']['metadata'] == merged
    assert _versions(w) == {'v1.34.3'}
    # Each master alone, then the workers one at a time (serial "1"),
    # one --limit run per batch with a gate after each.
    inventory = site_mod.read_inventory(w.lab.workspace(w.instance.id))
    masters, workers = (list(inventory[group]) for group in (
        'kube_control_plane', 'kube_node'))
    assert [r['limit'] for r in w.lab.site.runs()[runs:]
            if r['playbook'] == 'upgrade-cluster.yml'] == masters + workers
    assert [s['batch'] for s in w.lab.site.state()['upgrades']][
        -len(workers):] == [[name] for name in workers]
    w.check()

    # Another PATCH: a key removed (null), a number stored as a string;
    # the version every node runs is nothing to do.
    w.log.scenario = 'modify_other_metadata'
    runs = len(w.lab.site.runs())
    result = w.modify({'metadata': {'owner': None, 'replicas': 3}})
    assert result['operationState'] == 'COMPLETED', result.get('error')
    assert w.log.hooks('modify_other_metadata')[-1] == (
        OURS, 'modify_information_end', 'ok')
    assert w.instance.vnf_metadata == dict(body['metadata'], replicas='3')
    assert w.lab.site.runs()[runs:] == []
    assert _versions(w) == {'v1.34.3'}


def test_modify_relabels_nodes(scenario):
    """A PATCH with ``relabel_*`` keys: our modify_information_end sets
    the label and the taint on the named worker only, records them for
    later runs, and runs no playbook."""
    w = scenario
    worker = _worker_name(WORKERS[3])
    runs = len(w.lab.site.runs())
    before = w.lab.site.nodes()
    result = w.modify({'metadata': {
        'relabel_nodes': worker, 'relabel_labels': 'example.com/pool=edge',
        'relabel_taints': 'example.com/edge=yes:NoSchedule'}})
    assert result['operationState'] == 'COMPLETED', result.get('error')
    nodes = w.lab.site.nodes()
    assert nodes[worker]['labels']['example.com/pool'] == 'edge'
    assert {'key': 'example.com/edge', 'value': 'yes',
            'effect': 'NoSchedule'} in nodes[worker]['taints']
    assert {name: node for name, node in nodes.items() if name != worker
            } == {name: node for name, node in before.items()
                  if name != worker}
    assert w.lab.site.runs()[runs:] == []
    inventory = site_mod.read_inventory(w.lab.workspace(w.instance.id))
    assert inventory['hosts'][worker]['node_labels'][
        'example.com/pool'] == 'edge'
    w.check()


def test_modify_refuses_a_downgrade(scenario):
    """The hook refuses the version before any change: Tacker fails the
    operation (FAILED_TEMP, the field named in its error) and marks the
    VNF ERROR; the refused value stays in the instance's metadata."""
    w = scenario
    runs = len(w.lab.site.runs())
    result = w.modify({'metadata': {'kube_version': '1.33.5'}})
    assert result['operationState'] == 'FAILED_TEMP'
    error = json.loads(result['error'])
    assert 'vnf_metadata.kube_version: 1.33.5 is older than 1.34.3' in \
        error['detail']
    assert 'downgrades are not supported' in error['detail']
    assert w.ops.vnf_status[w.instance.id] == 'ERROR'
    assert w.log.hooks('modify_refuses_a_downgrade') == [
        (NOOP, 'modify_information_start', 'ok'),
        (OURS, 'modify_information_end', 'raised ParamsInvalid')]
    assert w.instance.vnf_metadata['kube_version'] == '1.33.5'
    assert w.lab.site.runs()[runs:] == []
    assert _versions(w) == {'v1.34.3'}
    w.check()


def test_terminate(scenario):
    """Graceful terminate: kubespray's reset while the VMs exist, then
    Heat deletes them, then terminate_end removes what is left."""
    w = scenario
    runs = len(w.lab.site.runs())
    report = w.terminate()
    assert report['state'] == 'COMPLETED', report
    assert w.log.hooks('terminate') == [(OURS, 'terminate_start', 'ok'),
                                        (OURS, 'terminate_end', 'ok')]
    assert [r['playbook'] for r in w.lab.site.runs()[runs:]] == ['reset.yml']
    assert w.infra.vnf.vms == []
    w.check_gone()


def _failing_instantiate(w, masters, workers):
    w.new_instance(SIMPLE, 'simple')
    w.lab.site.inject_failure('cluster.yml', host=_worker_name(workers[-1]))
    failed = w.instantiate(masters, workers)
    assert failed['state'] == 'FAILED_TEMP'
    assert failed['error_point'] == EP_VNF_CONFIG_END
    return failed


def test_instantiate_fails_then_rollback(scenario):
    """Heat deletes the VMs first, then terminate_end with no request."""
    w = scenario
    failed = _failing_instantiate(w, MASTERS[:1], WORKERS[:2])
    w.log.scenario = 'instantiate_rollback'
    assert w.rollback_instantiate(failed) == 'ROLLED_BACK'
    assert w.log.hooks('instantiate_rollback') == [
        (OURS, 'terminate_end', 'ok')]
    assert w.infra.vnf.vms == []
    w.check_gone()


def test_instantiate_fails_then_retry(scenario):
    """The retry runs only instantiate_end again, and converges."""
    w = scenario
    failed = _failing_instantiate(w, MASTERS[:1], WORKERS[:2])
    w.log.scenario = 'instantiate_retry'
    report = w.instantiate(MASTERS[:1], WORKERS[:2],
                           error_point=failed['error_point'])
    assert report['state'] == 'COMPLETED', report
    assert w.log.hooks('instantiate_retry') == [
        (OURS, 'instantiate_end', 'ok')]
    w.check()
    w.log.scenario = 'terminate_after_retry'
    assert w.terminate()['state'] == 'COMPLETED'
    w.check_gone()


def test_tampered_package_runs_no_hook(scenario, tmp_path):
    """The CSAR's copy of our driver differs from the installed one:
    Tacker's hash check fails instantiate_end before our code runs."""
    w = scenario
    copy = shutil.copytree(w.package_dirs[SIMPLE], tmp_path / 'tampered')
    script = copy / 'Scripts' / 'kubespray_mgmt.py'
    script.write_text(script.read_text() + '# changed\n')
    tampered = str(uuid.uuid4())
    w.package_dirs[tampered] = str(copy)
    w.new_instance(tampered, 'simple')
    runs = len(w.lab.site.runs())
    report = w.instantiate(MASTERS[:1], WORKERS[:1])
    assert report['state'] == 'FAILED_TEMP'
    assert report['error_point'] == EP_VNF_CONFIG_END
    assert 'hash' in report['error'].lower()
    assert w.log.hooks('tampered_package_runs_no_hook') == [
        (NOOP, 'instantiate_start', 'ok')]
    assert w.lab.site.runs()[runs:] == []
    w.infra.delete()  # a rollback would fail the same check


def test_heal_master_ha(scenario):
    """HA package, three masters: heal one of them, then the first one
    (kubespray's first control-plane node) after its VM died."""
    w = scenario
    w.new_instance(HA, 'ha')
    w.log.scenario = 'instantiate_ha'
    assert w.instantiate(MASTERS, WORKERS[:1])['state'] == 'COMPLETED'
    w.check()
    w.log.scenario = 'heal_master_ha'
    sick = w.infra.vnf.vm(MASTERS[1])
    report = w.heal([sick])
    assert report['state'] == 'COMPLETED', report
    assert w.log.hooks('heal_master_ha') == [(OURS, 'heal_start', 'ok'),
                                             (OURS, 'heal_end', 'ok')]
    w.check()

    w.log.scenario = 'heal_dead_first_master_ha'
    inventory = site_mod.read_inventory(w.lab.workspace(w.instance.id))
    first = inventory['hosts'][inventory['kube_control_plane'][0]][
        'ansible_host']
    kill_vm_sshd(w.lab.aside[first])
    report = w.heal([w.infra.vnf.vm(first)])
    assert report['state'] == 'COMPLETED', report
    assert w.log.hooks('heal_dead_first_master_ha') == [
        (OURS, 'heal_start', 'ok'), (OURS, 'heal_end', 'ok')]
    w.check()
    inventory = site_mod.read_inventory(w.lab.workspace(w.instance.id))
    assert inventory['kube_control_plane'][-1] == site_mod.name_of(
        cs.MASTER, first)
    assert w.lab.site.cluster_info_server() == 'https://%s:%d' % (
        LB_ADDRESS, w.lab.api_port)
    w.log.scenario = 'terminate_ha'
    assert w.terminate()['state'] == 'COMPLETED'
    w.check_gone()


# --- HA-LB package: gateways behind a VIP (the second site) ------------

def _gateways(w):
    return w.vms(cs.LB)


def _check_gateways(w, since, changed=None):
    """The *changed* gateways (default: every gateway of Heat) had their
    keepalived file checked and were reloaded since call *since*; each
    gateway's last file names the others as peers.  (Sharing one file
    here, the others may be rewritten too.)"""
    gateways = _gateways(w)
    calls = w.lab.calls()[since:]
    for gateway in changed or gateways:
        assert (gateway, 'check') in calls
        assert (gateway, 'reload') in calls
    for gateway in gateways:
        text = w.lab.checked(gateway)
        assert 'router_id %s' % site_mod.name_of(cs.LB, gateway) in text
        assert 'unicast_src_ip %s' % gateway in text
        assert block(text, 'unicast_peer') == sorted(
            g for g in gateways if g != gateway)
        assert '%s/32 dev %s' % (VIP, w.lab.link) in text
    return calls


def test_instantiate_ha_lb(gw_scenario):
    """Two gateways: each has HAProxy's (shared here) and its own
    keepalived file, checked by the real keepalived -t."""
    w = gw_scenario
    w.new_instance(HA_LB, 'ha_lb')
    w.infra.free_gateways = GATEWAYS[2:]
    report = w.instantiate(GW_MASTERS, GW_WORKERS, gateways=GATEWAYS[:2])
    assert report['state'] == 'COMPLETED', report
    assert w.log.hooks('instantiate_ha_lb') == [
        (NOOP, 'instantiate_start', 'ok'), (OURS, 'instantiate_end', 'ok')]
    assert _gateways(w) == GATEWAYS[:2]
    _check_gateways(w, 0)
    w.check()


def test_scale_out_gateway(gw_scenario):
    """A scale-out of lb_instance: scale_end sets the new gateway up and
    gives every gateway the new peer list."""
    w = gw_scenario
    since = len(w.lab.calls())
    report = w.scale('SCALE_OUT', aspect='lb_instance')
    assert report['state'] == 'COMPLETED', report
    assert w.log.hooks('scale_out_gateway') == [(OURS, 'scale_end', 'ok')]
    assert _gateways(w) == GATEWAYS
    _check_gateways(w, since)
    w.check()


def test_heal_gateway(gw_scenario):
    """A gateway VNFC heal: the re-created VM (new host key, nothing
    configured) gets its files again; the peers stay the same."""
    w = gw_scenario
    sick = w.infra.vnf.vm(GATEWAYS[1])
    server = sick.server_id
    since = len(w.lab.calls())
    report = w.heal([sick])
    assert report['state'] == 'COMPLETED', report
    assert sick.server_id != server
    assert w.log.hooks('heal_gateway') == [(OURS, 'heal_start', 'ok'),
                                           (OURS, 'heal_end', 'ok')]
    calls = _check_gateways(w, since, changed=[sick.address])
    assert not any(what == 'stop' for _, what in calls)
    w.check()


def test_scale_in_gateway(gw_scenario):
    """A scale-in of lb_instance: scale_start gives the staying gateways
    the new peer list, then stops keepalived on the leaving one."""
    w = gw_scenario
    victim = _gateways(w)[0]  # Heat removes the oldest member
    since = len(w.lab.calls())
    report = w.scale('SCALE_IN', aspect='lb_instance')
    assert report['state'] == 'COMPLETED', report
    assert w.log.hooks('scale_in_gateway') == [(OURS, 'scale_start', 'ok')]
    assert victim not in _gateways(w)
    calls = w.lab.calls()[since:]
    assert calls[-1] == (victim, 'stop')
    assert (victim, 'check') not in calls
    staying = _gateways(w)
    for gateway in staying:
        assert block(w.lab.checked(gateway), 'unicast_peer') == sorted(
            g for g in staying if g != gateway)
    w.check()


def test_terminate_ha_lb(gw_scenario):
    w = gw_scenario
    report = w.terminate()
    assert report['state'] == 'COMPLETED', report
    assert w.log.hooks('terminate_ha_lb') == [
        (OURS, 'terminate_start', 'ok'), (OURS, 'terminate_end', 'ok')]
    assert w.infra.vnf.vms == []
    w.check_gone()
