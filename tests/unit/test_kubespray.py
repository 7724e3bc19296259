"""Unit tests of mgmt_driver.remote.kubespray with the recording SSH fake."""

import hashlib
import io
import logging
import os
import pathlib
import re
import shlex
import socket
import subprocess
import tarfile

import pytest
import yaml
from oslo_config import cfg

from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.remote import detached
from mgmt_driver.remote import isolation
from mgmt_driver.remote import kubespray
from mgmt_driver.remote import programs
from mgmt_driver.remote import ssh
from tests import fakes
from tests.fakes import FakeConnection
from tests.fakes import joined

ROOT = '/opt/kubespray'
WS = '/var/lib/kubespray-mgmt/vnf-1'



def env_text(ws):
    """The ``env`` prefix of a run in workspace *ws*: plain output, and
    the workspace's own fact cache, SSH control sockets and inventory
    plugin (no script inventories)."""
    return ('env ANSIBLE_NOCOLOR=1 PYTHONUNBUFFERED=1 '
            'ANSIBLE_CACHE_PLUGIN=jsonfile '
            'ANSIBLE_CACHE_PLUGIN_CONNECTION={ws}/.ansible/facts '
            'ANSIBLE_SSH_CONTROL_PATH_DIR={ws}/.ansible/cp '
            'ANSIBLE_SSH_CONTROL_PATH= ANSIBLE_INVENTORY_ENABLED=yaml '
            'ANSIBLE_INVENTORY_UNPARSED_FAILED=true ').format(ws=ws)


ENV = env_text(WS)
IN_ROOT = 'detached in %s: %s' % (ROOT, ENV.rstrip())
NEW = kubespray.Layout('playbooks/facts.yml', True, 'v2.24.0')
OLD = kubespray.Layout('facts.yml', False, None)
SETTINGS = kubespray.PlaybookSettings(timeout_base=1000,
                                      timeout_per_node=100, forks=10)


class RecordingConnection(FakeConnection):
    """FakeConnection that also records each command's timeout and
    standard input."""

    def __init__(self, host='10.0.0.5'):
        super().__init__(host)
        self.timeouts = []
        self.stdins = []

    def run(self, command, timeout=None, check=True, env=None, stdin=None,
            on_line=None, keep_tail=False):
        kind = fakes.detached_call(command)
        if kind is None:
            self.timeouts.append(timeout)
            self.stdins.append(stdin)
        elif kind == 'start':
            self.timeouts.append(int(command[9]))  # the run's own limit
            self.stdins.append(stdin)
        return super().run(command, timeout, check, env, stdin, on_line,
                           keep_tail)


def make_runner(layout=NEW, settings=SETTINGS, conn=None, **kwargs):
    conn = conn or RecordingConnection()
    workspace = kubespray.Workspace(conn, WS)
    return kubespray.Runner(conn, ROOT, layout, workspace,
                            settings=settings, **kwargs)


def playbook_command(tail):
    return IN_ROOT + ' ansible-playbook -i %s/hosts.yaml ' % WS + tail


# ----------------------------------------------------------- workspace --

def test_ensure_creates_or_reuses_with_mode_0700_in_one_command():
    conn = FakeConnection('ansible')
    assert kubespray.Workspace(conn, WS).ensure() is None  # no run
    assert conn.commands == [
        joined(programs.command(detached.ENSURE, WS))]
    for name in (detached.ENSURE, kubespray.OPEN):
        assert 'umask 077\n  mkdir -p -- "$1" && chmod 0700 -- "$1"' in \
            programs.program(name)


def _open_on_a_real_shell(tmp_path, records, limit=4096):
    """``Workspace.open`` run by a real sh on this machine (one command,
    :class:`LocalShell`): a checkout of v2.31's layout, a workspace with
    the records of *records* (``{name: bytes}``)."""
    os.chmod(tmp_path, 0o755)
    checkout = tmp_path / 'kubespray'
    (checkout / 'playbooks').mkdir(parents=True)
    for name in ('cluster.yml', 'scale.yml', 'reset.yml',
                 'playbooks/facts.yml'):
        (checkout / name).write_text('- hosts: all\n')
    (checkout / 'remove-node.yml').write_text('skip_confirmation: true\n')
    workspace = tmp_path / 'ws' / 'vnf-1'
    workspace.mkdir(parents=True, mode=0o700)
    for name, body in records.items():
        (workspace / name).write_bytes(body)
    conn = LocalShell()
    opened = kubespray.Workspace(conn, str(workspace)).open(
        str(checkout), None, ['hosts.yaml', 'node-settings.yaml',
                              'kube-version.yaml'], limit)
    return conn, opened


def test_open_is_ensure_layout_and_records_in_one_command(tmp_path):
    hosts = b'all:\n  hosts: {m1: {}}\n' + 'é\n'.encode()
    _, opened = _open_on_a_real_shell(
        tmp_path, {'hosts.yaml': hosts, 'kube-version.yaml': b''})
    assert opened.holder is None
    assert opened.records == {'hosts.yaml': hosts.decode(),
                              'node-settings.yaml': None,
                              'kube-version.yaml': ''}
    layout = kubespray.parse_layout(opened.layout_output, 'local', ROOT)
    assert layout == kubespray.Layout('playbooks/facts.yml', True, None)


def test_open_leaves_a_file_larger_than_its_limit_to_read_record(tmp_path):
    # The ordinary read (sftp) refuses it with RemoteFileTooLarge.
    _, opened = _open_on_a_real_shell(
        tmp_path, {'hosts.yaml': b'x' * 101, 'node-settings.yaml': b'y'},
        limit=100)
    assert opened.records == {'node-settings.yaml': 'y',
                              'kube-version.yaml': None}


@pytest.mark.parametrize('line', [
    'KO:FILE:hosts.yaml:4:eHl6',        # 3 bytes of 4: cut short
    'KO:FILE:hosts.yaml:3:eHl6eA==',    # 4 bytes: grew meanwhile
    'KO:FILE:hosts.yaml:3:eHl!',        # not base64
    'KO:FILE:hosts.yaml::eHl6',         # no size
    'KO:FILE:other.yaml:3:eHl6',        # not asked for
    'KO:MISSING:other.yaml',
    'KR:INFO:KO:FILE:hosts.yaml:3:eHl6',  # a lock holder's line
])
def test_open_takes_only_whole_files_it_asked_for(line):
    conn = FakeConnection('ansible')
    conn.script(r'^program:open-workspace ', stdout=line + '\n')
    opened = kubespray.Workspace(conn, WS).open(ROOT, None, ['hosts.yaml'],
                                                100)
    assert opened.records == {}
    assert len(conn.commands) == 1
    # and the record is read the ordinary way
    conn.files[WS + '/hosts.yaml'] = 'xyz'
    assert kubespray.Workspace(conn, WS).read_record(
        'hosts.yaml', lambda text: text) == 'xyz'


def test_workspace_path_is_normalised():
    ws = kubespray.Workspace(FakeConnection('a'), '//var/lib//kmgmt/x/')
    assert ws.path == '/var/lib/kmgmt/x'
    assert ws.file('host_vars//n1.yaml') == \
        '/var/lib/kmgmt/x/host_vars/n1.yaml'


@pytest.mark.parametrize('path', [
    '', '   ', '/', '//', 'relative/dir', './x/y', '/tmp', '/a/../b',
    '/var/lib/..', '/a/./b', '/a/b\n', None, 42])
def test_dangerous_workspace_paths_are_refused(path):
    conn = FakeConnection('ansible')
    with pytest.raises(exceptions.UnsafeRemotePath) as info:
        kubespray.Workspace(conn, path)
    assert isinstance(info.value, exceptions.MgmtDriverParamInvalid)
    assert conn.calls == []


def test_upload_writes_each_document_0600_after_one_mkdir():
    conn = FakeConnection('ansible')
    ws = kubespray.Workspace(conn, WS)
    docs = {'hosts.yaml': 'all: {}\n',
            'cluster-vars.yaml': 'kube_pods_subnet: 10.233.64.0/18\n',
            'host_vars/node-1.yaml': 'ansible_password_file: x\n',
            'group_vars/all/extra.yml': 'a: 1\n'}
    paths = ws.upload(docs)
    assert paths == [WS + '/' + name for name in docs]
    assert conn.calls == [
        ('run', joined(['mkdir', '-p', '-m', '0700', '--',
                        WS + '/group_vars', WS + '/group_vars/all',
                        WS + '/host_vars'])),
    ] + [('write_file', WS + '/' + name) for name in docs]
    assert conn.files == {WS + '/' + k: v for k, v in docs.items()}
    assert set(conn.modes.values()) == {0o600}


def test_upload_without_subdirectories_issues_no_command():
    conn = FakeConnection('ansible')
    kubespray.Workspace(conn, WS).upload({'hosts.yaml': 'x'})
    assert conn.commands == []
    assert conn.modes == {WS + '/hosts.yaml': 0o600}


def test_upload_makes_a_subdirectory_once_per_workspace():
    conn = FakeConnection('ansible')
    ws = kubespray.Workspace(conn, WS)
    ws.upload({'host_vars/a.yaml': '1'})
    ws.upload({'host_vars/b.yaml': '2', 'host_vars/c/d.yaml': '3'})
    assert conn.commands == [
        joined(['mkdir', '-p', '-m', '0700', '--', WS + '/host_vars']),
        joined(['mkdir', '-p', '-m', '0700', '--', WS + '/host_vars/c'])]


def _replace_set(nodes):
    docs = {'hosts.yaml': ('all: {}\n', 0o644),
            'secret-vars.yaml': ('{}\n', 0o600)}
    docs.update({'host_vars/n%d.yaml' % i: ('ansible_user: u\n', 0o600)
                 for i in range(nodes)})
    return docs


@pytest.mark.parametrize('nodes', [3, 300])
def test_replace_is_one_command_whatever_the_node_count(nodes):
    conn = RecordingConnection()
    paths = kubespray.Workspace(conn, WS).replace(_replace_set(nodes))
    assert len(conn.calls) == 1 and len(conn.commands) == 1
    assert len(paths) == nodes + 2
    with tarfile.open(fileobj=io.BytesIO(conn.stdins[0])) as archive:
        members = {m.name: m for m in archive.getmembers()}
    assert members['host_vars'].isdir() and \
        members['host_vars'].mode == 0o700
    assert members['hosts.yaml'].mode == 0o644
    assert members['host_vars/n1.yaml'].mode == 0o600
    # Nothing of the documents is on the command line.
    assert 'ansible_user' not in conn.commands[0]


def test_replace_script_on_a_real_shell(tmp_path):
    """The script unpacks, replaces host_vars/ whole, keeps modes."""
    ws = tmp_path / 'ws'
    (ws / 'host_vars').mkdir(parents=True)
    (ws / 'host_vars' / 'gone.yaml').write_text('old')
    (ws / 'hosts.yaml').write_text('old')
    (ws / 'remove-node-vars.yaml').write_text('kept')
    docs = _replace_set(2)
    subprocess.run(programs.command(kubespray.REPLACE, str(ws)),
                   input=kubespray._tar(docs), check=True)
    assert sorted(p.name for p in (ws / 'host_vars').iterdir()) == [
        'n0.yaml', 'n1.yaml']
    assert (ws / 'hosts.yaml').read_text() == 'all: {}\n'
    assert (ws / 'remove-node-vars.yaml').read_text() == 'kept'
    assert sorted(p.name for p in ws.iterdir()) == [
        'host_vars', 'hosts.yaml', 'remove-node-vars.yaml',
        'secret-vars.yaml']  # no temporary directory left
    mode = {p: (ws / p).stat().st_mode & 0o777 for p in (
        'host_vars', 'host_vars/n0.yaml', 'hosts.yaml', 'secret-vars.yaml')}
    assert mode == {'host_vars': 0o700, 'host_vars/n0.yaml': 0o600,
                    'hosts.yaml': 0o644, 'secret-vars.yaml': 0o600}


def test_replace_refuses_unsafe_names_before_any_command():
    conn = FakeConnection('ansible')
    with pytest.raises(exceptions.UnsafeRemotePath):
        kubespray.Workspace(conn, WS).replace({'../x': ('bad', 0o600)})
    assert conn.calls == []


@pytest.mark.parametrize('name', [
    '../escape.yaml', '/etc/passwd', 'host_vars/../../x', '', '.',
    'a/./b', 'x\ny'])
def test_unsafe_document_names_are_refused_before_any_write(name):
    conn = FakeConnection('ansible')
    ws = kubespray.Workspace(conn, WS)
    with pytest.raises(exceptions.UnsafeRemotePath):
        ws.upload({'hosts.yaml': 'ok', name: 'bad'})
    assert conn.calls == [] and conn.files == {}


def test_remove_stops_a_run_and_deletes_the_workspace_in_one_command():
    conn = FakeConnection('ansible')
    kubespray.Workspace(conn, WS).remove(7)
    assert conn.commands == [
        joined(programs.command(detached.REMOVE, WS, WS + '/.ansible/cp',
                                '7'))]


def _masters_site(tmp_path, monkeypatch, ssh_exit):
    """A workspace whose control path directory holds two sockets and a
    file, and an ``ssh`` on PATH that logs its argv and exits with
    *ssh_exit* (-O exit) or 0 (-O check)."""
    home, bin_dir, ws = tmp_path / 'home', tmp_path / 'bin', tmp_path / 'w'
    for d in (home, bin_dir, ws):
        d.mkdir(mode=0o700)
    monkeypatch.setenv('HOME', str(home))
    control = isolation.control_path_dir(str(ws)).replace('~', str(home), 1)
    os.makedirs(control)
    monkeypatch.chdir(control)  # a socket's path has at most 107 bytes
    for name in ('0123456789', '9%c'):
        socket.socket(socket.AF_UNIX).bind(name)
    (pathlib.Path(control) / 'not-a-socket').write_text('')
    log = tmp_path / 'ssh.log'
    (bin_dir / 'ssh').write_text(
        '#!/bin/sh\nprintf "%%s " "$@" >> %s\necho >> %s\n'
        'case "$*" in *"-O exit"*) exit %d ;; esac\n' % (
            shlex.quote(str(log)), shlex.quote(str(log)), ssh_exit))
    (bin_dir / 'ssh').chmod(0o755)
    monkeypatch.setenv('PATH', '%s:%s' % (bin_dir, os.environ['PATH']))
    return ws, control, log


def test_remove_tells_each_ssh_master_of_the_workspace_to_exit(
        tmp_path, monkeypatch):
    ws, control, log = _masters_site(tmp_path, monkeypatch, 0)
    kubespray.Workspace(LocalShell(), str(ws)).remove(3)
    opts = '-F /dev/null -o BatchMode=yes -o ControlPath=%s/%s -O exit ' \
        'kubespray-mgmt-master '
    sent = log.read_text().splitlines() if log.exists() else []
    assert sorted(sent) == sorted([
        opts % (control, '0123456789'), opts % (control, '9%%c')])
    assert not ws.exists()


def test_a_master_that_stays_is_a_warning_naming_the_host(
        tmp_path, monkeypatch, caplog):
    ws, control, log = _masters_site(tmp_path, monkeypatch, 255)
    kubespray.Workspace(LocalShell(), str(ws)).remove(3)
    assert not ws.exists()
    warned = [r.getMessage() for r in caplog.records
              if r.levelno == logging.WARNING]
    assert len(warned) == 1, warned
    assert 'did not close on the Ansible server local' in warned[0]
    assert '2 SSH master' in warned[0]


def test_replace_closes_the_ssh_masters_to_the_hosts_gone(
        tmp_path, monkeypatch):
    # A removal's inventory: Ansible's master to the removed node is told
    # to exit, the others stay (issue 40: none lives on to ControlPersist).
    ws, control, log = _masters_site(tmp_path, monkeypatch, 0)
    gone, kept = ('10.0.0.22', 22, 'ubuntu'), ('10.0.0.21', 22, 'ubuntu')
    for host in (gone, kept):
        socket.socket(socket.AF_UNIX).bind(
            isolation.control_socket_name(*host))
    kubespray.Workspace(LocalShell(), str(ws)).replace(
        {'hosts.yaml': ('all: {}\n', 0o644)}, gone=[gone], exit_timeout=3)
    assert log.read_text().splitlines() == [
        '-F /dev/null -o BatchMode=yes -o ControlPath=%s/%s -O exit '
        'kubespray-mgmt-master ' % (control,
                                    isolation.control_socket_name(*gone))]
    assert (ws / 'hosts.yaml').read_text() == 'all: {}\n'


def test_the_control_socket_name_is_ansibles():
    # ansible's ssh connection plugin, _create_control_path: the SHA-1
    # of "host-port-user", its first 10 hex digits.
    assert isolation.control_socket_name('10.0.0.22', 22, 'ubuntu') == \
        hashlib.sha1(b'10.0.0.22-22-ubuntu').hexdigest()[:10]


def test_replace_without_hosts_gone_asks_no_master():
    conn = FakeConnection('ansible')
    kubespray.Workspace(conn, WS).replace({'hosts.yaml': ('x', 0o644)})
    assert conn.commands[0].endswith(' sh %s' % WS)


def test_workspace_path_with_spaces_is_quoted():
    conn = FakeConnection('ansible')
    kubespray.Workspace(conn, '/srv/k m/vnf 1').remove()
    assert conn.commands[0].endswith(
        " sh '/srv/k m/vnf 1' '/srv/k m/vnf 1/.ansible/cp' 5")


# -------------------------------------------------------------- layout --

DETECT = joined(programs.command(kubespray.DETECT, ROOT))
FILES_OLD = ('KS:FILE:cluster.yml\nKS:FILE:scale.yml\nKS:FILE:remove-node.yml'
             '\nKS:FILE:reset.yml\nKS:FILE:facts.yml\n')
FILES_NEW = FILES_OLD.replace('KS:FILE:facts.yml',
                              'KS:FILE:playbooks/facts.yml')


@pytest.mark.parametrize('stdout, expected', [
    (FILES_OLD, kubespray.Layout('facts.yml', False, None)),
    (FILES_OLD + 'KS:SKIP_CONFIRMATION\nKS:GIT:v2.21.0\n',
     kubespray.Layout('facts.yml', True, 'v2.21.0')),
    (FILES_NEW + 'KS:SKIP_CONFIRMATION\nKS:GIT:v2.24.0-3-gabc\n'
                 'KS:GALAXY:2.24.0\n',
     kubespray.Layout('playbooks/facts.yml', True, 'v2.24.0-3-gabc')),
    (FILES_NEW + 'KS:SKIP_CONFIRMATION\nKS:GALAXY:2.31.0\n',
     kubespray.Layout('playbooks/facts.yml', True, '2.31.0')),
    # a checkout with a root facts.yml of its own still uses the new one
    (FILES_NEW + 'KS:FILE:facts.yml\nKS:SKIP_CONFIRMATION\n',
     kubespray.Layout('playbooks/facts.yml', True, None)),
])
def test_detect_layout_in_one_command(stdout, expected):
    conn = FakeConnection('ansible')
    conn.script(r'^program:detect-layout ', stdout=stdout)
    assert kubespray.detect_layout(conn, ROOT) == expected
    assert conn.commands == [DETECT]


@pytest.mark.parametrize('stdout, reason', [
    ('KS:MISSING\n', 'does not exist'),
    (FILES_OLD + 'KS:LEGACY_GROUPS\n', 'kube-master'),
    (FILES_OLD + 'KS:GIT:v2.15.1\n', 'version v2.15.1'),
    (FILES_OLD.replace('KS:FILE:remove-node.yml\n', ''), 'remove-node.yml'),
    ('KS:FILE:cluster.yml\nKS:FILE:scale.yml\nKS:FILE:remove-node.yml\n',
     'facts.yml'),
])
def test_detect_layout_refuses_unusable_checkouts(stdout, reason):
    conn = FakeConnection('ansible')
    conn.script(r'^program:detect-layout ', stdout=stdout)
    with pytest.raises(exceptions.KubesprayCheckoutUnsupported) as info:
        kubespray.detect_layout(conn, ROOT)
    message = str(info.value)
    assert reason in message and ROOT in message and 'ansible' in message


class LocalShell:
    """Runs commands with the local /bin/sh, as the remote host would."""

    host = 'local'

    def run(self, command, timeout=None, check=True, env=None, stdin=None,
            on_line=None):
        text = ssh.display_command(command, env)
        if isinstance(stdin, str):
            stdin = stdin.encode()
        done = subprocess.run(['sh', '-c', text], capture_output=True,
                              input=stdin, timeout=30, check=False)
        return ssh.CommandResult('local', text, done.stdout.decode(),
                                 done.stderr.decode(), done.returncode)


def make_checkout(root, facts, remove_text, inventory_groups, galaxy=None):
    root.mkdir()
    for name in ('cluster.yml', 'scale.yml', 'reset.yml', facts):
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_text('---\n')
    (root / 'remove-node.yml').write_text(remove_text)
    sample = root / 'inventory' / 'sample'
    sample.mkdir(parents=True)
    (sample / 'inventory.ini').write_text(
        ''.join('[%s]\n' % group for group in inventory_groups))
    if galaxy:
        (root / 'galaxy.yml').write_text('namespace: x\nversion: %s\n'
                                         % galaxy)


REMOVE_V216 = 'vars_prompt:\n  name: "delete_nodes_confirmation"\n'
REMOVE_V217 = 'when: not (skip_confirmation | default(false) | bool)\n'


def test_detect_script_on_real_trees(tmp_path):
    shell = LocalShell()
    make_checkout(tmp_path / 'v2.16 copy', 'facts.yml', REMOVE_V216,
                  ['kube_control_plane', 'kube_node'])
    make_checkout(tmp_path / 'v2.31', 'playbooks/facts.yml', REMOVE_V217,
                  ['kube_control_plane', 'kube_node'], galaxy='2.31.0')
    make_checkout(tmp_path / 'v2.15', 'facts.yml', REMOVE_V216,
                  ['kube-master', 'kube-node'])
    assert kubespray.detect_layout(shell, str(tmp_path / 'v2.16 copy')) == \
        kubespray.Layout('facts.yml', False, None)
    assert kubespray.detect_layout(shell, str(tmp_path / 'v2.31')) == \
        kubespray.Layout('playbooks/facts.yml', True, '2.31.0')
    with pytest.raises(exceptions.KubesprayCheckoutUnsupported,
                       match='kube-master'):
        kubespray.detect_layout(shell, str(tmp_path / 'v2.15'))
    with pytest.raises(exceptions.KubesprayCheckoutUnsupported,
                       match='does not exist'):
        kubespray.detect_layout(shell, str(tmp_path / 'absent'))


def test_detect_script_skip_confirmation_in_playbooks_dir(tmp_path):
    # v2.22+: remove-node.yml only imports playbooks/remove_node.yml.
    make_checkout(tmp_path / 'k', 'playbooks/facts.yml',
                  '- import_playbook: playbooks/remove_node.yml\n',
                  ['kube_control_plane'])
    (tmp_path / 'k' / 'playbooks' / 'remove_node.yml').write_text(
        REMOVE_V217)
    layout = kubespray.detect_layout(LocalShell(), str(tmp_path / 'k'))
    assert layout.has_skip_confirmation is True


# ----------------------------------------------------------- playbooks --

def test_cluster_command_timeout_and_forks():
    runner = make_runner()
    runner.cluster(node_count=3)
    assert runner.conn.commands == [playbook_command(
        '-e @%s/cluster-vars.yaml --become --become-user=root --forks 10 '
        'cluster.yml' % WS)]
    assert runner.conn.timeouts == [1000 + 3 * 100]


def test_cluster_with_limit_and_more_vars_files():
    runner = make_runner(extra_vars_files=('cluster-vars.yaml',
                                           'user-vars.yaml'))
    runner.cluster(node_count=5, limit=['etcd', 'kube_control_plane'])
    assert runner.conn.commands == [playbook_command(
        '-e @{ws}/cluster-vars.yaml -e @{ws}/user-vars.yaml --become '
        '--become-user=root --forks 10 --limit=etcd,kube_control_plane '
        'cluster.yml'.format(ws=WS))]


@pytest.mark.parametrize('layout, playbook', [
    (OLD, 'facts.yml'), (NEW, 'playbooks/facts.yml')])
def test_facts_runs_the_layouts_playbook_without_limit(layout, playbook):
    runner = make_runner(layout)
    runner.facts(node_count=4)
    assert runner.conn.commands == [playbook_command(
        '-e @%s/cluster-vars.yaml --become --become-user=root --forks 10 %s'
        % (WS, playbook))]
    assert '--limit' not in runner.conn.commands[0]
    assert runner.conn.timeouts == [1400]


def test_scale_limits_to_the_new_nodes_and_scales_timeout():
    runner = make_runner()
    runner.scale(['worker-10-0-0-31', 'worker-10-0-0-32',
                  'worker-10-0-0-31'])
    assert runner.conn.commands == [playbook_command(
        '-e @%s/cluster-vars.yaml --become --become-user=root --forks 10 '
        '--limit=worker-10-0-0-31,worker-10-0-0-32 scale.yml' % WS)]
    assert runner.conn.timeouts == [1200]


def test_scale_with_no_new_node_runs_nothing():
    runner = make_runner()
    assert runner.scale([]) is None
    assert runner.conn.calls == []


@pytest.mark.parametrize('bad', ['all,w1', 'w1:w2', '*', '~w.*', 'w 1',
                                 '!w1', '', '-x'])
def test_limit_names_must_be_plain_host_names(bad):
    runner = make_runner()
    with pytest.raises(exceptions.MgmtDriverParamInvalid):
        runner.scale(['w1', bad])
    assert runner.conn.calls == []


def test_timeout_grows_with_node_count():
    settings = kubespray.PlaybookSettings(timeout_base=1800,
                                          timeout_per_node=600)
    assert [settings.timeout_for(n) for n in (0, 1, 3, 50)] == [
        1800, 2400, 3600, 31800]
    assert make_runner(settings=settings).timeout_for(5) == 4800


def test_run_playbook_options():
    runner = make_runner(settings=kubespray.PlaybookSettings(
        forks=10, ansible_playbook='/opt/venv/bin/ansible-playbook'))
    runner.run_playbook('upgrade-cluster.yml', '/inv/h.yaml', forks=3,
                        timeout=77, become=False)
    assert runner.conn.commands == [
        IN_ROOT + ' /opt/venv/bin/ansible-playbook -i /inv/h.yaml '
        '--forks 3 upgrade-cluster.yml']
    assert runner.conn.timeouts == [77]


def test_paths_with_spaces_stay_single_arguments():
    conn = RecordingConnection()
    ws = kubespray.Workspace(conn, '/srv/my ws/vnf')
    runner = kubespray.Runner(conn, '/opt/kube spray', NEW, ws,
                              settings=SETTINGS)
    runner.facts(1)
    assert conn.commands == [
        "detached in /opt/kube spray: env ANSIBLE_NOCOLOR=1 "
        "PYTHONUNBUFFERED=1 ANSIBLE_CACHE_PLUGIN=jsonfile "
        "'ANSIBLE_CACHE_PLUGIN_CONNECTION=/srv/my ws/vnf/.ansible/facts' "
        "'ANSIBLE_SSH_CONTROL_PATH_DIR=/srv/my ws/vnf/.ansible/cp' "
        "ANSIBLE_SSH_CONTROL_PATH= ANSIBLE_INVENTORY_ENABLED=yaml "
        "ANSIBLE_INVENTORY_UNPARSED_FAILED=true "
        "ansible-playbook -i '/srv/my ws/vnf/hosts.yaml' "
        "-e '@/srv/my ws/vnf/cluster-vars.yaml' --become --become-user=root "
        "--forks 10 playbooks/facts.yml"]


def test_settings_from_conf():
    config = cfg.ConfigOpts()
    kconf.register_opts(config)
    config([], project='kubespray-mgmt-test', default_config_files=[])
    config.set_override('playbook_timeout_base', 900, 'kubespray_mgmt')
    config.set_override('playbook_timeout_per_node', 60, 'kubespray_mgmt')
    config.set_override('ansible_forks', 25, 'kubespray_mgmt')
    settings = kubespray.PlaybookSettings.from_conf(config)
    assert (settings.timeout_base, settings.timeout_per_node,
            settings.forks) == (900, 60, 25)
    assert settings.timeout_for(2) == 1020
    assert kubespray.PlaybookSettings.from_conf(config, forks=4).forks == 4


def test_ansible_playbook_command_from_conf():
    config = cfg.ConfigOpts()
    kconf.register_opts(config)
    config([], project='kubespray-mgmt-test', default_config_files=[])
    assert kubespray.PlaybookSettings.from_conf(
        config).ansible_playbook == 'ansible-playbook'
    config.set_override('ansible_playbook_command',
                        '/opt/ks venv/bin/ansible-playbook', 'kubespray_mgmt')
    settings = kubespray.PlaybookSettings.from_conf(config)
    conn = RecordingConnection()
    make_runner(settings=settings, conn=conn).cluster(1)
    assert (" '/opt/ks venv/bin/ansible-playbook' -i %s/hosts.yaml "
            % WS) in conn.commands[-1]
    assert kubespray.PlaybookSettings.from_conf(
        config, ansible_playbook='/x/ap').ansible_playbook == '/x/ap'


# ---------------------------------------------------------- remove-node --

def remove_vars(runner):
    return yaml.safe_load(runner.conn.files[WS + '/remove-node-vars.yaml'])


def test_remove_reachable_nodes_new_layout():
    runner = make_runner(NEW)
    runner.remove_nodes(['worker-10-0-0-21', 'worker-10-0-0-22'])
    assert remove_vars(runner) == {
        'node': 'worker-10-0-0-21,worker-10-0-0-22',
        'skip_confirmation': True}
    assert runner.conn.modes[WS + '/remove-node-vars.yaml'] == 0o600
    assert runner.conn.calls == [
        ('write_file', WS + '/remove-node-vars.yaml'),
        ('run', playbook_command(
            '-e @{ws}/cluster-vars.yaml -e @{ws}/remove-node-vars.yaml '
            '--become --become-user=root --forks 10 '
            '--limit=worker-10-0-0-21,worker-10-0-0-22,kube_control_plane,'
            'etcd,localhost remove-node.yml'.format(ws=WS))),
        ('follow', '20260101T000000Z-operation-remove-node'),
        ('end', '20260101T000000Z-operation-remove-node')]
    assert runner.conn.timeouts == [1200]


def test_remove_unreachable_node_old_layout():
    runner = make_runner(OLD)
    runner.remove_nodes('worker-10-0-0-21', reachable=False)
    text = runner.conn.files[WS + '/remove-node-vars.yaml']
    assert remove_vars(runner) == {
        'node': 'worker-10-0-0-21', 'skip_confirmation': True,
        'delete_nodes_confirmation': 'yes', 'reset_nodes': False,
        'allow_ungraceful_removal': True, 'drain_grace_period': 0,
        'drain_timeout': '60s'}
    # typed booleans and the quoted "yes" string, never k=v strings
    assert 'reset_nodes: false' in text
    assert "delete_nodes_confirmation: 'yes'" in text
    assert '-e @%s/remove-node-vars.yaml' % WS in runner.conn.commands[0]
    assert '-e node=' not in runner.conn.commands[0]


def test_remove_unreachable_node_new_layout_and_extra_vars():
    runner = make_runner(NEW)
    runner.remove_nodes(['w1'], reachable=False,
                        extra_vars={'drain_timeout': '120s',
                                    'node': 'ignored'})
    assert remove_vars(runner) == {
        'drain_timeout': '120s', 'node': 'w1', 'skip_confirmation': True,
        'reset_nodes': False, 'allow_ungraceful_removal': True,
        'drain_grace_period': 0}


@pytest.mark.parametrize('names', [['all'], ['w1', 'localhost'],
                                   ['w1,w2'], ['kube_node:!w1']])
def test_remove_refuses_patterns_that_widen(names):
    runner = make_runner()
    with pytest.raises(exceptions.MgmtDriverParamInvalid):
        runner.remove_nodes(names)
    assert runner.conn.calls == []


def test_removal_vars_sent_in_a_replace_are_not_written_again():
    runner = make_runner(NEW)
    sent = runner.removal_vars(['worker-10-0-0-21'])
    runner.workspace.replace(sent)
    runner.remove_nodes(['worker-10-0-0-21'])
    assert [c[0] for c in runner.conn.calls] == ['run', 'run', 'follow',
                                                 'end']
    # Other vars than those sent: written.
    runner.remove_nodes(['worker-10-0-0-21'], reachable=False)
    assert runner.conn.calls[4] == ('write_file',
                                    WS + '/remove-node-vars.yaml')
    assert remove_vars(runner)['reset_nodes'] is False


def test_remove_nothing_runs_nothing():
    runner = make_runner()
    assert runner.remove_nodes([]) is None
    assert runner.conn.calls == []


def test_reset_confirms_through_a_vars_file():
    runner = make_runner(OLD)
    runner.reset(node_count=3)
    assert yaml.safe_load(runner.conn.files[WS + '/reset-vars.yaml']) == {
        'reset_confirmation': 'yes', 'skip_confirmation': True}
    assert runner.conn.modes[WS + '/reset-vars.yaml'] == 0o600
    assert runner.conn.commands == [playbook_command(
        '-e @{ws}/cluster-vars.yaml -e @{ws}/reset-vars.yaml --become '
        '--become-user=root --forks 10 reset.yml'.format(ws=WS))]
    assert runner.conn.timeouts == [1300]


# --------------------------------------------------------------- recap --

GOOD_OUTPUT = """\

PLAY [Check Ansible version] ***************************************************

TASK [Check {{ minimal_ansible_version }} <= Ansible version < {{ maximal_ansible_version }}] ***
ok: [localhost]

PLAY [Add kube-master nodes to kube_control_plane] *****************************
skipping: no hosts matched

TASK [kubernetes/preinstall : Stop if either kube_control_plane or kube_node group is empty] ***
ok: [master-10-0-0-11]
changed: [worker-10-0-0-21]

PLAY RECAP *********************************************************************
localhost                  : ok=3    changed=0    unreachable=0    failed=0    skipped=0    rescued=0    ignored=0
master-10-0-0-11           : ok=612  changed=135  unreachable=0    failed=0    skipped=1041 rescued=0    ignored=2
worker-10-0-0-21           : ok=421  changed=88   unreachable=0    failed=0    skipped=652  rescued=0    ignored=1

Sunday 12 May 2024  10:11:12 +0000 (0:00:00.041)       0:14:03.447 *********
===============================================================================
download : Download_file | Download item -------------------------------- 41.12s
"""  # noqa: E501

FAILED_OUTPUT = """\
PLAY [Prepare nodes for upgrade] ***********************************************

TASK [kubernetes/preinstall : Stop if kernel version is too low] **************
ok: [master-10-0-0-11]
fatal: [worker-10-0-0-22]: FAILED! => {"changed": false, "msg": "kernel too old"}
fatal: [worker-10-0-0-23]: UNREACHABLE! => {"changed": false, "msg": "Failed to connect to the host via ssh: ssh: connect to host 10.0.0.23 port 22: No route to host", "unreachable": true}

NO MORE HOSTS LEFT *************************************************************

PLAY RECAP *********************************************************************
master-10-0-0-11           : ok=40   changed=3    unreachable=0    failed=0    skipped=20   rescued=0    ignored=0
worker-10-0-0-22           : ok=12   changed=1    unreachable=0    failed=1    skipped=9    rescued=0    ignored=0
worker-10-0-0-23           : ok=0    changed=0    unreachable=1    failed=0    skipped=0    rescued=0    ignored=0
"""  # noqa: E501


def test_parse_recap():
    recap = kubespray.parse_recap(GOOD_OUTPUT)
    assert recap == {
        'localhost': {'ok': 3, 'changed': 0, 'unreachable': 0, 'failed': 0,
                      'skipped': 0, 'rescued': 0, 'ignored': 0},
        'master-10-0-0-11': {'ok': 612, 'changed': 135, 'unreachable': 0,
                             'failed': 0, 'skipped': 1041, 'rescued': 0,
                             'ignored': 2},
        'worker-10-0-0-21': {'ok': 421, 'changed': 88, 'unreachable': 0,
                             'failed': 0, 'skipped': 652, 'rescued': 0,
                             'ignored': 1}}


def test_parse_recap_of_old_ansible_and_of_no_recap():
    old = ('PLAY RECAP ***\nnode1 : ok=5 changed=1 unreachable=0 '
           'failed=0\n')
    assert kubespray.parse_recap(old) == {'node1': {
        'ok': 5, 'changed': 1, 'unreachable': 0, 'failed': 0}}
    assert kubespray.parse_recap('ERROR! the playbook: facts.yml could '
                                 'not be found\n') == {}


def test_successful_run_returns_recap():
    runner = make_runner()
    runner.conn.script(r'cluster\.yml$', stdout=GOOD_OUTPUT)
    run = runner.cluster(2)
    assert run.playbook == 'cluster.yml'
    assert run.recap['master-10-0-0-11']['changed'] == 135
    assert run.result.exit_code == 0


def test_failure_names_failed_and_unreachable_hosts_and_tail():
    runner = make_runner()
    runner.conn.script(r'scale\.yml$', stdout=FAILED_OUTPUT,
                       stderr='[WARNING]: Could not match supplied host '
                              'pattern, ignoring: bastion\n', exit_code=2)
    with pytest.raises(exceptions.PlaybookFailed) as info:
        runner.scale(['worker-10-0-0-22', 'worker-10-0-0-23'])
    error = info.value
    message = str(error)
    assert isinstance(error, exceptions.MgmtDriverRemoteCommandError)
    assert message.startswith('ansible-playbook scale.yml on 10.0.0.5 '
                              'failed with exit code 2;')
    assert 'failed hosts: worker-10-0-0-22;' in message
    assert 'unreachable hosts: worker-10-0-0-23;' in message
    assert 'kernel too old' in message and 'No route to host' in message
    assert 'NO MORE HOSTS LEFT' in message          # the output tail
    assert 'ignoring: bastion' in message           # the stderr tail
    assert error.failed_hosts == ['worker-10-0-0-22']
    assert error.unreachable_hosts == ['worker-10-0-0-23']
    assert error.recap['master-10-0-0-11']['ok'] == 40
    assert error.result.exit_code == 2


def test_failure_before_any_play():
    runner = make_runner(OLD)
    runner.conn.script(r'facts\.yml$', stderr='ERROR! the playbook: '
                       'facts.yml could not be found\n', exit_code=1)
    with pytest.raises(exceptions.PlaybookFailed) as info:
        runner.facts(3)
    message = str(info.value)
    assert 'failed hosts: none; unreachable hosts: none' in message
    assert 'errors: ERROR! the playbook: facts.yml could not be found' \
        in message


def test_timeout_propagates():
    runner = make_runner()
    runner.conn.script(r'cluster\.yml$', stdout='PLAY [x] ***\n',
                       timeout=True)
    with pytest.raises(exceptions.PlaybookTimedOut) as info:
        runner.cluster(1)
    stem = '20260101T000000Z-operation-cluster'
    assert ('stop', stem) in runner.conn.calls  # stopped there too
    assert '%s/logs/%s.log' % (WS, stem) in str(info.value)


def test_progress_gets_every_line_log_gets_plays_tasks_and_recap(caplog):
    caplog.set_level(logging.DEBUG, logger='mgmt_driver.remote.kubespray')
    lines = []
    runner = make_runner(on_progress=lines.append)
    runner.conn.script(r'cluster\.yml$', stdout=GOOD_OUTPUT)
    runner.cluster(2)
    # Issue 31, defect 13: the run is named first (playbook, limit,
    # host), then its log.
    assert lines[0] == ('running cluster.yml on 10.0.0.5: every host of '
                        'the inventory (timeout 1200 s)')
    assert re.fullmatch(r"log: \S+/logs/\S+-cluster\.log on 10\.0\.0\.5",
                        lines[1]), lines[1]
    assert lines[2:] == GOOD_OUTPUT.splitlines()
    logged = [r.getMessage() for r in caplog.records
              if r.name == 'mgmt_driver.remote.kubespray'
              and r.levelno == logging.INFO]
    progress = [m.split(': ', 1)[1] for m in logged
                if m.startswith('cluster.yml on 10.0.0.5: ')]
    assert progress == [
        'PLAY [Check Ansible version]',
        'TASK [Check {{ minimal_ansible_version }} <= Ansible version < '
        '{{ maximal_ansible_version }}]',
        'PLAY [Add kube-master nodes to kube_control_plane]',
        'TASK [kubernetes/preinstall : Stop if either kube_control_plane or '
        'kube_node group is empty]',
        'PLAY RECAP',
        GOOD_OUTPUT.splitlines()[14].strip(),
        GOOD_OUTPUT.splitlines()[15].strip(),
        GOOD_OUTPUT.splitlines()[16].strip(),
    ]
    # neither per-host task results nor profile_tasks' summary
    assert not any('ok: [' in m or 'Download' in m for m in logged)


@pytest.mark.parametrize('have, wanted', [
    ('v2.31.0', None), ('v2.31.0', '2.31'), ('v2.31.0-4-gabc', '2.31.0'),
    ('2.27.1', '2.27'), ('v2.27.1', 'v2.27.1')])
def test_check_version_accepts_the_requested_version(have, wanted):
    kubespray.check_version(kubespray.Layout('playbooks/facts.yml', True,
                                             have), wanted, 'h', '/ks')


@pytest.mark.parametrize('have, wanted', [
    ('v2.31.0', '2.27.0'), ('v2.31.0', '2.3'), ('2.27.1', '2.27.0'),
    (None, '2.27'), ('main', '2.27')])
def test_check_version_refuses_another_version(have, wanted):
    layout = kubespray.Layout('playbooks/facts.yml', True, have)
    with pytest.raises(exceptions.KubesprayCheckoutUnsupported) as info:
        kubespray.check_version(layout, wanted, 'ansible-1', '/ks')
    message = str(info.value)
    assert 'ansible-1' in message and '/ks' in message
    assert 'kubespray.version' in message and str(wanted) in message


# --- the Ansible the checkout accepts ------------------------------------

def _fake_ansible_playbook(path, first_line):
    path.write_text('#!/bin/sh\nprintf "%%s\\n" %s\necho "  config file"\n'
                    % shlex.quote(first_line))
    path.chmod(0o755)
    return str(path)


def test_detect_reads_the_ansible_range_and_the_servers_version(tmp_path):
    make_checkout(tmp_path / 'k', 'playbooks/facts.yml', REMOVE_V217,
                  ['kube_control_plane'], galaxy='2.31.0')
    (tmp_path / 'k' / 'playbooks' / 'ansible_version.yml').write_text(
        '- hosts: all\n  vars:\n    minimal_ansible_version: 2.18.0\n'
        '    maximal_ansible_version: "2.19.0"\n')
    command = _fake_ansible_playbook(tmp_path / 'ap',
                                     'ansible-playbook [core 2.19.14]')
    layout = kubespray.detect_layout(LocalShell(), str(tmp_path / 'k'),
                                     command)
    assert (layout.ansible_range, layout.ansible) == (
        ('2.18.0', '2.19.0'), '2.19.14')
    with pytest.raises(exceptions.KubesprayCheckoutUnsupported) as caught:
        kubespray.check_ansible(layout, 'ansible', ROOT, command)
    message = str(caught.value)
    for part in ('2.18.0 <= version < 2.19.0', 'is 2.19.14', ROOT,
                 'ansible_playbook_command'):
        assert part in message
    # Not asked (no command): nothing to compare, nothing refused.
    quiet = kubespray.detect_layout(LocalShell(), str(tmp_path / 'k'))
    assert quiet.ansible is None
    kubespray.check_ansible(quiet, 'ansible', ROOT, 'ansible-playbook')


@pytest.mark.parametrize('version, refused', [
    ('2.18.0', False), ('2.18.19', False), ('2.17.14', True),
    ('2.19.0', True), ('2.9.27', True), (None, False)])
def test_check_ansible_compares_versions_not_strings(version, refused):
    layout = kubespray.Layout('playbooks/facts.yml', True, '2.31.0',
                              ('2.18.0', '2.19.0'), version)
    if refused:
        with pytest.raises(exceptions.KubesprayCheckoutUnsupported):
            kubespray.check_ansible(layout, 'a', ROOT, 'ansible-playbook')
    else:
        kubespray.check_ansible(layout, 'a', ROOT, 'ansible-playbook')


@pytest.mark.parametrize('line, version', [
    ('ansible-playbook [core 2.18.19]', '2.18.19'),
    ('ansible-playbook 2.9.27', '2.9.27'),
    ('ansible-playbook [core 2.18.19]' + 'x' * 10 ** 6, '2.18.19'),
    # Not Ansible (a wrapper, ``true``): its version says nothing.
    ('true (GNU coreutils) 9.1', None),
    ('\x1b]0;owned\x07 no version here', None),
    ('9' * 100000 + '.1', None)])
def test_the_servers_version_line_is_untrusted(line, version):
    stdout = FILES_NEW + 'KS:ANSIBLE:%s\n' % line
    layout = kubespray._layout_from(kubespray._markers(stdout),
                                    kubespray._refuser('a', ROOT))
    assert layout.ansible == version


def test_replaced_files_carry_the_date_they_were_written(tmp_path):
    """Issue 41 (low): every workspace file was dated 1970."""
    import time
    ws = tmp_path / 'ws'
    ws.mkdir()
    subprocess.run(programs.command(kubespray.REPLACE, str(ws)),
                   input=kubespray._tar(_replace_set(1)), check=True)
    for name in ('hosts.yaml', 'host_vars'):
        assert time.gmtime((ws / name).stat().st_mtime).tm_year > 2000
