"""The per-server playbook slots of mgmt_driver.remote.detached.

The slot logic is shell that runs on the Ansible server: these tests run
the real start program on this machine's ``sh`` with flock(1) (no SSH),
a private ``HOME`` and a stand-in playbook, and hold slots with
``fcntl.flock`` as another run would.  The driver's side (reporting a
wait as progress, a wait that ran out as its own error) uses the
recording fake.
"""

import contextlib
import fcntl
import os
import subprocess
import time

import pytest

from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.remote import detached
from mgmt_driver.remote import programs
from tests.fakes import FakeConnection

#: How long a test waits for a started run to reach a state.
PATIENCE = 20.0


class Server:
    """A workspace and a home directory on this machine's shell."""

    def __init__(self, tmp_path):
        self.home = tmp_path / 'home'
        self.home.mkdir(mode=0o700)
        self.ws = tmp_path / 'ws'
        self.slots = self.home / detached.SLOT_DIR

    def start(self, max_parallel, argv=('true',), limit=60, wait=60,
              rank=0, ws=None, op='op'):
        env = dict(os.environ, HOME=str(self.home))
        out = subprocess.run(
            programs.command(detached.START, str(ws or self.ws), '/', op,
                             'book', 'key', str(limit), 'me', '30',
                             str(max_parallel), str(wait), str(rank),
                             *argv), env=env, capture_output=True, text=True,
            check=True, timeout=60).stdout
        return dict(detached._markers(out))

    def log(self, started):
        stem = started['STARTED'].split(':')[0]
        return (self.ws / 'logs' / (stem + '.log')), (
            self.ws / 'logs' / (stem + '.rc'))

    def wait_for(self, predicate, what):
        end = time.monotonic() + PATIENCE
        while not predicate():
            assert time.monotonic() < end, 'timed out waiting for ' + what
            time.sleep(0.05)


@contextlib.contextmanager
def holding(path):
    """Hold the flock of *path*, as a run holding that slot does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, 'a') as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def test_without_a_limit_no_slot_is_taken(tmp_path):
    server = Server(tmp_path)
    log, rc = server.log(server.start(0))
    server.wait_for(rc.exists, 'the exit status')
    assert rc.read_text().strip() == '0'
    assert not (server.home / '.kubespray-mgmt').exists()


def test_a_free_slot_is_taken_at_once_and_held_for_the_run(tmp_path):
    server = Server(tmp_path)
    gate, running = tmp_path / 'gate', tmp_path / 'running'
    log, rc = server.log(server.start(
        2, ['sh', '-c', ': > "$1"; while [ ! -e "$0" ]; do sleep 0.05; '
            'done', str(gate), str(running)]))
    slot = server.slots / 'slot-1'
    server.wait_for(running.exists, 'the stand-in playbook to run')
    assert oct(server.slots.stat().st_mode & 0o777) == '0o700'
    with open(slot, 'a') as f:
        with pytest.raises(BlockingIOError):
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the run has it
    gate.touch()
    server.wait_for(rc.exists, 'the exit status')
    assert rc.read_text().strip() == '0'
    assert 'KR:SLOT' not in log.read_text()  # no wait, nothing to say
    with open(slot, 'a') as f:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released


def test_a_run_waits_for_a_slot_reports_it_and_then_runs(tmp_path):
    server = Server(tmp_path)
    with holding(server.slots / 'slot-1'):
        log, rc = server.log(server.start(1, ['echo', 'ran']))
        server.wait_for(lambda: 'KR:SLOTWAIT:1' in log.read_text(),
                        'the wait to be reported')
        time.sleep(1.2)
        assert not rc.exists() and 'ran' not in log.read_text()
    server.wait_for(rc.exists, 'the exit status')
    assert rc.read_text().strip() == '0'
    lines = log.read_text().splitlines()
    assert lines[0] == 'KR:SLOTWAIT:1'
    assert lines[1].startswith('KR:SLOT:1:') and lines[2] == 'ran'


def test_a_second_slot_serves_while_the_first_is_taken(tmp_path):
    server = Server(tmp_path)
    with holding(server.slots / 'slot-1'):
        log, rc = server.log(server.start(2, ['echo', 'ran']))
        server.wait_for(rc.exists, 'the exit status')
    assert log.read_text() == 'ran\n'


def test_the_wait_is_bounded_by_the_slot_wait(tmp_path):
    server = Server(tmp_path)
    with holding(server.slots / 'slot-1'):
        log, rc = server.log(server.start(1, ['echo', 'ran'], wait=1))
        server.wait_for(rc.exists, 'the exit status')
    assert rc.read_text().strip() == '124'
    text = log.read_text()
    assert 'ran' not in text and detached.slot_timed_out(text)


def test_a_home_other_accounts_can_write_is_refused(tmp_path):
    server = Server(tmp_path)
    server.home.chmod(0o777)
    started = server.start(1)
    assert 'STARTED' not in started
    assert started['SLOTUNSAFE'].startswith(str(server.home) + ':')
    runs = detached.DetachedRuns(FakeConnection('ansible'), str(server.ws),
                                 max_parallel=1)
    with pytest.raises(exceptions.UnsafeRemotePath) as info:
        runs._raise_if_no_slots(detached._markers(
            'KR:SLOTUNSAFE:%s:is writable by other accounts (mode 777)\n'
            % server.home))
    assert 'max_parallel_playbooks_per_server' in str(info.value)
    assert str(server.home) in str(info.value)


def test_the_start_passes_the_limit_and_the_plan_still_shows_the_argv():
    conn = FakeConnection('ansible')
    runs = detached.DetachedRuns(conn, '/srv/ws/x', max_parallel=3)
    outcome = runs.run('/ks', ['ansible-playbook', 'cluster.yml'],
                       'instantiate_end', 'cluster.yml', 60)
    assert outcome.exit_code == 0
    assert conn.calls[0] == ('run', 'detached in /ks: ansible-playbook '
                                    'cluster.yml')


def test_waiting_is_reported_as_progress_not_failure(caplog):
    conn = FakeConnection('ansible')
    conn.script('cluster.yml', stdout='KR:SLOTWAIT:4\nKR:SLOT:2:75\n'
                'PLAY [x]\n')
    seen = []
    caplog.set_level('INFO', logger=detached.__name__)
    runs = detached.DetachedRuns(conn, '/srv/ws/x', max_parallel=4)
    outcome = runs.run('/ks', ['ansible-playbook', 'cluster.yml'],
                       'instantiate_end', 'cluster.yml', 60,
                       on_line=seen.append)
    assert outcome.exit_code == 0
    # First where the run's log is (issue 31, defect 13).
    assert seen[0].startswith('log: /srv/ws/x/logs/') and \
        seen[0].endswith('-instantiate_end-cluster.log on ansible')
    assert seen[1:] == ['waiting for a playbook slot on ansible: 4 running '
                        '(max_parallel_playbooks_per_server)',
                        'got playbook slot 2 on ansible after 75 s',
                        'PLAY [x]']
    assert 'waiting for a playbook slot on ansible: 4 running' in caplog.text


def test_a_wait_that_ran_out_is_its_own_error():
    conn = FakeConnection('ansible')
    conn.script('cluster.yml', stdout='KR:SLOTWAIT:4\nKR:SLOTTIMEOUT:4\n',
                exit_code=124)
    runs = detached.DetachedRuns(conn, '/srv/ws/x', max_parallel=4)
    with pytest.raises(exceptions.PlaybookSlotTimedOut) as info:
        runs.run('/ks', ['ansible-playbook', 'cluster.yml'],
                 'instantiate_end', 'cluster.yml', 60)
    assert 'one of the 4 playbook slots' in str(info.value)
    assert 'waited 3600 s (playbook_slot_wait)' in str(info.value)
    assert 'nothing was changed' in str(info.value)


def test_the_slot_directory_is_the_documented_one():
    assert '$HOME/' + detached.SLOT_DIR in programs.program(detached.START)
    option, = [opt for opt in kconf.kubespray_opts
               if opt.name == 'max_parallel_playbooks_per_server']
    assert '~/' + detached.SLOT_DIR in option.help
    assert option.default == 4
