"""kubespray-mgmt params check: every kind of request, and stdin."""

import io
import json
import pathlib
import sys

import pytest

from mgmt_driver.adapters import cli
from mgmt_driver.adapters import lcm_requests

SAMPLES = pathlib.Path(__file__).parents[2] / 'samples'
INSTANTIATE = str(SAMPLES / 'instantiate_simple.json')
KINDS = {'instantiate_simple.json': 'instantiate',
         'instantiate_ha.json': 'instantiate',
         'instantiate_keyauth.json': 'instantiate',
         'instantiate_node_pools.json': 'instantiate',
         'scale_out.json': 'scale', 'scale_in.json': 'scale',
         'heal_vnf.json': 'heal', 'heal_vnfc.json': 'heal',
         'terminate.json': 'terminate', 'modify_upgrade.json': 'modify',
         'modify_relabel.json': 'modify',
         'modify_renew_certificates.json': 'modify',
         'v2/modify_upgrade.json': 'modify'}


def _check(capsys, *args):
    code = cli.main(['params', 'check', *args])
    out = capsys.readouterr()
    assert 'Traceback' not in out.err
    return code, out.out, out.err


@pytest.mark.parametrize('sample', sorted(p.name for p in
                                          SAMPLES.glob('*.json')))
def test_every_shipped_sample_passes(capsys, sample):
    code, out, err = _check(capsys, str(SAMPLES / sample))
    assert code == cli.EXIT_OK, err
    assert out.startswith('valid')


@pytest.mark.parametrize('sample', sorted(KINDS))
def test_the_kind_is_told_by_the_body(sample):
    body = json.loads((SAMPLES / sample).read_text())
    assert lcm_requests.detect_kind(body) == KINDS[sample]


@pytest.mark.parametrize('sample', ['scale_out.json', 'heal_vnf.json'])
def test_overrides_are_merged_with_the_instantiation(capsys, sample):
    code, out, err = _check(capsys, '--instantiated', INSTANTIATE,
                            str(SAMPLES / sample))
    assert code == cli.EXIT_OK, err
    assert '; with the instantiation: masters as ubuntu (SSH port 22)' in out


def test_an_override_problem_names_the_field(tmp_path, capsys):
    body = {'type': 'SCALE_UP', 'aspectId': 'worker_instance',
            'additionalParams': {'k8s_cluster_installation_param': {
                'worker_node': {'usrname': 'x'}}}}
    path = tmp_path / 'scale.json'
    path.write_text(json.dumps(body))
    code, _, err = _check(capsys, str(path))
    assert code == cli.EXIT_BAD_INPUT
    lines = err.splitlines()
    assert 'kubespray-mgmt: type: a scale request needs SCALE_OUT or ' \
        'SCALE_IN' in lines
    assert any('worker_node.usrname' in line for line in lines)


def test_kind_can_be_given(capsys):
    code, _, err = _check(capsys, '--kind', 'scale', INSTANTIATE)
    assert code == cli.EXIT_BAD_INPUT
    assert 'master_node: cannot be changed by a scale request' in err


def test_dash_reads_standard_input(monkeypatch, capsys):
    data = (SAMPLES / 'scale_out.json').read_bytes()
    monkeypatch.setattr(sys, 'stdin', io.TextIOWrapper(io.BytesIO(data)))
    code, out, err = _check(capsys, '-')
    assert code == cli.EXIT_OK, err
    assert out.startswith('valid scale request: overrides worker_node')


def test_instantiated_is_refused_for_an_instantiate_request(capsys):
    code, _, err = _check(capsys, '--instantiated', INSTANTIATE, INSTANTIATE)
    assert code == cli.EXIT_BAD_INPUT
    assert err == ('kubespray-mgmt: --instantiated: only for scale, heal and '
                   'terminate requests (PARAMS is an instantiate request)\n')


def _write(tmp_path, body):
    path = tmp_path / 'request.json'
    path.write_text(json.dumps(body))
    return str(path)


def _pool_scale(tmp_path, pools):
    return _write(tmp_path, {
        'type': 'SCALE_OUT', 'aspectId': 'dpdk_worker_instance',
        'additionalParams': {'k8s_cluster_installation_param': {
            'node_pools': pools}}})


def test_pool_overrides_are_checked_alone_and_merged(tmp_path, capsys):
    scale = _pool_scale(tmp_path, {'dpdk': {'labels': {'a': 'b'}},
                                   'zone-a': {'taints': ['x:NoSchedule']}})
    code, out, err = _check(capsys, scale)
    assert code == cli.EXIT_OK, err
    assert out.startswith('valid scale request: overrides node_pools')
    code, out, err = _check(capsys, '--instantiated', str(
        SAMPLES / 'instantiate_node_pools.json'), scale)
    assert code == cli.EXIT_OK, err
    code, _, err = _check(capsys, '--instantiated', INSTANTIATE, scale)
    assert code == cli.EXIT_BAD_INPUT
    assert 'node_pools.dpdk: is not a pool of the instantiation' in err


def test_a_pool_override_problem_names_the_field(tmp_path, capsys):
    code, _, err = _check(capsys, _pool_scale(tmp_path, {
        'dpdk': {'labels': {'a': 'b c'}, 'nodes': ['10.10.0.9']}}))
    assert code == cli.EXIT_BAD_INPUT
    assert 'node_pools.dpdk.nodes: cannot be changed by a scale request ' \
        '(only labels, taints)' in err


@pytest.mark.parametrize('sample', ['modify_upgrade.json',
                                    'v2/modify_upgrade.json'])
def test_a_patch_body_is_checked_as_the_hooks_check_it(capsys, sample):
    code, out, err = _check(capsys, str(SAMPLES / sample))
    assert code == cli.EXIT_OK, err
    assert out == ('valid modify request: upgrades Kubernetes to 1.34.3, '
                   'workers in batches of 1; other metadata keys (left to '
                   'Tacker): none\n')


def test_a_relabel_patch_names_what_it_relabels(capsys):
    code, out, err = _check(capsys, str(SAMPLES / 'modify_relabel.json'))
    assert code == cli.EXIT_OK, err
    assert out == ('valid modify request: relabels worker-10-10-0-24, '
                   'pool dpdk; other metadata keys (left to Tacker): '
                   'none\n')


def test_a_patch_without_a_version_runs_no_playbook(tmp_path, capsys):
    code, out, err = _check(capsys, _write(tmp_path, {
        'vnfInstanceName': 'k8s', 'metadata': {
            'owner': 'ops', 'tags': ['a'], 'kube_version': None}}))
    assert code == cli.EXIT_OK, err
    assert out == ('valid modify request: no metadata.kube_version: runs '
                   'no playbook; other metadata keys (left to Tacker): '
                   'owner, tags\n')


def test_every_metadata_problem_names_its_field(tmp_path, capsys):
    code, out, err = _check(capsys, '--output', 'json', _write(tmp_path, {
        'metadata': {'kube_version': '1.32', 'kube_upgrade_serial': '0',
                     'owner': 'ops'}}))
    assert code == cli.EXIT_BAD_INPUT
    report = json.loads(out)
    assert report['kind'] is None and not report['valid']
    # Sorted by field, as every request's problems are.
    assert [p.split(': ')[0] for p in report['problems']] == [
        'metadata.kube_upgrade_serial', 'metadata.kube_version']


def test_kind_modify_refuses_metadata_that_is_not_an_object(tmp_path,
                                                            capsys):
    code, _, err = _check(capsys, '--kind', 'modify', _write(
        tmp_path, {'metadata': 'kube_version=1.34.3'}))
    assert code == cli.EXIT_BAD_INPUT
    assert err == ('kubespray-mgmt: metadata: must be an object of '
                   'key-value pairs, not str\n')


def test_instantiated_is_refused_for_a_modify_request(capsys):
    code, _, err = _check(capsys, '--instantiated', INSTANTIATE,
                          str(SAMPLES / 'modify_upgrade.json'))
    assert code == cli.EXIT_BAD_INPUT
    assert err == ('kubespray-mgmt: --instantiated: only for scale, heal and '
                   'terminate requests (PARAMS is a modify request)\n')
