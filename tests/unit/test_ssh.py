"""Unit tests of mgmt_driver.remote.ssh: no network, no sleeps."""

import os
import stat

import paramiko
import pytest

from mgmt_driver.common import exceptions
from mgmt_driver.remote import ssh


def _settings(tmp_path, retries=3, policy='accept-new'):
    return ssh.SSHSettings(connect_retries=retries, retry_initial_delay=1,
                           retry_max_delay=3, host_key_policy=policy,
                           known_hosts_file=str(tmp_path / 'kh'))


class TestCommandResult:
    def test_ok_and_failed(self):
        assert ssh.CommandResult('h', 'c', '', '', 0).ok
        assert ssh.CommandResult('h', 'c', '', '', 2).failed

    def test_tail_prefers_stderr(self):
        result = ssh.CommandResult('h', 'c', 'a\nb\n',
                                   '1\n2\n3\n4\n', 1)
        assert result.tail(2) == '3\n4'

    def test_tail_falls_back_to_stdout(self):
        result = ssh.CommandResult('h', 'c', 'a\nb\nc\n', '  \n', 1)
        assert result.tail(2) == 'b\nc'

    def test_repr_is_short(self):
        text = repr(ssh.CommandResult('h', 'x' * 500, 'o' * 500, '', 0))
        assert len(text) < 120 and 'exit=0' in text


class TestDisplayCommand:
    def test_argv_is_quoted(self):
        assert ssh.display_command(['echo', 'a b', '$(x)']) == \
            "echo 'a b' '$(x)'"

    def test_env_prefix_for_argv(self):
        assert ssh.display_command(['cmd'], {'B': '2', 'A': 'x y'}) == \
            "env 'A=x y' B=2 cmd"

    def test_env_wraps_shell_string(self):
        assert ssh.display_command('a | b', {'A': '1'}) == \
            "env A=1 sh -c 'a | b'"

    def test_quote_handles_non_strings(self):
        assert ssh.quote(8383) == '8383'
        assert ssh.quote("it's") == "'it'\"'\"'s'"


def test_credentials_repr_hides_secrets():
    creds = ssh.Credentials('u', password='S3cret!', key_text='KEYDATA',
                            key_passphrase='PHRASE')
    text = repr(creds)
    assert 'S3cret!' not in text and 'KEYDATA' not in text
    assert 'PHRASE' not in text and "'u'" in text


class TestOutput:
    def test_utf8_split_across_chunks(self):
        lines = []
        out = ssh._Output(lines.append)
        data = 'héllo\nwörld'.encode()
        for i in range(len(data)):
            out.feed(data[i:i + 1])
        assert out.text() == 'héllo\nwörld'
        assert lines == ['héllo', 'wörld']

    def test_carriage_returns_are_dropped_from_lines(self):
        lines = []
        out = ssh._Output(lines.append)
        out.feed(b'a\r\nb\r\n')
        out.text()
        assert lines == ['a', 'b']


class TestStats:
    def test_counts_per_host(self):
        stats = ssh.Stats()
        stats.record('a', 'commands')
        stats.record('a', 'commands')
        stats.record('b', 'connections')
        assert stats.snapshot() == {
            'a': {'connections': 0, 'commands': 2, 'transfers': 0},
            'b': {'connections': 1, 'commands': 0, 'transfers': 0}}
        assert stats.total('commands') == 2


@pytest.fixture(scope='module')
def keys():
    return paramiko.ECDSAKey.generate(), paramiko.ECDSAKey.generate()


class TestKnownHosts:
    def test_entry_names(self):
        assert ssh.KnownHosts.entry('10.0.0.1', 22) == '10.0.0.1'
        assert ssh.KnownHosts.entry('fd00::1', 2222) == '[fd00::1]:2222'

    def test_unknown_policy_is_refused(self, tmp_path):
        with pytest.raises(ValueError, match='ask'):
            ssh.KnownHosts(str(tmp_path / 'kh'), 'ask')

    def test_accept_new_records_with_mode_0600(self, tmp_path, keys):
        path = tmp_path / 'sub' / 'kh'
        known = ssh.KnownHosts(str(path), 'accept-new')
        known.verify('10.0.0.1', 2222, keys[0])
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert path.read_text().startswith('[10.0.0.1]:2222 ecdsa-sha2')
        known.verify('10.0.0.1', 2222, keys[0])  # same key: fine
        assert known.known_key_types('10.0.0.1', 2222) == [
            keys[0].get_name()]

    def test_changed_key_refused_by_every_policy(self, tmp_path, keys):
        ssh.KnownHosts(str(tmp_path / 'kh')).verify('h', 22, keys[0])
        for policy in ssh.KnownHosts.POLICIES:
            known = ssh.KnownHosts(str(tmp_path / 'kh'), policy)
            with pytest.raises(exceptions.HostKeyChanged) as info:
                known.verify('h', 22, keys[1])
            assert keys[1].fingerprint in str(info.value)
            assert keys[0].fingerprint in str(info.value)

    def test_other_key_type_counts_as_changed(self, tmp_path, keys):
        known = ssh.KnownHosts(str(tmp_path / 'kh'))
        known.verify('h', 22, keys[0])
        rsa = paramiko.RSAKey.generate(1024)
        with pytest.raises(exceptions.HostKeyChanged):
            known.verify('h', 22, rsa)

    def test_reject_and_warn_record_nothing(self, tmp_path, keys):
        path = tmp_path / 'kh'
        with pytest.raises(exceptions.HostKeyUnknown, match='reject'):
            ssh.KnownHosts(str(path), 'reject').verify('h', 22, keys[0])
        ssh.KnownHosts(str(path), 'warn').verify('h', 22, keys[0])
        assert not path.exists()

    def test_forget(self, tmp_path, keys):
        known = ssh.KnownHosts(str(tmp_path / 'kh'))
        known.verify('h', 22, keys[0])
        known.verify('g', 22, keys[1])
        assert known.forget('h') and not known.forget('h')
        known.verify('h', 22, keys[1])  # re-learnt after forget
        assert known.known_key_types('g', 22)

    def test_check_records_nothing_and_record_says_who_added(self, tmp_path,
                                                             keys):
        known = ssh.KnownHosts(str(tmp_path / 'kh'))
        assert known.check('h', 22, keys[0])
        assert not (tmp_path / 'kh').exists()
        assert known.record('h', 22, keys[0])
        assert not known.record('h', 22, keys[0])  # already there
        assert not known.check('h', 22, keys[0])
        with pytest.raises(exceptions.HostKeyChanged):
            known.record('h', 22, keys[1])

    def test_forget_one_key_leaves_another(self, tmp_path, keys):
        known = ssh.KnownHosts(str(tmp_path / 'kh'))
        known.verify('h', 22, keys[0])
        # Not the key recorded (the operator pinned another): kept.
        assert not known.forget('h', 22, ssh.key_line(keys[1]))
        assert known.known_key_types('h', 22)
        assert known.forget('h', 22, ssh.key_line(keys[0]))
        assert not known.known_key_types('h', 22)


class _ScriptedConnection(ssh.Connection):
    """Connection whose attempts fail with scripted errors, then succeed."""

    def __init__(self, errors, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.errors = list(errors)
        self.attempts = 0

    def _connect_once(self):
        self.attempts += 1
        if self.errors:
            raise self.errors.pop(0)
        return _FakeTransport()


class _FakeTransport:
    def is_active(self):
        return True

    def close(self):
        pass


def _scripted(tmp_path, errors, retries=3):
    delays = []
    conn = _ScriptedConnection(errors, 'h', ssh.Credentials('u'), 22,
                               _settings(tmp_path, retries),
                               sleep=delays.append)
    return conn, delays


class TestRetries:
    def test_backoff_doubles_up_to_the_cap(self, tmp_path):
        conn, delays = _scripted(
            tmp_path, [ConnectionRefusedError()] * 3, retries=3)
        assert isinstance(conn._transport(), _FakeTransport)
        assert delays == [1, 2, 3] and conn.attempts == 4

    def test_gives_up_with_clear_error(self, tmp_path):
        conn, delays = _scripted(
            tmp_path, [ConnectionRefusedError('refused')] * 5, retries=2)
        with pytest.raises(exceptions.SSHConnectError) as info:
            conn._transport()
        assert conn.attempts == 3 and len(delays) == 2
        assert 'h:22' in str(info.value) and 'refused' in str(info.value)

    @pytest.mark.parametrize('error', [
        exceptions.HostKeyChanged(host='h', port=22, fingerprint='a',
                                  expected='b', known_hosts='k', entry='h'),
        ssh._KeyError('bad key'),
    ])
    def test_never_retried(self, tmp_path, error):
        conn, delays = _scripted(tmp_path, [error], retries=5)
        with pytest.raises(exceptions.MgmtDriverOtherError):
            conn._transport()
        assert conn.attempts == 1 and delays == []

    def test_transport_is_reused_until_it_drops(self, tmp_path):
        conn, _ = _scripted(tmp_path, [])
        first = conn._transport()
        assert conn._transport() is first and conn.attempts == 1
        first.is_active = lambda: False
        assert conn._transport() is not first and conn.attempts == 2


def test_private_key_errors_never_show_key_material(tmp_path):
    creds = ssh.Credentials('u', key_text='-----BEGIN GARBAGE SECRETKEY')
    with pytest.raises(ssh._KeyError) as info:
        ssh._load_private_key(creds)
    assert 'SECRETKEY' not in str(info.value)


def test_encrypted_key_needs_passphrase(tmp_path):
    key = paramiko.RSAKey.generate(1024)
    path = str(tmp_path / 'k')
    key.write_private_key_file(path, password='pp')
    with pytest.raises(ssh._KeyError, match='passphrase'):
        ssh._load_private_key(ssh.Credentials('u', key_file=path))
    loaded = ssh._load_private_key(
        ssh.Credentials('u', key_file=path, key_passphrase='pp'))
    assert loaded.fingerprint == key.fingerprint


def test_pool_hands_out_one_connection_per_host(tmp_path):
    pool = ssh.ConnectionPool(_settings(tmp_path))
    creds = ssh.Credentials('u')
    first = pool.connection('h', creds, 22)
    assert pool.connection('h', creds, '22') is first
    assert pool.connection('g', creds, 22) is not first
    assert first.known_hosts is pool.known_hosts
    pool.close_all()


def test_settings_from_conf(tmp_path):
    from oslo_config import cfg
    from oslo_config import fixture

    from mgmt_driver.common import conf as kconf
    conf = cfg.ConfigOpts()
    kconf.register_opts(conf)
    fix = fixture.Config(conf)
    fix.setUp()
    try:
        fix.config(group='kubespray_mgmt', host_key_policy='reject',
                   ssh_connect_retries=7)
        settings = ssh.SSHSettings.from_conf(conf)
    finally:
        fix.cleanUp()
    assert settings.host_key_policy == 'reject'
    assert settings.connect_retries == 7
    assert os.path.basename(settings.known_hosts_file) == 'known_hosts'
