"""Node names, the Node model, node sets and topology files."""

import ipaddress
import pathlib
import re

import hypothesis
import pytest
import yaml
from hypothesis import strategies as st

from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.model import nodes
from mgmt_driver.model import params
from tests.unit import params_data

DNS_1123_LABEL = re.compile(r'^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$')


def _spec(**changes):
    request = params_data.minimal()
    for key, value in changes.items():
        section, field = key.split('__')
        request[core.ROOT][section][field] = value
    return params.parse_params(request, need_cp_names=False)


def _address(role, ssh_ip, nic_ip=None, port=None, source='t'):
    return core.NodeAddress(role, ssh_ip, nic_ip or ssh_ip, port, source)


# ------------------------------------------------------------------ names

@pytest.mark.parametrize('role,address,name', [
    ('master', '10.10.0.11', 'master-10-10-0-11'),
    ('worker', '10.10.0.21', 'worker-10-10-0-21'),
    ('external_lb', '10.10.0.30', 'lb-10-10-0-30'),
    ('worker', 'fd00::21', 'worker-fd00-0-0-0-0-0-0-21'),
    ('worker', 'FD00:0000:0:0::0021', 'worker-fd00-0-0-0-0-0-0-21'),
    ('master', '2001:db8:85a3::8a2e:370:7334',
     'master-2001-db8-85a3-0-0-8a2e-370-7334'),
    ('worker', '::ffff:10.0.0.1', 'worker-0-0-0-0-0-ffff-a00-1'),
])
def test_node_name(role, address, name):
    assert nodes.node_name(role, address) == name


def test_same_last_octet_in_two_subnets_gives_two_names():
    assert nodes.node_name('worker', '10.10.0.21') != \
        nodes.node_name('worker', '10.10.1.21')


@pytest.mark.parametrize('role,address', [('worker', 'not-an-ip'),
                                          ('gateway', '10.0.0.1')])
def test_node_name_refuses_bad_input(role, address):
    with pytest.raises((ValueError, KeyError)):
        nodes.node_name(role, address)


_ips = st.one_of(
    st.integers(0, 2 ** 32 - 1).map(ipaddress.IPv4Address),
    st.integers(0, 2 ** 128 - 1).map(ipaddress.IPv6Address))


@hypothesis.given(ip=_ips, role=st.sampled_from(core.ROLES))
def test_every_name_is_a_dns_1123_label(ip, role):
    name = nodes.node_name(role, str(ip))
    assert DNS_1123_LABEL.match(name), name
    # The exploded text names the same node as the compressed one.
    assert nodes.node_name(role, ip.exploded) == name


@hypothesis.given(a=_ips, b=_ips)
def test_different_addresses_never_share_a_name(a, b):
    hypothesis.assume(a != b)
    assert nodes.node_name('worker', str(a)) != nodes.node_name(
        'worker', str(b))


# ------------------------------------------------------------ Node model

def test_node_from_address_takes_role_port_unless_given():
    node = nodes.Node.from_address(
        _address('worker', '192.168.1.21', '10.10.0.21'), 2200)
    assert node == nodes.Node('worker', 'worker-10-10-0-21', '192.168.1.21',
                              '10.10.0.21', 2200)
    own_port = nodes.Node.from_address(
        _address('worker', '10.10.0.22', port=2222), 2200, resource_id='r1')
    assert own_port.ssh_port == 2222
    assert own_port.resource_id == 'r1'


def _node(role, ip):
    return nodes.Node(role, nodes.node_name(role, ip), ip, ip)


def test_cluster_nodes_keep_master_order_and_sort_workers():
    masters = [_node('master', ip) for ip in ('10.0.0.13', '10.0.0.11')]
    workers = [_node('worker', ip) for ip in
               ('10.0.0.100', '10.0.0.21', '10.0.0.3')]
    cluster = nodes.ClusterNodes(masters, workers)
    assert [n.name for n in cluster.masters] == [
        'master-10-0-0-13', 'master-10-0-0-11']
    assert [n.cluster_address for n in cluster.workers] == [
        '10.0.0.3', '10.0.0.21', '10.0.0.100']
    assert cluster.names == ['master-10-0-0-13', 'master-10-0-0-11',
                             'worker-10-0-0-3', 'worker-10-0-0-21',
                             'worker-10-0-0-100']
    assert cluster.get('worker-10-0-0-21') is workers[1]
    assert cluster.get('nope') is None


def test_add_appends_masters_and_gateways():
    cluster = nodes.ClusterNodes([_node('master', '10.0.0.11')],
                                 [_node('worker', '10.0.0.22')],
                                 _node('external_lb', '10.0.0.30'))
    grown = cluster.add(_node('worker', '10.0.0.21'),
                        _node('master', '10.0.0.9'),
                        _node('external_lb', '10.0.0.31'))
    assert [n.name for n in grown.masters] == ['master-10-0-0-11',
                                               'master-10-0-0-9']
    assert [n.name for n in grown.workers] == ['worker-10-0-0-21',
                                               'worker-10-0-0-22']
    assert [n.name for n in grown.gateways] == ['lb-10-0-0-30',
                                                'lb-10-0-0-31']
    assert grown.external_lb.name == 'lb-10-0-0-30'  # the first one
    assert [n.name for n in cluster.gateways] == ['lb-10-0-0-30']
    shrunk = grown.remove('worker-10-0-0-22', 'master-10-0-0-11',
                          'lb-10-0-0-30')
    assert shrunk.names == ['master-10-0-0-9', 'worker-10-0-0-21']
    assert shrunk.external_lb.name == 'lb-10-0-0-31'
    assert [n.name for n in shrunk.gateways] == ['lb-10-0-0-31']


def test_duplicate_names_are_refused():
    with pytest.raises(exceptions.ParamsInvalid) as info:
        nodes.ClusterNodes([_node('master', '10.0.0.11')],
                           [_node('worker', '10.0.0.21')]).add(
            _node('worker', '10.0.0.21'))
    assert info.value.problems == [
        'nodes: worker-10-0-0-21 is in the cluster twice']


# -------------------------------------------------------------- build set

def test_build_nodes_uses_role_ports():
    spec = _spec(worker_node__port=2201, master_node__port=2200)
    cluster = nodes.build_nodes(spec, [
        _address('master', '10.10.0.11'),
        _address('worker', '10.10.0.21'),
        _address('worker', '10.10.0.22', port=2299),
        _address('external_lb', '10.10.0.30')])
    assert [n.ssh_port for n in cluster.k8s_nodes] == [2200, 2201, 2299]
    assert cluster.external_lb.ssh_port == 22


_HA = dict(external_lb_param__vip='10.10.0.100',
           external_lb_param__vrrp_router_id=51,
           external_lb_param__vrrp_password='secret')


def test_several_gateways_with_a_vip():
    entries = nodes.load_topology({
        'masters': [{'ssh_ip': '10.10.0.11'}],
        'external_lb': [{'ssh_ip': '10.10.0.32'}, {'ssh_ip': '10.10.0.31'}]})
    assert [e.source for e in entries[1:]] == [
        'topology.external_lb[0]', 'topology.external_lb[1]']
    cluster = nodes.build_nodes(_spec(**_HA), entries, path='topology')
    assert [n.name for n in cluster.gateways] == ['lb-10-10-0-31',
                                                  'lb-10-10-0-32']
    assert cluster.external_lb is cluster.gateways[0]
    assert cluster.names == ['master-10-10-0-11']  # no Kubernetes node
    assert cluster.gateway('lb-10-10-0-32').ssh_address == '10.10.0.32'
    assert cluster.gateway('master-10-10-0-11') is None
    assert cluster.with_masters(cluster.masters).gateways == cluster.gateways


@pytest.mark.parametrize('changes,count,expected', [
    ({}, 2, 'topology: needs exactly one external_lb node, found 2'),
    (_HA, 0, 'topology: needs 1 to 100 external_lb nodes, found 0'),
    (_HA, 101, 'topology: needs 1 to 100 external_lb nodes, found 101'),
])
def test_gateway_counts(changes, count, expected):
    addresses = [_address('master', '10.10.0.11')] + [
        _address('external_lb', '10.10.1.%d' % i) for i in range(count)]
    with pytest.raises(exceptions.ParamsInvalid) as info:
        nodes.build_nodes(_spec(**changes), addresses, path='topology')
    assert info.value.problems == [expected]


def test_two_gateways_at_one_address_are_refused():
    with pytest.raises(exceptions.ParamsInvalid) as info:
        nodes.ClusterNodes([_node('master', '10.0.0.11')], gateways=[
            _node('external_lb', '10.0.0.30'),
            _node('external_lb', '10.0.0.30')])
    assert info.value.problems == [
        'nodes: lb-10-0-0-30 is in the cluster twice']


def test_build_nodes_reports_every_problem():
    spec = _spec()
    with pytest.raises(exceptions.ParamsInvalid) as info:
        nodes.build_nodes(spec, [
            _address('master', '10.10.0.11', source='topology.masters[0]'),
            _address('master', '10.10.0.12', source='topology.masters[1]'),
            _address('worker', '10.10.0.11', '10.10.0.11',
                     source='topology.workers[0]'),
            _address('worker', '10.10.0.40', '10.233.70.1',
                     source='topology.workers[1]'),
        ], path='topology')
    assert info.value.problems == [
        'topology: 2 master nodes: etcd needs an odd number (kubespray '
        'refuses an even one)',
        'topology: needs exactly one external_lb node, found 0',
        'topology.workers[0]: cluster address 10.10.0.11 is already used '
        'by topology.masters[0]',
        'topology.workers[1]: cluster address 10.233.70.1 lies in the pod '
        'CIDR (master_node.pod_cidr) 10.233.64.0/18']


def test_same_ssh_address_on_default_ports_is_a_duplicate():
    spec = _spec()
    with pytest.raises(exceptions.ParamsInvalid) as info:
        nodes.build_nodes(spec, [
            _address('master', '192.168.1.1', '10.10.0.11', source='m0'),
            _address('worker', '192.168.1.1', '10.10.0.21', source='w0'),
            _address('external_lb', '10.10.0.30')])
    assert info.value.problems == [
        'w0: SSH endpoint 192.168.1.1 port 22 is already used by m0']


def test_same_ssh_address_on_other_ports_is_fine():
    spec = _spec()
    cluster = nodes.build_nodes(spec, [
        _address('master', '192.168.1.1', '10.10.0.11', port=2201),
        _address('worker', '192.168.1.1', '10.10.0.21', port=2202),
        _address('external_lb', '10.10.0.30')])
    assert cluster.names == ['master-10-10-0-11', 'worker-10-10-0-21']


def test_nodes_from_spec():
    request = params_data.minimal()
    request[core.ROOT]['nodes'] = [
        {'role': 'master', 'ssh_ip': '10.10.0.11'},
        {'role': 'worker', 'ssh_ip': '10.10.0.21'},
        {'role': 'external_lb', 'ssh_ip': '10.10.0.30'}]
    cluster = nodes.nodes_from_spec(params.parse_params(request))
    assert cluster.names == ['master-10-10-0-11', 'worker-10-10-0-21']
    assert cluster.external_lb.name == 'lb-10-10-0-30'


def test_nodes_from_spec_without_nodes_is_not_found():
    with pytest.raises(exceptions.ParamsNotFound) as info:
        nodes.nodes_from_spec(_spec())
    assert info.value.problems == [
        'k8s_cluster_installation_param.nodes: missing (no topology given '
        'either)']


# --------------------------------------------------------------- topology

def _sample_topology(name):
    path = pathlib.Path(params_data.SAMPLES) / name
    return yaml.safe_load(path.read_text())


@pytest.mark.parametrize('name,masters,workers', [
    ('topology_simple.yaml', ['master-10-10-0-11'],
     ['worker-10-10-0-21', 'worker-10-10-0-22']),
    ('topology_ha.yaml',
     ['master-10-10-0-11', 'master-10-10-0-12', 'master-10-10-0-13'],
     ['worker-10-10-0-21', 'worker-10-10-0-22']),
])
def test_sample_topologies(name, masters, workers):
    entries = nodes.load_topology(_sample_topology(name))
    cluster = nodes.build_nodes(_spec(), entries, path='topology')
    assert [n.name for n in cluster.masters] == masters
    assert [n.name for n in cluster.workers] == workers
    assert cluster.external_lb.cluster_address == '10.10.0.30'


def test_topology_entry_fields():
    entries = nodes.load_topology({
        'masters': [{'ssh_ip': '192.168.1.11', 'nic_ip': '10.10.0.11',
                     'ssh_port': 2222}],
        'external_lb': {'ssh_ip': 'fd00::30'}})
    assert entries == [
        core.NodeAddress('master', '192.168.1.11', '10.10.0.11', 2222),
        core.NodeAddress('external_lb', 'fd00::30', 'fd00::30', None)]
    assert entries[0].source == 'topology.masters[0]'


@pytest.mark.parametrize('document,expected', [
    ([], ['topology: must be a mapping with masters, workers and '
          'external_lb']),
    ({}, ['topology.external_lb: missing', 'topology.masters: missing']),
    ({'masters': [{'ssh_ip': '10.0.0.1', 'role': 'worker'}],
      'worker': [], 'external_lb': {'ssh_ip': '10.0.0.9'}},
     ["topology.masters[0].role: unknown key (known keys: nic_ip, pool, "
      "ssh_ip, ssh_port)",
      "topology.worker: unknown key (did you mean 'workers'?)"]),
    ({'masters': [{'ssh_ip': '10.0.0.300'}], 'workers': 'w',
      'external_lb': 'lb'},
     ['topology.external_lb: must be a mapping, not str',
      "topology.masters[0].ssh_ip: '10.0.0.300' is not an IP address",
      'topology.workers: must be a list, not str']),
])
def test_topology_problems(document, expected):
    with pytest.raises((exceptions.ParamsInvalid,
                        exceptions.ParamsNotFound)) as info:
        nodes.load_topology(document)
    assert info.value.problems == expected
