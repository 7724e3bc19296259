"""The ordering rules of a rolling node replacement
(:mod:`mgmt_driver.operations.rolling`): etcd quorum, one node (so one
control-plane node) out at a time, disruption budgets, and the record a
retry continues from."""

import types

import pytest

from mgmt_driver.common import exceptions
from mgmt_driver.operations import rolling

M, W = 'master', 'worker'


def _order(*pairs):
    return [rolling.Step('vnfc-' + n, n, role) for n, role in pairs]


@pytest.mark.parametrize('masters, refused', [(1, True), (2, True),
                                              (3, False), (5, False)])
def test_a_master_is_replaced_only_where_etcd_keeps_quorum(masters, refused):
    names = ['m%d' % i for i in range(masters)]
    problems = rolling.check_plan(names, _order(('m0', M), ('w0', W)))
    assert bool(problems) == refused
    if refused:
        assert 'm0' in problems[0] and 'quorum' in problems[0]


def test_workers_only_need_no_quorum_rule():
    assert rolling.check_plan(['m0'], _order(('w0', W), ('w1', W))) == []


def test_a_node_named_twice_is_refused():
    assert rolling.check_plan(['m0', 'm1', 'm2'], _order(
        ('w0', W), ('w0', W))) == ['nodes named twice: w0']


def test_one_node_out_at_a_time():
    progress = rolling.Progress('op', _order(('w0', W), ('w1', W)),
                                {'w0': rolling.OUT})
    assert rolling.check_take_out(progress, 'w1', ['m0']) == [
        'one node at a time: w0 is still out of the cluster']
    assert rolling.check_take_out(progress, 'w0', ['m0']) == []


def test_one_master_at_a_time_and_never_below_quorum():
    masters = ['m0', 'm1', 'm2']
    progress = rolling.Progress('op', _order(('m0', M), ('m1', M)),
                                {'m0': rolling.OUT})
    problems = rolling.check_take_out(progress, 'm1', masters)
    assert problems[0].startswith('one node at a time: m0')
    assert 'leave 1 of 3 etcd members, below quorum 2' in problems[1]
    progress.set('m0', rolling.REPLACED)
    assert rolling.check_take_out(progress, 'm1', masters) == []


@pytest.mark.parametrize('direction, state, out', [
    (rolling.FORWARD, rolling.PENDING, True),
    (rolling.FORWARD, rolling.REPLACED, False),
    (rolling.FORWARD, rolling.OUT, False),
    (rolling.ROLLBACK, rolling.REPLACED, True),
    (rolling.ROLLBACK, rolling.PENDING, False)])
def test_only_a_node_not_at_the_wanted_image_is_taken_out(direction, state,
                                                          out):
    assert rolling.wants_out(direction, state) == out


def test_the_record_survives_a_round_trip_and_says_what_is_done():
    progress = rolling.Progress('op', _order(('w0', W), ('w1', W),
                                             ('w2', W)),
                                {'w0': rolling.REPLACED, 'w1': rolling.OUT})
    again = rolling.Progress.from_dict(progress.to_dict(), 'f')
    assert again.states == progress.states and again.order == progress.order
    assert again.summary() == ('replaced: w0; out of the cluster (VM being '
                               'replaced): w1; not replaced: w2')
    assert again.after('w1').node == 'w2' and again.after('w2') is None
    assert again.step_of_vnfc('vnfc-w1').node == 'w1'
    with pytest.raises(exceptions.MgmtDriverNotFound):
        again.step_of_vnfc('other')


def test_a_damaged_record_is_refused_naming_its_file():
    with pytest.raises(exceptions.InstanceRecordInvalid, match='the-file'):
        rolling.Progress.from_dict({'operation': 'op', 'order': [],
                                    'states': {}, 'direction': 'sideways'},
                                   'the-file')


# The steps, with the heal's halves and the cluster faked.


class _Drv:
    def __init__(self, blocked=()):
        self.calls, self.blocked = [], blocked
        self.pool = object()
        self.conf = types.SimpleNamespace(kubespray_mgmt=types.SimpleNamespace(
            rolling_gate_timeout=10))

    def step(self, text, *args):
        self.calls.append(('step', text % args))

    warn = step


@pytest.fixture
def steps(monkeypatch):
    drv = _Drv()
    def heal_begin(d, c, names, snapshot=True, lead=()):
        d.calls.append(('out', names))
        d.calls.append(('lead', list(lead)))
        if snapshot and set(names) & {'m0', 'm1', 'm2'}:
            d.calls.append(('snapshot', names))
    monkeypatch.setattr(rolling.lcm, 'heal_begin', heal_begin)
    monkeypatch.setattr(rolling.lcm, 'heal_finish',
                        lambda d, c, names, *a: d.calls.append(('in', names)))
    monkeypatch.setattr(rolling, 'gate', lambda d, c, n, p: d.calls.append(
        ('gate', n)))
    monkeypatch.setattr(rolling, '_budget_problems',
                        lambda d, c, n: list(d.blocked))
    cluster = types.SimpleNamespace(masters=[types.SimpleNamespace(name=m)
                                             for m in ('m0', 'm1', 'm2')])
    return drv, cluster


def _done(drv, kind):
    return [c[1] for c in drv.calls if c[0] == kind]


def test_take_out_then_bring_back_records_each_state(steps):
    drv, cluster = steps
    saved = []
    progress = rolling.Progress('op', _order(('w0', W), ('m0', M)))
    rolling.take_out(drv, cluster, progress, 'w0',
                     lambda p: saved.append(dict(p.states)))
    rolling.bring_back(drv, cluster, progress, 'w0',
                       lambda p: saved.append(dict(p.states)), 'vim', None)
    assert _done(drv, 'out') == [['w0']] and _done(drv, 'in') == [['w0']]
    assert _done(drv, 'gate') == ['w0']
    assert [s['w0'] for s in saved] == [rolling.OUT, rolling.REPLACED]


def test_a_retry_repeats_nothing_done(steps):
    drv, cluster = steps
    progress = rolling.Progress('op', _order(('w0', W)),
                                {'w0': rolling.REPLACED})
    rolling.take_out(drv, cluster, progress, 'w0', None)
    rolling.bring_back(drv, cluster, progress, 'w0', None, 'vim', None)
    assert not _done(drv, 'out') and not _done(drv, 'in')


def test_a_blocking_budget_stops_before_any_change(steps):
    drv, cluster = steps
    drv.blocked = ['draining w1 would be blocked by ns/pdb']
    progress = rolling.Progress('op', _order(('w0', W), ('w1', W)),
                                {'w0': rolling.REPLACED})
    with pytest.raises(exceptions.UpgradeGateClosed) as caught:
        rolling.take_out(drv, cluster, progress, 'w1', None)
    assert 'ns/pdb' in str(caught.value)
    assert 'replaced: w0' in str(caught.value)
    assert 'not replaced: w1' in str(caught.value)
    assert not _done(drv, 'out') and progress.state('w1') == rolling.PENDING


def test_a_second_master_is_not_taken_out_while_one_is(steps):
    drv, cluster = steps
    progress = rolling.Progress('op', _order(('m0', M), ('m1', M)),
                                {'m0': rolling.OUT})
    with pytest.raises(exceptions.UpgradeGateClosed, match='m0'):
        rolling.take_out(drv, cluster, progress, 'm1', None)
    assert not _done(drv, 'out')


def test_one_etcd_snapshot_before_the_first_master_of_each_direction(steps):
    """Kept in the record: a retry (a new script call reading it) takes
    none again; the rollback takes one before its own first master."""
    drv, cluster = steps
    progress = rolling.Progress('op', _order(('w0', W), ('m0', M),
                                             ('m1', M)))
    for node in ('w0', 'm0'):
        rolling.take_out(drv, cluster, progress, node, lambda p: None)
        rolling.bring_back(drv, cluster, progress, node, lambda p: None,
                           'vim', None)
    progress = rolling.Progress.from_dict(progress.to_dict(), 'f')
    rolling.take_out(drv, cluster, progress, 'm1', lambda p: None)
    assert _done(drv, 'out') == [['w0'], ['m0'], ['m1']]
    assert _done(drv, 'snapshot') == [['m0']]
    rolling.bring_back(drv, cluster, progress, 'm1', lambda p: None,
                       'vim', None)
    progress.direction = rolling.ROLLBACK
    for node in ('m1', 'm0'):
        rolling.take_out(drv, cluster, progress, node, lambda p: None)
        rolling.bring_back(drv, cluster, progress, node, lambda p: None,
                           'vim', None)
    assert _done(drv, 'snapshot') == [['m0'], ['m1']]


@pytest.mark.parametrize('direction, states, lead', [
    (rolling.FORWARD, {}, ['w0', 'm2', 'm1', 'm0']),
    (rolling.FORWARD, {'m0': rolling.REPLACED, 'm1': rolling.OUT},
     ['m0', 'w0', 'm2', 'm1']),
    (rolling.ROLLBACK, {'m0': rolling.REPLACED, 'm1': rolling.REPLACED},
     ['m2', 'w0', 'm1', 'm0']),
])
def test_the_lead_is_the_done_nodes_then_the_others_last_first(
        direction, states, lead):
    progress = rolling.Progress('op', _order(('m0', M), ('m1', M), ('m2', M),
                                             ('w0', W)), states, direction)
    assert progress.lead() == lead


def test_a_master_taken_out_leaves_the_lead_to_the_heal(steps):
    drv, cluster = steps
    progress = rolling.Progress('op', _order(('m0', M), ('m1', M), ('m2', M)))
    rolling.take_out(drv, cluster, progress, 'm0', lambda p: None)
    assert _done(drv, 'lead') == [['m2', 'm1', 'm0']]


def test_led_so_two_of_three_masters_are_first_when_taken_out():
    """kubespray's inventory order through a rolling replacement of
    three masters (a removed first master leaves the lead first, the
    master back joins last): only the first of the order and the one
    put first then are first when their turn comes; with the old order
    (the next master first) every one of them was."""
    def firsts(led):
        order = ['m0', 'm1', 'm2']
        progress = rolling.Progress('op', _order(*[(n, M) for n in order]))
        count = 0
        for node in list(order):
            if order[0] == node:
                count += 1
                rank = {n: i for i, n in enumerate(progress.lead() if led
                                                   else ())}
                order = sorted(order[1:], key=lambda n: rank.get(n, 9))
            else:
                order.remove(node)
            order.append(node)
            progress.set(node, rolling.REPLACED)
        return count
    assert (firsts(True), firsts(False)) == (2, 3)
