"""The fleet's rules of automatic heals (mgmt_driver.state.healfleet):
heals in flight across the store and per Ansible server, leases that end
with the heal or expire, and the pause on a fleet-wide NotReady share."""

import json
import subprocess
import sys
import types

import pytest

from mgmt_driver.adapters import v1
from mgmt_driver.adapters import v2
from mgmt_driver.common import exceptions
from mgmt_driver.state import healfleet
from mgmt_driver.state import records
from tests.unit.test_driver import conf  # noqa: F401 (a fixture)

LIM = healfleet.Limits(max_in_flight=3, max_per_server=2, pause_percent=20,
                       min_instances=3, max_age=600, lease=3600)
#: 20 instances of 5 Kubernetes nodes: 100 nodes.
SIZES = {'vnf-%02d' % i: 5 for i in range(20)}


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / 'records' / healfleet.FILE)


def _admit(path, instance, server='10.0.0.1', observed=(5, 1), now=1000,
           lim=LIM, sizes=SIZES):
    return healfleet.admit(path, sizes, instance, observed, server, lim, now)


def _rule(refused):
    return refused and refused[0]


# ------------------------------------------------------------ in flight


def test_heals_in_flight_are_capped_across_the_store(path):
    servers = ['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4']
    assert [_admit(path, 'vnf-%02d' % i, servers[i]) for i in range(3)] == \
        [None] * 3
    rule, reason = _admit(path, 'vnf-03', servers[3])
    assert rule == healfleet.RULE_IN_FLIGHT
    assert '[kubespray_mgmt] auto_heal_max_in_flight automatic heals (3) ' \
        'are in flight' in reason
    # The refused one holds nothing; one ending makes room.
    assert 'vnf-03' not in healfleet.load(path)['leases']
    assert healfleet.release(path, 'vnf-01') is True
    assert _admit(path, 'vnf-03', servers[3]) is None


def test_heals_in_flight_are_capped_per_ansible_server(path):
    assert _admit(path, 'vnf-00') is None
    assert _admit(path, 'vnf-01') is None
    rule, reason = _admit(path, 'vnf-02')
    assert rule == healfleet.RULE_IN_FLIGHT_SERVER
    assert 'auto_heal_max_in_flight_per_ansible_server' in reason
    # Another server's instance still goes.
    assert _admit(path, 'vnf-02', '10.0.0.9') is None


def test_a_retry_of_the_same_instance_takes_its_own_place(path):
    lim = healfleet.Limits(1, 1, 20, 3, 600, 3600)
    assert _admit(path, 'vnf-00', lim=lim) is None
    assert _admit(path, 'vnf-00', lim=lim, now=1100) is None
    assert _rule(_admit(path, 'vnf-01', lim=lim)) == healfleet.RULE_IN_FLIGHT


def test_a_lease_a_dead_conductor_left_expires(path):
    lim = healfleet.Limits(1, 1, 20, 3, 600, 3600)
    assert _admit(path, 'vnf-00', lim=lim, now=1000) is None
    assert _rule(_admit(path, 'vnf-01', lim=lim, now=4599)) == \
        healfleet.RULE_IN_FLIGHT
    assert _admit(path, 'vnf-01', lim=lim, now=4601) is None
    assert list(healfleet.load(path)['leases']) == ['vnf-01']


def test_heal_end_renews_the_lease(path):
    lim = healfleet.Limits(1, 1, 20, 3, 600, 3600)
    assert _admit(path, 'vnf-00', lim=lim, now=1000) is None
    healfleet.renew(path, 'vnf-00', lim, 4000)
    assert _rule(_admit(path, 'vnf-01', lim=lim, now=4601)) == \
        healfleet.RULE_IN_FLIGHT
    # Renewing an instance without a lease takes none.
    healfleet.renew(path, 'vnf-05', lim, 4000)
    assert 'vnf-05' not in healfleet.load(path)['leases']
    assert healfleet.release(path, 'vnf-05') is False


# ------------------------------------------------------------ the pause


def _rack_loss(path, count, now=1000):
    """*count* instances each see 2 of their 5 nodes not Ready."""
    lim = healfleet.Limits(100, 100, 20, 3, 600, 3600)
    return [_admit(path, 'vnf-%02d' % i, observed=(5, 2), now=now, lim=lim)
            for i in range(count)]


def test_a_rack_loss_pauses_automatic_heals(path):
    # 10 instances with 2 of 5 down: 20 of 100 nodes; the share reaches
    # 20 % with the tenth check.
    results = _rack_loss(path, 10)
    assert results[:9] == [None] * 9
    rule, reason = results[9]
    assert rule == healfleet.RULE_PAUSED
    assert 'auto_heal_fleet_pause_percent (20%)' in reason
    assert 'kubespray-mgmt state resume-heals' in reason
    # Not another tenant's numbers.
    assert '100' not in reason and 'vnf-' not in reason
    assert healfleet.load(path)['pause']['not_ready'] == 20


def test_node_failures_in_a_few_small_clusters_are_no_rack_loss(path):
    # Only instances with an alert are observed: 3 of them, 1 of 5 down
    # each, are 3 of the fleet's 100 nodes, not 3 of 15.
    lim = healfleet.Limits(100, 100, 20, 3, 600, 3600)
    assert [_admit(path, 'vnf-%02d' % i, observed=(5, 1), lim=lim)
            for i in range(3)] == [None] * 3
    assert healfleet.load(path)['pause'] is None


def test_one_cluster_alone_never_pauses_the_fleet(path):
    lim = healfleet.Limits(100, 100, 20, 3, 600, 3600)
    sizes = {'big': 100, 'small': 5}
    assert _admit(path, 'big', observed=(100, 40), lim=lim,
                  sizes=sizes) is None
    assert healfleet.load(path)['pause'] is None


def test_stale_observations_stop_counting(path):
    lim = healfleet.Limits(100, 100, 20, 3, 600, 3600)
    for i in range(9):
        _admit(path, 'vnf-%02d' % i, observed=(5, 2), now=1000, lim=lim)
    # 601 s later the nine are stale: the tenth sees 2 of 100.
    assert _admit(path, 'vnf-09', observed=(5, 2), now=1601, lim=lim) is None
    assert sorted(healfleet.load(path)['observations']) == ['vnf-09']


def test_the_pause_holds_without_fresh_checks(path):
    _rack_loss(path, 10)
    lim = healfleet.Limits(100, 100, 20, 3, 600, 3600)
    # Later, one instance alone shows a single node down: not enough
    # fresh checks to lift the pause.
    assert _rule(_admit(path, 'vnf-15', observed=(5, 1), now=5000,
                        lim=lim)) == healfleet.RULE_PAUSED


def test_the_pause_lifts_when_fresh_checks_show_less(path):
    _rack_loss(path, 10)
    lim = healfleet.Limits(100, 100, 20, 3, 600, 3600)
    results = [_admit(path, 'vnf-%02d' % i, observed=(5, 1), now=5000,
                      lim=lim) for i in range(15, 18)]
    assert [_rule(r) for r in results] == [healfleet.RULE_PAUSED] * 2 + \
        [None]
    assert healfleet.load(path)['pause'] is None


def test_the_operator_resumes(path):
    _rack_loss(path, 10)
    lifted = healfleet.resume(path, 1001)
    assert lifted['not_ready'] == 20
    # The checks that set it are forgotten: the next one goes.
    assert _admit(path, 'vnf-10', observed=(5, 2), now=1002,
                  lim=healfleet.Limits(100, 100, 20, 3, 600,
                                       3600)) is None
    assert healfleet.resume(path, 1003) is None


def test_the_operator_s_report(path):
    _rack_loss(path, 10)
    _admit(path, 'vnf-12', observed=(5, 0), now=1010)
    lines = healfleet.report(path, SIZES, LIM, 1100)
    texts = [text for _, text in lines]
    assert 'in flight: VNF instance vnf-00 on Ansible server 10.0.0.1, ' \
        'conductor' in texts[1]
    assert 'fresh observations (last 600 s): 20 of 100 Kubernetes nodes ' \
        'not Ready, in 10 instance(s)' in texts
    assert 'observed: VNF instance vnf-09, 2 of 5 not Ready, 100 s ago' in \
        texts
    assert not any('vnf-12' in t for t in texts)
    assert lines[-1][0] == 'problem'
    assert 'paused since 100 s ago' in lines[-1][1]


def test_zero_never_pauses(path):
    lim = healfleet.Limits(100, 100, 0, 1, 600, 3600)
    assert [_admit(path, 'vnf-%02d' % i, observed=(5, 5), lim=lim)
            for i in range(20)] == [None] * 20


# ------------------------------------------------------------ the file


def test_the_file_is_private_and_bounded(path):
    _admit(path, 'vnf-00')
    import os
    assert os.stat(path).st_mode & 0o777 == 0o600
    with open(path, 'w') as f:
        f.write('[' * 100000)
    with pytest.raises(exceptions.StateStoreUnusable,
                       match='no fleet file of the driver'):
        healfleet.load(path)
    with open(path, 'w') as f:
        f.write(' ' * (healfleet.MAX_BYTES + 1))
    with pytest.raises(exceptions.StateStoreUnusable, match='more than'):
        _admit(path, 'vnf-00')


def test_the_fleet_s_nodes_come_from_the_records(tmp_path):
    store = records.RecordStore(str(tmp_path))
    store.add_hosts('a', [records.Host('10.0.0.%d' % i, 22, role)
                          for i, role in enumerate(
                              ['master', 'worker', 'worker', 'external_lb',
                               'ansible'])])
    store.add_hosts('b', [records.Host('10.0.1.1', 22, 'worker')])
    (tmp_path / 'c.json').write_text('{')
    assert healfleet.fleet_nodes(store) == {'a': 3, 'b': 1}


def test_conductors_in_several_processes_share_the_cap(path):
    """Eight processes admit at once: exactly the cap gets a place."""
    program = (
        'import sys\n'
        'from mgmt_driver.state import healfleet\n'
        'lim = healfleet.Limits(3, 3, 0, 3, 600, 3600)\n'
        'r = healfleet.admit(sys.argv[1], {}, sys.argv[2], (5, 1), "s", '
        'lim, 1000)\n'
        'print("refused" if r else "admitted")\n')
    procs = [subprocess.Popen([sys.executable, '-c', program, path,
                               'vnf-%d' % i], stdout=subprocess.PIPE,
                              text=True) for i in range(8)]
    outs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert sorted(outs) == ['admitted'] * 3 + ['refused'] * 5
    assert len(json.load(open(path))['leases']) == 3


# ------------------------------------------------------------ the v2 hooks


def _hooks(conf, tmp_path):  # noqa: F811
    hooks = v2.V2Hooks(conf, records=records.RecordStore(str(tmp_path)))
    hooks.clock = lambda: 1000
    return hooks, healfleet.path_in(str(tmp_path))


def _vnf(instance_id):
    return types.SimpleNamespace(id=instance_id)


def _boom(*args, **kwargs):
    raise RuntimeError('the playbook failed')


@pytest.mark.parametrize('fails', [False, True])
def test_heal_end_releases_the_place_whatever_its_result(
        conf, tmp_path, monkeypatch, fails):  # noqa: F811
    hooks, path = _hooks(conf, tmp_path)
    assert _admit(path, 'vnf-1') is None
    monkeypatch.setattr(v1.LcmHooks, 'heal_end',
                        _boom if fails else lambda *a, **k: None)
    if fails:
        with pytest.raises(RuntimeError):
            hooks.heal_end(None, _vnf('vnf-1'), None, None, None)
    else:
        hooks.heal_end(None, _vnf('vnf-1'), None, None, None)
    assert healfleet.load(path)['leases'] == {}


def test_a_failed_heal_start_gives_its_place_back(
        conf, tmp_path, monkeypatch):  # noqa: F811
    hooks, path = _hooks(conf, tmp_path)
    monkeypatch.setattr(
        v2.V2Hooks, '_check_automatic',
        lambda self, context, vnf, request: _admit(path, vnf.id))
    monkeypatch.setattr(v1.LcmHooks, 'heal_start', _boom)
    request = types.SimpleNamespace(automatic=True)
    with pytest.raises(RuntimeError):
        hooks.heal_start(None, _vnf('vnf-1'), request, None, None)
    assert healfleet.load(path)['leases'] == {}


def test_a_requested_heal_neither_takes_nor_needs_a_place(
        conf, tmp_path, monkeypatch):  # noqa: F811
    hooks, path = _hooks(conf, tmp_path)
    lim = healfleet.Limits(1, 1, 1, 1, 600, 3600)
    assert _admit(path, 'vnf-2', lim=lim) is None
    assert _rule(_admit(path, 'vnf-3', observed=(5, 5), lim=lim)) == \
        healfleet.RULE_PAUSED
    called = []
    monkeypatch.setattr(v1.LcmHooks, 'heal_start',
                        lambda *a, **k: called.append('heal_start'))
    hooks.heal_start(None, _vnf('vnf-1'),
                     types.SimpleNamespace(automatic=False), None, None)
    assert called == ['heal_start']
    assert list(healfleet.load(path)['leases']) == ['vnf-2']
