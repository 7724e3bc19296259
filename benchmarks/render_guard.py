"""What validating keys and the render-time guard cost on large requests.

Builds requests whose extra vars hold ``--entries`` nested mappings (each
with a key, a list, a string holding "{" and a number; about 60 bytes of
request each, so 16,000 entries are near the 1 MiB request limit), then
times ``params.parse_params`` (which walks every key),
``inventory.render_files`` (which, since issue 27, reads every document
back and checks it) and that check alone on the largest document, best of
``--runs``.  Run it on the code before the fix too (the check is then
reported as 0).  No network; asserts nothing.

    python benchmarks/render_guard.py --entries 2000 16000
"""

import argparse
import functools
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from mgmt_driver.model import core
from mgmt_driver.model import nodes  # noqa: E402
from mgmt_driver.model import params  # noqa: E402
from mgmt_driver.remote import inventory  # noqa: E402
from tests.unit import params_data  # noqa: E402

#: Where CI runs ``--quick`` (tests/unit/test_benchmarks_quick.py).
QUICK_LANE = 'unit'


def _request(entries):
    request = params_data.minimal()
    request[core.ROOT]['kubespray'] = {'extra_vars': {'custom': {
        'k%06d' % i: {'list': [i, 'x'], 'text': '{{ v%d }}' % i}
        for i in range(entries)}}}
    return request


def _best(func, runs):
    best = None
    for _ in range(runs):
        start = time.perf_counter()
        func()
        elapsed = time.perf_counter() - start
        best = elapsed if best is None else min(best, elapsed)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--entries', type=int, nargs='+',
                        default=[2000, 16000])
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--quick', action='store_true',
                        help='seconds, tiny sizes: what CI runs (no '
                             'figure is checked)')
    args = parser.parse_args()
    if args.quick:
        args.entries, args.runs = [50], 1
    for entries in args.entries:
        request = _request(entries)
        spec = params.parse_params(request, need_cp_names=False)
        cluster = nodes.build_nodes(spec, [
            core.NodeAddress('master', '10.0.0.1', '10.0.0.1'),
            core.NodeAddress('worker', '10.0.0.2', '10.0.0.2'),
            core.NodeAddress('external_lb', '10.0.0.3', '10.0.0.3')])
        parse = _best(functools.partial(params.parse_params, request,
                                        need_cp_names=False), args.runs)
        render = _best(functools.partial(inventory.render_files, spec,
                                         cluster), args.runs)
        text = inventory.render_files(spec, cluster)[
            inventory.CLUSTER_VARS_FILE].content
        guard = _best(functools.partial(inventory.check_inert, 'c', text),
                      args.runs) if hasattr(inventory, 'check_inert') else 0
        print('%6d entries: parse_params %.3f s, render_files %.3f s, of '
              'which check_inert of cluster-vars.yaml (%d bytes) %.3f s' % (
                  entries, parse, render, len(text), guard))


if __name__ == '__main__':
    main()
