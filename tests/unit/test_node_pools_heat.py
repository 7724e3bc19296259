"""Aspect node pools found in Heat: v1 discovery (HeatNodeFinder), the
LCM hooks on a pool's scaling group, and v2 role detection."""

import json
import types

import pytest
import yaml

from mgmt_driver.adapters import v2
from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.model import params
from mgmt_driver.remote import heat
from tests.unit import test_v2
from tests.unit.test_driver import Harness
from tests.unit.test_driver import _instantiate_params
from tests.unit.test_driver import _request
from tests.unit.test_driver import conf  # noqa: F401 (a fixture)
from tests.unit.test_heat import FakeHeat
from tests.unit.test_heat import _fip
from tests.unit.test_heat import _port
from tests.unit.test_heat import _res

P = core.ROOT
POOL = {'aspect_id': 'dpdk_instance', 'ssh_cp_name': 'dpdkNode_FloatingIP',
        'nic_cp_name': 'dpdkNode_CP2',
        'labels': {'example.com/pool': 'dpdk'},
        'taints': ['example.com/dedicated=dpdk:NoSchedule']}
GROUPS = {'master_instance': ('masterNode', {'m1': 11}),
          'worker_instance': ('workerNode', {'w1': 21, 'w2': 22}),
          'dpdk_instance': ('dpdkNode', {'d1': 31})}
CP_SUFFIX = {'masterNode': 'CP1', 'workerNode': 'CP2', 'dpdkNode': 'CP2'}


class GroupHeat(FakeHeat):
    """A v1 top stack ``stack`` with three scaling groups (masters,
    workers, the dpdk pool) and the LB's floating IP."""

    def __init__(self):
        super().__init__()
        self.stacks = {'stack': {'externalLB_FloatingIP': _fip(
            'externalLB_FloatingIP', '192.168.10.40')}}
        for aspect, (_, members) in GROUPS.items():
            self.stacks['stack'][aspect] = _res(
                aspect, 'OS::Heat::AutoScalingGroup', 'grp-' + aspect)
            self.stacks['grp-' + aspect] = {}
            for member, octet in members.items():
                self.add(aspect, member, octet)

    def add(self, aspect, member, octet):
        """A new group member (a scale-out), as its stack id."""
        vdu = GROUPS[aspect][0]
        self.stacks['grp-' + aspect][member] = _res(
            member, 'OS::Heat::Stack', 'member-' + member)
        self.stacks['member-' + member] = {
            vdu: _res(vdu, heat.SERVER_TYPE, 'srv-' + member),
            '%s_%s' % (vdu, CP_SUFFIX[vdu]): _port(
                '%s_%s' % (vdu, CP_SUFFIX[vdu]), '10.10.0.%d' % octet),
            vdu + '_FloatingIP': _fip(vdu + '_FloatingIP',
                                      '192.168.10.%d' % octet)}
        return 'member-' + member


def _heat_params(pool=POOL):
    extra = _instantiate_params()
    del extra[P]['nodes']
    extra[P]['node_pools'] = {'dpdk': dict(pool)}
    return extra


# ------------------------------------------------------- v1 discovery

def test_cluster_vms_walks_each_pool_group():
    spec = params.parse_params(_heat_params())
    vms = heat.HeatNodeFinder(GroupHeat()).cluster_vms('stack', spec)
    found = {(v.address.role, v.address.nic_ip, v.address.pool,
              v.member_name, v.stack_id) for v in vms}
    assert found == {
        ('master', '10.10.0.11', None, 'm1', 'member-m1'),
        ('worker', '10.10.0.21', None, 'w1', 'member-w1'),
        ('worker', '10.10.0.22', None, 'w2', 'member-w2'),
        ('worker', '10.10.0.31', 'dpdk', 'd1', 'member-d1'),
        ('external_lb', '192.168.10.40', None, None, None)}


@pytest.mark.parametrize('change, field', [
    ({'aspect_id': 'nothing'}, 'node_pools.dpdk.aspect_id'),
    ({'ssh_cp_name': 'nothing_FIP'}, 'node_pools.dpdk.ssh_cp_name'),
    ({'nic_cp_name': 'nothing_CP'}, 'node_pools.dpdk.nic_cp_name'),
])
def test_a_missing_pool_resource_names_the_pool_field(change, field):
    spec = params.parse_params(_heat_params(dict(POOL, **change)))
    with pytest.raises(exceptions.MgmtDriverNotFound) as info:
        heat.HeatNodeFinder(GroupHeat()).cluster_vms('stack', spec)
    assert '%s.%s' % (P, field) in str(info.value)


def test_listed_pools_add_no_heat_lookup():
    extra = _heat_params()
    extra[P]['node_pools'] = {'zone': {'nodes': ['10.10.0.21']}}
    spec = params.parse_params(extra)
    vms = heat.HeatNodeFinder(GroupHeat()).cluster_vms('stack', spec)
    assert {v.address.pool for v in vms} == {None}
    assert len(vms) == 4  # the dpdk group is no pool here


# ---------------------------------------------------- the v1 LCM hooks

def _hooks_with_heat(conf, fake, k8s_nodes=()):  # noqa: F811
    h = Harness(conf, k8s_nodes=k8s_nodes)
    h.hooks._heat_factory = lambda c, i, r: fake
    return h


def _hosts(h):
    return yaml.safe_load(h.workspace_files()['hosts.yaml'])['all']['hosts']


def test_instantiate_gives_pool_workers_the_pool_settings(conf):  # noqa: F811,E501
    fake = GroupHeat()
    h = _hooks_with_heat(conf, fake)
    extra = _heat_params()
    h.hooks.instantiate_end(None, h.instance(extra), _request(extra), None,
                            None)
    hosts = _hosts(h)
    assert hosts['worker-10-10-0-31']['node_labels'] == {
        'example.com/pool': 'dpdk'}
    assert hosts['worker-10-10-0-31']['node_taints'] == [
        'example.com/dedicated=dpdk:NoSchedule']
    assert 'node_labels' not in hosts['worker-10-10-0-21']


def test_scale_out_of_the_pool_aspect_joins_with_pool_labels(conf):  # noqa: F811,E501
    fake = GroupHeat()
    new = fake.add('dpdk_instance', 'd2', 32)
    known = ['master-10-10-0-11', 'worker-10-10-0-21', 'worker-10-10-0-22',
             'worker-10-10-0-31']
    h = _hooks_with_heat(conf, fake, k8s_nodes=known)
    extra = _heat_params()
    h.hooks.scale_end(None, h.instance(extra), _request(
        {}, type='SCALE_OUT', aspect_id='dpdk_instance'), None, None,
        scale_out_id_list=[new])
    scale = [c for c in h.ansible.commands
             if 'ansible-playbook -i' in c and 'scale.yml' in c]
    assert len(scale) == 1 and '--limit=worker-10-10-0-32 ' in scale[0]
    hosts = _hosts(h)
    assert hosts['worker-10-10-0-32']['node_labels'] == {
        'example.com/pool': 'dpdk'}
    assert hosts['worker-10-10-0-32']['node_taints'] == [
        'example.com/dedicated=dpdk:NoSchedule']


def test_scale_out_request_may_give_the_pool_new_labels(conf):  # noqa: F811,E501
    fake = GroupHeat()
    new = fake.add('dpdk_instance', 'd2', 32)
    h = _hooks_with_heat(conf, fake, k8s_nodes=[
        'master-10-10-0-11', 'worker-10-10-0-21', 'worker-10-10-0-22',
        'worker-10-10-0-31'])
    override = {P: {'node_pools': {'dpdk': {
        'labels': {'example.com/pool': 'dpdk', 'example.com/nic': 'e810'}}}}}
    h.hooks.scale_end(None, h.instance(_heat_params()), _request(
        override, type='SCALE_OUT'), None, None, scale_out_id_list=[new])
    assert _hosts(h)['worker-10-10-0-32']['node_labels'] == {
        'example.com/pool': 'dpdk', 'example.com/nic': 'e810'}


def test_scale_in_of_the_pool_aspect_removes_the_chosen_member(conf):  # noqa: F811,E501
    fake = GroupHeat()
    fake.add('dpdk_instance', 'd2', 32)
    h = _hooks_with_heat(conf, fake, k8s_nodes=[
        'master-10-10-0-11', 'worker-10-10-0-21', 'worker-10-10-0-22',
        'worker-10-10-0-31', 'worker-10-10-0-32'])
    h.master.script(r'get node worker-10-10-0-31',
                    stdout='node/worker-10-10-0-31\n')
    h.master.script(r'get pods', stdout=json.dumps({'items': []}))
    h.hooks.scale_start(None, h.instance(_heat_params()), _request(
        {}, type='SCALE_IN', aspect_id='dpdk_instance'), None, None,
        scale_out_id_list=['member-d1'])
    drain = [c for c in h.master.commands if ' drain ' in c]
    assert len(drain) == 1 and 'worker-10-10-0-31' in drain[0]
    assert h.playbooks() == ['remove-node.yml']
    assert yaml.safe_load(h.workspace_files()['remove-node-vars.yaml'])[
        'node'] == 'worker-10-10-0-31'
    hosts = _hosts(h)
    assert 'worker-10-10-0-31' not in hosts
    assert hosts['worker-10-10-0-32']['node_labels'] == {
        'example.com/pool': 'dpdk'}


# -------------------------------------------------------------- Tacker v2

def _v2_pool_vnfc(vnf, ssh_ip, nic_ip):
    stack = 'stack-dpdkNode-%d' % len(vnf.vnfcs)
    vnf.heat.stacks[stack] = {
        'dpdkNode_FloatingIP': {'attributes': {'floating_ip_address':
                                               ssh_ip}},
        'dpdkNode_CP2': {'attributes': {'fixed_ips': [{'ip_address':
                                                       nic_ip}]}}}
    vnf.vnfcs.append({'id': 'vnfc-dpdk-%d' % len(vnf.vnfcs),
                      'vduId': 'dpdkNode',
                      'computeResource': {'resourceId': 'srv-dpdk'},
                      'metadata': {'stack_id': stack,
                                   'creation_time': '2026-01-02T00:00:00'}})


def _v2_spec():
    extra = test_v2._params()
    extra[P]['node_pools'] = {'dpdk': dict(POOL)}
    return params.parse_params(extra)


def test_v2_a_stack_with_the_pool_cp_is_a_pool_worker():
    vnf = test_v2.Vnf()
    _v2_pool_vnfc(vnf, '192.168.10.31', '10.10.0.31')
    found = v2.V2NodeFinder(vnf.heat).cluster_vms(vnf.dict(), _v2_spec())
    assert [(r.address.role, r.address.nic_ip, r.address.pool)
            for r in found if r.address.role == 'worker'] == [
        ('worker', '10.10.0.21', None), ('worker', '10.10.0.22', None),
        ('worker', '10.10.0.31', 'dpdk')]


def test_v2_a_pool_stack_without_address_names_the_pool_field():
    vnf = test_v2.Vnf()
    _v2_pool_vnfc(vnf, '192.168.10.31', 'not-an-address')
    with pytest.raises(exceptions.MgmtDriverNotFound) as info:
        v2.V2NodeFinder(vnf.heat).cluster_vms(vnf.dict(), _v2_spec())
    assert '%s.node_pools.dpdk.nic_cp_name' % P in str(info.value)


def test_v2_instantiate_renders_the_pool_labels(conf):  # noqa: F811
    h = test_v2.Harness(conf)
    _v2_pool_vnfc(h.vnf, '192.168.10.31', '10.10.0.31')
    extra = test_v2._params()
    extra[P]['node_pools'] = {'dpdk': dict(POOL)}
    h.run('instantiate_end', {'flavourId': 'simple',
                              'additionalParams': extra})
    [hosts_file] = [text for path, text in h.ansible.files.items()
                    if path.endswith('/hosts.yaml')]
    hosts = yaml.safe_load(hosts_file)['all']['hosts']
    assert hosts['worker-10-10-0-31']['node_taints'] == POOL['taints']
    assert 'node_taints' not in hosts['worker-10-10-0-21']


def test_the_v2_kinds_list_every_aspect_pool():
    kinds = v2._vm_kinds(_v2_spec())
    assert [(k.role, k.pool, k.ssh_cp_name, k.section) for k in kinds][-1] \
        == ('worker', 'dpdk', 'dpdkNode_FloatingIP', P + '.node_pools.dpdk')


def _heal(h, hook, override=None):
    instance = h.instance(_heat_params())
    instance.instantiated_vnf_info.vnfc_resource_info = [
        types.SimpleNamespace(id='vnfc-d1', compute_resource=types.
                              SimpleNamespace(resource_id='srv-d1'))]
    hook(None, instance, _request(override or {},
                                  vnfc_instance_id=['vnfc-d1']),
         None, None)


def test_heal_of_a_pool_vnfc_removes_then_rejoins_it_in_its_pool(conf):  # noqa: F811,E501
    known = ['master-10-10-0-11', 'worker-10-10-0-21', 'worker-10-10-0-22',
             'worker-10-10-0-31']
    h = _hooks_with_heat(conf, GroupHeat(), k8s_nodes=known)
    h.master.script(r'get node worker-10-10-0-31',
                    stdout='node/worker-10-10-0-31\n')
    h.master.script(r'get pods', stdout=json.dumps({'items': []}))
    _heal(h, h.hooks.heal_start)
    assert yaml.safe_load(h.workspace_files()['remove-node-vars.yaml'])[
        'node'] == 'worker-10-10-0-31'
    h.master.script(r'get nodes -o json', first=True, stdout=json.dumps(
        {'items': [{'metadata': {'name': n}} for n in known[:-1]]}))
    _heal(h, h.hooks.heal_end, {P: {'node_pools': {'dpdk': {
        'labels': {'example.com/pool': 'dpdk-healed'}}}}})
    scale = [c for c in h.ansible.commands
             if 'ansible-playbook -i' in c and 'scale.yml' in c]
    assert len(scale) == 1 and '--limit=worker-10-10-0-31 ' in scale[0]
    assert _hosts(h)['worker-10-10-0-31']['node_labels'] == {
        'example.com/pool': 'dpdk-healed'}
