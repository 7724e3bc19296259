"""v1 hooks in a process patched as Tacker <= 15's conductor is.

Run as ``python -c "import tacker.cmd.eventlet; ..."`` by
test_conductor_runtimes: ``tacker.cmd.eventlet`` is the package Tacker's
``tacker-conductor`` entry point imported until 15.x
(``tacker/cmd/eventlet/conductor.py``), whose ``__init__`` runs
``tacker.common.eventlet_utils.monkey_patch()``: ``eventlet.monkey_patch()``
with every module (socket, select, thread, time, os, subprocess).  One
green thread that blocks without yielding stops every other one there:
the other operations and the AMQP heartbeat.

:func:`main` starts a local site (on the addresses given), then a green
"heartbeat" that wakes every :data:`TICK` seconds and keeps the longest
time it was kept from running, then runs ``instantiate_end`` and a
scale-out ``scale_end`` as Tacker would, and prints one JSON line: the
longest stall, the ten longest with what the hooks were doing, and
whether the cluster converged.  As each hook starts, another process
(another conductor worker of the host) holds the driver's ``known_hosts``
lock for :data:`HOLD` seconds: the hook must wait for it without
stopping the hub.
"""

import json
import subprocess
import sys
import time
import types

import eventlet
from mgmt_localsite import lab as lab_mod

from mgmt_driver.model import core
from tests.functional import tacker_fakes

#: Seconds the heartbeat sleeps between two ticks.
TICK = 0.02
CONTEXT = types.SimpleNamespace(project_id='green-conductor')
#: Seconds the other process holds the known_hosts lock.
HOLD = 2.0
_HOLDER = """
import fcntl, sys, time
with open(sys.argv[1], 'a') as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    print('held', flush=True)
    time.sleep(float(sys.argv[2]))
"""


def run_queue_delay():
    """Seconds the calling thread has spent runnable but not running
    (waiting for a CPU): the second field of its ``schedstat``."""
    with open('/proc/thread-self/schedstat') as f:
        return int(f.read().split()[1]) / 1e9


def hold_lock(path, seconds):
    """Another process that holds the ``flock`` of *path* for *seconds*
    (returned once it holds it)."""
    holder = subprocess.Popen([sys.executable, '-c', _HOLDER, path,
                               str(seconds)], stdout=subprocess.PIPE,
                              text=True)
    if holder.stdout.readline().strip() != 'held':
        raise RuntimeError('the lock holder did not start')
    return holder


class Heartbeat:
    """A green thread that measures how long it was kept from running.

    A native thread (eventlet's unpatched ``threading``) ticks beside
    it.  The part of a green gap that the native thread missed as well
    and in which the process used no CPU is the machine's (the process
    was not scheduled, as on a loaded CI host), not the hub's, and is
    not counted.  A hub blocked in C that releases the GIL (flock,
    bcrypt) leaves the native thread ticking; one that holds it burns
    CPU: either way the gap counts.

    Nor is the time the hub's own thread spent runnable but waiting for
    a CPU (the run-queue delay of ``/proc/thread-self/schedstat``):
    beside busy processes a green gap stretches by it, in short slices
    the native thread's gaps do not show; its time on CPU and its time
    blocked in the kernel (a wait that does not yield) still count, and
    neither grows with the machine's load.
    """

    def __init__(self):
        self.gaps = []      # (start, end, cpu, queued, doing) per gap
        self.native = []    # (start, end) of each native gap
        self.doing = 'starting'
        self._running = True
        self._thread = self._native_thread = None

    def start(self):
        self._thread = eventlet.spawn(self._beat)
        threading = eventlet.patcher.original('threading')
        self._native_thread = threading.Thread(target=self._native_beat,
                                               daemon=True)
        self._native_thread.start()
        eventlet.sleep(0)
        return self

    def _beat(self):
        last, cpu = time.monotonic(), time.process_time()
        queued = run_queue_delay()
        while self._running:
            eventlet.sleep(TICK)
            now, now_cpu = time.monotonic(), time.process_time()
            now_queued = run_queue_delay()
            self.gaps.append((last, now, now_cpu - cpu, now_queued - queued,
                              self.doing))
            last, cpu, queued = now, now_cpu, now_queued

    def _native_beat(self):
        sleep = eventlet.patcher.original('time').sleep
        last = time.monotonic()
        while self._running:
            sleep(TICK)
            now = time.monotonic()
            self.native.append((last, now))
            last = now

    def stop(self):
        self._running = False
        self._thread.wait()
        self._native_thread.join()

    def _machine(self, start, end):
        """The longest native gap overlapping ``[start, end]``."""
        return max((min(e, end) - max(s, start) - TICK
                    for s, e in self.native if s < end and e > start),
                   default=0.0)

    def report(self):
        # The scan of native gaps is over the 50 gaps that could stall
        # longest (gap less run-queue delay: an upper bound of the
        # stall), not the longest raw gaps, which load stretches.
        raw = sorted(((end - start - TICK - queued, end - start - TICK,
                       start, end, cpu, queued, doing)
                      for start, end, cpu, queued, doing in self.gaps),
                     reverse=True)
        worst = [(gap - max(queued,
                            min(self._machine(start, end), gap - cpu)),
                  gap, doing)
                 for _, gap, start, end, cpu, queued, doing in raw[:50]]
        worst.sort(reverse=True)
        return {'ticks': len(self.gaps),
                'longest_stall': worst[0][0] if worst else None,
                'longest_raw_gap': max((g[1] for g in raw), default=None),
                'worst': [[round(stall, 3), round(gap, 3), doing]
                          for stall, gap, doing in worst[:10]]}


def main(ansible, lb, masters, workers):
    """Instantiate with all but the last worker, scale out by the last.

    :param ansible: the Ansible server's address; *lb* the LB's.
    """
    if not eventlet.patcher.is_monkey_patched('socket'):
        raise SystemExit('run me in a process eventlet has patched')
    with lab_mod.Lab(ansible, lb, masters, workers) as lab:
        vnf, registry, hooks = tacker_fakes.vnf_on_lab(
            lab, masters, workers[:-1], lb)
        lock = lab.conf.kubespray_mgmt.known_hosts_file + '.lock'
        heart = Heartbeat().start()
        holders = []
        try:
            holders.append(hold_lock(lock, HOLD))
            heart.doing = 'instantiate_end'
            hooks.instantiate_end(
                CONTEXT, vnf.instance,
                tacker_fakes.instantiate_request(vnf.additional_params),
                None, None)
            new = vnf.add_vm(core.ROLE_WORKER, workers[-1])
            holders.append(hold_lock(lock, HOLD))
            heart.doing = 'scale_end'
            hooks.scale_end(CONTEXT, vnf.instance,
                            tacker_fakes.scale_request('SCALE_OUT'), None,
                            None, scale_out_id_list=[new.stack_id])
            heart.doing = 'done'
        finally:
            heart.stop()
            for holder in holders:
                holder.kill()
                holder.wait()
        report = heart.report()
        report['problems'] = lab.check(masters, workers)
        report['vims'] = len(registry.current)
    print(json.dumps(report), flush=True)


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2], sys.argv[3].split(','),
         sys.argv[4].split(','))
