"""Named node pools (``node_pools``): validation, a node's settings, the
``pool`` of node entries, the rendered inventory and scale overrides."""

import copy

import pytest

from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.model import labels
from mgmt_driver.model import merging
from mgmt_driver.model import nodes
from mgmt_driver.model import params
from mgmt_driver.remote import inventory
from tests.unit import params_data

P = core.ROOT
DPDK = {'aspect_id': 'dpdk_instance', 'ssh_cp_name': 'dpdk_FloatingIP',
        'nic_cp_name': 'dpdk_CP2',
        'labels': {'example.com/pool': 'dpdk', 'example.com/nic': 'x710'},
        'taints': ['example.com/dedicated=dpdk:NoSchedule']}
ZONE = {'nodes': ['master-10-10-0-11', '10.10.0.22'],
        'labels': {'topology.kubernetes.io/zone': 'a'}}


def _request(pools, heat=True, **sections):
    request = params_data.tacker_sample() if heat else params_data.minimal()
    request[P]['node_pools'] = pools
    for name, values in sections.items():
        request[P].setdefault(name, {}).update(values)
    return request


def _spec(pools, heat=True, **sections):
    return params.parse_params(_request(pools, heat, **sections),
                               need_cp_names=heat)


def _problems(pools, heat=True, **sections):
    with pytest.raises((exceptions.ParamsInvalid,
                        exceptions.ParamsNotFound)) as info:
        _spec(pools, heat, **sections)
    return info.value.problems


# ------------------------------------------------------------- parameters

def test_pools_are_parsed():
    spec = _spec({'dpdk': DPDK, 'zone-a': ZONE})
    dpdk, zone = spec.node_pools
    assert dpdk == core.NodePoolSpec(
        name='dpdk', aspect_id='dpdk_instance',
        ssh_cp_name='dpdk_FloatingIP', nic_cp_name='dpdk_CP2',
        labels=(('example.com/nic', 'x710'), ('example.com/pool', 'dpdk')),
        taints=('example.com/dedicated=dpdk:NoSchedule',))
    assert not dpdk.listed and zone.listed
    assert zone.nodes == ('master-10-10-0-11', '10.10.0.22')
    assert spec.pool('zone-a') is zone and spec.pool('other') is None
    assert core.describe(spec).endswith(', 2 node pool(s)')


def test_no_pools_is_the_default():
    spec = params.parse_params(params_data.tacker_sample())
    assert spec.node_pools == ()
    assert 'pool' not in core.describe(spec)


def test_listed_addresses_are_normalised_and_repeats_dropped():
    spec = _spec({'v6': {'nodes': ['FD00::0:21', 'fd00::21',
                                   '10.10.0.21']}})
    assert spec.pool('v6').nodes == ('fd00::21', '10.10.0.21')


@pytest.mark.parametrize('pools, expected', [
    ({'DPDK': {'nodes': ['worker-10-10-0-21']}},
     "node_pools.DPDK: is not a pool name: a DNS-1123 label"),
    ({'a' * 64: {'nodes': ['worker-10-10-0-21']}}, 'is not a pool name'),
    ({'dpdk': ['x']}, 'node_pools.dpdk: must be a mapping, not list'),
    ({'dpdk': {'aspect_id': 'g', 'ssh_cp_name': 'f', 'nodse': []}},
     "node_pools.dpdk.nodse: unknown key (did you mean 'nodes'?)"),
    ({'dpdk': dict(DPDK, nodes=['worker-10-10-0-21'])},
     'node_pools.dpdk.nodes: give aspect_id (VMs of the pool\'s own) or '
     'nodes (nodes by name or address), not both'),
    ({'dpdk': {'labels': {'a': 'b'}}},
     'node_pools.dpdk.aspect_id: missing: give aspect_id'),
    ({'dpdk': {'aspect_id': 'dpdk_instance'}},
     'node_pools.dpdk.ssh_cp_name: missing'),
    ({'zone': {'nodes': []}},
     'node_pools.zone.nodes: must name 1 to 1000 nodes, not 0'),
    ({'zone': {'nodes': 'worker-10-10-0-21'}},
     'node_pools.zone.nodes: must be a list, not str'),
    ({'zone': {'nodes': ['worker-10-10-0-21', 'lb-10-10-0-40']}},
     "node_pools.zone.nodes[1]: 'lb-10-10-0-40' is neither a node name "
     "(master-..., worker-...) nor a cluster address"),
    ({'zone': {'nodes': [21]}}, 'node_pools.zone.nodes[0]: 21 is neither'),
    ({'zone': {'nodes': ['fe80::1%eth0']}}, 'node_pools.zone.nodes[0]:'),
    ({'zone': {'nodes': ['10.10.0.21'], 'ssh_cp_name': 'x'}},
     'node_pools.zone.ssh_cp_name: only for a pool with aspect_id'),
    ({'zone': dict(ZONE, labels={'kubernetes.io/role': 'x'})},
     'node_pools.zone.labels.kubernetes.io/role: the kubelet may not set'),
    ({'zone': dict(ZONE, labels={'a': 1})},
     'node_pools.zone.labels.a: keys and values must be strings'),
    ({'zone': dict(ZONE, taints=['a=b'])},
     "node_pools.zone.taints[0]: 'a=b': the effect after \":\" must be"),
    ({'zone': dict(ZONE, taints='a=b:NoSchedule')},
     'node_pools.zone.taints: must be a list, not str'),
    ({'a': {'nodes': ['worker-10-10-0-21']},
      'b': {'nodes': ['10.10.0.22', 'worker-10-10-0-21']}},
     "node_pools.b.nodes: 'worker-10-10-0-21' is also in "
     "k8s_cluster_installation_param.node_pools.a.nodes"),
    ({'a': {'nodes': ['fd00::21']}, 'b': {'nodes': ['FD00:0::21']}},
     "node_pools.b.nodes: 'fd00::21' is also in"),
    ({'dpdk': dict(DPDK, aspect_id='worker_instance')},
     "node_pools.dpdk.aspect_id: 'worker_instance' is also in "
     "k8s_cluster_installation_param.worker_node.aspect_id"),
    ({'dpdk': dict(DPDK, aspect_id='master_instance')},
     'is also in k8s_cluster_installation_param.master_node.aspect_id'),
    ({'dpdk': DPDK, 'sriov': dict(DPDK, ssh_cp_name='sriov_FIP')},
     "node_pools.sriov.aspect_id: 'dpdk_instance' is also in "
     "k8s_cluster_installation_param.node_pools.dpdk.aspect_id"),
    ({'dpdk': dict(DPDK, ssh_cp_name='workerNode_FloatingIP')},
     "node_pools.dpdk.ssh_cp_name: 'workerNode_FloatingIP' is also in "
     "k8s_cluster_installation_param.worker_node.ssh_cp_name"),
    ({'x%d' % i: {'nodes': ['10.10.1.%d' % i]} for i in range(65)},
     'node_pools: 65 pools: at most 64'),
])
def test_bad_pools_name_the_field(pools, expected):
    problems = _problems(pools)
    assert len(problems) == 1, problems
    assert problems[0].startswith(P + '.node_pools')
    assert expected in problems[0]


def test_an_aspect_pool_of_lb_aspect_is_refused():
    problems = _problems({'dpdk': dict(DPDK, aspect_id='lb_instance')},
                         external_lb_param={
                             'vip': '10.10.0.100', 'vrrp_router_id': 7,
                             'vrrp_password': 'pw', 'aspect_id':
                             'lb_instance'})
    assert problems == [
        P + ".node_pools.dpdk.aspect_id: 'lb_instance' is also in " + P +
        '.external_lb_param.aspect_id; a VM belongs to one pool or role']


def test_node_pools_must_be_a_mapping():
    assert _problems(['dpdk']) == [
        P + '.node_pools: must be a mapping, not list']


def test_without_heat_a_pool_may_have_neither_aspect_nor_nodes():
    spec = _spec({'dpdk': {'labels': {'a': 'b'}}}, heat=False)
    assert spec.pool('dpdk') == core.NodePoolSpec(
        name='dpdk', labels=(('a', 'b'),))


# ------------------------------------------------------ a node's settings

def _node(role, address, pool=None):
    return nodes.Node.from_address(core.NodeAddress(
        role, address, address, pool=pool), 22)


def test_a_pool_lays_its_labels_and_taints_over_the_role():
    spec = _spec({'dpdk': DPDK}, worker_node={
        'labels': {'example.com/pool': 'general', 'tier': 'w'},
        'taints': ['example.com/dedicated=general:NoSchedule',
                   'gpu:PreferNoSchedule',
                   'example.com/dedicated=x:NoExecute']})
    settings = spec.node_settings(_node('worker', '10.10.0.31', 'dpdk'))
    assert settings.label_map == {'example.com/pool': 'dpdk',
                                  'example.com/nic': 'x710', 'tier': 'w'}
    # Same key and effect: the pool's takes the role's place; the same
    # key with another effect stays.
    assert settings.taints == ('example.com/dedicated=dpdk:NoSchedule',
                               'gpu:PreferNoSchedule',
                               'example.com/dedicated=x:NoExecute')
    plain = spec.node_settings(_node('worker', '10.10.0.32'))
    assert plain == spec.worker.settings


def test_overlaid_appends_new_taints_once():
    base = core.NodeSettings((('a', '1'),), ('k:NoSchedule',))
    top = core.NodeSettings((('b', '2'),), ('k=v:NoSchedule',
                                            'other:NoExecute'))
    assert base.overlaid(top) == core.NodeSettings(
        (('a', '1'), ('b', '2')), ('k=v:NoSchedule', 'other:NoExecute'))


def test_listed_pools_match_name_or_address_masters_too():
    spec = _spec({'zone-a': ZONE}, master_node={'labels': {'m': 'y'}})
    master = spec.node_settings(_node('master', '10.10.0.11'))
    assert master.label_map == {'m': 'y', 'topology.kubernetes.io/zone': 'a'}
    worker = spec.node_settings(_node('worker', '10.10.0.22'))
    assert worker.label_map == {'topology.kubernetes.io/zone': 'a'}
    assert spec.node_settings(_node('worker', '10.10.0.21')).labels == ()
    assert spec.node_settings(_node('external_lb', '10.10.0.22')) == \
        core.NodeSettings()


def test_a_node_in_two_pools_is_refused_where_the_set_is_built():
    spec = _spec({'dpdk': DPDK, 'zone': {'nodes': ['10.10.0.21']},
                  'other': {'nodes': ['worker-10-10-0-22']}})
    entries = [core.NodeAddress('master', '10.10.0.11', '10.10.0.11'),
               core.NodeAddress('worker', '10.10.0.21', '10.10.0.21',
                                pool='dpdk'),
               core.NodeAddress('worker', '10.10.0.22', '10.10.0.22'),
               core.NodeAddress('external_lb', '10.10.0.40', '10.10.0.40')]
    with pytest.raises(exceptions.ParamsInvalid) as info:
        nodes.build_nodes(spec, entries)
    assert info.value.problems == [
        P + '.node_pools: node worker-10-10-0-21 (10.10.0.21) is in ' +
        P + '.node_pools.dpdk.aspect_id and in ' + P +
        '.node_pools.zone.nodes; a node belongs to one pool']
    with pytest.raises(exceptions.ParamsInvalid):
        spec.node_settings(nodes.Node.from_address(entries[1], 22))


def test_a_node_listed_by_name_and_by_address_is_refused():
    spec = _spec({'a': {'nodes': ['worker-10-10-0-21']},
                  'b': {'nodes': ['10.10.0.21']}})
    with pytest.raises(exceptions.ParamsInvalid,
                       match='node_pools.a.nodes and in .*node_pools.b.nodes'):
        nodes.build_nodes(spec, [
            core.NodeAddress('master', '10.10.0.11', '10.10.0.11'),
            core.NodeAddress('worker', '10.10.0.21', '10.10.0.21'),
            core.NodeAddress('external_lb', '10.10.0.40', '10.10.0.40')])


# ----------------------------------------------- entries naming a pool

def _explicit(pools, entries):
    request = _request(pools, heat=False)
    request[P]['nodes'] = [
        {'role': 'master', 'ssh_ip': '10.10.0.11'},
        {'role': 'external_lb', 'ssh_ip': '10.10.0.40'}] + entries
    return request


def test_explicit_node_entries_name_their_pool():
    request = _explicit({'dpdk': {'labels': {'p': 'dpdk'}}, 'zone': ZONE}, [
        {'role': 'worker', 'ssh_ip': '10.10.0.21', 'pool': 'dpdk'},
        {'role': 'worker', 'ssh_ip': '10.10.0.22'}])
    spec = params.parse_params(request, need_cp_names=False)
    assert spec.nodes[2].pool == 'dpdk' and spec.nodes[3].pool is None
    cluster = nodes.nodes_from_spec(spec)
    assert [n.pool for n in cluster.workers] == ['dpdk', None]
    hosts = inventory.render_hosts(spec, cluster)['all']['hosts']
    assert hosts['worker-10-10-0-21']['node_labels'] == {'p': 'dpdk'}
    assert hosts['worker-10-10-0-22']['node_labels'] == {
        'topology.kubernetes.io/zone': 'a'}
    assert hosts['master-10-10-0-11']['node_labels'] == {
        'topology.kubernetes.io/zone': 'a'}


@pytest.mark.parametrize('entry, expected', [
    ({'role': 'worker', 'ssh_ip': '10.10.0.21', 'pool': 'nope'},
     "nodes[2].pool: 'nope' is not in " + P + '.node_pools'),
    ({'role': 'worker', 'ssh_ip': '10.10.0.21', 'pool': 'zone'},
     'nodes[2].pool: ' + P + '.node_pools.zone lists its nodes; an entry '
     'may name only a pool without a nodes list'),
    ({'role': 'master', 'ssh_ip': '10.10.0.12', 'pool': 'dpdk'},
     'nodes[2].pool: only a worker entry may name a pool'),
    ({'role': 'worker', 'ssh_ip': '10.10.0.21', 'pool': 7},
     'nodes[2].pool: must be a string, not int'),
])
def test_bad_pool_of_an_entry_is_named(entry, expected):
    request = _explicit({'dpdk': {}, 'zone': ZONE}, [entry])
    if entry['role'] == 'master':
        request[P]['nodes'].append({'role': 'master', 'ssh_ip': '10.10.0.13'})
    with pytest.raises(exceptions.ParamsInvalid) as info:
        params.parse_params(request, need_cp_names=False)
    [problem] = info.value.problems
    assert problem.startswith(P + '.' + expected)


TOPOLOGY = {'masters': [{'ssh_ip': '10.10.0.11'}],
            'workers': [{'ssh_ip': '10.10.0.21', 'pool': 'dpdk'},
                        {'ssh_ip': '10.10.0.22'}],
            'external_lb': {'ssh_ip': '10.10.0.40'}}


def test_topology_workers_name_their_pool():
    spec = _spec({'dpdk': DPDK}, heat=False)
    cluster = nodes.build_nodes(spec, nodes.load_topology(TOPOLOGY),
                                path='topology')
    hosts = inventory.render_hosts(spec, cluster)['all']['hosts']
    assert hosts['worker-10-10-0-21']['node_labels'] == dict(DPDK['labels'])
    assert hosts['worker-10-10-0-21']['node_taints'] == DPDK['taints']
    assert 'node_labels' not in hosts['worker-10-10-0-22']


def test_topology_pool_must_exist_and_be_a_worker_s():
    topology = copy.deepcopy(TOPOLOGY)
    topology['masters'][0]['pool'] = 'dpdk'
    topology['workers'][0]['pool'] = 'gpu'
    spec = _spec({'dpdk': DPDK}, heat=False)
    with pytest.raises(exceptions.ParamsInvalid) as info:
        nodes.build_nodes(spec, nodes.load_topology(topology),
                          path='topology')
    assert info.value.problems == [
        'topology.masters[0].pool: only a worker entry may name a pool '
        "(name other nodes in a pool's nodes list)",
        "topology.workers[0].pool: 'gpu' is not in " + P + '.node_pools']


# ------------------------------------------------------------- overrides

def test_a_scale_request_changes_one_pool_s_labels_and_taints():
    base = _request({'dpdk': DPDK, 'zone': ZONE})
    before = copy.deepcopy(base)
    spec = merging.parse_for_operation(base, {P: {'node_pools': {'dpdk': {
        'labels': {'example.com/pool': 'dpdk2'},
        'taints': ['example.com/dedicated=dpdk2:NoSchedule']}}}})
    dpdk = spec.pool('dpdk')
    assert dict(dpdk.labels) == {'example.com/pool': 'dpdk2'}
    assert dpdk.taints == ('example.com/dedicated=dpdk2:NoSchedule',)
    assert dpdk.aspect_id == 'dpdk_instance'  # kept
    assert spec.pool('zone') == params.parse_params(base).pool('zone')
    assert base == before


def test_pool_overrides_other_than_labels_and_taints_are_refused():
    base = _request({'dpdk': DPDK})
    operation = {P: {'node_pools': {
        'dpdk': {'aspect_id': 'other', 'labels': {'a': 'b'}},
        'gpu': {'labels': {'a': 'b'}}, 'zone': 'x'}}}
    with pytest.raises(exceptions.ParamsInvalid) as info:
        merging.parse_for_operation(base, operation, operation_name='heal')
    assert info.value.problems == [
        P + '.node_pools.dpdk.aspect_id: cannot be changed by a heal '
        'request (only labels, taints)',
        P + '.node_pools.gpu: is not a pool of the instantiation; a heal '
        'request may only change the labels and taints of one',
        P + '.node_pools.zone: is not a pool of the instantiation; a heal '
        'request may only change the labels and taints of one']


def test_pool_overrides_are_validated_after_merging():
    with pytest.raises(exceptions.ParamsInvalid) as info:
        merging.parse_for_operation(_request({'dpdk': DPDK}), {P: {
            'node_pools': {'dpdk': {'taints': ['a=b:Never']}}}})
    assert info.value.problems[0].startswith(
        P + ".node_pools.dpdk.taints[0]: 'a=b:Never'")


def test_pool_overrides_must_be_mappings():
    with pytest.raises(exceptions.ParamsInvalid) as info:
        merging.parse_for_operation(_request({'dpdk': DPDK}), {P: {
            'node_pools': {'dpdk': ['labels']}}})
    assert info.value.problems == [
        P + '.node_pools.dpdk: must be a mapping, not list']


# ---------------------------------------------------------------- sample

def test_the_sample_has_an_aspect_pool_and_a_listed_pool():
    spec = params.parse_params(params_data.sample(
        'instantiate_node_pools.json'))
    dpdk, zone = spec.node_pools
    assert dpdk.aspect_id == 'dpdk_worker_instance' and not dpdk.listed
    assert zone.nodes == ('master-10-10-0-11', '10.10.0.21')


def test_a_relabel_names_the_nodes_of_pools():
    spec = _spec({'dpdk': DPDK, 'zone': ZONE, 'empty': {'nodes': [
        'worker-10-10-0-99']}})
    cluster = nodes.build_nodes(spec, [
        core.NodeAddress('master', '10.10.0.11', '10.10.0.11'),
        core.NodeAddress('worker', '10.10.0.21', '10.10.0.21', pool='dpdk'),
        core.NodeAddress('worker', '10.10.0.22', '10.10.0.22'),
        core.NodeAddress('worker', '10.10.0.23', '10.10.0.23'),
        core.NodeAddress('external_lb', '10.10.0.40', '10.10.0.40')])
    assert labels.pool_members(spec, cluster, ['zone', 'dpdk'], 'f') == [
        'master-10-10-0-11', 'worker-10-10-0-21', 'worker-10-10-0-22']
    assert labels.pool_members(spec, cluster, ['empty'], 'f') == []
    assert labels.pool_members(spec, cluster, [], 'f') == []
    with pytest.raises(exceptions.ParamsInvalid) as info:
        labels.pool_members(spec, cluster, ['dpdk', 'gpu', 'x'], '--pools')
    assert info.value.problems == [
        '--pools: gpu, x not in %s.node_pools (dpdk, zone, empty)' % P]
