"""Validation of additionalParams: every rule and every message."""

import copy
import ipaddress

import hypothesis
import pytest

from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.model import merging
from mgmt_driver.model import params
from mgmt_driver.remote import ssh
from tests.unit import params_data

P = 'k8s_cluster_installation_param'
DELETE = object()


def _set(request, path, value):
    """Set (or delete, with DELETE) the dotted *path* under P."""
    keys = path.split('.')
    target = request[P]
    for key in keys[:-1]:
        target = target.setdefault(key, {})
    if value is DELETE:
        target.pop(keys[-1], None)
    else:
        target[keys[-1]] = value
    return request


def problems_of(request, **kwargs):
    kwargs.setdefault('need_cp_names', False)
    with pytest.raises((exceptions.ParamsInvalid,
                        exceptions.ParamsNotFound)) as info:
        params.parse_params(request, **kwargs)
    return info.value.problems


def problems_with(path, value, base=None, **kwargs):
    request = base if base is not None else params_data.minimal()
    return problems_of(_set(request, path, value), **kwargs)


# ------------------------------------------------------------ valid inputs

def test_tacker_sample_request_validates_unchanged():
    request = params_data.tacker_sample()
    before = copy.deepcopy(request)
    spec = params.parse_params(request)
    assert request == before
    assert spec.vim_name == 'kubernetes_vim'
    assert spec.master.aspect_id == 'master_instance'
    assert spec.master.ssh_cp_name == 'masterNode_FloatingIP'
    assert spec.master.nic_cp_name == 'masterNode_CP1'
    assert spec.master.login == core.Login('ubuntu', 'ubuntu', None, 22)
    assert spec.worker.nic_cp_name == 'workerNode_CP2'
    assert spec.pod_cidr == ipaddress.ip_network('192.168.0.0/16')
    assert spec.service_cidr == ipaddress.ip_network('10.199.187.0/24')
    assert spec.cluster_cp_name == 'vip_CP'
    assert spec.proxy.https_proxy == 'https://user2:password2@host2:3129'
    assert spec.proxy.no_proxy == ('192.168.246.0/24', '10.0.0.1')
    assert str(spec.proxy.k8s_node_cidr) == '10.10.0.0/24'
    assert spec.ansible.ip_address == '10.10.0.50'
    assert spec.ansible.transferring_inventory_path == \
        '/home/ubuntu/kubespray-2.16.0/inventory/mycluster'
    assert spec.external_lb.script_path == 'Scripts/install_external_lb.sh'
    assert spec.external_lb.login.password == 'ubuntu'
    assert spec.script_path == 'Scripts/install_k8s_cluster.sh'


def test_defaults():
    spec = params.parse_params(params_data.minimal(), need_cp_names=False)
    assert str(spec.pod_cidr) == core.DEFAULT_POD_CIDR
    assert str(spec.service_cidr) == core.DEFAULT_SERVICE_CIDR
    assert spec.external_lb.api_port == 8383
    assert spec.external_lb.nodeport_range == (30000, 32767)
    assert spec.external_lb.script_path is None
    assert [spec.login_for(r).port for r in core.ROLES] == [22, 22, 22]
    assert spec.ansible.login.port == 22
    assert spec.kubespray == core.KubesprayOptions()
    assert dict(spec.kubespray.extra_vars) == {}
    assert spec.kubespray.forks is None
    assert spec.kubespray.reset_on_terminate is False
    assert not spec.proxy.enabled
    assert spec.nodes is None
    assert spec.vim_name is None
    assert spec.labels_for(core.ROLE_MASTER) == {}
    assert spec.labels_for(core.ROLE_EXTERNAL_LB) == {}


@pytest.mark.parametrize('name', ['instantiate_simple.json',
                                  'instantiate_ha.json',
                                  'instantiate_keyauth.json',
                                  'instantiate_node_pools.json'])
def test_samples_validate(name):
    spec = params.parse_params(params_data.sample(name))
    assert spec.master.aspect_id == 'master_instance'
    assert spec.worker.aspect_id == 'worker_instance'
    assert spec.master.ssh_cp_name == 'masterNode_FloatingIP'
    assert spec.worker.nic_cp_name == 'workerNode_CP2'
    assert spec.external_lb.ssh_cp_name == 'externalLB_FloatingIP'
    assert spec.ansible.kubespray_root_path == '/home/ubuntu/kubespray'


def test_ha_sample_extensions():
    spec = params.parse_params(params_data.sample('instantiate_ha.json'))
    assert spec.labels_for(core.ROLE_WORKER) == {
        'example.com/role': 'worker', 'node.kubernetes.io/pool': 'general'}
    assert spec.kubespray.forks == 20
    assert spec.kubespray.version == '2.27.0'
    assert spec.kubespray.extra_vars['helm_enabled'] is True
    assert spec.kubespray.extra_vars['kube_network_node_prefix'] == 24


def test_keyauth_sample_has_keys_and_no_password():
    spec = params.parse_params(params_data.sample('instantiate_keyauth.json'))
    for role in core.ROLES:
        login = spec.login_for(role)
        assert login.password is None
        assert login.key_file.startswith('/etc/tacker/kubespray/')
    assert spec.ansible.login.key_file.endswith('ansible_id_ed25519')


def test_extensions_are_parsed():
    request = params_data.minimal()
    _set(request, 'master_node.port', 2201)
    _set(request, 'worker_node.ssh_key_file', '~/.ssh/worker')
    _set(request, 'ansible.port', 2222)
    _set(request, 'external_lb_param.ssh_port', 2230)
    _set(request, 'external_lb_param.api_port', 6443)
    _set(request, 'external_lb_param.nodeport_range', '31000-31999')
    _set(request, 'kubespray', {'forks': 5, 'version': 'v2.24.1',
                                'reset_on_terminate': True,
                                'extra_vars': {'kube_version': '1.29.0'}})
    spec = params.parse_params(request, need_cp_names=False)
    assert spec.master.login.port == 2201
    assert spec.worker.login.key_file == '~/.ssh/worker'
    assert spec.worker.login.password == 'w-pass'
    assert spec.ansible.login.port == 2222
    assert spec.external_lb.login.port == 2230
    assert spec.external_lb.api_port == 6443
    assert spec.external_lb.nodeport_range == (31000, 31999)
    assert spec.kubespray.version == '2.24.1'
    assert spec.kubespray.reset_on_terminate is True
    # Typed, out of the free-form extra vars.
    assert spec.kubespray.kube_version == core.KubeVersion((1, 29, 0))
    assert spec.kubespray.extra_vars == {}


def test_paths_are_normalised():
    request = params_data.minimal()
    _set(request, 'ansible.kubespray_root_path', '/opt//kubespray/')
    _set(request, 'ansible.transferring_inventory_path',
         '/opt/kubespray/inventory/./c1/')
    spec = params.parse_params(request, need_cp_names=False)
    assert spec.ansible.kubespray_root_path == '/opt/kubespray'
    assert spec.ansible.transferring_inventory_path == \
        '/opt/kubespray/inventory/c1'


def test_addresses_are_normalised_ipv6():
    request = _set(params_data.minimal(), 'ansible.ip_address',
                   'FD00:0:0:0:0:0:0:50')
    spec = params.parse_params(request, need_cp_names=False)
    assert spec.ansible.ip_address == 'fd00::50'


def test_extra_vars_are_read_only_copies():
    request = _set(params_data.minimal(), 'kubespray',
                   {'extra_vars': {'kube_apiserver_enable_admission_plugins':
                                   ['NodeRestriction']}})
    spec = params.parse_params(request, need_cp_names=False)
    request[P]['kubespray']['extra_vars'][
        'kube_apiserver_enable_admission_plugins'].append('changed')
    assert spec.kubespray.extra_vars[
        'kube_apiserver_enable_admission_plugins'] == ['NodeRestriction']
    with pytest.raises(TypeError):
        spec.kubespray.extra_vars['x'] = 1


# ----------------------------------------------------- credentials / keys

def test_default_key_file_replaces_missing_password():
    request = _set(params_data.minimal(), 'worker_node.password', DELETE)
    spec = params.parse_params(request, need_cp_names=False,
                               default_key_file='/etc/kmgmt/id_rsa')
    assert spec.worker.login.key_file == '/etc/kmgmt/id_rsa'
    assert spec.worker.login.password is None
    # A role that has a password does not get the default key.
    assert spec.master.login.key_file is None


def test_password_or_key_required():
    assert problems_with('worker_node.password', DELETE) == [
        P + '.worker_node.password: missing: give password or '
        'ssh_key_file, or set the option [kubespray_mgmt] '
        'ssh_private_key_file']


def test_lb_password_message_names_its_own_field():
    assert problems_with('external_lb_param.ssh_password', '') == [
        P + '.external_lb_param.ssh_password: missing: give ssh_password '
        'or ssh_key_file, or set the option [kubespray_mgmt] '
        'ssh_private_key_file']


def test_login_credentials_and_repr_hide_password():
    login = core.Login('ubuntu', 'Very-Secret-1', '/k', 2222)
    assert ssh.credentials_for(login) == ssh.Credentials(
        username='ubuntu', password='Very-Secret-1', key_file='/k',
        sudo_password='Very-Secret-1')
    assert 'Very-Secret-1' not in repr(login)
    spec = params.parse_params(params_data.tacker_sample())
    assert 'password1' not in repr(spec)


def test_sudo_password_defaults_to_the_login_password():
    spec = params.parse_params(params_data.tacker_sample())
    assert spec.master.login.sudo_password == 'ubuntu'
    assert spec.external_lb.login.sudo_password == 'ubuntu'
    request = params_data.tacker_sample()
    request[P]['master_node']['become_password'] = 'Sudo-Secret-9'
    request[P]['worker_node']['passwordless_sudo'] = True
    request[P]['external_lb_param']['become_password'] = 'Lb-Sudo-3'
    spec = params.parse_params(request)
    assert spec.master.login.sudo_password == 'Sudo-Secret-9'
    assert spec.worker.login.sudo_password is None
    assert spec.external_lb.login.sudo_password == 'Lb-Sudo-3'
    assert 'Sudo-Secret-9' not in repr(spec)
    assert 'Sudo-Secret-9' not in core.describe(spec)
    assert 'masters as ubuntu (SSH port 22) by password, sudo with a ' \
        'password' in core.describe(spec)


def test_a_key_login_asks_no_sudo_password_unless_given():
    login = core.Login('ubuntu', key_file='/k')
    assert login.sudo_password is None
    assert core.Login('ubuntu', key_file='/k',
                      become_password='s').sudo_password == 's'


def test_become_fields_are_refused_where_they_cannot_work():
    request = params_data.minimal()
    request[P]['worker_node'].update(become_password='Sudo-Secret-5',
                                     passwordless_sudo=True)
    request[P]['master_node']['passwordless_sudo'] = 'yes'
    request[P]['ansible']['become_password'] = 'x'
    found = problems_of(request)
    assert found == [
        # Nothing runs as root on the Ansible server.
        P + ".ansible.become_password: unknown key (did you mean "
        "'password'?)",
        P + '.master_node.passwordless_sudo: must be a boolean, not str',
        P + '.worker_node.passwordless_sudo: true says sudo asks no '
        'password, but become_password gives one: give one of them']
    assert 'Sudo-Secret-5' not in str(found)


def test_a_become_password_is_a_secret():
    found = problems_with('master_node.become_password', 'Bad\nSecret-4')
    assert found == [P + '.master_node.become_password: must not contain '
                     'control characters (newline, tab, ...)']
    assert problems_with('external_lb_param.become_password', 7) == [
        P + '.external_lb_param.become_password: must be a string, not int']


# ------------------------------------------------------- single problems

CASES = [
    # (path, value, expected problem after "k8s_cluster_installation_param.")
    ('master_node.pod_cidr', '10.0.0.0/33',
     "master_node.pod_cidr: '10.0.0.0/33' is not a CIDR"),
    ('master_node.pod_cidr', '10.0.0.1/16',
     "master_node.pod_cidr: '10.0.0.1/16' has host bits set (did you mean "
     "'10.0.0.0/16'?)"),
    ('master_node.pod_cidr', 'fd00::/64',
     "master_node.pod_cidr: 'fd00::/64' is an IPv6 network; this field "
     "sets kubespray's IPv4 kube_pods_subnet (put kube_pods_subnet_ipv6 "
     "in kubespray.extra_vars for IPv6)"),
    ('master_node.cluster_cidr', '10.233.64.0/20',
     'master_node.cluster_cidr: 10.233.64.0/20 overlaps the pod CIDR '
     '10.233.64.0/18 (master_node.pod_cidr); kubespray needs them apart'),
    ('master_node.pod_cidr', '10.100.0.0/24',
     'master_node.pod_cidr: 10.100.0.0/24 leaves no room for node pod '
     'ranges: its prefix must be shorter than /24 '
     '(kube_network_node_prefix)'),
    ('master_node.cluster_cidr', 42,
     'master_node.cluster_cidr: must be a string, not int (quote it)'),
    ('ansible.ip_address', '10.10.0.500',
     "ansible.ip_address: '10.10.0.500' is not an IP address"),
    ('ansible.ip_address', 'fe80::1%eth0',
     "ansible.ip_address: 'fe80::1%eth0' is not an IP address"),
    ('master_node.port', 0,
     'master_node.port: 0 is not a port: must be between 1 and 65535'),
    ('worker_node.port', 65536,
     'worker_node.port: 65536 is not a port: must be between 1 and 65535'),
    ('ansible.port', '22',
     'ansible.port: must be an integer, not str'),
    ('external_lb_param.ssh_port', True,
     'external_lb_param.ssh_port: must be an integer, not bool'),
    ('master_node.username', 'ubuntu user',
     "master_node.username: 'ubuntu user' is not a valid user name "
     '(letters, digits, "_.-", at most 32)'),
    ('master_node.username', '-oProxyCommand',
     "master_node.username: '-oProxyCommand' is not a valid user name "
     '(letters, digits, "_.-", at most 32)'),
    ('vim_name', 'vim\nname',
     'vim_name: must not contain control characters (newline, tab, ...)'),
    ('vim_name', 'v' * 256,
     'vim_name: is 256 characters long, more than the 255 a VIM name may '
     'have'),
    ('ansible.kubespray_root_path', 'kubespray',
     "ansible.kubespray_root_path: 'kubespray' is not an absolute path"),
    ('ansible.transferring_inventory_path', '~/inventory',
     "ansible.transferring_inventory_path: '~/inventory' is not an "
     'absolute path'),
    ('ansible.transferring_inventory_path', '/opt/kubespray/inventory/sample',
     "ansible.transferring_inventory_path: '/opt/kubespray/inventory/sample'"
     ' would overwrite kubespray itself; use a directory of its own, such '
     'as /opt/kubespray/inventory/<cluster name>'),
    ('ansible.transferring_inventory_path', '/opt',
     "ansible.transferring_inventory_path: '/opt' would overwrite kubespray"
     ' itself; use a directory of its own, such as '
     '/opt/kubespray/inventory/<cluster name>'),
    ('external_lb_param.script_path', '/tmp/x.sh',
     "external_lb_param.script_path: '/tmp/x.sh' must be a path inside the "
     'VNF package (relative, without "..")'),
    ('script_path', 'Scripts/../../etc/passwd',
     "script_path: 'Scripts/../../etc/passwd' must be a path inside the "
     'VNF package (relative, without "..")'),
    ('master_node.ssh_key_file', 'keys/../../id_rsa',
     'master_node.ssh_key_file: must be an absolute path (or start with '
     '~/) on the conductor host, or a path inside the VNF package without '
     '".."'),
    ('proxy.no_proxy', 5,
     'proxy.no_proxy: must be a comma-separated string or a list of '
     'strings'),
    ('proxy.no_proxy', ['a.example.com', 'b c'],
     "proxy.no_proxy: entry 'b c' contains a space"),
    ('proxy.k8s_node_cidr', '10.233.64.0/20',
     'proxy.k8s_node_cidr: 10.233.64.0/20 overlaps the pod CIDR '
     '10.233.64.0/18'),
    ('proxy.k8s_node_cidr', '10.233.0.0/24',
     'proxy.k8s_node_cidr: 10.233.0.0/24 overlaps the service CIDR '
     '10.233.0.0/18'),
    ('external_lb_param.api_port', 'abc',
     'external_lb_param.api_port: must be an integer, not str'),
    ('external_lb_param.api_port', 30080,
     'external_lb_param.api_port: 30080 lies inside nodeport_range '
     '30000-32767; HAProxy cannot bind both'),
    ('external_lb_param.nodeport_range', '32767-30000',
     "external_lb_param.nodeport_range: '32767-30000' is not a port range "
     '"FIRST-LAST" with 1 <= FIRST <= LAST <= 65535'),
    ('external_lb_param.nodeport_range', '30000:32767',
     "external_lb_param.nodeport_range: '30000:32767' is not a port range "
     '"FIRST-LAST" with 1 <= FIRST <= LAST <= 65535'),
    ('external_lb_param.nodeport_range', [30000, 32767],
     'external_lb_param.nodeport_range: must be a string, not list'),
    ('kubespray.forks', 0,
     'kubespray.forks: 0 must be between 1 and 500'),
    ('kubespray.forks', 501,
     'kubespray.forks: 501 must be between 1 and 500'),
    ('kubespray.version', 'latest',
     "kubespray.version: 'latest' is not a kubespray version such as "
     '"2.24.0"'),
    ('kubespray.version', 'v2.15.1',
     "kubespray.version: 'v2.15.1' is older than the oldest supported "
     'kubespray, v2.16'),
    ('kubespray.reset_on_terminate', 'yes',
     'kubespray.reset_on_terminate: must be a boolean, not str'),
    ('kubespray.extra_vars', ['kube_version'],
     'kubespray.extra_vars: must be a mapping, not list'),
    ('kubespray.extra_vars', {'kube-version': '1.29.0'},
     'kubespray.extra_vars.kube-version: is not an Ansible variable name'),
    ('kubespray.extra_vars', {'kube_pods_subnet': '10.1.0.0/16'},
     'kubespray.extra_vars.kube_pods_subnet: is set by the driver from '
     'master_node.pod_cidr; set that instead'),
    ('kubespray.extra_vars', {'https_proxy': 'http://p:1'},
     'kubespray.extra_vars.https_proxy: is set by the driver from '
     'proxy.https_proxy; set that instead'),
    ('kubespray.extra_vars', {'skip_confirmation': False},
     'kubespray.extra_vars.skip_confirmation: is set by the driver from '
     'the operation; set that instead'),
    ('kubespray.extra_vars', {'ansible_become_password': 'x'},
     'kubespray.extra_vars.ansible_become_password: connection settings '
     'come from the role sections (username, password, ssh_key_file, '
     'port, become_password, passwordless_sudo)'),
    ('kubespray.extra_vars', {'helm_enabled': 'true'},
     'kubespray.extra_vars.helm_enabled: must be a boolean, not str'),
    ('kubespray.extra_vars', {'kube_version': 1.29},
     'kubespray.extra_vars.kube_version: must be a string, not float '
     '(quote it)'),
    ('kubespray.extra_vars', {'kube_version': '1.30'},
     'kubespray.extra_vars.kube_version: is not a Kubernetes version such '
     'as 1.34.3 (or v1.31.4 for kubespray v2.27 and older)'),
    ('kubespray.extra_vars', {'calico_mtu': '1400'},
     'kubespray.extra_vars.calico_mtu: must be an integer, not str'),
    ('kubespray.extra_vars', {'custom': {'a': {1, 2}}},
     'kubespray.extra_vars.custom: value must be YAML data (strings, '
     'numbers, booleans, lists, mappings)'),
    ('master_node.labels', ['zone=a'],
     'master_node.labels: must be a mapping, not list'),
    ('master_node.labels', {'zone': 1},
     'master_node.labels.zone: keys and values must be strings (quote '
     'numbers)'),
    ('master_node.labels', {'bad key': 'a'},
     "master_node.labels.bad key: name 'bad key' is not a label name (1-63 "
     'of "A-Za-z0-9-_.", alphanumeric at both ends)'),
    ('worker_node.labels', {'Example.COM/zone': 'a'},
     "worker_node.labels.Example.COM/zone: prefix 'Example.COM' is not a "
     'DNS subdomain'),
    ('worker_node.labels', {'zone': '-a'},
     "worker_node.labels.zone: value '-a' is not a label value (0-63 of "
     '"A-Za-z0-9-_.", alphanumeric at both ends)'),
    ('worker_node.labels', {'node-role.kubernetes.io/worker': ''},
     'worker_node.labels.node-role.kubernetes.io/worker: the kubelet may '
     'not set labels in the kubernetes.io or k8s.io namespaces (except '
     'node.kubernetes.io/ and kubelet.kubernetes.io/); it would refuse to '
     'start'),
    ('master_node.pasword', 'x',
     "master_node.pasword: unknown key (did you mean 'password'?)"),
    ('external_lb_param.ssh_user', 'x',
     "external_lb_param.ssh_user: unknown key (did you mean "
     "'ssh_username'?)"),
    ('proxy.zzz', 'x',
     'proxy.zzz: unknown key (known keys: http_proxy, https_proxy, '
     'k8s_node_cidr, no_proxy)'),
    ('kubespray.extra_var', {},
     "kubespray.extra_var: unknown key (did you mean 'extra_vars'?)"),
    ('worker_nodes', {},
     "worker_nodes: unknown key (did you mean 'worker_node'?)"),
    ('proxy', 'http://p:3128',
     'proxy: must be a mapping, not str'),
    ('ansible', DELETE, 'ansible: missing'),
    ('external_lb_param', None, 'external_lb_param: missing'),
    ('ansible.kubespray_root_path', DELETE,
     'ansible.kubespray_root_path: missing'),
    ('master_node.username', DELETE, 'master_node.username: missing'),
    ('external_lb_param.ssh_username', '', 'external_lb_param.ssh_username:'
     ' missing'),
]


@pytest.mark.parametrize('path,value,expected', CASES,
                         ids=[case[2].split(':')[0] + '-%d' % index
                              for index, case in enumerate(CASES)])
def test_each_problem_has_its_message(path, value, expected):
    assert problems_with(path, value) == [P + '.' + expected]


@pytest.mark.parametrize('path,value', [
    ('worker_node.labels', {'node.kubernetes.io/pool': 'a',
                            'topology.kubernetes.io/zone': 'z1',
                            'example.com/x': '', 'plain': 'v_1.2-3'}),
    ('proxy.no_proxy', ['.example.com', '10.0.0.0/8']),
    ('proxy.https_proxy', 'http://[fd00::1]:3128'),
    ('kubespray.extra_vars', {'supplementary_addresses_in_ssl_keys':
                              ['api.example.com'], 'x_enabled': False,
                              'nested': {'a': [1, 2.5, None, 'b']}}),
    ('kubespray.version', '2.16'),
    ('external_lb_param.nodeport_range', '20000-40000'),
    ('external_lb_param.api_port', 443),
    ('master_node.cluster_cp_name', 'vip_CP'),
    ('vim_name', ''),
    ('vim_name', 'v' * 255),
])
def test_accepted_values(path, value):
    request = _set(params_data.minimal(), path, value)
    if path == 'external_lb_param.api_port':
        _set(request, 'external_lb_param.nodeport_range', '30000-32767')
    assert params.parse_params(request, need_cp_names=False) is not None


@pytest.mark.parametrize('url,reason', [
    ('ftp://proxy:21', 'the scheme must be http or https'),
    ('http://:3128', 'it has no host'),
    ('http://u:p@proxy:port1', 'its port is not a number between 1 and '
                               '65535'),
    ('http://proxy:99999', 'its port is not a number between 1 and 65535'),
    ('http://proxy:0', 'it has port 0 or a space'),
    ('proxy.example.com:3128', 'the scheme must be http or https'),
])
def test_proxy_url_problems_do_not_show_the_url(url, reason):
    assert problems_with('proxy.https_proxy', url) == [
        P + '.proxy.https_proxy: is not a valid proxy URL '
        '(http[s]://[user:password@]host[:port]): %s (value not shown)'
        % reason]


def test_cp_names_required_for_heat_discovery():
    request = params_data.minimal()
    assert problems_of(request, need_cp_names=True) == [
        P + '.external_lb_param.ssh_cp_name: missing',
        P + '.master_node.ssh_cp_name: missing',
        P + '.worker_node.ssh_cp_name: missing']


def test_custom_node_prefix_moves_the_pod_cidr_limit():
    request = _set(params_data.minimal(), 'master_node.pod_cidr',
                   '10.100.0.0/24')
    _set(request, 'kubespray.extra_vars', {'kube_network_node_prefix': 26})
    spec = params.parse_params(request, need_cp_names=False)
    assert str(spec.pod_cidr) == '10.100.0.0/24'


# ----------------------------------------------------------- whole input

@pytest.mark.parametrize('request_,expected', [
    (None, ['additionalParams: must be a mapping, not null']),
    ([], ['additionalParams: must be a mapping, not list']),
    ({}, [P + ': missing']),
    ({P: 'x'}, [P + ': must be a mapping, not str']),
    ({P: {}}, [P + '.ansible: missing', P + '.external_lb_param: missing',
               P + '.master_node: missing', P + '.worker_node: missing']),
    ({P: {1: 'x', 'master_node': {}}}, None),
])
def test_whole_input_problems(request_, expected):
    found = problems_of(request_)
    if expected is not None:
        assert found == expected
    else:
        assert P + ': keys must be strings, not int' in found


def test_only_missing_fields_raise_not_found():
    request = _set(params_data.minimal(), 'ansible', DELETE)
    _set(request, 'master_node.username', DELETE)
    with pytest.raises(exceptions.ParamsNotFound) as info:
        params.parse_params(request, need_cp_names=False)
    assert isinstance(info.value, exceptions.MgmtDriverNotFound)
    assert len(info.value.problems) == 2
    assert str(info.value) == (
        '2 problem(s) in the input: %s.ansible: missing; '
        '%s.master_node.username: missing' % (P, P))


def test_any_invalid_field_raises_param_invalid():
    request = _set(params_data.minimal(), 'ansible', DELETE)
    _set(request, 'master_node.port', -1)
    with pytest.raises(exceptions.ParamsInvalid) as info:
        params.parse_params(request, need_cp_names=False)
    assert isinstance(info.value, exceptions.MgmtDriverParamInvalid)
    assert info.value.problems == [
        P + '.ansible: missing',
        P + '.master_node.port: -1 is not a port: must be between 1 and '
            '65535']


def test_ten_mistakes_give_ten_problems_each_with_its_path():
    request = params_data.tacker_sample()
    mistakes = {
        'master_node.pod_cidr': '10.0.0.0/33',
        'master_node.port': 70000,
        'worker_node.aspectid': 'worker_instance',
        'worker_node.password': DELETE,
        'ansible.ip_address': '10.10.0.500',
        'ansible.kubespray_root_path': 'kubespray',
        'external_lb_param.api_port': 'abc',
        'external_lb_param.nodeport_range': '32767-30000',
        'proxy.https_proxy': 'ftp://proxy:21',
        'kubespray.forks': 0,
    }
    for path, value in mistakes.items():
        _set(request, path, value)
    found = problems_of(request, need_cp_names=True)
    assert len(found) == 10
    assert sorted(p.split(':')[0] for p in found) == sorted(
        '%s.%s' % (P, path) for path in mistakes)


def test_problems_come_sorted_by_path():
    request = _set(params_data.minimal(), 'worker_node.port', 0)
    _set(request, 'ansible.port', 0)
    _set(request, 'kubespray', {'forks': 0})
    found = problems_of(request)
    assert found == sorted(found)
    assert len(found) == 3


def test_no_secret_in_any_message():
    secrets = ['Pw-Master-7Q', 'Pw-Worker-8R', 'Pw-Ansible-9S', 'Pw-LB-0T',
               'Proxy-Cred-1U', 'Typo-Secret-2V', 'Var-Secret-3W',
               'Proxy-Cred-4X']
    request = params_data.tacker_sample()
    section = request[P]
    section['master_node'].update(password='Pw-Master-7Q', port='bad',
                                  pod_cidr='bad')
    section['worker_node'].update(password=['Pw-Worker-8R'],
                                  passwrd='Typo-Secret-2V')
    section['ansible'].update(password='Pw-Ansible-9S\n', ip_address='x')
    section['external_lb_param'].update(ssh_password={'Pw-LB-0T': 1},
                                        api_port=0)
    section['proxy'].update(
        http_proxy='http://user:Proxy-Cred-1U@proxy:port',
        https_proxy='socks5://user:Proxy-Cred-4X@proxy:1080')
    section['kubespray'] = {'extra_vars': {
        'ansible_password': 'Var-Secret-3W',
        'helm_enabled': 'Var-Secret-3W', 'registry_password': 7}}
    section['kubespray']['extra_vars']['x y'] = 'Var-Secret-3W'
    with pytest.raises(exceptions.ParamsInvalid) as info:
        params.parse_params(request)
    text = str(info.value) + '\n'.join(info.value.problems) + repr(
        info.value.problems)
    assert len(info.value.problems) >= 10
    for secret in secrets:
        assert secret not in text


# ------------------------------------------------------ explicit nodes

def _with_nodes(entries):
    return _set(params_data.minimal(), 'nodes', entries)


NODES = [{'role': 'master', 'ssh_ip': '192.168.1.11', 'nic_ip': '10.10.0.11'},
         {'role': 'worker', 'ssh_ip': '10.10.0.21', 'ssh_port': 2222},
         {'role': 'external_lb', 'ssh_ip': '10.10.0.30'}]


def test_explicit_nodes_make_cp_names_optional():
    spec = params.parse_params(_with_nodes(copy.deepcopy(NODES)))
    assert spec.nodes == (
        core.NodeAddress('master', '192.168.1.11', '10.10.0.11', None),
        core.NodeAddress('worker', '10.10.0.21', '10.10.0.21', 2222),
        core.NodeAddress('external_lb', '10.10.0.30', '10.10.0.30', None))
    assert spec.nodes[0].source == P + '.nodes[0]'


@pytest.mark.parametrize('entries,expected', [
    ('x', ['nodes: must be a list, not str']),
    ([1], ['nodes[0]: must be a mapping, not int']),
    ([{'role': 'lb', 'ssh_ip': '10.0.0.1'}],
     ["nodes[0].role: 'lb' is not one of master, worker, external_lb"]),
    ([{'ssh_ip': '10.0.0.1'}], ['nodes[0].role: missing']),
    ([{'role': 'worker', 'nic_ip': '10.0.0.1'}], ['nodes[0].ssh_ip: missing']),
    (NODES[:1] + [dict(NODES[1], port=22)] + NODES[2:],
     ["nodes[1].port: unknown key (did you mean 'ssh_port'?)"]),
    ([{'role': 'worker', 'ssh_ip': '10.0.0.1', 'ssh_port': 0}],
     ['nodes[0].ssh_port: 0 is not a port: must be between 1 and 65535']),
    (NODES[1:], ['nodes: no master node (need 1, 3 or 5 ...)']),
    (NODES[:2], ['nodes: needs exactly one external_lb node, found 0']),
    (NODES + NODES[2:], ['nodes: needs exactly one external_lb node, '
                         'found 2']),
    ([NODES[0], dict(NODES[0], ssh_ip='192.168.1.12', nic_ip='10.10.0.12'),
      NODES[2]],
     ['nodes: 2 master nodes: etcd needs an odd number (kubespray refuses '
      'an even one)']),
    (NODES + [dict(NODES[1], ssh_ip='10.10.0.22', nic_ip='10.10.0.11')],
     ['nodes[3]: cluster address 10.10.0.11 is already used by '
      'k8s_cluster_installation_param.nodes[0]']),
    (NODES + [{'role': 'worker', 'ssh_ip': '10.10.0.21', 'ssh_port': 2222,
               'nic_ip': '10.10.0.22'}],
     ['nodes[3]: SSH endpoint 10.10.0.21 port 2222 is already used by '
      'k8s_cluster_installation_param.nodes[1]']),
    (NODES + [{'role': 'worker', 'ssh_ip': '10.233.0.9'}],
     ['nodes[3]: cluster address 10.233.0.9 lies in the service CIDR '
      '(master_node.cluster_cidr) 10.233.0.0/18']),
])
def test_explicit_node_problems(entries, expected):
    found = problems_of(_with_nodes(copy.deepcopy(entries)),
                        need_cp_names=True)
    assert found == ['%s.%s' % (P, text) for text in expected]


def test_lb_may_share_an_address_with_a_node():
    entries = copy.deepcopy(NODES)
    entries[2]['ssh_ip'] = '10.10.0.21'
    assert params.parse_params(_with_nodes(entries)).nodes[2].ssh_ip == \
        '10.10.0.21'


# ------------------------------------------------- per-operation overrides

def test_operation_overrides_replace_keys_of_three_sections():
    base = params_data.tacker_sample()
    before = copy.deepcopy(base)
    operation = {P: {
        'worker_node': {'password': 'new-worker-pass',
                        'labels': {'pool': 'b'}},
        'ansible': {'ip_address': '10.10.0.51'},
        'external_lb_param': {'ssh_port': 2200}}}
    operation_before = copy.deepcopy(operation)
    spec = merging.parse_for_operation(base, operation)
    assert spec.worker.login.password == 'new-worker-pass'
    assert spec.worker.login.username == 'ubuntu'  # kept
    assert spec.worker.label_map == {'pool': 'b'}
    assert spec.ansible.ip_address == '10.10.0.51'
    assert spec.ansible.kubespray_root_path == '/home/ubuntu/kubespray-2.16.0'
    assert spec.external_lb.login.port == 2200
    assert base == before and operation == operation_before


def test_labels_override_replaces_the_whole_mapping():
    base = _set(params_data.minimal(), 'worker_node.labels',
                {'a': '1', 'b': '2'})
    spec = merging.parse_for_operation(
        base, {P: {'worker_node': {'labels': {'c': '3'}}}},
        need_cp_names=False)
    assert spec.worker.label_map == {'c': '3'}


@pytest.mark.parametrize('operation', [None, {}, {'other': 1}, {P: None}])
def test_no_override_gives_the_instantiated_spec(operation):
    base = params_data.tacker_sample()
    assert merging.parse_for_operation(base, operation) == \
        params.parse_params(base)


def test_overrides_that_are_not_allowed():
    operation = {P: {'master_node': {'password': 'x'},
                     'worker_node': 'x',
                     'kubespray': {'forks': 3}}}
    with pytest.raises(exceptions.ParamsInvalid) as info:
        merging.parse_for_operation(params_data.tacker_sample(), operation,
                                    operation_name='heal')
    assert info.value.problems == [
        P + '.kubespray: cannot be changed by a heal request (only '
            'worker_node, external_lb_param, ansible, node_pools)',
        P + '.master_node: cannot be changed by a heal request (only '
            'worker_node, external_lb_param, ansible, node_pools)',
        P + '.worker_node: must be a mapping, not str']


def test_override_value_not_a_mapping():
    with pytest.raises(exceptions.ParamsInvalid) as info:
        merging.parse_for_operation(params_data.tacker_sample(), {P: [1]})
    assert info.value.problems == [
        P + ": the scale request's value must be a mapping, not list"]


def test_overrides_are_validated_after_merging():
    operation = {P: {'worker_node': {'port': 0, 'pasword': 'x'}}}
    found = problems_of(merging.merge_operation_params(
        params_data.tacker_sample(), operation), need_cp_names=True)
    assert found == [
        P + ".worker_node.pasword: unknown key (did you mean 'password'?)",
        P + '.worker_node.port: 0 is not a port: must be between 1 and '
            '65535']


def test_override_adds_a_section_missing_from_the_instantiation():
    base = _set(params_data.minimal(), 'external_lb_param', DELETE)
    spec = merging.parse_for_operation(
        base, {P: {'external_lb_param': {'ssh_username': 'lb',
                                         'ssh_password': 'p'}}},
        need_cp_names=False)
    assert spec.external_lb.login.username == 'lb'


# ------------------------------------------------------------- summary

def test_describe_is_one_line_without_secrets():
    spec = params.parse_params(params_data.sample('instantiate_ha.json'))
    text = core.describe(spec)
    assert '\n' not in text
    assert text.startswith('valid: masters as ubuntu (SSH port 22) by '
                           'password')
    assert 'LB api port 8383, nodeports 30000-32767' in text
    assert 'proxy on, 5 extra var(s)' in text
    assert 'proxy.example.com' not in text
    assert 'as ubuntu (SSH port 22) by password' in text
    keyauth = params.parse_params(
        params_data.sample('instantiate_keyauth.json'))
    assert 'workers as ubuntu (SSH port 22) by key' in core.describe(keyauth)


def test_non_string_keys_are_named_by_their_repr():
    request = _set(params_data.minimal(), 'kubespray.extra_vars',
                   {1: 'x'})
    _set(request, 'worker_node.labels', {2: 'b'})
    assert problems_of(request) == [
        P + '.kubespray.extra_vars.1: is not an Ansible variable name',
        P + '.worker_node.labels.2: keys and values must be strings (quote '
            'numbers)']


_json = hypothesis.strategies.recursive(
    hypothesis.strategies.none() | hypothesis.strategies.booleans() |
    hypothesis.strategies.integers() | hypothesis.strategies.text(max_size=8),
    lambda children: hypothesis.strategies.lists(children, max_size=3) |
    hypothesis.strategies.dictionaries(
        hypothesis.strategies.sampled_from(
            ['master_node', 'worker_node', 'ansible', 'external_lb_param',
             'proxy', 'kubespray', 'nodes', 'username', 'password', 'port',
             'pod_cidr', 'labels', 'extra_vars', 'ip_address', 'ssh_ip',
             'role', 'x']), children, max_size=4),
    max_leaves=12)


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(section=_json)
def test_any_input_gives_a_spec_or_our_errors(section):
    try:
        params.parse_params({P: section})
    except (exceptions.ParamsInvalid, exceptions.ParamsNotFound) as exc:
        assert exc.problems
        assert all(p.startswith(P) for p in exc.problems)


@pytest.mark.parametrize('text, number, shown', [
    ('1.34.3', (1, 34, 3), '1.34.3'), ('v1.31.4', (1, 31, 4), 'v1.31.4')])
def test_a_kube_version_keeps_its_spelling(text, number, shown):
    version = core.KubeVersion.parse(text)
    assert version.number == number and str(version) == shown


@pytest.mark.parametrize('text', [
    '1.34', 'V1.34.3', '1.34.3-rc.0', ' 1.34.3', '1.34.3\n', '1234.0.0',
    None, 1.34])
def test_a_kube_version_is_x_y_z(text):
    assert core.KubeVersion.parse(text) is None
