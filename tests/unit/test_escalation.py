"""The driver's own ``sudo -n`` on a VM whose sudo asks a password.

kubectl on the masters and HAProxy/keepalived on the LB run as
``sudo -n COMMAND``; with a sudo password (``model.Login.sudo_password``)
the connection runs ``scripts/sudo-password.sh`` instead, the password
on standard input.  The script runs here against the local site's sudo
(``bin/kube-sudo``, which reads its password as sudo does: the ``-S``
line, byte by byte) put first on PATH as ``sudo``.
"""

import os
import subprocess

import mgmt_localsite as localsite
import pytest
from mgmt_localsite import fake_sudo

from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.remote import escalation
from mgmt_driver.remote import programs
from mgmt_driver.remote import ssh

HOST = '127.0.44.30'
PASSWORD = "Sudo 'Secret' $(id)"


def test_only_sudo_n_argvs_change():
    assert escalation.wrap(['kubectl', 'get'], 'in', PASSWORD) == (
        ['kubectl', 'get'], 'in')
    assert escalation.wrap('sudo -n true', None, PASSWORD) == (
        'sudo -n true', None)
    assert escalation.wrap(['sudo', '-n', 'true'], None, None) == (
        ['sudo', '-n', 'true'], None)
    command, stdin = escalation.wrap(['sudo', '-n', 'kubectl', 'apply', '-f',
                                      '-'], '{"kind": "List"}', PASSWORD)
    assert command == ['sh', '-c', escalation.SCRIPT, 'sudo', 'kubectl',
                       'apply', '-f', '-']
    assert stdin == PASSWORD.encode() + b'\n{"kind": "List"}'
    assert PASSWORD not in str(command)


def test_the_script_is_sent_without_its_comments():
    marker, _, body = escalation.SCRIPT.partition('\n')
    assert marker == programs.MARKER + 'sudo-password'
    assert '#' not in body
    assert body.count('\n') < 6


@pytest.fixture
def host(tmp_path):
    """``run(argv, stdin)`` as on a host of the site whose sudo is
    ``kube-sudo``; ``require(password)`` sets what it asks."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'sudo').symlink_to(localsite.SOURCE / 'bin' / 'kube-sudo')
    env = dict(os.environ, PATH='%s:%s' % (bin_dir, os.environ['PATH']),
               KUBE_SUDO_STATE_DIR=str(tmp_path),
               SSH_CONNECTION='127.0.0.1 40000 %s 22' % HOST)

    def run(command, stdin=None):
        command, stdin = escalation.wrap(command, stdin, PASSWORD)
        return subprocess.run(command, input=stdin, capture_output=True,
                              env=env, timeout=60)

    def require(password):
        fake_sudo.require_password(str(tmp_path), HOST, password)
    return run, require


def test_sudo_asking_the_password_gets_it_and_the_command_the_rest(host):
    run, require = host
    require(PASSWORD)
    result = run(['sudo', '-n', 'cat'], 'line 1\nline 2\n')
    assert (result.returncode, result.stdout) == (0, b'line 1\nline 2\n')
    assert PASSWORD.encode() not in result.stdout + result.stderr


def test_nopasswd_sudo_leaves_the_password_line_out_of_the_command(host):
    run, require = host
    require(None)
    result = run(['sudo', '-n', 'cat'], 'payload')
    assert (result.returncode, result.stdout) == (0, b'payload')
    result = run(['sudo', '-n', 'sh', '-c', 'cat; echo done'])
    assert (result.returncode, result.stdout) == (0, b'done\n')


def test_a_wrong_password_runs_nothing(host):
    run, require = host
    require('another one')
    result = run(['sudo', '-n', 'sh', '-c', 'echo ran'])
    assert result.returncode == 1 and result.stdout == b''
    assert fake_sudo.WRONG in result.stderr.decode()


class _Recording(ssh.Connection):
    def _execute(self, command, deadline_after, stdin, streams, text):
        self.sent = (command, stdin)
        return 0, '', ''


def test_a_connection_escalates_with_its_login_sudo_password(tmp_path):
    login = core.Login('ubuntu', 'Login-Pass-1', become_password=PASSWORD)
    conn = _Recording('h', ssh.credentials_for(login), 22, ssh.SSHSettings(
        known_hosts_file=str(tmp_path / 'kh')))
    result = conn.run(['sudo', '-n', 'kubectl', 'get', 'nodes'])
    command, stdin = conn.sent
    assert stdin == PASSWORD.encode() + b'\n'
    assert PASSWORD not in command and PASSWORD not in result.command
    assert result.command.endswith('sudo kubectl get nodes')
    assert PASSWORD not in repr(ssh.credentials_for(login))
    nopasswd = core.Login('ubuntu', 'Login-Pass-1', passwordless_sudo=True)
    conn = _Recording('h', ssh.credentials_for(nopasswd), 22, conn.settings)
    conn.run(['sudo', '-n', 'kubectl', 'get', 'nodes'])
    assert conn.sent[1] is None and 'sudo -n kubectl' in conn.sent[0]


@pytest.mark.parametrize('line, hinted', [
    ('fatal: [w1]: FAILED! => {"msg": "Missing sudo password"}', True),
    ('fatal: [w1]: FAILED! => {"msg": "Incorrect sudo password"}', True),
    ('fatal: [w1]: FAILED! => {"msg": "Missing kube_double password"}',
     True),
    ('fatal: [w1]: UNREACHABLE! => {"msg": "Invalid/incorrect password"}',
     False),
    ('fatal: [w1]: FAILED! => {"msg": "kubeadm join failed"}', False),
])
def test_a_failed_playbook_names_the_become_fields(line, hinted):
    result = ssh.CommandResult(host='10.0.0.5', command='ansible-playbook',
                               stdout='', stderr='', exit_code=2)
    message = str(exceptions.PlaybookFailed(
        'cluster.yml', result, {'w1': {'failed': 1}}, [line], 'tail'))
    assert (exceptions.BECOME_HINT in message) is hinted
    assert ('errors: %s (%s); output tail' % (line, exceptions.BECOME_HINT)
            in message) is hinted
