"""Rendered inventories read by the real Ansible (ansible-core from PyPI).

``ansible-inventory --list`` checks groups, host vars and that each host
gets its credentials from ``host_vars/``; ``ansible -m debug -c local``
checks how Ansible types the extra vars.  Neither opens a connection:
``debug`` runs on the controller and the connection is forced to local.
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml

from mgmt_driver.adapters import cli

P = 'k8s_cluster_installation_param'
SAMPLES = pathlib.Path(__file__).resolve().parents[2] / 'samples'
SECRETS = {'master': 'Sec-Master-{{ x }}', 'worker': "Sec-Worker-'q'",
           'ansible': 'Sec-Ansible-3', 'lb': 'Sec-LB-4',
           'proxy': 'Sec-Proxy-5'}


def _tool(name):
    beside = pathlib.Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    return shutil.which(name)


@pytest.fixture(scope='module')
def ansible_tools():
    tools = {name: _tool(name) for name in ('ansible-inventory', 'ansible')}
    missing = [name for name, path in tools.items() if not path]
    if missing:
        pytest.skip('%s not found next to %s or on PATH (pip install '
                    'ansible-core)' % (', '.join(missing), sys.executable))
    return tools


def _run(argv, cwd):
    env = dict(os.environ, ANSIBLE_HOST_KEY_CHECKING='False',
               ANSIBLE_NOCOLOR='1', ANSIBLE_LOCAL_TEMP=str(cwd / '.tmp'),
               ANSIBLE_HOME=str(cwd / '.ansible'))
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _request():
    body = json.loads((SAMPLES / 'instantiate_ha.json').read_text())
    section = body['additionalParams'][P]
    section['master_node']['password'] = SECRETS['master']
    section['worker_node']['password'] = SECRETS['worker']
    section['ansible']['password'] = SECRETS['ansible']
    section['external_lb_param']['ssh_password'] = SECRETS['lb']
    section['proxy']['https_proxy'] = (
        'http://user:%s@proxy.example.com:3129' % SECRETS['proxy'])
    return body


def _render(tmp_path, masters, workers):
    topology = {
        'masters': [{'ssh_ip': '10.10.0.%d' % (11 + i)}
                    for i in range(masters)],
        'workers': [{'ssh_ip': '10.10.%d.%d' % (1 + i // 200, 10 + i % 200)}
                    for i in range(workers)],
        'external_lb': {'ssh_ip': '192.168.100.30', 'nic_ip': '10.10.0.30'},
    }
    (tmp_path / 'topology.yaml').write_text(yaml.safe_dump(topology))
    (tmp_path / 'params.json').write_text(json.dumps(_request()))
    out = tmp_path / 'inventory'
    assert cli.main(['render', 'inventory',
                     '--params', str(tmp_path / 'params.json'),
                     '--topology', str(tmp_path / 'topology.yaml'),
                     '-o', str(out), '--mtu', '1450']) == 0
    return out, topology


def _plain(value):
    """ansible-core 2.19 shows !unsafe values as {"__ansible_unsafe": v}."""
    if isinstance(value, dict) and set(value) == {'__ansible_unsafe'}:
        return value['__ansible_unsafe']
    return value


def _name(role, ip):
    return '%s-%s' % (role, ip.replace('.', '-'))


@pytest.mark.parametrize('masters,workers', [(1, 2), (3, 50)])
def test_ansible_inventory_reads_the_rendered_inventory(
        ansible_tools, tmp_path, masters, workers):
    out, topology = _render(tmp_path, masters, workers)
    listing = json.loads(_run([ansible_tools['ansible-inventory'], '-i',
                               'hosts.yaml', '--list'], out))
    master_names = [_name('master', e['ssh_ip'])
                    for e in topology['masters']]
    worker_names = [_name('worker', e['ssh_ip'])
                    for e in topology['workers']]

    def members(group):
        return listing.get(group, {}).get('hosts', [])

    assert members('kube_control_plane') == master_names
    assert members('etcd') == master_names
    assert sorted(members('kube_node')) == sorted(worker_names)
    assert len(members('kube_node')) == workers
    assert members('calico_rr') == []
    assert 'calico_rr' in listing['all']['children']
    assert sorted(listing['k8s_cluster']['children']) == [
        'calico_rr', 'kube_control_plane', 'kube_node']
    hostvars = listing['_meta']['hostvars']
    assert sorted(hostvars) == sorted(master_names + worker_names)

    for index, name in enumerate(master_names):
        host = hostvars[name]
        ip = topology['masters'][index]['ssh_ip']
        assert host['ansible_host'] == host['ip'] == host['access_ip'] == ip
        assert host['ansible_port'] == 22
        assert host['etcd_member_name'] == name
        assert host['node_labels'] == {'example.com/role': 'control-plane'}
        assert host['ansible_user'] == 'ubuntu'
        assert _plain(host['ansible_password']) == SECRETS['master']
    for name in worker_names:
        host = hostvars[name]
        assert 'etcd_member_name' not in host
        assert host['node_labels']['node.kubernetes.io/pool'] == 'general'
        assert _plain(host['ansible_password']) == SECRETS['worker']

    public = (out / 'hosts.yaml').read_text() + (
        out / 'cluster-vars.yaml').read_text()
    for secret in SECRETS.values():
        assert secret not in public


def test_ansible_types_the_extra_vars_and_keeps_secrets_literal(
        ansible_tools, tmp_path):
    out, _ = _render(tmp_path, 1, 2)
    expression = (
        '{{ {"lb_port": loadbalancer_apiserver.port | type_debug, '
        '"lb_address": loadbalancer_apiserver.address, '
        '"mtu_is_number": calico_mtu is number, '
        '"veth": calico_veth_mtu, '
        '"helm": helm_enabled | type_debug, '
        '"prefix": kube_network_node_prefix | type_debug, '
        '"pods": kube_pods_subnet, "services": kube_service_addresses, '
        '"nodeports": kube_apiserver_node_port_range, '
        '"https_proxy": https_proxy, "http_proxy": http_proxy, '
        '"password": ansible_password, "user": ansible_user} | to_json }}')
    output = _run([ansible_tools['ansible'], '-i', 'hosts.yaml',
                   'master-10-10-0-11', '-c', 'local', '-m', 'debug',
                   '-a', 'msg=' + expression,
                   '-e', '@cluster-vars.yaml', '-e', '@secret-vars.yaml'],
                  out)
    result = json.loads(output[output.index('{'):])['msg']
    if isinstance(result, str):
        result = json.loads(result)
    assert result == {
        'lb_port': 'int', 'lb_address': '10.10.0.30', 'mtu_is_number': True,
        'veth': 1400, 'helm': 'bool', 'prefix': 'int',
        'pods': '10.233.64.0/18', 'services': '10.233.0.0/18',
        'nodeports': '30000-32767',
        'https_proxy': 'http://user:%s@proxy.example.com:3129'
                       % SECRETS['proxy'],
        'http_proxy': 'http://proxy.example.com:3128',
        'password': SECRETS['master'], 'user': 'ubuntu'}
