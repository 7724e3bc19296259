"""mgmt_driver.remote.heat with a fake Heat client."""

import types

import pytest

from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.remote import heat


def _res(name, rtype, physical=None, attributes=None):
    return types.SimpleNamespace(resource_name=name, resource_type=rtype,
                                 physical_resource_id=physical,
                                 attributes=attributes or {})


def _port(name, ip):
    return _res(name, 'OS::Neutron::Port', 'port-' + name,
                {'fixed_ips': [{'ip_address': ip}]})


def _fip(name, ip):
    return _res(name, 'OS::Neutron::FloatingIP', 'fip-' + name,
                {'floating_ip_address': ip})


class FakeHeat:
    """Top stack 'top' with worker group of two members and a LB."""

    def __init__(self):
        self.stacks = {
            'top': {'worker_instance': _res(
                'worker_instance', 'OS::Heat::AutoScalingGroup', 'grp'),
                'externalLB_FloatingIP': _fip('externalLB_FloatingIP',
                                              '192.0.2.9')},
            'grp': {'b': _res('b', 'OS::Heat::Stack', 'member-b'),
                    'a': _res('a', 'OS::Heat::Stack', 'member-a')},
            'member-a': {
                'workerNode': _res('workerNode', heat.SERVER_TYPE, 'srv-a'),
                'workerNode_CP2': _port('workerNode_CP2', '10.10.0.21'),
                'workerNode_FloatingIP': _fip('workerNode_FloatingIP',
                                              '192.0.2.21')},
            'member-b': {
                'workerNode': _res('workerNode', heat.SERVER_TYPE, 'srv-b'),
                'workerNode_CP2': _port('workerNode_CP2', '10.10.0.22'),
                'workerNode_FloatingIP': _fip('workerNode_FloatingIP',
                                              '192.0.2.22')},
        }
        self.calls = []

    def resource_get(self, stack_id, name):
        self.calls.append(('get', stack_id, name))
        try:
            return self.stacks[stack_id][name]
        except KeyError:
            raise RuntimeError('HTTPNotFound')

    def resource_get_list(self, stack_id, nested_depth=0):
        self.calls.append(('list', stack_id))
        return list(self.stacks[stack_id].values())


def test_members_of_a_scaling_group():
    vms = heat.HeatNodeFinder(FakeHeat()).role_vms(
        'top', core.ROLE_WORKER, 'worker_instance',
        'workerNode_FloatingIP', 'workerNode_CP2')
    assert [(v.address.ssh_ip, v.address.nic_ip, v.server_id, v.stack_id)
            for v in vms] == [
        ('192.0.2.21', '10.10.0.21', 'srv-a', 'member-a'),
        ('192.0.2.22', '10.10.0.22', 'srv-b', 'member-b')]
    assert all(v.address.role == 'worker' for v in vms)
    assert [v.member_name for v in vms] == ['a', 'b']


def test_role_without_aspect_reads_the_top_stack():
    [vm] = heat.HeatNodeFinder(FakeHeat()).role_vms(
        'top', core.ROLE_EXTERNAL_LB, None, 'externalLB_FloatingIP')
    assert vm.address.ssh_ip == vm.address.nic_ip == '192.0.2.9'
    assert vm.server_id is None and vm.stack_id is None


@pytest.mark.parametrize('aspect, ssh_cp, text', [
    ('master_instance', 'masterNode_FloatingIP',
     'master_node.aspect_id'),
    ('worker_instance', 'wrongName', 'worker_node.ssh_cp_name'),
])
def test_missing_resource_is_named(aspect, ssh_cp, text):
    role = core.ROLE_MASTER if aspect.startswith('master') \
        else core.ROLE_WORKER
    with pytest.raises(exceptions.MgmtDriverNotFound) as info:
        heat.HeatNodeFinder(FakeHeat()).role_vms('top', role, aspect,
                                                 ssh_cp)
    assert text in str(info.value)


def test_port_without_address_yet():
    fake = FakeHeat()
    fake.stacks['member-a']['workerNode_CP2'].attributes = {}
    with pytest.raises(exceptions.MgmtDriverNotFound, match='no IP'):
        heat.HeatNodeFinder(fake).role_vms(
            'top', core.ROLE_WORKER, 'worker_instance',
            'workerNode_FloatingIP', 'workerNode_CP2')


def _instance(*vnfcs):
    resources = [types.SimpleNamespace(
        id=vnfc, compute_resource=types.SimpleNamespace(resource_id=srv))
        for vnfc, srv in vnfcs]
    return types.SimpleNamespace(
        id='inst-1', instantiated_vnf_info=types.SimpleNamespace(
            vnfc_resource_info=resources))


def test_vnfc_ids_map_to_servers():
    inst = _instance(('c1', 'srv-a'), ('c2', 'srv-b'))
    assert heat.server_ids_for_vnfcs(inst, ['c2', 'c1']) == [
        'srv-b', 'srv-a']


def test_unknown_vnfc_id_is_named():
    with pytest.raises(exceptions.MgmtDriverNotFound, match='c9'):
        heat.server_ids_for_vnfcs(_instance(('c1', 's')), ['c1', 'c9'])


def test_openstack_vim_is_chosen_over_kubernetes():
    info = [types.SimpleNamespace(vim_type='kubernetes', vim_id='k8s',
                                  access_info={}),
            types.SimpleNamespace(vim_type='openstack', vim_id='os',
                                  access_info={'region': 'RegionTwo'})]
    inst = types.SimpleNamespace(vim_connection_info=info)
    assert heat._openstack_vim(inst) == ('os', 'RegionTwo')
    assert heat._openstack_vim(types.SimpleNamespace(
        vim_connection_info=[])) == (None, None)


def test_heatclient_adapter_forwards():
    calls = []
    resources = types.SimpleNamespace(
        get=lambda s, n: calls.append(('get', s, n)) or 'R',
        list=lambda s, nested_depth: calls.append(('list', s,
                                                   nested_depth)) or [])
    adapter = heat.HeatclientAdapter(types.SimpleNamespace(
        resources=resources))
    assert adapter.resource_get('s', 'n') == 'R'
    assert adapter.resource_get_list('s') == []
    assert calls == [('get', 's', 'n'), ('list', 's', 0)]


def test_gateways_of_a_scaling_group():
    # external_lb_param.aspect_id: the gateways are the group's members
    # (the fake's only group serves for both roles here).
    group = types.SimpleNamespace(
        aspect_id='worker_instance', ssh_cp_name='workerNode_FloatingIP',
        nic_cp_name='workerNode_CP2')
    spec = types.SimpleNamespace(
        master=types.SimpleNamespace(
            role=core.ROLE_MASTER, aspect_id=None,
            ssh_cp_name='externalLB_FloatingIP', nic_cp_name=None),
        worker=types.SimpleNamespace(role=core.ROLE_WORKER,
                                     **vars(group)),
        external_lb=group, node_pools=())
    vms = heat.HeatNodeFinder(FakeHeat()).cluster_vms('top', spec)
    gateways = [v for v in vms if v.address.role == core.ROLE_EXTERNAL_LB]
    assert [(v.address.nic_ip, v.stack_id, v.member_name)
            for v in gateways] == [('10.10.0.21', 'member-a', 'a'),
                                   ('10.10.0.22', 'member-b', 'b')]
