"""Issue 27 item 2: the records stay linear in the node count.

As :mod:`tests.unit.test_complexity`: 8 times the hosts must cost
linearly more work (counted, not timed), not quadratically more. Every
hook records the cluster's hosts again into a record that already lists
them, and a 1 MiB request can name about 22,000 nodes.
"""

import tempfile

import pytest

from mgmt_driver.state import records
from tests.unit import work


@pytest.fixture
def directory():
    with tempfile.TemporaryDirectory() as path:
        yield path


def _hosts(count, role='worker'):
    return [records.Host('10.%d.%d.%d' % (i >> 16, (i >> 8) & 255, i & 255),
                         22, role) for i in range(count)]


def test_adding_recorded_hosts_again_is_linear(directory):
    stores = {}

    def make(count):
        store = records.RecordStore('%s/%d' % (directory, count))
        hosts = _hosts(count)
        store.add_hosts('i-1', hosts)
        stores[id(hosts)] = store
        return hosts

    def add_again(hosts):
        stores[id(hosts)].add_hosts('i-1', hosts)
    assert work.growth(add_again, make, 500) < work.MAX_GROWTH

