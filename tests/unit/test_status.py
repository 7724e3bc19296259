"""Cluster status (mgmt_driver.adapters.status): parsing, differences, the
reader with the recording SSH fake, and the text and JSON formats."""

import json
import pathlib

import pytest
from oslo_config import cfg

from mgmt_driver.adapters import status
from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.model import nodes
from mgmt_driver.model import params
from mgmt_driver.remote import inventory
from mgmt_driver.remote import kubectl
from mgmt_driver.remote import loadbalancer
from tests.fakes import FakeConnection
from tests.fakes import FakePool

SAMPLES = pathlib.Path(__file__).parents[2] / 'samples'
MASTER, WORKER, GONE = ('master-10-10-0-11', 'worker-10-10-0-21',
                        'worker-10-10-0-22')
LB = '192.168.10.40'
WORKSPACE = '/opt/kubespray/inventories/kubespray-mgmt'
STAT_HEADER = ('# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,'
               'dreq,dresp,ereq,econ,eresp,wretr,wredis,status,weight,act,'
               'bck,chkfail,chkdown,lastchg,downtime,qlimit,pid,iid,sid,'
               'throttle,lbtot,tracked,type,rate,rate_lim,rate_max,'
               'check_status,check_code,check_duration')


def _stat_row(proxy, server, state, check):
    fields = ['0'] * 39
    fields[0], fields[1], fields[17], fields[36] = proxy, server, state, \
        check
    return ','.join(fields)


# ------------------------------------------------------------ run logs --

@pytest.mark.parametrize('name, expected', [
    ('20261123T230501Z-instantiate-cluster.log',
     ('2026-11-23T23:05:01Z', 'instantiate', 'cluster')),
    ('20261123T230501Z-scale_start-remove-node.log',
     ('2026-11-23T23:05:01Z', 'scale_start', 'remove-node')),
    ('20261124T000000Z-heal_start-remove_node.log',
     ('2026-11-24T00:00:00Z', 'heal_start', 'remove_node')),
    ('20261124T000000Z-scale_out-facts.log',
     ('2026-11-24T00:00:00Z', 'scale_out', 'facts')),
    ('20261124T000000Z-custom-my-book.log',
     ('2026-11-24T00:00:00Z', 'custom', 'my-book')),
])
def test_run_log_names(name, expected):
    assert status.parse_run_name(name) == expected


@pytest.mark.parametrize('name', [
    '20261123T230501Z-instantiate-cluster.rc',   # not a log
    '20261123T230501Z-instantiate.log',          # no playbook
    '20261332T230501Z-instantiate-cluster.log',  # month 13
    '20261123T250501Z-instantiate-cluster.log',  # hour 25
    '2026-11-23-instantiate-cluster.log',
    '20261123T230501Z-../../etc-passwd.log',
    '20261123T230501Z-inst ance-cluster.log',
    '20261123T230501Z-x-cluster.log\n',
    '20261123T230501Z-' + 'a' * 41 + '-cluster.log',
    '20261123T230501Z-Scale-cluster.log',        # operations: [a-z0-9_]
    '',
])
def test_run_log_names_refused(name):
    assert status.parse_run_name(name) is None


def test_runs_newest_first_with_their_status():
    output = ('0/20261123T220000Z-instantiate-cluster.log\n'
              '2/20261123T221000Z-scale_out-scale.log\n'
              '-/20261123T222000Z-heal-remove-node.log\n'
              '?/20261123T223000Z-heal-cluster.log\n')
    runs = status.parse_runs(output, WORKSPACE + '/logs')
    assert [(r['time'][11:16], r['status'], r['exit_code']) for r in runs] \
        == [('22:30', 'unknown', None), ('22:20', 'running', None),
            ('22:10', 'failed', 2), ('22:00', 'succeeded', 0)]
    assert runs[-1] == {
        'time': '2026-11-23T22:00:00Z', 'operation': 'instantiate',
        'playbook': 'cluster', 'status': 'succeeded', 'exit_code': 0,
        'log': WORKSPACE + '/logs/20261123T220000Z-instantiate-cluster.log'}


def test_runs_skip_garbage_and_keep_five():
    lines = ['0/2026112%dT220000Z-heal-cluster.log' % d for d in range(8)]
    lines[6] = '0/../20261126T220000Z-heal-cluster.log'
    lines.insert(3, '\x1b[31m/evil')
    runs = status.parse_runs('\n'.join(lines), '/w/logs')
    # Five valid ones: the odd names do not take their places.
    assert [r['time'][:10] for r in runs] == [
        '2026-11-27', '2026-11-25', '2026-11-24', '2026-11-23',
        '2026-11-22']


# -------------------------------------------------------------- HAProxy --

def _rendered(masters, workers):
    return loadbalancer.render(masters, workers, nodeport_range=(30000,
                                                                 30010))


def test_servers_of_the_rendered_configuration():
    text = _rendered([(MASTER, '10.10.0.11')], [(WORKER, '10.10.0.21')])
    assert status.parse_haproxy_servers(text) == [
        {'backend': 'kube_apiserver', 'server': MASTER,
         'address': '10.10.0.11:6443'},
        {'backend': 'kube_nodeports', 'server': WORKER,
         'address': '10.10.0.21'}]


def test_servers_outside_backends_are_not_listed():
    text = ('frontend f\n    server x 1.2.3.4:1\nbackend b  # c\n'
            '    server y 5.6.7.8:9 check\n    server\nlisten l\n'
            '    server z 1.1.1.1:1\n')
    assert status.parse_haproxy_servers(text) == [
        {'backend': 'b', 'server': 'y', 'address': '5.6.7.8:9'}]


def test_stats_socket_is_rendered_only_when_set():
    assert 'stats socket' not in _rendered([('m', '10.0.0.1')], [])
    text = loadbalancer.render([('m', '10.0.0.1')],
                               stats_socket='/run/haproxy/k.sock')
    assert '    stats socket /run/haproxy/k.sock mode 600 level user\n' \
        in text
    with pytest.raises(exceptions.LoadBalancerLayoutInvalid,
                       match='stats_socket'):
        loadbalancer.render([('m', '10.0.0.1')], stats_socket='/a b')


def test_show_stat():
    text = '\n'.join([STAT_HEADER,
                      _stat_row('kube_apiserver', 'FRONTEND', 'OPEN', ''),
                      _stat_row('kube_apiserver', MASTER, 'UP', 'L4OK'),
                      _stat_row('kube_nodeports', WORKER, 'no check', ''),
                      'short,line', ''])
    assert status.parse_show_stat(text) == {
        ('kube_apiserver', 'FRONTEND'): ('OPEN', None),
        ('kube_apiserver', MASTER): ('UP', 'L4OK'),
        ('kube_nodeports', WORKER): ('no check', None)}


@pytest.mark.parametrize('text', ['', 'Unknown command.\n',
                                  '# pxname,svname\nx,y\n'])
def test_show_stat_without_its_header(text):
    with pytest.raises(ValueError):
        status.parse_show_stat(text)


# ----------------------------------------------------------------- etcd --

def test_etcd_members():
    text = json.dumps({'header': {'cluster_id': 1}, 'members': [
        {'ID': 0xabc, 'name': 'master-1', 'peerURLs': ['https://a:2380'],
         'clientURLs': ['https://a:2379']},
        {'ID': 12, 'peerURLs': ['https://b:2380']}]})
    assert kubectl.parse_etcd_members(text, 'm1') == [
        {'name': 'master-1', 'id': 'abc', 'peer_urls': ['https://a:2380'],
         'client_urls': ['https://a:2379']},
        {'name': '', 'id': 'c', 'peer_urls': ['https://b:2380'],
         'client_urls': []}]


@pytest.mark.parametrize('text, field', [
    ('not json', 'no valid JSON'), ('[]', 'not a JSON object'),
    ('{"members": {}}', 'members must be a list'),
    ('{"members": [{"ID": "1"}]}', r'members\[0\].ID'),
    ('{"members": [{"ID": true}]}', r'members\[0\].ID'),
    ('{"members": [{"ID": 1, "peerURLs": [1]}]}', 'peerURLs'),
    ('{"members": [{"ID": 1, "name": 5}]}', 'name must be a string')])
def test_etcd_members_malformed(text, field):
    with pytest.raises(exceptions.RemoteDataInvalid, match='m1.*' + field):
        kubectl.parse_etcd_members(text, 'm1')


# ---------------------------------------------------------------- nodes --

def _node(name, roles=(), ready='True', version='v1.33.5', labels=None):
    labels = dict(labels or {}, **{
        'node-role.kubernetes.io/' + r: '' for r in roles})
    return {'metadata': {'name': name, 'labels': labels},
            'status': {'conditions': [{'type': 'Ready', 'status': ready}],
                       'addresses': [{'type': 'InternalIP',
                                      'address': '10.0.0.1'}],
                       'nodeInfo': {'kubeletVersion': version}}}


def test_kubectl_nodes():
    conn = FakeConnection('m1')
    conn.script('get nodes', stdout=json.dumps({'items': [
        _node(MASTER, ['control-plane']),
        _node(WORKER, ready='False', labels={'zone': 'a'}),
        {'metadata': {'name': 'bare'}, 'spec': {'unschedulable': True}}]}))
    client = kubectl.KubectlClient(conn, settings=kubectl.KubectlSettings())
    found = client.nodes()
    assert [(n.name, n.roles, n.ready, n.kubelet_version, n.schedulable)
            for n in found] == [
        (MASTER, ('control-plane',), 'True', 'v1.33.5', True),
        (WORKER, (), 'False', 'v1.33.5', True),
        ('bare', (), 'Unknown', '', False)]
    assert found[1].labels == {'zone': 'a'}
    assert found[0].internal_ip == '10.0.0.1'


@pytest.mark.parametrize('item, field', [
    ({'metadata': {'name': 'n', 'labels': {'a': 1}}}, 'labels values'),
    ({'metadata': {'name': 'n'}, 'status': {'conditions': {}}},
     'conditions must be a list'),
    ({'metadata': {'name': 'n'}, 'status': {'nodeInfo': {
        'kubeletVersion': 5}}}, 'kubeletVersion must be a string')])
def test_kubectl_nodes_malformed(item, field):
    conn = FakeConnection('m1')
    conn.script('get nodes', stdout=json.dumps({'items': [item]}))
    client = kubectl.KubectlClient(conn, settings=kubectl.KubectlSettings())
    with pytest.raises(exceptions.RemoteDataInvalid, match=field):
        client.nodes()


# ---------------------------------------------------------- differences --

RECORDED = inventory.RecordedInventory(
    masters=(MASTER,), hosts=((MASTER, None, None), (WORKER, None, None),
                              (GONE, None, None)))


def test_no_difference():
    found = status.differences(
        inventory.RecordedInventory(masters=(MASTER,), hosts=(
            (MASTER, None, None), (WORKER, None, None))),
        nodes=[{'name': MASTER, 'ready': 'True'},
               {'name': WORKER, 'ready': 'True'}],
        members=[{'name': MASTER}],
        backends=[{'backend': 'kube_apiserver', 'server': MASTER,
                   'status': 'UP'},
                  {'backend': 'kube_nodeports', 'server': WORKER,
                   'status': None}])
    assert found == []


def test_every_kind_of_difference():
    found = status.differences(
        RECORDED,
        nodes=[{'name': MASTER, 'ready': 'True'},
               {'name': WORKER, 'ready': 'Unknown'},
               {'name': 'stranger', 'ready': 'True'}],
        members=[{'name': 'etcd-old'}, {'name': ''}],
        backends=[{'backend': 'kube_apiserver', 'server': MASTER,
                   'status': 'DOWN', 'check': 'L4CON'},
                  {'backend': 'kube_apiserver', 'server': 'old-master',
                   'status': 'UP', 'check': 'L4OK'},
                  {'backend': 'kube_nodeports', 'server': WORKER,
                   'status': 'no check', 'check': None}])
    assert [(d['kind'], d['name']) for d in found] == [
        ('backend_down', MASTER), ('backend_not_a_master', 'old-master'),
        ('etcd_member_not_a_master', 'etcd-old'),
        ('master_not_an_etcd_member', MASTER),
        ('missing_from_kubernetes', GONE),
        ('node_not_ready', WORKER), ('not_in_inventory', 'stranger'),
        ('worker_not_a_backend', GONE)]
    assert found[0]['detail'] == 'kube_apiserver: HAProxy says DOWN (L4CON)'


def test_recorded_labels_and_taints_a_node_lacks():
    settings = {
        WORKER: core.NodeSettings((('pool', 'a'), ('rack', 'r1')),
                                  ('gpu=yes:NoSchedule', 'x:NoExecute')),
        MASTER: core.NodeSettings((('pool', 'cp'),)),
        GONE: core.NodeSettings((('pool', 'a'),))}
    nodes = [{'name': MASTER, 'ready': 'True', 'labels': {'pool': 'cp'},
              'taints': ['node-role.kubernetes.io/control-plane:NoSchedule']},
             {'name': WORKER, 'ready': 'True',
              'labels': {'pool': 'b', 'rack': 'r1', 'extra': 'e'},
              'taints': ['x:NoExecute', 'gpu=no:NoSchedule']}]
    found = [d for d in status.differences(RECORDED, nodes=nodes,
                                           settings=settings)
             if d['kind'] == 'labels_not_as_recorded']
    assert found == [{
        'kind': 'labels_not_as_recorded', 'name': WORKER,
        'detail': 'label(s) pool; taint(s) gpu=yes:NoSchedule: not as '
                  'recorded (relabel again)'}]


def test_parts_not_read_are_not_compared():
    assert status.differences(RECORDED) == []


# --------------------------------------------------------------- reader --

@pytest.fixture
def conf():
    conf = cfg.ConfigOpts()
    kconf.register_opts(conf)
    conf([])
    for name, value in (('kubectl_sudo', 'never'), ('haproxy_sudo', 'never'),
                        ('haproxy_stats_socket', '/run/haproxy/k.sock')):
        conf.set_override(name, value, group='kubespray_mgmt')
    return conf


def _cluster():
    body = json.loads((SAMPLES / 'instantiate_simple.json').read_text())
    extra = body['additionalParams']
    extra[core.ROOT]['nodes'] = [
        {'role': 'master', 'ssh_ip': '192.168.10.11', 'nic_ip': '10.10.0.11'},
        {'role': 'worker', 'ssh_ip': '192.168.10.21', 'nic_ip': '10.10.0.21'},
        {'role': 'worker', 'ssh_ip': '192.168.10.22', 'nic_ip': '10.10.0.22'},
        {'role': 'external_lb', 'ssh_ip': LB, 'nic_ip': '10.10.0.40'}]
    spec = params.parse_params(extra, need_cp_names=False)
    return spec, nodes.nodes_from_spec(spec)


class DownConnection(FakeConnection):
    """A host that does not answer SSH."""

    def _down(self):
        raise exceptions.SSHConnectError(host=self.host, port=22,
                                         attempts=3, reason='refused')

    def run(self, command, *args, **kwargs):
        self._down()

    def read_file(self, path, *args, **kwargs):
        self._down()


class Site:
    """A FakePool scripted as a built cluster; LB optionally down."""

    def __init__(self, spec, lb_down=False):
        self.pool = FakePool()
        if lb_down:
            self.pool.connections[LB] = DownConnection(LB)
        self.ansible = self.pool.connection(spec.ansible.ip_address)
        hosts = spec.ansible.transferring_inventory_path + \
            '/kubespray-mgmt/hosts.yaml'
        self.ansible.files[hosts] = inventory.dump_yaml(
            inventory.render_hosts(spec, _cluster()[1]))
        self.ansible.script(r'^program:list-runs ', stdout=(
            '0/20261123T220000Z-instantiate-cluster.log\n'
            '-/20261123T230000Z-scale_out-scale.log\n'))
        master = self.pool.connection('192.168.10.11')
        master.script('get nodes', stdout=json.dumps({'items': [
            _node(MASTER, ['control-plane']), _node(WORKER)]}))
        master.script('etcdctl', stdout=json.dumps({'members': [
            {'ID': 1, 'name': MASTER, 'peerURLs': ['https://x:2380']}]}))
        master.script('check-expiration', stdout=json.dumps({
            'certificates': [{'name': 'apiserver', 'residualTime': 86400 * 300,
                              'expirationDate': '2027-09-22T10:00:00Z',
                              'caName': 'ca'}],
            'certificateAuthorities': []}))
        self.lb = self.pool.connection(LB)
        self.lb.files['/etc/haproxy/haproxy.cfg'] = _rendered(
            [(MASTER, '10.10.0.11')], [(WORKER, '10.10.0.21'),
                                       (GONE, '10.10.0.22')])
        self.lb.script('show stat', stdout='\n'.join([
            STAT_HEADER, _stat_row('kube_apiserver', MASTER, 'UP', 'L4OK'),
            _stat_row('kube_nodeports', WORKER, 'no check', ''),
            _stat_row('kube_nodeports', GONE, 'no check', '')]))


def test_reader_reads_every_part_and_changes_nothing(conf):
    spec, cluster = _cluster()
    site = Site(spec)
    report = status.collect(spec, cluster, 'kubespray-mgmt', site.pool,
                            conf)
    assert set(report) == {'instance_id', 'workspace', 'ok'} | set(
        status.SECTIONS)
    assert [n['name'] for n in report['nodes']['items']] == [MASTER, WORKER]
    assert report['etcd']['members'][0]['name'] == MASTER
    lb = report['load_balancer']
    assert lb['stats'] == 'ok' and lb['host'] == LB
    assert [(b['server'], b['status']) for b in lb['backends']] == [
        (MASTER, 'UP'), (WORKER, 'no check'), (GONE, 'no check')]
    assert [r['status'] for r in report['playbook_runs']['runs']] == [
        'running', 'succeeded']
    assert [(d['kind'], d['name']) for d in report['differences']['items']] \
        == [('missing_from_kubernetes', GONE)]
    assert report['ok'] is False
    assert all(report[s]['error'] is None for s in status.SECTIONS)
    calls = [c for conn in site.pool.connections.values()
             for c in conn.calls]
    assert not [c for c in calls if c[0] not in ('run', 'read_file')]
    commands = [c[1] for c in calls if c[0] == 'run']
    assert any('etcdctl.sh member list -w json' in c for c in commands)
    assert all(word not in c for c in commands for word in (
        ' rm ', 'mkdir', ' mv ', 'delete', 'cordon', 'drain', 'reload',
        'chmod', 'apply'))


def test_unreachable_lb_is_reported_and_the_rest_still_shown(conf):
    spec, cluster = _cluster()
    report = status.collect(spec, cluster, 'kubespray-mgmt',
                            Site(spec, lb_down=True).pool, conf)
    lb = report['load_balancer']
    assert lb['ok'] is False and 'SSH connection to %s' % LB in lb['error']
    assert report['nodes']['ok'] and report['etcd']['ok']
    assert report['playbook_runs']['ok']
    # Compared without the backends.
    assert [d['kind'] for d in report['differences']['items']] == [
        'missing_from_kubernetes']
    text = status.format_text(report)
    assert '/etc/haproxy/haproxy.cfg)\n  UNAVAILABLE: unreachable: SSH ' \
        'connection to %s:' % LB in text
    assert MASTER in text.split('Load balancer')[0]
    assert 'missing_from_kubernetes %s' % GONE in text


def test_no_socket_configured_means_no_health(conf):
    conf.set_override('haproxy_stats_socket', '', group='kubespray_mgmt')
    spec, cluster = _cluster()
    site = Site(spec)
    report = status.collect(spec, cluster, 'x', site.pool, conf)
    assert report['load_balancer']['stats'].startswith('not configured')
    assert all(b['status'] is None
               for b in report['load_balancer']['backends'])
    assert not any('show stat' in c for c in site.lb.commands)


@pytest.mark.parametrize('stdout, stderr, exit_code, said', [
    ('', 'sh: 1: python3: not found', 127, 'python3: not found'),
    ('Permission denied\n', '', 0, 'no "# pxname'),
    ('', '', 1, 'no answer')])
def test_health_unavailable_is_said(conf, stdout, stderr, exit_code, said):
    spec, cluster = _cluster()
    site = Site(spec)
    site.lb.script('show stat', stdout=stdout, stderr=stderr,
                   exit_code=exit_code, first=True)
    lb = status.collect(spec, cluster, 'x', site.pool, conf)['load_balancer']
    assert lb['ok'] and lb['stats'].startswith('unavailable: ')
    assert said in lb['stats']
    assert len(lb['backends']) == 3
    assert all(b['status'] is None for b in lb['backends'])


def test_no_master_answers(conf):
    spec, cluster = _cluster()
    site = Site(spec)
    site.pool.connections['192.168.10.11'] = DownConnection('192.168.10.11')
    report = status.collect(spec, cluster, 'x', site.pool, conf)
    for name in ('nodes', 'etcd'):
        assert report[name]['ok'] is False
        assert '192.168.10.11' in report[name]['error']
    assert report['load_balancer']['ok']


def test_no_inventory_is_said(conf):
    spec, cluster = _cluster()
    site = Site(spec)
    site.ansible.files.clear()
    report = status.collect(spec, cluster, 'x', site.pool, conf)
    assert 'no inventory in the workspace' in \
        report['differences']['error']
    assert 'UNKNOWN: no inventory' in status.format_text(report)


def test_accept_new_becomes_reject_for_status(conf):
    assert status.read_only_settings(conf).host_key_policy == 'read-only'
    conf.set_override('host_key_policy', 'warn', group='kubespray_mgmt')
    assert status.read_only_settings(conf).host_key_policy == 'warn'


# --------------------------------------------------------------- format --

def test_text_format_is_a_table_per_section(conf):
    spec, cluster = _cluster()
    report = status.collect(spec, cluster, 'kubespray-mgmt',
                            Site(spec).pool, conf)
    text = status.format_text(report)
    assert text.split('\n\n')[0].splitlines() == [
        'Nodes (kubectl on 192.168.10.11)',
        '  NAME               ROLES          READY  VERSION  LABELS  TAINTS',
        '  %s  control-plane  True   v1.33.5  -       -' % MASTER,
        '  %s  -              True   v1.33.5  -       -' % WORKER]
    assert '  2026-11-23T23:00:00Z  scale_out    scale     running    ' \
        in text
    assert text.endswith('Differences from the inventory\n'
                         '  missing_from_kubernetes %s: in the inventory, '
                         'not a Kubernetes node\n' % GONE)
    assert json.loads(status.to_json(report)) == report


# ------------------------------------- a cluster not at rest (issue 41) --

def test_an_upgrade_stopped_half_way_is_a_difference():
    """Mixed kubelet versions and a node left cordoned: before, status
    said "Differences: none" and exited 0."""
    nodes = [{'name': MASTER, 'ready': 'True', 'schedulable': True,
              'kubelet_version': 'v1.33.5'},
             {'name': WORKER, 'ready': 'True', 'schedulable': False,
              'kubelet_version': 'v1.32.9'},
             {'name': GONE, 'ready': 'True', 'schedulable': True,
              'kubelet_version': ''}]
    found = status.differences(RECORDED, nodes=nodes)
    assert [(d['kind'], d['name']) for d in found] == [
        ('kubelet_version_behind', WORKER), ('node_cordoned', WORKER)]
    assert found[0]['detail'].startswith(
        'kubelet v1.32.9; 1 node(s) at v1.33.5: an upgrade stopped')
    assert 'kubectl uncordon' in found[1]['detail']


def test_an_unhealthy_etcd_member_is_a_difference(conf):
    spec, cluster = _cluster()
    site = Site(spec)
    site.pool.connection('192.168.10.11').script(
        'endpoint health', first=True, exit_code=1, stdout=json.dumps([
            {'endpoint': 'https://10.10.0.11:2379', 'health': True},
            {'endpoint': 'https://10.10.0.12:2379', 'health': False,
             'error': 'context deadline exceeded'}]))
    report = status.collect(spec, cluster, 'kubespray-mgmt', site.pool,
                            conf)
    assert report['etcd']['health'][1] == {
        'endpoint': 'https://10.10.0.12:2379', 'healthy': False,
        'error': 'context deadline exceeded'}
    found = [d for d in report['differences']['items']
             if d['kind'] == 'etcd_member_unhealthy']
    assert found == [{'kind': 'etcd_member_unhealthy',
                      'name': 'https://10.10.0.12:2379',
                      'detail': 'not healthy: context deadline exceeded'}]
    assert report['ok'] is False


def test_a_worker_declared_absent_is_one_difference_that_says_so():
    """Issue 41, item 10: after --absent W, status showed W as
    not_in_inventory and backend_not_a_worker, with no word about the
    declaration."""
    nodes = [{'name': n, 'ready': 'True'} for n in (MASTER, WORKER, GONE)] \
        + [{'name': 'worker-dead', 'ready': 'Unknown'}]
    backends = [{'backend': 'kube_apiserver', 'server': MASTER,
                 'status': 'UP'}] + [
        {'backend': 'kube_nodeports', 'server': n, 'status': None}
        for n in (WORKER, GONE, 'worker-dead')]
    before = status.differences(RECORDED, nodes=nodes, backends=backends)
    assert [d['kind'] for d in before] == [
        'backend_not_a_worker', 'node_not_ready', 'not_in_inventory']
    found = status.differences(RECORDED, nodes=nodes, backends=backends,
                               absent=frozenset(['worker-dead']))
    assert [(d['kind'], d['name']) for d in found] == [
        ('declared_absent', 'worker-dead'), ('node_not_ready', 'worker-dead')]
    assert found[0]['detail'].startswith('declared absent (--absent, '
                                         'absent_nodes) by the last operation')


def test_the_reader_reads_the_workers_declared_absent(conf):
    from mgmt_driver.model import absence
    spec, cluster = _cluster()
    site = Site(spec)
    site.ansible.files[spec.ansible.transferring_inventory_path +
                       '/kubespray-mgmt/' + absence.RECORD_FILE] = \
        absence.render_record([GONE])
    report = status.collect(spec, cluster, 'kubespray-mgmt', site.pool,
                            conf)
    # GONE is in the recorded inventory here: nothing to explain.
    assert [(d['kind'], d['name']) for d in report['differences']['items']] \
        == [('missing_from_kubernetes', GONE)]
    site.ansible.files[spec.ansible.transferring_inventory_path +
                       '/kubespray-mgmt/' + absence.RECORD_FILE] = \
        'absent: [../x]\n'
    report = status.collect(spec, cluster, 'kubespray-mgmt', site.pool,
                            conf)
    assert 'absent: an item is not a node name' in \
        report['differences']['error']


@pytest.mark.parametrize('text', ['[]', 'absent: x', 'absent: [1]',
                                  'absent: []\nmore: 1', ': ['])
def test_the_absent_record_refuses_what_it_does_not_write(text):
    from mgmt_driver.model import absence
    with pytest.raises(ValueError):
        absence.parse_record(text)
