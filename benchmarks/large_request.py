"""What a request of many nodes costs the conductor to parse, render
and record, and to read its records back (issue 40 item 5).

Builds a request of one master, an external LB and ``--nodes`` workers
(labels on the workers), then times, best of ``--runs``:

* **parse**: ``params.parse_params`` of the request (as Tacker gives it);
* **render**: ``inventory.render_files`` (``hosts.yaml`` and a
  ``host_vars`` file per node, each checked by ``check_inert``) and
  ``labels.render_record``;
* **record**: ``RecordStore.add_hosts`` of every node into a fresh
  record (what the first hook does before any connection);
* **read back**: ``inventory.parse_recorded`` of that ``hosts.yaml`` and
  ``labels.parse_record`` of the labels record, which every later hook
  reads from the Ansible server.

Wall and CPU seconds (``time.process_time``) of each; on a machine
shared with other work the CPU figure is the one to compare.  No
network; asserts nothing.  ``--pure`` uses PyYAML's pure-Python
emitter and parser, as before issue 40, for comparison in one checkout::

    python benchmarks/large_request.py --nodes 5000
    python benchmarks/large_request.py --nodes 5000 --pure
"""

import argparse
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from mgmt_driver.common import safeyaml  # noqa: E402
from mgmt_driver.model import labels  # noqa: E402
from mgmt_driver.model import nodes  # noqa: E402
from mgmt_driver.model import params  # noqa: E402
from mgmt_driver.remote import inventory  # noqa: E402
from mgmt_driver.state import records  # noqa: E402
from tests.unit import params_data  # noqa: E402

#: Where CI runs ``--quick`` (tests/unit/test_benchmarks_quick.py).
QUICK_LANE = 'unit'


def request(workers):
    """A request naming *workers* workers (10.20.0.12 on)."""
    return params_data.with_workers(workers, {'example.com/tier': 'bench',
                                              'example.com/zone': 'z1'})


#: ``{step: best CPU seconds}`` of the last :func:`measure` (the wall
#: time of a shared machine is mostly other processes' turns).
CPU = {}


def _timed(func, runs, step=None):
    """``(best seconds, last result)`` of *runs* calls of *func*; the
    best CPU seconds go to :data:`CPU` [*step*]."""
    best, result = None, None
    for _ in range(runs):
        start, cpu = time.perf_counter(), time.process_time()
        result = func()
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu
        best = elapsed if best is None else min(best, elapsed)
        if step:
            CPU[step] = min(CPU.get(step, cpu), cpu)
    return best, result


def measure(count, runs):
    """``{step: seconds}`` for a request of *count* workers."""
    doc = request(count)
    seconds = {}
    seconds['parse'], spec = _timed(lambda: params.parse_params(
        doc, need_cp_names=False, max_size=64 * 1024 * 1024), runs, 'parse')
    cluster = nodes.nodes_from_spec(spec)
    settings = {n.name: spec.node_settings(n) for n in cluster.k8s_nodes}
    seconds['render'], (files, record) = _timed(lambda: (
        inventory.render_files(spec, cluster),
        labels.render_record(settings)), runs, 'render')
    hosts = [records.Host(n.ssh_address, n.ssh_port, n.role)
             for n in cluster.k8s_nodes]
    with tempfile.TemporaryDirectory() as directory:
        store = records.RecordStore(directory)
        seconds['record'], _ = _timed(lambda: store.add_hosts(
            'i-%d' % time.monotonic_ns(), hosts), runs, 'record')
    hosts_yaml = files[inventory.HOSTS_FILE].content
    seconds['read back'], _ = _timed(lambda: (
        inventory.parse_recorded(hosts_yaml, 'bench', 'hosts.yaml'),
        labels.parse_record(record)), runs, 'read back')
    return seconds, len(hosts_yaml), len(record)


def _pure():
    """PyYAML's pure-Python emitter and parser, as before issue 40."""
    if hasattr(inventory, '_CDumper'):
        inventory._CDumper = None
    if hasattr(safeyaml, 'LOADER'):
        safeyaml.LOADER = safeyaml._Loader


def _total(seconds):
    return seconds['parse'] + seconds['render'] + seconds['record']


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--nodes', type=int, nargs='+', default=[5000])
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--pure', action='store_true',
                        help="PyYAML's pure-Python emitter and parser")
    parser.add_argument('--quick', action='store_true',
                        help='seconds, tiny sizes: what CI runs (no '
                             'figure is checked)')
    args = parser.parse_args(argv)
    if args.quick:
        args.nodes, args.runs = [20], 1
    if args.pure:
        _pure()
    for count in args.nodes:
        CPU.clear()
        seconds, hosts_size, record_size = measure(count, args.runs)
        print('%5d workers (hosts.yaml %d bytes, labels record %d): %s; '
              'parse+render+record %.2f s (CPU %.2f s)' % (
                  count, hosts_size, record_size, ', '.join(
                      '%s %.2f s (CPU %.2f)' % (step, value, CPU[step])
                      for step, value in seconds.items()),
                  _total(seconds), _total(CPU)), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
