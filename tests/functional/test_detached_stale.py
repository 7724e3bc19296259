"""A pid read back from ``run.info`` is killed only if it is the run's.

``run.info`` names the pid of the last playbook run's session.  When
that run is gone (killed, the server restarted) the pid may belong to
another session of the same account by now; stopping a run past its
deadline (``DetachedRuns._stop``) and deleting a workspace whose lock is
held (``Workspace.remove``, at terminate) must leave that session alone.
A real sshd on 127.0.34.1 plays the Ansible server; the "other session"
is a ``setsid`` process of the SSH user there.
"""

import os
import signal
import uuid

import pytest

from mgmt_driver.remote import detached
from mgmt_driver.remote import kubespray
from mgmt_driver.remote import ssh
from tests.functional import sshd_fixture
from tests.functional import test_faults

ADDRESS = '127.0.34.1'
STEM = '20261123T230501Z-scale_end-scale'


@pytest.fixture(scope='module')
def server():
    yield from sshd_fixture.serve((ADDRESS,))


@pytest.fixture
def conn(server, tmp_path):
    settings = ssh.SSHSettings(connect_timeout=5, connect_retries=0,
                               command_timeout=30,
                               known_hosts_file=str(tmp_path / 'kh'))
    connection = ssh.Connection(ADDRESS, ssh.Credentials(
        server.user, key_file=server.client_key), server.port, settings)
    yield connection
    connection.close()


@pytest.fixture
def others():
    """Pids of the unrelated sessions a test starts; killed after it."""
    pids = []
    yield pids
    for pid in pids:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _workspace(server, conn):
    path = '%s/ws-%s' % (server.scratch, uuid.uuid4().hex[:8])
    conn.run(['mkdir', '-p', '-m', '0700', '--', path + '/logs'])
    return path


def _other_session(conn, others, command):
    """Start *command* as a session of its own; its (leader's) pid."""
    out = conn.run(['sh', '-c', 'setsid %s </dev/null >/dev/null 2>&1 & '
                    'echo $!' % command]).stdout
    pid = int(out.strip())
    others.append(pid)
    return pid


def _run_info(conn, workspace, pid):
    conn.run(['sh', '-c', 'printf "id=x\\nstem=%s\\npid=%d\\n" > "$1"'
              % (STEM, pid), 'sh', workspace + '/' + detached.RUN_INFO])


def test_stopping_a_run_leaves_a_session_that_reused_its_pid(
        server, conn, others, caplog):
    workspace = _workspace(server, conn)
    pid = _other_session(conn, others, 'sleep 300')
    _run_info(conn, workspace, pid)  # no .rc: "still running"
    detached.DetachedRuns(conn, workspace)._stop(STEM, pid)
    assert not test_faults.process_gone(pid, timeout=1), \
        'an unrelated session was killed'
    assert 'Did not stop pid %d' % pid in caplog.text


def test_removing_a_workspace_leaves_a_lock_holder_that_is_not_the_run(
        server, conn, others, caplog):
    """The lock is held, by a process that is not the run (e.g. another
    driver's start, before it rewrote run.info): the stale pid in
    run.info is not killed, the workspace is still deleted."""
    workspace = _workspace(server, conn)
    pid = _other_session(conn, others, 'flock %s sleep 300' % ssh.quote(
        workspace + '/' + detached.RUN_LOCK))
    _run_info(conn, workspace, pid)
    probe = conn.run(['sh', '-c', 'for i in 1 2 3 4 5 6 7 8 9 10; do '
                      '( flock -n 9 ) 9>>"$1" || exit 0; sleep 0.2; done; '
                      'exit 1', 'sh', workspace + '/' + detached.RUN_LOCK],
                     check=False)
    assert probe.ok, 'the other session did not take the lock'
    kubespray.Workspace(conn, workspace).remove()
    assert not test_faults.process_gone(pid, timeout=1), \
        'an unrelated session was killed'
    assert not os.path.exists(workspace)
    assert 'it is not that playbook run' in caplog.text
