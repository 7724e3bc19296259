"""The operator's rough edges of ``kubespray-mgmt`` (issue "The
operator's view"): each test here failed before its fix."""

import json
import pathlib

import pytest

from mgmt_driver.adapters import cli
from tests import docs

REPO = pathlib.Path(__file__).parents[2]
SAMPLES = REPO / 'samples'


# --- dry runs of the shipped samples -----------------------------------------

def _dry_run(capsys, params, topology, *extra):
    code = cli.main(['run', 'instantiate', '--dry-run', '--params',
                     str(params), '--topology', str(topology), *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


def _install_param(path):
    return json.loads(pathlib.Path(path).read_text())['additionalParams'][
        'k8s_cluster_installation_param']


#: Samples that need more than the sample topology: a VIP from Heat
#: (below), key files at the conductor's paths (see the key file tests).
NOT_DRY_RUN = ('instantiate_ha_lb.json', 'instantiate_keyauth.json')


@pytest.mark.parametrize('sample', sorted(
    p.name for p in SAMPLES.glob('instantiate_*.json')
    if p.name not in NOT_DRY_RUN))
def test_every_shipped_instantiate_sample_has_a_dry_run(capsys, sample):
    """A sample naming kubespray.version plans as on a checkout of that
    version, and the plan says the version was assumed."""
    code, out, err = _dry_run(capsys, SAMPLES / sample,
                              SAMPLES / 'topology_ha.yaml')
    assert code == cli.EXIT_OK, err
    assert out.rstrip().splitlines()[-1].startswith('dry run, nothing done')
    wanted = _install_param(SAMPLES / sample).get('kubespray', {}).get(
        'version')
    if wanted:
        assert '# assumed: the checkout is kubespray %s' % wanted in out


def test_a_vip_from_heat_is_refused_without_tacker(capsys):
    """instantiate_ha_lb.json names its VIP by a Heat port: the command
    says so, before anything, instead of a layout error at the end."""
    code, out, err = _dry_run(capsys, SAMPLES / 'instantiate_ha_lb.json',
                              SAMPLES / 'topology_ha.yaml')
    assert code == cli.EXIT_BAD_INPUT
    assert 'external_lb_param.vip_cp_name: names a Heat port' in err
    assert 'give external_lb_param.vip' in err and out == ''


def test_gateways_with_a_vip_have_a_dry_run(capsys, tmp_path):
    """The same sample with its VIP given, on two gateways: the plan
    takes each gateway's interface as a placeholder, and says so."""
    doc = json.loads((SAMPLES / 'instantiate_ha_lb.json').read_text())
    lb = doc['additionalParams']['k8s_cluster_installation_param'][
        'external_lb_param']
    del lb['vip_cp_name']
    lb['vip'] = '10.10.0.100'
    params = tmp_path / 'params.json'
    params.write_text(json.dumps(doc))
    topology = tmp_path / 'topology.yaml'
    topology.write_text((SAMPLES / 'topology_ha.yaml').read_text().replace(
        'external_lb:\n  ssh_ip: 10.10.0.30',
        'external_lb:\n  - ssh_ip: 10.10.0.30\n  - ssh_ip: 10.10.0.31'))
    code, out, err = _dry_run(capsys, params, topology, '--package-dir',
                              str(REPO / 'vnf_packages' / 'kubespray_ha_lb'))
    assert code == cli.EXIT_OK, err
    assert out.count('# assumed: the address is on eth0, /24') == 2
    # one program installs it: checked by keepalived -t -f, reloaded
    assert ' sh /etc/keepalived/keepalived.conf 0600 ' in out
    assert ' 3 keepalived -t -f systemctl reload-or-restart keepalived' \
        in out
    assert 'install /etc/keepalived/keepalived.conf (mode 0600' in out


# --- csar check ./DIR, csar build -o -----------------------------------------

@pytest.fixture(scope='module')
def built_csar(tmp_path_factory):
    from tests import packages
    sol001 = packages.sol001_dir()
    out = tmp_path_factory.mktemp('csar') / 'simple.zip'
    code = cli.main(['csar', 'build', str(packages.PACKAGES_DIR /
                                          'kubespray_simple'),
                     '-o', str(out), '--sol001-dir', str(sol001)])
    assert code == cli.EXIT_OK
    return out


@pytest.mark.parametrize('relative', ['./extracted', 'extracted'])
def test_csar_check_of_a_relative_directory(built_csar, tmp_path,
                                            monkeypatch, capsys, relative):
    from tests import packages
    packages.extract(built_csar, tmp_path / 'extracted')
    monkeypatch.chdir(tmp_path)
    code = cli.main(['csar', 'check', relative])
    out = capsys.readouterr()
    assert (code, out.err) == (cli.EXIT_OK, '')
    assert out.out == '%s: OK\n' % relative


def test_csar_build_into_a_directory_is_refused(tmp_path, monkeypatch,
                                                capsys):
    from tests import packages
    monkeypatch.chdir(tmp_path)
    code = cli.main(['csar', 'build', str(packages.PACKAGES_DIR /
                                          'kubespray_simple'), '-o', '.'])
    err = capsys.readouterr().err
    assert code == cli.EXIT_BAD_INPUT
    assert 'the output . is a directory: give the path of the zip file ' \
        'to write, such as kubespray_simple.zip' in err, err
    assert 'Traceback' not in err and list(tmp_path.iterdir()) == []


def test_csar_build_creates_no_directory(tmp_path, capsys):
    from tests import packages
    out = tmp_path / 'no' / 'such' / 'x.zip'
    code = cli.main(['csar', 'build', str(packages.PACKAGES_DIR /
                                          'kubespray_simple'), '-o', str(out)])
    err = capsys.readouterr().err
    assert code == cli.EXIT_BAD_INPUT
    assert 'directory %s does not exist (create it first)' % out.parent \
        in err, err
    assert list(tmp_path.iterdir()) == []


# --- no Tacker wording in the command's errors -------------------------------

def _main(capsys, *argv):
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _no_tacker_words(err):
    for words in ('additionalParams is invalid', 'additionalParams does not',
                  'An error occurred in MgmtDriver'):
        assert words not in err


def test_a_bad_run_name_names_the_option(capsys):
    code, _, err = _main(capsys, 'logs', '--params',
                         str(SAMPLES / 'instantiate_simple.json'),
                         '--run', '../x')
    assert code == cli.EXIT_BAD_INPUT
    assert err.startswith("kubespray-mgmt: --run: '../x' is not the name "
                          "of a run"), err
    _no_tacker_words(err)


def test_a_bad_output_path_says_only_what_failed(capsys, tmp_path):
    out = tmp_path / 'missing' / 'haproxy.cfg'
    code, _, err = _main(capsys, 'render', 'haproxy', '--params',
                         str(SAMPLES / 'instantiate_simple.json'),
                         '--topology', str(SAMPLES / 'topology_simple.yaml'),
                         '-o', str(out))
    assert code == cli.EXIT_REMOTE_FAILURE
    assert err == 'kubespray-mgmt: cannot write %s: No such file or ' \
        'directory\n' % out
    _no_tacker_words(err)


def test_a_driver_refusal_is_worded_for_the_command_line(capsys):
    code, _, err = _main(capsys, 'run', 'instantiate', '--dry-run',
                         '--params', str(SAMPLES / 'instantiate_simple.json'),
                         '--topology', str(SAMPLES / 'topology_simple.yaml'),
                         '--instance-id', '../x')
    assert code == cli.EXIT_BAD_INPUT
    assert err == "kubespray-mgmt: invalid VNF instance id '../x' (not " \
        "usable as a file name)\n"


# --- params check: placeholders ----------------------------------------------

SIMPLE_PLACEHOLDERS = [
    'vimConnectionInfo[0].vimId', 'extVirtualLinks[0].resourceId',
    'extVirtualLinks[1].resourceId', 'extVirtualLinks[2].resourceId']


def test_params_check_warns_about_sample_placeholders(capsys):
    code, out, err = _main(capsys, 'params', 'check',
                           str(SAMPLES / 'instantiate_simple.json'))
    assert code == cli.EXIT_OK and out.startswith('valid: ')
    warned = [line.split(': ')[2] for line in err.splitlines()]
    assert warned == SIMPLE_PLACEHOLDERS, err
    assert all(line.startswith('kubespray-mgmt: warning: ') and
               line.endswith('still a sample placeholder (REPLACE-WITH-'
                             '...): replace it before sending the request')
               for line in err.splitlines())


def test_params_check_json_lists_the_placeholders(capsys):
    code, out, err = _main(capsys, 'params', 'check', '--output', 'json',
                           str(SAMPLES / 'instantiate_simple.json'))
    report = json.loads(out)
    assert (code, err, report['valid']) == (cli.EXIT_OK, '', True)
    assert [w.split(':')[0] for w in report['warnings']] == \
        SIMPLE_PLACEHOLDERS


def test_a_request_without_placeholders_gets_no_warning(capsys):
    code, _, err = _main(capsys, 'params', 'check',
                         str(SAMPLES / 'scale_out.json'))
    assert (code, err) == (cli.EXIT_OK, '')


def test_placeholders_are_found_at_any_depth():
    from mgmt_driver.adapters import lcm_requests
    deep = 'REPLACE-WITH-X'
    for _ in range(5000):  # past the recursion limit
        deep = [deep]
    doc = {'a': deep, 'b': {'c': 'REPLACE-WITH-Y', 'd': 'x'}}
    assert lcm_requests.placeholder_paths(doc) == [
        'a' + '[0]' * 5000, 'b.c']
    many = {'k%03d' % i: 'REPLACE-WITH-Z' for i in range(25)}
    warnings = lcm_requests.placeholder_warnings(many)
    assert len(warnings) == 21 and warnings[-1] == \
        'and 5 more placeholder(s)'


# --- status text: taints and cordoned nodes ----------------------------------

def test_status_text_shows_taints_and_cordoned_nodes():
    from mgmt_driver.adapters import status
    node = {'name': 'worker-1', 'roles': [], 'ready': 'True',
            'kubelet_version': 'v1.33.5', 'internal_ip': '10.0.0.1',
            'labels': {'pool': 'a'}, 'schedulable': False,
            'taints': ['gpu=yes:NoSchedule', 'x:NoExecute']}
    other = dict(node, name='worker-2', schedulable=True, taints=[],
                 labels={})
    text = status._format_nodes({'ok': True, 'error': None, 'host': 'm',
                                 'items': [node, other]})
    assert text.splitlines()[1:] == [
        '  NAME      ROLES  READY          VERSION  LABELS  TAINTS',
        '  worker-1  -      True,cordoned  v1.33.5  pool=a  '
        'gpu=yes:NoSchedule,x:NoExecute',
        '  worker-2  -      True           v1.33.5  -       -']


# --- run relabel: every bad option -------------------------------------------

def test_relabel_reports_every_bad_option(capsys):
    code, out, err = _main(
        capsys, 'run', 'relabel', '--dry-run', '--params',
        str(SAMPLES / 'instantiate_simple.json'), '--topology',
        str(SAMPLES / 'topology_simple.yaml'),
        '--labels', 'a b=c,ok=1,$(id)=x', '--taints', 'gpu=x:Never')
    assert code == cli.EXIT_BAD_INPUT and out == ''
    lines = err.splitlines()
    assert [line.split(': ')[1] for line in lines] == [
        '--nodes, --pools', '--labels', '--labels', '--taints'], err


def test_relabel_without_nodes_or_changes_names_both(capsys):
    code, _, err = _main(
        capsys, 'run', 'relabel', '--dry-run', '--params',
        str(SAMPLES / 'instantiate_simple.json'), '--topology',
        str(SAMPLES / 'topology_simple.yaml'), '--labels', ',')
    assert code == cli.EXIT_BAD_INPUT
    assert err.splitlines() == [
        'kubespray-mgmt: --nodes, --pools: missing (which nodes to '
        'relabel?)',
        'kubespray-mgmt: --labels, --taints: missing (what to set?)']


# --- config values of the wrong type -----------------------------------------

def test_a_config_value_of_the_wrong_type_says_why(capsys, tmp_path):
    from oslo_config import cfg
    config = tmp_path / 'bad.conf'
    config.write_text('[kubespray_mgmt]\nssh_connect_timeout = abc\n'
                      'poll_max_delay = soon\nssh_command_timeout = 0\n')
    try:
        code, out, err = _main(capsys, '--config-file', str(config),
                               'params', 'check',
                               str(SAMPLES / 'scale_out.json'))
    finally:
        cfg.CONF([], project='kubespray-mgmt', default_config_files=[])
    assert (code, out) == (cli.EXIT_BAD_INPUT, '')
    assert sorted(err.splitlines()) == [
        'kubespray-mgmt: [kubespray_mgmt] poll_max_delay: must be a '
        "number, not 'soon'",
        'kubespray-mgmt: [kubespray_mgmt] ssh_command_timeout: Should be '
        'greater than or equal to 1',
        'kubespray-mgmt: [kubespray_mgmt] ssh_connect_timeout: must be a '
        "whole number, not 'abc'"]


# --- key files: what the command line's user is told -------------------------

def test_a_missing_key_file_says_so_to_a_cli_user(capsys):
    code, out, err = _dry_run(capsys, SAMPLES / 'instantiate_keyauth.json',
                              SAMPLES / 'topology_ha.yaml')
    assert (code, out) == (cli.EXIT_BAD_INPUT, '')
    assert 'ssh_key_dirs' not in err
    assert "ansible.ssh_key_file: '/etc/tacker/kubespray/ansible_id_ed25519'" \
        ': cannot open it: No such file or directory' in err


def test_a_file_that_is_no_key_says_so_to_a_cli_user(capsys, tmp_path):
    doc = json.loads((SAMPLES / 'instantiate_keyauth.json').read_text())
    root = doc['additionalParams']['k8s_cluster_installation_param']
    not_a_key = tmp_path / 'notes.txt'
    not_a_key.write_text('hello\n')
    for section in ('ansible', 'master_node', 'worker_node',
                    'external_lb_param'):
        root[section]['ssh_key_file'] = str(not_a_key)
    params = tmp_path / 'params.json'
    params.write_text(json.dumps(doc))
    code, _, err = _dry_run(capsys, params, SAMPLES / 'topology_ha.yaml')
    assert code == cli.EXIT_BAD_INPUT
    assert err.count(': not a private key ssh can use (PEM or OpenSSH)') \
        == 4 and 'ssh_key_dirs' not in err


# --- | head: standard output closed early ------------------------------------

def _with_stdout_closed(*argv):
    """Run the command with a standard output nobody reads: the pipe is
    closed before the program (still importing) writes anything."""
    import os
    import subprocess
    import sys
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, '-m', 'mgmt_driver.adapters.cli',
                             *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=str(REPO))
    proc.stdout.close()
    err = proc.stderr.read().decode()
    return proc.wait(timeout=120), err


@pytest.mark.parametrize('argv', [
    ('params', 'check', '--output', 'json',
     'samples/instantiate_simple.json'),
    ('run', 'instantiate', '--dry-run', '--params',
     'samples/instantiate_ha.json', '--topology', 'samples/topology_ha.yaml'),
])
def test_a_closed_standard_output_ends_quietly(argv):
    code, err = _with_stdout_closed(*argv)
    assert (code, err) == (141, '')  # cli.EXIT_BROKEN_PIPE


# --- exit codes: a busy cluster is not a failed playbook ---------------------

def _raising(exc):
    import argparse

    def func(args):
        raise exc
    return argparse.Namespace(func=func)


def test_a_busy_cluster_and_a_failed_playbook_exit_differently(capsys):
    from mgmt_driver.common import exceptions
    from mgmt_driver.remote import ssh
    busy = exceptions.ClusterBusy(host='10.0.0.5', holder='scale_out',
                                  log='/w/logs/x.log')
    result = ssh.CommandResult('10.0.0.5', 'ansible-playbook', '', 'boom', 2)
    failed = exceptions.PlaybookFailed('cluster.yml', result, {}, [], 'boom')
    codes = {cli._call(_raising(busy)), cli._call(_raising(failed))}
    assert codes == {cli.EXIT_BUSY, cli.EXIT_REMOTE_FAILURE}
    assert cli.EXIT_BUSY not in (cli.EXIT_OK, cli.EXIT_BAD_INPUT,
                                 cli.EXIT_REMOTE_FAILURE,
                                 cli.EXIT_DIFFERENCES)
    assert 'holds this cluster\'s lock' in capsys.readouterr().err




def test_the_docs_list_every_exit_code():
    import re
    table = docs.section('admin/cli', 'Exit codes')
    listed = {int(code) for code in re.findall(r'^(\d+) ', table, re.M)}
    codes = {value for name, value in vars(cli).items()
             if name.startswith('EXIT_')}
    assert listed == codes and len(codes) == len(
        [n for n in vars(cli) if n.startswith('EXIT_')])


def test_the_docs_say_how_to_remove_the_demo_account():
    import os

    from mgmt_localsite import sshd
    text = docs.section('contributor/local-site',
                        'Cleaning up after the demo')
    assert 'userdel -r %s && rm -rf %s' % (
        sshd.TEST_USER, os.path.dirname(sshd.PASSWORD_FILE)) in text


# --- developer tooling -------------------------------------------------------

def _tox_commands():
    import configparser
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(REPO / 'tox.ini')
    return {section: tox[section]['commands'].strip()
            for section in tox.sections() if 'commands' in tox[section]}


def test_tox_posargs_are_the_only_paths():
    """No env names a test directory besides {posargs}: ``tox -e py3 --
    FILE`` must run FILE only (a directory is given as testpaths)."""
    import shlex
    for section, command in _tox_commands().items():
        if '{posargs}' not in command or 'pytest' not in command:
            continue
        words = shlex.split(command.replace('{posargs}', ''))
        paths = [w for i, w in enumerate(words)
                 if w.startswith('tests/') and words[i - 1] != '-o']
        assert paths in ([], ['tests/unit/test_params_fuzz.py']), section


def test_tox_py3_with_a_file_collects_only_that_file():
    import shlex
    import subprocess
    import sys
    command = _tox_commands()['testenv'].replace(
        '{posargs}', 'tests/unit/test_readmes.py --collect-only')
    argv = shlex.split(command)
    assert argv[0] == 'pytest'
    proc = subprocess.run([sys.executable, '-m', *argv], cwd=str(REPO),
                          capture_output=True, text=True, timeout=300)
    ids = [line for line in proc.stdout.splitlines() if '::' in line]
    assert ids and all(i.startswith('tests/unit/test_readmes.py::')
                       for i in ids), proc.stdout[-2000:]


def test_the_docs_name_every_module_that_needs_the_sol001_files():
    """Counts went stale ("26 tests"); the modules are checked instead."""
    import re
    text = docs.section('contributor/testing', 'The ETSI SOL001 type files')
    paragraph = ' '.join(text.split('need the two ETSI')[0].split())
    named = set(re.findall(r'``(test_\w+\.py)``', paragraph))
    needing = {p.name for p in (REPO / 'tests' / 'unit').glob('test_*.py')
               if 'sol001_dir()' in p.read_text()}
    assert named == needing


# --- status records no key, and says why it refuses one ----------------------

def test_a_reading_command_refuses_an_unknown_key_without_policy_advice(
        tmp_path):
    """status and logs turn accept-new into read-only: the refusal says
    that they record nothing, not "set host_key_policy = accept-new"
    (which it already is)."""
    import paramiko
    from oslo_config import cfg

    from mgmt_driver.adapters import status
    from mgmt_driver.common import conf as kconf
    from mgmt_driver.common import exceptions
    from mgmt_driver.remote import ssh
    conf = cfg.ConfigOpts()
    kconf.register_opts(conf)
    conf([])
    settings = status.read_only_settings(conf)
    known = ssh.KnownHosts(str(tmp_path / 'kh'), settings.host_key_policy)
    with pytest.raises(exceptions.HostKeyNotRecorded) as caught:
        known.check('10.0.0.7', 22, paramiko.Ed25519Key.from_private_key_file(
            _ed25519(tmp_path)))
    text = str(caught.value)
    assert 'host_key_policy' not in text
    assert 'status and logs record no host key' in text
    assert isinstance(caught.value, exceptions.HostKeyUnknown)
    assert not (tmp_path / 'kh').exists()


def _ed25519(tmp_path):
    import subprocess
    path = tmp_path / 'key'
    subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-f',
                    str(path)], check=True)
    return str(path)
