"""Every remote wait has a bound, and a hook has one in all (issue 39
item 3, issue 40 item 4).

The SSH server here is paramiko's, in this process, over a socket pair
(no network): it accepts the SFTP subsystem and never answers, or never
answers a request to run a command.  A hook's deadline is a
:class:`~mgmt_driver.common.deadline.Deadline` with a clock the test
moves.
"""

import fcntl
import socket
import threading

import paramiko
import pytest
from oslo_config import cfg

from mgmt_driver.adapters import listing
from mgmt_driver.common import conf as kconf
from mgmt_driver.common import deadline
from mgmt_driver.common import exceptions
from mgmt_driver.remote import detached
from mgmt_driver.remote import ssh
from mgmt_driver.state import records
from mgmt_driver.state import sharedfiles
from tests.fakes import FakeConnection

#: How long a test waits for a call that must end by itself (a guard
#: against hanging forever, not a measure).
PATIENCE = 60


class _Silent(paramiko.ServerInterface):
    """Logs anyone in, accepts SFTP and never speaks it; holds a
    request to run a command until *release* is set."""

    def __init__(self, release):
        self.release = release

    def get_allowed_auths(self, username):
        return 'password'

    def check_auth_password(self, username, password):
        return paramiko.AUTH_SUCCESSFUL

    def check_channel_request(self, kind, chanid):
        return paramiko.OPEN_SUCCEEDED

    def check_channel_subsystem_request(self, channel, name):
        return True  # accepted, and then not a byte

    def check_channel_exec_request(self, channel, command):
        self.release.wait(PATIENCE)
        return False


class _PairedConnection(ssh.Connection):
    """A Connection whose transport is one end of a socket pair."""

    def __init__(self, server_sock, settings):
        super().__init__('silent.example', ssh.Credentials('u', 'p'), 22,
                         settings)
        self.server_sock = server_sock

    def _connect_once(self):
        client_sock, server_sock = socket.socketpair()
        self.server_sock.append(server_sock)
        server = paramiko.Transport(server_sock)
        server.add_server_key(paramiko.ECDSAKey.generate())
        # With an event it negotiates in its own thread, not here.
        server.start_server(threading.Event(), _Silent(self.release))
        transport = paramiko.Transport(client_sock)
        transport.start_client(timeout=PATIENCE)
        transport.auth_password('u', 'p')
        self.servers.append(server)
        return transport


@pytest.fixture
def silent(tmp_path):
    settings = ssh.SSHSettings(connect_timeout=1, connect_retries=0,
                               sftp_timeout=1,
                               known_hosts_file=str(tmp_path / 'kh'))
    conn = _PairedConnection([], settings)
    conn.release = threading.Event()
    conn.servers = []
    yield conn
    conn.release.set()
    conn.close()
    for server in conn.servers:
        server.close()


def _ends(call):
    """What *call* raised; it must end by itself (not hang)."""
    raised = []

    def run():
        try:
            call()
        except Exception as exc:  # noqa: BLE001 - returned to the test
            raised.append(exc)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(PATIENCE)
    assert not thread.is_alive(), 'it waited without a bound'
    assert raised, 'it did not fail'
    return raised[0]


def test_an_sftp_server_that_never_answers_fails_the_transfer(silent):
    error = _ends(lambda: silent.write_file('/tmp/x', 'data'))
    assert isinstance(error, exceptions.RemoteFileError), error
    assert 'silent.example' in str(error)
    assert 'no answer within 1 s (sftp_timeout)' in str(error)


def test_a_read_from_a_silent_sftp_server_fails_too(silent):
    error = _ends(lambda: silent.read_file('/tmp/x'))
    assert isinstance(error, exceptions.RemoteFileError), error
    assert 'sftp_timeout' in str(error)


def test_a_request_to_run_a_command_that_is_never_answered_fails(silent):
    error = _ends(lambda: silent.run(['true']))
    assert isinstance(error, exceptions.SSHConnectError), error
    assert 'no answer to the request to start a command within 1 s' in \
        str(error)


class _Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class _NeverConnects(ssh.Connection):
    def _connect_once(self):
        raise AssertionError('it connected')


def test_a_hook_with_no_time_left_waits_on_nothing_and_says_so():
    clock = _Clock()
    limit = deadline.Deadline('heal_end', 300, 'hook_deadlines[heal_end]',
                              clock=clock)
    conn = _NeverConnects('10.0.0.5', ssh.Credentials('u', 'p'),
                          settings=ssh.SSHSettings(known_hosts_file='/n',
                                                   connect_retries=0))
    conn.deadline = limit
    clock.now += 301
    # Nothing is opened: the refusal comes before any connection.
    with pytest.raises(exceptions.HookDeadlineExceeded) as info:
        conn.run(['kubectl', 'get', 'nodes'])
    text = str(info.value)
    assert 'heal_end stopped after its bound of 300 s' in text
    assert '(option hook_deadlines[heal_end])' in text
    assert 'command "kubectl get nodes" on 10.0.0.5' in text
    with pytest.raises(exceptions.HookDeadlineExceeded) as info:
        conn.read_file('/etc/hosts')
    assert 'SFTP transfer of /etc/hosts on 10.0.0.5' in str(info.value)
    assert conn._transport_obj is None


def test_each_wait_lasts_the_lesser_of_its_bound_and_the_time_left():
    clock = _Clock()
    limit = deadline.Deadline('scale_end', 100, clock=clock)
    assert limit.bound(600, 'x') == 100
    clock.now += 40
    assert limit.bound(600, 'x') == 60 and limit.bound(30, 'x') == 30
    assert deadline.unbounded().bound(600, 'x') == 600


def test_the_pool_gives_its_deadline_to_every_connection():
    pool = ssh.ConnectionPool(ssh.SSHSettings(known_hosts_file='/n'))
    limit = deadline.Deadline('upgrade', 10)
    pool.deadline = limit
    assert pool.connection('10.0.0.9', ssh.Credentials('u')).deadline \
        is limit


def _conf(**values):
    conf = cfg.ConfigOpts()
    kconf.register_opts(conf)
    conf([], default_config_files=[])
    for name, value in values.items():
        conf.set_override(name, value, kconf.GROUP)
    return conf


def test_the_bound_of_a_hook_is_set_per_operation():
    conf = _conf(hook_deadlines={'heal_end': '7200'})
    assert kconf.hook_deadline(conf, 'heal_end') == (
        7200, 'hook_deadlines[heal_end]')
    assert kconf.hook_deadline(conf, 'upgrade') == (43200, 'hook_deadline')


@pytest.mark.parametrize('value', ['10', 'soon', '9999999'])
def test_a_bad_per_operation_bound_is_refused_naming_it(value):
    conf = _conf(hook_deadlines={'heal_end': value})
    problems = kconf.check(conf)
    assert len(problems) == 1 and 'hook_deadlines: heal_end:' in \
        problems[0] and 'from 60 to 604800' in problems[0]


# Playbook runs: the hook's deadline and the slot policy.

def _runs(conn, clock=None, **slots):
    return detached.DetachedRuns(conn, '/srv/ws/x', max_parallel=4,
                                 slots=detached.SlotPolicy(**slots),
                                 clock=clock or _Clock())


def _start_args(conn):
    start = [c for c in conn.detached_runs.values()][0]
    return start


def test_a_slot_is_held_at_most_its_bound_whatever_the_request_size():
    conn = FakeConnection('ansible')
    # 2,000 nodes at playbook_timeout_per_node 600: about 14 days.
    _runs(conn, hold_max=21600).run('/ks', ['ansible-playbook', 'x.yml'],
                                    'scale_end', 'x.yml', 1800 + 600 * 2000)
    assert _start_args(conn)['limit'] == 21600


def test_without_slots_the_run_keeps_its_own_timeout():
    conn = FakeConnection('ansible')
    detached.DetachedRuns(conn, '/srv/ws/x', clock=_Clock()).run(
        '/ks', ['ansible-playbook', 'x.yml'], 'scale_end', 'x.yml', 90000)
    assert _start_args(conn)['limit'] == 90000


def test_the_slot_wait_and_the_run_end_by_the_hooks_deadline():
    clock = _Clock()
    conn = FakeConnection('ansible')
    conn.deadline = deadline.Deadline('upgrade', 500, clock=clock)
    runs = _runs(conn, clock, wait=3600)
    bounds = runs._bounds('upgrade', 'upgrade.yml', 1800)
    assert (bounds.timeout, bounds.wait) == (500, 500)
    assert bounds.wait_setting == 'hook_deadline'
    assert runs._bounds('upgrade', 'x', 100).timeout == 100


def test_a_run_stopped_for_the_hooks_deadline_says_so():
    clock = _Clock()

    def ticking():
        clock.now += 200
        return clock.now
    conn = FakeConnection('ansible')
    conn.script('upgrade.yml', timeout=True)
    conn.deadline = deadline.Deadline('upgrade', 500, clock=clock)
    runs = _runs(conn, ticking)
    with pytest.raises(exceptions.HookDeadlineExceeded) as info:
        runs.run('/ks', ['ansible-playbook', 'upgrade.yml'], 'upgrade',
                 'upgrade.yml', 1800)
    assert 'upgrade.yml on ansible' in str(info.value)
    assert ('stop', [s for s in conn.detached_runs][0]) in conn.calls


@pytest.mark.parametrize('operation, place', [
    ('heal_end', 0), ('heal', 0), ('scale_end', 1), ('instantiate_end', 1),
    ('scale_out', 1), ('upgrade', 2), ('relabel', 2), ('renew_certs', 2),
    ('scale_start', 2)])
def test_runs_that_restore_capacity_queue_ahead(operation, place):
    assert detached.priority_class(operation) == place
    runs = _runs(FakeConnection('ansible'), lead=3600)
    assert runs._bounds(operation, 'x.yml', 60).rank == 3600 * place


# Local locks: a shared record file's flock is waited for at most
# shared_file_lock_wait.

def test_a_shared_file_held_by_another_process_fails_the_change(tmp_path):
    path = str(tmp_path / 'records' / 'vnf-1.json')
    sharedfiles.ensure_directory(path)
    with open(path + '.lock', 'a') as other:
        fcntl.flock(other, fcntl.LOCK_EX)  # as another process holds it
        with pytest.raises(exceptions.SharedFileBusy) as info:
            with sharedfiles.locked(path, wait=0.05):
                pytest.fail('took a lock another holder has')
    assert path in str(info.value)
    assert 'shared_file_lock_wait' in str(info.value)
    with sharedfiles.locked(path, wait=0.05):
        pass  # free again: the failed wait left nothing held


# What waits, and why: kubespray-mgmt list (records) and the progress.

def test_a_run_waiting_for_a_slot_is_noted_for_list_until_it_has_one(
        tmp_path):
    store = records.RecordStore(str(tmp_path / 'records'))
    store.set_last_operation('vnf-1', {'operation': 'upgrade',
                                       'result': 'running',
                                       'started': '2026-11-28T18:00:00Z'},
                             create=True)
    shown = []

    def note(what):
        store.set_waiting('vnf-1', what)
        shown.append(listing.format_text(listing.entries(store)))
    conn = FakeConnection('10.0.0.50')
    conn.script('upgrade.yml', stdout='KR:SLOTWAIT:4\nKR:SLOTWAIT:4\n'
                'KR:SLOT:2:75\nPLAY [x]\n')
    detached.DetachedRuns(conn, '/srv/ws/x', max_parallel=4,
                          clock=_Clock(), on_wait=note).run(
        '/ks', ['ansible-playbook', 'upgrade.yml'], 'upgrade',
        'upgrade.yml', 60)
    assert len(shown) == 2  # once waiting, once served
    assert 'running 2026-11-28T18:00:00Z, waiting for a playbook slot on ' \
        '10.0.0.50 since 20' in shown[0]
    assert 'waiting' not in shown[1]
    assert store.load('vnf-1').last_operation['waiting'] is None


def test_a_run_is_stopped_even_when_the_deadline_came_while_following():
    clock = _Clock()
    conn = FakeConnection('ansible')
    conn.deadline = deadline.Deadline('upgrade', 500, clock=clock)
    real_run = conn.run

    def run(command, *args, **kwargs):
        if 'run-follow' in str(command):
            clock.now += 501  # the hook's time ends while following
            conn.deadline.expired('following the run')
        conn.deadline.expired('a command')  # as ssh.Connection.run does
        return real_run(command, *args, **kwargs)
    conn.run = run
    runs = _runs(conn, clock)
    with pytest.raises(exceptions.HookDeadlineExceeded):
        runs.run('/ks', ['ansible-playbook', 'upgrade.yml'], 'upgrade',
                 'upgrade.yml', 1800)
    assert [c for c in conn.calls if c[0] == 'stop'], conn.calls


def test_a_cleanup_gets_a_grace_past_the_deadline():
    clock = _Clock()
    limit = deadline.Deadline('heal_end', 10, clock=clock)
    clock.now += 11
    with pytest.raises(exceptions.HookDeadlineExceeded):
        limit.bound(30, 'x')
    with limit.cleanup():
        assert limit.bound(30, 'x') == 30
    assert limit.remaining() == 0


def test_the_watchdog_closing_a_dead_channel_raises_nothing_in_its_thread(
        monkeypatch):
    """A connection that died under an unanswered request makes the
    channel's close raise; the watchdog's thread must not die with that
    error (pytest reported it as an unhandled thread exception), and the
    caller still gets the timeout."""
    unhandled = []
    timers = []
    monkeypatch.setattr(threading, 'excepthook', unhandled.append)

    class Recorded(threading.Timer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            timers.append(self)

    monkeypatch.setattr(threading, 'Timer', Recorded)
    closing = threading.Event()

    class DeadChannel:
        def close(self):
            closing.set()
            raise EOFError()

    def request():
        closing.wait(PATIENCE)
        raise EOFError()

    with pytest.raises(TimeoutError):
        ssh._answered(DeadChannel(), request, 0.01, 'start a command')
    for timer in timers:
        timer.join(PATIENCE)
    assert closing.is_set()
    assert [type(args.exc_value) for args in unhandled] == []
