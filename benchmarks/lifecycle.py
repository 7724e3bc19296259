"""What each LCM hook costs, at several cluster sizes, on the local site.

For every size (workers; one master) a fresh local site
(localsite-dist/mgmt_localsite/lab.py: real sshd, real ansible-playbook running
the kubespray test double, real HAProxy) runs Tacker's hooks through
``mgmt_driver.adapters.v1.LcmHooks`` with a fake Heat (tests/functional/
tacker_fakes.py): instantiate_end, scale_end (out by 2), scale_start (in
by 1), heal_start + heal_end (one worker), terminate_start +
terminate_end.  Per hook it reports:

* SSH connections the driver opened (total, and the most to one host),
  and remote commands it ran (file transfers count as commands);
* wall time, time inside ``ansible-playbook`` (measured around that
  remote command), and the driver's own time: the difference;
* each playbook run with the number of hosts it touched (from the
  double's run log) and its ``--limit``.

Usage (from the repository root, with the functional-test dependencies
and ansible-core installed)::

    python benchmarks/lifecycle.py --workers 3 10 30 100 --rst

To compare with another commit, run it there without ``--rst`` (JSON
lines) and pass that file here: ``--before OLD.jsonl --rst`` prints
before and after side by side.  ``--log`` prints each hook's remote
commands and file transfers on stderr (host, seconds, the program's
name or the command's first words), to see which could be batched.

Only 127.0.0.0/8 is used.
"""

import argparse
import json
import pathlib
import sys
import time
import types

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from mgmt_localsite import lab as lab_mod  # noqa: E402

from mgmt_driver.adapters import v1  # noqa: E402
from mgmt_driver.model import core  # noqa: E402
from mgmt_driver.remote import detached  # noqa: E402
from mgmt_driver.remote import programs  # noqa: E402
from mgmt_driver.remote import ssh  # noqa: E402
from tests.functional import tacker_fakes  # noqa: E402
from tests.functional.tacker_fakes import heal_request  # noqa: E402
from tests.functional.tacker_fakes import instantiate_request  # noqa: E402
from tests.functional.tacker_fakes import scale_request  # noqa: E402

#: Where CI runs ``--quick`` (tests/functional/test_benchmarks_quick.py).
QUICK_LANE = 'functional'

ANSIBLE = '127.0.2.1'
LB = '127.0.2.2'
MASTER = '127.0.2.10'
CONTEXT = types.SimpleNamespace(project_id='benchmark')


def worker_addresses(count, first_block=3):
    """*count* loopback addresses, 250 per ``127.0.X.0/24`` block from
    ``127.0.<first_block>.1`` on."""
    return ['127.0.%d.%d' % (first_block + i // 250, 1 + i % 250)
            for i in range(count)]


def _is_playbook_time(command):
    """Starting an ansible-playbook run, or following it to its end
    (a detached run, :mod:`mgmt_driver.remote.detached`: the start returns at
    once, the time passes while its log is followed).  The program is
    found by its name (:func:`mgmt_driver.remote.programs.name_of`), not by its
    text, which changes."""
    words = command if isinstance(command, (list, tuple)) else [command]
    return any(str(w).endswith('ansible-playbook') for w in words) or \
        programs.name_of(command) == detached.FOLLOW


def _command_label(command):
    """A short name for *command* in the command log: its program's
    name, or its first words."""
    name = programs.name_of(command)
    if name:
        return name
    words = command if isinstance(command, (list, tuple)) else \
        str(command).split()
    return ' '.join(str(w) for w in words[:4])[:80]


class _TimedConnection:
    """A connection that adds the time of ansible-playbook runs to its
    pool's ``playbook_seconds``, and logs each command and transfer in
    its pool's ``log`` (host, what, seconds)."""

    def __init__(self, conn, pool):
        self._conn = conn
        self._pool = pool

    def __getattr__(self, name):
        attr = getattr(self._conn, name)
        if name not in _TRANSFERS:
            return attr

        def logged(*args, **kwargs):
            started = time.monotonic()
            try:
                return attr(*args, **kwargs)
            finally:
                self._log('%s %s' % (name, args[0] if args else ''),
                          started)
        return logged

    def _log(self, what, started):
        self._pool.log.append((self._conn.host, what,
                               time.monotonic() - started))

    def run(self, command, *args, **kwargs):
        started = time.monotonic()
        try:
            return self._conn.run(command, *args, **kwargs)
        finally:
            self._log(_command_label(command), started)
            if _is_playbook_time(command):
                self._pool.playbook_seconds += time.monotonic() - started


#: The connection's file transfers, logged as commands.
_TRANSFERS = ('write_file', 'read_file', 'put', 'get', 'copy_to')


class TimingPool(ssh.ConnectionPool):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.playbook_seconds = 0.0
        self.log = []

    def connection(self, host, credentials, port=22, **kwargs):
        # **kwargs: whatever the pool's signature grows (on_new_key, ...)
        # passes through, so the wrapper cannot fall behind it.
        return _TimedConnection(
            super().connection(host, credentials, port, **kwargs), self)


class Bench:
    """One size: the site, the VNF and the measured hook calls."""

    def __init__(self, lab, workers, master=MASTER, lb=LB):
        self.lab = lab
        self.vnf = tacker_fakes.TackerVnf(lab.additional_params, [master],
                                          workers, lb)
        self.pools = []
        self.rows = []
        self.hooks = v1.LcmHooks(
            lab.conf, pool_factory=self._pool,
            heat_factory=lambda *a: self.vnf.heat,
            vim_registry=tacker_fakes.FakeRegistry(),
            package_dir_of=lambda c, i: None)

    def _pool(self):
        pool = TimingPool(ssh.SSHSettings.from_conf(self.lab.conf),
                          stats=ssh.Stats())
        self.pools.append(pool)
        return pool

    def call(self, hook, request, **kwargs):
        runs_before = len(self.lab.site.runs())
        pools_before = len(self.pools)
        started = time.monotonic()
        getattr(self.hooks, hook)(CONTEXT, self.vnf.instance, request, None,
                                  None, **kwargs)
        wall = time.monotonic() - started
        pools = self.pools[pools_before:]
        counts = {}
        for pool in pools:
            for host, c in pool.stats.snapshot().items():
                total = counts.setdefault(host, dict.fromkeys(c, 0))
                for kind, n in c.items():
                    total[kind] += n
        playbook = sum(p.playbook_seconds for p in pools)
        self.rows.append({
            'hook': hook, 'wall': wall, 'ansible': playbook,
            'driver': wall - playbook,
            'connections': sum(c['connections'] for c in counts.values()),
            'max_per_host': max((c['connections'] for c in counts.values()),
                                default=0),
            'commands': sum(c['commands'] + c['transfers']
                            for c in counts.values()),
            'playbooks': [(r['playbook'], len(r['touched']), r['limit'])
                          for r in self.lab.runs_since(runs_before)],
            'log': [entry for p in pools for entry in p.log],
        })

    def lifecycle(self, workers, spare):
        vnf = self.vnf
        self.call('instantiate_end', instantiate_request(
            vnf.additional_params))
        new = [vnf.add_vm(core.ROLE_WORKER, a) for a in spare]
        self.call('scale_end', scale_request('SCALE_OUT'),
                  scale_out_id_list=[vm.stack_id for vm in new])
        gone = vnf.vm(workers[0])
        self.call('scale_start', scale_request('SCALE_IN'),
                  scale_name_list=[gone.member],
                  scale_out_id_list=[gone.stack_id])
        vnf.remove_vm(gone)
        sick = vnf.vm(workers[1])
        self.call('heal_start', heal_request([sick], 'benchmark'))
        vnf.recreate_vm(sick)
        self.call('heal_end', heal_request([sick], 'benchmark'))
        self.call('terminate_start', None)
        self.call('terminate_end', None)


def run_size(count):
    addresses = worker_addresses(count + 2)
    workers, spare = addresses[:count], addresses[count:]
    options = {'ansible_forks': 50}
    with lab_mod.Lab(ANSIBLE, LB, [MASTER], addresses, backends=False,
                     options=options) as lab:
        bench = Bench(lab, workers)
        bench.lifecycle(workers, spare)
        return bench.rows


def _playbooks_text(row):
    return ', '.join('%s (%d%s)' % (name, touched,
                                    ', --limit' if limit else '')
                     for name, touched, limit in row['playbooks']) or '-'


def rst_table(results):
    header = ('workers', 'hook', 'wall s', 'ansible s', 'driver s',
              'SSH conn. (max/host)', 'commands',
              'playbooks (hosts touched)')
    rows = [header]
    for count, hook_rows in results:
        for row in hook_rows:
            rows.append((str(count), row['hook'], '%.2f' % row['wall'],
                         '%.2f' % row['ansible'], '%.2f' % row['driver'],
                         '%d (%d)' % (row['connections'],
                                      row['max_per_host']),
                         str(row['commands']), _playbooks_text(row)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    rule = '  '.join('=' * w for w in widths)
    lines = [rule, '  '.join(c.ljust(w) for c, w in
                             zip(header, widths, strict=True)).rstrip(), rule]
    for row in rows[1:]:
        lines.append('  '.join(c.ljust(w) for c, w in
                               zip(row, widths, strict=True)).rstrip())
    lines.append(rule)
    return '\n'.join(lines) + '\n'


def rst_comparison(results, before):
    """An RST table of *results* beside *before* (JSON rows of another
    commit, same sizes and hooks)."""
    old = {(r['workers'], r['hook']): r for r in before}
    header = ('workers', 'hook', 'wall s', 'driver s', 'commands',
              'SSH conn. (max/host)', 'playbooks (hosts touched)')
    rows = [header, ('', '', 'before/after', 'before/after',
                     'before/after', 'after', 'before -> after')]
    for count, hook_rows in results:
        for row in hook_rows:
            was = old.get((count, row['hook']))
            if was is None:
                continue
            rows.append((
                str(count), row['hook'],
                '%.2f/%.2f' % (was['wall'], row['wall']),
                '%.2f/%.2f' % (was['driver'], row['driver']),
                '%d/%d' % (was['commands'], row['commands']),
                '%d (%d)' % (row['connections'], row['max_per_host']),
                '%s -> %s' % (_playbooks_text(was), _playbooks_text(row))))
    return rst_rows(rows)


def rst_rows(rows):
    """A simple RST table of *rows* (strings); the header is the first
    row, or the first two when the second one's first cell is empty."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    rule = '  '.join('=' * w for w in widths)
    header = 2 if len(rows) > 1 and not rows[1][0] else 1
    lines = [rule]
    for i, row in enumerate(rows):
        lines.append('  '.join(c.ljust(w) for c, w in
                               zip(row, widths, strict=True)).rstrip())
        if i == header - 1:
            lines.append(rule)
    lines.append(rule)
    return '\n'.join(lines) + '\n'


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--workers', type=int, nargs='+',
                        default=[3, 10, 30, 100])
    parser.add_argument('--rst', action='store_true',
                        help='print an RST table (default: JSON lines)')
    parser.add_argument('--before', type=argparse.FileType('r'),
                        help='JSON lines of a run on another commit: '
                             'the RST table shows both')
    parser.add_argument('--from-json', type=argparse.FileType('r'),
                        help='make the table from these JSON lines '
                             'instead of running')
    parser.add_argument('--log', action='store_true',
                        help='print the remote commands and '
                             'transfers (host, program or words, seconds) '
                             'to stderr')
    parser.add_argument('--quick', action='store_true', help='2 workers '
                        '(the fewest the hooks need): what CI runs')
    args = parser.parse_args(argv)
    if args.quick:
        args.workers = [2]
    if args.from_json:
        return _print_table(_load(args.from_json), args.before)
    lab_mod.stop_on_sigterm()
    results = []
    for count in args.workers:
        started = time.monotonic()
        rows = run_size(count)
        results.append((count, rows))
        if args.log:
            _print_log(rows)
        print('# %d workers: %.0f s' % (count, time.monotonic() - started),
              file=sys.stderr, flush=True)
        if not args.rst:
            for row in rows:
                print(json.dumps(dict(row, workers=count)), flush=True)
    if args.rst:
        return _print_table(results, args.before)
    return 0


def _print_log(rows):
    for row in rows:
        print('# %s: %d commands' % (row['hook'], len(row['log'])),
              file=sys.stderr)
        for host, what, seconds in row['log']:
            print('#   %-12s %6.2f s  %s' % (host, seconds, what),
                  file=sys.stderr)
    sys.stderr.flush()


def _load(lines):
    """``[(workers, rows)]`` from JSON lines."""
    results = {}
    for line in lines:
        if line.strip():
            row = json.loads(line)
            results.setdefault(row['workers'], []).append(row)
    return sorted(results.items())


def _print_table(results, before):
    if before:
        rows = [row for _, rows in _load(before) for row in rows]
        sys.stdout.write(rst_comparison(results, rows))
    else:
        sys.stdout.write(rst_table(results))
    return 0


if __name__ == '__main__':
    sys.exit(main())
