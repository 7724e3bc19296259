"""The fake kubectl's drain under node liveness and PodDisruptionBudgets,
as kubectl defines it (``k8s.io/kubectl/pkg/drain``):

- an eviction a budget refuses (HTTP 429) is retried until --timeout,
  then drain fails; --disable-eviction deletes instead, past the budget;
- on a node whose kubelet is dead, evicted pods get a deletionTimestamp
  but never terminate, so drain waits until --timeout, unless
  --grace-period=0 (a forced deletion) or --skip-wait-for-delete-timeout
  lets it stop waiting;
- a node whose VM (its sshd) stops answering turns NotReady once the
  node monitor grace period has passed.

Each test seeds its own small cluster (no sshd, no Ansible: seconds),
but the last, which runs the double's upgrade-cluster.yml (kubespray
v2.31.0's pre-upgrade drain, its drain_fallback_* second drain with
--disable-eviction) through real Ansible on an sshd.  The model itself
is unit-tested in tests/unit/test_localsite_liveness.py.
"""

import json
import pathlib
import socket
import time

import mgmt_localsite as localsite
import pytest

from tests.functional import test_kubespray_double as double

#: A loopback address of this test's range (127.0.43.0/24).
VM = '127.0.43.9'
#: The hosts of the upgrade test (cp1, w1), served by one sshd.
HOSTS = ('127.0.43.20', '127.0.43.21')
#: Short controller timings: the tests wait seconds, not minutes.
FAST = {'node_monitor_grace_period': 1.0, 'node_monitor_period': 0.0,
        'eviction_retry': 0.1}


@pytest.fixture
def seeded(tmp_path):
    site = localsite.materialise(tmp_path / 'site')
    site.seed([('cp1', '127.0.43.20')],
              [('w1', '127.0.43.21'), ('w2', '127.0.43.22')])
    site.settings(**FAST)
    return site


def kubectl(site, *args):
    return site.tool('kubectl', *args, check=False)


def ready(site, node):
    item = json.loads(kubectl(site, 'get', 'node', node, '-o',
                              'json').stdout)
    return item['status']['conditions'][0]['status']


def wait_not_ready(site, node, limit=20.0):
    """Seconds until *node* is NotReady (polling as an operator would)."""
    start = time.monotonic()
    while ready(site, node) == 'True':
        assert time.monotonic() - start < limit, '%s stayed Ready' % node
        time.sleep(0.2)
    return time.monotonic() - start


def web_pods(site, budget_min=None):
    """Two replicas of web (one on w1), optionally under a budget."""
    site.add_pod('web-a1', 'w1', labels={'app': 'web'})
    site.add_pod('web-b2', 'w2', labels={'app': 'web'})
    if budget_min is not None:
        site.add_budget('web-pdb', {'app': 'web'}, min_available=budget_min)


def drain(site, node, *flags):
    return kubectl(site, 'drain', node, '--ignore-daemonsets',
                   '--delete-emptydir-data', '--force', *flags)


def names_on(site, node):
    return [p['name'] for p in site.pods_on(node)]


def test_a_budget_refuses_evictions_until_the_drain_times_out(seeded):
    web_pods(seeded, budget_min=2)
    status = json.loads(kubectl(seeded, 'get', 'pdb', 'web-pdb', '-o',
                                'json').stdout)['status']
    assert status['disruptionsAllowed'] == 0
    result = drain(seeded, 'w1', '--timeout=1s')
    assert result.returncode == 1
    assert ("Cannot evict pod as it would violate the pod's disruption "
            "budget.") in result.stderr
    assert 'error when evicting pods/"web-a1" -n "default": global ' \
        'timeout reached: 1s' in result.stderr
    assert 'web-a1' in names_on(seeded, 'w1')
    assert seeded.nodes()['w1']['schedulable'] is False  # left cordoned
    # A budget that allows one disruption lets the same drain through.
    seeded.delete_budget('web-pdb')
    seeded.add_budget('web-pdb', {'app': 'web'}, max_unavailable=1)
    assert drain(seeded, 'w1', '--timeout=5s').returncode == 0
    assert 'web-a1' not in names_on(seeded, 'w1')


def test_disable_eviction_deletes_past_the_budget(seeded):
    web_pods(seeded, budget_min=2)
    result = drain(seeded, 'w1', '--timeout=5s', '--disable-eviction')
    assert result.returncode == 0, result.stderr
    assert 'pod/web-a1 deleted' in result.stdout
    assert 'web-a1' not in names_on(seeded, 'w1')


def test_a_drain_of_a_node_whose_kubelet_is_dead_waits_until_timeout(seeded):
    web_pods(seeded)
    seeded.stop_kubelet('w1')
    waited = wait_not_ready(seeded, 'w1')
    assert waited < 10
    result = drain(seeded, 'w1', '--timeout=1s')
    assert result.returncode == 1
    assert 'error when waiting for pod "web-a1" in namespace "default" to ' \
        'terminate: global timeout reached: 1s' in result.stderr
    [pod] = [p for p in seeded.pods_on('w1') if p['name'] == 'web-a1']
    assert pod['deleting']  # Terminating, for good
    listing = kubectl(seeded, 'get', 'pods', '-o', 'wide').stdout
    assert 'Terminating' in listing.split('web-a1', 1)[1].split('\n')[0]
    # Its ReplicaSet has a new replica on a live node already.
    assert sum(p['owner_name'] == 'web' for p in seeded.state()['pods']
               if not p.get('deleting')) == 2
    # The same drain with the pod's deletion long past still waits
    # unless told to skip it; --skip-wait-for-delete-timeout does.
    skipped = drain(seeded, 'w1', '--timeout=5s', '--grace-period=1',
                    '--skip-wait-for-delete-timeout=1')
    assert skipped.returncode == 0, skipped.stderr


def test_a_forced_drain_of_a_dead_node_does_not_wait(seeded):
    web_pods(seeded)
    seeded.stop_kubelet('w1')
    wait_not_ready(seeded, 'w1')
    started = time.monotonic()
    result = drain(seeded, 'w1', '--timeout=120s', '--grace-period=0')
    assert result.returncode == 0, result.stderr
    # A drain that waited would take its whole timeout; one that does
    # not takes seconds, even beside busy processes: half the timeout
    # tells them apart on any machine.
    assert time.monotonic() - started < 60
    assert names_on(seeded, 'w1') == [
        p['name'] for p in seeded.pods_on('w1')
        if p['owner_kind'] == 'DaemonSet']


def test_an_unhealthy_pod_is_refused_while_its_budget_is_short(seeded):
    """The pods of a dead node are not Ready; under a budget that the
    loss already breaks, even the forced drain is refused (429)."""
    web_pods(seeded, budget_min=2)
    seeded.stop_kubelet('w1')
    wait_not_ready(seeded, 'w1')
    result = drain(seeded, 'w1', '--timeout=1s', '--grace-period=0')
    assert result.returncode == 1
    assert 'disruption budget' in result.stderr


def test_a_node_whose_vm_stops_answering_goes_not_ready(seeded):
    """The site knows a kubelet is alive by its VM's sshd: here a
    listening socket stands in for it."""
    listener = socket.create_server((VM, 0))
    port = listener.getsockname()[1]
    seeded.tool('kube-double', 'join', '--node', 'w3', '--address', VM,
                '--worker', '--ssh', '%s:%d' % (VM, port))
    try:
        time.sleep(1.5)  # longer than the grace period
        assert ready(seeded, 'w3') == 'True'
    finally:
        listener.close()
    waited = wait_not_ready(seeded, 'w3')
    # Within the grace period (1 s) of the first look that found it dead,
    # plus the polling.
    assert waited < 5
    row = [line for line in kubectl(seeded, 'get', 'nodes').stdout.split(
        '\n') if line.startswith('w3 ')]
    assert 'NotReady' in row[0]


@pytest.fixture(scope='module')
def server():
    yield from double.serve(HOSTS)


def test_upgrade_drain_under_a_budget_fails_or_falls_back(server, tmp_path):
    """kubespray's pre-upgrade drain is refused by the budget: the node
    is uncordoned again and the run fails (upgrade_node_uncordon_after_
    drain_failure, upgrade_node_fail_if_drain_fails); with
    drain_fallback_enabled, the second drain deletes past the budget
    (--disable-eviction) after the first one used up its retries, and
    the upgrade goes on."""
    site = localsite.materialise(pathlib.Path(server.scratch) / (
        'site-' + tmp_path.name[-8:]), owner=server.user)
    site.seed([('cp1', HOSTS[0])], [('w1', HOSTS[1])])
    site.settings(**FAST)
    # One replica under minAvailable 1: the budget never allows an
    # eviction.
    site.add_pod('web-a1', 'w1', labels={'app': 'web'})
    site.add_budget('web-pdb', {'app': 'web'}, min_available=1)
    cluster = double.Cluster(server, site, {'cp1': HOSTS[0],
                                            'w1': HOSTS[1]}, ['cp1'], ['w1'])
    quick = {'drain_timeout': '1s', 'drain_retries': 0,
             'drain_retry_delay_seconds': 0, 'serial': 1}
    double.failed(cluster.play('upgrade-cluster.yml', extra=quick),
                  'Failed to drain node w1')
    assert site.nodes()['w1']['schedulable'] is True  # uncordoned again
    assert 'web-a1' in names_on(site, 'w1')
    assert [s['node'] for s in site.state()['upgrades']] == ['cp1']

    double.ok(cluster.play('upgrade-cluster.yml', extra=dict(
        quick, drain_retries=1, drain_fallback_enabled=True,
        drain_fallback_timeout='10s')))
    steps = {s['node']: s for s in site.state()['upgrades']}
    assert steps['w1']['cordoned'] and steps['w1']['workload_pods'] == []
    assert 'web-a1' not in names_on(site, 'w1')
    assert all(n['schedulable'] for n in site.nodes().values())
