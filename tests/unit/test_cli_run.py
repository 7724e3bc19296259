"""kubespray-mgmt run: argument checks and --dry-run plans."""

import json
import pathlib

import pytest

from mgmt_driver.adapters import cli
from mgmt_driver.model import nodes
from mgmt_driver.operations import membership

SAMPLES = pathlib.Path(__file__).parents[2] / 'samples'
PARAMS = str(SAMPLES / 'instantiate_simple.json')
TOPOLOGY = str(SAMPLES / 'topology_simple.yaml')


def _secrets():
    doc = json.loads(pathlib.Path(PARAMS).read_text())
    root = doc['additionalParams']['k8s_cluster_installation_param']
    values = [root['master_node']['password'], root['worker_node']['password'],
              root['ansible']['password'],
              root['external_lb_param']['ssh_password']]
    return [v for v in values if v]


def _instantiated(instance_id='kubespray-mgmt', hosts=()):
    """A record of *instance_id* in the test's HOME, listing *hosts*."""
    from oslo_config import cfg

    from mgmt_driver.common import conf as kconf
    from mgmt_driver.state import records
    kconf.register_opts(cfg.CONF)
    cfg.CONF([], project='kubespray-mgmt', default_config_files=[])
    store = records.RecordStore.from_conf()
    store.save(records.InstanceRecord(instance_id, list(hosts)))
    return store


def _run(capsys, *args):
    code = cli.main(['run', *args, '--params', PARAMS, '--topology',
                     TOPOLOGY])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize('operation, extra, playbooks', [
    ('instantiate', [], ['cluster.yml']),
    ('scale-out', ['--nodes', 'worker-10-10-0-22'],
     ['playbooks/facts.yml', 'scale.yml']),
    ('scale-in', ['--nodes', 'worker-10-10-0-22'], ['remove-node.yml']),
    ('heal', ['--nodes', 'worker-10-10-0-21'],
     ['remove-node.yml', 'playbooks/facts.yml', 'scale.yml']),
    ('terminate', [], []),
])
def test_dry_run_plans_without_secrets(capsys, operation, extra, playbooks):
    code, out, err = _run(capsys, operation, '--dry-run', *extra)
    assert code == cli.EXIT_OK, err
    assert out.rstrip().splitlines()[-1].startswith('dry run, nothing done')
    ran = [line.rsplit(' ', 1)[-1] for line in out.splitlines()
           if line.startswith('$ ') and 'ansible-playbook -i' in line]
    assert ran == playbooks
    for secret in _secrets():
        assert 'password: %s' % secret not in out
        assert 'ansible_password' not in out


def test_scale_in_takes_node_out_of_lb_before_draining_and_removal():
    from oslo_config import cfg

    from mgmt_driver.common import conf as kconf
    from mgmt_driver.model import params
    from mgmt_driver.remote import plan
    from mgmt_driver.session import driver
    from mgmt_driver.state import localfiles
    kconf.register_opts(cfg.CONF)
    cfg.CONF([], project='kubespray-mgmt', default_config_files=[])
    doc = localfiles.load_document(PARAMS, 'PARAMS')['additionalParams']
    spec = params.parse_params(doc, need_cp_names=False)
    cluster = nodes.build_nodes(spec, nodes.load_topology(
        localfiles.load_document(TOPOLOGY, 'TOPOLOGY')))
    pool = plan.PlanPool()
    membership.remove_workers(driver.ClusterDriver(spec, 'i1', pool),
                              cluster, ['worker-10-10-0-22'])
    texts = [step.text for step in pool.steps]
    lb = next(i for i, t in enumerate(texts) if 'haproxy -c' in t)
    drain = next(i for i, t in enumerate(texts) if ' drain ' in t)
    removal = next(i for i, t in enumerate(texts)
                   if 'ansible-playbook -i' in t and 'remove-node.yml' in t)
    assert lb < drain < removal


@pytest.mark.parametrize('operation, extra, text', [
    ('scale-in', [], '--nodes: missing'),
    ('scale-in', ['--nodes', 'worker-9-9-9-9'], 'not in the topology'),
])
def test_bad_node_arguments(capsys, operation, extra, text):
    code, _, err = _run(capsys, operation, '--dry-run', *extra)
    assert code == cli.EXIT_BAD_INPUT and text in err


def _terminate_params(tmp_path, reset_on_terminate):
    doc = json.loads(pathlib.Path(PARAMS).read_text())
    doc['additionalParams']['k8s_cluster_installation_param']['kubespray'] \
        = {'reset_on_terminate': reset_on_terminate}
    params_file = tmp_path / 'params.json'
    params_file.write_text(json.dumps(doc))
    return str(params_file)


@pytest.mark.parametrize('reset_on_terminate, expected', [
    (True, ['reset.yml', 'rm workspace']), (False, ['rm workspace'])])
def test_terminate_resets_first_when_asked(tmp_path, capsys,
                                           reset_on_terminate, expected):
    code = cli.main(['run', 'terminate', '--dry-run', '--params',
                     _terminate_params(tmp_path, reset_on_terminate),
                     '--topology', TOPOLOGY])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_OK, err
    assert _playbooks_and_removals(out) == expected


def test_a_terminate_plan_shows_every_destructive_step(tmp_path, capsys):
    """reset.yml on every node of the topology and the kubeconfig's
    deletion, as the real run does, and no warning the real run does
    not print (before: "no inventory recorded: nothing to reset", no
    kubeconfig, and "keeping its record ..." on stderr)."""
    from mgmt_driver.state import records
    store = _instantiated(hosts=[records.Host('10.10.0.11', 22, 'master')])
    kubeconfig = str(tmp_path / 'kubernetes_vim_simple.yaml')
    store.set_vim('kubespray-mgmt', records.KUBECONFIG, kubeconfig,
                  'kubernetes_vim_simple')
    code = cli.main(['run', 'terminate', '--dry-run', '--params',
                     _terminate_params(tmp_path, True),
                     '--topology', TOPOLOGY])
    out, err = capsys.readouterr()
    assert (code, err) == (cli.EXIT_OK, '')
    changes = out.split('What would change:')[1]
    assert '- run reset.yml' in changes
    assert '- delete the kubeconfig %s' % kubeconfig in changes
    assert "inventory lists the 3 node(s) of the topology" in out
    assert store.load('kubespray-mgmt').vim_id(records.KUBECONFIG) == \
        kubeconfig  # nothing written


def _playbooks_and_removals(out):
    return [line.rsplit(' ', 1)[-1] if 'ansible-playbook -i' in line
            else 'rm workspace' for line in out.splitlines()
            if line.startswith('$ ') and ('ansible-playbook -i' in line
                                          or line.startswith('$ rm -rf'))]


# As Tacker's whole-VNF heal (heal_start, heal_end: its VMs are
# re-created), reset_on_terminate resets nothing: it is terminate's.
@pytest.mark.parametrize('reset_on_terminate, expected', [
    (False, ['rm workspace', 'cluster.yml']),
    (True, ['rm workspace', 'cluster.yml'])])
def test_heal_without_nodes_heals_the_whole_vnf(tmp_path, capsys,
                                                monkeypatch,
                                                reset_on_terminate,
                                                expected):
    from mgmt_driver.remote import inventory
    from mgmt_driver.session import driver
    recorded = inventory.RecordedInventory(
        masters=('master-10-10-0-11',),
        hosts=(('master-10-10-0-11', '10.10.0.11', 22),))
    monkeypatch.setattr(driver.ClusterDriver, 'recorded_inventory',
                        lambda self: recorded)
    doc = json.loads(pathlib.Path(PARAMS).read_text())
    doc['additionalParams']['k8s_cluster_installation_param']['kubespray'] \
        = {'reset_on_terminate': reset_on_terminate}
    params_file = tmp_path / 'params.json'
    params_file.write_text(json.dumps(doc))
    code = cli.main(['run', 'heal', '--dry-run', '--params',
                     str(params_file), '--topology', TOPOLOGY])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_OK, err
    assert _playbooks_and_removals(out) == expected
    after_removal = out.split('$ rm -rf', 1)[1]
    # The workspace is made again and its inventory uploaded (shown as
    # the files of the upload) before cluster.yml.
    assert after_removal.index('/hosts.yaml (mode 0644)') < \
        after_removal.index('cluster.yml')
    assert 'install-lb' in after_removal
    assert out.splitlines()[-1].startswith(
        'dry run, nothing done: would heal the whole VNF: cluster ')


def test_healing_every_master_points_to_the_whole_vnf_heal(capsys):
    _instantiated()
    code, _, err = _run(capsys, 'heal', '--dry-run', '--nodes',
                        'master-10-10-0-11')
    assert code == cli.EXIT_BAD_INPUT
    assert 'run heal without --nodes' in err
    assert len(err.splitlines()) == 1


# ------------------------------------ a forgotten --instance-id (issue 41) --

@pytest.mark.parametrize('operation, extra', [
    ('scale-out', []), ('terminate', []), ('upgrade',
                                           ['--kube-version', '1.30.4']),
    ('heal', ['--nodes', 'worker-10-10-0-21'])])
def test_a_run_on_nodes_another_instance_owns_is_refused(
        capsys, monkeypatch, operation, extra):
    """The default --instance-id on the nodes of instance 'prod': refused
    before anything is written, naming 'prod' and --instance-id (before:
    scale-out "added 0", terminate reset prod's nodes)."""
    from mgmt_driver.state import records
    store = _instantiated('prod', [records.Host('10.10.0.21', 22, 'worker')])
    _instantiated()  # the default instance has a record too
    monkeypatch.setattr(cli, '_run_for_real', lambda *a: pytest.fail(
        'the run went on'))
    code, out, err = _run(capsys, operation, *extra)
    assert code == cli.EXIT_BAD_INPUT, err
    assert "belong to instance 'prod'" in err
    assert '--instance-id prod' in err and '10.10.0.21:22' in err
    assert store.instance_ids() == ['kubespray-mgmt', 'prod']


@pytest.mark.parametrize('operation, extra', [
    ('scale-out', []), ('scale-in', ['--nodes', 'worker-10-10-0-22']),
    ('heal', []), ('upgrade', ['--kube-version', '1.30.4']),
    ('terminate', []), ('snapshot', [])])
def test_a_run_of_an_instance_without_a_record_is_refused(
        capsys, monkeypatch, operation, extra):
    monkeypatch.setattr(cli, '_run_for_real', lambda *a: pytest.fail(
        'the run went on'))
    code, out, err = _run(capsys, operation, *extra)
    assert code == cli.EXIT_BAD_INPUT, err
    assert '--instance-id kubespray-mgmt: has no record in' in err
    assert 'nothing to %s' % operation in err and '"kubespray-mgmt list"' \
        in err


def test_terminate_of_a_terminated_instance_finishes(capsys, monkeypatch):
    """A released record: terminate again goes on (it finishes what
    was left); a scale-out is refused, saying it was terminated."""
    store = _instantiated()
    store.remove('kubespray-mgmt')
    ran = []
    monkeypatch.setattr(cli, '_run_for_real', lambda *a: ran.append(1) or 0)
    assert _run(capsys, 'terminate')[0] == cli.EXIT_OK and ran
    code, _, err = _run(capsys, 'scale-out')
    assert code == cli.EXIT_BAD_INPUT and 'was terminated' in err


def test_a_dry_run_says_the_real_run_is_refused(capsys):
    code, out, err = _run(capsys, 'scale-out', '--dry-run')
    assert code == cli.EXIT_OK, err
    assert err.startswith('kubespray-mgmt: warning: without --dry-run this '
                          'run is refused: --instance-id kubespray-mgmt: '
                          'has no record')
    assert out.splitlines()[-1].startswith('dry run, nothing done')


def test_instantiate_on_another_instance_s_nodes_is_refused(capsys):
    from mgmt_driver.state import records
    _instantiated('prod', [records.Host('10.10.0.11', 22, 'master'),
                           records.Host('10.10.0.1', 22, 'ansible')])
    code, _, err = _run(capsys, 'instantiate')
    assert code == cli.EXIT_BAD_INPUT
    assert "node(s) 10.10.0.11:22 of the topology belong to instance " \
        "'prod'" in err


# A heal split in two (--phase): the operator re-creates the VMs between
# the runs, e.g. with a new image.


def _ran(out):
    return [line.rsplit(' ', 1)[-1] for line in out.splitlines()
            if line.startswith('$ ') and 'ansible-playbook -i' in line]


@pytest.mark.parametrize('phase, playbooks, summary', [
    ('out', ['remove-node.yml'], 'would take worker-10-10-0-21 out of the '
     'cluster; re-create their VMs, then run heal --phase in'),
    ('in', ['playbooks/facts.yml', 'scale.yml'],
     'would heal worker-10-10-0-21'),
])
def test_a_worker_heal_in_two_phases(capsys, phase, playbooks, summary):
    code, out, err = _run(capsys, 'heal', '--dry-run', '--nodes',
                          'worker-10-10-0-21', '--phase', phase)
    assert code == cli.EXIT_OK, err
    assert _ran(out) == playbooks
    assert out.splitlines()[-1] == 'dry run, nothing done: ' + summary


HA_PARAMS = str(SAMPLES / 'instantiate_ha.json')
HA_TOPOLOGY = str(SAMPLES / 'topology_ha.yaml')


@pytest.mark.parametrize('phase, playbooks, taken_out', [
    ('out', ['remove-node.yml'], True),
    ('in', ['playbooks/facts.yml', 'cluster.yml'], False)])
def test_a_control_plane_heal_in_two_phases(capsys, phase, playbooks,
                                            taken_out):
    """Out: the etcd snapshot, drained, removed by remove-node.yml
    (out of etcd too); in: cluster.yml joins it again."""
    master = nodes.node_name('master', '10.10.0.12')
    code = cli.main(['run', 'heal', '--dry-run', '--nodes', master,
                     '--phase', phase, '--params', HA_PARAMS, '--topology',
                     HA_TOPOLOGY])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_OK, err
    assert _ran(out) == playbooks
    assert ('<program etcd-snapshot-save' in out) == taken_out
    assert ('drain %s' % master in out) == taken_out


@pytest.mark.parametrize('operation, extra, text', [
    ('scale-in', ['--nodes', 'worker-10-10-0-22'],
     '--phase: only for run heal'),
    ('heal', [], '--phase: needs --nodes'),
])
def test_phase_is_for_a_heal_of_named_nodes(capsys, operation, extra, text):
    code, out, err = _run(capsys, operation, '--dry-run', '--phase', 'out',
                          *extra)
    assert code == cli.EXIT_BAD_INPUT and text in err
    assert '$ ' not in out
