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

from mgmt_driver.adapters import status
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

    def log(self, started, ws=None):
        stem = started['STARTED'].split(':')[0]
        logs = (ws or self.ws) / 'logs'
        return logs / (stem + '.log'), logs / (stem + '.rc')

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


# The queue (issue 39 item 3, issue 40 item 2): the test plays a waiter
# that is ahead by holding a ticket's flock, as a waiting run does.

@contextlib.contextmanager
def waiting_ahead(server, place):
    """A live waiter's ticket at *place* (seconds since the epoch)."""
    ticket = server.slots / 'queue' / ('%012d.000000000.1' % place)
    ticket.parent.mkdir(parents=True, exist_ok=True)
    ticket.write_text('arrived=2026-11-28T00:00:00Z\noperation=upgrade\n')
    with open(ticket) as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield ticket


def test_a_free_slot_waits_for_the_run_that_arrived_first(tmp_path):
    server = Server(tmp_path)
    with waiting_ahead(server, int(time.time()) - 10) as ahead:
        log, rc = server.log(server.start(1, ['echo', 'ran'], wait=1))
        server.wait_for(rc.exists, 'the exit status')
        # The live ticket ahead is kept; the run's own is gone.
        assert list((server.slots / 'queue').iterdir()) == [ahead]
    # The slot was free, but promised to the waiter ahead.
    assert rc.read_text().strip() == '124'
    assert 'ran' not in log.read_text() and \
        detached.slot_timed_out(log.read_text())


def test_a_heal_goes_before_an_upgrade_that_waits_already(tmp_path):
    server = Server(tmp_path)
    lead = 3600
    # An upgrade arrived a minute ago: its place is two classes back.
    with waiting_ahead(server, int(time.time()) - 60 + 2 * lead):
        log, rc = server.log(server.start(1, ['echo', 'ran'], wait=30,
                                          rank=0, op='heal_end'))
        server.wait_for(rc.exists, 'the exit status')
    assert rc.read_text().strip() == '0' and log.read_text() == 'ran\n'


def test_an_upgrade_waits_behind_a_heal_that_waits(tmp_path):
    server = Server(tmp_path)
    with waiting_ahead(server, int(time.time())):
        log, rc = server.log(server.start(1, ['echo', 'ran'], wait=1,
                                          rank=2 * 3600, op='upgrade'))
        server.wait_for(rc.exists, 'the exit status')
    assert rc.read_text().strip() == '124'


def test_the_ticket_of_a_gone_waiter_blocks_nobody(tmp_path):
    server = Server(tmp_path)
    stale = server.slots / 'queue' / ('%012d.000000000.99999' % 1)
    stale.parent.mkdir(parents=True)
    stale.write_text('arrived=2026-11-28T00:00:00Z\n')  # no flock: gone
    log, rc = server.log(server.start(1, ['echo', 'ran'], wait=30))
    server.wait_for(rc.exists, 'the exit status')
    assert log.read_text() == 'ran\n' and not stale.exists()
    # Its own ticket is gone with the wait.
    assert list((server.slots / 'queue').iterdir()) == []


def test_two_waiters_are_served_in_order_of_arrival(tmp_path):
    server = Server(tmp_path)
    gate, order = tmp_path / 'gate', tmp_path / 'order'
    argv = ['sh', '-c', 'echo "$1" >> "$0"; while [ ! -e "$2" ]; do '
            'sleep 0.05; done', str(order)]
    queue = server.slots / 'queue'
    with holding(server.slots / 'slot-1'):
        first = server.log(server.start(1, argv + ['a', str(gate)],
                                        ws=tmp_path / 'ws-a'),
                           tmp_path / 'ws-a')
        server.wait_for(lambda: queue.exists() and
                        len(list(queue.iterdir())) == 1, 'a to queue')
        second = server.log(server.start(1, argv + ['b', str(gate)],
                                         ws=tmp_path / 'ws-b'),
                            tmp_path / 'ws-b')
        server.wait_for(lambda: len(list(queue.iterdir())) == 2,
                        'b to queue')
    gate.touch()
    for _, rc in (first, second):
        server.wait_for(rc.exists, 'the exit status')
    assert order.read_text() == 'a\nb\n'


def test_status_shows_the_slots_taken_and_who_waits_in_order(tmp_path):
    server = Server(tmp_path)
    queue = server.slots / 'queue'
    stale = queue / ('%012d.000000000.99999' % 1)
    with holding(server.slots / 'slot-1'), \
            waiting_ahead(server, int(time.time()) - 10):
        stale.write_text('operation=gone\n')  # no flock: not listed
        log, rc = server.log(server.start(1, ['echo', 'ran'], wait=60,
                                          op='heal_end'))
        # (The run's waiter may delete the stale ticket first: count the
        # others.)
        server.wait_for(lambda: len([p for p in queue.iterdir()
                                     if p != stale]) == 2,
                        'the run to queue')
        out = subprocess.run(
            programs.command(status._QUEUE, '2'), capture_output=True,
            text=True, check=True, timeout=60,
            env=dict(os.environ, HOME=str(server.home))).stdout
        found = status.parse_queue(out, str(server.ws))
        assert found['slots_taken'] == 1
        assert [(w['position'], w['operation'], w['priority'],
                 w['this_instance']) for w in found['waiting']] == [
            (1, 'upgrade', 'other', False), (2, 'heal_end', 'heal', True)]
        assert found['waiting'][1]['instance'] == 'ws'
        text = status._format_queue(dict(found, slots=2, error=None))
        assert text[0] == ('  Playbook slots: 1 of 2 taken, 2 run(s) '
                           'waiting (max_parallel_playbooks_per_server)')
        assert 'ws (this one)' in text[3] and 'heal_end' in text[3]
    server.wait_for(rc.exists, 'the exit status')
