"""The kubespray double's privilege escalation models sudo (issue 30).

Real kubespray runs every task of its host plays under ``--become``
(sudo): a host whose user has no NOPASSWD fails at its first task unless
Ansible has the become password.  The double's become plugin is
Ansible's ``sudo`` plugin running the site's ``bin/kube-sudo``
(``fake_sudo.py``), which asks a password only on the hosts the site
lists.  These tests run ``kube-sudo`` as a process, as Ansible's SSH
connection does on a host, and build the plugin's command through
Ansible's own plugin loader.
"""

import json
import os
import shlex
import subprocess
import sys

import mgmt_localsite as localsite
import pytest
from mgmt_localsite import fake_sudo

KUBE_SUDO = localsite.SOURCE / 'bin' / 'kube-sudo'
PLUGINS = localsite.CHECKOUT_SOURCE / 'plugins' / 'become'
NODE = '127.0.44.20'
PASSWORD = 'S3cret {{ not a template }}'
PROMPT = '[sudo via ansible, key=abc] password:'


@pytest.fixture
def state(tmp_path):
    fake_sudo.require_password(str(tmp_path), NODE, PASSWORD)
    return tmp_path


def _sudo(state, *argv, address=NODE, stdin=b''):
    env = dict(os.environ, KUBE_SUDO_STATE_DIR=str(state),
               SSH_CONNECTION='127.0.0.1 40000 %s 22' % address)
    return subprocess.run([sys.executable, str(KUBE_SUDO), *argv],
                          input=stdin, capture_output=True, env=env,
                          timeout=60)


def test_the_state_keeps_a_digest_not_the_password(state):
    text = (state / fake_sudo.SUDO_FILE).read_text()
    assert PASSWORD not in text
    assert json.loads(text) == {NODE: fake_sudo.digest(PASSWORD)}


def test_a_host_not_listed_has_nopasswd(state):
    result = _sudo(state, '-H', '-S', '-n', '-u', 'root', 'sh', '-c',
                   'echo ran', address='127.0.44.21')
    assert (result.returncode, result.stdout) == (0, b'ran\n')


def test_without_a_password_it_fails_as_sudo_n_does(state):
    result = _sudo(state, '-H', '-S', '-n', '-u', 'root', 'sh', '-c',
                   'echo ran')
    assert result.returncode == 1 and result.stdout == b''
    assert result.stderr.decode() == fake_sudo.MISSING


def test_the_right_password_runs_the_command_with_the_rest_of_stdin(state):
    # Ansible pipelines the module after the password: it must reach the
    # command whole, the password line must not.
    result = _sudo(state, '-H', '-S', '-p', PROMPT, '-u', 'root', 'cat',
                   stdin=PASSWORD.encode() + b'\nmodule data\n')
    assert (result.returncode, result.stdout) == (0, b'module data\n')
    assert result.stderr.decode() == PROMPT


def test_a_wrong_password_is_refused(state):
    result = _sudo(state, '-S', '-p', PROMPT, 'sh', '-c', 'echo ran',
                   stdin=b'guess\n')
    assert result.returncode == 1 and result.stdout == b''
    assert fake_sudo.WRONG in result.stderr.decode()


def test_clearing_the_requirement(state):
    fake_sudo.require_password(str(state), NODE, None)
    result = _sudo(state, '-n', 'sh', '-c', 'echo ran')
    assert (result.returncode, result.stdout) == (0, b'ran\n')


@pytest.mark.parametrize('argv, message', [
    (['-x', 'true'], 'unknown option -x'),
    (['-p'], 'option -p needs a value'),
    (['-n', '-u', 'root'], 'no command'),
])
def test_bad_command_lines(argv, message):
    with pytest.raises(ValueError, match=message):
        fake_sudo.parse(argv)


def test_options_as_the_sudo_plugin_writes_them():
    assert fake_sudo.parse(['-H', '-S', '-p', PROMPT, '-u', 'root', '/bin/sh',
                            '-c', 'x']) == (
        {'n': False, 'p': PROMPT, 'u': 'root'}, ['/bin/sh', '-c', 'x'])
    assert fake_sudo.parse(['-HSn', '--', '-n'])[1] == ['-n']


# ------------------------------------------------------------ the plugin --

@pytest.fixture
def become(state, monkeypatch):
    """``build(password, address)``: the plugin and its command for a
    host at *address* (listed by the site as asking a password)."""
    loader = pytest.importorskip('ansible.plugins.loader')
    loader.become_loader.add_directory(str(PLUGINS))
    shell = loader.shell_loader.get('sh')
    monkeypatch.setenv('KUBE_SUDO_STATE_DIR', str(state))

    def build(password=None, address=NODE):
        plugin = loader.become_loader.get('kube_double')
        options = {'kube_double_address': address}
        if password:
            options['become_pass'] = password
        plugin.set_options(direct=options)
        return plugin, plugin.build_become_command('echo hi', shell)
    return build


def test_the_plugin_runs_kube_sudo_non_interactively_without_password(become):
    plugin, command = become()
    assert shlex.split(command)[:6] == [str(KUBE_SUDO), '-H', '-S', '-n',
                                        '-u', 'root']
    assert not plugin.expect_prompt()


def test_the_plugin_prompts_and_keeps_the_password_off_the_command(become):
    plugin, command = become(PASSWORD)
    argv = shlex.split(command)
    assert argv[:4] == [str(KUBE_SUDO), '-H', '-S', '-p']
    assert argv[4].startswith('[sudo via ansible') and argv[4] == \
        plugin.prompt
    assert PASSWORD not in command and plugin.expect_prompt()
    # What real sudo prints is what Ansible recognises as a missing or
    # wrong password.
    assert plugin.check_missing_password(fake_sudo.MISSING.encode())
    assert plugin.check_incorrect_password(fake_sudo.WRONG.encode())


def test_a_host_with_nopasswd_gets_the_handshake_alone(become):
    # What kube-sudo would do there, without a process per task.
    plugin, command = become(PASSWORD, address='127.0.44.21')
    assert str(KUBE_SUDO) not in command and PASSWORD not in command
    assert plugin.success in command and 'echo hi' in command
    assert not plugin.expect_prompt()
