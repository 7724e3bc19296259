"""What ``RecordStore.add_hosts`` costs when a hook re-adds every node.

Every hook records the cluster's hosts again (``ClusterDriver._remember``)
into a record that already lists them: this times that second call for
each node count given (default 2,750 and 22,000, about the most a 1 MiB
request can name).  Run from the repository root::

    PYTHONPATH=. python benchmarks/record_hosts.py [COUNT ...]

``--quick`` (what CI runs): 100 hosts.
"""

import sys
import tempfile
import time

from mgmt_driver.state import records

#: Where CI runs ``--quick`` (tests/unit/test_benchmarks_quick.py).
QUICK_LANE = 'unit'


def _hosts(count):
    return [records.Host('10.%d.%d.%d' % (i >> 16, (i >> 8) & 255, i & 255),
                         22, 'worker') for i in range(count)]


def measure(count):
    """Seconds of ``add_hosts`` of *count* hosts already recorded."""
    hosts = _hosts(count)
    with tempfile.TemporaryDirectory() as directory:
        store = records.RecordStore(directory)
        store.add_hosts('i-1', hosts)
        start = time.perf_counter()
        store.add_hosts('i-1', hosts)
        return time.perf_counter() - start


def main(argv):
    counts = [100] if argv == ['--quick'] else [int(a) for a in argv]
    for count in counts or [2750, 22000]:
        print('%6d hosts: add_hosts again in %.2f s' % (count,
                                                        measure(count)))


if __name__ == '__main__':
    main(sys.argv[1:])
