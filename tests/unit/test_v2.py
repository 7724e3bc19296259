"""The Tacker v2 adapter (mgmt_driver.adapters.v2) with the recording SSH fake.

Inputs are the dicts Tacker's v2 conductor pickles for the script
(``VnfInstanceV2.to_dict()`` and friends: camelCase), Heat is a dict of
stacks answering the v2 ``HeatClient.get_resource_info``.
"""

import json
import os
import pickle
import re
import stat
import subprocess
import sys
import uuid

import pytest
from oslo_config import cfg

from mgmt_driver.adapters import v2
from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from tests.unit import test_driver as td

SAMPLE = json.loads((td.SAMPLES / 'instantiate_simple.json').read_text())
PARAMS = SAMPLE['additionalParams']
MASTER = ('192.168.10.11', '10.10.0.11')
WORKERS = [('192.168.10.%d' % (21 + i), '10.10.0.%d' % (21 + i))
           for i in range(4)]
# The sample's CP names, per role: (ssh CP, nic CP).
CPS = {'master': ('masterNode_FloatingIP', 'masterNode_CP1'),
       'worker': ('workerNode_FloatingIP', 'workerNode_CP2'),
       'external_lb': ('externalLB_FloatingIP', None)}
VDUS = {'master': 'masterNode', 'worker': 'workerNode',
        'external_lb': 'externalLB'}


@pytest.fixture
def conf(tmp_path):
    conf = cfg.ConfigOpts()
    kconf.register_opts(conf)
    conf([])
    for name, value in (('kubectl_sudo', 'never'), ('haproxy_sudo', 'never'),
                        ('records_dir', str(tmp_path / 'records')),
                        ('kubeconfig_dir', str(tmp_path / 'kubeconfigs'))):
        conf.set_override(name, value, group='kubespray_mgmt')
    return conf


class V2Heat:
    """Stacks as ``{stack id: {resource name: resource dict}}``."""

    def __init__(self):
        self.stacks = {}
        self.lookups = []

    def get_resource_info(self, stack_id, name):
        self.lookups.append((stack_id, name))
        return self.stacks.get(stack_id, {}).get(name)


class Vnf:
    """A v2 instance laid out as StandardUserData does: one nested stack
    per VNFC, holding its server, port and floating IP."""

    def __init__(self):
        self.id = 'inst-v2'
        self.heat = V2Heat()
        self.vnfcs = []
        self.add('master', *MASTER)
        self.add('external_lb', td.LB, td.LB)
        for ssh_ip, nic_ip in WORKERS[:2]:
            self.add('worker', ssh_ip, nic_ip)

    def add(self, role, ssh_ip, nic_ip):
        stack = 'stack-%s-%d' % (VDUS[role], len(self.vnfcs))
        ssh_cp, nic_cp = CPS[role]
        self.heat.stacks[stack] = {ssh_cp: {
            'resource_type': 'OS::Neutron::FloatingIP',
            'attributes': {'floating_ip_address': ssh_ip}}}
        if nic_cp:
            self.heat.stacks[stack][nic_cp] = {
                'resource_type': 'OS::Neutron::Port',
                'attributes': {'fixed_ips': [{'ip_address': nic_ip}]}}
        vnfc = {'id': str(uuid.uuid4()), 'vduId': VDUS[role],
                'computeResource': {'resourceId': str(uuid.uuid4()),
                                    'vimLevelResourceType':
                                        'OS::Nova::Server'},
                'metadata': {'stack_id': stack, 'creation_time':
                             '2026-01-01T00:00:%02d' % len(self.vnfcs)}}
        self.vnfcs.append(vnfc)
        return vnfc

    def recreate(self, vnfc):
        """Heal: a new server in the same stack."""
        vnfc['computeResource']['resourceId'] = str(uuid.uuid4())

    def dict(self):
        return {'id': self.id, 'vnfdId': 'vnfd-v2',
                'vimConnectionInfo': {'vim1': {
                    'vimType': 'ETSINFV.OPENSTACK_KEYSTONE.V_3'}},
                'instantiatedVnfInfo': {
                    'flavourId': 'simple',
                    'vnfcResourceInfo': [dict(v) for v in self.vnfcs],
                    'vnfcInfo': [{'id': 'info-' + v['id'],
                                  'vnfcResourceInfoId': v['id']}
                                 for v in self.vnfcs]}}

    def vnfc(self, address):
        return next(v for v in self.vnfcs
                    if address in json.dumps(self.heat.stacks[
                        v['metadata']['stack_id']]))


def _params():
    params = json.loads(json.dumps(PARAMS))
    for role in ('master_node', 'worker_node'):
        params['k8s_cluster_installation_param'][role].pop('aspect_id')
    return params


class Harness:
    def __init__(self, conf, k8s_nodes=()):
        self.conf = conf
        self.vnf = Vnf()
        base = td.Harness(conf, k8s_nodes=k8s_nodes)
        self.pool, self.ansible, self.master, self.lb = (
            base.pool, base.ansible, base.master, base.lb)
        self.store = v2.SpecStore.from_conf(conf)
        #: ``(inst dict)`` -> the v2 Heat client the hooks use.
        self.heat_factory = lambda inst: self.vnf.heat

    def run(self, operation, request=None, grant_request=None,
            carried=None):
        data = {'operation': operation, 'request': request or {},
                'vnf_instance': self.vnf.dict(),
                'grant_request': grant_request, 'grant_response': None,
                'tmp_csar_dir': None,
                'user_script_err_handling_data': carried or {}}
        return v2.run(data, self.conf, pool_factory=lambda: self.pool,
                      heat_factory=self.heat_factory)

    def instantiate(self):
        return self.run('instantiate_end', {'flavourId': 'simple',
                                            'additionalParams': _params()})

    def playbooks(self):
        return [c.rsplit(' ', 1)[-1] for c in self.ansible.commands
                if 'ansible-playbook -i' in c]


def _removing(*vnfcs):
    return {'removeResources': [
        {'id': str(uuid.uuid4()), 'type': 'COMPUTE',
         'resource': {'resourceId': v['computeResource']['resourceId']}}
        for v in vnfcs]}


def test_instantiate_keeps_params_and_writes_kubeconfig(conf, tmp_path):
    h = Harness(conf)
    assert h.instantiate() == {}
    assert h.playbooks() == ['cluster.yml']
    hosts = [f for f in h.ansible.files if '/host_vars/' in f]
    assert sorted(os.path.basename(f) for f in hosts) == [
        'master-10-10-0-11.yaml', 'worker-10-10-0-21.yaml',
        'worker-10-10-0-22.yaml']
    kept = h.store.path(h.vnf.id)
    assert json.loads(open(kept).read()) == _params()
    assert stat.S_IMODE(os.stat(kept).st_mode) == 0o600
    kubeconfig = tmp_path / 'kubeconfigs' / 'kubernetes_vim_simple.kubeconfig'
    assert stat.S_IMODE(kubeconfig.stat().st_mode) == 0o600
    assert td.TOKEN in kubeconfig.read_text()


def test_invalid_params_are_not_kept_and_nothing_is_contacted(conf):
    h = Harness(conf)
    params = _params()
    params['k8s_cluster_installation_param']['ansible'].pop('ip_address')
    with pytest.raises(exceptions.ParamsNotFound) as info:
        h.run('instantiate_end', {'additionalParams': params})
    assert 'ansible.ip_address' in str(info.value)
    assert h.store.load(h.vnf.id) is None
    assert h.ansible.commands == []


@pytest.mark.parametrize('name, error', [
    ('v' * 240, exceptions.MgmtDriverParamInvalid),  # no file name
    ('\u00e9' * 116, exceptions.MgmtDriverParamInvalid),  # 232 bytes
    ('v' * 256, exceptions.ParamsInvalid),  # no VIM name either
    ('../escape', exceptions.MgmtDriverParamInvalid),
])
def test_a_vim_name_unusable_as_a_file_name_is_refused_first(
        conf, tmp_path, name, error):
    """v2's VIM is a kubeconfig file named after vim_name: a name that
    cannot be one is refused before the parameters are kept and before
    any SSH command, not after the whole instantiate."""
    h = Harness(conf)
    params = _params()
    params['k8s_cluster_installation_param']['vim_name'] = name
    with pytest.raises(error) as info:
        h.run('instantiate_end', {'additionalParams': params})
    assert 'k8s_cluster_installation_param.vim_name' in str(info.value)
    assert len(str(info.value)) < 400
    assert h.store.load(h.vnf.id) is None
    assert h.ansible.commands == []
    assert not (tmp_path / 'kubeconfigs').exists()


def test_the_longest_file_name_vim_name_is_accepted(conf, tmp_path):
    h = Harness(conf)
    params = _params()
    name = '\u00e9' * 115 + 'v'  # 231 bytes
    params['k8s_cluster_installation_param']['vim_name'] = name
    assert h.run('instantiate_end', {'additionalParams': params}) == {}
    assert (tmp_path / 'kubeconfigs' / (name + '.kubeconfig')).is_file()


def test_a_vip_port_name_is_refused_naming_the_field(conf):
    h = Harness(conf)
    params = _params()
    params['k8s_cluster_installation_param']['external_lb_param'].update(
        vip_cp_name='externalLB_VIP_CP', vrrp_router_id=7,
        vrrp_password='s3cret')
    with pytest.raises(exceptions.ParamsInvalid) as info:
        h.run('instantiate_end', {'additionalParams': params})
    assert 'external_lb_param.vip_cp_name' in str(info.value)
    assert 's3cret' not in str(info.value)
    assert h.store.load(h.vnf.id) is None
    assert h.ansible.commands == []


def _modify_call(h, metadata, instantiated=True):
    """The v2 operation modify_information_end after Tacker merged
    *metadata* into the instance."""
    inst = h.vnf.dict()
    inst['metadata'] = metadata
    if not instantiated:
        del inst['instantiatedVnfInfo']
    return v2.operation({'operation': 'modify_information_end',
                         'request': {'metadata': metadata},
                         'vnf_instance': inst}, h.conf,
                        pool_factory=lambda: h.pool,
                        heat_factory=lambda inst: h.vnf.heat)


def _modify(h, metadata, instantiated=True):
    """v2's modify_information_end after Tacker merged *metadata*; the
    v1 hook's calls are recorded instead of run."""
    calls = []
    call = _modify_call(h, metadata, instantiated)
    call.hooks.modify_information_end = \
        lambda *args, **kwargs: calls.append((args, kwargs))
    assert call.run() == {}
    return calls


def test_modify_information_with_a_kube_version_runs_the_upgrade(conf):
    h = Harness(conf)
    h.instantiate()
    calls = _modify(h, {'kube_version': '1.34.3', 'owner': 'ops'})
    [((context, view, request, grant, grant_request), kwargs)] = calls
    assert kwargs == {'metadata_field': 'metadata'}
    assert view.vnf_metadata == {'kube_version': '1.34.3', 'owner': 'ops'}
    assert view.instantiated_vnf_info.additional_params == _params()
    assert view.id == h.vnf.id


def test_modify_information_with_relabel_keys_runs_the_hook(conf):
    h = Harness(conf)
    h.instantiate()
    calls = _modify(h, {'relabel_pools': 'dpdk', 'relabel_taints': 'x-'})
    [((_, view, _, _, _), kwargs)] = calls
    assert kwargs == {'metadata_field': 'metadata'}
    assert view.vnf_metadata['relabel_pools'] == 'dpdk'


@pytest.mark.parametrize('metadata, instantiated', [
    ({'owner': 'ops'}, True),            # another PATCH
    ({'kube_version': '1.34.3'}, False),  # never instantiated
])
def test_modify_information_without_an_upgrade_does_nothing(
        conf, metadata, instantiated):
    h = Harness(conf)
    assert _modify(h, metadata, instantiated) == []
    assert h.ansible.commands == []


@pytest.mark.parametrize('metadata, field', [
    ({'kube_version': 'latest'}, 'metadata.kube_version'),
    ({'kube_version': '1.34.3', 'kube_upgrade_serial': '101%'},
     'metadata.kube_upgrade_serial'),
    ({'relabel_nodes': 'worker-1', 'relabel_labels': 'a'},
     "metadata.relabel_labels")])
def test_modify_information_names_the_v2_metadata_field(conf, metadata,
                                                        field):
    """v2's PATCH field is metadata (v1 stores it as vnf_metadata)."""
    h = Harness(conf)
    h.instantiate()
    commands = len(h.ansible.commands)
    with pytest.raises(exceptions.ParamsInvalid) as caught:
        _modify_call(h, metadata).run()
    assert [p.split(': ')[0] for p in caught.value.problems] == [field]
    assert h.ansible.commands[commands:] == []


def test_scale_out_reads_the_kept_params(conf):
    h = Harness(conf, k8s_nodes=['master-10-10-0-11', 'worker-10-10-0-21',
                                 'worker-10-10-0-22'])
    h.instantiate()
    request = {'type': 'SCALE_OUT', 'aspectId': 'worker_instance',
               'numberOfSteps': 1}
    commands = len(h.ansible.commands)
    # v2 calls scale_start before a scale-out too: nothing to do there.
    assert h.run('scale_start', request) == {}
    assert len(h.ansible.commands) == commands
    h.vnf.add('worker', *WORKERS[2])
    h.run('scale_end', request)
    scale = [c for c in h.ansible.commands
             if 'ansible-playbook -i' in c and c.endswith(' scale.yml')]
    assert len(scale) == 1 and '--limit=worker-10-10-0-23' in scale[0]


def test_scale_out_leaves_out_the_workers_the_request_declares_absent(
        conf):
    """Tacker v2's ScaleVnfRequest.additionalParams.absent_nodes: the
    dead worker is in none of the runs (issue 32, kubespray #13491)."""
    h = Harness(conf, k8s_nodes=['master-10-10-0-11', 'worker-10-10-0-21',
                                 'worker-10-10-0-22'])
    h.instantiate()
    h.vnf.add('worker', *WORKERS[2])
    commands = len(h.ansible.commands)
    h.run('scale_end', {'type': 'SCALE_OUT', 'aspectId': 'worker_instance',
                        'numberOfSteps': 1, 'additionalParams': {
                            'absent_nodes': ['worker-10-10-0-22']}})
    runs = [c for c in h.ansible.commands[commands:]
            if 'ansible-playbook -i' in c or 'FC:TIMEOUT' in c]
    assert runs and all('worker-10-10-0-22' not in c for c in runs)
    assert any(c.endswith(' scale.yml') and '--limit=worker-10-10-0-23' in c
               for c in runs)


def test_scale_needs_kept_params(conf):
    h = Harness(conf)
    with pytest.raises(exceptions.InstanceStateMissing) as info:
        h.run('scale_end', {'type': 'SCALE_OUT'})
    assert 'scale_end of VNF instance inst-v2 needs' in str(info.value)
    assert 'the instantiate parameters kept for Tacker v2' in \
        str(info.value)
    assert '[kubespray_mgmt] records_dir' in str(info.value)
    assert h.ansible.commands == [] and h.master.commands == []


def test_scale_in_removes_the_granted_victim_only(conf):
    h = Harness(conf, k8s_nodes=['master-10-10-0-11', 'worker-10-10-0-21',
                                 'worker-10-10-0-22'])
    h.instantiate()
    h.master.script(r'get node worker-10-10-0-22',
                    stdout='node/worker-10-10-0-22\n')
    h.master.script(r'get pods', stdout=json.dumps({'items': []}))
    victim = h.vnf.vnfc(WORKERS[1][0])
    h.run('scale_start', {'type': 'SCALE_IN', 'aspectId': 'worker_instance',
                          'numberOfSteps': 1}, _removing(victim))
    drains = [c for c in h.master.commands if ' drain ' in c]
    assert len(drains) == 1 and 'worker-10-10-0-22' in drains[0]
    assert h.playbooks() == ['cluster.yml', 'remove-node.yml']
    assert (WORKERS[1][0], 22) in h.pool.forgotten
    assert (WORKERS[0][0], 22) not in h.pool.forgotten
    # v2 calls scale_end after a scale-in too: nothing left to do.
    commands = len(h.ansible.commands)
    h.run('scale_end', {'type': 'SCALE_IN'})
    assert len(h.ansible.commands) == commands


def test_heal_carries_the_healed_stacks_to_heal_end(conf):
    h = Harness(conf, k8s_nodes=['master-10-10-0-11', 'worker-10-10-0-21',
                                 'worker-10-10-0-22'])
    h.instantiate()
    lb = h.vnf.vnfc(td.LB)
    # A requested heal (a cause: not Tacker's automatic one).
    request = {'vnfcInstanceId': ['info-' + lb['id']], 'cause': 'test'}
    out = h.run('heal_start', request, _removing(lb))
    carried = out['user_script_err_handling_data']
    assert carried == {'kubespray_mgmt': {
        'healed_stacks': [lb['metadata']['stack_id']]}}
    h.vnf.recreate(lb)   # the server id changes, the stack stays
    h.run('heal_end', request, _removing(), carried=carried)
    # The LB was rebuilt: its old host key forgotten, its kubeconfig
    # placed again.
    assert (td.LB, 22) in h.pool.forgotten
    assert _kubeconfig_writes(h.lb) == 2


def test_heal_without_carried_stacks_does_not_rebuild_the_lb(conf):
    h = Harness(conf, k8s_nodes=['master-10-10-0-11', 'worker-10-10-0-21',
                                 'worker-10-10-0-22'])
    h.instantiate()
    lb = h.vnf.vnfc(td.LB)
    h.run('heal_end', {'vnfcInstanceId': ['info-' + lb['id']]})
    assert (td.LB, 22) not in h.pool.forgotten
    assert _kubeconfig_writes(h.lb) == 1


def _kubeconfig_writes(conn):
    return len([c for c in conn.calls
                if c[0] == 'write_file' and c[1] == '.kube/config'])


def test_healed_servers_without_grant_request_map_vnfc_info():
    vnf = Vnf()
    worker = vnf.vnfcs[2]
    inst = vnf.dict()
    assert v2.healed_servers(inst, {'vnfcInstanceId': [
        'info-' + worker['id']]}, None) == [
            worker['computeResource']['resourceId']]
    assert v2.healed_servers(inst, {}, None) == []
    with pytest.raises(exceptions.MgmtDriverNotFound) as info:
        v2.healed_servers(inst, {'vnfcInstanceId': ['nope']}, None)
    assert 'vnfcInstanceId nope' in str(info.value)


def test_terminate_end_forgets_params_and_kubeconfig(conf, tmp_path):
    h = Harness(conf)
    h.instantiate()
    h.run('terminate_end', {'terminationType': 'FORCEFUL'})
    assert h.store.load(h.vnf.id) is None
    assert list((tmp_path / 'kubeconfigs').iterdir()) == []
    assert any('rm -rf' in c for c in h.ansible.commands)
    # Again: nothing left, no error.
    h.run('terminate_end', {'terminationType': 'FORCEFUL'})


def test_instantiate_rollback_after_refused_params_touches_nothing(conf):
    h = Harness(conf)
    params = _params()
    params['k8s_cluster_installation_param']['ansible'].pop('ip_address')
    h.run('instantiate_rollback_start', {'additionalParams': params})
    h.run('instantiate_rollback_end', {'additionalParams': params})
    assert h.ansible.commands == []


def test_instantiate_rollback_releases_workspace_and_params(conf, tmp_path):
    h = Harness(conf)
    h.instantiate()
    h.run('instantiate_rollback_end', {'additionalParams': _params()})
    assert h.store.load(h.vnf.id) is None
    assert list((tmp_path / 'kubeconfigs').iterdir()) == []


def test_scale_rollback_end_deletes_the_nodes_of_gone_vms(conf):
    h = Harness(conf, k8s_nodes=['master-10-10-0-11', 'worker-10-10-0-21',
                                 'worker-10-10-0-22', 'worker-10-10-0-23'])
    h.instantiate()
    h.run('scale_rollback_end', {'type': 'SCALE_OUT'})
    deletes = [c for c in h.master.commands if 'delete node' in c]
    assert len(deletes) == 1 and 'worker-10-10-0-23' in deletes[0]


def test_node_discovery_names_the_missing_stack_id():
    vnf = Vnf()
    del vnf.vnfcs[0]['metadata']['stack_id']
    spec = _spec()
    with pytest.raises(exceptions.MgmtDriverNotFound) as info:
        v2.V2NodeFinder(vnf.heat).cluster_vms(vnf.dict(), spec)
    assert 'metadata.stack_id' in str(info.value)


def test_node_discovery_roles_by_cp_name():
    vnf = Vnf()
    found = v2.V2NodeFinder(vnf.heat).cluster_vms(vnf.dict(), _spec())
    assert [(r.address.role, r.address.ssh_ip, r.address.nic_ip)
            for r in found] == [
        ('master',) + MASTER, ('external_lb', td.LB, td.LB),
        ('worker',) + WORKERS[0], ('worker',) + WORKERS[1]]
    assert found[0].stack_id == vnf.vnfcs[0]['metadata']['stack_id']


def _spec():
    from mgmt_driver.model import params
    return params.parse_params(_params())


def test_unknown_operations_do_nothing(conf):
    h = Harness(conf)
    for name in ('instantiate_start', 'modify_information_end',
                 'change_external_connectivity_start'):
        assert h.run(name) == {}
    assert h.ansible.commands == []


# ------------------------------------------------- the stdout contract


class Noisy:
    """An operation that writes to stdout every way a library might."""

    output = {'user_script_err_handling_data': {'kubespray_mgmt': {'x': 1}}}

    def __init__(self, fail=False):
        self.fail = fail

    def run(self):
        import logging
        print('print to stdout')
        sys.stdout.write('write to sys.stdout\n')
        os.write(1, b'write to fd 1\n')
        subprocess.run(['echo', 'child process output'], check=True)
        for level in (logging.DEBUG, logging.INFO, logging.WARNING):
            logging.getLogger('mgmt_driver.anything').log(level, 'log line')
        if self.fail:
            raise exceptions.MgmtDriverOtherError(error_message='it broke')
        return self.output


_NOISY_MAIN = """
import logging, sys
from mgmt_driver.adapters import v2
from tests.unit.test_v2 import Noisy
# A careless library: its log handler writes to stdout.
logging.basicConfig(stream=sys.stdout, level=logging.%s)
v2.load_conf = lambda: None
v2.operation = lambda data: Noisy(%s)
sys.exit(v2.main())
"""


@pytest.mark.parametrize('fail', [False, True])
@pytest.mark.parametrize('level', ['DEBUG', 'WARNING'])
def test_stdout_carries_only_the_pickled_result(fail, level):
    done = subprocess.run(
        [sys.executable, '-c', _NOISY_MAIN % (level, fail)],
        input=pickle.dumps({'operation': 'heal_end'}), capture_output=True,
        cwd=td.SAMPLES.parent, check=False)
    err = done.stderr.decode()
    assert done.returncode == (1 if fail else 0), err
    assert pickle.loads(done.stdout) == Noisy.output
    assert 'print to stdout' in err and 'child process output' in err
    assert 'log line' in err
    if fail:
        assert err.rstrip().endswith(
            'kubespray-mgmt heal_end failed: An error occurred in '
            'MgmtDriver: it broke.')


def _run_script(data, tmp_path):
    config = tmp_path / 'kubespray.conf'
    config.write_text('[kubespray_mgmt]\nrecords_dir = %s\n'
                      % (tmp_path / 'records'))
    env = dict(os.environ, **{v2.CONFIG_ENV: str(config)})
    return subprocess.run([sys.executable, v2.script_path()],
                          input=pickle.dumps(data), capture_output=True,
                          env=env, check=False)


def test_script_runs_an_operation_with_nothing_to_do(tmp_path):
    done = _run_script({'operation': 'instantiate_start', 'request': {},
                        'vnf_instance': {'id': 'i1'}}, tmp_path)
    assert done.returncode == 0, done.stderr
    assert pickle.loads(done.stdout) == {}


def test_script_failure_is_one_clear_line_on_stderr(tmp_path):
    done = _run_script({'operation': 'scale_end',
                        'request': {'type': 'SCALE_OUT'},
                        'vnf_instance': {'id': 'i1'}}, tmp_path)
    assert done.returncode == 1
    assert pickle.loads(done.stdout) == {}
    err = done.stderr.decode()
    assert err.startswith('kubespray-mgmt scale_end failed: ')
    assert 'scale_end of VNF instance i1 needs what its instantiate' in err
    # Tacker shows the tenant this line: no path of the conductor host
    # (issue 39 item 8).
    assert str(tmp_path) not in err


def test_script_refuses_input_that_is_not_a_pickle(tmp_path):
    # HOME: the error log of an unread configuration is under it.
    done = subprocess.run([sys.executable, v2.script_path()],
                          input=b'not a pickle', capture_output=True,
                          env=dict(os.environ, HOME=str(tmp_path)),
                          check=False)
    assert done.returncode == 1 and done.stdout == b''
    assert done.stderr.decode().startswith(
        'kubespray-mgmt (unknown operation) failed: ')


_FAILING_MAIN = """
import sys
from mgmt_driver.adapters import v2
class Failing:
    output = {}
    def run(self):
        raise OSError(13, 'Permission denied',
                      '/etc/tacker/private/\\x1b]0;x\\x07key')
v2.operation = lambda data: Failing()
sys.exit(v2.main())
"""

_ERROR_ID = re.compile(r'\(error id ([0-9a-f]{12})\)')


def _error_log(directory):
    log = directory / 'v2' / v2.ERROR_LOG
    assert log.stat().st_mode & 0o777 == 0o600
    return log.read_text()


def test_an_unexpected_error_tells_the_tenant_only_an_error_id(tmp_path):
    config = tmp_path / 'kubespray.conf'
    config.write_text('[kubespray_mgmt]\nrecords_dir = %s\n'
                      % (tmp_path / 'records'))
    done = subprocess.run(
        [sys.executable, '-c', _FAILING_MAIN],
        input=pickle.dumps({'operation': 'heal_end'}), capture_output=True,
        env=dict(os.environ, **{v2.CONFIG_ENV: str(config)}),
        cwd=td.SAMPLES.parent, check=False)
    err = done.stderr.decode()
    assert done.returncode == 1 and pickle.loads(done.stdout) == {}
    assert '/etc/tacker' not in err and 'Permission' not in err
    assert str(tmp_path) not in err
    assert err.startswith('kubespray-mgmt heal_end failed: an internal '
                          'error of the driver (error id ')
    error_id = _ERROR_ID.search(err).group(1)
    log = _error_log(tmp_path / 'records')
    assert 'error id %s, operation heal_end' % error_id in log
    assert "Permission denied: '/etc/tacker/private/" in log
    assert 'Traceback (most recent call last)' in log


def test_a_tacker_conf_parse_error_is_not_shown_to_the_tenant(tmp_path):
    config = tmp_path / 'tacker.conf'
    config.write_text('[DEFAULT]\ntransport_url = rabbit://tacker:'
                      'hunter2@ctl\nhunter2 without an equals sign\n')
    done = subprocess.run(
        [sys.executable, v2.script_path()],
        input=pickle.dumps({'operation': 'instantiate_end'}),
        capture_output=True, check=False, env=dict(
            os.environ, HOME=str(tmp_path),
            **{v2.CONFIG_ENV: str(config)}))
    err = done.stderr.decode()
    assert done.returncode == 1
    assert 'hunter2' not in err and str(tmp_path) not in err
    error_id = _ERROR_ID.search(err).group(1)
    log = _error_log(tmp_path / '.kubespray-mgmt' / 'records')
    assert error_id in log and str(config) in log


def test_the_drivers_own_error_is_shown_bounded_and_escaped():
    line = v2.failure_line('scale_end', exceptions.RemoteDataInvalid(
        host='10.0.0.5', what='kubectl output', problem='\x1b[2J' * 10**6))
    assert line.startswith('kubespray-mgmt scale_end failed: Invalid '
                           'kubectl output from 10.0.0.5: \\x1b[2J')
    assert '\x1b' not in line and len(line) < exceptions.FIELD_WIDTH + 200


V2_SAMPLES = td.SAMPLES / 'v2'


@pytest.mark.parametrize('name', sorted(
    p.name for p in V2_SAMPLES.glob('*.json')))
def test_v2_samples_are_valid_requests(name):
    from mgmt_driver.adapters import lcm_requests
    body = json.loads((V2_SAMPLES / name).read_text())
    checked = lcm_requests.check(body)
    # No override: the kept instantiate parameters apply.
    assert checked.overrides == []



@pytest.mark.parametrize('attributes', [
    None, 'text', {'floating_ip_address': 12},
    {'floating_ip_address': '10.0.0.1; rm -rf /'},
    {'fixed_ips': 'x'}, {'fixed_ips': [None]}, {'fixed_ips': []}])
def test_heat_answers_of_another_shape_name_the_field(attributes):
    vnf = Vnf()
    stack = vnf.vnfcs[0]['metadata']['stack_id']
    vnf.heat.stacks[stack]['masterNode_FloatingIP'] = {
        'attributes': attributes}
    with pytest.raises(exceptions.MgmtDriverNotFound) as info:
        v2.V2NodeFinder(vnf.heat).cluster_vms(vnf.dict(), _spec())
    assert 'master_node.ssh_cp_name (no IP address in Heat stack %s' \
        % stack in str(info.value)


def test_a_vnfc_without_any_role_cp_is_left_out_with_a_warning(caplog):
    vnf = Vnf()
    stack = vnf.vnfcs[-1]['metadata']['stack_id']
    vnf.heat.stacks[stack] = {}   # the VM and its stack are gone
    found = v2.V2NodeFinder(vnf.heat).cluster_vms(vnf.dict(), _spec())
    assert len(found) == len(vnf.vnfcs) - 1
    assert 'Heat stack %s has none of the ssh_cp_name resources' % stack \
        in caplog.text


def test_an_unsafe_instance_id_is_refused_before_any_file(tmp_path):
    store = v2.SpecStore(str(tmp_path / 'v2'))
    with pytest.raises(exceptions.MgmtDriverParamInvalid) as info:
        store.save('../escape', {'a': 1})
    assert "VNF instance id '../escape'" in str(info.value)
    assert not (tmp_path / 'v2').exists()
