"""mgmt_driver.remote.ssh against a real OpenSSH sshd on loopback."""

import os
import pwd
import stat
import subprocess
import time
import uuid

import pytest

from mgmt_driver.common import exceptions
from mgmt_driver.remote import ssh

HOSTILE = [
    '; touch {canary}',
    '$(touch {canary})',
    '`touch {canary}`',
    "'; touch {canary}; '",
    '"; touch {canary}; "',
    'x\ntouch {canary}',
    '&& touch {canary}',
    '| touch {canary}',
]


def _settings(tmp_path, policy='accept-new', retries=0):
    return ssh.SSHSettings(connect_timeout=5, connect_retries=retries,
                           retry_initial_delay=0.01, retry_max_delay=0.02,
                           command_timeout=30, host_key_policy=policy,
                           known_hosts_file=str(tmp_path / 'known_hosts'))


def _key_creds(sshd):
    return ssh.Credentials(sshd.user, key_file=sshd.client_key)


@pytest.fixture
def conn(sshd, tmp_path):
    stats = ssh.Stats()
    with ssh.Connection('127.0.0.2', _key_creds(sshd), sshd.port,
                        _settings(tmp_path), stats=stats) as connection:
        yield connection


def test_run_returns_output_and_exit_code(conn):
    result = conn.run('echo out; echo err >&2; exit 3', check=False)
    assert (result.stdout, result.stderr, result.exit_code) == (
        'out\n', 'err\n', 3)
    assert result.failed and result.host == '127.0.0.2'


def test_nonzero_exit_raises_with_result_and_tail(conn):
    with pytest.raises(exceptions.RemoteCommandFailed) as info:
        conn.run(['sh', '-c', 'echo first; echo boom >&2; exit 7'])
    assert info.value.result.exit_code == 7
    assert '127.0.0.2' in str(info.value) and 'boom' in str(info.value)
    assert isinstance(info.value, exceptions.MgmtDriverRemoteCommandError)


def test_argv_and_env_and_stdin(conn):
    result = conn.run(['sh', '-c', 'printf "%s|%s|" "$1" "$GREETING"; cat',
                       'sh', 'a b'], env={'GREETING': 'hi there'},
                      stdin='from stdin')
    assert result.stdout == 'a b|hi there|from stdin'


def test_lines_stream_to_callback_in_order(conn):
    lines = []
    conn.run('for i in 1 2 3; do echo line$i; done', on_line=lines.append)
    assert lines == ['line1', 'line2', 'line3']


def test_hung_command_times_out_and_is_stopped_on_the_host(conn):
    marker = '%d.%d' % (os.getpid(), time.monotonic_ns() % 100000)
    start = time.monotonic()
    with pytest.raises(exceptions.RemoteCommandTimedOut) as info:
        conn.run(['sleep', '3%s' % marker], timeout=1)
    assert time.monotonic() - start < 10
    assert info.value.timeout == 1
    assert isinstance(info.value, exceptions.MgmtDriverRemoteCommandTimeOut)
    deadline = time.monotonic() + 10
    while subprocess.run(['pgrep', '-f', 'sleep 3%s' % marker],
                         capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, 'remote sleep still running'
        time.sleep(0.1)


def test_atomic_write_with_mode(conn, sshd):
    path = os.path.join(sshd.scratch, 'secret.yaml')
    conn.write_file(path, 'token: abc\n', mode=0o600)
    conn.write_file(path, 'token: def\n', mode=0o600)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert conn.read_file(path) == 'token: def\n'
    assert not [n for n in os.listdir(sshd.scratch) if n.endswith('.tmp')]


def test_read_missing_file(conn, sshd):
    path = os.path.join(sshd.scratch, 'absent')
    assert conn.read_file(path, missing_ok=True) is None
    with pytest.raises(exceptions.RemoteFileError, match='absent'):
        conn.read_file(path)


def test_write_into_missing_directory_fails_clearly(conn, sshd):
    path = os.path.join(sshd.scratch, 'no', 'such', 'dir', 'f')
    with pytest.raises(exceptions.RemoteFileError) as info:
        conn.write_file(path, 'x')
    assert 'Writing' in str(info.value) and '127.0.0.2' in str(info.value)


def test_put_and_get(conn, sshd, tmp_path):
    local = tmp_path / 'local.txt'
    local.write_text('hello\n')
    os.chmod(local, 0o640)
    remote = os.path.join(sshd.scratch, 'copied.txt')
    conn.put(str(local), remote)
    assert stat.S_IMODE(os.stat(remote).st_mode) == 0o640
    back = tmp_path / 'back.txt'
    conn.get(remote, str(back))
    assert back.read_text() == 'hello\n'


def test_one_transport_for_many_commands_and_transfers(sshd, tmp_path):
    stats = ssh.Stats()
    before = sshd.accepted_logins()
    with ssh.Connection('127.0.0.2', _key_creds(sshd), sshd.port,
                        _settings(tmp_path), stats=stats) as connection:
        for i in range(20):
            assert connection.run(['echo', str(i)]).stdout == '%d\n' % i
        path = os.path.join(sshd.scratch, 'reuse')
        connection.write_file(path, 'x')
        connection.read_file(path)
    counts = stats.snapshot()['127.0.0.2']
    assert counts == {'connections': 1, 'commands': 20, 'transfers': 2}
    assert sshd.accepted_logins() - before == 1


@pytest.mark.parametrize('template', HOSTILE)
def test_hostile_argument_is_data_not_code(conn, sshd, template):
    canary = os.path.join(sshd.scratch, 'CANARY')
    value = template.format(canary=canary)
    result = conn.run(['printf', '%s', value])
    assert result.stdout == value
    conn.run(['sh', '-c', 'echo "$V" > /dev/null'], env={'V': value})
    conn.write_file(os.path.join(sshd.scratch, 'data'), value)
    assert not os.path.exists(canary)


def test_quote_builds_safe_shell_strings(conn, sshd):
    canary = os.path.join(sshd.scratch, 'CANARY2')
    value = '$(touch %s)' % canary
    result = conn.run('echo %s | wc -c' % ssh.quote(value))
    assert int(result.stdout) == len(value) + 1
    assert not os.path.exists(canary)


def test_second_address_is_reached(sshd, tmp_path):
    with ssh.Connection('127.0.0.3', _key_creds(sshd), sshd.port,
                        _settings(tmp_path)) as connection:
        assert connection.run(['id', '-un']).stdout.strip() == sshd.user


def test_key_given_as_text_with_passphrase(sshd, tmp_path):
    with open(sshd.encrypted_key) as f:
        key_text = f.read()
    creds = ssh.Credentials(sshd.user, key_text=key_text,
                            key_passphrase=sshd.passphrase)
    with ssh.Connection('127.0.0.2', creds, sshd.port,
                        _settings(tmp_path)) as connection:
        assert connection.run(['true']).ok


def test_encrypted_key_without_passphrase_fails_clearly(sshd, tmp_path):
    creds = ssh.Credentials(sshd.user, key_file=sshd.encrypted_key)
    with pytest.raises(exceptions.SSHAuthError, match='passphrase'):
        ssh.Connection('127.0.0.2', creds, sshd.port,
                       _settings(tmp_path, retries=3)).run(['true'])


def test_password_login(sshd, tmp_path):
    if not sshd.is_root:
        pytest.skip('password logins need sshd running as root')
    creds = ssh.Credentials(sshd.user, password=sshd.password)
    with ssh.Connection('127.0.0.2', creds, sshd.port,
                        _settings(tmp_path)) as connection:
        assert connection.run(['id', '-un']).stdout.strip() == sshd.user


def test_wrong_password_is_refused_without_leaking_it(sshd, tmp_path):
    if not sshd.is_root:
        pytest.skip('password logins need sshd running as root')
    creds = ssh.Credentials(sshd.user, password='Wr0ng-S3cret-xyz')
    delays = []
    with pytest.raises(exceptions.SSHAuthError) as info:
        ssh.Connection('127.0.0.2', creds, sshd.port,
                       _settings(tmp_path, retries=2),
                       sleep=delays.append).run(['true'])
    assert 'password refused' in str(info.value)
    assert 'Wr0ng-S3cret-xyz' not in str(info.value)
    assert len(delays) == 2


def test_refused_then_retries_then_clear_error(tmp_path):
    port = 1  # nothing listens on a privileged low port of 127.0.0.9
    delays = []
    conn = ssh.Connection('127.0.0.9', ssh.Credentials('u', password='p'),
                          port, _settings(tmp_path, retries=3),
                          sleep=delays.append)
    with pytest.raises(exceptions.SSHConnectError) as info:
        conn.run(['true'])
    assert len(delays) == 3 and delays == sorted(delays)
    assert '127.0.0.9:1' in str(info.value) and '4 attempt' in str(
        info.value)


def test_refused_until_sshd_comes_up(sshd, tmp_path):
    from mgmt_localsite import sshd as sshd_site
    late = sshd_site.Sshd(addresses=('127.0.0.4',))
    try:
        conn = ssh.Connection('127.0.0.4', _key_creds(late), late.port,
                              _settings(tmp_path, retries=5),
                              sleep=lambda delay: late.start())
        with conn:
            assert conn.run(['echo', 'up']).stdout == 'up\n'
    finally:
        late.cleanup()


def _where(connection):
    """``[working directory, HOME]`` of a command's session."""
    return connection.run('pwd -P; printf "%s\\n" "$HOME"').stdout.split()


def _shell_where(site, address, tmp_path):
    """The same, of a shell session (no command: OpenSSH's client)."""
    return subprocess.run(
        ['ssh', '-T', '-i', site.client_key, '-p', str(site.port),
         '-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=no',
         '-o', 'UserKnownHostsFile=%s' % (tmp_path / 'client_known_hosts'),
         '%s@%s' % (site.user, address)], input='pwd -P; echo "$HOME"\n',
        capture_output=True, text=True, timeout=30, check=True
    ).stdout.split()


def test_each_sshd_has_a_home_of_its_own(sshd, tmp_path):
    """Two plain test sshds at once (two CI lanes' tests log in the same
    account): each starts commands, shells and SFTP in one home of its
    own, ``HOME`` too, and removes it when it stops; a relative path
    names one file for a command and for SFTP (SFTP once started in the
    passwd home while commands ran elsewhere)."""
    from mgmt_localsite import sshd as sshd_site
    other = sshd_site.Sshd(addresses=('127.0.0.4',)).start()
    name, token = 'rel-' + uuid.uuid4().hex[:8], uuid.uuid4().hex
    try:
        with ssh.Connection('127.0.0.2', _key_creds(sshd), sshd.port,
                            _settings(tmp_path)) as one, \
                ssh.Connection('127.0.0.4', _key_creds(other), other.port,
                               _settings(tmp_path)) as two:
            one.run('printf %%s %s > %s' % (ssh.quote(token), ssh.quote(name)))
            assert one.read_file(name) == token
            assert two.read_file(name, missing_ok=True) is None
            two.write_file(name, 'other')
            assert two.run(['cat', name]).stdout == 'other'
            assert one.read_file(name) == token
            homes = [os.path.realpath(s.home()) for s in (sshd, other)]
            assert _where(one) == [homes[0]] * 2
            assert _where(two) == [homes[1]] * 2
            assert _shell_where(other, '127.0.0.4', tmp_path) == \
                [homes[1]] * 2
    finally:
        other.cleanup()
    assert homes[0] != homes[1]
    assert pwd.getpwnam(sshd.user).pw_dir not in homes
    assert not os.path.exists(homes[1])


class TestHostKeys:
    def _connect(self, sshd, tmp_path, policy):
        with ssh.Connection('127.0.0.2', _key_creds(sshd), sshd.port,
                            _settings(tmp_path, policy)) as connection:
            return connection.run(['true']).ok

    def test_reject_refuses_unknown_key_with_advice(self, sshd, tmp_path):
        with pytest.raises(exceptions.HostKeyUnknown) as info:
            self._connect(sshd, tmp_path, 'reject')
        assert 'ssh-keyscan' in str(info.value)
        assert 'SHA256:' in str(info.value)
        assert not (tmp_path / 'known_hosts').exists()

    def test_accept_new_records_then_reject_accepts(self, sshd, tmp_path):
        assert self._connect(sshd, tmp_path, 'accept-new')
        known = tmp_path / 'known_hosts'
        assert '[127.0.0.2]:%d ' % sshd.port in known.read_text()
        assert stat.S_IMODE(known.stat().st_mode) == 0o600
        assert self._connect(sshd, tmp_path, 'reject')

    def test_warn_accepts_without_recording(self, sshd, tmp_path):
        assert self._connect(sshd, tmp_path, 'warn')
        assert not (tmp_path / 'known_hosts').exists()

    def test_changed_key_is_refused_by_every_policy(self, sshd, tmp_path):
        assert self._connect(sshd, tmp_path, 'accept-new')
        sshd.new_host_key()
        for policy in ssh.KnownHosts.POLICIES:
            with pytest.raises(exceptions.HostKeyChanged) as info:
                self._connect(sshd, tmp_path, policy)
            assert 'ssh-keygen -R' in str(info.value)
        known_hosts = ssh.KnownHosts(str(tmp_path / 'known_hosts'))
        assert known_hosts.forget('127.0.0.2', sshd.port)
        assert self._connect(sshd, tmp_path, 'accept-new')
