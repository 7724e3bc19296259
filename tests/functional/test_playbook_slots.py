"""The per-server playbook limit on a real sshd (issue 28).

Two instances' workspaces on one Ansible server account, limit 1
(``max_parallel_playbooks_per_server``): the second run waits for the
first one's slot on the server, says so as progress, and then runs; both
succeed, and the stand-in playbooks never overlap.  The stand-in is
test_detached_runs' (it waits while a gate file exists).

Addresses: 127.0.41.200 only.
"""

import pathlib
import re
import threading
import time
import uuid

import pytest

from mgmt_driver.remote import kubespray
from mgmt_driver.remote import ssh
from tests.functional import sshd_fixture
from tests.functional import test_detached_runs

ADDRESS = '127.0.41.200'


@pytest.fixture(scope='module')
def sshd():
    yield from sshd_fixture.serve((ADDRESS,))


class Server:
    """The stand-in, its gate and two workspaces of one account."""

    def __init__(self, sshd, tmp_path):
        self.sshd = sshd
        base = pathlib.Path(sshd.scratch) / ('slots-' + uuid.uuid4().hex[:8])
        base.mkdir()
        base.chmod(0o1777)  # sticky, as /tmp: a safe workspace parent
        self.base = base
        self.gate = base / 'gate'
        self.runs_file = base / 'runs'
        self.tool = base / 'ansible-playbook'
        self.tool.write_text(test_detached_runs.STAND_IN % {
            'gate': ssh.quote(str(self.gate)),
            'runs': ssh.quote(str(self.runs_file))})
        self.tool.chmod(0o755)
        self.root = base / 'kubespray'
        self.root.mkdir()
        self.root.chmod(0o777)
        self.known_hosts = str(tmp_path / 'known_hosts')
        self.connections = []

    def runner(self, name, lines, operation='instantiate_end'):
        settings = ssh.SSHSettings(connect_timeout=5, connect_retries=0,
                                   command_timeout=30,
                                   known_hosts_file=self.known_hosts)
        conn = ssh.Connection(ADDRESS, ssh.Credentials(
            self.sshd.user, key_file=self.sshd.client_key), self.sshd.port,
            settings)
        self.connections.append(conn)
        workspace = str(self.base / name)
        return kubespray.Runner(
            conn, str(self.root), test_detached_runs.LAYOUT,
            kubespray.Workspace(conn, workspace),
            settings=kubespray.PlaybookSettings(
                timeout_base=600, timeout_per_node=0,
                ansible_playbook=str(self.tool), max_parallel=1),
            operation=operation, on_progress=lines.append)

    def workspaces_run(self):
        """The workspace of each run, in the order they started."""
        return [re.search(r'/(ws-[a-z])/', line).group(1)
                for line in self.runs_file.read_text().splitlines()]

    def started(self):
        if not self.runs_file.exists():
            return 0
        return len(self.runs_file.read_text().splitlines())

    def close(self):
        self.gate.unlink(missing_ok=True)
        for conn in self.connections:
            conn.close()


def _wait(predicate, what, timeout=30):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, 'timed out waiting for ' + what
        time.sleep(0.05)


def _in_thread(runner, outcome):
    def run():
        try:
            outcome.append(runner.cluster(1))
        except Exception as exc:  # noqa: BLE001 - checked by the test
            outcome.append(exc)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_with_limit_one_the_second_run_waits_reported_and_both_succeed(
        sshd, tmp_path):
    server = Server(sshd, tmp_path)
    try:
        server.gate.touch()
        lines = {'a': [], 'b': []}
        outcomes = {'a': [], 'b': []}
        first = _in_thread(server.runner('ws-a', lines['a']), outcomes['a'])
        _wait(lambda: server.started() == 1, 'the first playbook to start')
        second = _in_thread(server.runner('ws-b', lines['b']),
                            outcomes['b'])
        waiting = ('waiting for a playbook slot on %s: 1 running '
                   '(max_parallel_playbooks_per_server)' % ADDRESS)
        _wait(lambda: waiting in lines['b'], 'the wait to be reported')
        time.sleep(1)
        assert server.started() == 1, 'the second run did not wait'
        server.gate.unlink()
        first.join(120)
        second.join(120)
    finally:
        server.close()
    for name in ('a', 'b'):
        assert len(outcomes[name]) == 1, name
        assert isinstance(outcomes[name][0], kubespray.PlaybookRun), \
            outcomes[name][0]
    assert server.started() == 2
    got = [line for line in lines['b'] if line.startswith('got playbook '
                                                          'slot 1 on ')]
    assert len(got) == 1, lines['b']
    # The log on the server keeps the markers, the driver shows sentences.
    assert not [line for line in lines['b'] if line.startswith('KR:')]
    log = pathlib.Path(outcomes['b'][0].log).read_text()
    assert 'KR:SLOTWAIT:1' in log


def test_a_heal_that_came_last_is_served_before_the_upgrade_waiting(
        sshd, tmp_path):
    """Issue 40 item 2: with every slot taken, a heal is served before an
    upgrade that queued first; both wait (reported), neither fails."""
    server = Server(sshd, tmp_path)
    lines = {'a': [], 'b': [], 'h': []}
    outcomes = {'a': [], 'b': [], 'h': []}
    operations = {'a': 'upgrade', 'b': 'upgrade', 'h': 'heal_end'}
    waiting = ('waiting for a playbook slot on %s: 1 running '
               '(max_parallel_playbooks_per_server)' % ADDRESS)
    threads = []
    try:
        server.gate.touch()
        for name in ('a', 'b', 'h'):
            threads.append(_in_thread(server.runner(
                'ws-' + name, lines[name], operations[name]),
                outcomes[name]))
            if name == 'a':
                _wait(lambda: server.started() == 1, 'a to run')
            else:
                _wait(lambda n=name: waiting in lines[n], name + ' to wait')
        server.gate.unlink()
        for thread in threads:
            thread.join(120)
    finally:
        server.close()
    for name in outcomes:
        assert len(outcomes[name]) == 1, name
        assert isinstance(outcomes[name][0], kubespray.PlaybookRun), \
            outcomes[name][0]
    assert server.workspaces_run() == ['ws-a', 'ws-h', 'ws-b']
