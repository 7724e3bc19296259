"""What hostile tenant-sized and remote-sized lists cost the conductor.

Issue 27 item 2.  Two cases, timed in this process (conductor CPU; no
host is contacted: the dry-run pool of ``mgmt_driver.remote.plan`` answers the
kubectl commands as a cluster that has every node):

* **relabel PATCH**: one ``relabel_taints`` metadata value of
  ``--size`` bytes (the most a value may hold, 64 KiB) on ``--workers``
  workers, through what ``modify_information_end`` runs:
  ``labels.relabel_from_metadata`` (the checks), then
  ``day2.relabel`` (the record, the inventory, the kubectl
  commands).  Two shapes: every taint a new key (``set``), and a taint
  then the removal of another, alternately (``set+remove``).
* **status differences**: ``status.differences`` over ``--workers``
  nodes, each with the ``--size`` bytes of taints recorded and the same
  taints, in the other order, read from kubectl (remote data both).

A benchmark, not a test: it asserts nothing.  For the "before" figures,
run it in a checkout of the previous code (``PYTHONPATH`` at it)::

    python benchmarks/tenant_sized_input.py --workers 50 --size 65536
"""

import argparse
import ipaddress
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from oslo_config import cfg  # noqa: E402

from mgmt_driver.adapters import status  # noqa: E402
from mgmt_driver.common import conf as kconf  # noqa: E402
from mgmt_driver.model import core
from mgmt_driver.model import labels  # noqa: E402
from mgmt_driver.model import nodes  # noqa: E402
from mgmt_driver.model import params  # noqa: E402
from mgmt_driver.operations import day2  # noqa: E402
from mgmt_driver.remote import inventory  # noqa: E402
from mgmt_driver.remote import plan  # noqa: E402
from mgmt_driver.session import driver  # noqa: E402
from mgmt_driver.state import records  # noqa: E402

#: Where CI runs ``--quick`` (tests/unit/test_benchmarks_quick.py).
QUICK_LANE = 'unit'

_EFFECTS = ('NoSchedule', 'PreferNoSchedule', 'NoExecute')


def taint_text(size, shape):
    """Comma-separated taints of at most *size* characters."""
    entries, used, i = [], 0, 0
    while True:
        key = 'example.com/k%d' % i
        if shape == 'set+remove' and i % 2:
            entry = '%s:%s-' % ('example.com/k%d' % (i - 1), _EFFECTS[i % 3])
        else:
            entry = '%s=v:%s' % (key, _EFFECTS[i % 3])
        if used + len(entry) + 1 > size:
            return ','.join(entries)
        entries.append(entry)
        used += len(entry) + 1
        i += 1


def _request(workers):
    base = int(ipaddress.ip_address('10.20.0.10'))
    ips = [str(ipaddress.ip_address(base + i)) for i in range(workers)]
    return {core.ROOT: {
        'master_node': {'username': 'u', 'password': 'p'},
        'worker_node': {'username': 'u', 'password': 'p'},
        'ansible': {'ip_address': '10.20.1.1', 'username': 'u',
                    'password': 'p', 'kubespray_root_path': '/k',
                    'transferring_inventory_path': '/k/inventory/x'},
        'external_lb_param': {'ssh_username': 'u', 'ssh_password': 'p'},
        'nodes': [{'role': 'master', 'ssh_ip': '10.20.2.1'},
                  {'role': 'external_lb', 'ssh_ip': '10.20.3.1'}] + [
            {'role': 'worker', 'ssh_ip': ip} for ip in ips]}}


def _conf():
    conf = cfg.ConfigOpts()
    kconf.register_opts(conf)
    conf([])
    conf.set_override('kubectl_sudo', 'never', group='kubespray_mgmt')
    return conf


def relabel_patch(workers, size, shape, records_dir):
    """Seconds of one relabel PATCH; the number of taints in it."""
    spec = params.parse_params(_request(workers), need_cp_names=False)
    cluster = nodes.nodes_from_spec(spec)
    text = taint_text(size, shape)
    metadata = {labels.METADATA_NODES: ','.join(
        n.name for n in cluster.workers), labels.METADATA_TAINTS: text}
    start = time.process_time()
    relabel = labels.relabel_from_metadata(metadata, 'vnf_metadata')
    drv = driver.ClusterDriver(
        spec, 'bench', plan.PlanPool(), conf=_conf(),
        records=plan.PlanRecords(records.RecordStore(records_dir)))
    day2.relabel(drv, cluster, list(relabel.nodes), relabel.labels,
                 relabel.taints)
    return time.process_time() - start, len(relabel.taints)


def status_differences(workers, size):
    """Seconds of ``status.differences``; the taints per node."""
    taints = taint_text(size, 'set').split(',')
    names = ['worker-%d' % i for i in range(workers)]
    recorded = inventory.RecordedInventory(
        masters=(), hosts=tuple((n, None, None) for n in names))
    settings = {n: core.NodeSettings((), tuple(taints)) for n in names}
    live = [{'name': n, 'ready': 'True', 'labels': {},
             'taints': taints[::-1]} for n in names]
    start = time.process_time()
    found = status.differences(recorded, live, settings=settings)
    assert not found, found  # same taints: no difference
    return time.process_time() - start, len(taints)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--workers', type=int, default=50)
    parser.add_argument('--size', type=int, default=labels.MAX_METADATA_TEXT)
    parser.add_argument('--records-dir', default='/tmp/bench-records')
    parser.add_argument('--case', choices=('all', 'relabel', 'status'),
                        default='all')
    parser.add_argument('--quick', action='store_true',
                        help='seconds, tiny sizes: what CI runs (no '
                             'figure is checked)')
    args = parser.parse_args()
    if args.quick:
        args.workers, args.size = 2, 1024
        with tempfile.TemporaryDirectory() as records_dir:
            args.records_dir = records_dir
            return run(args)
    pathlib.Path(args.records_dir).mkdir(parents=True, exist_ok=True)
    return run(args)


def run(args):
    """The cases *args* names (its records directory exists)."""
    if args.case in ('all', 'relabel'):
        for shape in ('set', 'set+remove'):
            seconds, count = relabel_patch(args.workers, args.size, shape,
                                           args.records_dir)
            print('relabel PATCH, %d workers, %d bytes (%d taints, %s): '
                  '%.2f s CPU' % (args.workers, args.size, count, shape,
                                  seconds), flush=True)
    if args.case in ('all', 'status'):
        seconds, count = status_differences(args.workers, args.size)
        print('status differences, %d nodes x %d taints recorded and '
              'live: %.2f s CPU' % (args.workers, count, seconds))


if __name__ == '__main__':
    main()
