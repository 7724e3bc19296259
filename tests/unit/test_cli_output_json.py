"""kubespray-mgmt params check / run --dry-run: --output json."""

import fcntl
import json
import os
import pathlib

import pytest

from mgmt_driver.adapters import cli
from mgmt_driver.state import records
from mgmt_driver.state import statestore

SAMPLES = pathlib.Path(__file__).parents[2] / 'samples'
PARAMS = str(SAMPLES / 'instantiate_simple.json')
TOPOLOGY = str(SAMPLES / 'topology_simple.yaml')
CHECK_KEYS = {'valid', 'kind', 'summary', 'overrides', 'merged', 'problems',
              'warnings'}
STEP_KEYS = {'host', 'kind', 'text', 'mode', 'bytes', 'content'}


def _main(capsys, *argv):
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize('sample, kind', [
    ('instantiate_ha.json', 'instantiate'), ('scale_out.json', 'scale'),
    ('heal_vnfc.json', 'heal'), ('terminate.json', 'terminate')])
def test_params_check_json_for_a_valid_request(capsys, sample, kind):
    code, out, err = _main(capsys, 'params', 'check', '--output', 'json',
                           str(SAMPLES / sample))
    assert code == cli.EXIT_OK and err == ''
    report = json.loads(out)
    assert set(report) == CHECK_KEYS
    assert report['valid'] is True and report['problems'] == []
    assert report['kind'] == kind and report['summary'].startswith('valid')


def test_params_check_json_lists_every_problem(tmp_path, capsys):
    path = tmp_path / 'scale.json'
    path.write_text(json.dumps({'type': 'UP', 'additionalParams': {
        'k8s_cluster_installation_param': {'master_node': {}}}}))
    code, out, err = _main(capsys, 'params', 'check', '--output', 'json',
                           str(path))
    assert code == cli.EXIT_BAD_INPUT and err == ''
    report = json.loads(out)
    assert set(report) == CHECK_KEYS and report['valid'] is False
    assert len(report['problems']) == 2 and report['summary'] is None


def test_dry_run_json_has_every_step_and_no_secret(capsys):
    code, out, err = _main(capsys, 'run', 'instantiate', '--dry-run',
                           '--output', 'json', '--params', PARAMS,
                           '--topology', TOPOLOGY)
    assert code == cli.EXIT_OK, err
    plan = json.loads(out)
    assert set(plan) == {'operation', 'instance_id', 'dry_run', 'summary',
                         'nodes', 'steps'}
    assert plan['operation'] == 'instantiate'
    assert all(set(step) == STEP_KEYS for step in plan['steps'])
    # What holds a secret is hidden, and is private on the host; a
    # private file without one (secret-vars.yaml when empty) is shown.
    hidden = [s for s in plan['steps']
              if s['kind'] == 'write' and s['content'] is None]
    assert hidden and all(s['mode'] == '0600' for s in hidden)
    assert 'ansible_password' not in out  # host_vars hold it
    playbooks = [s['text'].rsplit(' ', 1)[-1] for s in plan['steps']
                 if 'ansible-playbook -i' in s['text']]
    assert playbooks == ['cluster.yml']


def test_a_real_run_takes_the_state_lock_and_says_so_in_json(tmp_path,
                                                             capsys):
    """A real run holds the instance's state lock, as a hook does: while
    another holds it, the run changes nothing (no host is contacted),
    exits 4, and ``-o json`` says why (before: -o json was refused for
    real runs, and no lock was taken)."""
    config = tmp_path / 'kubespray-mgmt.conf'
    config.write_text('[kubespray_mgmt]\nrecords_dir = %s\n'
                      % (tmp_path / 'records'))
    store = records.RecordStore(str(tmp_path / 'records'))
    lock = statestore.lock_path(store, 'busy-one')
    os.makedirs(os.path.dirname(lock))
    store.save(records.InstanceRecord('busy-one'))  # it was instantiated
    with open(lock, 'a') as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        code, out, err = _main(capsys, '--config-file', str(config), 'run',
                               'terminate', '-o', 'json', '--params',
                               PARAMS, '--topology', TOPOLOGY,
                               '--instance-id', 'busy-one')
    assert code == cli.EXIT_BUSY, err
    report = json.loads(out)
    assert report['result'] == 'failed' and report['dry_run'] is False
    assert 'holds its state lock' in report['error']
    assert report['playbooks'] == [] and report['nodes'] == {
        'added': [], 'removed': [], 'named': []}
    assert 'holds its state lock' in err


