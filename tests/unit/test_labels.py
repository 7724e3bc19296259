"""mgmt_driver.model.labels: day-2 label and taint changes, and their
record."""

import pytest

from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.model import labels
from mgmt_driver.model import merging

W1 = 'worker-10-10-0-21'
BASE = core.NodeSettings((('pool', 'a'), ('zone', 'x')),
                         ('gpu=yes:NoSchedule', 'gpu=yes:NoExecute',
                          'spot:PreferNoSchedule'))


def test_labels_are_set_over_and_removed():
    got = labels.apply_change(BASE, (('zone', 'y'), ('pool', None),
                                     ('rack', '7'), ('absent', None)))
    assert got.labels == (('rack', '7'), ('zone', 'y'))
    assert got.taints == BASE.taints


@pytest.mark.parametrize('change, taints', [
    # Same key and effect: replaced in place of the old one (at the end).
    (('gpu=no:NoSchedule',), ('gpu=yes:NoExecute', 'spot:PreferNoSchedule',
                              'gpu=no:NoSchedule')),
    (('gpu:NoExecute-',), ('gpu=yes:NoSchedule', 'spot:PreferNoSchedule')),
    (('gpu-',), ('spot:PreferNoSchedule',)),
    (('missing-', 'x:NoSchedule-'), BASE.taints),
    (('gpu-', 'gpu=z:NoExecute'), ('spot:PreferNoSchedule',
                                   'gpu=z:NoExecute')),
])
def test_taints_are_set_replaced_and_removed(change, taints):
    assert labels.apply_change(BASE, (), change).taints == taints


def test_only_what_would_change_the_node_is_sent():
    present = ('gpu=yes:NoSchedule', 'x:NoExecute')
    assert labels.taints_to_send(
        ('a=b:NoSchedule', 'gpu:NoSchedule-', 'gpu:NoExecute-', 'x-',
         'y-', 'x:NoExecute', 'x=1:NoExecute'), present) == [
        'a=b:NoSchedule', 'gpu:NoSchedule-', 'x-', 'x=1:NoExecute']
    assert labels.labels_to_send(
        (('a', '1'), ('b', '2'), ('c', None), ('d', None)),
        {'a': '1', 'b': '3', 'c': ''}) == [('b', '2'), ('c', None)]


def test_the_record_reads_back_what_was_written():
    settings = {W1: BASE, 'master-10-10-0-11': core.NodeSettings()}
    text = labels.render_record(settings)
    assert labels.parse_record(text) == settings
    assert labels.render_record(labels.parse_record(text)) == text
    assert labels.parse_record(None) == {}
    assert labels.parse_record('') == {}


@pytest.mark.parametrize('text, where', [
    ('[1, 2]\n', 'the one key "nodes"'),
    ('nodes: {}\nother: 1\n', 'the one key "nodes"'),
    ('nodes: {"Bad Name": {labels: {}, taints: []}}\n', 'not a node name'),
    ('nodes: {%s: {labels: {}}}\n' % W1, 'nodes.%s: must be' % W1),
    ('nodes: {%s: {labels: {a: "$(id)"}, taints: []}}\n' % W1,
     'nodes.%s.labels' % W1),
    ('nodes: {%s: {labels: {a: 1}, taints: []}}\n' % W1,
     'nodes.%s.labels' % W1),
    ('nodes: {%s: {labels: {}, taints: ["x;id:NoSchedule"]}}\n' % W1,
     'nodes.%s.taints' % W1),
    ('nodes: {%s: {labels: {}, taints: "a=b:NoSchedule"}}\n' % W1,
     'nodes.%s.taints' % W1),
    ('nodes: [unclosed\n', 'not valid YAML'),
])
def test_a_tampered_record_is_named_without_its_values(text, where):
    with pytest.raises(ValueError) as caught:
        labels.parse_record(text)
    assert where in str(caught.value)
    assert '$(id)' not in str(caught.value) and ';id' not in str(
        caught.value)


def test_a_record_larger_than_any_cluster_is_refused(monkeypatch):
    monkeypatch.setattr(labels, 'MAX_NODES', 2)
    text = labels.render_record({'worker-%d' % i: core.NodeSettings()
                                 for i in range(3)})
    with pytest.raises(ValueError, match='more than 2'):
        labels.parse_record(text)


@pytest.mark.parametrize('request_params, expected', [
    (None, False),
    ({}, False),
    ({core.ROOT: {'worker_node': {'username': 'u'}}}, False),
    ({core.ROOT: {'worker_node': {'labels': {'a': 'b'}}}}, True),
    ({core.ROOT: {'worker_node': {'taints': []}}}, True),
    ({core.ROOT: {'node_pools': {'dpdk': {'taints': []}}}}, True),
    ({core.ROOT: {'node_pools': {'dpdk': 'x'}}}, False),
    ({core.ROOT: 'x'}, False),
])
def test_which_requests_give_joining_nodes_new_settings(request_params,
                                                        expected):
    assert merging.sets_node_settings(request_params) is expected


def test_a_relabel_by_metadata_reads_like_the_options():
    assert labels.relabel_from_metadata({'kube_version': '1.34.3'},
                                        'vnf_metadata') is None
    got = labels.relabel_from_metadata({
        'relabel_nodes': '%s,,%s' % (W1, W1),
        'relabel_labels': 'pool=a,zone-',
        'relabel_taints': 'gpu-'}, 'vnf_metadata')
    assert got == labels.Relabel((W1,), (('pool', 'a'), ('zone', None)),
                                 ('gpu-',))
    assert labels.relabel_from_metadata(
        {'relabel_pools': 'dpdk,dpdk', 'relabel_taints': 'x-'},
        'metadata') == labels.Relabel(taints=('x-',), pools=('dpdk',))


@pytest.mark.parametrize('metadata, problems', [
    ({'relabel_labels': 'a=b'}, ['metadata.relabel_nodes, '
                                 'metadata.relabel_pools: missing']),
    ({'relabel_nodes': W1}, ['metadata.relabel_labels, '
                             'metadata.relabel_taints: missing']),
    ({'relabel_nodes': ['x'], 'relabel_taints': 1}, [
        'metadata.relabel_nodes: must be a string',
        'metadata.relabel_taints: must be a string']),
    ({'relabel_nodes': 'Bad;id,' + W1, 'relabel_labels': 'a=$(id)',
      'relabel_taints': 'x:Never', 'relabel_pools': 'dpdk,-x'}, [
        # Sorted by field, as every request's problems are.
        "metadata.relabel_labels: 'a=$(id)'",
        "metadata.relabel_nodes: 'Bad;id' is not a node name",
        "metadata.relabel_pools: '-x' is not a pool name",
        "metadata.relabel_taints: 'x:Never'"]),
])
def test_a_bad_relabel_by_metadata_names_every_field(metadata, problems):
    with pytest.raises(exceptions.ParamsInvalid) as caught:
        labels.relabel_from_metadata(metadata, 'metadata')
    got = caught.value.problems
    assert len(got) == len(problems), got
    assert all(g.startswith(p) for g, p in zip(got, problems, strict=True))


def test_a_relabel_by_metadata_is_bounded():
    huge = ','.join(['x;'] * 40000)
    with pytest.raises(exceptions.ParamsInvalid) as caught:
        labels.relabel_from_metadata({'relabel_nodes': huge,
                                      'relabel_labels': huge}, 'metadata')
    assert caught.value.problems == [
        'metadata.relabel_labels: longer than 65536 characters',
        'metadata.relabel_nodes: longer than 65536 characters']
