"""The v2 hooks of a rolling replacement and the coordinate-VNF script
(mgmt_driver.adapters.v2: change_current_package_*, coordinate_vnf).

The inputs are those Tacker 16 gives: the script's dict for the hooks
(the grant request removing the VNFCs), and for the coordinate script the
pickled ``vnfc_param`` of ``_execute_coordinate_vnf_script``.  The heal's
halves, the gate and the budget check are recorded, not run (their own
tests are elsewhere); the record store, the state lock, the kept
parameters and the node lookup in Heat are real.
"""

import io
import pickle
import subprocess
import sys

import pytest

from mgmt_driver.adapters import v2
from mgmt_driver.common import exceptions
from mgmt_driver.operations import rolling
from tests.unit import test_v2 as tv
from tests.unit.test_v2 import conf  # noqa: F401 (fixture)

OPERATION = 'op-1'
W0, W1 = 'worker-10-10-0-21', 'worker-10-10-0-22'
K8S = ['master-10-10-0-11', W0, W1]


@pytest.fixture
def h(conf, monkeypatch):  # noqa: F811
    harness = tv.Harness(conf, k8s_nodes=K8S)
    harness.instantiate()
    harness.calls = calls = []

    def heal_begin(drv, cluster, names, snapshot=True, lead=()):
        calls.append(('out',) + tuple(names))

    def heal_finish(drv, cluster, names, *args, **kwargs):
        calls.append(('in',) + tuple(names))
    monkeypatch.setattr(rolling.lcm, 'heal_begin', heal_begin)
    monkeypatch.setattr(rolling.lcm, 'heal_finish', heal_finish)
    harness.broken = set()

    def gate(drv, cluster, node, progress):
        calls.append(('gate', node))
        if node in harness.broken:
            rolling.gates.refuse('the check after %s rejoined' % node,
                                 ['%s: not Ready' % node],
                                 progress.summary())
    monkeypatch.setattr(rolling, 'gate', gate)
    monkeypatch.setattr(rolling, '_budget_problems', lambda d, c, n: [])
    return harness


def _workers(h):
    return [h.vnf.vnfc(ip) for ip, _ in tv.WORKERS[:2]]


def _grant(h):
    return dict(tv._removing(*_workers(h)), vnfLcmOpOccId=OPERATION)


def _hook(h, name):
    return h.run(name, {'vnfdId': 'new', 'additionalParams': {
        'upgrade_type': 'RollingUpdate'}}, _grant(h))


def _coordinate(h, vnfc, rollback=False):
    """The coordinate script's call, its input pickled as Tacker does."""
    param = {'cp_name': 'workerNode_FloatingIP', 'username': 'ubuntu',
             'password': 'secret-of-the-request', 'ssh_ip': '192.168.10.21',
             'is_rollback': rollback, 'vnfc_info_id': 'info-' + vnfc['id'],
             'LcmCoordRequest': {'vnfInstanceId': h.vnf.id,
                                 'vnfLcmOpOccId': OPERATION,
                                 'lcmOperationType': 'CHANGE_VNFPKG'},
             'inst': h.vnf.dict()}
    data = v2.coordinate_input(io.BytesIO(pickle.dumps(param)))
    assert 'secret-of-the-request' not in repr(data)
    return v2.run(data, h.conf, pool_factory=lambda: h.pool,
                  heat_factory=h.heat_factory)


def _record(h):
    return v2.SpecStore(v2.os.path.join(h.store.directory, 'rolling')).load(
        h.vnf.id)


def test_a_rolling_update_takes_each_worker_out_then_back(h):
    """Start takes out the first; each coordinate call brings its node
    back and takes the next out; the end checks and forgets the record."""
    first, second = _workers(h)
    _hook(h, 'change_current_package_start')
    assert h.calls == [('out', W0)]
    assert _record(h)['states'] == {W0: rolling.OUT, W1: rolling.PENDING}
    _coordinate(h, first)
    assert h.calls[1:] == [('in', W0), ('gate', W0), ('out', W1)]
    _coordinate(h, second)
    assert h.calls[4:] == [('in', W1), ('gate', W1)]
    assert _record(h)['states'] == {W0: rolling.REPLACED,
                                    W1: rolling.REPLACED}
    _hook(h, 'change_current_package_end')
    assert _record(h) is None


def test_a_failed_gate_then_a_retry_continues_where_it_stopped(h):
    first, second = _workers(h)
    h.broken = {W1}
    _hook(h, 'change_current_package_start')
    _coordinate(h, first)
    with pytest.raises(exceptions.UpgradeGateClosed) as caught:
        _coordinate(h, second)
    assert 'replaced: %s' % W0 in str(caught.value)
    assert 'out of the cluster (VM being replaced): %s' % W1 in \
        str(caught.value)
    # Tacker's retry runs the whole operation again: start, both VMs
    # (Heat changes none), both coordinate calls.
    h.broken = set()
    h.calls.clear()
    _hook(h, 'change_current_package_start')
    _coordinate(h, first)
    _coordinate(h, second)
    _hook(h, 'change_current_package_end')
    assert h.calls == [('in', W1), ('gate', W1)]


def test_a_rollback_brings_the_replaced_workers_back(h):
    """The node the failure left out rejoins first; each replaced one is
    then taken out and back in turn; the end wants every node back."""
    first, second = _workers(h)
    h.broken = {W1}
    _hook(h, 'change_current_package_start')
    _coordinate(h, first)
    with pytest.raises(exceptions.UpgradeGateClosed):
        _coordinate(h, second)
    h.broken = set()
    h.calls.clear()
    _hook(h, 'change_current_package_rollback_start')
    assert h.calls == [('in', W1), ('gate', W1), ('out', W0)]
    _coordinate(h, first, rollback=True)
    _coordinate(h, second, rollback=True)
    assert h.calls[3:] == [('in', W0), ('gate', W0), ('out', W1),
                           ('in', W1), ('gate', W1)]
    _hook(h, 'change_current_package_rollback_end')
    assert _record(h) is None


def test_the_end_refuses_while_a_node_is_not_done(h):
    _hook(h, 'change_current_package_start')
    with pytest.raises(exceptions.UpgradeGateClosed,
                       match='not done: %s, %s' % (W0, W1)):
        _hook(h, 'change_current_package_end')
    assert _record(h)['states'][W0] == rolling.OUT


def test_a_coordinate_call_without_the_start_hook_is_refused(h):
    with pytest.raises(exceptions.MgmtDriverNotFound,
                       match='rolling replacement record of operation op-1'):
        _coordinate(h, _workers(h)[0])
    assert h.calls == []


def test_the_only_master_is_not_replaced(h):
    master = h.vnf.vnfc(tv.MASTER[0])
    with pytest.raises(exceptions.UpgradeGateClosed,
                       match='at least 3 control-plane nodes'):
        h.run('change_current_package_start', {}, dict(
            tv._removing(master, *_workers(h)), vnfLcmOpOccId=OPERATION))
    assert h.calls == []


def test_the_coordinate_script_fails_with_one_line_and_no_secret(tmp_path):
    """The packaged script, run as Tacker runs it: a pickled vnfc_param
    on stdin, its interpreter, stderr the failure's detail."""
    config = tmp_path / 'kubespray.conf'
    config.write_text('[kubespray_mgmt]\nrecords_dir = %s\n'
                      % (tmp_path / 'records'))
    param = {'cp_name': 'workerNode_FloatingIP', 'password': 'pw-secret',
             'is_rollback': False, 'vnfc_info_id': 'info-x',
             'LcmCoordRequest': {'vnfLcmOpOccId': OPERATION},
             'inst': {'id': 'i1'}}
    done = subprocess.run(
        [sys.executable, v2.coordinate_script_path()],
        input=pickle.dumps(param), capture_output=True, check=False,
        env=dict(v2.os.environ, **{v2.CONFIG_ENV: str(config)}))
    assert done.returncode == 1
    err = done.stderr.decode()
    assert err.startswith('kubespray-mgmt coordinate_vnf failed: ')
    assert len(err.splitlines()) == 1
    assert 'pw-secret' not in err and str(tmp_path) not in err
