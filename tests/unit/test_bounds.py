"""Issue 13 rule 3: remote output, files and parsers are bounded.

A remote host may be hostile: it may print without end, never print a
newline, serve a huge file or craft a line that makes a regular
expression backtrack.  No test here touches the network.
"""

import io

import pytest

from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.model import merging
from mgmt_driver.model import params
from mgmt_driver.model import validation
from mgmt_driver.remote import kubespray
from mgmt_driver.remote import ssh
from tests.fakes import FakeConnection
from tests.unit import params_data
from tests.unit import work

# The line that hung the old PLAY RECAP pattern for ~25 s (87 bytes).
HOSTILE_RECAP = 'h : a=' + '1111=' * 16 + '!'


def _work_per_byte(func, text):
    # Counted, not timed (tests.unit.work): the old pattern's
    # backtracking ran in C, out of the count's sight, so the line is
    # also parsed by a split now (kubespray.recap_entry).
    return work.count(func, text) / len(text)


class TestRecap:
    def test_hostile_line_is_parsed_at_once(self):
        output = 'PLAY RECAP ***\n%s\n' % HOSTILE_RECAP
        assert _work_per_byte(kubespray.parse_recap, output) < 20
        assert kubespray.parse_recap(output) == {}

    def test_ansible_lines_are_parsed(self):
        line = ('node-1   : ok=5    changed=2    unreachable=0    '
                'failed=1    skipped=3    rescued=0    ignored=0   ')
        assert kubespray.recap_entry(line) == ('node-1', {
            'ok': 5, 'changed': 2, 'unreachable': 0, 'failed': 1,
            'skipped': 3, 'rescued': 0, 'ignored': 0})

    @pytest.mark.parametrize('line', [
        'node-1 : ', 'node-1: ok=1', 'node-1 : ok=1 x', 'node-1 : ok=',
        'node-1 : =1', 'node-1 : ok=\u00b2', 'node-1 : ok=' + '9' * 19,
        'node-1 : ok=1=1', ': ok=1'])
    def test_other_lines_are_not_recap_lines(self, line):
        assert kubespray.recap_entry(line) is None

    def test_progress_logging_of_hostile_line_is_fast(self):
        progress = kubespray._Progress('h', 'cluster.yml')
        progress('PLAY RECAP ***')
        assert _work_per_byte(progress, HOSTILE_RECAP) < 20


class _TailRecorder(FakeConnection):
    def run(self, command, keep_tail=False, **kwargs):
        self.keep_tail = keep_tail
        return super().run(command, keep_tail=keep_tail, **kwargs)


def test_playbook_runs_keep_a_tail_instead_of_failing():
    conn = _TailRecorder('10.0.0.5')
    workspace = kubespray.Workspace(conn, '/srv/ws/vnf-1')
    layout = kubespray.Layout('playbooks/facts.yml', True)
    runner = kubespray.Runner(conn, '/opt/kubespray', layout, workspace,
                              settings=kubespray.PlaybookSettings())
    runner.cluster(3)
    assert conn.keep_tail is True


class TestOutputCaps:
    def test_overflow_is_flagged_and_nothing_more_is_kept(self):
        out = ssh._Output(limit=10)
        out.feed(b'0123456789')
        assert not out.overflowed
        out.feed(b'x' * 1000)
        assert out.overflowed and out.text() == '0123456789'

    def test_tail_mode_keeps_only_the_end(self):
        out = ssh._Output(limit=100, keep_tail=True)
        for i in range(10000):
            out.feed(b'line %d\n' % i)
        text = out.text()
        assert not out.overflowed and len(text) <= 100
        assert text.endswith('line 9999\n') and text.startswith('line ')

    def test_a_line_without_end_is_cut_for_on_line(self):
        lines = []
        out = ssh._Output(lines.append, max_line=50)
        for _ in range(1000):
            out.feed(b'y' * 1000)
        out.feed(b'\nnext\n')
        out.text()
        assert lines == ['y' * 50, 'next']

    def test_many_tiny_chunks_stay_linear(self):
        def feed(count):
            out = ssh._Output(lambda line: None, limit=10 ** 9,
                              max_line=64 * 1024)
            for _ in range(count):
                out.feed(b'z')
            out.text()
        assert work.growth(feed, lambda count: count, 2000) < \
            work.MAX_GROWTH


class _Channel:
    """A paramiko channel stand-in whose command prints without end."""

    closed = False
    eof_received = False

    def __init__(self, stream='stdout'):
        self.stream = stream
        self.sent = 0

    def exec_command(self, command):
        self.command = command

    def shutdown_write(self):
        pass

    def exit_status_ready(self):
        return False

    def recv_ready(self):
        return self.stream == 'stdout'

    def recv_stderr_ready(self):
        return self.stream == 'stderr'

    def recv(self, size):
        self.sent += size
        return b'y\n' * (size // 2)

    recv_stderr = recv

    def close(self):
        self.closed = True


class _Transport:
    def __init__(self, channel):
        self.channel = channel

    def open_session(self, timeout=None):
        return self.channel


class _Sftp:
    def __init__(self, data):
        self.data = data

    def open(self, path, mode):
        return io.BytesIO(self.data)


class _Canned(ssh.Connection):
    def __init__(self, channel=None, sftp=None, **limits):
        settings = ssh.SSHSettings(known_hosts_file='/nonexistent/kh',
                                   **limits)
        super().__init__('10.0.0.9', ssh.Credentials('u'), 22, settings)
        self.channel, self.sftp = channel, sftp

    def _transport(self):
        return _Transport(self.channel)

    def _sftp(self, path=None):
        return self.sftp


class TestConnectionCaps:
    @pytest.mark.parametrize('stream', ['stdout', 'stderr'])
    def test_endless_output_stops_the_command(self, stream):
        chan = _Channel(stream)
        conn = _Canned(chan, max_output=1024 * 1024)
        with pytest.raises(exceptions.RemoteOutputTooLarge) as info:
            conn.run(['yes'], timeout=30)
        message = str(info.value)
        assert '10.0.0.9' in message and 'yes' in message
        assert stream in message and '1048576' in message
        assert chan.closed and chan.sent <= 1024 * 1024 + 65536

    def test_playbook_mode_keeps_a_tail_until_the_deadline(self):
        chan = _Channel()
        conn = _Canned(chan, max_tail_output=4096, timeout_grace=0)
        with pytest.raises(exceptions.RemoteCommandTimedOut) as info:
            conn.run(['yes'], timeout=0.3, keep_tail=True)
        assert len(info.value.result.stdout) <= 4096
        assert chan.sent > 4096

    def test_large_file_is_refused(self):
        conn = _Canned(sftp=_Sftp(b'x' * 2048), max_file_size=1024)
        with pytest.raises(exceptions.RemoteFileTooLarge) as info:
            conn.read_file('/ws/hosts.yaml')
        message = str(info.value)
        assert '/ws/hosts.yaml' in message and '10.0.0.9' in message
        assert '1024' in message

    def test_file_at_the_cap_is_read(self):
        conn = _Canned(sftp=_Sftp(b'x' * 1024), max_file_size=1024)
        assert conn.read_file('/ws/hosts.yaml') == 'x' * 1024


def test_error_messages_keep_a_short_tail_of_hostile_output():
    result = ssh.CommandResult('10.0.0.9', 'cmd', 'x' * 10 ** 6,
                               ('y' * 10 ** 6 + '\n') * 30, 1)
    for error in (exceptions.RemoteCommandFailed(result),
                  exceptions.RemoteCommandTimedOut(result, 5),
                  exceptions.LoadBalancerConfigInvalid(result, '/p'),
                  exceptions.PlaybookFailed(
                      'cluster.yml', result, {}, [],
                      kubespray._output_tail(result))):
        assert len(str(error)) < 20 * 1010 + 400, type(error).__name__


# ------------------------------------------------------------ requests --

def _request_with(**sections):
    request = params_data.minimal()
    request[core.ROOT].update(sections)
    return request


def _problems(request, **kwargs):
    with pytest.raises(exceptions.ParamsInvalid) as info:
        params.parse_params(request, need_cp_names=False, **kwargs)
    return info.value.problems


def _deep(depth, leaf='x'):
    for _ in range(depth):
        leaf = [leaf]
    return leaf


def test_deep_extra_vars_are_refused_with_their_field_path():
    request = _request_with(kubespray={'extra_vars': {
        'calico': {'pools': _deep(100000)}}})
    [problem] = _problems(request)
    assert problem == ('k8s_cluster_installation_param.kubespray.'
                       'extra_vars.calico.pools' + '[0]' * 20 +
                       ': nested deeper than 24 levels')


def test_requests_at_the_depth_limit_are_fine():
    extra = _deep(validation.MAX_REQUEST_DEPTH - 4)  # under 4 levels
    spec = params.parse_params(_request_with(kubespray={
        'extra_vars': {'v': extra}}), need_cp_names=False)
    assert spec.kubespray.extra_vars['v'] == extra


def test_deep_labels_are_refused():
    request = params_data.minimal()
    request[core.ROOT]['worker_node']['labels'] = {'a': _deep(50)}
    [problem] = _problems(request)
    assert problem.startswith(
        'k8s_cluster_installation_param.worker_node.labels.a[0]')
    assert problem.endswith('nested deeper than 24 levels')


def test_large_requests_are_refused_by_size():
    request = _request_with(kubespray={'extra_vars': {
        'blob': ['x' * 1000] * 100}})
    [problem] = _problems(request, max_size=64 * 1024)
    assert problem == ('k8s_cluster_installation_param: larger than 65536 '
                       'bytes (option [kubespray_mgmt] max_request_size)')
    assert params.parse_params(request, need_cp_names=False,
                               max_size=1024 * 1024)


def test_default_size_limit_comes_from_the_option():
    request = _request_with(kubespray={'extra_vars': {
        'blob': ['x' * 1000] * 2000}})
    assert 'larger than 1048576 bytes' in _problems(request)[0]


def test_deep_scale_overrides_are_refused_before_copying():
    instantiated = params_data.minimal()
    operation = {core.ROOT: {'worker_node': {'labels': _deep(100000)}}}
    with pytest.raises(exceptions.ParamsInvalid) as info:
        merging.parse_for_operation(instantiated, operation,
                                    need_cp_names=False)
    assert 'k8s_cluster_installation_param (operation request).' \
        'worker_node.labels[0]' in str(info.value)


def test_many_problems_give_a_bounded_message():
    request = params_data.minimal()
    request[core.ROOT]['master_node'].update(
        {'unknown_%d' % i: 1 for i in range(5000)})
    with pytest.raises(exceptions.ParamsInvalid) as info:
        params.parse_params(request, need_cp_names=False)
    assert len(info.value.problems) == 5000
    assert str(info.value).endswith('and 4950 more')
    # 50 problems shown, each naming every known key of master_node
    # (16 since become_password and passwordless_sudo).
    assert len(str(info.value)) < 50 * 300


def test_a_hostile_version_string_is_cut():
    conn = FakeConnection('10.0.0.5')
    conn.script(r'^program:detect-layout ',
                stdout='KS:FILE:cluster.yml\nKS:FILE:scale.yml'
                '\nKS:FILE:remove-node.yml\nKS:FILE:facts.yml\nKS:GIT:v2.2'
                + '9' * 100000 + '\n')
    layout = kubespray.detect_layout(conn, '/opt/kubespray')
    assert len(layout.version) == 64


def test_clip_keeps_both_ends_of_a_long_line():
    line = 'fatal: [w1]: FAILED! => {' + 'x' * 5000 + '"msg": "why"}'
    clipped = exceptions.clip(line)
    assert len(clipped) <= 1000 + 7
    assert clipped.startswith('fatal: [w1]') and clipped.endswith('"why"}')
    assert exceptions.clip('short') == 'short'
