"""``kubespray-mgmt run relabel`` on the local site: labels and taints
set on existing nodes with the driver's kubectl (the fake kubectl on a
master, over the real sshd), overwritten by a second run; bad options
change nothing."""

import json

import pytest
import yaml
from mgmt_localsite import lab as lab_mod
from mgmt_localsite import site as site_mod
from oslo_config import cfg

from mgmt_driver.adapters import cli
from mgmt_driver.model import core

ANSIBLE = '127.0.18.1'
LB = '127.0.18.2'
MASTERS = ['127.0.18.10']
WORKERS = ['127.0.18.20', '127.0.18.21']
W1, W2 = (site_mod.name_of(core.ROLE_WORKER, a) for a in WORKERS)
M1 = site_mod.name_of(core.ROLE_MASTER, MASTERS[0])

pytestmark = pytest.mark.skipif(site_mod.unavailable() is not None,
                                reason=str(site_mod.unavailable()))


@pytest.fixture
def run(tmp_path, capsys):
    """``kubespray-mgmt run OPERATION ...`` on a started lab: ``(exit
    code, output)``; the lab and the global CONF are put back after."""
    try:
        # Backends: the upgrade's gates ask the API through HAProxy,
        # so the master's API port must answer (mgmt_driver.operations.gates).
        lab = lab_mod.Lab(ANSIBLE, LB, MASTERS, WORKERS).start()
    except lab_mod.LabError as exc:
        pytest.skip(str(exc))
    options = dict(site_mod.driver_options(
        lab.site, lab.haproxy, tmp_path / 'known_hosts',
        key_dirs=[lab.sshd.key_dir]),
        kubeconfig_dir=str(tmp_path / 'kubeconfigs'))
    config = tmp_path / 'kubespray-mgmt.conf'
    config.write_text(site_mod.config_file_text(options))
    params_file = tmp_path / 'params.json'
    request = lab.additional_params
    # A label the parameters give every worker: kubespray sets it again
    # on every run that reaches a worker.
    request[core.ROOT]['worker_node']['labels'] = {'pool': 'base'}
    params_file.write_text(json.dumps(request))
    topology = tmp_path / 'topology.yaml'
    topology.write_text(yaml.safe_dump(lab.topology(MASTERS, WORKERS)))

    def call(operation, *extra):
        code = cli.main(['--config-file', str(config), 'run', operation,
                         '--params', str(params_file), '--topology',
                         str(topology), '--instance-id', 'relabel', *extra])
        out = capsys.readouterr()
        return code, out.out + out.err
    call.lab = lab
    try:
        yield call
    finally:
        lab.stop()
        cfg.CONF([], project='kubespray-mgmt', default_config_files=[])


def _taints(node):
    return sorted((t['key'], t.get('value', ''), t['effect'])
                  for t in node['taints'])


def test_relabel_sets_and_overwrites_labels_and_taints(run):
    code, out = run('instantiate')
    assert code == cli.EXIT_OK, out[-2000:]
    site = run.lab.site
    master_before = site.nodes()[M1]

    code, out = run('relabel', '--nodes', '%s,%s' % (W1, W2),
                    '--labels', 'pool=a,example.com/zone=z1',
                    '--taints', 'gpu=yes:NoSchedule')
    assert code == cli.EXIT_OK, out[-2000:]
    assert out.splitlines()[-1] == 'relabelled %s, %s' % (W1, W2)
    for name in (W1, W2):
        node = site.nodes()[name]
        assert node['labels']['pool'] == 'a'
        assert node['labels']['example.com/zone'] == 'z1'
        assert ('gpu', 'yes', 'NoSchedule') in _taints(node)
    assert site.nodes()[M1] == master_before

    # Again with other values: they replace the old ones (--overwrite).
    code, out = run('relabel', '--nodes', W1, '--labels', 'pool=b',
                    '--taints', 'gpu=no:NoSchedule')
    assert code == cli.EXIT_OK, out[-2000:]
    node = site.nodes()[W1]
    assert node['labels']['pool'] == 'b'
    assert [t for t in _taints(node) if t[0] == 'gpu'] == [
        ('gpu', 'no', 'NoSchedule')]
    assert site.nodes()[W2]['labels']['pool'] == 'a'

    # Refused options: nothing runs, nothing changes.
    before, runs = site.nodes(), len(site.runs())
    for extra, text in ((['--labels', 'pool=$(id)'], "--labels: 'pool="),
                        (['--taints', 'gpu=x:Never'], "--taints: 'gpu=x"),
                        (['--labels', 'a b=c'], "--labels: 'a b=c'")):
        code, out = run('relabel', '--nodes', W1, *extra)
        assert code == cli.EXIT_BAD_INPUT and text in out, out
    assert site.nodes() == before and len(site.runs()) == runs

    _relabel_outlives_heal_and_not_scale_in(run, site)


def _relabel_outlives_heal_and_not_scale_in(run, site):
    """Removals; a healed node joins again with what the relabels left
    (the driver's record), a node scaled in and out again with the
    parameters' values."""
    code, out = run('relabel', '--nodes', '%s,%s' % (W1, W2),
                    '--labels', 'example.com/zone-,rack=r1',
                    '--taints', 'gpu:NoSchedule-')
    assert code == cli.EXIT_OK, out[-2000:]
    for name in (W1, W2):
        node = site.nodes()[name]
        assert 'example.com/zone' not in node['labels']
        assert node['labels']['rack'] == 'r1'
        assert [t for t in _taints(node) if t[0] == 'gpu'] == []

    code, out = run('heal', '--nodes', W1)
    assert code == cli.EXIT_OK, out[-2000:]
    node = site.nodes()[W1]
    assert node['labels']['pool'] == 'b' and node['labels']['rack'] == 'r1'
    assert 'example.com/zone' not in node['labels']
    assert [t for t in _taints(node) if t[0] == 'gpu'] == []

    code, out = run('scale-in', '--nodes', W2)
    assert code == cli.EXIT_OK, out[-2000:]
    code, out = run('scale-out', '--nodes', W2)
    assert code == cli.EXIT_OK, out[-2000:]
    node = site.nodes()[W2]
    assert node['labels']['pool'] == 'base' and 'rack' not in node['labels']

    # An upgrade reaches every node, and kubespray sets each node's
    # node_labels again: W1 keeps its relabelled value.
    code, out = run('upgrade', '--kube-version', '1.34.3')
    assert code == cli.EXIT_OK, out[-2000:]
    assert {n['kubelet_version'] for n in site.nodes().values()} == {
        'v1.34.3'}
    assert site.nodes()[W1]['labels']['pool'] == 'b'
    assert site.nodes()[W2]['labels']['pool'] == 'base'
