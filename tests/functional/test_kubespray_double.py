"""The kubespray test double and fake kubectl, on a real sshd.

The real ``ansible-playbook`` runs the double (mgmt_driver/localsite)
exactly as the driver will run kubespray: cwd = the checkout, ``-i`` an
inventory file, ``-e @file``, ``--become``.  Every host is a loopback
address of one sshd; 127.0.0.29 is never served (a dead node).
"""

import base64
import json
import os
import pathlib
import shutil
import subprocess
import sys
import uuid

import mgmt_localsite as localsite
import pytest
import yaml
from mgmt_localsite import etcd
from mgmt_localsite import sshd as sshd_site

from mgmt_driver.remote import ssh

ADDRESSES = ('127.0.0.20', '127.0.0.21', '127.0.0.22', '127.0.0.23')
DEAD = '127.0.0.29'
ANSIBLE_PLAYBOOK = os.environ.get('KMGMT_ANSIBLE_PLAYBOOK') or str(
    pathlib.Path(sys.executable).parent / 'ansible-playbook')
LIMIT_REFUSED = ("Kubespray does not support '--limit' without a populated "
                 "facts cache")


def serve(addresses):
    """A started sshd on *addresses* (key logins; passwords as root),
    cleaned up after: the body of a module's ``server`` fixture."""
    reason = sshd_site.available()
    if reason:
        pytest.skip(reason)
    if not os.access(ANSIBLE_PLAYBOOK, os.X_OK):
        pytest.skip('ansible-playbook not found at %s' % ANSIBLE_PLAYBOOK)
    site = sshd_site.Sshd(addresses=addresses)
    try:
        yield site.start()
    finally:
        site.cleanup()


@pytest.fixture(scope='module')
def server():
    """One sshd for this module's hosts."""
    yield from serve(ADDRESSES)


@pytest.fixture
def site(server):
    """A fresh site, owned by the SSH user, inside the sshd's scratch."""
    root = pathlib.Path(server.scratch) / ('site-' + uuid.uuid4().hex[:8])
    site = localsite.materialise(root, owner=server.user)
    yield site
    site.stop_etcd()


class Cluster:
    """A hand-written inventory and ansible-playbook runs against a site.

    :param hosts: {name: address}; groups are lists of names.
    """

    def __init__(self, server, site, hosts, control_plane, workers,
                 etcd=None, host_vars=None, password=False):
        self.server, self.site = server, site
        self.hosts = dict(hosts)
        self.groups = {'kube_control_plane': list(control_plane),
                       'etcd': list(control_plane if etcd is None else etcd),
                       'kube_node': list(workers), 'calico_rr': []}
        self.host_vars = host_vars or {}
        self.password = password
        self.dir = site.root / ('run-' + uuid.uuid4().hex[:6])
        self.dir.mkdir()
        self.inventory = self.dir / 'hosts.yaml'
        self.write_inventory()

    def write_inventory(self):
        creds = {'ansible_user': self.server.user,
                 'ansible_port': self.server.port}
        if self.password:
            creds['ansible_password'] = self.server.password
        else:
            creds['ansible_ssh_private_key_file'] = self.server.client_key
        hosts = {name: dict({'ansible_host': address, 'ip': address,
                             'access_ip': address},
                            **self.host_vars.get(name, {}))
                 for name, address in self.hosts.items()}
        children = {group: {'hosts': {name: {} for name in names}}
                    for group, names in self.groups.items()}
        children['k8s_cluster'] = {'children': {
            'kube_control_plane': {}, 'kube_node': {}, 'calico_rr': {}}}
        self.inventory.write_text(yaml.safe_dump({'all': {
            'vars': creds, 'hosts': hosts, 'children': children}},
            sort_keys=False))

    def play(self, playbook, *args, extra=None, become=True):
        """Run *playbook* like the driver does; the CompletedProcess."""
        argv = [ANSIBLE_PLAYBOOK, '-i', str(self.inventory)]
        if extra is not None:
            path = self.dir / ('vars-%s.yaml' % uuid.uuid4().hex[:6])
            path.write_text(yaml.safe_dump(extra))
            argv += ['-e', '@%s' % path]
        if become:
            argv += ['--become', '--become-user=root']
        env = dict(os.environ, ANSIBLE_NOCOLOR='1', ANSIBLE_FORCE_COLOR='0')
        return subprocess.run(argv + list(args) + [playbook],
                              cwd=self.site.checkout,
                              stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, env=env, timeout=300, check=False)

    def last_run(self):
        return self.site.runs()[-1]


def ok(result):
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr
    return result


def failed(result, message):
    assert result.returncode != 0, result.stdout[-3000:]
    assert message in result.stdout + result.stderr, (
        result.stdout[-4000:] + result.stderr)
    return result


def roles(site):
    return {name: node['roles'] for name, node in site.nodes().items()}


# --- playbooks -----------------------------------------------------------

def _three_masters(server, site):
    """cp1, cp2 and cp3 on the control plane and in etcd; cp3 in
    kube_node too (a control-plane node that runs workloads)."""
    hosts = {'cp1': ADDRESSES[0], 'cp2': ADDRESSES[1], 'cp3': ADDRESSES[2]}
    # Explicit member names: kubespray's default etcd<index> would rename
    # members when the group is reordered (the double refuses that).
    host_vars = {'cp%d' % i: {'etcd_member_name': 'etcd%d' % i}
                 for i in (1, 2, 3)}
    host_vars['cp3']['node_labels'] = {'tier': 'edge'}
    return Cluster(server, site, hosts, ['cp1', 'cp2', 'cp3'], ['cp3'],
                   host_vars=host_vars)


def build_once(server, make, extra=None):
    """Body of a module's ``built`` fixture: a fresh site where
    cluster.yml built ``make(server, site)`` (extra vars *extra*), once;
    yields ``(site, snapshot)``, the double's state right after it
    (Site.snapshot).  Its etcd members are stopped until a test restores
    them (other tests' sites use the same addresses)."""
    scratch = pathlib.Path(server.scratch)
    site = localsite.materialise(
        scratch / ('site-' + uuid.uuid4().hex[:8]), owner=server.user)
    try:
        ok(make(server, site).play('cluster.yml', extra=extra))
        snapshot = site.snapshot(scratch / ('built-' + uuid.uuid4().hex[:8]))
    finally:
        site.stop_etcd()
    yield site, snapshot


def restored(server, built, make):
    """Body of a test's fixture: the cluster :func:`build_once` built,
    restored (not built again: each test starts from the same state,
    whatever ran before), as ``make(server, site)``."""
    site, snapshot = built
    site.restore(snapshot)
    try:
        yield make(server, site)
    finally:
        site.stop_etcd()


@pytest.fixture(scope='module')
def built(server):
    """:func:`_three_masters` built once (kube_version 1.33.5)."""
    yield from build_once(server, _three_masters,
                          extra={'kube_version': '1.33.5'})


@pytest.fixture
def three_masters(server, built):
    """:func:`_three_masters` as cluster.yml left it."""
    yield from restored(server, built, _three_masters)


def _members(site):
    """{ID: (name, peer URLs)} as the site's real etcd lists them."""
    return {m['ID']: (m.get('name'), m.get('peerURLs'))
            for m in etcd.member_list(etcd.running_endpoints(
                str(site.etcd_dir)))}


def test_restore_brings_back_state_facts_runs_and_etcd(three_masters,
                                                       built):
    """What the tests below start from: Site.restore undoes a node's
    deletion, a forgotten fact cache, a playbook's record and two etcd
    members' stops (one reset: its data deleted); the members come back
    with their IDs, serving, as the site's user."""
    site = three_masters.site
    before = (site.observed_state(), site.runs(), site.cached_hosts(),
              _members(site))
    assert len(before[3]) == 3 and before[1][0]['playbook'] == 'cluster.yml'
    site.tool('kubectl', 'delete', 'node', 'cp3')
    site.clear_fact_cache()
    with site.runs_log.open('a') as log:
        log.write('{"playbook": "scale.yml"}\n')
    etcd.stop(str(site.etcd_dir), ADDRESSES[2], wipe=True)
    etcd.stop(str(site.etcd_dir), ADDRESSES[1])
    assert (site.observed_state(), site.runs(), site.cached_hosts()) != \
        before[:3]

    site.restore(built[1])
    assert (site.observed_state(), site.runs(), site.cached_hosts(),
            _members(site)) == before
    for address in ADDRESSES[:3]:
        assert etcd.health(address) == 'healthy'
        pid = etcd.running_pid(str(site.etcd_dir), address)
        assert os.stat('/proc/%d' % pid).st_uid == os.stat(
            site.state_dir).st_uid


def test_cluster_yml_builds_and_replaces_the_first_control_plane(
        three_masters):
    cluster = three_masters  # built by cluster.yml (kube_version 1.33.5)
    site = cluster.site
    assert roles(site) == {'cp1': ['control-plane'],
                           'cp2': ['control-plane'],
                           'cp3': ['control-plane', 'worker']}
    nodes = site.nodes()
    assert nodes['cp3']['labels']['tier'] == 'edge'
    assert nodes['cp2']['taints'] and not nodes['cp3']['taints']
    assert nodes['cp3']['address'] == ADDRESSES[2]
    assert sorted(site.etcd_members()) == ['etcd1', 'etcd2', 'etcd3']
    assert {p['owner_name'] for p in site.pods_on('cp2')} == {
        'calico-node', 'kube-proxy', 'nodelocaldns', 'cp2'}
    run = cluster.last_run()
    assert run['playbook'] == 'cluster.yml' and run['ok']
    assert run['touched'] == ['cp1', 'cp2', 'cp3']
    assert run['become'] and run['become_user'] == 'root'

    # cp1 died: kubespray's procedure moves it to the end of the groups,
    # removes it without contacting it, then re-adds it with cluster.yml.
    cluster.groups['kube_control_plane'] = ['cp2', 'cp3', 'cp1']
    cluster.groups['etcd'] = ['cp2', 'cp3', 'cp1']
    cluster.hosts['cp1'] = DEAD
    etcd.kill_at(ADDRESSES[0])  # its etcd member died with it
    cluster.host_vars['cp1'] = {'ip': ADDRESSES[0],
                                'access_ip': ADDRESSES[0],
                                'etcd_member_name': 'etcd1'}
    cluster.write_inventory()
    ok(cluster.play('remove-node.yml', extra={
        'node': 'cp1', 'skip_confirmation': True, 'reset_nodes': False,
        'allow_ungraceful_removal': True}))
    assert 'cp1' not in site.nodes()
    assert sorted(site.etcd_members()) == ['etcd2', 'etcd3']
    assert 'cp1' not in cluster.last_run()['touched']

    # The re-created VM must not come first: that would init a new cluster.
    cluster.hosts['cp1'] = ADDRESSES[0]
    cluster.host_vars['cp1'] = {'etcd_member_name': 'etcd1'}
    cluster.groups['kube_control_plane'] = ['cp1', 'cp2', 'cp3']
    cluster.write_inventory()
    failed(cluster.play('cluster.yml'),
           'append new control-plane nodes at the end of kube_control_plane')
    cluster.groups['kube_control_plane'] = ['cp2', 'cp3', 'cp1']
    cluster.write_inventory()
    # kubeadm init on cp1 wrote its own address into cluster-info, which
    # every join reads: the guide's "edit cluster-info" step comes first.
    assert site.cluster_info_server() == 'https://%s:6443' % ADDRESSES[0]
    failed(cluster.play('cluster.yml'),
           "couldn't validate the identity of the API Server")
    assert 'cp1' not in site.nodes()
    site.set_cluster_info_server('https://%s:6443' % ADDRESSES[1])
    ok(cluster.play('cluster.yml'))
    assert roles(site)['cp1'] == ['control-plane']
    assert sorted(site.etcd_members()) == ['etcd1', 'etcd2', 'etcd3']


def test_scale_limit_needs_facts_and_converges_after_a_failure(
        server, site):
    site.seed([('cp1', ADDRESSES[0])], [('w1', ADDRESSES[1])])
    hosts = {'cp1': ADDRESSES[0], 'w1': ADDRESSES[1], 'w2': ADDRESSES[2],
             'w3': ADDRESSES[3]}
    cluster = Cluster(server, site, hosts, ['cp1'], ['w1', 'w2', 'w3'])

    failed(cluster.play('scale.yml', '--limit=w2,w3'), LIMIT_REFUSED)
    assert set(site.nodes()) == {'cp1', 'w1'}
    assert not os.path.exists(site.checkout / 'facts.yml')

    ok(cluster.play('playbooks/facts.yml'))
    assert site.cached_hosts() == ['cp1', 'w1', 'w2', 'w3']
    assert cluster.last_run()['touched'] == ['cp1', 'w1', 'w2', 'w3']

    site.inject_failure('scale.yml', 'w3')
    failed(cluster.play('scale.yml', '--limit=w2,w3'),
           'injected failure (kubespray test double)')
    assert site.pending_failures() == []

    ok(cluster.play('scale.yml', '--limit=w2,w3'))
    assert set(site.nodes()) == {'cp1', 'w1', 'w2', 'w3'}
    # cp1 outside the limit only answers the join discovery (delegated).
    assert cluster.last_run()['touched'] == ['cp1', 'w2', 'w3']
    assert cluster.last_run()['limit'] == 'w2,w3'

    # A control-plane node cannot be added by scale.yml.
    cluster.hosts['cp2'] = ADDRESSES[3]
    cluster.groups['kube_control_plane'].append('cp2')
    cluster.write_inventory()
    failed(cluster.play('scale.yml', '--limit=cp2'), 'use cluster.yml')
    assert 'cp2' not in site.nodes()


def test_fact_cache_entries_expire_with_the_checkouts_timeout(
        server, site):
    site.seed([('cp1', ADDRESSES[0])], [('w1', ADDRESSES[1])])
    cluster = Cluster(server, site, {'cp1': ADDRESSES[0], 'w1': ADDRESSES[1],
                                     'w2': ADDRESSES[2]}, ['cp1'],
                      ['w1', 'w2'])
    ok(cluster.play('playbooks/facts.yml', '--limit=cp1,w1'))
    assert site.cached_hosts() == ['cp1', 'w1']
    timeout = site.fact_cache_timeout()
    assert timeout == 86400  # kubespray's since v2.20

    # Old but within the timeout: still a valid entry.
    site.age_fact_cache(timeout - 600)
    ok(cluster.play('scale.yml', '--limit=w2'))
    assert set(site.nodes()) == {'cp1', 'w1', 'w2'}

    # Past the timeout: Ansible treats the entry as missing, and the
    # limited run stops before it changes anything, naming the host.
    site.age_fact_cache(timeout + 60, hosts=['w1'])
    result = failed(cluster.play('scale.yml', '--limit=w2'), LIMIT_REFUSED)
    assert 'not cached: w1' in result.stdout
    assert cluster.last_run()['touched'] == ['w2']  # facts of the limit
    ok(cluster.play('playbooks/facts.yml', '--limit=w1'))
    assert site.fact_cache_ages()['w1'] < 600
    ok(cluster.play('scale.yml', '--limit=w2'))


def test_an_unreachable_host_stops_facts_for_every_host(server, site):
    cluster = Cluster(server, site, {'cp1': ADDRESSES[0], 'w1': DEAD,
                                     'w2': ADDRESSES[2]}, ['cp1'],
                      ['w1', 'w2'])
    ok(cluster.play('playbooks/facts.yml', '--limit=cp1'))
    failed(cluster.play('cluster.yml'), 'UNREACHABLE')
    run = cluster.last_run()
    assert run['unreachable'] == ['w1']
    # any_errors_fatal: nothing was installed anywhere.
    assert site.state() is None
    assert set(run['touched']) == {'cp1', 'w1', 'w2'}


def test_removed_etcd_members_peer_url_comes_from_cached_facts(
        three_masters):
    cluster = three_masters  # cluster.yml cached every host's facts
    site = cluster.site
    cluster.hosts['cp3'] = DEAD  # its VM is gone; its facts are cached
    etcd.kill_at(ADDRESSES[2])
    cluster.write_inventory()
    removal = {'node': 'cp3', 'skip_confirmation': True,
               'reset_nodes': False, 'allow_ungraceful_removal': True}

    # kubespray (v2.30+) takes the peer URL from main_access_ip, a cached
    # fact: after the cache expired the removal cannot find it.
    site.age_fact_cache(site.fact_cache_timeout() + 60, hosts=['cp3'])
    failed(cluster.play('remove-node.yml', extra=removal),
           "'main_access_ip' is undefined")
    assert sorted(site.etcd_members()) == ['etcd1', 'etcd2', 'etcd3']

    # Given in the inventory (below cached facts in precedence), it is
    # found again.
    cluster.host_vars['cp3'].update(main_access_ip=ADDRESSES[2],
                                    main_ip=ADDRESSES[2])
    cluster.write_inventory()
    ok(cluster.play('remove-node.yml', extra=removal))
    assert sorted(site.etcd_members()) == ['etcd1', 'etcd2']
    assert 'cp3' not in site.nodes()


def test_remove_node_refusals(server, site):
    site.seed([('cp1', ADDRESSES[0])], [('w1', ADDRESSES[1])])
    cluster = Cluster(server, site, {'cp1': ADDRESSES[0],
                                     'w1': ADDRESSES[1]}, ['cp1'], ['w1'])
    failed(cluster.play('remove-node.yml'),
           'No nodes specified for removal')
    assert cluster.last_run()['touched'] == []
    failed(cluster.play('remove-node.yml', extra={'node': 'w1'}),
           'Delete nodes confirmation failed')
    failed(cluster.play('remove-node.yml', extra={
        'node': 'cp1', 'skip_confirmation': True}),
        'is the first host of kube_control_plane')
    failed(cluster.play('remove-node.yml', '-e', 'node=w1',
                        '-e', 'skip_confirmation=true'),
           'Known booleans are set as strings: skip_confirmation')
    assert set(site.nodes()) == {'cp1', 'w1'}


def test_first_plays_refuse_what_the_release_refuses(server, site):
    """kubespray v2.31.0 stops in its first plays, before contacting a
    host, for a Kubernetes version older than its checksums list and
    for an ansible-core outside [2.18.0, 2.19.0)."""
    cluster = Cluster(server, site, {'cp1': ADDRESSES[0]}, ['cp1'], [])
    failed(cluster.play('cluster.yml', extra={'kube_version': '1.32.9'}),
           'only support newer version of Kubernetes than 1.33.0 - You are '
           'trying to apply 1.32.9')
    assert site.state() is None
    # This machine's ansible-core is in the range; a range that excludes
    # it (extra vars win over play vars) shows the check runs first.
    failed(cluster.play('scale.yml', extra={
        'maximal_ansible_version': '2.18.0'}),
        'Ansible must be between 2.18.0 and 2.18.0 exclusive')
    assert cluster.last_run()['touched'] == []
    ok(cluster.play('cluster.yml', extra={'kube_version': '1.33.0'}))
    assert site.nodes()['cp1']['kubelet_version'] == 'v1.33.0'


def test_remove_node_drains_resets_and_deletes(server, site):
    site.seed([('cp1', ADDRESSES[0])],
              [('w1', ADDRESSES[1]), ('w2', ADDRESSES[2])])
    site.add_pod('web-1', 'w1', emptydir=True)
    cluster = Cluster(server, site, {'cp1': ADDRESSES[0], 'w1': ADDRESSES[1],
                                     'w2': ADDRESSES[2]}, ['cp1'],
                      ['w1', 'w2'])
    site.inject_failure('remove-node.yml')
    failed(cluster.play('remove-node.yml',
                        extra={'node': 'w1', 'skip_confirmation': True}),
           'injected failure')
    assert not site.nodes()['w1']['ready']  # reset, not yet deleted
    ok(cluster.play('remove-node.yml',
                    extra={'node': 'w1', 'skip_confirmation': True}))
    assert set(site.nodes()) == {'cp1', 'w2'}
    web = [p for p in site.state()['pods'] if p['owner_name'] == 'web']
    assert [p['node'] for p in web] == ['w2']
    # Facts are gathered on every cluster host, as kubespray does.
    assert cluster.last_run()['touched'] == ['cp1', 'w1', 'w2']


def test_remove_unreachable_node(server, site):
    site.seed([('cp1', ADDRESSES[0])], [('w1', ADDRESSES[1])])
    cluster = Cluster(server, site, {'cp1': ADDRESSES[0], 'w1': DEAD},
                      ['cp1'], ['w1'])
    removal = {'node': 'w1', 'skip_confirmation': True}
    result = cluster.play('remove-node.yml', extra=removal)
    assert result.returncode != 0 and 'w1' in cluster.last_run()[
        'unreachable']
    assert 'w1' in site.nodes()

    ok(cluster.play('remove-node.yml', extra=dict(
        removal, reset_nodes=False, allow_ungraceful_removal=True)))
    assert set(site.nodes()) == {'cp1'}
    assert cluster.last_run()['touched'] == ['cp1']


def test_old_layout_facts_and_reset(server):
    root = pathlib.Path(server.scratch) / ('old-' + uuid.uuid4().hex[:8])
    site = localsite.materialise(root, layout='v2.21', owner=server.user)
    assert (site.checkout / 'facts.yml').is_file()
    assert (site.checkout / 'remove-node.yml').is_file()
    assert not (site.checkout / 'playbooks').exists()
    password = bool(server.password and shutil.which('sshpass'))
    cluster = Cluster(server, site, {'cp1': ADDRESSES[0]}, ['cp1'], [],
                      password=password)
    ok(cluster.play('facts.yml'))
    assert site.cached_hosts() == ['cp1']
    ok(cluster.play('cluster.yml', '--syntax-check', 'scale.yml',
                    'remove-node.yml', 'reset.yml'))
    site.seed([('cp1', ADDRESSES[0])])
    ok(cluster.play('reset.yml', extra={'skip_confirmation': True}))
    assert site.state() is None


def test_materialise_rejects_unknown_layout(tmp_path):
    with pytest.raises(ValueError):
        localsite.materialise(tmp_path / 'x', layout='v2.15')


# --- fake kubectl ----------------------------------------------------------

@pytest.fixture
def seeded(tmp_path):
    site = localsite.materialise(tmp_path / 'site')
    site.seed([('cp1', '127.0.0.20')],
              [('w1', '127.0.0.21'), ('w2', '127.0.0.22')])
    return site


def kubectl(site, *args, input=None):
    return site.tool('kubectl', '--kubeconfig', '/etc/kubernetes/admin.conf',
                     *args, input=input, check=False)


def test_kubectl_get_nodes(seeded):
    result = kubectl(seeded, 'get', 'nodes', '-o', 'json')
    items = json.loads(result.stdout)['items']
    assert [i['metadata']['name'] for i in items] == ['cp1', 'w1', 'w2']
    assert kubectl(seeded, 'get', 'nodes', '-o', 'name').stdout.split() == [
        'node/cp1', 'node/w1', 'node/w2']
    missing = kubectl(seeded, 'get', 'node', 'w9')
    assert missing.returncode == 1
    assert 'nodes "w9" not found' in missing.stderr
    assert 'v1.' in kubectl(seeded, 'version', '--client').stdout


def test_kubectl_static_pods_are_mirror_pods(seeded):
    pods = json.loads(kubectl(seeded, 'get', 'pods', '-n', 'kube-system',
                              '-o', 'json', '--field-selector',
                              'spec.nodeName=cp1').stdout)['items']
    static = [p['metadata'] for p in pods
              if p['metadata']['ownerReferences'][0]['kind'] == 'Node']
    assert len(static) == 3
    # kubectl drain and the driver know a static pod by this annotation.
    assert all('kubernetes.io/config.mirror' in m['annotations']
               for m in static)


def test_kubectl_cordon_drain_delete(seeded):
    seeded.add_pod('web-1', 'w1')
    seeded.add_pod('cache-1', 'w1', emptydir=True)
    assert kubectl(seeded, 'cordon', 'w2').stdout.strip() == (
        'node/w2 cordoned')
    refused = kubectl(seeded, 'drain', 'w1', '--ignore-daemonsets')
    assert refused.returncode == 1
    assert 'cannot delete Pods with local storage' in refused.stderr
    kubectl(seeded, 'uncordon', 'w2')
    drained = kubectl(seeded, 'drain', 'w1', '--ignore-daemonsets',
                      '--delete-emptydir-data', '--timeout=30s',
                      '--grace-period', '10')
    assert drained.returncode == 0, drained.stderr
    assert 'node/w1 drained' in drained.stdout
    pods = json.loads(kubectl(seeded, 'get', 'pods', '-A', '-o', 'json',
                              '--field-selector',
                              'spec.nodeName=w1').stdout)['items']
    kinds = {p['metadata']['ownerReferences'][0]['kind'] for p in pods}
    assert kinds == {'DaemonSet'}
    assert seeded.nodes()['w1']['schedulable'] is False
    assert kubectl(seeded, 'delete', 'node', 'w1').stdout.strip() == (
        'node "w1" deleted')
    assert 'w1' not in seeded.nodes()


def test_kubectl_drain_times_out_on_a_stuck_pod(seeded):
    seeded.add_pod('guarded-1', 'w2', stuck=True)
    seeded.settings(eviction_retry=0.1)
    result = kubectl(seeded, 'drain', 'w2', '--ignore-daemonsets',
                     '--delete-emptydir-data', '--timeout=1s')
    assert result.returncode == 1
    assert 'global timeout reached: 1s' in result.stderr
    assert 'guarded-1' in [p['name'] for p in seeded.pods_on('w2')]


def test_kubectl_apply_and_read_token(seeded):
    # Long enough that a loaded machine never fills it before the check.
    seeded.settings(token_delay=600)
    manifests = {'apiVersion': 'v1', 'kind': 'List', 'items': [
        {'apiVersion': 'v1', 'kind': 'ServiceAccount',
         'metadata': {'name': 'vim-admin', 'namespace': 'kube-system'}},
        {'apiVersion': 'rbac.authorization.k8s.io/v1',
         'kind': 'ClusterRoleBinding', 'metadata': {'name': 'vim-admin'},
         'roleRef': {'apiGroup': 'rbac.authorization.k8s.io',
                     'kind': 'ClusterRole', 'name': 'cluster-admin'},
         'subjects': [{'kind': 'ServiceAccount', 'name': 'vim-admin',
                       'namespace': 'kube-system'}]},
        {'apiVersion': 'v1', 'kind': 'Secret', 'metadata': {
            'name': 'vim-admin-token', 'namespace': 'kube-system',
            'annotations': {
                'kubernetes.io/service-account.name': 'vim-admin'}},
         'type': 'kubernetes.io/service-account-token'}]}
    applied = kubectl(seeded, 'apply', '-f', '-',
                      input=json.dumps(manifests))
    assert applied.stdout.split('\n')[:2] == [
        'serviceaccount/vim-admin created',
        'clusterrolebinding.rbac.authorization.k8s.io/vim-admin created']
    token_path = ['get', 'secret', 'vim-admin-token', '-n', 'kube-system',
                  '-o', 'jsonpath={.data.token}']
    assert kubectl(seeded, *token_path).stdout == ''  # not filled yet
    seeded.settings(token_delay=0)
    token = base64.b64decode(kubectl(seeded, *token_path).stdout).decode()
    assert token.startswith('eyJ')
    ca = kubectl(seeded, 'get', 'secret', 'vim-admin-token', '-n',
                 'kube-system', '-o', r'jsonpath={.data.ca\.crt}').stdout
    assert b'BEGIN CERTIFICATE' in base64.b64decode(ca)
    again = kubectl(seeded, 'apply', '-f', '-', input=json.dumps(manifests))
    assert again.stdout.count('unchanged') == 3
    assert base64.b64decode(kubectl(seeded, *token_path).stdout).decode() \
        == token


def test_kubectl_label_removal(seeded):
    assert kubectl(seeded, 'label', 'node', 'w1', 'pool=a', 'zone=z1'
                   ).stdout.strip() == 'node/w1 labeled'
    removed = kubectl(seeded, 'label', 'node', 'w1', 'pool-')
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.strip() == 'node/w1 unlabeled'
    labels = seeded.nodes()['w1']['labels']
    assert 'pool' not in labels and labels['zone'] == 'z1'
    # A missing label is not an error: kubectl says so and goes on.
    again = kubectl(seeded, 'label', 'node', 'w1', 'pool-', 'zone-')
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == ['label "pool" not found.',
                                         'node/w1 unlabeled']
    assert 'zone' not in seeded.nodes()['w1']['labels']
    both = kubectl(seeded, 'label', 'node', 'w1', 'a=1', 'a-')
    assert both.returncode == 1
    assert 'can not both modify and remove a label' in both.stderr
    # kubectl takes an argument without = or a trailing - for a node.
    assert kubectl(seeded, 'label', 'node', 'w1', 'pool'
                   ).stderr.strip() == (
        'error: at least one label update is required')


def test_kubectl_taint_removal(seeded):
    def taints():
        return sorted('%s:%s' % (t['key'], t['effect'])
                      for t in seeded.nodes()['w1']['taints'])
    assert kubectl(seeded, 'taint', 'node', 'w1', 'gpu=yes:NoSchedule',
                   'gpu=yes:NoExecute', 'spot:PreferNoSchedule'
                   ).stdout.strip() == 'node/w1 tainted'
    one = kubectl(seeded, 'taint', 'node', 'w1', 'gpu:NoSchedule-')
    assert one.returncode == 0, one.stderr
    assert one.stdout.strip() == 'node/w1 untainted'
    assert taints() == ['gpu:NoExecute', 'spot:PreferNoSchedule']
    # A missing taint is an error, and nothing of the command is done.
    missing = kubectl(seeded, 'taint', 'node', 'w1', 'spot-',
                      'gpu:NoSchedule-')
    assert missing.returncode == 1
    assert missing.stderr.strip() == (
        'error: taint "gpu:NoSchedule" not found')
    assert taints() == ['gpu:NoExecute', 'spot:PreferNoSchedule']
    # key- removes every effect of the key.
    kubectl(seeded, 'taint', 'node', 'w1', 'gpu=no:NoSchedule')
    assert kubectl(seeded, 'taint', 'node', 'w1', 'gpu-').returncode == 0
    assert taints() == ['spot:PreferNoSchedule']
    gone = kubectl(seeded, 'taint', 'node', 'w1', 'gpu-', 'x:NoExecute-')
    assert gone.stderr.splitlines() == [
        'taint "gpu" not found', 'taint "x:NoExecute" not found']
    both = kubectl(seeded, 'taint', 'node', 'w1', 'spot=1:NoSchedule',
                   'spot-')
    assert both.returncode == 1
    assert 'can not both modify and remove the following taint(s) in the ' \
        'same command: spot=' in both.stderr
    assert taints() == ['spot:PreferNoSchedule']
    # --overwrite replaces the taint of the same key and effect.
    assert kubectl(seeded, 'taint', 'node', 'w1', 'spot=2:PreferNoSchedule',
                   '--overwrite').stdout.strip() == 'node/w1 modified'
    assert [t.get('value') for t in seeded.nodes()['w1']['taints']] == ['2']


def test_kubectl_label_and_taint_several_nodes(seeded):
    both = kubectl(seeded, 'label', 'node', 'w1', 'w2', 'pool=a')
    assert both.stdout.splitlines() == ['node/w1 labeled', 'node/w2 labeled']
    assert kubectl(seeded, 'taint', 'node', 'w1', 'gpu=1:NoSchedule'
                   ).returncode == 0
    # w2 has no such taint: it fails and stays as it was, w1 goes on.
    result = kubectl(seeded, 'taint', 'node', 'w1', 'w9', 'w2',
                     'gpu:NoSchedule-', 'spot=1:NoExecute')
    assert result.returncode == 1
    assert result.stdout.splitlines() == ['node/w1 modified']
    assert result.stderr.splitlines() == [
        'Error from server (NotFound): nodes "w9" not found',
        'taint "gpu:NoSchedule" not found']
    nodes = seeded.nodes()
    assert [t['key'] for t in nodes['w1']['taints']] == ['spot']
    assert nodes['w2']['taints'] == []
    assert kubectl(seeded, 'label', 'node', 'w1', 'a=1', 'w2'
                   ).stderr.strip() == (
        'error: all resources must be specified before label changes: w2')


@pytest.mark.parametrize('argv, message', [
    (['frobnicate'], 'unknown command "frobnicate"'),
    (['drain', 'w1', '--delete-local-data'],
     'unknown flag: --delete-local-data'),
    (['drain', 'w1', '--timeout=10'], 'missing unit in duration'),
    (['get', 'widgets'], 'doesn\'t have a resource type "widgets"'),
    (['apply', '-f', '-'], 'no objects passed to apply'),
])
def test_kubectl_rejects_bad_usage(seeded, argv, message):
    result = kubectl(seeded, *argv, input='{}')
    assert result.returncode == 1
    assert message in result.stderr


def test_kubectl_without_cluster(tmp_path):
    site = localsite.materialise(tmp_path / 'site')
    result = site.tool('kubectl', 'get', 'nodes', check=False)
    assert result.returncode == 1 and 'refused' in result.stderr


def test_kubectl_over_ssh_as_the_site_user(server, site, tmp_path):
    site.seed([('cp1', ADDRESSES[0])], [('w1', ADDRESSES[1])])
    creds = ssh.Credentials(server.user, key_file=server.client_key)
    settings = ssh.SSHSettings(connect_timeout=5, connect_retries=0,
                               known_hosts_file=str(tmp_path / 'kh'))
    with ssh.Connection(ADDRESSES[0], creds, server.port,
                        settings) as conn:
        result = conn.run([str(site.kubectl), 'get', 'nodes', '-o', 'name'])
        conn.run([str(site.kubectl), 'drain', 'w1', '--ignore-daemonsets',
                  '--delete-emptydir-data', '--timeout=10s'])
    assert result.stdout.split() == ['node/cp1', 'node/w1']
    assert site.nodes()['w1']['schedulable'] is False
