"""Issue 13 rule 3 against a real sshd: what a host sends back is capped."""

import time

import pytest

from mgmt_driver.common import exceptions
from mgmt_driver.remote import ssh

MIB = 1024 * 1024


@pytest.fixture
def conn(sshd, tmp_path):
    settings = ssh.SSHSettings(
        connect_timeout=5, connect_retries=0, command_timeout=60,
        known_hosts_file=str(tmp_path / 'known_hosts'),
        max_output=MIB, max_tail_output=64 * 1024, max_line=1024,
        max_file_size=MIB)
    creds = ssh.Credentials(sshd.user, key_file=sshd.client_key)
    with ssh.Connection('127.0.0.2', creds, sshd.port,
                        settings) as connection:
        yield connection


@pytest.mark.parametrize('redirect, stream', [('', 'stdout'),
                                              ('>&2', 'stderr')])
def test_endless_output_is_stopped_with_a_clear_error(conn, redirect,
                                                      stream):
    start = time.monotonic()
    with pytest.raises(exceptions.RemoteOutputTooLarge) as info:
        conn.run('yes %s' % redirect)
    assert time.monotonic() - start < 20  # not the 60 s timeout
    message = str(info.value)
    assert '127.0.0.2' in message and 'yes' in message
    assert stream in message and str(MIB) in message
    # The connection is still usable afterwards.
    assert conn.run(['echo', 'ok']).stdout == 'ok\n'


def test_output_under_the_cap_is_whole(conn):
    result = conn.run('head -c %d /dev/zero | tr "\\0" y' % (MIB - 1))
    assert len(result.stdout) == MIB - 1


def test_long_logs_keep_their_end(conn):
    lines = []
    result = conn.run('seq 1 300000; printf "%05000d" 0', keep_tail=True,
                      on_line=lines.append)
    assert len(result.stdout) <= 64 * 1024
    assert result.stdout.startswith(tuple('0123456789'))
    assert '\n300000\n' in result.stdout
    assert len(lines) == 300001 and lines[-1] == '0' * 1024


def test_large_file_is_not_read(conn):
    path = '.kubespray-mgmt-test-big-%d' % time.time_ns()
    try:
        conn.run('head -c %d /dev/zero > %s' % (MIB + 1, path))
        with pytest.raises(exceptions.RemoteFileTooLarge) as info:
            conn.read_file(path)
        assert path in str(info.value) and '127.0.0.2' in str(info.value)
        conn.run(['truncate', '-s', str(MIB), path])
        assert len(conn.read_file(path)) == MIB
    finally:
        conn.run(['rm', '-f', path])
