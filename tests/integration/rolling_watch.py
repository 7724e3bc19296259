"""Processes of their own for test_v2_rolling (the tests run under
Tacker's eventlet monkey-patching, where a thread of the test process
would not run while Tacker waits for a script).

``python -m tests.integration.rolling_watch probe OUT ADDRESS PORT...``
asks each PORT of ADDRESS over and over
(:class:`tests.functional.lb_prober.Prober`, every :data:`PROBE_INTERVAL`)
until SIGTERM, then writes ``{port: [[time, backend or null], ...]}``
to OUT.

``python -m tests.integration.rolling_watch break STATE_DIR NODE`` waits
until NODE left the local site's cluster and joined again, then stops its
kubelet and makes the node lifecycle controller see it at once: the
image of the new VM is broken, the rolling gate must fail.

``python -m tests.integration.rolling_watch kill STATE_DIR NODE`` waits
until NODE left the cluster and a ``scale.yml`` run is under way, then
kills the coordinate-VNF script (SIGKILL, as a conductor that stops takes
its child with it).  Both are this test's own: the script a descendant
of the test process (the watcher's parent), the run one whose command
line names the site's directory (its inventory is there); the other
lane's runs and other test sessions' scripts are no sign and no target.
"""

import json
import os
import signal
import sys
import threading
import time

from mgmt_localsite import clusterstate
from mgmt_localsite import procs

#: Seconds between two probes of a port.  A VM re-created while the LB
#: still sends to it is out for ``test_v2_rolling.BOOT`` (0.5 s): about
#: ten probes of each port fall in that outage, taking turns over the
#: port's servers (three API servers, two workers), so several meet it;
#: at 20 ms the probes of one update cost twice the CPU.
PROBE_INTERVAL = 0.05
#: Seconds between two looks while waiting for a state that takes
#: seconds to come (a node leaving the cluster: a drain and a playbook
#: run; a ``scale.yml`` run starting: a VM boot and a script start):
#: each look reads the state file or every process's command line.
SLOW_LOOK = 0.2
#: Seconds between two looks when what follows must come at once (the
#: rolling gate polls right after the node joined).
FAST_LOOK = 0.05


def probe(out, address, *ports):
    from tests.functional import lb_prober

    probers = [lb_prober.Prober(address, int(port), PROBE_INTERVAL)
               for port in ports]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *args: stop.set())
    for prober in probers:
        prober.__enter__()
    print('probing', flush=True)
    while not stop.wait(0.2):
        pass
    for prober in probers:
        prober.__exit__(None, None, None)
    with open(out, 'w') as f:
        json.dump({str(p.port): p.seen for p in probers}, f)


def _present(state_dir, node):
    state = clusterstate.read(state_dir) or {}
    return node in (state.get('nodes') or {})


def break_kubelet(state_dir, node):
    for wanted, look in ((False, SLOW_LOOK), (True, FAST_LOOK)):
        while _present(state_dir, node) != wanted:
            time.sleep(look)
    with clusterstate.transaction(state_dir) as txn:
        txn.state['nodes'][node]['kubelet_stopped'] = True
        txn.state['nodes'][node].pop('probed', None)
        txn.state['settings'].update(node_monitor_grace_period=0.0,
                                     node_monitor_period=0.0)
    # The site's tools run as the SSH user: the file keeps its owner.
    owner = os.stat(state_dir)
    for name in os.listdir(state_dir):
        os.chown(os.path.join(state_dir, name), owner.st_uid, owner.st_gid)
    print('broken', flush=True)


def _processes(*words, among=None):
    """The pids whose command line holds every one of *words* (of
    *among* only, when given)."""
    found = []
    pids = filter(str.isdigit, os.listdir('/proc')) if among is None \
        else map(str, among)
    for pid in pids:
        try:
            with open('/proc/%s/cmdline' % pid, 'rb') as f:
                line = f.read().replace(b'\0', b' ').decode(errors='replace')
        except OSError:
            continue
        if all(word in line for word in words):
            found.append(int(pid))
    return found


def kill_coordinate(state_dir, node):
    while _present(state_dir, node):
        time.sleep(SLOW_LOOK)
    site_root = os.path.dirname(os.path.abspath(state_dir))
    while True:
        scripts = _processes('kubespray_coordinate_v2.py',
                             among=procs.descendants([os.getppid()]))
        if scripts and _processes('ansible-playbook', 'scale.yml',
                                  site_root + os.sep):
            break
        # scale.yml runs for seconds: a look every SLOW_LOOK kills the
        # script well inside it, and each look reads all of /proc twice.
        time.sleep(SLOW_LOOK)
    for pid in scripts:
        os.kill(pid, signal.SIGKILL)
    print('killed', flush=True)


if __name__ == '__main__':
    {'probe': probe, 'break': break_kubelet,
     'kill': kill_coordinate}[sys.argv[1]](*sys.argv[2:])
