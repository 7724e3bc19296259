"""Rendering of hosts.yaml, host_vars, cluster-vars.yaml, secret-vars.yaml."""

import copy

import pytest
import yaml

from mgmt_driver.model import core
from mgmt_driver.model import nodes
from mgmt_driver.model import params
from mgmt_driver.remote import inventory
from tests.unit import params_data

P = core.ROOT


def _spec(request=None, **sections):
    request = request or params_data.minimal()
    for name, values in sections.items():
        request[P].setdefault(name, {}).update(values)
    return params.parse_params(request, need_cp_names=False)


def _cluster(spec, masters=('10.10.0.11',), workers=('10.10.0.21',
                                                     '10.10.0.22'),
             lb=('192.168.1.30', '10.10.0.30')):
    entries = [core.NodeAddress('master', ip, ip) for ip in masters]
    entries += [core.NodeAddress('worker', ip, ip) for ip in workers]
    if lb:
        entries.append(core.NodeAddress('external_lb', lb[0], lb[1]))
    return nodes.build_nodes(spec, entries)


class _UnsafeLoader(yaml.SafeLoader):
    """Reads Ansible's !unsafe tag back as a plain string."""


_UnsafeLoader.add_constructor(
    '!unsafe', lambda loader, node: loader.construct_scalar(node))


def _load(text):
    return yaml.load(text, Loader=_UnsafeLoader)


# ------------------------------------------------------------------ hosts

def test_hosts_groups_and_host_vars():
    spec = _spec()
    doc = inventory.render_hosts(spec, _cluster(spec))
    children = doc['all']['children']
    assert list(children['kube_control_plane']['hosts']) == [
        'master-10-10-0-11']
    assert list(children['etcd']['hosts']) == ['master-10-10-0-11']
    assert list(children['kube_node']['hosts']) == [
        'worker-10-10-0-21', 'worker-10-10-0-22']
    assert children['calico_rr'] == {'hosts': {}}
    assert children['k8s_cluster'] == {'children': {
        'kube_control_plane': {}, 'kube_node': {}, 'calico_rr': {}}}
    hosts = doc['all']['hosts']
    assert hosts['master-10-10-0-11'] == {
        'access_ip': '10.10.0.11', 'ansible_host': '10.10.0.11',
        'ansible_port': 22, 'etcd_member_name': 'master-10-10-0-11',
        'ip': '10.10.0.11', 'main_access_ip': '10.10.0.11',
        'main_ip': '10.10.0.11'}
    assert hosts['worker-10-10-0-21'] == {
        'access_ip': '10.10.0.21', 'ansible_host': '10.10.0.21',
        'ansible_port': 22, 'ip': '10.10.0.21',
        'main_access_ip': '10.10.0.21', 'main_ip': '10.10.0.21'}
    assert set(hosts) == {'master-10-10-0-11', 'worker-10-10-0-21',
                          'worker-10-10-0-22'}  # the LB is no k8s node


def test_hosts_ssh_and_cluster_addresses_differ():
    spec = _spec(worker_node={'port': 2201})
    cluster = nodes.build_nodes(spec, [
        core.NodeAddress('master', '192.168.1.11', '10.10.0.11'),
        core.NodeAddress('worker', '192.168.1.21', '10.10.0.21'),
        core.NodeAddress('external_lb', '192.168.1.30', '10.10.0.30')])
    host = inventory.render_hosts(spec, cluster)['all']['hosts'][
        'worker-10-10-0-21']
    assert host['ansible_host'] == '192.168.1.21'
    assert host['ansible_port'] == 2201
    assert host['ip'] == host['access_ip'] == '10.10.0.21'


def test_ipv6_cluster_address_goes_to_ip6():
    spec = _spec()
    cluster = nodes.build_nodes(spec, [
        core.NodeAddress('master', 'fd00::11', 'fd00::11'),
        core.NodeAddress('external_lb', 'fd00::30', 'fd00::30')])
    host = inventory.render_hosts(spec, cluster)['all']['hosts'][
        'master-fd00-0-0-0-0-0-0-11']
    assert host['ip6'] == host['access_ip6'] == 'fd00::11'
    assert host['main_ip'] == host['main_access_ip'] == 'fd00::11'
    assert 'ip' not in host and 'access_ip' not in host


def test_masters_keep_their_order_and_etcd_names_follow_the_node():
    spec = _spec()
    cluster = _cluster(spec, masters=('10.10.0.13', '10.10.0.11',
                                      '10.10.0.12'))
    doc = inventory.render_hosts(spec, cluster)
    order = ['master-10-10-0-13', 'master-10-10-0-11', 'master-10-10-0-12']
    assert list(doc['all']['children']['kube_control_plane']['hosts']) == \
        order
    assert list(doc['all']['children']['etcd']['hosts']) == order
    # Removing the first master does not rename the others' etcd members.
    smaller = inventory.render_hosts(spec, cluster.remove(order[0]))
    assert smaller['all']['hosts'][order[1]]['etcd_member_name'] == order[1]


def test_node_labels_per_role():
    spec = _spec(master_node={'labels': {'example.com/cp': 'yes'}},
                 worker_node={'labels': {'pool': 'a'}})
    hosts = inventory.render_hosts(spec, _cluster(spec))['all']['hosts']
    assert hosts['master-10-10-0-11']['node_labels'] == {
        'example.com/cp': 'yes'}
    assert hosts['worker-10-10-0-22']['node_labels'] == {'pool': 'a'}


# ------------------------------------------------------------ credentials

def test_credentials_password_is_unsafe_and_key_wins():
    spec = _spec(worker_node={'ssh_key_file': '/keys/w'})
    creds = inventory.render_credentials(spec, _cluster(spec))
    master = creds['master-10-10-0-11']
    # sudo asks the user's own password: the login one by default.
    assert master == {'ansible_user': 'ubuntu', 'ansible_password': 'm-pass',
                      'ansible_become_password': 'm-pass'}
    assert isinstance(master['ansible_password'], inventory.Unsafe)
    assert isinstance(master['ansible_become_password'], inventory.Unsafe)
    # The worker has a password and a key: Ansible logs in with the key
    # only; the password is still the user's, for sudo.
    assert creds['worker-10-10-0-21'] == {
        'ansible_user': 'ubuntu', 'ansible_ssh_private_key_file': '/keys/w',
        'ansible_become_password': 'w-pass'}
    assert set(creds) == {'master-10-10-0-11', 'worker-10-10-0-21',
                          'worker-10-10-0-22'}


def test_unsafe_password_is_dumped_with_the_unsafe_tag():
    text = inventory.dump_yaml({'ansible_password': inventory.Unsafe(
        "{{ lookup('pipe', 'id') }}'x")})
    assert text == ("ansible_password: !unsafe '{{ lookup(''pipe'', "
                    "''id'') }}''x'\n")
    assert _load(text) == {'ansible_password':
                           "{{ lookup('pipe', 'id') }}'x"}


def test_remote_key_paths_and_their_use():
    request = params_data.sample('instantiate_keyauth.json')
    spec = params.parse_params(request)
    cluster = _cluster(spec)
    paths = inventory.remote_key_paths(spec, cluster, '/inv/c1/')
    # Master and worker share one key file: it is uploaded once.
    assert paths == {'/etc/tacker/kubespray/id_ed25519':
                     '/inv/c1/ssh-key-master'}
    creds = inventory.render_credentials(spec, cluster, paths)
    assert {c['ansible_ssh_private_key_file'] for c in creds.values()} == {
        '/inv/c1/ssh-key-master'}


def test_remote_key_paths_per_role_and_none_for_passwords():
    spec = _spec(master_node={'ssh_key_file': '/k/m'},
                 worker_node={'ssh_key_file': '/k/w'})
    assert inventory.remote_key_paths(spec, _cluster(spec), '/r') == {
        '/k/m': '/r/ssh-key-master', '/k/w': '/r/ssh-key-worker'}
    assert inventory.remote_key_paths(_spec(), _cluster(_spec()), '/r') == {}


# ----------------------------------------------------------- cluster vars

def test_cluster_vars_base():
    spec = _spec()
    doc = inventory.render_cluster_vars(spec, _cluster(spec))
    assert doc == {
        'apiserver_loadbalancer_domain_name': '10.10.0.30',
        'kube_apiserver_node_port_range': '30000-32767',
        'kube_pods_subnet': '10.233.64.0/18',
        'kube_service_addresses': '10.233.0.0/18',
        'loadbalancer_apiserver': {'address': '10.10.0.30', 'port': 8383},
        'supplementary_addresses_in_ssl_keys': ['10.10.0.30',
                                                '192.168.1.30'],
    }
    assert list(doc) == sorted(doc)


def test_cluster_vars_follow_the_request():
    spec = _spec(master_node={'pod_cidr': '10.244.0.0/16',
                              'cluster_cidr': '10.96.0.0/16'},
                 external_lb_param={'api_port': 9443,
                                    'nodeport_range': '31000-31999'})
    doc = inventory.render_cluster_vars(spec, _cluster(spec))
    assert doc['kube_pods_subnet'] == '10.244.0.0/16'
    assert doc['kube_service_addresses'] == '10.96.0.0/16'
    assert doc['loadbalancer_apiserver']['port'] == 9443
    assert doc['kube_apiserver_node_port_range'] == '31000-31999'


def test_https_proxy_comes_from_https_proxy():
    spec = _spec(proxy={'http_proxy': 'http://plain.example.com:3128',
                        'https_proxy': 'http://tls.example.com:3129'})
    doc = inventory.render_cluster_vars(spec, _cluster(spec))
    assert doc['http_proxy'] == 'http://plain.example.com:3128'
    assert doc['https_proxy'] == 'http://tls.example.com:3129'
    assert inventory.render_secret_vars(spec) == {}


def test_only_https_proxy_set():
    spec = _spec(proxy={'https_proxy': 'http://tls.example.com:3129'})
    doc = inventory.render_cluster_vars(spec, _cluster(spec))
    assert 'http_proxy' not in doc
    assert doc['https_proxy'] == 'http://tls.example.com:3129'
    assert 'no_proxy' in doc


def test_no_proxy_lists_cluster_networks_and_nodes():
    spec = _spec(proxy={'http_proxy': 'http://p.example.com:3128',
                        'no_proxy': 'registry.local, .corp',
                        'k8s_node_cidr': '10.10.0.0/24'},
                 kubespray={'extra_vars': {'dns_domain': 'k8s.example'}})
    doc = inventory.render_cluster_vars(spec, _cluster(spec))
    assert doc['no_proxy'].split(',') == [
        'registry.local', '.corp', 'localhost', '127.0.0.1', 'svc',
        'svc.k8s.example', '10.10.0.0/24', '10.233.0.0/18',
        '10.233.64.0/18', '10.10.0.30', '192.168.1.30', '10.10.0.11',
        '10.10.0.21', '10.10.0.22']


def test_no_proxy_absent_without_proxy():
    spec = _spec(proxy={'no_proxy': 'x.example.com'})
    doc = inventory.render_cluster_vars(spec, _cluster(spec))
    assert not {'no_proxy', 'http_proxy', 'https_proxy'} & set(doc)


def test_proxy_urls_with_credentials_go_to_secret_vars():
    spec = _spec(proxy={'http_proxy': 'http://u:S3cret@p.example.com:3128',
                        'https_proxy': 'http://p.example.com:3129'})
    doc = inventory.render_cluster_vars(spec, _cluster(spec))
    assert 'http_proxy' not in doc
    assert doc['https_proxy'] == 'http://p.example.com:3129'
    secret = inventory.render_secret_vars(spec)
    assert secret == {'http_proxy': 'http://u:S3cret@p.example.com:3128'}
    assert isinstance(secret['http_proxy'], inventory.Unsafe)


@pytest.mark.parametrize('extra,cluster_v6,expected', [
    ({}, False, {'calico_mtu': 1450, 'calico_veth_mtu': 1400}),
    ({}, True, {'calico_mtu': 1450, 'calico_veth_mtu': 1380}),
    ({'calico_veth_mtu': 1300}, False,
     {'calico_mtu': 1450, 'calico_veth_mtu': 1300}),
    ({'kube_network_plugin': 'cilium'}, False, {}),
])
def test_calico_mtu(extra, cluster_v6, expected):
    spec = _spec(kubespray={'extra_vars': extra})
    if cluster_v6:
        cluster = nodes.build_nodes(spec, [
            core.NodeAddress('master', 'fd00::11', 'fd00::11'),
            core.NodeAddress('external_lb', 'fd00::30', 'fd00::30')])
    else:
        cluster = _cluster(spec)
    doc = inventory.render_cluster_vars(spec, cluster, mtu=1450)
    assert {k: v for k, v in doc.items() if k.startswith('calico_')} == \
        expected


def test_no_calico_mtu_when_unknown():
    spec = _spec()
    doc = inventory.render_cluster_vars(spec, _cluster(spec))
    assert not [key for key in doc if key.startswith('calico')]


@pytest.mark.parametrize('mtu', [0, 575, 65536, '1500', True, 1500.0])
def test_bad_mtu_is_refused(mtu):
    spec = _spec()
    with pytest.raises(ValueError):
        inventory.render_cluster_vars(spec, _cluster(spec), mtu=mtu)


def test_extra_vars_pass_through_typed_and_sans_merge():
    spec = _spec(kubespray={'extra_vars': {
        'kube_version': '1.29.0', 'helm_enabled': True,
        'kube_network_node_prefix': 25, 'etcd_deployment_type': 'host',
        'supplementary_addresses_in_ssl_keys': ['api.example.com',
                                                '10.10.0.30'],
        'custom_map': {'b': 1, 'a': [True, 2.5, None]}}})
    doc = inventory.render_cluster_vars(spec, _cluster(spec))
    assert doc['helm_enabled'] is True
    assert doc['kube_network_node_prefix'] == 25
    assert doc['custom_map'] == {'a': [True, 2.5, None], 'b': 1}
    assert doc['supplementary_addresses_in_ssl_keys'] == [
        '10.10.0.30', '192.168.1.30', 'api.example.com']
    text = inventory.dump_yaml(doc)
    assert 'kube_version: 1.29.0\n' in text
    assert yaml.safe_load(text) == doc
    assert 'helm_enabled: true\n' in text


def test_quoted_strings_stay_strings():
    spec = _spec(kubespray={'extra_vars': {'calico_version': '3.30',
                                           'feature': 'yes'}})
    text = inventory.dump_yaml(inventory.render_cluster_vars(
        spec, _cluster(spec)))
    loaded = yaml.safe_load(text)
    assert loaded['calico_version'] == '3.30'
    assert loaded['feature'] == 'yes'


@pytest.mark.parametrize('given', ['v1.31.4', '1.34.3'])
def test_kube_version_is_rendered_as_the_request_spells_it(given):
    # kubespray up to v2.27 wants "v1.31.4", from v2.28 on "1.34.3".
    spec = _spec(kubespray={'extra_vars': {'kube_version': given}})
    assert 'kube_version' not in spec.kubespray.extra_vars
    doc = inventory.render_cluster_vars(spec, _cluster(spec))
    assert doc['kube_version'] == given
    # Not a secret: alone, it does not make the file 0600.
    files = inventory.render_files(spec, _cluster(spec))
    assert files[inventory.CLUSTER_VARS_FILE].mode == inventory.PUBLIC_MODE


# ------------------------------------------------------------------ files

def _become_vars(spec):
    return {name: creds.get('ansible_become_password')
            for name, creds in inventory.render_credentials(
                spec, _cluster(spec)).items()}


def test_become_password_per_role_and_declared_nopasswd():
    # Issue 30: kubespray runs with --become; a user without NOPASSWD
    # needs Ansible to have sudo's password, per host like the login.
    spec = _spec(master_node={'become_password': 'm-sudo {{ x }}'},
                 worker_node={'passwordless_sudo': True})
    become = _become_vars(spec)
    assert become == {'master-10-10-0-11': 'm-sudo {{ x }}',
                      'worker-10-10-0-21': None, 'worker-10-10-0-22': None}
    text = inventory.render_files(spec, _cluster(spec))[
        'host_vars/master-10-10-0-11.yaml']
    assert text.mode == 0o600
    assert "ansible_become_password: !unsafe 'm-sudo {{ x }}'" in \
        text.content


def test_key_login_without_a_password_has_no_become_password():
    request = params_data.minimal()
    for role in ('master_node', 'worker_node'):
        del request[P][role]['password']
        request[P][role]['ssh_key_file'] = '/keys/%s' % role
    spec = _spec(request)
    assert set(_become_vars(spec).values()) == {None}
    with_sudo = _spec(request, worker_node={'become_password': 'w-sudo'})
    assert _become_vars(with_sudo)['worker-10-10-0-21'] == 'w-sudo'


def test_no_become_password_outside_host_vars():
    spec = _spec(master_node={'become_password': 'Sudo-Secret-7'})
    files = inventory.render_files(spec, _cluster(spec))
    holding = sorted(name for name, f in files.items()
                     if 'Sudo-Secret-7' in f.content)
    assert holding == ['host_vars/master-10-10-0-11.yaml']
    assert 'Sudo-Secret-7' not in repr(files)


def test_render_files_modes_and_names():
    spec = _spec()
    files = inventory.render_files(spec, _cluster(spec))
    assert {path: f.mode for path, f in files.items()} == {
        'hosts.yaml': 0o644, 'cluster-vars.yaml': 0o644,
        'secret-vars.yaml': 0o600,
        'host_vars/master-10-10-0-11.yaml': 0o600,
        'host_vars/worker-10-10-0-21.yaml': 0o600,
        'host_vars/worker-10-10-0-22.yaml': 0o600}
    assert _load(files['secret-vars.yaml'].content) == {}
    assert _load(files['host_vars/worker-10-10-0-22.yaml'].content) == {
        'ansible_user': 'ubuntu', 'ansible_password': 'w-pass',
        'ansible_become_password': 'w-pass'}
    assert 'w-pass' not in repr(files)


def test_no_secret_in_hosts_or_cluster_vars():
    request = params_data.minimal()
    section = request[P]
    section['master_node']['password'] = 'Secret-Master-1'
    section['worker_node']['password'] = 'Secret-Worker-2'
    section['proxy'] = {'http_proxy': 'http://u:Secret-Proxy-3@p:3128',
                        'https_proxy': 'http://u:Secret-Proxy-4@p:3129'}
    spec = params.parse_params(request, need_cp_names=False)
    files = inventory.render_files(spec, _cluster(spec), mtu=1500)
    public = files['hosts.yaml'].content + files['cluster-vars.yaml'].content
    for secret in ('Secret-Master-1', 'Secret-Worker-2', 'Secret-Proxy-3',
                   'Secret-Proxy-4', 'password'):
        assert secret not in public
    secret_text = ''.join(f.content for path, f in files.items()
                          if f.mode == 0o600)
    for secret in ('Secret-Master-1', 'Secret-Worker-2', 'Secret-Proxy-3',
                   'Secret-Proxy-4'):
        assert secret in secret_text


def test_rendering_is_deterministic_and_ignores_report_order():
    spec = params.parse_params(params_data.sample('instantiate_ha.json'))
    workers = ['10.10.0.%d' % i for i in range(21, 41)]
    first = inventory.render_files(spec, _cluster(
        spec, masters=('10.10.0.11', '10.10.0.12', '10.10.0.13'),
        workers=workers))
    second = inventory.render_files(spec, _cluster(
        spec, masters=('10.10.0.11', '10.10.0.12', '10.10.0.13'),
        workers=list(reversed(workers))))
    assert {p: f.content for p, f in first.items()} == \
        {p: f.content for p, f in second.items()}


def test_adding_and_removing_nodes_equals_rendering_from_scratch():
    spec = params.parse_params(params_data.sample('instantiate_ha.json'))
    start = _cluster(spec, masters=('10.10.0.11', '10.10.0.12',
                                    '10.10.0.13'),
                     workers=('10.10.0.21', '10.10.0.22', '10.10.0.23'))
    added = [nodes.Node.from_address(
        core.NodeAddress('worker', ip, ip), 22)
        for ip in ('10.10.1.21', '10.10.0.24')]
    changed = start.add(*added).remove('worker-10-10-0-22',
                                       'master-10-10-0-13')
    changed = changed.add(nodes.Node.from_address(
        core.NodeAddress('master', '10.10.0.14', '10.10.0.14'), 22))
    scratch = _cluster(spec, masters=('10.10.0.11', '10.10.0.12',
                                      '10.10.0.14'),
                       workers=('10.10.0.24', '10.10.1.21', '10.10.0.21',
                                '10.10.0.23'))
    rendered = [{p: f.content for p, f in inventory.render_files(
        spec, cluster).items()} for cluster in (changed, scratch)]
    assert rendered[0] == rendered[1]
    assert 'host_vars/worker-10-10-0-22.yaml' not in rendered[0]
    assert 'host_vars/worker-10-10-1-21.yaml' in rendered[0]


def test_render_does_not_change_the_spec():
    spec = params.parse_params(params_data.sample('instantiate_ha.json'))
    before = copy.deepcopy(dict(spec.kubespray.extra_vars))
    doc = inventory.render_cluster_vars(spec, _cluster(spec))
    doc['helm_enabled'] = 'changed'
    assert dict(spec.kubespray.extra_vars) == before


def test_dump_yaml_has_no_aliases():
    shared = ['a']
    text = inventory.dump_yaml({'x': shared, 'y': shared})
    assert '&' not in text and '*' not in text


def test_template_text_in_request_values_is_never_templated():
    """A "{" anywhere in a value Ansible reads makes it !unsafe: Jinja in
    a request (lookup('pipe', ...)) must not run on the Ansible server."""
    from mgmt_driver.remote import inventory
    data = inventory._inert({'a': "{{ lookup('pipe', 'id') }}",
                             'b': ['{% if 1 %}x{% endif %}', 'plain'],
                             'c': 3, 'd': 'plain'})
    text = inventory.dump_yaml(data)
    assert "a: !unsafe '{{ lookup(''pipe'', ''id'') }}'" in text
    assert "- !unsafe '{% if 1 %}x{% endif %}'" in text
    assert '- plain' in text and 'd: plain' in text and 'c: 3' in text
