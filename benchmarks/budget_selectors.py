"""What matching pods against PodDisruptionBudget selectors costs.

Issue 39 item 4.  The upgrade preflight
(``gates.drain_blockers``) and a drain refused by a budget
(``kubectl.blocking_budgets``) match the cluster's pods (remote data)
against every budget's selector (remote data too).  Two shapes, timed
in this process (conductor CPU; no host is contacted):

* **long In list**: ``--pods`` pods against one budget whose ``In``
  list holds ``--values`` values, none of them the pods' (the issue's
  case: 30,000 pods, 1,000,000 values);
* **many budgets**: ``--pods`` pods and as many budgets of one
  namespace, each selecting one pod by a label.

A benchmark, not a test: it asserts nothing.  For the "before" figures,
run it in a checkout of the previous code (``PYTHONPATH`` at it)::

    python benchmarks/budget_selectors.py --pods 30000 --values 1000000
"""

import argparse
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from mgmt_driver.operations import gates  # noqa: E402
from mgmt_driver.remote import kubectl  # noqa: E402

#: Where CI runs ``--quick`` (tests/unit/test_benchmarks_quick.py).
QUICK_LANE = 'unit'


def long_in_list(pods, values):
    """*pods* pods against one budget of *values* ``In`` values."""
    selector = {'matchExpressions': [{
        'key': 'app', 'operator': 'In',
        'values': ['v%d' % i for i in range(values)]}]}
    return ([kubectl.PodInfo('ns', 'p%d' % i, 'w1', {'app': 'x%d' % i},
                             False) for i in range(pods)],
            [kubectl.Budget('ns', 'b', selector, 0, 1, 1)])


def many_budgets(pods, _values):
    """*pods* pods and as many budgets, each selecting one."""
    return ([kubectl.PodInfo('ns', 'p%d' % i, 'w1', {'app': 'a%d' % i},
                             False) for i in range(pods)],
            [kubectl.Budget('ns', 'b%d' % i, {'matchLabels': {
                'app': 'a%d' % i}}, 0, 1, 1) for i in range(pods)])


def _cpu(func, *args):
    start = time.process_time()
    func(*args)
    return time.process_time() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--pods', type=int, default=30000)
    parser.add_argument('--values', type=int, default=1000000)
    parser.add_argument('--quick', action='store_true',
                        help='seconds, tiny sizes: what CI runs (no '
                             'figure is checked)')
    args = parser.parse_args()
    if args.quick:
        args.pods, args.values = 200, 2000
    cases = {'in-list': long_in_list, 'budgets': many_budgets}
    for name, make in cases.items():
        pods, budgets = make(args.pods, args.values)
        listed = [(p.namespace, p.labels, p.evacuated) for p in pods]
        shape = '%d values' % args.values if name == 'in-list' else \
            'one label each'
        print('%-8s %6d pods, %6d budget(s), %s: drain_blockers %.2f s '
              'CPU, blocking_budgets %.2f s CPU' % (
                  name, len(pods), len(budgets), shape,
                  _cpu(gates.drain_blockers, pods, budgets, ['w1']),
                  _cpu(kubectl.blocking_budgets, listed, budgets)))


if __name__ == '__main__':
    main()
