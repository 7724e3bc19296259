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
