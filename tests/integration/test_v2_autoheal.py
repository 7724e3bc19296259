"""Self-healing through Tacker 16's own fault path, on the local site.

Real, from the alert on: Tacker's ``AutoHealingController.auto_healing``
(the handler of ``POST /alert/auto_healing``) and
``PrometheusPluginAutoHealing`` (schema, the ``isAutohealEnabled`` gate,
the ``vnfcInfo`` check), the conductor's ``enqueue_auto_heal_instance``
and ``PrometheusPluginDriver`` (its packing timer), ``vnflcm_auto.
auto_heal`` (the instance lock, through Tacker's tooz coordinator on a
file backend; ``HealVnfRequest(vnfcInstanceId=[...])`` and an lcmocc
with ``isAutomaticInvocation``), then the v2 LCM driver's grant and
process with our package script on the site, as in
:mod:`tests.integration.test_v2_scripts`.  Instantiate and the PATCH
that pauses auto-heal set ``vnfConfigurableProperties`` through
Tacker's own request handling.

Faked: the RPC cast (called in-process), the database (the instance
and the FAILED_TEMP operations are the test's), the conductor's
``start_lcm_op_internal`` (it hands the lcmocc to the test, which runs
it as the conductor would), and what test_v2_scripts fakes.

One VNF (1 master, 3 workers on 127.0.56.x), scenarios in file order.
The fleet's rules (:mod:`mgmt_driver.state.healfleet`) are tried with
three more VNF instances of Tacker's (copies of the first, over the same
VMs: each has its own id, record, kept parameters and workspace), each
healed through the same path.
"""

import contextlib
import os
import queue
import shutil
import subprocess
import sys
import time
import uuid

import pytest

pytest.importorskip('tacker')

from mgmt_localsite import site as site_mod  # noqa: E402

from mgmt_driver.adapters import v2  # noqa: E402
from mgmt_driver.model import labels  # noqa: E402
from mgmt_driver.operations import autoheal  # noqa: E402
from mgmt_driver.state import healfleet  # noqa: E402
from tests.integration import conductor_site as cs  # noqa: E402
from tests.integration import test_v2_scripts as v2s  # noqa: E402

ANSIBLE = '127.0.56.10'
HEAT_ADDRESS = '127.0.56.2'
LB_ADDRESS = '127.0.56.20'
MASTERS = ['127.0.56.31']
WORKERS = ['127.0.56.41', '127.0.56.42', '127.0.56.43']
#: The node lifecycle controller of the double, in seconds, not minutes.
FAST = {'node_monitor_grace_period': 1.0, 'node_monitor_period': 0.0}
#: Tacker's packing timer ([prometheus_plugin] timer_interval).
TIMER = 1


class Conductor:
    """What tacker-conductor runs for the plugin: the real
    ``ConductorV2.enqueue_auto_heal_instance`` over the real
    ``PrometheusPluginDriver``; ``start_lcm_op_internal`` hands the
    lcmocc Tacker made to the test."""

    def __init__(self, conductor_v2, driver_module):
        self.conductor = object.__new__(conductor_v2.ConductorV2)
        self.conductor.prom_driver = driver_module.PrometheusPluginDriver(
            self.conductor)
        self.started = queue.Queue()
        self.conductor.start_lcm_op_internal = (
            lambda context, lcmocc: self.started.put(lcmocc))

    def cast(self, context, method, **kwargs):
        # oslo.messaging's cast, delivered in-process.
        getattr(self.conductor, method)(context, **kwargs)


@pytest.fixture(scope='module')
def auto(tacker_conf, admin_context, tmp_path_factory):
    from tacker.sol_refactored import objects
    from tacker.sol_refactored.common import lcm_op_occ_utils  # noqa: F401
    from tacker.sol_refactored.common import prometheus_plugin as pp
    from tacker.sol_refactored.common import vnf_instance_utils
    from tacker.sol_refactored.conductor import conductor_v2
    from tacker.sol_refactored.conductor import prometheus_plugin_driver
    from tacker.sol_refactored.controller import prometheus_plugin_controller

    tmp = tmp_path_factory.mktemp('autoheal')
    patch = pytest.MonkeyPatch()
    overrides = [('auto_healing', True, 'prometheus_plugin'),
                 ('timer_interval', TIMER, 'prometheus_plugin'),
                 ('backend_url', 'file://%s' % (tmp / 'coordination'),
                  'coordination')]
    for name, value, group in overrides:
        tacker_conf.set_override(name, value, group=group)
    with v2s.make_world(tacker_conf, admin_context, tmp, ANSIBLE,
                        HEAT_ADDRESS, LB_ADDRESS, MASTERS, WORKERS,
                        patch=patch) as w:
        w.failed_temp = []   # the lcmoccs Tacker's database holds so
        conductor = Conductor(conductor_v2, prometheus_plugin_driver)

        def get_inst(context, inst_id):
            if w.inst is None or inst_id != w.inst.id:
                from tacker.sol_refactored.common import exceptions
                raise exceptions.VnfInstanceNotFound(inst_id=inst_id)
            return w.inst.obj_clone()
        patch.setattr(vnf_instance_utils, 'get_inst', get_inst)
        patch.setattr(objects.VnfLcmOpOccV2, 'get_by_filter',
                      classmethod(lambda cls, context, **f: [
                          o for o in w.failed_temp
                          if f.get('operationState') == 'FAILED_TEMP' and
                          f.get('vnfInstanceId', o.vnfInstanceId) ==
                          o.vnfInstanceId]))
        patch.setattr(objects.VnfLcmOpOccV2, 'create',
                      lambda self, context: None)
        patch.setattr(pp.PrometheusPluginAutoHealing, '_instance', None)
        plugin = pp.PrometheusPluginAutoHealing.instance()
        patch.setattr(plugin.rpc, 'cast', conductor.cast)
        w.controller = prometheus_plugin_controller.AutoHealingController()
        w.conductor = conductor
        try:
            yield w
        finally:
            for name, _, group in overrides:
                tacker_conf.clear_override(name, group=group)
            from tacker.common import coordination
            if coordination.COORDINATOR.started:
                coordination.COORDINATOR.stop()


@pytest.fixture
def w(auto):
    auto.scripts = []
    return auto


# ---------------------------------------------------------------- helpers


def _name(address):
    role = cs.MASTER if address in MASTERS else cs.WORKER
    return site_mod.name_of(role, address)


def _vnfc_id(w, address):
    vm = w.infra.vm(address)
    return '%s-%s' % (vm['vdu'], vm['server'])


def _alert(w, *addresses, status='firing'):
    """Alertmanager's webhook body, as the shipped rule labels it."""
    body = {'receiver': 'tacker', 'status': status, 'alerts': [{
        'status': status,
        'labels': {'alertname': 'KubesprayMgmtNodeNotReady',
                   'receiver_type': 'tacker', 'function_type': 'auto_heal',
                   'node': _name(a), autoheal.ALERT_INSTANCE: w.inst.id,
                   autoheal.ALERT_VNFC: _vnfc_id(w, a)},
        'annotations': {}, 'startsAt': '2026-11-26T10:00:00.000Z',
        'endsAt': '0001-01-01T00:00:00Z',
        'fingerprint': uuid.uuid4().hex[:16]} for a in addresses]}
    request = type('Request', (), {'context': w.context})()
    response = w.controller.auto_healing(request, body)
    assert response.status == 204


def _auto_heal(w, timeout=30):
    """The lcmocc Tacker started, run as the conductor runs it."""
    lcmocc = w.conductor.started.get(timeout=timeout)
    assert lcmocc.isAutomaticInvocation is True
    assert lcmocc.operation == 'HEAL'
    done = w.start(lcmocc)
    if done['state'] == 'FAILED_TEMP':
        lcmocc.operationState = 'FAILED_TEMP'
        w.failed_temp.append(lcmocc)
    return done


def _kubelets(w, addresses, stopped=True):
    """Stop (or start) kubelets; wait until Kubernetes shows it."""
    want = 'True' if not stopped else 'Unknown'
    for address in addresses:
        w.lab.site.stop_kubelet(_name(address), stopped)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        w.lab.site.tool('kubectl', 'get', 'nodes')  # the controller looks
        nodes = w.lab.site.nodes()
        if all(nodes[_name(a)].get('condition', 'True') == want
               for a in addresses):
            return
        time.sleep(0.2)
    raise AssertionError('nodes %s never became %s' % (addresses, want))


def _identity(w):
    """``{node: (instance label, vnfc label)}`` on the site."""
    return {name: (node['labels'].get(labels.LABEL_INSTANCE),
                   node['labels'].get(labels.LABEL_VNFC))
            for name, node in w.lab.site.nodes().items()}


def _expected_identity(w):
    return {_name(vm['address']): (w.inst.id, _vnfc_id(w, vm['address']))
            for vm in w.infra.vms if vm['vdu'] != 'externalLB'}


def _untouched(w):
    """What a refused heal must leave as it was."""
    return ([dict(vm) for vm in w.infra.vms],
            sorted(w.lab.site.nodes()),
            site_mod.read_inventory(w.lab.workspace(w.inst.id)))


def _patch(w, **fields):
    """PATCH of the instance through Tacker's modify_info_process."""
    request = w.objects.VnfInfoModificationRequest(**fields)
    lcmocc = w._lcmocc('MODIFY_INFO', request)
    lcmocc.operationState = 'PROCESSING'
    return w.process({'lcmocc': lcmocc, 'grant_req': None, 'grant': None,
                      'data': {}})


# ---------------------------------------------------------------- scenarios


def test_instantiate_with_auto_heal_labels_every_node(w):
    w.new_instance()
    w.infra.layout = (MASTERS, WORKERS)
    w.infra.free_workers = []
    request = w.objects.InstantiateVnfRequest.from_dict({
        'flavourId': 'simple',
        'instantiationLevelId': 'instantiation_level_1',
        'vimConnectionInfo': w.vim_info(),
        'vnfConfigurableProperties': {'isAutohealEnabled': True},
        'additionalParams': w.lab.additional_params})
    done = w.run('INSTANTIATE', request)
    assert done['state'] == 'COMPLETED', done.get('error')
    assert w.inst.vnfConfigurableProperties == {'isAutohealEnabled': True}
    w.lab.site.settings(**FAST)
    assert _identity(w) == _expected_identity(w)
    w.check()


def test_a_worker_whose_kubelet_stopped_is_healed_by_the_alert(w):
    worker = WORKERS[0]
    old_server = w.infra.vm(worker)['server']
    # A workload pod on it: with the kubelet dead, its eviction never
    # finishes (a drain would wait for drain_timeout and fail).
    w.lab.site.add_pod('web-7f9c4', _name(worker))
    _kubelets(w, [worker])
    _alert(w, worker)
    done = _auto_heal(w)
    assert done['state'] == 'COMPLETED', done.get('error')
    assert done['lcmocc'].operationParams.to_dict() == {
        'vnfcInstanceId': ['workerNode-%s' % old_server]}
    assert w.infra.vm(worker)['server'] != old_server
    assert w.scripts == [('heal_start', 'ok'), ('heal_end', 'ok')]
    w.check()
    node = w.lab.site.nodes()[_name(worker)]
    assert node.get('condition', 'True') == 'True'
    # The new VM's VNFC id is on the new node.
    assert _identity(w) == _expected_identity(w)


def test_too_many_unhealthy_nodes_refuse_with_nothing_changed(w):
    down = WORKERS[:2]   # 2 of 4 nodes: more than 40 %
    _kubelets(w, down)
    before = _untouched(w)
    _alert(w, down[0])
    done = _auto_heal(w)
    assert done['state'] == 'FAILED_TEMP'
    assert 'automatic heal refused, nothing was changed: 2 of 4 ' \
        'Kubernetes nodes are not Ready' in done['error']
    assert w.scripts == [('heal_start', 'failed')]
    assert _untouched(w) == before
    # FAILED_TEMP holds the instance: Tacker starts no other heal until
    # the operator marks it failed.
    with pytest.raises(Exception, match='Other LCM operation'):
        from tacker.sol_refactored.conductor import vnflcm_auto
        vnflcm_auto.auto_heal(w.context, w.inst.id, {
            'vnfcInstanceId': [_vnfc_id(w, down[0])]}, w.conductor.conductor)
    w.failed_temp.clear()   # "openstack vnflcm op fail"
    _kubelets(w, down, stopped=False)


def test_the_only_master_is_not_healed_below_etcd_quorum(w):
    master = MASTERS[0]
    _kubelets(w, [master])
    before = _untouched(w)
    _alert(w, master)
    done = _auto_heal(w)
    assert done['state'] == 'FAILED_TEMP'
    assert 'etcd would be left with 0 healthy member(s) of 1' in \
        done['error']
    assert _untouched(w) == before
    w.failed_temp.clear()
    _kubelets(w, [master], stopped=False)
    w.check()


def test_a_paused_instance_is_not_healed(w):
    done = _patch(w, vnfConfigurableProperties={'isAutohealEnabled': False})
    assert done['state'] == 'COMPLETED', done.get('error')
    _kubelets(w, [WORKERS[2]])
    _alert(w, WORKERS[2])
    with pytest.raises(queue.Empty):
        w.conductor.started.get(timeout=TIMER + 2)
    _kubelets(w, [WORKERS[2]], stopped=False)


def test_the_labels_survive_a_relabel(w):
    worker = _name(WORKERS[1])
    done = w.modify({'relabel_nodes': worker, 'relabel_labels': 'zone=a'})
    assert done['state'] == 'COMPLETED', done.get('error')
    assert w.lab.site.nodes()[worker]['labels']['zone'] == 'a'
    assert _identity(w) == _expected_identity(w)
    w.inst.metadata = {}
    done = w.modify({'relabel_nodes': worker,
                     'relabel_labels': labels.LABEL_VNFC + '-'})
    assert done['state'] == 'FAILED_TEMP'
    assert 'metadata.relabel_labels: %s set by the driver' % (
        labels.LABEL_VNFC) in done['error']
    assert _identity(w) == _expected_identity(w)


def test_the_only_gateway_is_not_healed_automatically(enabled):
    w = enabled
    before = _untouched(w)
    _alert(w, LB_ADDRESS)
    done = _auto_heal(w)
    assert done['state'] == 'FAILED_TEMP'
    assert 'the only gateway of the cluster' in done['error']
    assert _untouched(w) == before
    assert _fleet_file(w)['leases'] == {}
    w.failed_temp.clear()


# ---------------------------------------------------------------- the fleet

#: The fleet's options for the scenarios below (the script reads them).
FLEET = {'auto_heal_max_in_flight': 1,
         'auto_heal_fleet_pause_percent': 15,
         'auto_heal_fleet_min_instances': 3}


@pytest.fixture
def enabled(w):
    """Auto-heal on for the instance again (a scenario above paused it)."""
    if w.inst.vnfConfigurableProperties != {'isAutohealEnabled': True}:
        done = _patch(w, vnfConfigurableProperties={
            'isAutohealEnabled': True})
        assert done['state'] == 'COMPLETED', done.get('error')
    return w


@pytest.fixture
def fleet(enabled, tmp_path, monkeypatch):
    """Three more instances of Tacker's (B, C, D) beside the first (A),
    and the fleet's options for the script; A is current again after."""
    w = enabled
    extra = tmp_path / 'fleet.conf'
    extra.write_text(site_mod.config_file_text(FLEET))
    monkeypatch.setenv(v2.CONFIG_ENV, '%s,%s' % (
        os.environ[v2.CONFIG_ENV], extra))
    first = w.inst
    clones = [first] + [_clone(w, first) for _ in range(3)]
    yield clones
    w.inst = first


def _clone(w, inst):
    """Another instance of Tacker's over the same VMs, as if it had been
    instantiated on this store: its record, kept parameters and
    workspace are copies of *inst*'s."""
    clone = inst.obj_clone()
    clone.id = str(uuid.uuid4())
    for directory in (w.records, w.records / 'v2'):
        store = v2.SpecStore(str(directory))
        shutil.copyfile(store.path(inst.id), store.path(clone.id))
    shutil.copytree(w.lab.workspace(inst.id), w.lab.workspace(clone.id))
    return clone


@contextlib.contextmanager
def _as(w, inst):
    """Tacker acts on *inst* (its database's current instance)."""
    w.inst = inst
    yield


def _fleet_file(w):
    return healfleet.load(healfleet.path_in(str(w.records)))


def _operator(w, *command):
    """``kubespray-mgmt --config-file ... state COMMAND`` as the
    operator runs it on a conductor host."""
    files = os.environ[v2.CONFIG_ENV].split(',')
    argv = [sys.executable, '-c',
            'import sys; from mgmt_driver.adapters import cli; '
            'sys.exit(cli.main())']
    for path in files:
        argv += ['--config-file', path]
    done = subprocess.run(argv + list(command), capture_output=True,
                          text=True, timeout=120)
    return done.returncode, done.stdout


def test_heals_in_flight_and_a_fleet_pause_refuse_then_resume(
        w, fleet, monkeypatch):
    from tacker.sol_refactored.infra_drivers.openstack import openstack
    a, b, c, d = fleet
    worker = WORKERS[2]
    real_heal = openstack.Openstack.heal

    def vms_fail(*args, **kwargs):
        raise RuntimeError('Heat: the compute host is gone')
    _kubelets(w, [worker])

    # A's heal starts, and its VM is not re-created: FAILED_TEMP after
    # heal_start, holding its place in flight.
    monkeypatch.setattr(openstack.Openstack, 'heal', vms_fail)
    _alert(w, worker)
    first = _auto_heal(w)
    assert first['state'] == 'FAILED_TEMP'
    assert w.scripts == [('heal_start', 'ok')]
    assert list(_fleet_file(w)['leases']) == [a.id]
    monkeypatch.setattr(openstack.Openstack, 'heal', real_heal)

    # B (its own cluster's rules pass: 1 of 4 down) waits for a place.
    w.scripts = []
    with _as(w, b):
        before = _untouched(w)
        _alert(w, worker)
        done = _auto_heal(w)
        assert done['state'] == 'FAILED_TEMP'
        assert '[kubespray_mgmt] auto_heal_max_in_flight automatic heals ' \
            '(1) are in flight' in done['error']
        assert _untouched(w) == before
    # C is the third instance seeing a node down: 3 of 16 nodes is
    # more than 15 %, an infrastructure failure: paused; D too.
    for inst in (c, d):
        with _as(w, inst):
            _alert(w, worker)
            done = _auto_heal(w)
            assert done['state'] == 'FAILED_TEMP'
            assert 'automatic heals are paused across the fleet' in \
                done['error']
            assert 'auto_heal_fleet_pause_percent (15%)' in done['error']
    assert w.scripts == [('heal_start', 'failed')] * 3
    assert list(_fleet_file(w)['leases']) == [a.id]

    # The operator looks, then resumes.
    code, out = _operator(w, 'state', 'heals')
    assert code == 1, out
    assert '1 automatic heal(s) in flight' in out
    assert 'in flight: VNF instance %s' % a.id in out
    assert 'automatic heals paused since' in out
    code, out = _operator(w, 'state', 'resume-heals')
    assert (code, out.strip()) == (0, 'automatic heals resumed')

    # A's retry heals; its place is released with its heal_end.
    w.scripts = []
    with _as(w, a):
        done = w.process(first)
    assert done['state'] == 'COMPLETED', done.get('error')
    assert w.scripts == [('heal_start', 'ok'), ('heal_end', 'ok')]
    assert _fleet_file(w)['leases'] == {}
    assert _fleet_file(w)['pause'] is None
    w.failed_temp.clear()   # "openstack vnflcm op fail" of B, C and D
    w.check()


def test_an_operator_s_heal_is_never_held_by_the_fleet(w, fleet):
    a, b = fleet[:2]
    # A place held (by B, as a heal whose conductor died would hold it)
    # and a pause.
    path = healfleet.path_in(str(w.records))
    lim = healfleet.Limits(1, 1, 1, 1, 900, 3600)
    healfleet.resume(path, time.time())   # A's last check is forgotten
    assert healfleet.admit(path, {}, b.id, (4, 0), ANSIBLE, lim,
                           time.time()) is None
    assert healfleet.admit(path, {}, 'other', (4, 4), ANSIBLE, lim,
                           time.time())[0] == healfleet.RULE_PAUSED
    done = w.heal([WORKERS[0]])
    assert done['state'] == 'COMPLETED', done.get('error')
    w.check()
    assert healfleet.resume(path, time.time()) is not None
    assert healfleet.release(path, b.id) is True
