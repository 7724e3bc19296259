"""Workspaces of one Ansible server kept apart
(mgmt_driver.remote.isolation)."""

import os
import pwd
import subprocess

import pytest

from mgmt_driver.common import exceptions
from mgmt_driver.remote import detached
from mgmt_driver.remote import isolation
from mgmt_driver.remote import kubespray
from mgmt_driver.remote import programs
from mgmt_driver.remote import ssh
from tests import fakes
from tests.fakes import FakeConnection

WS = '/var/lib/kubespray-mgmt/vnf-1'


# ---------------------------------------------------------------- env --

def test_every_run_has_the_workspace_cache_and_sockets():
    env = isolation.playbook_env(WS)
    assert env['ANSIBLE_CACHE_PLUGIN'] == 'jsonfile'
    assert env['ANSIBLE_CACHE_PLUGIN_CONNECTION'] == WS + '/.ansible/facts'
    assert env['ANSIBLE_SSH_CONTROL_PATH_DIR'] == WS + '/.ansible/cp'
    # a control_path of ansible.cfg would pool the sockets again
    assert env['ANSIBLE_SSH_CONTROL_PATH'] == ''
    assert env['ANSIBLE_INVENTORY_ENABLED'] == 'yaml'


def test_two_workspaces_never_share_a_cache_or_a_socket_directory():
    long_base = '/srv/' + 'x' * 80
    for a, b in ((WS, WS + '-2'), (long_base + '/vnf-1',
                                   long_base + '/vnf-2')):
        env_a, env_b = isolation.playbook_env(a), isolation.playbook_env(b)
        for key in ('ANSIBLE_CACHE_PLUGIN_CONNECTION',
                    'ANSIBLE_SSH_CONTROL_PATH_DIR'):
            assert env_a[key] != env_b[key], key


@pytest.mark.parametrize('length', [10, 40, 57, 58, 59, 80, 200, 4000])
def test_control_path_fits_a_unix_socket(length):
    workspace = '/' + 'w' * (length - 1)
    directory = isolation.control_path_dir(workspace)
    if directory.startswith('~/'):
        assert directory == '~/.ansible/cp/' + directory[-16:]
        assert len(workspace + '/.ansible/cp') > isolation.MAX_CONTROL_DIR
    else:
        assert directory == workspace + '/.ansible/cp'
        # Ansible's <dir>/<10 hex>, then ssh's ".<16 random>" and NUL
        assert len(directory) + 1 + 10 + 17 + 1 <= 108


# -------------------------------------------------------------- guard --

GUARD_LIB = programs.SCRIPT_DIR / 'lib' / 'ws_guard.sh'


def run_guarded(path, create=False, prelude=''):
    script = prelude + GUARD_LIB.read_text() + (
        'ws_guard %s "$1" || exit 97\ncd -- "$1" && pwd -P\n'
        % ('create' if create else 'check'))
    proc = subprocess.run(['sh', '-c', script, 'sh', str(path)],
                          capture_output=True, text=True, timeout=30)
    return ssh.CommandResult('server', 'probe', proc.stdout, proc.stderr,
                             proc.returncode)


@pytest.fixture
def base(tmp_path):
    os.chmod(tmp_path, 0o755)
    return tmp_path


def test_guard_creates_missing_directories_private(base):
    result = run_guarded(base / 'a' / 'b' / 'ws', create=True)
    assert result.ok, result
    for part in (base / 'a', base / 'a' / 'b', base / 'a' / 'b' / 'ws'):
        assert oct(os.stat(part).st_mode & 0o7777) == oct(0o700)


def test_guard_in_check_mode_creates_nothing(base):
    result = run_guarded(base / 'a' / 'ws')
    assert result.failed and result.exit_code != isolation.UNSAFE_EXIT
    assert not (base / 'a').exists()


@pytest.mark.parametrize('mode', [0o777, 0o775, 0o757])
def test_guard_refuses_a_parent_others_can_write(base, mode):
    shared = base / 'shared'
    shared.mkdir()
    os.chmod(shared, mode)
    result = run_guarded(shared / 'ws', create=True)
    assert result.exit_code == isolation.UNSAFE_EXIT
    assert not (shared / 'ws').exists()  # nothing created
    refused = isolation.refusal(result, str(shared / 'ws'))
    assert isinstance(refused, exceptions.UnsafeRemotePath)
    text = str(refused)
    assert str(shared) in text and 'writable by other accounts' in text
    assert 'transferring_inventory_path' in text


# Another account's mkdir wins the race: between the guard's walk (the
# directory is missing) and its own mkdir (which then fails, silently),
# a directory others can write appears where it creates one.
PLANT = '''
mkdir() {
  case $4 in */planted) command mkdir -- "$4" && chmod 0777 -- "$4" ;; esac
  command mkdir "$@"
}
'''


def test_guard_checks_again_the_directories_it_has_just_made(base):
    result = run_guarded(base / 'planted' / 'ws', create=True,
                         prelude=PLANT)
    assert result.exit_code == isolation.UNSAFE_EXIT, result
    assert 'WS:UNSAFE:%s:is writable by other accounts (mode 777)' % (
        base / 'planted') in result.stdout
    # The same guard without the race creates both, private.
    assert run_guarded(base / 'a' / 'ws', create=True, prelude=PLANT).ok


@pytest.mark.parametrize('name', [detached.ENSURE, detached.START])
def test_programs_that_create_a_workspace_stop_at_a_planted_directory(
        base, name):
    # The callers of "ws_guard create", as they are sent: refused before
    # their first own step.
    text = programs.program(name)
    assert text.count('ws_guard create') >= 1
    proc = subprocess.run(['sh', '-c', PLANT + text, 'sh',
                           str(base / 'planted' / 'ws')] + ['0'] * 8,
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == isolation.UNSAFE_EXIT, proc
    assert 'is writable by other accounts (mode 777)' in proc.stdout
    assert os.listdir(base / 'planted' / 'ws') == []


def test_guard_accepts_a_sticky_parent(base):
    sticky = base / 'tmp'
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    assert run_guarded(sticky / 'ws', create=True).ok


def test_guard_refuses_a_link_into_a_writable_directory(base):
    shared = base / 'shared'
    shared.mkdir()
    os.chmod(shared, 0o777)
    (base / 'link').symlink_to(shared)
    result = run_guarded(base / 'link' / 'ws', create=True)
    assert result.exit_code == isolation.UNSAFE_EXIT
    assert not (shared / 'ws').exists()
    assert str(shared) in str(isolation.refusal(result, 'x'))


def test_guard_follows_a_link_to_a_safe_place(base):
    (base / 'real').mkdir()
    (base / 'link').symlink_to(base / 'real')
    result = run_guarded(base / 'link' / 'ws', create=True)
    assert result.ok, result
    assert result.stdout.strip() == str(base / 'real' / 'ws')


@pytest.mark.skipif(os.geteuid() != 0, reason='chown needs root')
def test_guard_refuses_a_directory_of_another_account(base):
    other = pwd.getpwnam('nobody')
    (base / 'theirs' / 'ws').mkdir(parents=True)
    for path in (base / 'theirs', base / 'theirs' / 'ws'):
        os.chown(path, other.pw_uid, other.pw_gid)
    os.chmod(base / 'theirs', 0o755)
    result = run_guarded(base / 'theirs' / 'ws')
    assert result.exit_code == isolation.UNSAFE_EXIT
    assert 'is owned by uid %d' % other.pw_uid in result.stdout
    # the workspace itself swapped for another account's: refused too
    os.chown(base / 'theirs', 0, 0)
    result = run_guarded(base / 'theirs' / 'ws')
    assert result.exit_code == isolation.UNSAFE_EXIT
    assert str(base / 'theirs' / 'ws') in result.stdout


def test_other_failures_are_not_refusals():
    result = ssh.CommandResult('h', 'c', 'WS:UNSAFE:/x:bad\n', '', 1)
    assert isolation.refusal(result, '/x/ws') is None


# ---------------------------------------------------------- workspace --

@pytest.mark.parametrize('begin', [
    kubespray.Workspace.ensure,
    # a hook's claim: ensure, layout and records in one command
    lambda ws: ws.open('/ks', None, ['hosts.yaml'], 100)])
def test_workspace_ensure_reports_the_refusal(begin):
    conn = FakeConnection('ansible')
    conn.script(r'^program:ensure-workspace ',
                stdout='WS:UNSAFE:/srv/shared:is writable by other '
                'accounts (mode 777)\n', exit_code=97)
    with pytest.raises(exceptions.UnsafeRemotePath) as err:
        begin(kubespray.Workspace(conn, '/srv/shared/vnf-1'))
    assert '/srv/shared is writable by other accounts' in str(err.value)
    assert 'on ansible' in str(err.value)


def test_workspace_ensure_other_failures_stay_command_failures():
    conn = FakeConnection('ansible')
    conn.script(r'^program:ensure-workspace ', stderr='disk full', exit_code=1)
    with pytest.raises(exceptions.RemoteCommandFailed):
        kubespray.Workspace(conn, '/srv/ws/vnf-1').ensure()


@pytest.mark.parametrize('name', [
    detached.ENSURE, detached.START, detached.FOLLOW, detached.END,
    detached.STOP, detached.REMOVE, detached.SHOW, kubespray.REPLACE,
    kubespray.OPEN])
def test_every_program_entering_the_workspace_is_guarded(name):
    mode = 'create' if name in (detached.ENSURE, detached.START,
                                kubespray.OPEN) \
        else 'check'
    guard = '\n'.join(
        line for line in GUARD_LIB.read_text().splitlines()
        if line.strip() and not line.startswith('#'))
    # nothing but the name, the function and its call before the rest
    assert programs.program(name).startswith(
        '%s%s\n%s\nws_guard %s "$1" || exit %d\n' % (
            programs.MARKER, name, guard, mode, isolation.UNSAFE_EXIT))


class RefusingServer(FakeConnection):
    """An Ansible server whose guard refuses the start of every run."""

    def run(self, command, **kwargs):
        if fakes.detached_call(command) == 'start':
            raise exceptions.RemoteCommandFailed(ssh.CommandResult(
                self.host, 'sh -c ...', 'WS:UNSAFE:/var/lib:is owned by '
                'uid 1000\n', '', isolation.UNSAFE_EXIT))
        return super().run(command, **kwargs)


def test_a_run_refused_by_the_guard_raises_unsafe_remote_path():
    conn = RefusingServer('ansible')
    runner = kubespray.Runner(conn, '/opt/kubespray', kubespray.Layout(
        'playbooks/facts.yml', True, 'v2.31.0'), kubespray.Workspace(
            conn, WS), settings=kubespray.PlaybookSettings())
    with pytest.raises(exceptions.UnsafeRemotePath) as err:
        runner.facts(1)
    assert '/var/lib is owned by uid 1000' in str(err.value)
    assert 'ws_guard' not in str(err.value)
