"""status against hosts that accept TCP but never answer SSH (issue 41,
item 5): each host is tried once, briefly, each section says
"unreachable", and paramiko's log stays off the terminal below
--debug."""

import collections
import logging
import pathlib

from mgmt_driver.adapters import cli
from mgmt_driver.remote import ssh

SAMPLES = pathlib.Path(__file__).parents[2] / 'samples'
PARAMS = str(SAMPLES / 'instantiate_simple.json')
TOPOLOGY = str(SAMPLES / 'topology_simple.yaml')


def _silent_hosts(monkeypatch):
    """Every connect attempt times out waiting for the SSH banner;
    :returns: the attempts by host, and the settings of the pool."""
    attempts, used = collections.Counter(), []

    def connect_once(self):
        attempts[self.host] += 1
        logging.getLogger('paramiko.transport').error(
            'Exception (client): Error reading SSH protocol banner')
        raise OSError('Error reading SSH protocol banner')

    class Pool(ssh.ConnectionPool):
        def __init__(self, settings=None, **kwargs):
            used.append(settings)
            super().__init__(settings, sleep=lambda seconds: None, **kwargs)

    monkeypatch.setattr(ssh.Connection, '_connect_once', connect_once)
    monkeypatch.setattr(cli.ssh, 'ConnectionPool', Pool)
    return attempts, used


def test_status_tries_each_host_once_and_says_unreachable(capsys,
                                                          monkeypatch):
    attempts, used = _silent_hosts(monkeypatch)
    code = cli.main(['status', '--params', PARAMS, '--topology', TOPOLOGY])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_REMOTE_FAILURE
    # The master, the Ansible server, the load balancer: once each.
    assert set(attempts.values()) == {1}, attempts
    assert used[0].connect_timeout == 5
    for title in ('Nodes', 'etcd', 'Load balancer'):
        block = next(b for b in out.split('\n\n') if b.startswith(title))
        assert 'UNAVAILABLE: unreachable: ' in block, block
    assert 'the recorded inventory cannot be read: unreachable: ' in out
    assert 'Exception (client)' not in err and 'ERROR' not in err, err


def test_a_library_log_reaches_stderr_only_with_debug(capsys):
    with cli._terminal_log(debug=False):
        logging.getLogger('paramiko.transport').error('traceback line')
        logging.getLogger('mgmt_driver.remote.ssh').warning('the driver says')
    assert capsys.readouterr().err == \
        'kubespray-mgmt: WARNING: the driver says\n'
