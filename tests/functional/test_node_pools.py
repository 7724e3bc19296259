"""``node_pools`` on the local site: ``kubespray-mgmt run instantiate`` and
``scale-out`` with a listed pool (a master and a worker, by name and by
address) and a pool named by a topology entry; the kubespray double sets
``node_labels`` and ``node_taints`` when a node joins, so the nodes the
fake kubectl keeps show what the inventory gave them."""

import json

import pytest
import yaml
from mgmt_localsite import lab as lab_mod
from mgmt_localsite import site as site_mod
from oslo_config import cfg

from mgmt_driver.adapters import cli
from mgmt_driver.model import core
from tests.functional import test_faults

ANSIBLE = '127.0.23.1'
LB = '127.0.23.2'
MASTERS = ['127.0.23.10']
WORKERS = ['127.0.23.20', '127.0.23.21', '127.0.23.22']
M1 = site_mod.name_of(core.ROLE_MASTER, MASTERS[0])
W1, W2, W3 = (site_mod.name_of(core.ROLE_WORKER, a) for a in WORKERS)
P = core.ROOT
POOLS = {
    'dpdk': {'labels': {'example.com/pool': 'dpdk'},
             'taints': ['example.com/dedicated=dpdk:NoSchedule']},
    'zone-a': {'nodes': [M1, WORKERS[1]],
               'labels': {'topology.kubernetes.io/zone': 'zone-a',
                          'example.com/pool': 'zone'}},
}

pytestmark = pytest.mark.skipif(site_mod.unavailable() is not None,
                                reason=str(site_mod.unavailable()))


@pytest.fixture(scope='module')
def lab(tmp_path_factory):
    """One lab for the module; every worker VM runs sshd from the start,
    the topology file lists what the test says."""
    tmp_path = tmp_path_factory.mktemp('pools')
    with test_faults.running(lab_mod.Lab(ANSIBLE, LB, MASTERS, WORKERS,
                                         backends=False)) as lab:
        lab.tmp_path = tmp_path
        lab.config_path = tmp_path / 'kubespray-mgmt.conf'
        lab.config_path.write_text(site_mod.config_file_text(dict(
            site_mod.driver_options(lab.site, lab.haproxy,
                                    tmp_path / 'known_hosts',
                                    key_dirs=[lab.sshd.key_dir]),
            kubeconfig_dir=str(tmp_path / 'kubeconfigs'))))
        try:
            yield lab
        finally:
            cfg.CONF([], project='kubespray-mgmt', default_config_files=[])


def _run(lab, capsys, operation, workers, pools, *extra):
    """``kubespray-mgmt run OPERATION`` with *workers* in the topology
    (the first named in pool ``dpdk``): ``(exit code, output)``."""
    request = json.loads(json.dumps(lab.additional_params))
    request[P]['node_pools'] = pools
    params_file = lab.tmp_path / 'params.json'
    params_file.write_text(json.dumps(request))
    topology = lab.topology(MASTERS, workers)
    topology['workers'][0]['pool'] = 'dpdk'
    topology_file = lab.tmp_path / 'topology.yaml'
    topology_file.write_text(yaml.safe_dump(topology))
    code = cli.main(['--config-file', str(lab.config_path), 'run',
                     operation, '--params', str(params_file), '--topology',
                     str(topology_file), '--instance-id', 'pools', *extra])
    out = capsys.readouterr()
    return code, out.out + out.err


def _taints(node):
    return sorted((t['key'], t.get('value', ''), t['effect'])
                  for t in node['taints'])


def test_pools_label_and_taint_nodes_when_they_join(lab, capsys):
    code, out = _run(lab, capsys, 'instantiate', WORKERS[:2], POOLS)
    assert code == cli.EXIT_OK, out[-2000:]
    k8s = lab.site.nodes()
    # W1 is named in the topology as a dpdk worker.
    assert k8s[W1]['labels']['example.com/pool'] == 'dpdk'
    assert ('example.com/dedicated', 'dpdk', 'NoSchedule') in _taints(
        k8s[W1])
    # W2 (by address) and the master (by name) are listed in zone-a.
    for name in (W2, M1):
        assert k8s[name]['labels']['topology.kubernetes.io/zone'] == \
            'zone-a'
        assert k8s[name]['labels']['example.com/pool'] == 'zone'
        assert 'example.com/dedicated' not in [t[0] for t in _taints(
            k8s[name])]
    assert 'topology.kubernetes.io/zone' not in k8s[W1]['labels']


def test_a_scale_out_joins_a_listed_worker_with_its_pool(lab, capsys):
    # W3 joins; zone-a now lists it too (by name), dpdk is unchanged.
    pools = json.loads(json.dumps(POOLS))
    pools['zone-a']['nodes'].append(W3)
    code, out = _run(lab, capsys, 'scale-out', WORKERS, pools)
    assert code == cli.EXIT_OK, out[-2000:]
    k8s = lab.site.nodes()
    assert k8s[W3]['labels']['topology.kubernetes.io/zone'] == 'zone-a'
    assert k8s[W1]['labels']['example.com/pool'] == 'dpdk'


def test_a_node_in_two_pools_is_refused_before_any_run(lab, capsys):
    runs = len(lab.site.runs())
    pools = json.loads(json.dumps(POOLS))
    pools['zone-a']['nodes'].append(WORKERS[0])  # W1 is a dpdk worker
    code, out = _run(lab, capsys, 'scale-out', WORKERS, pools)
    assert code == cli.EXIT_BAD_INPUT, out[-2000:]
    assert 'node %s (%s) is in %s.node_pools.dpdk and in ' \
        '%s.node_pools.zone-a.nodes' % (W1, WORKERS[0], P, P) in out
    assert len(lab.site.runs()) == runs
