"""Unit tests of mgmt_driver.remote.kubectl with the recording SSH fake."""

import base64
import json
import logging
import subprocess

import pytest
from oslo_config import cfg

from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.remote import kubectl
from mgmt_driver.remote import programs
from mgmt_driver.remote import ssh
from tests.fakes import FakeConnection

SETTINGS = kubectl.KubectlSettings(command_timeout=120, drain_timeout=600,
                                   poll_initial_delay=1.0,
                                   poll_max_delay=10.0)
TOKEN = 'eyJhbGciOiJSUzI1NiJ9.c2VjcmV0LXRva2VuLXBheWxvYWQ.SIGNATURE-xyz'
CA = '-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n'


class RecordingConnection(FakeConnection):
    """FakeConnection that also records each command's timeout and stdin."""

    def __init__(self, host='10.0.0.11'):
        super().__init__(host)
        self.timeouts = []
        self.stdins = []

    def run(self, command, timeout=None, check=True, env=None, stdin=None,
            on_line=None, keep_tail=False):
        self.timeouts.append(timeout)
        self.stdins.append(stdin)
        return super().run(command, timeout, check, env, stdin, on_line,
                           keep_tail)


class FakeClock:
    """A monotonic clock that only moves when the code sleeps."""

    def __init__(self):
        self.now = 1000.0
        self.sleeps = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def make_client(conn=None, clock=None, **kwargs):
    clock = clock or FakeClock()
    return kubectl.KubectlClient(conn or RecordingConnection(),
                                 settings=SETTINGS, sleep=clock.sleep,
                                 clock=clock, **kwargs)


def pod(name, namespace='default', owner=None, mirror=False,
        phase='Running'):
    meta = {'name': name, 'namespace': namespace}
    if owner:
        meta['ownerReferences'] = [{'kind': owner, 'name': name + '-owner'}]
    if mirror:
        meta['annotations'] = {'kubernetes.io/config.mirror': 'abc'}
    return {'metadata': meta, 'status': {'phase': phase}}


def pods_json(*pods):
    return json.dumps({'apiVersion': 'v1', 'kind': 'List',
                       'items': list(pods)})


def b64(text):
    return base64.b64encode(text.encode()).decode()


# ---------------------------------------------------------------- argv --

def test_argv_with_sudo_and_kubeconfig():
    client = make_client(kubectl='/usr/local/bin/kubectl', sudo=True,
                         kubeconfig='/etc/kubernetes/admin.conf')
    client.conn.script(r'get nodes', stdout='{"items": []}')
    assert client.node_names() == []
    assert client.conn.commands == [
        'sudo -n /usr/local/bin/kubectl --kubeconfig '
        '/etc/kubernetes/admin.conf get nodes -o json']
    assert client.conn.timeouts == [120]


def test_settings_from_conf():
    config = cfg.ConfigOpts()
    kconf.register_opts(config)
    config([], project='kubespray-mgmt-test', default_config_files=[])
    config.set_override('drain_timeout', 900, 'kubespray_mgmt')
    config.set_override('poll_max_delay', 5.0, 'kubespray_mgmt')
    assert kubectl.KubectlSettings.from_conf(config) == \
        kubectl.KubectlSettings(command_timeout=120, drain_timeout=900,
                                poll_initial_delay=1.0, poll_max_delay=5.0)


# --------------------------------------------------------------- nodes --

def test_node_names():
    client = make_client()
    client.conn.script(r'get nodes', stdout=json.dumps({'items': [
        {'metadata': {'name': 'master-10-0-0-11'}},
        {'metadata': {'name': 'worker-10-0-0-21'}}]}))
    assert client.node_names() == ['master-10-0-0-11', 'worker-10-0-0-21']
    assert client.conn.commands == ['kubectl get nodes -o json']


def test_node_names_with_garbage_output():
    client = make_client()
    client.conn.script(r'get nodes', stdout='Unable to connect', times=1)
    client.conn.script(r'get nodes', stdout='[]')
    for _ in range(2):
        with pytest.raises(exceptions.MgmtDriverOtherError,
                           match='10.0.0.11'):
            client.node_names()


@pytest.mark.parametrize('stdout, expected', [
    ('node/worker-1\n', True), ('', False)])
def test_node_exists(stdout, expected):
    client = make_client()
    client.conn.script(r'get node worker-1', stdout=stdout)
    assert client.node_exists('worker-1') is expected
    assert client.conn.commands == [
        'kubectl get node worker-1 --ignore-not-found -o name']


def test_cordon():
    client = make_client()
    assert client.cordon('worker-1') is True
    assert client.conn.commands == ['kubectl cordon worker-1']


def test_cordon_of_absent_node_is_not_an_error():
    client = make_client()
    client.conn.script(r'cordon', exit_code=1, stderr='Error from server '
                       '(NotFound): nodes "worker-1" not found\n')
    assert client.cordon('worker-1') is False


def test_cordon_other_failure_raises():
    client = make_client()
    client.conn.script(r'cordon', exit_code=1,
                       stderr='Unable to connect to the server: EOF\n')
    with pytest.raises(exceptions.RemoteCommandFailed, match='EOF'):
        client.cordon('worker-1')


def test_drain_flags_and_timeouts():
    client = make_client()
    assert client.drain('worker-1') is True
    client.drain('worker-2', timeout=30, force=False, grace_period=15)
    assert client.conn.commands == [
        'kubectl drain worker-1 --ignore-daemonsets --delete-emptydir-data '
        '--force --timeout=600s',
        'kubectl drain worker-2 --ignore-daemonsets --delete-emptydir-data '
        '--grace-period=15 --timeout=30s']
    # the SSH command outlives kubectl's own timeout
    assert client.conn.timeouts == [660, 90]


def test_drain_failure_raises_with_output():
    client = make_client()
    client.conn.script(r'drain', exit_code=1, stderr=(
        'error when evicting pods/"web-0" -n "default": Cannot evict pod '
        'as it would violate the pod\'s disruption budget.\n'
        'error: unable to drain node "worker-1" due to error: '
        'global timeout reached: 30s\n'))
    with pytest.raises(exceptions.RemoteCommandFailed) as info:
        client.drain('worker-1', timeout=30)
    assert 'disruption budget' in str(info.value)
    assert '10.0.0.11' in str(info.value)


def test_drain_of_absent_node_is_not_an_error():
    client = make_client()
    client.conn.script(r'drain', exit_code=1, stderr='Error from server '
                       '(NotFound): nodes "worker-1" not found\n')
    assert client.drain('worker-1') is False


def test_delete_node_is_idempotent_in_one_command():
    client = make_client()
    client.delete_node('worker-1')
    assert client.conn.commands == [
        'kubectl delete node worker-1 --ignore-not-found']


@pytest.mark.parametrize('bad', ['w 1', '$(reboot)', '-n', '', 'a;b',
                                 None, 'x' * 300])
def test_bad_node_names_are_refused_before_any_command(bad):
    client = make_client()
    for action in (client.cordon, client.drain, client.delete_node,
                   client.node_exists, client.wait_evacuated):
        with pytest.raises(exceptions.MgmtDriverParamInvalid):
            action(bad)
    assert client.conn.calls == []


# ---------------------------------------------------------- evacuation --

PODS_CMD = ('kubectl get pods -A --field-selector '
            'spec.nodeName=worker-1 -o json')


def test_pods_left_ignores_daemonset_mirror_and_finished_pods():
    client = make_client()
    client.conn.script(r'get pods', stdout=pods_json(
        pod('web-1', owner='ReplicaSet'),
        pod('calico-node-x', 'kube-system', owner='DaemonSet'),
        pod('nginx-proxy-worker-1', 'kube-system', owner='Node',
            mirror=True),
        pod('job-1', owner='Job', phase='Succeeded'),
        pod('job-2', owner='Job', phase='Failed'),
        pod('bare'), pod('db-0', 'data', owner='StatefulSet')))
    assert client.pods_left('worker-1') == [
        'data/db-0', 'default/bare', 'default/web-1']
    assert client.conn.commands == [PODS_CMD]


def test_wait_evacuated_polls_with_backoff_until_empty():
    clock = FakeClock()
    client = make_client(clock=clock)
    busy = pods_json(pod('web-1', owner='ReplicaSet'),
                     pod('calico-node-x', 'kube-system', owner='DaemonSet'))
    client.conn.script(r'get pods', stdout=busy, times=3)
    client.conn.script(r'get pods', stdout=pods_json(
        pod('calico-node-x', 'kube-system', owner='DaemonSet')))
    client.wait_evacuated('worker-1', timeout=300)
    assert client.conn.commands == [PODS_CMD] * 4
    assert clock.sleeps == [1.0, 2.0, 4.0]


def test_wait_evacuated_gives_up_at_the_deadline_naming_pods():
    clock = FakeClock()
    client = make_client(clock=clock)
    client.conn.script(r'get pods', stdout=pods_json(
        pod('web-1', owner='ReplicaSet'), pod('db-0', 'data')))
    with pytest.raises(exceptions.WaitTimedOut) as info:
        client.wait_evacuated('worker-1', timeout=40)
    # 1+2+4+8+10+10 = 35, then the remaining 5 s, then one last poll
    assert clock.sleeps == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 5.0]
    assert len(client.conn.commands) == 8
    message = str(info.value)
    assert 'worker-1' in message and '10.0.0.11' in message
    assert '2 pod(s) left: data/db-0, default/web-1' in message
    assert isinstance(info.value, exceptions.MgmtDriverRemoteCommandTimeOut)


def test_wait_evacuated_on_an_empty_node_does_not_sleep():
    clock = FakeClock()
    client = make_client(clock=clock)
    client.conn.script(r'get pods', stdout=pods_json())
    client.wait_evacuated('worker-1')
    assert clock.sleeps == [] and len(client.conn.commands) == 1


# ---------------------------------------------------- admin credentials --

SECRET_CMD = 'kubectl get secret tacker-admin-token -n kube-system -o json'


def secret_json(token=None, ca=None):
    data = {'namespace': b64('kube-system')}
    if token:
        data['token'] = b64(token)
    if ca:
        data['ca.crt'] = b64(ca)
    return json.dumps({'kind': 'Secret', 'data': data,
                       'type': 'kubernetes.io/service-account-token'})


def test_admin_manifest_documents():
    manifest = json.loads(kubectl.admin_manifest('vim-admin',
                                                 'tacker-system'))
    assert (manifest['apiVersion'], manifest['kind']) == ('v1', 'List')
    docs = manifest['items']
    assert [d['kind'] for d in docs] == [
        'ServiceAccount', 'ClusterRoleBinding', 'Secret']
    sa, binding, secret = docs
    assert sa['metadata'] == {'name': 'vim-admin',
                              'namespace': 'tacker-system'}
    assert binding['roleRef'] == {'apiGroup': 'rbac.authorization.k8s.io',
                                  'kind': 'ClusterRole',
                                  'name': 'cluster-admin'}
    assert binding['subjects'] == [{'kind': 'ServiceAccount',
                                    'name': 'vim-admin',
                                    'namespace': 'tacker-system'}]
    assert secret['type'] == 'kubernetes.io/service-account-token'
    assert secret['metadata'] == {
        'name': 'vim-admin-token', 'namespace': 'tacker-system',
        'annotations': {'kubernetes.io/service-account.name': 'vim-admin'}}


def test_admin_credentials_apply_then_poll_token(caplog):
    caplog.set_level(logging.DEBUG)
    clock = FakeClock()
    client = make_client(clock=clock)
    client.conn.script(r'get secret', stdout=secret_json(), times=1)
    client.conn.script(r'get secret', exit_code=1, times=1,
                       stderr='Error from server (NotFound): secrets '
                              '"tacker-admin-token" not found\n')
    client.conn.script(r'get secret', stdout=secret_json(TOKEN, CA))
    creds = client.admin_credentials()
    assert creds.token == TOKEN and creds.ca_cert == CA
    assert client.conn.commands == [
        'kubectl apply -f -', SECRET_CMD, SECRET_CMD, SECRET_CMD]
    assert clock.sleeps == [1.0, 2.0]
    manifest = client.conn.stdins[0]
    assert manifest == kubectl.admin_manifest()
    # the token is never on a command line, in a log record or a repr
    for text in client.conn.commands + [manifest] + [
            r.getMessage() for r in caplog.records]:
        assert TOKEN not in text and b64(TOKEN) not in text
    assert TOKEN not in repr(creds) and TOKEN not in str(creds)
    assert any('admin token' in r.getMessage() for r in caplog.records)


def test_admin_credentials_custom_names():
    client = make_client()
    client.conn.script(r'get secret', stdout=secret_json(TOKEN, CA))
    client.admin_credentials('vim-admin', 'tacker', secret_name='vim-tok')
    assert client.conn.commands == [
        'kubectl apply -f -', 'kubectl get secret vim-tok -n tacker -o json']
    assert '"name": "vim-tok"' in client.conn.stdins[0]


def test_admin_credentials_time_out_when_never_filled():
    clock = FakeClock()
    client = make_client(clock=clock)
    client.conn.script(r'get secret', stdout=secret_json(ca=CA))
    with pytest.raises(exceptions.WaitTimedOut) as info:
        client.admin_credentials(timeout=20)
    assert 'kube-system/tacker-admin-token' in str(info.value)
    assert sum(clock.sleeps) == 20


def test_admin_credentials_failure_keeps_stdout_out_of_the_error():
    client = make_client()
    client.conn.script(r'get secret', stdout=secret_json(TOKEN, CA),
                       exit_code=1)
    with pytest.raises(exceptions.RemoteCommandFailed) as info:
        client.admin_credentials()
    assert b64(TOKEN) not in str(info.value)
    assert info.value.result.stdout == ''


def test_admin_credentials_timeout_keeps_stdout_out_of_the_error():
    client = make_client()
    client.conn.script(r'get secret', stdout=secret_json(TOKEN, CA),
                       timeout=True)
    with pytest.raises(exceptions.RemoteCommandTimedOut) as info:
        client.admin_credentials()
    assert b64(TOKEN) not in str(info.value)
    assert info.value.result.stdout == ''
    assert info.value.result.command == SECRET_CMD


@pytest.mark.parametrize('kwargs', [
    {'name': 'Admin'}, {'namespace': 'kube_system'},
    {'name': 'a\nkind: Pod'}, {'secret_name': '-x'}])
def test_admin_names_must_be_dns_labels(kwargs):
    client = make_client()
    with pytest.raises(exceptions.MgmtDriverParamInvalid):
        client.admin_credentials(**kwargs)
    assert client.conn.calls == []


def test_admin_credentials_repr_hides_token():
    creds = kubectl.AdminCredentials(token=TOKEN, ca_cert=CA)
    assert repr(creds) == '<AdminCredentials token=*** ca_cert=%d chars>' \
        % len(CA)


# ------------------------------------------------------ first reachable --

class DownConnection(RecordingConnection):
    def run(self, command, **kwargs):
        self.calls.append(('run', ssh.display_command(command)))
        raise exceptions.SSHConnectError(host=self.host, port=22,
                                         attempts=3, reason='timed out')


def _down_broken_good():
    """A host SSH does not reach, one without kubectl, a good one."""
    broken = RecordingConnection('10.0.0.12')
    broken.script(r'version', exit_code=127,
                  stderr='sh: 1: kubectl: not found\n')
    return (DownConnection('10.0.0.11'), broken,
            RecordingConnection('10.0.0.13'))


def test_first_reachable_skips_dead_and_broken_hosts():
    down, broken, good = _down_broken_good()
    assert kubectl.first_reachable([down, broken, good]) is good
    for conn in (down, broken, good):
        assert conn.commands == ['kubectl version --client']
    assert good.timeouts == [30]


def test_first_reachable_stops_at_the_first_good_host():
    first, second = RecordingConnection('a'), RecordingConnection('b')
    assert kubectl.first_reachable([first, second]) is first
    assert second.calls == []


def test_no_reachable_host_names_every_host_and_why():
    down = DownConnection('10.0.0.11')
    broken = RecordingConnection('10.0.0.12')
    broken.script(r'kubectl', exit_code=127,
                  stderr='sh: 1: kubectl: not found\n')
    with pytest.raises(exceptions.NoReachableHost) as info:
        kubectl.first_reachable([down, broken])
    message = str(info.value)
    assert 'kubectl version --client' in message
    assert '10.0.0.11 (SSH connection to 10.0.0.11:22 failed' in message
    assert '10.0.0.12 (' in message and 'kubectl: not found' in message


def test_client_on_first_reachable_probes_with_its_own_argv():
    down = DownConnection('10.0.0.11')
    good = RecordingConnection('10.0.0.12')
    client = kubectl.client_on_first_reachable(
        [down, good], sudo=True, kubeconfig='/etc/kubernetes/admin.conf',
        settings=SETTINGS)
    assert client.conn is good
    assert good.commands == ['sudo -n kubectl --kubeconfig '
                             '/etc/kubernetes/admin.conf version --client']


# -------------------------------------------------------- cluster-info --

def cluster_info(*servers, extra=None):
    kubeconfig = 'apiVersion: v1\nkind: Config\nclusters:\n' + ''.join(
        '- name: ""\n  cluster:\n    certificate-authority-data: Q0E=\n'
        '    server: %s\n' % server for server in servers)
    data = {'kubeconfig': kubeconfig}
    data.update(extra or {})
    return json.dumps({'apiVersion': 'v1', 'kind': 'ConfigMap',
                       'metadata': {'name': 'cluster-info'}, 'data': data})


def test_cluster_info_already_right_is_one_command():
    client = make_client()
    client.conn.script(r'get configmap cluster-info',
                       stdout=cluster_info('https://10.0.0.5:8383'))
    assert client.point_cluster_info('https://10.0.0.5:8383') == \
        'https://10.0.0.5:8383'
    assert client.conn.commands == [
        'kubectl get configmap cluster-info -n kube-public -o json']


def test_cluster_info_naming_a_removed_master_is_rewritten():
    client = make_client()
    client.conn.script(r'get configmap cluster-info', stdout=cluster_info(
        'https://10.0.0.11:6443', extra={'jws-kubeconfig-abcdef': 'sig'}))
    client.conn.script(r'apply -f -', stdout='configmap/cluster-info '
                                             'configured')
    old = client.point_cluster_info('https://10.0.0.5:8383')
    assert old == 'https://10.0.0.11:6443'
    assert client.conn.commands[1] == 'kubectl apply -f -'
    applied = json.loads(client.conn.stdins[1])
    assert applied['metadata'] == {'name': 'cluster-info',
                                   'namespace': 'kube-public'}
    # Only the kubeconfig: the bootstrap signer's keys stay the cluster's.
    assert list(applied['data']) == ['kubeconfig']
    config = json.loads(applied['data']['kubeconfig'])
    assert config['clusters'][0]['cluster'] == {
        'certificate-authority-data': 'Q0E=',
        'server': 'https://10.0.0.5:8383'}


@pytest.mark.parametrize('stdout, problem', [
    ('not json', 'no valid JSON'),
    (json.dumps({'data': {}}), 'data.kubeconfig must be a string'),
    (json.dumps({'data': {'kubeconfig': 'clusters: []'}}),
     'clusters is empty'),
    (json.dumps({'data': {'kubeconfig': 'clusters: [{cluster: {}}]'}}),
     'clusters[0].cluster.server must be a string'),
    (json.dumps({'data': {'kubeconfig': 'a: &x 1\nb: *x'}}),
     'not YAML'),
    (json.dumps({'data': {'kubeconfig': 'x' * (
        kubectl.MAX_CLUSTER_INFO_CHARS + 1)}}), 'longer than'),
])
def test_malformed_cluster_info_is_refused_naming_the_field(stdout,
                                                            problem):
    client = make_client()
    client.conn.script(r'get configmap cluster-info', stdout=stdout)
    with pytest.raises(exceptions.RemoteDataInvalid) as info:
        client.point_cluster_info('https://10.0.0.5:8383')
    assert problem in str(info.value) and '10.0.0.11' in str(info.value)
    assert len(client.conn.commands) == 1


def test_an_unprintable_cluster_info_server_is_not_echoed():
    client = make_client()
    client.conn.script(r'get configmap cluster-info', stdout=cluster_info(
        '"https://evil\\n[INFO] forged line"'))
    old = client.point_cluster_info('https://10.0.0.5:8383')
    assert old == '(31 characters, not shown)'
    assert json.loads(json.loads(client.conn.stdins[1])['data'][
        'kubeconfig'])['clusters'][0]['cluster']['server'] == \
        'https://10.0.0.5:8383'


def test_first_reachable_raises_a_changed_host_key_when_no_host_works():
    changed = exceptions.HostKeyChanged(
        host='10.0.0.11', port=22, fingerprint='new', expected='old',
        known_hosts='kh', entry='10.0.0.11')
    down = FakeConnection('10.0.0.11')
    down.run = lambda *a, **k: (_ for _ in ()).throw(changed)
    other = FakeConnection('10.0.0.12')
    other.script(r'version', exit_code=1)
    with pytest.raises(exceptions.HostKeyChanged):
        kubectl.first_reachable([down, other])
    ok = FakeConnection('10.0.0.13')
    assert kubectl.first_reachable([down, ok]) is ok


# ------------------------------------------- version and nodes at once --

def _nodes(*names, ready='True'):
    return json.dumps({'items': [{'metadata': {'name': n}, 'status': {
        'conditions': [{'type': 'Ready', 'status': ready}]}}
        for n in names]})


def test_nodes_on_first_reachable_asks_both_in_one_command():
    # issue 40 item 5: the hook's client probe and its node list are one
    # command; a host where kubectl does not run is passed over.
    down, broken, good = _down_broken_good()
    good.script(r'get nodes -o json', stdout=_nodes('m1', 'w1'))
    client, listed = kubectl.nodes_on_first_reachable(
        [down, broken, good], sudo=True, settings=SETTINGS)
    assert client.conn is good and listed.names == ['m1', 'w1']
    assert listed.infos['w1'].ready == 'True'
    assert len(good.calls) == 1 and len(broken.calls) == 1
    assert good.commands == ['sudo -n kubectl version --client && '
                             'sudo -n kubectl get nodes -o json']


def test_nodes_on_first_reachable_names_the_failed_command():
    broken = RecordingConnection('10.0.0.12')
    broken.script(r'version', exit_code=127,
                  stderr='sh: 1: kubectl: not found\n')
    with pytest.raises(exceptions.NoReachableHost) as info:
        kubectl.nodes_on_first_reachable([broken], settings=SETTINGS)
    message = str(info.value)
    assert 'kubectl version --client' in message
    assert 'kubectl: not found' in message and 'KN:' not in message


@pytest.mark.parametrize('timeout', [False, True])
def test_a_failed_node_list_is_raised_not_passed_over(timeout):
    first, second = RecordingConnection('a'), RecordingConnection('b')
    first.script(r'get nodes', exit_code=1, timeout=timeout,
                 stderr='The connection to the server was refused\n')
    error = exceptions.RemoteCommandTimedOut if timeout else \
        exceptions.RemoteCommandFailed
    with pytest.raises(error) as info:
        kubectl.nodes_on_first_reachable([first, second], settings=SETTINGS)
    assert info.value.result.command == 'kubectl get nodes -o json'
    assert 'refused' in str(info.value) and 'KN:' not in str(info.value)
    assert second.calls == []


def test_nodes_program_on_a_real_shell(tmp_path):
    fake = tmp_path / 'kubectl'
    fake.write_text('#!/bin/sh\n[ "$1" = version ] && exit "$VERSION_RC"\n'
                    'echo "listed $*"; exit 3\n')
    fake.chmod(0o755)

    def run(version_rc):
        return subprocess.run(
            programs.command(kubectl.NODES_PROGRAM, str(fake)),
            capture_output=True, text=True, check=False,
            env={'VERSION_RC': str(version_rc), 'PATH': '/usr/bin:/bin'})
    failed = run(1)
    assert (failed.returncode, failed.stdout, failed.stderr) == (
        97, '', 'KN:NOCLIENT\n')
    listed = run(0)
    assert (listed.returncode, listed.stdout, listed.stderr) == (
        3, 'listed get nodes -o json\n', 'KN:CLIENT\n')


# -------------------------------------------- drain and pods at once --

def _evacuating(**drain):
    conn = RecordingConnection('10.0.0.11')
    if drain:
        conn.script(r' drain ', **drain)
    return conn, kubectl.KubectlClient(conn, settings=SETTINGS,
                                       sleep=lambda s: None)


def test_evacuate_drains_and_reads_the_pods_in_one_command():
    conn, client = _evacuating()
    conn.script(r'get pods', stdout=json.dumps({'items': []}))
    assert client.evacuate('worker-1') is True
    [command] = conn.commands
    assert command.startswith('kubectl drain worker-1 ') and command.endswith(
        ' && kubectl get pods -A --field-selector spec.nodeName=worker-1 '
        '-o json')
    assert conn.timeouts == [600 + kubectl.DRAIN_MARGIN + 120]


def test_evacuate_polls_on_while_pods_are_left():
    conn, client = _evacuating()
    conn.script(r'get pods', times=1, stdout=json.dumps({'items': [
        {'metadata': {'name': 'p', 'namespace': 'ns'},
         'status': {'phase': 'Running'}}]}))
    conn.script(r'get pods', stdout=json.dumps({'items': []}))
    assert client.evacuate('worker-1') is True
    assert len(conn.commands) == 2 and conn.commands[1].startswith(
        'kubectl get pods -A ')


def test_evacuate_a_failed_drain_is_the_drains_error():
    conn, client = _evacuating(exit_code=1, stderr='error: cannot drain\n')
    with pytest.raises(exceptions.RemoteCommandFailed) as info:
        client.evacuate('worker-1')
    assert info.value.result.command.startswith('kubectl drain worker-1 ')
    assert 'cannot drain' in str(info.value)
    assert len(conn.commands) == 1


def test_evacuate_of_an_unknown_node_does_nothing():
    conn, client = _evacuating(
        exit_code=1, stderr='Error from server (NotFound): nodes '
                            '"worker-1" not found\n')
    assert client.evacuate('worker-1') is False


@pytest.mark.parametrize('timeout', [False, True])
def test_evacuate_a_failed_pod_list_names_it(timeout):
    conn, client = _evacuating()
    conn.script(r'get pods', exit_code=1, timeout=timeout,
                stderr='Unable to connect to the server\n')
    error = exceptions.RemoteCommandTimedOut if timeout else \
        exceptions.RemoteCommandFailed
    with pytest.raises(error) as info:
        client.evacuate('worker-1')
    assert info.value.result.command.startswith('kubectl get pods -A ')
    assert 'Unable to connect' in str(info.value)
    assert 'KD:' not in str(info.value)


@pytest.mark.parametrize('drain_rc', [0, 5])
def test_drain_program_on_a_real_shell(tmp_path, drain_rc):
    fake = tmp_path / 'kubectl'
    fake.write_text('#!/bin/sh\necho "ran $*"\n'
                    '[ "$2" = drain ] && exit "$DRAIN_RC"\nexit 3\n')
    fake.chmod(0o755)
    done = subprocess.run(
        programs.command(kubectl.DRAIN_PROGRAM, 'n-1', '2', str(fake),
                         '-v', 'drain', 'n-1', '--force'),
        capture_output=True, text=True, check=False,
        env={'DRAIN_RC': str(drain_rc), 'PATH': '/usr/bin:/bin'})
    drained = 'ran -v drain n-1 --force\n'
    if drain_rc:
        assert (done.returncode, done.stdout, done.stderr) == (
            5, drained, '')
    else:
        assert (done.returncode, done.stdout, done.stderr) == (
            3, drained + 'KD:PODS\nran -v get pods -A --field-selector '
            'spec.nodeName=n-1 -o json\n', 'KD:PODS\n')


def test_drain_of_finds_the_drain_by_the_programs_arguments():
    """Before: ``argv[6:]``, the words after ``sh -c PROGRAM sh NODE N``:
    a word before ``sh`` (``sudo -n``) gave a wrong drain."""
    argv = programs.command(kubectl.DRAIN_PROGRAM, 'worker-1', '4', 'sudo',
                            '-n', 'kubectl', '--kubeconfig=/k', 'drain',
                            'worker-1', '--force', '--timeout=60s')
    drain = ('sudo -n kubectl --kubeconfig=/k drain worker-1 --force '
             '--timeout=60s')
    assert kubectl.drain_of(argv) == drain
    assert kubectl.drain_of(['sudo', '-n'] + argv) == drain
    # Arguments of another shape are no drain.
    for args in (['worker-1'], ['worker-1', 'x', 'kubectl', 'drain'],
                 ['worker-1', '1', 'kubectl', 'drain', 'worker-2'],
                 ['worker-1', '2', 'kubectl', 'drain', 'worker-1'],
                 # a digit int() refuses (str.isdigit() takes it)
                 ['worker-1', '\u00b2', 'kubectl', 'drain', 'worker-1']):
        assert kubectl.drain_of(
            programs.command(kubectl.DRAIN_PROGRAM, *args)) == ''
    assert kubectl.drain_of(['kubectl', 'drain', 'worker-1']) == ''
