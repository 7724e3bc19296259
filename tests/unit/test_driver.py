"""The LCM hooks (mgmt_driver.session.driver) with the recording SSH fake."""

import base64
import json
import pathlib
import types

import pytest
import yaml
from oslo_config import cfg

from mgmt_driver.adapters import v1
from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.model import labels
from mgmt_driver.model import nodes
from mgmt_driver.model import params
from mgmt_driver.operations import gateways
from mgmt_driver.remote import detached
from mgmt_driver.remote import heat
from mgmt_driver.remote import inventory
from mgmt_driver.remote import isolation
from mgmt_driver.remote import kubespray
from mgmt_driver.remote import programs
from mgmt_driver.session import driver
from mgmt_driver.state import kubeversion
from mgmt_driver.state import records
from tests.fakes import FakePool
from tests.fakes import FakeRegistry

SAMPLES = pathlib.Path(__file__).parents[2] / 'samples'
ANSIBLE = '10.10.0.50'
LB = '192.168.10.40'
TOKEN = 'eyJ-very-secret-token'
CA_PEM = '-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n'
LAYOUT = 'KS:FILE:cluster.yml\nKS:FILE:scale.yml\nKS:FILE:remove-node.yml\n' \
    'KS:FILE:playbooks/facts.yml\nKS:SKIP_CONFIRMATION\nKS:GIT:v2.31.0\n'
RECAP = 'PLAY RECAP ***\nmaster-10-10-0-11 : ok=3 changed=1 ' \
    'unreachable=0 failed=0\n'


@pytest.fixture
def conf():
    conf = cfg.ConfigOpts()
    kconf.register_opts(conf)
    conf([])
    conf.set_override('kubectl_sudo', 'never', group='kubespray_mgmt')
    conf.set_override('haproxy_sudo', 'never', group='kubespray_mgmt')
    return conf


def _instantiate_params(workers=2):
    body = json.loads((SAMPLES / 'instantiate_simple.json').read_text())
    extra = body['additionalParams']
    nodes = [{'role': 'master', 'ssh_ip': '192.168.10.11',
              'nic_ip': '10.10.0.11'},
             {'role': 'external_lb', 'ssh_ip': LB, 'nic_ip': '10.10.0.40'}]
    nodes += [{'role': 'worker', 'ssh_ip': '192.168.10.%d' % (21 + i),
               'nic_ip': '10.10.0.%d' % (21 + i)} for i in range(workers)]
    extra['k8s_cluster_installation_param']['nodes'] = nodes
    return extra


def _secret():
    return json.dumps({'data': {
        'token': base64.b64encode(TOKEN.encode()).decode(),
        'ca.crt': base64.b64encode(CA_PEM.encode()).decode()}})


def _nodes_json(names):
    return json.dumps({'items': [{'metadata': {'name': n}, 'status': {
        'conditions': [{'type': 'Ready', 'status': 'True'}]}}
        for n in names]})


class Harness:
    """LcmHooks wired to a FakePool kept across hooks."""

    def __init__(self, conf, k8s_nodes=(), unreachable=()):
        self.pool = FakePool(unreachable)
        self.registry = FakeRegistry()
        self.hooks = v1.LcmHooks(conf, pool_factory=lambda: self.pool,
                                 vim_registry=self.registry,
                                 package_dir_of=lambda c, i: None)
        self.ansible = self.pool.connection(ANSIBLE)
        self.ansible.script(r'^program:detect-layout ', stdout=LAYOUT)
        self.master = self.pool.connection('192.168.10.11')
        self.master.script(r'get secret', stdout=_secret())
        self.master.script(r'get nodes -o json',
                           stdout=_nodes_json(k8s_nodes))
        self.master.script(r'get configmap cluster-info', stdout=json.dumps(
            {'data': {'kubeconfig': json.dumps({'clusters': [{'cluster': {
                'server': 'https://%s:8383' % LB}}]})}}))
        self.lb = self.pool.connection(LB)
        # inst-1 is instantiated: its record exists (statestore refuses
        # scale, heal and terminate of an instance without one).
        store = records.RecordStore.from_conf(conf)
        if store.state('inst-1') == records.MISSING:
            store.save(records.InstanceRecord('inst-1'))

    def instance(self, extra):
        return types.SimpleNamespace(
            id='inst-1', vnfd_id='vnfd', vim_connection_info=[],
            instantiated_vnf_info=types.SimpleNamespace(
                additional_params=extra, instance_id='stack',
                vnfc_resource_info=[]))

    def playbooks(self):
        return [c.rsplit(' ', 1)[-1] for c in self.ansible.commands
                if 'ansible-playbook -i' in c]

    def workspace_files(self):
        prefix = '/home/ubuntu/kubespray/inventory/mycluster/inst-1/'
        return {k[len(prefix):]: v for k, v in self.ansible.files.items()
                if k.startswith(prefix)}


def _request(extra, **fields):
    return types.SimpleNamespace(additional_params=extra, **fields)


def test_an_ansible_the_checkout_refuses_stops_before_any_change(conf):
    """kubespray's first play would stop the run; the driver says so
    before uploading anything or touching a node."""
    h = Harness(conf)
    h.ansible.script(r'^program:detect-layout ', stdout=LAYOUT + (
        'KS:minimal_ansible_version:2.18.0\n'
        'KS:maximal_ansible_version:2.19.0\n'
        'KS:ANSIBLE:ansible-playbook [core 2.19.14]\n'), first=True)
    extra = _instantiate_params()
    with pytest.raises(exceptions.KubesprayCheckoutUnsupported,
                       match=r'Ansible 2\.18\.0 <= version < 2\.19\.0 .* '
                             r'is 2\.19\.14'):
        h.hooks.instantiate_end(None, h.instance(extra), _request(extra),
                                None, None)
    assert h.playbooks() == [] and h.workspace_files() == {}
    assert h.lb.commands == [] and h.master.commands == []


def test_instantiate_end(conf):
    h = Harness(conf)
    extra = _instantiate_params()
    h.hooks.instantiate_end(None, h.instance(extra), _request(extra), None,
                            None)
    assert h.playbooks() == ['cluster.yml']
    files = h.workspace_files()
    hosts = yaml.safe_load(files['hosts.yaml'])
    assert sorted(hosts['all']['hosts']) == [
        'master-10-10-0-11', 'worker-10-10-0-21', 'worker-10-10-0-22']
    assert h.ansible.modes[
        '/home/ubuntu/kubespray/inventory/mycluster/inst-1/host_vars/'
        'worker-10-10-0-21.yaml'] == 0o600
    assert TOKEN not in ''.join(h.ansible.commands + h.master.commands)
    haproxy = h.lb.files['/etc/haproxy/haproxy.cfg.new']
    assert 'worker-10-10-0-22' in haproxy and 'master-10-10-0-11' in haproxy
    assert h.registry.calls == [('register', 'kubernetes_vim_simple')]
    access = h.registry.current['kubernetes_vim_simple']
    assert access.token == TOKEN
    assert access.server == 'https://%s:8383' % LB
    assert TOKEN in h.lb.files['.kube/config']
    assert h.lb.modes['.kube/config'] == 0o600


def test_instantiate_records_the_masters_host_keys_reading_nothing(conf):
    """status reads every master but records no key: instantiate does,
    by a login alone (ClusterDriver.record_host_keys), with no
    certificate read on the way."""
    h = Harness(conf)
    extra = _instantiate_params()
    h.hooks.instantiate_end(None, h.instance(extra), _request(extra), None,
                            None)
    assert not [c for c in h.master.commands if 'kubeadm' in c]
    keys = records.RecordStore.from_conf(conf).load('inst-1').keys
    assert keys[('192.168.10.11', 22)] == h.pool.known[
        ('192.168.10.11', 22)]


def test_instantiate_runs_commands_in_order(conf):
    h = Harness(conf)
    extra = _instantiate_params()
    h.hooks.instantiate_end(None, h.instance(extra), _request(extra), None,
                            None)
    cmds = h.ansible.commands
    # The claim's one command makes the workspace ready, then inspects
    # the checkout; the playbook comes after.
    opened = next(i for i, c in enumerate(cmds) if 'mkdir' in c)
    assert 'KS:MISSING' in cmds[opened]
    assert cmds[opened].index('mkdir') < cmds[opened].index('KS:MISSING')
    play = next(i for i, c in enumerate(cmds) if 'ansible-playbook -i' in c)
    assert opened < play
    lb_calls = [c[0] for c in h.lb.calls]
    assert lb_calls.index('write_file') < lb_calls.index('run')


def test_instantiate_playbook_failure_then_rerun_converges(conf):
    h = Harness(conf)
    extra = _instantiate_params()
    h.ansible.script(r'cluster\.yml$', stdout='fatal: [worker]: boom\n' +
                     RECAP, exit_code=2, times=1)
    with pytest.raises(exceptions.PlaybookFailed) as info:
        h.hooks.instantiate_end(None, h.instance(extra), _request(extra),
                                None, None)
    assert ANSIBLE in str(info.value) and 'cluster.yml' in str(info.value)
    assert h.registry.calls == []
    h.hooks.instantiate_end(None, h.instance(extra), _request(extra), None,
                            None)
    assert h.playbooks() == ['cluster.yml', 'cluster.yml']
    assert [c[0] for c in h.registry.calls] == ['register']


def test_scale_end_adds_only_missing_workers(conf):
    h = Harness(conf, k8s_nodes=['master-10-10-0-11', 'worker-10-10-0-21',
                                 'worker-10-10-0-22'])
    base = _instantiate_params(2)
    extra = _instantiate_params(4)
    instance = h.instance(extra)
    instance.instantiated_vnf_info.additional_params = extra
    h.hooks.scale_end(None, instance, _request({}, type='SCALE_OUT'),
                      None, None, scale_out_id_list=['s3', 's4'])
    # The workers of the instantiated params (those Kubernetes knows)
    # stay out of the limit; only the ones the scale-out added join.
    missing = [n for n in _worker_names(extra)
               if n not in _worker_names(base)]
    assert missing == ['worker-10-10-0-23', 'worker-10-10-0-24']
    scale = [c for c in h.ansible.commands
             if 'ansible-playbook -i' in c and 'scale.yml' in c]
    assert len(scale) == 1
    assert '--limit=%s ' % ','.join(missing) in scale[0]
    assert h.playbooks() == ['playbooks/facts.yml', 'scale.yml']


def _programs_run(conn, name):
    return [c for c in conn.commands if programs.MARKER + name + '\n' in c]


def test_a_scale_hook_reads_each_record_and_asks_kubectl_once(conf):
    # Issue 40: the claim's one command reads the layout and the
    # records; the master that answered kubectl is asked once.
    h = Harness(conf, k8s_nodes=['master-10-10-0-11', 'worker-10-10-0-21',
                                 'worker-10-10-0-22'])
    base = _instantiate_params(2)
    h.hooks.instantiate_end(None, h.instance(base), _request(base), None,
                            None)
    for conn in (h.ansible, h.master):
        conn.calls.clear()
    extra = _instantiate_params(4)
    h.hooks.scale_end(None, h.instance(extra), _request({}, type='SCALE_OUT'),
                      None, None, scale_out_id_list=['s3', 's4'])
    assert len(_programs_run(h.ansible, kubespray.OPEN)) == 1
    assert _programs_run(h.ansible, detached.ENSURE) == []
    assert _programs_run(h.ansible, kubespray.DETECT) == []
    read = [c[1].rsplit('/', 1)[-1] for c in h.ansible.calls
            if c[0] == 'read_file']
    assert not {inventory.HOSTS_FILE, labels.RECORD_FILE,
                kubeversion.RECORD_FILE} & set(read)
    assert h.workspace_files()[inventory.HOSTS_FILE]  # they were there
    probes = [c for c in h.master.commands if 'version --client' in c]
    assert len(probes) == 1
    assert any('cluster-info' in c for c in h.master.commands)


def _worker_names(extra):
    """The node names of the workers of instantiate params."""
    return ['worker-' + n['nic_ip'].replace('.', '-') for n in
            extra['k8s_cluster_installation_param']['nodes']
            if n['role'] == 'worker']


def _scale_out_by_two(conf, workers, probe=None):
    names = ['master-10-10-0-11'] + ['worker-10-10-0-%d' % (21 + i)
                                     for i in range(workers)]
    h = Harness(conf, k8s_nodes=names)
    if probe is not None:
        h.ansible.script(r'^program:fact-cache-probe ', stdout=probe(names))
    extra = _instantiate_params(workers + 2)
    instance = h.instance(extra)
    h.hooks.scale_end(None, instance, _request({}, type='SCALE_OUT'),
                      None, None, scale_out_id_list=['s1', 's2'])
    return h


def _fresh_cache(names):
    return ('FC:TIMEOUT:86400\n'
            'FC:NOW:1000000\n' + ''.join('FC:ENTRY:%s:999000\n' % n
                                         for n in names[:-1]))


def test_scale_end_refreshes_only_stale_facts(conf):
    h = _scale_out_by_two(conf, 3, probe=_fresh_cache)
    facts = [c for c in h.ansible.commands
             if 'ansible-playbook -i' in c and 'facts.yml' in c]
    # The last old worker has no entry: only it is gathered.
    assert len(facts) == 1 and '--limit=worker-10-10-0-23 ' in facts[0]
    probe = [c for c in h.ansible.commands if 'FC:TIMEOUT' in c]
    assert len(probe) == 1 and 'worker-10-10-0-25' not in probe[0]


def test_scale_end_commands_do_not_grow_with_the_node_count(conf):
    small = _scale_out_by_two(conf, 3, probe=_fresh_cache)
    large = _scale_out_by_two(conf, 60, probe=_fresh_cache)
    assert len(small.ansible.calls) == len(large.ansible.calls)
    assert [c for c in large.ansible.calls if c[0] == 'write_file'] == []
    host_vars = [k for k in large.workspace_files() if 'host_vars/' in k]
    assert len(host_vars) == 63


def test_scale_start_drains_and_removes(conf):
    h = Harness(conf, k8s_nodes=['master-10-10-0-11', 'worker-10-10-0-21',
                                 'worker-10-10-0-22'])
    extra = _heat_like(h, 2, {'worker-10-10-0-22': 'gone'})
    instance = h.instance(extra)
    h.master.script(r'get node worker-10-10-0-22',
                    stdout='node/worker-10-10-0-22\n')
    h.master.script(r'get pods', stdout=json.dumps({'items': []}))
    hooks = h.hooks
    hooks.scale_start(None, instance, _request({}, type='SCALE_IN'), None,
                      None, scale_out_id_list=['gone'])
    haproxy = h.lb.files['/etc/haproxy/haproxy.cfg.new']
    assert 'worker-10-10-0-22' not in haproxy
    drain = [c for c in h.master.commands if ' drain ' in c]
    assert len(drain) == 1 and 'worker-10-10-0-22' in drain[0]
    assert h.playbooks() == ['remove-node.yml']
    vars_file = h.workspace_files()['remove-node-vars.yaml']
    assert yaml.safe_load(vars_file) == {'node': 'worker-10-10-0-22',
                                         'skip_confirmation': True}
    hosts = yaml.safe_load(h.workspace_files()['hosts.yaml'])
    assert 'worker-10-10-0-22' not in hosts['all']['hosts']
    assert ('192.168.10.22', 22) in h.pool.forgotten


def test_scale_in_sends_the_removal_vars_with_the_inventory(conf):
    # remove-node-vars.yaml rides in the inventory's tar: no transfer
    # of its own (issue 40 item 5).
    h = Harness(conf)
    extra = _heat_like(h, 2, {'worker-10-10-0-22': 'gone'})
    h.master.script(r'get node worker-10-10-0-22',
                    stdout='node/worker-10-10-0-22\n')
    h.master.script(r'get pods', stdout=json.dumps({'items': []}))
    h.hooks.scale_start(None, h.instance(extra),
                        _request({}, type='SCALE_IN'), None, None,
                        scale_out_id_list=['gone'])
    assert [c for c in h.ansible.calls if c[0] == 'write_file'] == []
    assert yaml.safe_load(h.workspace_files()['remove-node-vars.yaml'])[
        'node'] == 'worker-10-10-0-22'
    assert h.playbooks() == ['remove-node.yml']


def test_scale_in_finds_kubectl_and_reads_the_nodes_once(conf):
    # One command proves kubectl runs and lists the nodes; the removed
    # node's readiness comes from that list; one drains and reads the
    # pods left (issue 40 item 5).
    names = ['master-10-10-0-11', 'worker-10-10-0-21', 'worker-10-10-0-22']
    h = Harness(conf, k8s_nodes=names)
    extra = _heat_like(h, 2, {'worker-10-10-0-22': 'gone'})
    h.master.script(r'get pods', stdout=json.dumps({'items': []}))
    h.hooks.scale_start(None, h.instance(extra),
                        _request({}, type='SCALE_IN'), None, None,
                        scale_out_id_list=['gone'])
    reads = [c for c in h.master.commands
             if ' get node' in c or 'version --client' in c]
    assert len(reads) == 1 and 'version --client && ' in reads[0]
    # The drain and its first look at the pods left: one command.
    [drain] = [c for c in h.master.commands if ' drain ' in c or
               ' get pods ' in c]
    assert ' drain worker-10-10-0-22 ' in drain and ' && ' in drain
    # The last inventory's command closes Ansible's SSH master to it.
    replaces = [c for c in h.ansible.commands
                if 'kubespray-mgmt-script: replace-workspace' in c]
    socket_name = isolation.control_socket_name('192.168.10.22', 22,
                                                'ubuntu')
    assert replaces[-1].endswith('/.ansible/cp 5 ' + socket_name)
    assert socket_name not in replaces[0]


def _heat_like(h, workers, stacks):
    """Params without a nodes list; the VMs come as Heat would give them."""
    spec = params.parse_params(_instantiate_params(workers))
    h.hooks._vms = lambda c, i, r, s: _with_records(
        nodes.nodes_from_spec(spec), stacks)
    extra = _instantiate_params(workers)
    del extra['k8s_cluster_installation_param']['nodes']
    return extra


def _with_records(cluster, stacks):
    records = {}
    for node in cluster.k8s_nodes:
        records[node.name] = heat.VmRecord(
            address=core.NodeAddress(node.role, node.ssh_address,
                                     node.cluster_address),
            stack_id=stacks.get(node.name))
    return cluster, records


def test_scale_in_of_unreachable_worker_is_ungraceful(conf):
    h = Harness(conf, unreachable=['192.168.10.22'])
    extra = _heat_like(h, 2, {'worker-10-10-0-22': 'gone'})
    h.master.script(r'get node worker-10-10-0-22',
                    stdout='node/worker-10-10-0-22\n')
    h.hooks.scale_start(None, h.instance(extra),
                        _request({}, type='SCALE_IN'), None, None,
                        scale_out_id_list=['gone'])
    assert not [c for c in h.master.commands if ' drain ' in c]
    removal = yaml.safe_load(h.workspace_files()['remove-node-vars.yaml'])
    assert removal['reset_nodes'] is False
    assert removal['allow_ungraceful_removal'] is True


def test_scale_out_rollback_removes_nodes_that_never_joined(conf):
    h = Harness(conf)
    extra = _heat_like(h, 2, {})
    # scale_name_list names group members; none of them is in Kubernetes
    h.hooks.scale_start(None, h.instance(extra),
                        _request({}, type='SCALE_OUT'), None, None,
                        scale_name_list=['member-x'])
    assert 'remove-node.yml' not in h.playbooks()


def test_terminate_end_unregisters_and_removes_workspace(conf):
    h = Harness(conf)
    extra = _instantiate_params()
    h.hooks.instantiate_end(None, h.instance(extra), _request(extra), None,
                            None)
    h.hooks.terminate_end(None, h.instance(extra), None, None, None)
    assert h.registry.calls == [('register', 'kubernetes_vim_simple'),
                                ('unregister', 'kubernetes_vim_simple')]
    assert any('rm -rf -- "$1"' in c and c.endswith(
        ' sh /home/ubuntu/kubespray/inventory/mycluster/inst-1 '
        '/home/ubuntu/kubespray/inventory/mycluster/inst-1/.ansible/cp 5')
        for c in h.ansible.commands)
    assert h.playbooks() == ['cluster.yml']


def test_terminate_start_resets_only_when_asked(conf):
    h = Harness(conf)
    extra = _instantiate_params()
    h.hooks.terminate_start(None, h.instance(extra), None, None, None)
    assert h.ansible.calls == []
    extra['k8s_cluster_installation_param']['kubespray'] = {
        'reset_on_terminate': True}
    h.ansible.files['/home/ubuntu/kubespray/inventory/mycluster/inst-1/'
                    'hosts.yaml'] = yaml.safe_dump(
        {'all': {'hosts': {'master-10-10-0-11': {}}}})
    h.hooks.terminate_start(None, h.instance(extra), None, None, None)
    assert h.playbooks() == ['reset.yml']


def test_heal_whole_vnf_terminates_then_instantiates(conf):
    h = Harness(conf)
    extra = _instantiate_params()
    h.hooks.instantiate_end(None, h.instance(extra), _request(extra), None,
                            None)
    request = _request({}, vnfc_instance_id=[])
    h.hooks.heal_start(None, h.instance(extra), request, None, None)
    h.hooks.heal_end(None, h.instance(extra), request, None, None)
    assert [c[0] for c in h.registry.calls] == [
        'register', 'unregister', 'register']
    assert h.playbooks() == ['cluster.yml', 'cluster.yml']


def test_bad_params_fail_before_any_connection(conf):
    h = Harness(conf)
    extra = _instantiate_params()
    extra['k8s_cluster_installation_param']['master_node']['pod_cidr'] = \
        '10.0.0.0/33'
    with pytest.raises(exceptions.MgmtDriverParamInvalid,
                       match='pod_cidr'):
        h.hooks.instantiate_end(None, h.instance(extra), _request(extra),
                                None, None)
    assert all(not c.calls for c in h.pool.connections.values())


def test_terminate_end_after_refused_instantiate_touches_nothing(conf):
    h = Harness(conf)
    instance = h.instance({})
    h.hooks.terminate_end(None, instance, None, None, None)
    assert h.registry.calls == []
    assert all(not c.calls for c in h.pool.connections.values())


def test_lb_install_script_runs_as_root_with_the_proxy(conf, tmp_path):
    (tmp_path / 'Scripts').mkdir()
    (tmp_path / 'Scripts' / 'install_external_lb.sh').write_text('exit 0\n')
    conf.set_override('haproxy_sudo', 'auto', group='kubespray_mgmt')
    h = Harness(conf)
    h.hooks._package_dir_of = lambda c, i: str(tmp_path)
    extra = _instantiate_params()
    h.hooks.instantiate_end(None, h.instance(extra), _request(extra), None,
                            None)
    assert h.lb.modes[gateways.LB_SCRIPT] == 0o700
    [install] = [c for c in h.lb.commands if gateways.LB_SCRIPT in c]
    assert install == ('sudo -n env KUBESPRAY_MGMT_PROXY_ON_STDIN=1 bash '
                       + gateways.LB_SCRIPT)
    lines = h.lb.stdin_of[install].splitlines()
    assert lines[:2] == ['http_proxy=http://proxy.example.com:3128',
                         'https_proxy=http://proxy.example.com:3128']
    assert lines[2].startswith('no_proxy=') and len(lines) == 3


def test_lb_install_script_gets_proxy_credentials_off_the_command_line(
        conf, tmp_path):
    (tmp_path / 'Scripts').mkdir()
    (tmp_path / 'Scripts' / 'install_external_lb.sh').write_text('exit 0\n')
    h = Harness(conf)
    h.hooks._package_dir_of = lambda c, i: str(tmp_path)
    extra = _instantiate_params()
    url = 'http://user1:s3cret@proxy.example.com:3128'
    extra['k8s_cluster_installation_param']['proxy'] = {
        'http_proxy': url, 'https_proxy': url, 'no_proxy': '.corp'}
    h.hooks.instantiate_end(None, h.instance(extra), _request(extra), None,
                            None)
    [install] = [c for c in h.lb.commands if gateways.LB_SCRIPT in c]
    assert 's3cret' not in install and all(
        's3cret' not in c for c in h.lb.commands)
    given = dict(line.split('=', 1)
                 for line in h.lb.stdin_of[install].splitlines())
    assert given['http_proxy'] == given['https_proxy'] == url
    # As kubespray gets it: the user's entries, then the cluster's.
    assert given['no_proxy'].startswith('.corp,localhost,127.0.0.1,')
    assert '10.10.0.11' in given['no_proxy'].split(',')


def test_kubectl_and_haproxy_follow_the_drivers_own_conf(conf):
    conf.set_override('kubectl_timeout', 7, group='kubespray_mgmt')
    conf.set_override('haproxy_bind_addresses', ['10.10.0.40'],
                      group='kubespray_mgmt')
    conf.set_override('haproxy_chroot', '', group='kubespray_mgmt')
    h = Harness(conf)
    extra = _instantiate_params()
    h.hooks.instantiate_end(None, h.instance(extra), _request(extra), None,
                            None)
    haproxy = h.lb.files['/etc/haproxy/haproxy.cfg.new']
    assert 'bind 10.10.0.40:8383\n' in haproxy and 'chroot' not in haproxy
    spec = params.parse_params(extra)
    cluster = nodes.nodes_from_spec(spec)
    client = driver.ClusterDriver(spec, 'inst-1', h.pool,
                                  conf).kubectl_client(cluster)
    assert client.settings.command_timeout == 7


@pytest.mark.parametrize('hook, request_fields', [
    ('scale_start', {'type': 'SCALE_IN'}),
    ('heal_start', {'vnfc_instance_id': ['vnfc-1']}),
])
def test_vnfc_operations_refuse_an_explicit_nodes_list(conf, hook,
                                                       request_fields):
    h = Harness(conf)
    extra = _instantiate_params(2)
    with pytest.raises(exceptions.MgmtDriverParamInvalid, match='nodes'):
        getattr(h.hooks, hook)(None, h.instance(extra),
                               _request({}, **request_fields), None, None,
                               scale_out_id_list=['s1'])
    assert all(not c.calls for c in h.pool.connections.values())


def _instantiate_once(conf, fail=None):
    """Run instantiate_end; *fail* = (host, command) fails once."""
    h = Harness(conf)
    extra = _instantiate_params()
    if fail:
        import re
        h.pool.connection(fail[0]).script(
            '^%s$' % re.escape(fail[1]), stderr='injected', exit_code=1,
            times=1, first=True)
    run = lambda: h.hooks.instantiate_end(  # noqa: E731
        None, h.instance(extra), _request(extra), None, None)
    return h, run


def _remote_commands(h):
    return [(host, cmd) for host, conn in h.pool.connections.items()
            for cmd in conn.commands]


def test_a_failure_at_any_remote_step_then_a_rerun_converges(conf):
    baseline, run = _instantiate_once(conf)
    run()
    steps = _remote_commands(baseline)
    assert len(steps) >= 10
    final_lb = baseline.lb.files['/etc/haproxy/haproxy.cfg.new']
    for host, command in steps:
        h, run = _instantiate_once(conf, (host, command))
        if command != 'true':
            with pytest.raises((exceptions.MgmtDriverRemoteCommandError,
                                exceptions.MgmtDriverOtherError)):
                run()
        # else the login that records a master's host key: best effort
        # (ClusterDriver.record_host_keys), a warning and no failure.
        run()
        assert [c[0] for c in h.registry.calls] == ['register'], command
        assert h.lb.files['/etc/haproxy/haproxy.cfg.new'] == final_lb
        assert 'cluster.yml' in h.playbooks()


def test_instantiate_refuses_a_checkout_of_another_version(conf):
    h = Harness(conf)
    extra = _instantiate_params()
    extra['k8s_cluster_installation_param']['kubespray'] = {
        'version': '2.27.0'}
    with pytest.raises(exceptions.KubesprayCheckoutUnsupported) as info:
        h.hooks.instantiate_end(None, h.instance(extra), _request(extra),
                                None, None)
    assert '2.27.0' in str(info.value) and 'v2.31.0' in str(info.value)
    assert h.playbooks() == []


def _scale_out_instance(h):
    extra = _instantiate_params(4)
    instance = h.instance(extra)
    instance.instantiated_vnf_info.additional_params = extra
    return instance


def test_a_failed_join_takes_the_new_workers_out_and_advises(conf):
    h = Harness(conf, k8s_nodes=['master-10-10-0-11', 'worker-10-10-0-21',
                                 'worker-10-10-0-22'])
    # scale.yml fails after worker-23 registered with Kubernetes.
    h.ansible.script(r'scale\.yml$', stdout='fatal: [worker-10-10-0-24]: '
                     'boom\n' + RECAP, exit_code=2)
    h.master.script(r'get nodes -o json', first=True, stdout=_nodes_json(
        ['master-10-10-0-11', 'worker-10-10-0-21', 'worker-10-10-0-22',
         'worker-10-10-0-23']))
    # Before scale.yml (the reconcile's one listing): not yet there.
    h.master.script(r'get nodes -o json', first=True, times=1,
                    stdout=_nodes_json(['master-10-10-0-11',
                                        'worker-10-10-0-21',
                                        'worker-10-10-0-22']))
    h.master.script(r'get node worker-10-10-0-23', first=True,
                    stdout='node/worker-10-10-0-23\n')
    h.master.script(r'get pods', stdout=json.dumps({'items': []}))
    with pytest.raises(exceptions.PlaybookFailed) as info:
        h.hooks.scale_end(None, _scale_out_instance(h),
                          _request({}, type='SCALE_OUT'), None, None)
    message = str(info.value)
    assert 'scale.yml' in message and 'roll it back' in message
    assert 'does not run the driver on a retry' in message
    # The one that joined is drained and removed; both leave the inventory.
    assert h.playbooks() == ['playbooks/facts.yml', 'scale.yml',
                             'remove-node.yml']
    assert [c for c in h.master.commands if ' drain ' in c and
            'worker-10-10-0-23' in c]
    hosts = yaml.safe_load(h.workspace_files()['hosts.yaml'])['all']
    assert sorted(hosts['hosts']) == ['master-10-10-0-11',
                                      'worker-10-10-0-21',
                                      'worker-10-10-0-22']
    # HAProxy never served the new workers.
    assert 'worker-10-10-0-23' not in h.lb.files.get(
        '/etc/haproxy/haproxy.cfg.new', '')


def test_every_operation_first_deletes_nodes_whose_vm_is_gone(conf):
    # worker-10-10-0-29 joined, then Tacker rolled its scale-out back:
    # the VM is gone, the Kubernetes node is NotReady and stays.
    h = Harness(conf, k8s_nodes=['master-10-10-0-11', 'worker-10-10-0-21',
                                 'worker-10-10-0-22', 'worker-10-10-0-29'])
    extra = _instantiate_params(2)
    instance = h.instance(extra)
    instance.instantiated_vnf_info.additional_params = extra
    h.hooks.scale_end(None, instance, _request({}, type='SCALE_OUT'),
                      None, None)
    deletes = [c for c in h.master.commands if ' delete node ' in c]
    assert len(deletes) == 1 and 'worker-10-10-0-29' in deletes[0]
    assert not [c for c in h.master.commands if ' drain ' in c]


def test_with_advice_keeps_the_exception_and_appends():
    exc = exceptions.MgmtDriverOtherError(error_message='boom')
    same = exceptions.with_advice(exc, 'Do this next.')
    assert same is exc and str(exc).endswith('boom. Do this next.')
    assert exceptions.with_advice(exc, None) is exc
