"""Issue 27 item 4 against a real sshd: what a hostile master's kubectl
prints reaches the driver's errors bounded and escaped."""

import json
import os
import re
import uuid

import pytest

from mgmt_driver.common import exceptions
from mgmt_driver.remote import kubectl
from mgmt_driver.remote import ssh
from tests.functional import sshd_fixture

#: This test's own loopback addresses (two masters).
MASTERS = ('127.0.33.1', '127.0.33.2')
HOSTILE = '\x1b]0;pwned\x07\x1b[8m\n2026-11-26 ERROR forged\r'
CONTROL = re.compile('[\x00-\x1f\x7f-\x9f\u202a-\u202e]')

#: A master's kubectl: ``get pods`` prints a 10 MB hostile list, any
#: other command fails with a megabyte of hostile stderr.
FAKE_KUBECTL = '''#!/bin/sh
dir=$(dirname "$0")
case "$1" in
  get) cat "$dir/pods.json" ;;
  *) cat "$dir/stderr.txt" >&2; exit 1 ;;
esac
'''


@pytest.fixture(scope='module')
def site():
    yield from sshd_fixture.serve(MASTERS)


@pytest.fixture(scope='module')
def tool(site):
    base = os.path.join(site.scratch, 'kc-' + uuid.uuid4().hex[:8])
    os.mkdir(base)
    os.chmod(base, 0o755)
    pad = 'p' * 230
    with open(os.path.join(base, 'pods.json'), 'w') as f:
        json.dump({'kind': 'List', 'items': [
            {'metadata': {'name': '%s%s%06d' % (HOSTILE, pad, i),
                          'namespace': 'default'},
             'status': {'phase': 'Running'}} for i in range(40000)]}, f)
    with open(os.path.join(base, 'stderr.txt'), 'w') as f:
        f.write((HOSTILE * 40000 + '\n') * 2)
    path = os.path.join(base, 'kubectl')
    with open(path, 'w') as f:
        f.write(FAKE_KUBECTL)
    os.chmod(path, 0o755)
    return path


def _connection(site, address, tmp_path):
    settings = ssh.SSHSettings(
        connect_timeout=5, connect_retries=0, command_timeout=60,
        known_hosts_file=str(tmp_path / 'known_hosts'))
    return ssh.Connection(address, ssh.Credentials(
        site.user, key_file=site.client_key), site.port, settings)


def test_a_drain_timeout_over_ssh_is_bounded_and_escaped(site, tool,
                                                         tmp_path):
    with _connection(site, MASTERS[0], tmp_path) as conn:
        client = kubectl.KubectlClient(
            conn, kubectl=tool, settings=kubectl.KubectlSettings(
                command_timeout=60, poll_initial_delay=0.1))
        with pytest.raises(exceptions.WaitTimedOut) as info:
            client.wait_evacuated('w1', timeout=0.2)
    message = str(info.value)
    assert len(message) < 8000 and not CONTROL.findall(message)
    assert message.startswith('Gave up after 0.2 s waiting on 127.0.33.1')
    assert '40000 pod(s) left: default/\\x1b]0;pwned\\x07' in message
    assert message.endswith('... and 39980 more')


def test_no_reachable_master_over_ssh_is_bounded_and_escaped(site, tool,
                                                             tmp_path):
    with _connection(site, MASTERS[0], tmp_path) as first, \
            _connection(site, MASTERS[1], tmp_path) as second:
        with pytest.raises(exceptions.NoReachableHost) as info:
            kubectl.first_reachable([first, second],
                                    command=[tool, 'version'])
    message = str(info.value)
    assert len(message) < 2 * 700 + 200 and not CONTROL.findall(message)
    assert '127.0.33.1 (Command' in message
    assert '127.0.33.2 (Command' in message
    assert '\\x1b]0;pwned\\x07' in message
