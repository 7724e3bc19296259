"""``kubespray-mgmt params check`` and ``render inventory``; local files."""

import json
import os
import stat

import pytest
import yaml

from mgmt_driver.adapters import cli
from mgmt_driver.common import exceptions
from mgmt_driver.remote import inventory
from mgmt_driver.state import localfiles
from tests.unit import params_data

P = 'k8s_cluster_installation_param'


def _write_json(path, data):
    path.write_text(json.dumps(data))
    return str(path)


def _topology(tmp_path, masters=('10.10.0.11',),
              workers=('10.10.0.21', '10.10.0.22')):
    path = tmp_path / 'topology.yaml'
    path.write_text(yaml.safe_dump({
        'masters': [{'ssh_ip': ip} for ip in masters],
        'workers': [{'ssh_ip': ip} for ip in workers],
        'external_lb': {'ssh_ip': '10.10.0.30'}}))
    return str(path)


def _tree(directory):
    """``{relative path: (mode, text)}`` of every file under *directory*."""
    found = {}
    for root, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(root, name)
            found[os.path.relpath(path, directory)] = (
                stat.S_IMODE(os.stat(path).st_mode), open(path).read())
    return found


# ------------------------------------------------------------ params check

@pytest.mark.parametrize('name', ['instantiate_simple.json',
                                  'instantiate_ha.json',
                                  'instantiate_keyauth.json'])
def test_params_check_accepts_the_samples(name, capsys):
    code = cli.main(['params', 'check',
                     str(params_data.SAMPLES / name)])
    out, err = capsys.readouterr()
    assert code == 0
    assert out.startswith('valid: masters as ubuntu (SSH port 22) by ')
    assert len(out.splitlines()) == 1
    # Only the warnings about the samples' placeholders (VIM, networks).
    assert all('still a sample placeholder' in line
               for line in err.splitlines())


def test_params_check_accepts_bare_additional_params(tmp_path, capsys):
    path = _write_json(tmp_path / 'p.json', params_data.tacker_sample())
    assert cli.main(['params', 'check', path]) == 0
    assert 'pods 192.168.0.0/16' in capsys.readouterr().out


def test_params_check_counts_explicit_nodes(tmp_path, capsys):
    request = params_data.minimal()
    request[P]['nodes'] = [{'role': 'master', 'ssh_ip': '10.10.0.11'},
                           {'role': 'worker', 'ssh_ip': '10.10.0.21'},
                           {'role': 'external_lb', 'ssh_ip': '10.10.0.30'}]
    path = _write_json(tmp_path / 'p.json', request)
    assert cli.main(['params', 'check', path]) == 0
    assert capsys.readouterr().out.rstrip().endswith(
        '3 explicit node(s) (1 master(s), 1 worker(s))')


def test_params_check_prints_every_problem(tmp_path, capsys):
    request = params_data.tacker_sample()
    request[P]['master_node']['pod_cidr'] = '10.0.0.0/33'
    request[P]['worker_node']['password'] = ['Hidden-Secret-55']
    request[P]['ansible']['port'] = 0
    path = _write_json(tmp_path / 'p.json', request)
    code = cli.main(['params', 'check', path])
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ''
    assert err.splitlines() == [
        'kubespray-mgmt: %s.ansible.port: 0 is not a port: must be '
        'between 1 and 65535' % P,
        "kubespray-mgmt: %s.master_node.pod_cidr: '10.0.0.0/33' is not a "
        'CIDR' % P,
        'kubespray-mgmt: %s.worker_node.password: must be a string, not '
        'list' % P]
    assert 'Hidden-Secret-55' not in err


def test_params_check_syntax_error_shows_position_not_text(tmp_path,
                                                           capsys):
    path = tmp_path / 'p.yaml'
    path.write_text('a: 1\nb: [Hidden-Secret-77\nc: 3\n')
    assert cli.main(['params', 'check', str(path)]) == 1
    err = capsys.readouterr().err
    assert 'not valid YAML or JSON at line' in err
    assert 'Hidden-Secret-77' not in err


def test_params_check_missing_file(tmp_path, capsys):
    assert cli.main(['params', 'check', str(tmp_path / 'nope.json')]) == 1
    assert 'cannot read it (No such file or directory)' in \
        capsys.readouterr().err


# --------------------------------------------------------- load_document

def test_load_document_refuses_duplicate_keys(tmp_path):
    path = tmp_path / 'p.json'
    path.write_text('{"a": {"password": "x", "password": "y"}}')
    with pytest.raises(exceptions.ParamsInvalid) as info:
        localfiles.load_document(path, 'PARAMS')
    assert info.value.problems == [
        "PARAMS file %s: not valid YAML or JSON at line 1, column 25: "
        "duplicate key 'password'" % path]


def test_load_document_reads_yaml_and_json(tmp_path):
    (tmp_path / 'a.yaml').write_text('x: [1, true]\n')
    (tmp_path / 'b.json').write_text('{"x": [1, true]}')
    assert localfiles.load_document(tmp_path / 'a.yaml', 'T') == \
        localfiles.load_document(tmp_path / 'b.json', 'T') == {
            'x': [1, True]}


# -------------------------------------------------------- render inventory

def _render(tmp_path, request=None, topology=None, extra=()):
    params_path = _write_json(tmp_path / 'params.json',
                              request or params_data.minimal())
    out = tmp_path / 'inv'
    code = cli.main(['render', 'inventory', '--params', params_path,
                     '--topology', topology or _topology(tmp_path),
                     '-o', str(out)] + list(extra))
    return code, out


def test_render_inventory_writes_every_file_with_its_mode(tmp_path, capsys):
    code, out = _render(tmp_path, extra=['--mtu', '1450'])
    assert code == 0
    assert capsys.readouterr().out == (
        'wrote %s: 6 file(s) for 1 master(s) and 2 worker(s)\n' % out)
    tree = _tree(out)
    assert {path: mode for path, (mode, _) in tree.items()} == {
        'hosts.yaml': 0o644, 'cluster-vars.yaml': 0o644,
        'secret-vars.yaml': 0o600,
        'host_vars/master-10-10-0-11.yaml': 0o600,
        'host_vars/worker-10-10-0-21.yaml': 0o600,
        'host_vars/worker-10-10-0-22.yaml': 0o600}
    assert yaml.safe_load(tree['cluster-vars.yaml'][1])['calico_mtu'] == 1450
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o700
    assert sorted(os.listdir(tmp_path)) == ['inv', 'params.json',
                                            'topology.yaml']


def test_render_inventory_from_explicit_nodes(tmp_path):
    request = params_data.minimal()
    request[P]['nodes'] = [{'role': 'master', 'ssh_ip': '10.10.0.11'},
                           {'role': 'external_lb', 'ssh_ip': '10.10.0.30'}]
    params_path = _write_json(tmp_path / 'params.json', request)
    out = tmp_path / 'inv'
    assert cli.main(['render', 'inventory', '--params', params_path,
                     '-o', str(out)]) == 0
    assert 'master-10-10-0-11:' in (out / 'hosts.yaml').read_text()


def test_render_inventory_needs_nodes_from_somewhere(tmp_path, capsys):
    params_path = _write_json(tmp_path / 'params.json',
                              params_data.minimal())
    assert cli.main(['render', 'inventory', '--params', params_path,
                     '-o', str(tmp_path / 'inv')]) == 1
    assert 'nodes: missing (no topology given either)' in \
        capsys.readouterr().err
    assert not (tmp_path / 'inv').exists()


def test_render_inventory_key_dir(tmp_path):
    request = params_data.minimal()
    request[P]['worker_node']['ssh_key_file'] = '/local/keys/worker'
    # A key login only: no password for sudo either.
    del request[P]['worker_node']['password']
    code, out = _render(tmp_path, request, extra=['--key-dir', '/remote/k'])
    assert code == 0
    assert yaml.safe_load((out / 'host_vars/worker-10-10-0-21.yaml')
                          .read_text()) == {
        'ansible_user': 'ubuntu',
        'ansible_ssh_private_key_file': '/remote/k/ssh-key-worker'}


def test_rerender_replaces_the_directory_whole(tmp_path):
    _render(tmp_path)
    code, out = _render(tmp_path, topology=_topology(
        tmp_path, workers=('10.10.0.23',)))
    assert code == 0
    assert sorted(os.listdir(out / 'host_vars')) == [
        'master-10-10-0-11.yaml', 'worker-10-10-0-23.yaml']
    leftovers = [name for name in os.listdir(tmp_path)
                 if name.startswith('.inv')]
    assert leftovers == []


def test_bad_input_leaves_the_old_directory_untouched(tmp_path, capsys):
    _render(tmp_path)
    before = _tree(tmp_path / 'inv')
    code, _ = _render(tmp_path, topology=_topology(
        tmp_path, masters=('10.10.0.11', '10.10.0.12')))
    assert code == 1
    assert 'etcd needs an odd number' in capsys.readouterr().err
    assert _tree(tmp_path / 'inv') == before


def test_refuses_to_replace_a_directory_with_other_files(tmp_path, capsys):
    (tmp_path / 'inv').mkdir()
    (tmp_path / 'inv' / 'notes.txt').write_text('mine')
    code, out = _render(tmp_path)
    assert code == 1
    assert 'holds files this command did not write (notes.txt)' in \
        capsys.readouterr().err
    assert os.listdir(out) == ['notes.txt']


def test_write_failure_leaves_nothing_half_written(tmp_path, monkeypatch):
    target = tmp_path / 'inv'
    localfiles.write_tree(target, {'hosts.yaml': inventory.RenderedFile('a')})
    before = _tree(target)
    calls = []
    real = localfiles._write_file

    def failing(path, content, mode):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, 'No space left on device')
        real(path, content, mode)

    monkeypatch.setattr(localfiles, '_write_file', failing)
    files = {'hosts.yaml': inventory.RenderedFile('b'),
             'host_vars/x.yaml': inventory.RenderedFile('c', 0o600)}
    with pytest.raises(exceptions.MgmtDriverOtherError) as info:
        localfiles.write_tree(target, files)
    assert 'No space left on device' in str(info.value)
    assert _tree(target) == before
    assert os.listdir(tmp_path) == ['inv']


def test_output_path_that_is_a_file(tmp_path):
    (tmp_path / 'inv').write_text('x')
    with pytest.raises(exceptions.ParamsInvalid):
        localfiles.write_tree(tmp_path / 'inv', {
            'hosts.yaml': inventory.RenderedFile('a')})


def test_file_modes_ignore_the_umask(tmp_path):
    old = os.umask(0o077)
    try:
        localfiles.write_tree(tmp_path / 'd', {
            'a.yaml': inventory.RenderedFile('x', 0o644)})
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / 'd' / 'a.yaml').st_mode) == 0o644


def test_config_default_key_makes_passwords_optional(tmp_path, capsys):
    request = params_data.minimal()
    for section, key in (('master_node', 'password'),
                         ('worker_node', 'password'),
                         ('ansible', 'password'),
                         ('external_lb_param', 'ssh_password')):
        del request[P][section][key]
    params_path = _write_json(tmp_path / 'params.json', request)
    assert cli.main(['params', 'check', params_path]) == 1
    assert capsys.readouterr().err.count('missing: give') == 4
    config = tmp_path / 'k.conf'
    config.write_text('[kubespray_mgmt]\nssh_private_key_file = /k/id\n')
    out = tmp_path / 'inv'
    assert cli.main(['--config-file', str(config), 'render', 'inventory',
                     '--params', params_path, '--topology',
                     _topology(tmp_path), '-o', str(out)]) == 0
    assert yaml.safe_load((out / 'host_vars/master-10-10-0-11.yaml')
                          .read_text())[
        'ansible_ssh_private_key_file'] == '/k/id'


def test_failed_swap_restores_the_old_directory(tmp_path, monkeypatch):
    target = tmp_path / 'inv'
    localfiles.write_tree(target, {'hosts.yaml': inventory.RenderedFile('a')})
    real_rename = os.rename
    calls = []

    def rename(src, dst):
        calls.append((str(src), str(dst)))
        if len(calls) == 2:  # the new tree taking the old one's place
            raise OSError(18, 'Invalid cross-device link')
        real_rename(src, dst)

    monkeypatch.setattr(localfiles.os, 'rename', rename)
    with pytest.raises(exceptions.MgmtDriverOtherError):
        localfiles.write_tree(target, {
            'hosts.yaml': inventory.RenderedFile('b')})
    assert (target / 'hosts.yaml').read_text() == 'a'
    assert os.listdir(tmp_path) == ['inv']


@pytest.mark.parametrize('mtu', ['1', '575', '65536', '-1500'])
def test_render_inventory_refuses_an_mtu_out_of_range(tmp_path, capsys, mtu):
    code, out = _render(tmp_path, extra=['--mtu', mtu])
    assert code == 1
    captured = capsys.readouterr()
    assert captured.err == ('kubespray-mgmt: --mtu: must be an integer from '
                            '576 to 65535\n')
    assert 'Traceback' not in captured.err + captured.out
    assert not out.exists()
