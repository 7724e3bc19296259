"""The local site's model of node liveness, pod deletion and
PodDisruptionBudgets (:mod:`mgmt_localsite.clusterstate`), one
part at a time, in process: the clock and the kubelet probe are given.
The fake kubectl's drain over this model runs in
tests/functional/test_liveness_double.py.
"""

import pytest
from mgmt_localsite import clusterstate as cs

GRACE, PERIOD = 40.0, 5.0


def cluster(*workers):
    """A running cluster: control-plane node cp1, the given workers."""
    state = cs.init_cluster(cs.empty_state(), 'c', 'v1.33.5', 'ca')
    for name in ('cp1',) + workers:
        state['nodes'][name] = {
            'name': name, 'address': '127.0.43.1', 'roles': ['worker'],
            'labels': {}, 'taints': [], 'schedulable': True, 'ready': True,
            'created': 0.0, 'kubelet_version': 'v1.33.5',
            'ssh': '127.0.43.1:22'}
    return state


def add(state, name, node, labels=None, owner='ReplicaSet', phase=None):
    pod = cs.make_pod(name, 'default', node, owner,
                      name.rsplit('-', 1)[0] if owner else None,
                      labels=labels)
    if phase:
        pod['phase'] = phase
    state['pods'].append(pod)
    return pod


class Probe:
    """The kubelets that answer; counts the looks."""

    def __init__(self, dead=()):
        self.dead = set(dead)
        self.calls = 0

    def __call__(self, node):
        self.calls += 1
        return node['name'] not in self.dead


def budget(state, name, labels, **spec):
    spec['selector'] = {'matchLabels': labels}
    obj = {'kind': cs.PDB_KIND, 'metadata': {
        'name': name, 'namespace': 'default'}, 'spec': spec}
    state['objects'][cs.object_key(cs.PDB_KIND, 'default', name)] = obj
    return obj


# --- the node lifecycle controller ------------------------------------

def test_a_dead_kubelet_makes_its_node_not_ready_after_the_grace_period():
    state = cluster('w1', 'w2')
    probe = Probe()
    assert cs.watch_nodes(state, probe, now=0.0) == []
    probe.dead.add('w1')
    assert cs.watch_nodes(state, probe, now=10.0) == []  # first seen dead
    assert cs.kubelet_dead(state['nodes']['w1'])
    assert cs.is_ready(state['nodes']['w1'])
    cs.watch_nodes(state, probe, now=10.0 + GRACE - 1)
    assert cs.is_ready(state['nodes']['w1'])
    assert cs.watch_nodes(state, probe, now=10.0 + GRACE) == ['w1']
    node = cs.node_object(state['nodes']['w1'])
    assert node['status']['conditions'] == [
        {'type': 'Ready', 'status': 'Unknown'}]
    assert {'key': 'node.kubernetes.io/unreachable',
            'effect': 'NoExecute'} in node['spec']['taints']
    assert cs.is_ready(state['nodes']['w2'])
    # Nothing is scheduled on it while it is NotReady.
    assert 'w1' not in [n['name'] for n in cs.schedulable_nodes(state)]
    probe.dead.clear()
    assert cs.watch_nodes(state, probe, now=100.0) == ['w1']
    assert cs.is_ready(state['nodes']['w1'])
    assert not cs.kubelet_dead(state['nodes']['w1'])


def test_the_controller_looks_at_a_kubelet_once_per_monitor_period():
    state = cluster('w1')
    probe = Probe()
    cs.watch_nodes(state, probe, now=0.0)
    assert probe.calls == 2
    cs.watch_nodes(state, probe, now=PERIOD - 0.1)
    assert probe.calls == 2
    cs.watch_nodes(state, probe, now=PERIOD)
    assert probe.calls == 4


def test_a_stopped_kubelet_is_dead_whatever_the_probe_says():
    state = cluster('w1')
    state['nodes']['w1']['kubelet_stopped'] = True
    cs.watch_nodes(state, Probe(), now=0.0)
    cs.watch_nodes(state, Probe(), now=GRACE)
    assert not cs.is_ready(state['nodes']['w1'])


# --- deleting pods ------------------------------------------------------

def test_a_pod_on_a_live_node_goes_at_once_and_is_replaced():
    state = cluster('w1', 'w2')
    pod = add(state, 'web-1', 'w1')
    assert cs.delete_pod(state, pod, grace=-1, now=0.0) is True
    [clone] = [p for p in state['pods'] if p['owner_name'] == 'web']
    assert clone['node'] in ('cp1', 'w2') and clone['name'] != 'web-1'


def test_a_pod_on_a_dead_node_stays_terminating_until_the_node_goes():
    state = cluster('w1', 'w2')
    pod = add(state, 'web-1', 'w1', labels={'app': 'web'})
    cs.watch_nodes(state, Probe(dead={'w1'}), now=0.0)
    assert cs.delete_pod(state, pod, grace=-1, now=5.0) is False
    assert pod['deleting'] == 5.0 + cs.DEFAULT_SETTINGS['pod_grace_period']
    assert cs.pod_object(pod)['metadata']['deletionTimestamp']
    # Its ReplicaSet replaced it already (with its labels), elsewhere.
    clones = [p for p in state['pods'] if p['name'] != 'web-1']
    assert [(c['node'] != 'w1', c['labels']) for c in clones] == [
        (True, {'app': 'web'})]
    assert cs.delete_pod(state, pod, grace=-1) is False  # no second clone
    assert len(state['pods']) == 2
    cs.node_gone(state, 'w1')
    assert [p['name'] for p in state['pods']] == [clones[0]['name']]


def test_a_forced_deletion_does_not_wait_for_a_dead_kubelet():
    state = cluster('w1', 'w2')
    pod = add(state, 'web-1', 'w1')
    cs.watch_nodes(state, Probe(dead={'w1'}), now=0.0)
    assert cs.delete_pod(state, pod, grace=0) is True
    assert pod not in state['pods']


def test_a_kubelet_that_returns_ends_its_terminating_pods():
    state = cluster('w1', 'w2')
    pod = add(state, 'web-1', 'w1')
    cs.watch_nodes(state, Probe(dead={'w1'}), now=0.0)
    cs.delete_pod(state, pod, grace=-1)
    cs.watch_nodes(state, Probe(), now=PERIOD)
    assert pod not in state['pods']


# --- PodDisruptionBudgets ---------------------------------------------

@pytest.mark.parametrize('selector, labels, expected', [
    ({}, {}, True),
    (None, {'a': '1'}, False),
    ({'matchLabels': {'a': '1'}}, {'a': '1', 'b': '2'}, True),
    ({'matchLabels': {'a': '1'}}, {'a': '2'}, False),
    ({'matchExpressions': [{'key': 'a', 'operator': 'In',
                            'values': ['1', '2']}]}, {'a': '2'}, True),
    ({'matchExpressions': [{'key': 'a', 'operator': 'NotIn',
                            'values': ['1']}]}, {}, True),
    ({'matchExpressions': [{'key': 'a', 'operator': 'Exists'}]}, {}, False),
    ({'matchExpressions': [{'key': 'a', 'operator': 'DoesNotExist'}]},
     {'a': ''}, False),
])
def test_label_selectors(selector, labels, expected):
    assert cs.selector_matches(selector, labels) is expected


@pytest.mark.parametrize('spec, desired, allowed', [
    ({'minAvailable': 2}, 2, 1),
    ({'minAvailable': 3}, 3, 0),
    ({'minAvailable': '50%'}, 2, 1),       # ceil(1.5)
    ({'maxUnavailable': 1}, 2, 1),
    ({'maxUnavailable': 0}, 3, 0),
    ({'maxUnavailable': '10%'}, 2, 1),     # 3 - ceil(0.3)
])
def test_budget_status(spec, desired, allowed):
    state = cluster('w1', 'w2')
    for i, node in enumerate(('w1', 'w2', 'cp1')):
        add(state, 'web-%d' % i, node, labels={'app': 'web'})
    add(state, 'db-1', 'w1', labels={'app': 'db'})
    status = cs.budget_status(state, budget(state, 'web', {'app': 'web'},
                                            **spec))
    assert status == {'expectedPods': 3, 'currentHealthy': 3,
                      'desiredHealthy': desired,
                      'disruptionsAllowed': allowed}


def test_pods_on_a_not_ready_node_are_not_healthy():
    state = cluster('w1', 'w2')
    add(state, 'web-1', 'w1', labels={'app': 'web'})
    add(state, 'web-2', 'w2', labels={'app': 'web'})
    pdb = budget(state, 'web', {'app': 'web'}, minAvailable=1)
    cs.watch_nodes(state, Probe(dead={'w1'}), now=0.0)
    cs.watch_nodes(state, Probe(dead={'w1'}), now=GRACE)
    assert cs.budget_status(state, pdb)['currentHealthy'] == 1


def test_an_eviction_is_refused_with_429_naming_the_budget():
    state = cluster('w1', 'w2')
    pod = add(state, 'web-1', 'w1', labels={'app': 'web'})
    add(state, 'web-2', 'w2', labels={'app': 'web'})
    budget(state, 'web-pdb', {'app': 'web'}, minAvailable=2)
    code, message, cause = cs.eviction_refusal(state, pod)
    assert (code, message) == (429, cs.EVICTION_REFUSED)
    assert cause == ('The disruption budget web-pdb needs 2 healthy pods '
                     'and has 2 currently')


def test_an_eviction_the_budget_allows_goes_ahead():
    state = cluster('w1', 'w2')
    pod = add(state, 'web-1', 'w1', labels={'app': 'web'})
    add(state, 'web-2', 'w2', labels={'app': 'web'})
    budget(state, 'web-pdb', {'app': 'web'}, maxUnavailable=1)
    assert cs.eviction_refusal(state, pod) is None


def test_pods_no_budget_guards_are_evictable():
    state = cluster('w1')
    bare = add(state, 'web-1', 'w1', labels=None)
    other = add(state, 'db-1', 'w1', labels={'app': 'db'})
    pending = add(state, 'web-2', None, labels={'app': 'web'},
                  phase='Pending')
    budget(state, 'web-pdb', {}, minAvailable='100%')  # selects all
    assert cs.eviction_refusal(state, bare) is None    # no labels
    assert cs.eviction_refusal(state, pending) is None  # not running
    assert cs.eviction_refusal(state, other)[0] == 429


def test_two_budgets_over_one_pod_are_a_server_error():
    state = cluster('w1')
    pod = add(state, 'web-1', 'w1', labels={'app': 'web'})
    budget(state, 'a', {'app': 'web'}, maxUnavailable=1)
    budget(state, 'b', {'app': 'web'}, maxUnavailable=1)
    assert cs.eviction_refusal(state, pod)[0] == 500


def test_an_unhealthy_pod_is_evictable_only_while_its_budget_is_met():
    state = cluster('w1', 'w2', 'w3')
    dead = add(state, 'web-1', 'w1', labels={'app': 'web'})
    add(state, 'web-2', 'w2', labels={'app': 'web'})
    add(state, 'web-3', 'w3', labels={'app': 'web'})
    pdb = budget(state, 'web', {'app': 'web'}, minAvailable=2)
    cs.watch_nodes(state, Probe(dead={'w1'}), now=0.0)
    cs.watch_nodes(state, Probe(dead={'w1'}), now=GRACE)
    assert cs.eviction_refusal(state, dead) is None  # 2 healthy >= 2
    pdb['spec']['minAvailable'] = 3
    assert cs.eviction_refusal(state, dead)[0] == 429
    pdb['spec']['unhealthyPodEvictionPolicy'] = 'AlwaysAllow'
    assert cs.eviction_refusal(state, dead) is None


def test_deleting_a_terminating_pod_again_with_less_grace_brings_it_forward():
    state = cluster('w1', 'w2')
    pod = add(state, 'web-1', 'w1')
    cs.watch_nodes(state, Probe(dead={'w1'}), now=0.0)
    cs.delete_pod(state, pod, grace=300, now=10.0)
    cs.delete_pod(state, pod, grace=1, now=20.0)
    assert pod['deleting'] == 21.0
    cs.delete_pod(state, pod, grace=300, now=30.0)
    assert pod['deleting'] == 21.0
    assert len(state['pods']) == 2  # one replacement only
    cs.delete_pod(state, pod, grace=0, now=40.0)
    assert pod not in state['pods']


def test_a_look_by_the_controller_changes_no_node_a_test_reads(tmp_path):
    """Every fake kubectl call runs the controller, which notes when it
    probed each kubelet; Site.nodes() leaves that bookkeeping out, so a
    command on one node leaves the others equal (Tacker's relabel test
    compares them)."""
    import mgmt_localsite as localsite

    state_dir = str(tmp_path / 'state')
    with cs.transaction(state_dir) as txn:
        txn.state = cluster('w1')
    site = localsite.Site(tmp_path)
    before = site.nodes()
    with cs.transaction(state_dir) as txn:
        cs.watch_nodes(txn.state, Probe(), now=1000.0)
    assert site.nodes() == before
    with cs.transaction(state_dir) as txn:
        cs.watch_nodes(txn.state, Probe(dead=('w1',)), now=2000.0)
    assert site.nodes()['cp1'] == before['cp1']
    assert 'probed' in site.state()['nodes']['cp1']  # it did look
