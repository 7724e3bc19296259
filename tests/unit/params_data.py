"""Requests shared by the params, nodes, inventory and CLI unit tests."""

import copy
import ipaddress
import json
import pathlib

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / 'samples'

# The shape of Tacker's kubespray sample request (every key it documents),
# with working values where its documentation has placeholders.
_TACKER_SAMPLE = {
    'k8s_cluster_installation_param': {
        'vim_name': 'kubernetes_vim',
        'master_node': {
            'aspect_id': 'master_instance',
            'ssh_cp_name': 'masterNode_FloatingIP',
            'nic_cp_name': 'masterNode_CP1',
            'username': 'ubuntu',
            'password': 'ubuntu',
            'pod_cidr': '192.168.0.0/16',
            'cluster_cidr': '10.199.187.0/24',
            'cluster_cp_name': 'vip_CP',
        },
        'worker_node': {
            'aspect_id': 'worker_instance',
            'ssh_cp_name': 'workerNode_FloatingIP',
            'nic_cp_name': 'workerNode_CP2',
            'username': 'ubuntu',
            'password': 'ubuntu',
        },
        'proxy': {
            'http_proxy': 'http://user1:password1@host1:3128',
            'https_proxy': 'https://user2:password2@host2:3129',
            'no_proxy': '192.168.246.0/24,10.0.0.1',
            'k8s_node_cidr': '10.10.0.0/24',
        },
        'ansible': {
            'ip_address': '10.10.0.50',
            'username': 'ubuntu',
            'password': 'ubuntu',
            'kubespray_root_path': '/home/ubuntu/kubespray-2.16.0',
            'transferring_inventory_path':
                '/home/ubuntu/kubespray-2.16.0/inventory/mycluster',
        },
        'external_lb_param': {
            'ssh_cp_name': 'externalLB_FloatingIP',
            'ssh_username': 'ubuntu',
            'ssh_password': 'ubuntu',
            'script_path': 'Scripts/install_external_lb.sh',
        },
        'script_path': 'Scripts/install_k8s_cluster.sh',
    },
    'lcm-operation-user-data': './UserData/lcm_user_data.py',
    'lcm-operation-user-data-class': 'SampleUserData',
}


def tacker_sample():
    """A fresh copy of the Tacker-sample-shaped ``additionalParams``."""
    return copy.deepcopy(_TACKER_SAMPLE)


def sample(name):
    """``additionalParams`` of ``samples/<name>``."""
    body = json.loads((SAMPLES / name).read_text())
    return body['additionalParams']


def minimal():
    """The smallest valid request for a topology (no CP names, no proxy)."""
    return {'k8s_cluster_installation_param': {
        'master_node': {'username': 'ubuntu', 'password': 'm-pass'},
        'worker_node': {'username': 'ubuntu', 'password': 'w-pass'},
        'ansible': {'ip_address': '10.10.0.50', 'username': 'ubuntu',
                    'password': 'a-pass',
                    'kubespray_root_path': '/opt/kubespray',
                    'transferring_inventory_path':
                        '/opt/kubespray/inventory/c1'},
        'external_lb_param': {'ssh_username': 'ubuntu',
                              'ssh_password': 'lb-pass'},
    }}


def with_workers(workers, worker_labels=None):
    """:func:`minimal` with explicit nodes: one master, an external LB
    and *workers* workers, from 10.20.0.10 on (the large-request
    tests and benchmark); the workers carry *worker_labels*."""
    base = int(ipaddress.ip_address('10.20.0.10'))
    master, lb, *rest = [str(ipaddress.ip_address(base + i))
                         for i in range(workers + 2)]
    request = minimal()
    root = request['k8s_cluster_installation_param']
    root['nodes'] = [{'role': 'master', 'ssh_ip': master},
                     {'role': 'external_lb', 'ssh_ip': lb}] + [
        {'role': 'worker', 'ssh_ip': ip} for ip in rest]
    if worker_labels is not None:
        root['worker_node']['labels'] = worker_labels
    return request
