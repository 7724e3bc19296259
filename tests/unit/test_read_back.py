"""Every record the driver writes and reads back in a later hook
(``hosts.yaml`` and the labels record) is read back by the bounded
reader, at the largest cluster and the densest content the driver
writes (issue 40 item 5): the reader's entry budget must not refuse the
driver's own records, or a large cluster is locked out of every later
hook."""

import string

from mgmt_driver.common import safeyaml
from mgmt_driver.common import untrusted
from mgmt_driver.model import labels
from mgmt_driver.model import nodes
from mgmt_driver.model import params
from mgmt_driver.remote import inventory
from tests.unit import params_data

#: No validation bounds the workers of a request (node pools aside);
#: the records' length is (``safeyaml.MAX_CHARS``, checked before
#: writing): 5,000 workers with two labels each write 1.5 MB.
LARGEST = 5000
#: The densest labels: every one-character name, each with a
#: one-character value (``a: b``, 2 nodes in 11 to 13 characters).
DENSE_LABELS = {c: 'v' for c in string.ascii_letters + string.digits}


def _rendered(workers, worker_labels):
    """``(hosts.yaml, labels record, worker names)`` of a request of
    one master, an external LB and *workers* workers."""
    request = params_data.with_workers(workers, worker_labels)
    spec = params.parse_params(request, need_cp_names=False,
                               max_size=64 * 1024 * 1024)
    cluster = nodes.nodes_from_spec(spec)
    record = labels.render_record(
        {n.name: spec.node_settings(n) for n in cluster.k8s_nodes})
    hosts = inventory.render_files(spec, cluster)[inventory.HOSTS_FILE]
    return hosts.content, record, [n.name for n in cluster.workers]


def _check_read_back(workers, worker_labels):
    hosts_yaml, record, names = _rendered(workers, worker_labels)
    assert len(hosts_yaml) <= safeyaml.MAX_CHARS
    assert len(record) <= safeyaml.MAX_CHARS
    recorded = inventory.parse_recorded(hosts_yaml, '10.0.0.1', 'hosts.yaml')
    assert {host[0] for host in recorded.hosts} >= set(names)
    settings = labels.parse_record(record)
    assert {name: settings[name].label_map for name in names} == \
        {name: worker_labels for name in names}
    return hosts_yaml, record


def test_the_largest_request_is_read_back():
    _check_read_back(LARGEST, {'example.com/tier': 'bench',
                               'example.com/zone': 'z1'})


def test_the_densest_records_are_read_back():
    # Near the byte cap: the most nodes a record may hold.
    hosts_yaml, record = _check_read_back(1900, DENSE_LABELS)
    assert len(hosts_yaml) > safeyaml.MAX_CHARS * 0.9
    # Denser than the reader's default budget allows.
    assert untrusted.entry_budget(record) < len(record) // 6
