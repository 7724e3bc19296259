"""Conductor memory and threads against concurrent operations.

Issue 40, "Done when": conductor memory grows linearly with concurrent
operations.  For each count N (1, 5, 10, 20, 40), a fresh Python
process plays a Tacker conductor: a ``ThreadPoolExecutor(64)`` as
oslo.messaging's, on which N operations run at once, each in its worker
thread as Tacker runs a hook, each the part of a hook that lasts: a real
``kubespray.Runner`` on its own SSH connection (paramiko, one transport
thread) to a real sshd (127.0.83.1), starting a detached playbook run
and following its log until it ends (the stand-in playbook of
``tests/functional/slot_queue_site.py`` holds until released; no slot
limit, so all N run).  Once all N playbooks run, the process's RSS
(``VmRSS``) and threads are sampled for 2 s; printed per N: RSS before
(imports and executor) and at peak, ``ru_maxrss``, threads; then the
least-squares line of peak RSS and of threads against N (MiB and
threads per operation, R²).  A benchmark: it asserts nothing.

    python benchmarks/conductor_memory.py           # N = 1, 5, 10, 20, 40
    python benchmarks/conductor_memory.py --quick   # N = 1, 2, 4
"""

import argparse
import concurrent.futures
import json
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import threading
import time
import types

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from mgmt_localsite import sshd as sshd_site  # noqa: E402

from tests.functional import slot_queue_site  # noqa: E402

#: Where CI runs ``--quick`` (tests/functional/test_benchmarks_quick.py).
QUICK_LANE = 'functional'
ADDRESS = '127.0.83.1'
COUNTS = (1, 5, 10, 20, 40)
QUICK_COUNTS = (1, 2, 4)
#: oslo.messaging's executor size, which Tacker 16's conductor keeps.
WORKERS = 64


def _rss_kib():
    """This process's resident set (``VmRSS``), KiB."""
    for line in pathlib.Path('/proc/self/status').read_text().splitlines():
        if line.startswith('VmRSS:'):
            return int(line.split()[1])
    return 0


def _sample(seconds):
    """The most RSS (KiB) and threads seen over *seconds*."""
    rss = threads = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        rss = max(rss, _rss_kib())
        threads = max(threads, threading.active_count())
        time.sleep(0.05)
    return rss, threads


def child(count, site_fields):
    """Run *count* operations at once in this process; their figures.

    :param site_fields: the sshd's ``user``, ``client_key``, ``port``
        and ``scratch``, and ``known_hosts``.
    """
    site = types.SimpleNamespace(**site_fields)
    executor = concurrent.futures.ThreadPoolExecutor(WORKERS)
    queue = slot_queue_site.Queue(site, ADDRESS, 0, site.known_hosts)
    before = _rss_kib(), threading.active_count()
    names = ['ws-op%02d' % i for i in range(count)]
    try:
        for name in names:
            queue.submit(name, 'upgrade', executor=executor)
        slot_queue_site.wait_for(
            lambda: len(queue.started()) == count and all(
                any(line.startswith('log: ') for line in queue.lines[n])
                for n in names), 'every playbook to run and be followed')
        peak_rss, peak_threads = _sample(2.0)
    finally:
        queue.close()
        executor.shutdown(wait=True)
    failed = [n for n in names if not hasattr(queue.outcomes.get(n),
                                              'log')]
    return {'count': count, 'rss_before_kib': before[0],
            'threads_before': before[1], 'rss_kib': peak_rss,
            'threads': peak_threads, 'failed': failed,
            'ru_maxrss_kib': resource.getrusage(
                resource.RUSAGE_SELF).ru_maxrss}


def fit(xs, ys):
    """Least squares ``y = a + b x``: ``(a, b, R²)``."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    b = sxy / sxx
    a = my - b * mx
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - a - b * x) ** 2 for x, y in zip(xs, ys, strict=True))
    return a, b, 1 - ss_res / ss_tot if ss_tot else 1.0


def measure(site, count, known_hosts):
    """The figures of *count* operations, from a fresh process."""
    fields = {'user': site.user, 'client_key': site.client_key,
              'port': site.port, 'scratch': site.scratch,
              'known_hosts': known_hosts}
    out = subprocess.run(
        [sys.executable, __file__, '--child', str(count),
         json.dumps(fields)], check=True, capture_output=True, text=True,
        timeout=600).stdout
    return json.loads(out.strip().splitlines()[-1])


def report(rows):
    """The table and the fitted lines, as text."""
    lines = ['%3s  %12s  %12s  %14s  %7s' % (
        'N', 'RSS before', 'RSS peak', 'ru_maxrss', 'threads')]
    for r in rows:
        lines.append('%3d  %8.1f MiB  %8.1f MiB  %10.1f MiB  %7d%s' % (
            r['count'], r['rss_before_kib'] / 1024, r['rss_kib'] / 1024,
            r['ru_maxrss_kib'] / 1024, r['threads'],
            '  failed: %s' % r['failed'] if r['failed'] else ''))
    xs = [r['count'] for r in rows]
    a, b, r2 = fit(xs, [r['rss_kib'] / 1024 for r in rows])
    lines.append('peak RSS = %.1f MiB + %.2f MiB per operation (R² %.4f)'
                 % (a, b, r2))
    a, b, r2 = fit(xs, [r['threads'] for r in rows])
    lines.append('threads = %.1f + %.2f per operation (R² %.4f)'
                 % (a, b, r2))
    lines.append('load average: %.1f %.1f %.1f' % os.getloadavg())
    return '\n'.join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true',
                        help='N = 1, 2, 4: what CI runs')
    parser.add_argument('--child', nargs=2, metavar=('N', 'SITE'),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(int(args.child[0]),
                               json.loads(args.child[1]))))
        return 0
    site = sshd_site.Sshd((ADDRESS,)).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            known_hosts = os.path.join(tmp, 'known_hosts')
            rows = [measure(site, count, known_hosts)
                    for count in (QUICK_COUNTS if args.quick else COUNTS)]
    finally:
        site.cleanup()
    print(report(rows))
    return 0


if __name__ == '__main__':
    sys.exit(main())
