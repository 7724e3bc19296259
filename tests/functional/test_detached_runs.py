"""Detached playbook runs (mgmt_driver.remote.detached) against a real sshd.

The playbook is a stand-in ``ansible-playbook`` that records each start,
prints a play and then waits while a gate file exists, so a test decides
when a run ends.  The runs really are detached on the "Ansible server"
(the loopback sshd): the tests cut the connection, kill the run's
processes there and read its log and lock files.
"""

import contextlib
import logging
import multiprocessing
import os
import pathlib
import signal
import stat
import threading
import time
import types
import uuid

import pytest

from mgmt_driver.common import exceptions
from mgmt_driver.remote import detached
from mgmt_driver.remote import kubespray
from mgmt_driver.remote import programs
from mgmt_driver.remote import ssh
from tests.functional import tacker_fakes
from tests.functional import test_faults

STAND_IN = '''#!/bin/sh
# ansible-playbook stand-in: waits while %(gate)s exists (2 min at most).
echo "$$ $*" >> %(runs)s
echo "PLAY [stand-in] ***"
echo "TASK [stand-in : wait for the gate] ***"
n=0
while [ -e %(gate)s ] && [ $n -lt 1200 ]; do sleep 0.1; n=$((n + 1)); done
echo "ok: [node-1]"
echo "PLAY RECAP ***"
echo "node-1 : ok=2 changed=1 unreachable=0 failed=0 skipped=0"
exit 0
'''

LAYOUT = kubespray.Layout('playbooks/facts.yml', True, 'v2.31.0')


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


class Server:
    """The stand-in, its gate and the workspace on the loopback sshd."""

    def __init__(self, sshd, tmp_path):
        self.sshd = sshd
        self.base = pathlib.Path(sshd.scratch) / ('dr-' + uuid.uuid4().hex[:8])
        self.base.mkdir()
        # sticky, as /tmp: the workspace's parent
        # (mgmt_driver.remote.isolation)
        self.base.chmod(0o1777)
        self.gate = self.base / 'gate'
        self.runs_file = self.base / 'runs'
        self.tool = self.base / 'ansible-playbook'
        self.tool.write_text(STAND_IN % {
            'gate': ssh.quote(str(self.gate)),
            'runs': ssh.quote(str(self.runs_file))})
        self.tool.chmod(0o755)
        self.root = self.base / 'kubespray'
        self.root.mkdir()
        self.root.chmod(0o777)
        self.workspace = str(self.base / 'ws')
        self.known_hosts = str(tmp_path / 'known_hosts')
        self.connections = []

    def connection(self):
        settings = ssh.SSHSettings(connect_timeout=5, connect_retries=0,
                                   command_timeout=30,
                                   known_hosts_file=self.known_hosts)
        conn = ssh.Connection('127.0.0.2', ssh.Credentials(
            self.sshd.user, key_file=self.sshd.client_key), self.sshd.port,
            settings)
        self.connections.append(conn)
        return conn

    def runner(self, operation='scale_end', timeout_base=600, keep=30,
               lock_wait=0, lines=None):
        conn = self.connection()
        settings = kubespray.PlaybookSettings(
            timeout_base=timeout_base, timeout_per_node=0,
            ansible_playbook=str(self.tool), keep_logs=keep,
            lock_wait=lock_wait)
        return kubespray.Runner(
            conn, str(self.root), LAYOUT,
            kubespray.Workspace(conn, self.workspace), settings=settings,
            operation=operation,
            on_progress=lines.append if lines is not None else None)

    def runs(self):
        """``[(pid, argv text)]`` of every start of the stand-in."""
        if not self.runs_file.exists():
            return []
        return [tuple(line.split(' ', 1))
                for line in self.runs_file.read_text().splitlines()]

    def wait_for_runs(self, count, timeout=60):
        deadline = time.monotonic() + timeout
        while len(self.runs()) < count:
            assert time.monotonic() < deadline, 'the stand-in did not start'
            time.sleep(0.05)

    def info(self):
        return detached.RunInfo.parse(
            (pathlib.Path(self.workspace) / detached.RUN_INFO)
            .read_text().splitlines())

    def logs(self):
        return sorted(p.name for p in
                      (pathlib.Path(self.workspace) / 'logs').iterdir())

    def close(self):
        self.gate.unlink(missing_ok=True)
        for conn in self.connections:
            conn.close()


@pytest.fixture
def server(sshd, tmp_path):
    site = Server(sshd, tmp_path)
    try:
        yield site
    finally:
        site.close()


class Background:
    """Runs ``runner.scale([...])`` in a thread; keeps its outcome."""

    def __init__(self, runner, nodes=('node-1',)):
        self.outcome = []
        self.thread = threading.Thread(
            target=self._run, args=(runner, list(nodes)), daemon=True)
        self.thread.start()

    def _run(self, runner, nodes):
        try:
            self.outcome.append(runner.scale(nodes))
        except Exception as exc:  # noqa: BLE001 - checked by the test
            self.outcome.append(exc)

    def result(self, timeout=60):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), 'the run did not end'
        return self.outcome[0]


def _gone(pid, timeout=15):
    return test_faults.process_gone(pid, timeout)


# ------------------------------------------------------------------ tests --

def test_a_run_keeps_its_log_and_exit_status(server):
    lines = []
    run = server.runner(lines=lines).scale(['node-1'])
    assert run.recap['node-1']['changed'] == 1
    assert 'TASK [stand-in : wait for the gate] ***' in lines  # live
    info = server.info()
    assert info.operation == 'scale_end' and info.playbook == 'scale'
    assert run.log == detached.log_path(server.workspace, info.stem)
    assert info.stem.endswith('-scale_end-scale')
    log = pathlib.Path(run.log)
    assert 'PLAY RECAP' in log.read_text()
    assert log.with_suffix('.rc').read_text().strip() == '0'
    assert _mode(log) == 0o600
    assert _mode(log.parent) == 0o700
    assert _mode(pathlib.Path(server.workspace) / detached.RUN_INFO) == \
        0o600
    assert len(server.runs()) == 1


def test_a_lost_connection_is_not_a_failure(server, caplog):
    """The connection drops while the playbook runs: the driver
    reconnects and reads on; the run is neither repeated nor lost."""
    server.gate.touch()
    lines = []
    runner = server.runner(lines=lines)
    job = Background(runner)
    server.wait_for_runs(1)
    # The driver follows the log once it has read its first line (a
    # fixed pause assumed that of a quiet machine: on a loaded one the
    # cut could come while the run was still starting).
    deadline = time.monotonic() + 60
    while 'PLAY [stand-in] ***' not in lines:
        assert time.monotonic() < deadline, 'the driver did not follow'
        time.sleep(0.05)
    runner.conn.close()  # the transport dies under the follower
    time.sleep(1)
    server.gate.unlink()
    run = job.result()
    assert isinstance(run, kubespray.PlaybookRun), run
    assert len(server.runs()) == 1
    assert 'Lost the connection to 127.0.0.2' in caplog.text
    # Each line once, none lost: the reconnect reads on from the last.
    # Every line counts: the one read last before the cut is the one a
    # resume from one line early would repeat.
    # After the two lines that name the run and its log (issue 31).
    assert lines[0].startswith('running scale.yml on 127.0.0.2: ')
    assert lines[1] == 'log: %s on 127.0.0.2' % run.log
    assert lines[2:] == pathlib.Path(run.log).read_text().splitlines()
    assert lines.count('PLAY [stand-in] ***') == 1
    assert lines.count('PLAY RECAP ***') == 1


def test_another_operation_is_refused_or_waits(server):
    server.gate.touch()
    job = Background(server.runner('scale_end'))
    server.wait_for_runs(1)
    with pytest.raises(exceptions.ClusterBusy) as info:
        server.runner('heal_end').scale(['node-2'])
    message = str(info.value)
    assert 'scale of scale_end' in message
    assert detached.log_path(server.workspace, server.info().stem) in \
        message
    assert len(server.runs()) == 1  # refused before it started

    waiting = Background(server.runner('heal_end', lock_wait=60),
                         ['node-2'])
    time.sleep(1)
    assert len(server.runs()) == 1  # still waiting
    server.gate.unlink()
    assert isinstance(job.result(), kubespray.PlaybookRun)
    assert isinstance(waiting.result(), kubespray.PlaybookRun)
    assert len(server.runs()) == 2


def test_the_same_run_started_again_is_followed(server, caplog):
    """A hook run again (new process, same operation and inputs) while
    its playbook still runs follows that run."""
    server.gate.touch()
    first = Background(server.runner())
    server.wait_for_runs(1)
    again = Background(server.runner())
    time.sleep(3)  # the second one is following the first by now
    server.gate.unlink()
    one, two = first.result(), again.result()
    assert one.log == two.log
    assert len(server.runs()) == 1
    assert 'already running on 127.0.0.2 for the same operation' in \
        caplog.text


def test_a_finished_run_nobody_collected_is_not_run_again(server, caplog):
    """The conductor died; the playbook ended well meanwhile: the hook
    run again takes that result.  A later run of the same inputs (its
    result was collected) runs again."""
    runs = detached.DetachedRuns(server.connection(), server.workspace)
    argv = server.runner().argv('scale.yml', server.workspace + '/h.yaml',
                                limit=['node-1'])
    stem, pid = runs._start(str(server.root), argv, 'scale_end',
                            'scale.yml',
                            runs._bounds('scale_end', 'scale.yml', 60),
                            time.monotonic() + 60)
    assert _gone(pid)  # it ended while nobody followed it
    outcome = runs.run(str(server.root), argv, 'scale_end', 'scale.yml', 60)
    assert outcome.reused and outcome.exit_code == 0
    assert 'PLAY RECAP' in outcome.tail
    assert len(server.runs()) == 1
    assert 'not running it again' in caplog.text
    again = runs.run(str(server.root), argv, 'scale_end', 'scale.yml', 60)
    assert not again.reused and len(server.runs()) == 2


def test_a_finished_run_is_not_taken_for_a_run_of_other_inputs(server):
    """A run's id covers the content of the workspace's input files, not
    only the command line: the same hook run again after its inventory
    changed (same file names, same argv) runs the playbook again instead
    of taking the old run's result, and while a run goes on, the same
    argv over another inventory is refused as busy instead of following
    the old run."""
    conn = server.connection()
    conn.run(['mkdir', '-m', '0700', '-p', server.workspace])
    workspace = kubespray.Workspace(conn, server.workspace)
    hosts = workspace.upload({'h.yaml': 'all: {hosts: {node-1: {}}}\n'})[0]
    runs = detached.DetachedRuns(server.connection(), server.workspace)
    argv = server.runner().argv('scale.yml', hosts, limit=['node-1'])
    stem, pid = runs._start(str(server.root), argv, 'scale_end',
                            'scale.yml',
                            runs._bounds('scale_end', 'scale.yml', 60),
                            time.monotonic() + 60)
    assert _gone(pid)  # it ended while nobody followed it
    workspace.upload({'h.yaml': 'all: {hosts: {node-2: {}}}\n'})
    outcome = runs.run(str(server.root), argv, 'scale_end', 'scale.yml', 60)
    assert not outcome.reused and len(server.runs()) == 2

    server.gate.touch()
    job = Background(server.runner())
    server.wait_for_runs(3)
    workspace.upload({'h.yaml': 'all: {hosts: {node-3: {}}}\n'})
    with pytest.raises(exceptions.ClusterBusy):
        server.runner().scale(['node-1'])
    server.gate.unlink()
    assert isinstance(job.result(), kubespray.PlaybookRun)
    assert len(server.runs()) == 3


def test_a_run_killed_on_the_server_names_its_log(server, caplog):
    server.gate.touch()
    job = Background(server.runner())
    server.wait_for_runs(1)
    info = server.info()
    os.killpg(info.pid, signal.SIGKILL)  # its whole session
    error = job.result()
    assert isinstance(error, exceptions.PlaybookVanished), error
    log = detached.log_path(server.workspace, info.stem)
    assert 'ended without an exit status' in str(error)
    assert log in str(error)
    assert not os.path.exists(log[:-4] + '.rc')

    server.gate.unlink()
    run = server.runner().scale(['node-1'])  # the lock is recovered
    assert run.log != log
    assert 'Recovered the lock of an earlier run on 127.0.0.2' in \
        caplog.text
    assert len(server.runs()) == 2


def test_the_deadline_stops_the_run_on_the_server(server):
    server.gate.touch()
    started = time.monotonic()
    with pytest.raises(exceptions.PlaybookTimedOut) as info:
        server.runner(timeout_base=3).scale(['node-1'])
    assert time.monotonic() - started < 60
    pid = int(server.runs()[0][0])
    assert _gone(pid), 'the stand-in still runs on the server'
    assert 'timeout of 3 s' in str(info.value)
    assert detached.log_path(server.workspace, server.info().stem) in \
        str(info.value)


def test_logs_follow_a_running_run_to_its_end(server):
    """What ``kubespray-mgmt logs --follow`` does: the last run's log,
    printed as it grows, until the run ends; without --follow, what is
    there now."""
    server.gate.touch()
    job = Background(server.runner())
    server.wait_for_runs(1)
    conn = server.connection()
    now = []
    path = detached.show_log(conn, server.workspace, now.append)
    assert 'PLAY [stand-in] ***' in now and 'PLAY RECAP ***' not in now
    followed, done = [], []
    follower = threading.Thread(target=lambda: done.append(
        detached.show_log(conn, server.workspace, followed.append,
                          follow=True)), daemon=True)
    follower.start()
    time.sleep(1)
    assert follower.is_alive()  # the run goes on: so does --follow
    server.gate.unlink()
    follower.join(120)
    assert done == [path] and followed[-1].startswith('node-1 : ok=2')
    assert isinstance(job.result(), kubespray.PlaybookRun)
    with pytest.raises(exceptions.RemoteFileError) as info:
        detached.show_log(conn, server.workspace, print,
                          stem='20200101T000000Z-none-scale')
    assert 'no such run' in str(info.value)


def test_following_ends_with_the_exit_status_not_the_pid(server):
    """A run's end is its exit status file: following stops once it is
    written, although the pid it was given still answers ``kill -0``
    (the run's process is an orphan: its zombie answers until the
    server's PID 1 reaps it, seconds late on some machines, never in a
    container without a reaping init)."""
    server.gate.touch()
    job = Background(server.runner())
    server.wait_for_runs(1)
    stem = server.info().stem
    conn = server.connection()
    alive = conn.run(['sh', '-c', 'sleep 300 </dev/null >/dev/null 2>&1 & '
                      'echo $!']).stdout.strip()
    try:
        lines = []
        # Its own bound is past the join's: only the end of the run can
        # end it in time.
        follower = threading.Thread(target=lambda: server.connection().run(
            programs.command(detached.FOLLOW, server.workspace, stem, '1',
                             alive), timeout=120, on_line=lines.append),
            daemon=True)
        follower.start()
        deadline = time.monotonic() + 60
        while not lines:  # following, the run held by the gate
            assert time.monotonic() < deadline, 'nothing followed'
            time.sleep(0.05)
        server.gate.unlink()
        assert isinstance(job.result(), kubespray.PlaybookRun)
        follower.join(60)
        assert not follower.is_alive(), 'followed until the pid ended'
        assert lines[-1].startswith('node-1 : ok=2')  # the whole log
        assert conn.run(['kill', '-0', alive], check=False).ok
    finally:
        conn.run(['kill', alive], check=False)


def test_old_logs_are_pruned(server):
    for _ in range(3):
        server.runner(keep=2).scale(['node-1'])
        time.sleep(1)  # one stem per second
    logs = [n for n in server.logs() if n.endswith('.log')]
    assert len(logs) == 2
    assert len(server.runs()) == 3


def test_removing_the_workspace_stops_its_run(server):
    server.gate.touch()
    job = Background(server.runner())
    server.wait_for_runs(1)
    pid = int(server.runs()[0][0])
    kubespray.Workspace(server.connection(), server.workspace).remove()
    assert _gone(pid)
    assert not os.path.exists(server.workspace)
    assert isinstance(job.result(), exceptions.MgmtDriverRemoteCommandError)


# ------------------------------------------------------------ the hooks --
# Tacker's hooks on a whole local site (127.0.12.x) whose Ansible server
# has an sshd of its own, so that it can stop while the others go on.

ANSIBLE = '127.0.12.1'
LB = '127.0.12.2'
MASTERS = ['127.0.12.10']
WORKERS = ['127.0.12.20', '127.0.12.21']
CONTEXT = types.SimpleNamespace(project_id='durable-project')
#: Reconnects fail fast: each attempt is one refused TCP connect.
OPTIONS = {'ssh_connect_retries': 0, 'ssh_connect_timeout': 5}
#: How long the Ansible server is unreachable.
CUT_SECONDS = 30
#: How long cluster.yml is held after the server is back: the hook's
#: reconnection attempts come 1+2+4+8+16 s after the cut, so the one
#: that succeeds finds the run still going.
HELD_AFTER = 5


@pytest.fixture(scope='module')
def site():
    with test_faults.running(test_faults.FaultLab(
            ANSIBLE, LB, MASTERS, WORKERS, options=OPTIONS,
            aside=[ANSIBLE])) as lab:
        vnf, _, hooks = tacker_fakes.vnf_on_lab(lab, MASTERS, WORKERS, LB)
        yield types.SimpleNamespace(lab=lab, vnf=vnf, hooks=hooks)


def _instantiate(site):
    site.hooks.instantiate_end(
        CONTEXT, site.vnf.instance,
        tacker_fakes.instantiate_request(site.vnf.additional_params),
        None, None)


def _cluster_runs(site, since):
    return [r for r in site.lab.runs_since(since)
            if r['playbook'] == 'cluster.yml']


def test_instantiate_survives_the_ansible_server_gone_for_30_s(site, caplog):
    """The conductor's connection to the Ansible server is cut (its sshd
    and sessions killed, new connections refused) for 30 s in the middle
    of cluster.yml: the playbook goes on there, the hook reconnects and
    succeeds, and cluster.yml ran once."""
    lab = site.lab
    sshd = lab.aside[ANSIBLE]
    before = len(lab.site.runs())
    # Held, not paused for a guessed time: the run goes on through the
    # whole cut whatever the machine's load.
    release = lab.site.hold('cluster.yml')
    back = threading.Timer(CUT_SECONDS, sshd.start)
    later = threading.Timer(CUT_SECONDS + HELD_AFTER, release)

    def cut():
        test_faults.kill_vm_sshd(sshd)
        back.start()
        later.start()

    try:
        with test_faults.at_first_play('cluster.yml', cut) as fired:
            _instantiate(site)
    finally:
        release()
        if fired:
            back.join(CUT_SECONDS + 5)
            later.cancel()
    assert fired
    assert 'Lost the connection to %s' % ANSIBLE in caplog.text
    assert len(_cluster_runs(site, before)) == 1
    assert _cluster_runs(site, before)[0]['ok']
    assert lab.check(MASTERS, WORKERS) == []


def _logs_in(logs):
    """The files of the workspace's log directory; none before the
    instance's first run (this test may be the module's first)."""
    return set(logs.iterdir()) if logs.is_dir() else set()


def _hook_in_child():
    # A forked process runs the hook and is killed in the middle.
    try:
        _instantiate(_CHILD_SITE[0])
    finally:
        os._exit(0)


_CHILD_SITE = []
#: What the driver logs when it follows a run instead of starting one.
FOLLOWING = 'already running on %s for the same operation'


@contextlib.contextmanager
def _on_warning(text, action):
    """Call *action* when mgmt_driver.remote.detached logs *text* (with
    the Ansible server's address in it)."""
    class Trigger(logging.Handler):
        def emit(self, record):
            if text % ANSIBLE in record.getMessage():
                action()

    logger = logging.getLogger(detached.__name__)
    trigger = Trigger(logging.WARNING)
    logger.addHandler(trigger)
    try:
        yield
    finally:
        logger.removeHandler(trigger)


def test_a_hook_killed_mid_playbook_is_followed_when_run_again(site,
                                                               caplog):
    """The process running instantiate_end dies (SIGKILL) while
    cluster.yml runs; the same hook in a new process follows that run
    instead of starting another, and succeeds."""
    lab = site.lab
    logs = lab.workspace(site.vnf.id) / 'logs'
    before_runs = len(lab.site.runs())
    before_logs = _logs_in(logs)
    # Held until the new hook says it follows the run (released then):
    # no guess of how long the kill and the new hook take.
    release = lab.site.hold('cluster.yml')
    _CHILD_SITE[:] = [site]
    child = multiprocessing.get_context('fork').Process(
        target=_hook_in_child)
    child.start()
    try:
        deadline = time.monotonic() + 60
        while not [p for p in _logs_in(logs) - before_logs
                   if p.suffix == '.log' and 'PLAY [' in p.read_text()]:
            assert time.monotonic() < deadline, 'cluster.yml did not start'
            time.sleep(0.2)
        os.kill(child.pid, signal.SIGKILL)
        child.join(10)
        with _on_warning(FOLLOWING, release):
            _instantiate(site)
    finally:
        release()
    assert FOLLOWING % ANSIBLE in caplog.text
    runs = _cluster_runs(site, before_runs)
    assert len(runs) == 1 and runs[0]['ok']
    new_logs = [p for p in _logs_in(logs) - before_logs
                if p.suffix == '.log']
    assert len(new_logs) == 1
    assert lab.check(MASTERS, WORKERS) == []
