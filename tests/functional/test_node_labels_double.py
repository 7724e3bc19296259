"""The kubespray double re-applies ``node_labels`` and ``node_taints`` on
every run, as kubespray's node-label and node-taint roles do.

kubespray runs ``kubectl label node N KEY=VALUE --overwrite=true`` and
``kubectl taint node N TAINT... --overwrite=true`` in cluster.yml (every
k8s_cluster host), scale.yml (kube_node) and both node plays of
upgrade-cluster.yml: a value changed with kubectl since is set back, and
labels and taints the inventory does not name stay.  Real ansible-playbook
and sshd; the hosts are 127.0.24.x.
"""

import pytest

from tests.functional.test_kubespray_double import Cluster
from tests.functional.test_kubespray_double import build_once
from tests.functional.test_kubespray_double import ok
from tests.functional.test_kubespray_double import restored
from tests.functional.test_kubespray_double import serve

HOSTS = {'cp1': '127.0.24.20', 'w1': '127.0.24.21', 'w2': '127.0.24.22'}
HOST_VARS = {
    'cp1': {'node_labels': {'tier': 'control'}},
    'w1': {'node_labels': {'pool': 'a', 'example.com/zone': 'z1'},
           'node_taints': ['gpu=yes:NoSchedule']},
    # kubespray applies node_labels only when it is a mapping.
    'w2': {'node_labels': ['pool=ignored']},
}


@pytest.fixture(scope='module')
def server():
    """One sshd for this module's hosts."""
    yield from serve(tuple(HOSTS.values()))


def _cluster(server, site):
    return Cluster(server, site, HOSTS, ['cp1'], ['w1', 'w2'],
                   host_vars={k: dict(v) for k, v in HOST_VARS.items()})


@pytest.fixture(scope='module')
def built(server):
    """cluster.yml has built cp1 (control plane), w1 and w2 (workers),
    once for the module (the state right after it is saved)."""
    yield from build_once(server, _cluster)


@pytest.fixture
def cluster(server, built):
    """The cluster as cluster.yml left it: restored, not built again,
    so that each test starts from it, in any order."""
    yield from restored(server, built, _cluster)


def kubectl(site, *args):
    result = site.tool('kubectl', *args, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


def drift(site):
    """Day-2 changes with kubectl: one inventory label and one inventory
    taint get other values; one label and one taint are added."""
    kubectl(site, 'label', 'node', 'w1', 'pool=b', 'extra=kept',
            '--overwrite')
    kubectl(site, 'taint', 'node', 'w1', 'gpu=no:NoSchedule',
            'other=kept:NoExecute', '--overwrite')
    kubectl(site, 'label', 'node', 'cp1', 'tier=changed', '--overwrite')


def taints(node):
    return sorted('%s=%s:%s' % (t['key'], t.get('value', ''), t['effect'])
                  for t in node['taints'])


def assert_w1_back(nodes):
    """w1 has node_labels and node_taints again, and what was added."""
    labels = nodes['w1']['labels']
    assert (labels['pool'], labels['example.com/zone']) == ('a', 'z1')
    assert labels['extra'] == 'kept'
    assert taints(nodes['w1']) == ['gpu=yes:NoSchedule',
                                   'other=kept:NoExecute']


def applied(site, playbook):
    return sorted((e['node'], e['playbook'])
                  for e in site.state().get('labelled', [])
                  if e['playbook'] == playbook)


def test_cluster_and_scale_runs_put_the_inventory_values_back(cluster):
    site = cluster.site
    w1 = site.nodes()['w1']
    assert w1['labels']['pool'] == 'a'
    assert taints(w1) == ['gpu=yes:NoSchedule']
    assert 'pool' not in site.nodes()['w2']['labels']

    drift(site)
    ok(cluster.play('cluster.yml'))
    nodes = site.nodes()
    assert_w1_back(nodes)
    assert nodes['cp1']['labels']['tier'] == 'control'
    # The control-plane taint kubeadm set is not in node_taints: it stays.
    assert taints(nodes['cp1']) == [
        'node-role.kubernetes.io/control-plane=:NoSchedule']
    # Both runs, on the hosts with node_labels or node_taints (a list
    # as node_labels is not).
    assert applied(site, 'cluster.yml') == [
        ('cp1', 'cluster.yml'), ('cp1', 'cluster.yml'),
        ('w1', 'cluster.yml'), ('w1', 'cluster.yml')]
    entry = [e for e in site.state()['labelled'] if e['node'] == 'w1'][-1]
    assert entry['host'] == 'w1'
    assert entry['taints'] == ['gpu=yes:NoSchedule']
    assert entry['labels'] == {'pool': 'a', 'example.com/zone': 'z1'}

    # scale.yml: the workers of the run only, never the control plane.
    drift(site)
    ok(cluster.play('scale.yml', '--limit=w1'))
    nodes = site.nodes()
    assert_w1_back(nodes)
    assert nodes['cp1']['labels']['tier'] == 'changed'
    assert applied(site, 'scale.yml') == [('w1', 'scale.yml')]


def test_upgrade_puts_the_inventory_values_back_on_every_node(cluster):
    site = cluster.site
    drift(site)
    ok(cluster.play('upgrade-cluster.yml',
                    extra={'kube_version': '1.34.0'}))
    nodes = site.nodes()
    assert nodes['cp1']['labels']['tier'] == 'control'
    assert_w1_back(nodes)
    assert applied(site, 'upgrade-cluster.yml') == [
        ('cp1', 'upgrade-cluster.yml'), ('w1', 'upgrade-cluster.yml')]
    # After the node's upgrade, before it is uncordoned.
    upgraded = {u['node']: u['time'] for u in site.state()['upgrades']}
    for entry in site.state()['labelled']:
        if entry['playbook'] == 'upgrade-cluster.yml':
            assert entry['time'] > upgraded[entry['node']]
    assert all(n['schedulable'] for n in nodes.values())
