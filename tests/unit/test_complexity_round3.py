"""Issue 39 item 4: linear time in the code added since round 2.

The same kind of test as :mod:`tests.unit.test_complexity` and
:mod:`tests.unit.test_complexity_round2`: the input grows 8-fold and the
work, counted by :mod:`tests.unit.work` (never timed), must grow
linearly.  First the PodDisruptionBudget matching of the upgrade
preflight (:func:`mgmt_driver.operations.gates.drain_blockers`) and of a
refused eviction (:func:`mgmt_driver.remote.kubectl.blocking_budgets`),
which scanned a budget's ``In`` list once per pod and every budget of a
namespace once per pod (30,000 pods against one budget of 1,000,000
values: past 20 s of CPU); their results are checked against the old
definitions, kept here.  Then one test per module added since round 2
that reads remote or tenant data in a loop.
"""

import json

import hypothesis
from hypothesis import strategies as st

from mgmt_driver.adapters import listing
from mgmt_driver.common import safetext
from mgmt_driver.model import absence
from mgmt_driver.model import core
from mgmt_driver.model import nodes
from mgmt_driver.model import params
from mgmt_driver.operations import autoheal
from mgmt_driver.operations import certificates
from mgmt_driver.operations import etcdsnapshots
from mgmt_driver.operations import gates
from mgmt_driver.operations import rolling
from mgmt_driver.remote import kubectl
from tests.unit import params_data
from tests.unit import work
from tests.unit.test_complexity import SETTINGS
from tests.unit.test_complexity_round2 import _addresses

# ------------------------------------------------- budget selectors --

OPERATORS = ('In', 'NotIn', 'Exists', 'DoesNotExist')


def _pod(i, labels, node='w1', namespace='ns'):
    return kubectl.PodInfo(namespace, 'p%d' % i, node, labels, False)


def _one_long_in_list(n, operator='In'):
    """n pods against one budget whose ``In`` list holds n values, none
    of them the pods' (the issue's case, scaled down)."""
    values = [work.Key('v%d' % i) for i in range(n)]
    selector = {'matchExpressions': [{'key': work.Key('app'),
                                      'operator': operator,
                                      'values': values}]}
    pods = [_pod(i, {work.Key('app'): work.Key('x%d' % i)})
            for i in range(n)]
    return pods, [kubectl.Budget('ns', 'b', selector, 0, 1, 1)]


def _many_budgets(n, how='matchLabels'):
    """n pods and n budgets of one namespace, each budget selecting
    one pod by a label (or an ``In`` list of one value)."""
    pods = [_pod(i, {work.Key('app'): work.Key('a%d' % i)})
            for i in range(n)]

    def selector(i):
        if how == 'matchLabels':
            return {'matchLabels': {work.Key('app'): work.Key('a%d' % i)}}
        return {'matchExpressions': [{'key': work.Key('app'),
                                      'operator': 'In',
                                      'values': [work.Key('a%d' % i)]}]}
    return pods, [kubectl.Budget('ns', 'b%d' % i, selector(i), 0, 1, 1)
                  for i in range(n)]


def _blockers(made):
    pods, budgets = made
    return gates.drain_blockers(pods, budgets, ['w1'])


def _refused(made):
    pods, budgets = made
    return kubectl.blocking_budgets(
        [(p.namespace, p.labels, p.evacuated) for p in pods], budgets)


@SETTINGS
@hypothesis.given(operator=st.sampled_from(['In', 'NotIn']))
def test_a_long_in_list_is_matched_linearly_in_the_preflight(operator):
    assert work.growth(_blockers, lambda n: _one_long_in_list(n, operator),
                       100) < work.MAX_GROWTH


@SETTINGS
@hypothesis.given(operator=st.sampled_from(['In', 'NotIn']))
def test_a_long_in_list_is_matched_linearly_after_a_refusal(operator):
    assert work.growth(_refused, lambda n: _one_long_in_list(n, operator),
                       100) < work.MAX_GROWTH


@SETTINGS
@hypothesis.given(how=st.sampled_from(['matchLabels', 'In']))
def test_many_budgets_of_a_namespace_are_matched_linearly(how):
    def make(n):
        return _many_budgets(n, how)
    assert work.growth(_blockers, make, 50) < work.MAX_GROWTH
    assert work.growth(_refused, make, 50) < work.MAX_GROWTH


def _old_selects(selector, labels):
    """The definition before the fix: lists scanned."""
    if selector is None:
        return False
    wanted = selector.get('matchLabels') or {}
    if any(labels.get(k) != v for k, v in wanted.items()):
        return False
    for expr in selector.get('matchExpressions') or []:
        key, op, values = expr['key'], expr['operator'], expr.get(
            'values') or []
        present = key in labels
        if not {'In': present and labels[key] in values,
                'NotIn': not present or labels[key] not in values,
                'Exists': present, 'DoesNotExist': not present}.get(op):
            return False
    return True


def _old_drain_blockers(pods, budgets, names):
    found = {}
    for pod in pods:
        if pod.node not in names or pod.evacuated or not pod.labels:
            continue
        chosen = [b for b in budgets if b.namespace == pod.namespace
                  and _old_selects(b.selector, pod.labels)]
        if len(chosen) > 1:
            what = 'several PodDisruptionBudgets (%s): evictions refused' % (
                ', '.join(sorted('%s/%s' % (b.namespace, b.name)
                                 for b in chosen)))
        elif chosen and chosen[0].allowed <= 0:
            what = '%s, allows no disruption' % chosen[0]
        else:
            continue
        found.setdefault(pod.node, {}).setdefault(what, []).append(
            '%s/%s' % (pod.namespace, pod.name))
    return {node: [(what, sorted(refs)) for what, refs in sorted(
        entries.items())] for node, entries in found.items()}


def _old_blocking(pods, budgets):
    found = {}
    for namespace, labels, evacuated in pods:
        for budget in budgets:
            if (budget.allowed <= 0 and budget.namespace == namespace
                    and labels and not evacuated
                    and _old_selects(budget.selector, labels)):
                found[(budget.namespace, budget.name)] = budget
    return [found[key] for key in sorted(found)]


# Few keys, values, namespaces and nodes, so that they collide often.
_LABELS = st.dictionaries(st.sampled_from('abc'), st.sampled_from('xyz'),
                          max_size=3)
_EXPR = st.fixed_dictionaries({
    'key': st.sampled_from('abc'), 'operator': st.sampled_from(
        OPERATORS + ('Bogus',)),
    'values': st.lists(st.sampled_from(['x', 'y', 'z', 7]), max_size=3)})
_SELECTOR = st.none() | st.fixed_dictionaries({}, optional={
    'matchLabels': _LABELS, 'matchExpressions': st.lists(_EXPR,
                                                         max_size=3)})
_PODS = st.lists(st.builds(
    kubectl.PodInfo, st.sampled_from(['n1', 'n2']), st.sampled_from('pq'),
    st.sampled_from(['w1', 'w2', 'm1']), _LABELS, st.booleans()),
    max_size=8)
_BUDGETS = st.lists(st.builds(
    kubectl.Budget, st.sampled_from(['n1', 'n2']), st.sampled_from('bcd'),
    _SELECTOR, st.integers(0, 1), st.just(1), st.just(1)), max_size=5)
_SAME = hypothesis.settings(max_examples=150, deadline=None,
                            derandomize=True)


@_SAME
@hypothesis.given(pods=_PODS, budgets=_BUDGETS)
def test_blockers_are_those_of_the_old_definition(pods, budgets):
    names = ['w1', 'm1']
    assert gates.drain_blockers(pods, budgets, names) == \
        _old_drain_blockers(pods, budgets, names)
    listed = [(p.namespace, p.labels, p.evacuated) for p in pods]
    assert kubectl.blocking_budgets(listed, budgets) == _old_blocking(
        listed, budgets)


def test_the_work_count_tells_the_old_matching_from_the_new():
    # The measure can fail: the old definition is over the bound.
    def old(made):
        pods, budgets = made
        return _old_drain_blockers(pods, budgets, ['w1'])
    assert work.growth(old, _one_long_in_list, 25) > work.MAX_GROWTH
    assert work.growth(old, _many_budgets, 20) > work.MAX_GROWTH


# ------------------------------------------ modules added since round 2 --

_LB = core.NodeAddress('external_lb', '10.40.0.1', '10.40.0.1')


def _names(n, prefix='worker-'):
    return [work.Key('%s%d' % (prefix, i)) for i in range(n)]


def test_a_rolling_plan_is_checked_linearly():
    # Tacker's order of the VNFCs to replace: the tenant's request.
    def make(n):
        return ['m0', 'm1', 'm2'], [rolling.Step('v%d' % i, name, 'worker')
                                    for i, name in enumerate(_names(n))]
    assert work.growth(lambda a: rolling.check_plan(*a), make,
                       100) < work.MAX_GROWTH


def test_an_automatic_heal_is_checked_linearly():
    def make(n):
        spec = params.parse_params(params_data.minimal(),
                                   need_cp_names=False)
        cluster = nodes.build_nodes(spec, [
            core.NodeAddress('master', ip, ip)
            for ip in _addresses(3, '10.30.0.0')] + [
            core.NodeAddress('worker', ip, ip) for ip in _addresses(n)] + [
            _LB])
        ready = {name: 'True' for name in cluster.names}
        workers = [w.name for w in cluster.workers]
        for name in workers[::4]:
            ready[name] = 'False'
        return cluster, ready, workers[::4]
    assert work.growth(lambda a: autoheal.check_heal(*a, 100), make,
                       40) < work.MAX_GROWTH


def test_the_upgrade_gates_are_linear_in_the_node_count():
    def make(n):
        names = _names(n)
        infos = [kubectl.NodeInfo(name, (), 'True' if i % 3 else 'False',
                                  'v1.30.1', '', {}, bool(i % 2))
                 for i, name in enumerate(names)]
        return infos, names

    def check(made):
        infos, names = made
        gates.node_problems(infos, names, excused=names[::2],
                            version=(1, 30, 1))
        gates.upgrade_drains(infos, names, uncordoned=names[::3])
        gates.undrained(names, gates.readiness(infos), names[::5])
        gates.worker_batches(names, '20%')
    assert work.growth(check, make, 200) < work.MAX_GROWTH


def test_etcd_answers_are_read_linearly():
    def make(n):
        return json.dumps([{'endpoint': 'https://10.0.0.%d:2379' % i,
                            'health': bool(i % 2), 'error': 'e' * 40}
                           for i in range(n)]), ['m%d' % i for i in range(n)]

    def read(made):
        text, members = made
        health = gates.parse_etcd_health(text, 'master')
        return gates.etcd_problems(members, members, health)
    assert work.growth(read, make, 100) < work.MAX_GROWTH


def test_snapshot_listings_are_read_and_pruned_linearly():
    def make(n):
        return ''.join('%d etcd-2026%04dT000000Z-manual.db\n' % (
            1000 + i, 101 + i) for i in range(n))

    def read(text):
        return etcdsnapshots.to_prune(etcdsnapshots.parse_listing(text),
                                      3, 10 ** 9)
    assert work.growth(read, make, 300) < work.MAX_GROWTH


def test_certificate_answers_and_records_are_read_linearly():
    # Bounded (MAX_CERTIFICATES, MAX_RECORDED): the shape up to the
    # bound.
    def make(n):
        item = {'name': 'apiserver', 'expirationDate':
                '2027-01-01T00:00:00Z', 'residualTime': 86400 * 30,
                'missing': False, 'externallyManaged': False}
        return json.dumps({'certificates': [item] * n,
                           'certificateAuthorities': [item] * n}), \
            json.dumps({'request': 'r1', 'done': _names(5 * n)})

    def read(made):
        answer, record = made
        found = certificates.parse_expiration(answer, 'master')
        sec = certificates.section([certificates.master_entry(
            'm%d' % i, 'h', found) for i in range(3)], 60)
        certificates.format_section(sec)
        return certificates.parse_record(record)
    assert work.growth(read, make, 12) < work.MAX_GROWTH


def test_absent_worker_names_are_checked_linearly():
    def make(n):
        spec = params.parse_params(params_data.minimal(),
                                   need_cp_names=False)
        cluster = nodes.build_nodes(spec, [
            core.NodeAddress('master', '10.30.0.1', '10.30.0.1')] + [
            core.NodeAddress('worker', ip, ip) for ip in _addresses(n)] + [
            _LB])
        return cluster, ','.join(w.name for w in cluster.workers)

    def check(made):
        cluster, text = made
        return absence.check_absent(cluster, absence.parse_names(
            text, 'absent_workers'), 'absent_workers')
    assert work.growth(check, make, 60) < work.MAX_GROWTH


@SETTINGS
@hypothesis.given(char=st.sampled_from(['a', '\x1b', '\u202e', 'é']))
def test_remote_text_is_clipped_and_escaped_linearly(char):
    def make(n):
        return [char * 50] * n + [char * (50 * n)]

    def clip_all(items):
        safetext.clip_list(items, count=len(items), width=10 ** 6)
        return [safetext.escape(item) for item in items]
    assert work.growth(clip_all, make, 10) < work.MAX_GROWTH


def test_the_instance_list_is_formatted_linearly():
    def make(n):
        return [{'instance_id': 'i%d' % i, 'error': None, 'vims': [
            {'kind': 'tacker', 'id': 'v', 'name': 'vim'}],
            'ansible_server': '10.0.0.1:22', 'masters': 3, 'workers': i,
            'gateways': 1, 'last_operation': {'operation': 'heal',
                                              'result': 'ok'}}
            for i in range(n)]
    assert work.growth(listing.format_text, make, 100) < work.MAX_GROWTH
