"""A drain refused by PodDisruptionBudgets names them
(:meth:`mgmt_driver.remote.kubectl.KubectlClient.drain`): kubectl prints only
"Cannot evict pod as it would violate the pod's disruption budget.", so
the client lists the node's pods and the budgets and names those that
allow no disruption and select a pod still there."""

import json

import pytest

from mgmt_driver.common import exceptions
from mgmt_driver.remote import kubectl
from tests.unit.test_kubectl import make_client

REFUSED = ('error when evicting pods/"web-a" -n "shop" (will retry after '
           '5s): Cannot evict pod as it would violate the pod\'s '
           'disruption budget.\nerror: unable to drain node "worker-1" due '
           'to error: error when evicting pods/"web-a" -n "shop": global '
           'timeout reached: 30s, continuing command...\n')


def pod(name, namespace, labels, owner='ReplicaSet'):
    return {'metadata': {'name': name, 'namespace': namespace,
                         'labels': labels,
                         'ownerReferences': [{'kind': owner}]},
            'status': {'phase': 'Running'}}


def pdb(name, namespace, selector, allowed, desired=2, healthy=2):
    return {'metadata': {'name': name, 'namespace': namespace},
            'spec': {'selector': selector},
            'status': {'disruptionsAllowed': allowed,
                       'desiredHealthy': desired, 'currentHealthy': healthy}}


def refused_drain(pods, budgets):
    client = make_client()
    client.conn.script(r' drain ', exit_code=1, stderr=REFUSED)
    client.conn.script(r'get pods -A', stdout=json.dumps({'items': pods}))
    client.conn.script(r'get poddisruptionbudgets -A',
                       stdout=json.dumps({'items': budgets}))
    return client


def test_a_drain_blocked_by_a_budget_names_it():
    client = refused_drain(
        [pod('web-a', 'shop', {'app': 'web', 'tier': 'front'}),
         pod('calico-x', 'kube-system', {'k8s-app': 'calico'},
             owner='DaemonSet')],
        [pdb('web-pdb', 'shop', {'matchLabels': {'app': 'web'}}, 0),
         # Allows a disruption: not the culprit.
         pdb('roomy', 'shop', {'matchLabels': {'tier': 'front'}}, 1),
         # Same labels, another namespace.
         pdb('web-pdb', 'other', {'matchLabels': {'app': 'web'}}, 0),
         # Selects only the DaemonSet pod, which drain leaves alone.
         pdb('calico', 'kube-system', {'matchLabels': {'k8s-app':
                                                       'calico'}}, 0),
         pdb('exprs', 'shop', {'matchExpressions': [
             {'key': 'tier', 'operator': 'In', 'values': ['front']},
             {'key': 'canary', 'operator': 'DoesNotExist'}]}, 0, 3, 3)])
    with pytest.raises(exceptions.DrainBlocked) as caught:
        client.drain('worker-1', timeout=30)
    message = str(caught.value)
    assert 'PodDisruptionBudget shop/exprs (needs 3 healthy pods, has 3), ' \
        'shop/web-pdb (needs 2 healthy pods, has 2) allows no ' \
        'disruption' in message
    assert 'other/' not in message and 'roomy' not in message
    assert 'calico' not in message.split('Command')[0]
    assert 'worker-1' in message and '10.0.0.11' in message
    assert isinstance(caught.value, exceptions.RemoteCommandFailed)


def test_without_a_readable_budget_list_the_drain_error_stands():
    client = make_client()
    client.conn.script(r' drain ', exit_code=1, stderr=REFUSED)
    client.conn.script(r'get poddisruptionbudgets', exit_code=1,
                       stderr='error: the server doesn\'t have a resource')
    client.conn.script(r'get pods', stdout='{"items": []}')
    with pytest.raises(exceptions.RemoteCommandFailed) as caught:
        client.drain('worker-1', timeout=30)
    assert not isinstance(caught.value, exceptions.DrainBlocked)
    assert 'disruption budget' in str(caught.value)


def test_other_drain_failures_do_not_list_budgets():
    client = make_client()
    client.conn.script(r' drain ', exit_code=1, stderr='error: cannot '
                       'delete Pods with local storage\n')
    with pytest.raises(exceptions.RemoteCommandFailed):
        client.drain('worker-1', timeout=30)
    assert len(client.conn.commands) == 1


def test_a_hostile_budget_name_is_escaped_and_bounded():
    client = refused_drain(
        [pod('web-a', 'shop', {'app': 'web'})],
        [pdb('\x1b[31m' + 'x' * 5000, 'shop', {}, 0)])
    with pytest.raises(exceptions.DrainBlocked) as caught:
        client.drain('worker-1', timeout=30)
    message = str(caught.value)
    assert '\x1b' not in message
    assert len(message) < 4000


@pytest.mark.parametrize('bad', [
    {'items': [pdb('a', 'shop', 'not-a-selector', 0)]},
    {'items': [dict(pdb('a', 'shop', {}, 0), status={
        'disruptionsAllowed': 'zero'})]},
])
def test_malformed_budgets_leave_the_drain_error(bad):
    client = make_client()
    client.conn.script(r' drain ', exit_code=1, stderr=REFUSED)
    client.conn.script(r'get pods -A', stdout=json.dumps(
        {'items': [pod('web-a', 'shop', {'app': 'web'})]}))
    client.conn.script(r'get poddisruptionbudgets', stdout=json.dumps(bad))
    with pytest.raises(exceptions.RemoteCommandFailed) as caught:
        client.drain('worker-1', timeout=30)
    assert not isinstance(caught.value, exceptions.DrainBlocked)


def test_blocking_budgets_match_namespace_and_labels():
    budgets = [kubectl.Budget('ns', 'b%d' % i, {'matchLabels': {
        'app': 'a%d' % i}}, 0, 1, 1) for i in range(300)]
    pods = [('ns', {'app': 'a7'}, False), ('ns', {'app': 'a7'}, True),
            ('other', {'app': 'a8'}, False), ('ns', {}, False)]
    assert [b.name for b in kubectl.blocking_budgets(pods, budgets)] == [
        'b7']


@pytest.mark.parametrize('selector', [
    'not-a-selector', {'matchExpressions': 'x'},
    {'matchExpressions': [{'key': 'a'}]}])
def test_a_malformed_selector_is_refused_when_the_budgets_are_read(selector):
    # The upgrade preflight matched selectors outside the parsing
    # context: a raw BadShape escaped; now the listing refuses it.
    client = make_client()
    client.conn.script(r'get poddisruptionbudgets', stdout=json.dumps(
        {'items': [pdb('a', 'shop', selector, 0)]}))
    with pytest.raises(exceptions.RemoteDataInvalid) as caught:
        client.budgets()
    assert 'items[0].spec.selector' in str(caught.value)
