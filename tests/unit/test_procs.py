"""mgmt_localsite.procs: this machine's processes from /proc."""

import os
import subprocess
import sys
import time

from mgmt_localsite import procs


def test_a_child_is_seen_with_its_argv_then_gone():
    child = subprocess.Popen([sys.executable, '-c',
                              'import time; time.sleep(30)'])
    try:
        # Popen returns once exec began, which is a moment before the
        # kernel shows the new argv: an empty one is read again.
        deadline = time.monotonic() + 10
        while procs.cmdline(child.pid) == [''] and \
                time.monotonic() < deadline:
            time.sleep(0.01)
        assert procs.cmdline(child.pid)[1:3] == ['-c',
                                                 'import time; time.sleep(30)']
        assert procs.state(child.pid) in ('R', 'S')
        assert not procs.gone(child.pid)
        assert procs.parents()[child.pid] == os.getpid()
        assert child.pid in procs.descendants([os.getpid()])
    finally:
        child.kill()
    child.wait()
    assert procs.gone(child.pid) and procs.cmdline(child.pid) == []


def test_a_zombie_counts_as_gone():
    child = subprocess.Popen(['true'])
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # not reaped
    try:
        assert procs.state(child.pid) == 'Z' and procs.gone(child.pid)
    finally:
        child.wait()


def _orphan(marker):
    """A process like an SSH control master: it left its parent (so it
    is no descendant of anything of the test) and its command line
    names *marker*.  :returns: its pid."""
    code = 'import os, time; print(os.getpid(), flush=True); time.sleep(60)'
    shell = subprocess.Popen(
        ['sh', '-c', '"$0" -c "$1" "$2" & exit 0', sys.executable, code,
         'ssh: %s/cp/0123abcd [mux]' % marker], stdout=subprocess.PIPE)
    pid = int(shell.stdout.readline())
    shell.stdout.close()
    shell.wait()
    return pid


def _wait_gone(pid):
    """Wait (on the process itself, no polling) until *pid* ended."""
    import select
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], 30)[0])
    finally:
        os.close(fd)


def test_a_control_master_that_left_its_session_is_stopped(tmp_path):
    """Before (issue 41 item 11): the sessions below sshd were stopped,
    not the control masters, which had left them."""
    from mgmt_localsite import sshd as sshd_mod
    root = str(tmp_path / 'kmgmt-sshd-x')
    os.mkdir(root)
    pid = _orphan(root)
    other = _orphan(str(tmp_path / 'another-site'))
    try:
        assert pid not in procs.descendants([os.getpid()])
        assert procs.with_marker(root) == [pid]
        site = sshd_mod.Sshd.__new__(sshd_mod.Sshd)
        site.root, site._procs = root, []
        site.cleanup()
        assert _wait_gone(pid) and not os.path.exists(root)
        assert not procs.gone(other)
    finally:
        for left in (pid, other):
            try:
                os.kill(left, 9)
            except ProcessLookupError:
                pass
