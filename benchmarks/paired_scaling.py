"""Scale out and in by one at two cluster sizes, interleaved: the ratio.

``lifecycle.py`` measures each size after the other, so on a shared
machine a change of load between them lands in the ratio.  Here two
local sites run side by side (one master each; by default 3 and 100
workers), and each round scales out by one worker then in by the same
one on the small site, then on the large one.  The medians of the
rounds give the ratio large/small per hook, with the load the same for
both.  A last round on the large site ages the fact-cache entries of
some workers past the checkout's timeout first, and reports which hosts
the facts run then touched (exactly those should be refreshed).

Usage (from the repository root, as lifecycle.py)::

    python benchmarks/paired_scaling.py --sizes 3 100 --rounds 5 --stale 10

Only 127.0.0.0/8 is used: 127.0.2.x and 127.0.3.x for the small site,
127.0.20.x to 127.0.22.x for the large one.
"""

import argparse
import pathlib
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import lifecycle  # noqa: E402
from mgmt_localsite import lab as lab_mod  # noqa: E402
from mgmt_localsite import site as site_mod  # noqa: E402

from mgmt_driver.model import core
from tests.functional.tacker_fakes import instantiate_request  # noqa: E402
from tests.functional.tacker_fakes import scale_request  # noqa: E402

#: Where CI runs ``--quick`` (tests/functional/test_benchmarks_quick.py).
QUICK_LANE = 'functional'

HOOKS = ('scale_end', 'scale_start')


class Site:
    """One size: its lab, hooks, and a spare worker address per round."""

    def __init__(self, count, rounds, second):
        base = 20 if second else 2
        self.ansible, self.lb = '127.0.%d.1' % base, '127.0.%d.2' % base
        self.master = '127.0.%d.10' % base
        addresses = lifecycle.worker_addresses(count + rounds + 1,
                                               first_block=base + 1)
        self.count = count
        self.workers, self.spare = addresses[:count], addresses[count:]
        self.lab = lab_mod.Lab(self.ansible, self.lb, [self.master],
                               addresses, backends=False,
                               options={'ansible_forks': 50})
        self.bench = None

    def start(self):
        self.lab.start()
        self.bench = lifecycle.Bench(self.lab, self.workers, self.master,
                                     self.lb)
        self.bench.call('instantiate_end', instantiate_request(
            self.bench.vnf.additional_params))

    def out_and_in(self, address):
        """Scale out by *address*, then in by it: their two rows."""
        vnf, bench = self.bench.vnf, self.bench
        vm = vnf.add_vm(core.ROLE_WORKER, address)
        bench.call('scale_end', scale_request('SCALE_OUT'),
                   scale_out_id_list=[vm.stack_id])
        bench.call('scale_start', scale_request('SCALE_IN'),
                   scale_name_list=[vm.member],
                   scale_out_id_list=[vm.stack_id])
        vnf.remove_vm(vm)
        return bench.rows[-2:]

    def stale_round(self, stale, address):
        """Age *stale* workers' cache entries, scale out by *address*:
        (aged names, the facts runs' touched hosts, the row)."""
        site = self.lab.site
        names = [site_mod.name_of(core.ROLE_WORKER, a)
                 for a in self.workers[-stale:]]
        aged = site.age_fact_cache(site.fact_cache_timeout() + 60,
                                   hosts=names)
        runs = len(site.runs())
        vm = self.bench.vnf.add_vm(core.ROLE_WORKER, address)
        self.bench.call('scale_end', scale_request('SCALE_OUT'),
                        scale_out_id_list=[vm.stack_id])
        touched = sorted(h for r in site.runs()[runs:]
                         if r['playbook'].endswith('facts.yml')
                         for h in r['touched'])
        return aged, touched, self.bench.rows[-1]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--sizes', type=int, nargs=2, default=[3, 100])
    parser.add_argument('--rounds', type=int, default=5)
    parser.add_argument('--stale', type=int, default=10,
                        help='workers whose cache entry the last round '
                             'ages (0: no such round)')
    parser.add_argument('--quick', action='store_true',
                        help='seconds, tiny sizes: what CI runs (no '
                             'figure is checked)')
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.rounds, args.stale = [1, 2], 1, 1
    lab_mod.stop_on_sigterm()
    small = Site(args.sizes[0], args.rounds, second=False)
    large = Site(args.sizes[1], args.rounds, second=True)
    try:
        for site in (small, large):
            site.start()
        walls = {(s.count, h): [] for s in (small, large) for h in HOOKS}
        for i in range(args.rounds):
            for site in (small, large):
                for row in site.out_and_in(site.spare[i]):
                    walls[site.count, row['hook']].append(row['wall'])
                    print('# round %d, %d workers, %s: %.2f s' % (
                        i + 1, site.count, row['hook'], row['wall']),
                        file=sys.stderr, flush=True)
        print(_table(walls, small.count, large.count))
        if args.stale:
            aged, touched, row = large.stale_round(args.stale,
                                                   large.spare[-1])
            print('stale round, %d workers: %d entries aged, facts run '
                  'touched %d host(s) (%s), those aged: %s; scale_end '
                  '%.2f s, %d commands' % (
                      large.count, len(aged), len(touched),
                      ', '.join(touched), touched == aged, row['wall'],
                      row['commands']))
    finally:
        for site in (large, small):
            site.lab.stop()
    return 0


def _table(walls, small, large):
    rows = [('hook', '%d workers: median s (all)' % small,
             '%d workers: median s (all)' % large, 'ratio')]
    for hook in HOOKS:
        a, b = walls[small, hook], walls[large, hook]
        rows.append((hook, '%.2f (%s)' % (statistics.median(a), _all(a)),
                     '%.2f (%s)' % (statistics.median(b), _all(b)),
                     '%.2fx' % (statistics.median(b) / statistics.median(a))))
    return lifecycle.rst_rows(rows)


def _all(values):
    return ' '.join('%.1f' % v for v in values)


if __name__ == '__main__':
    sys.exit(main())
