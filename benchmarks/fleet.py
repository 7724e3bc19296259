"""A fleet on one conductor: a bad day's burst of operations, measured.

Issue 40 item 1.  On the local site (real sshd, real ``ansible-playbook``
running the kubespray test double, a real HAProxy per LB), N instances
(one master, three workers each) share ONE Ansible server account; one
process plays a Tacker 16 conductor, a ``ThreadPoolExecutor(64)`` as
oslo.messaging's, running Tacker v1's hooks
(``mgmt_driver.adapters.v1.LcmHooks``; the harness is
``tests/functional/fleet_site.py``).  After every instance is
instantiated, a rack loss makes 30 % of all workers NotReady and an
automatic heal request arrives for each instance it hit (within the
first tenth of the window); then scale-outs, upgrades, relabels,
certificate renewals and ``status`` probes, in turn on random instances,
arrive over the rest of the window.  Tacker's API refuses a second LCM
operation of a busy instance (409); the NFVO sends it again when the
first ends, so its wait counts from its first arrival.  Printed:

* operations per minute over the burst (from the first arrival to the
  last end), and the outcomes;
* per kind: count, latency p50/p99 (arrival to end) and waiting time
  p50/max (arrival until a conductor worker runs it: the instance's
  earlier operations, then the executor's queue);
* the conductor's peak RSS (sampled and the kernel's ``ru_maxrss``) and
  threads; the most concurrent ``ansible-playbook`` runs on the Ansible
  server (sampled every 0.25 s: the processes of that name whose command
  line names a path in this fleet's workspace parent; detached runs are
  started with ``setsid`` and are no descendants of the site's sshd) and
  the most SSH sessions to it at once (established TCP connections to
  its address);
* whether every instance converged and what terminate left.

Usage (from the repository root, as root or a user that may run sshd)::

    python benchmarks/fleet.py                 # 20 instances, 70 ops, 60 s
    python benchmarks/fleet.py --instances 30 --operations 100 --slots 8
    python benchmarks/fleet.py --quick         # 1 instance, 2 ops, 5 s

Addresses: 127.0.74.0/24 and 127.0.75.0/24 (10 per instance, 25
instances a /24; up to 50 instances).
"""

import argparse
import collections
import json
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import lifecycle  # noqa: E402
from mgmt_localsite import lab as lab_mod  # noqa: E402
from ssh_costs import percentile  # noqa: E402

from tests.functional import fleet_site  # noqa: E402

#: Where CI runs ``--quick`` (tests/functional/test_benchmarks_quick.py).
QUICK_LANE = 'functional'
BLOCK = 74


def figures(day):
    """The figures of a :class:`fleet_site.Day`, as a dict."""
    ops = day.ops
    ended = [op for op in ops if op.ended is not None]
    first = min(op.submitted for op in ops)
    last = max(op.ended for op in ended) if ended else first
    kinds = {}
    for kind in fleet_site.KINDS:
        mine = [op for op in ended if op.kind == kind]
        if not mine:
            continue
        latency = [op.latency for op in mine]
        wait = [op.wait for op in mine]
        kinds[kind] = {
            'count': len(mine),
            'outcomes': dict(collections.Counter(op.outcome for op in mine)),
            'latency_p50': percentile(latency, 50),
            'latency_p99': percentile(latency, 99),
            'wait_p50': percentile(wait, 50), 'wait_max': max(wait)}
    return {
        'instances': len({op.instance for op in ops}),
        'operations': len(ops), 'ended': len(ended),
        'burst_minutes': (last - first) / 60,
        'ops_per_minute': len(ended) / max((last - first) / 60, 1e-9),
        'instantiate_s': day.instantiate_s,
        'nodes_lost': sum(len(a) for a in day.lost.values()),
        'outcomes': dict(collections.Counter(op.outcome for op in ops)),
        'kinds': kinds,
        'peak_rss_mib': day.peak['rss_kib'] / 1024,
        'ru_maxrss_mib': day.max_rss_kib / 1024,
        'peak_threads': day.peak['threads'],
        'peak_playbooks': day.peak['playbooks'],
        'peak_ansible_ssh': day.peak['ansible_ssh'],
        'load_average': os.getloadavg(),
        'refusals': sorted({op.error.split('\n')[0][:300] for op in ops
                            if op.outcome != 'done' and op.error}),
        'divergence': day.divergence,
        'terminate_problems': day.terminate_problems, 'leaks': day.leaks,
        'ssh_masters_left': day.masters_left}


def table(result):
    """The per-kind figures as an RST table."""
    rows = [('kind', 'ops', 'done/refused/failed', 'latency p50 s',
             'latency p99 s', 'wait p50 s', 'wait max s')]
    for kind, k in result['kinds'].items():
        o = k['outcomes']
        rows.append((kind, str(k['count']), '%d/%d/%d' % (
            o.get('done', 0), o.get('refused', 0), o.get('failed', 0)),
            '%.1f' % k['latency_p50'], '%.1f' % k['latency_p99'],
            '%.1f' % k['wait_p50'], '%.1f' % k['wait_max']))
    return lifecycle.rst_rows(rows)


def summary(result):
    r = result
    return '\n'.join([
        '%d instances, %d operations (%d nodes NotReady), burst %.1f min: '
        '%.1f operations per minute; instantiate took %.0f s' % (
            r['instances'], r['operations'], r['nodes_lost'],
            r['burst_minutes'], r['ops_per_minute'], r['instantiate_s']),
        'outcomes: %s' % r['outcomes'],
        'conductor: peak RSS %.0f MiB sampled (ru_maxrss %.0f MiB), '
        'peak threads %d' % (r['peak_rss_mib'], r['ru_maxrss_mib'],
                             r['peak_threads']),
        'Ansible server: at most %d concurrent ansible-playbook runs '
        '(by workspace path) and %d SSH sessions at once' % (
            r['peak_playbooks'], r['peak_ansible_ssh']),
        'load average at the end: %.1f %.1f %.1f' % tuple(r['load_average']),
        'after terminate: %d SSH masters of Ansible still open' % (
            r['ssh_masters_left']),
        'converged: %s; terminate: %s; leaks: %s' % (
            'yes' if not r['divergence'] else r['divergence'],
            'ok' if not r['terminate_problems'] else r['terminate_problems'],
            'none' if not r['leaks'] else r['leaks']),
    ] + ['refused/failed: ' + e for e in r['refusals']]) + '\n'


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--instances', type=int, default=20)
    parser.add_argument('--operations', type=int, default=70)
    parser.add_argument('--window', type=float, default=60.0,
                        help='seconds over which the burst arrives')
    parser.add_argument('--slots', type=int, default=4,
                        help='max_parallel_playbooks_per_server')
    parser.add_argument('--timeout', type=float, default=7200.0,
                        help='seconds to wait for the burst to end')
    parser.add_argument('--json', action='store_true',
                        help='print the figures as JSON too')
    parser.add_argument('--quick', action='store_true',
                        help='1 instance, 2 operations in 5 s: what CI '
                             'runs')
    args = parser.parse_args(argv)
    if args.quick:
        # A heal (the rack loss hits one of the three workers) and a
        # status probe: every line of this script's output, every
        # function of it and of the harness's bad day once.  A second
        # instance would only repeat them (its instantiate, heal and
        # terminate are as many ansible-playbook runs again); several
        # instances and every other kind run in
        # tests/functional/test_fleet.py, on the same harness.
        args.instances, args.operations, args.window = 1, 2, 5.0
    if not 1 <= args.instances <= 50:
        parser.error('--instances: 1 to 50')
    lab_mod.stop_on_sigterm()
    fleet = fleet_site.Fleet(BLOCK, args.instances, spares=2,
                             slots=args.slots)
    try:
        with fleet:
            day = fleet_site.bad_day(fleet, args.operations, args.window,
                                     args.timeout)
    finally:
        fleet_site.remove(fleet)
    result = figures(day)
    sys.stdout.write(summary(result) + '\n' + table(result))
    if args.json:
        print(json.dumps(result, default=str))
    return 0


if __name__ == '__main__':
    sys.exit(main())
