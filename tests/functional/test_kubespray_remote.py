"""mgmt_driver.remote.kubespray against a real OpenSSH sshd on loopback.

The workspace and layout detection run as they would on an Ansible
server; the playbook run uses a stand-in ``ansible-playbook`` script that
reports its working directory and arguments and prints a recap.
"""

import os
import stat
import uuid

import pytest

from mgmt_driver.common import exceptions
from mgmt_driver.remote import kubespray
from mgmt_driver.remote import ssh


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def conn(sshd, tmp_path):
    settings = ssh.SSHSettings(connect_timeout=5, connect_retries=0,
                               command_timeout=30,
                               known_hosts_file=str(tmp_path / 'kh'))
    creds = ssh.Credentials(sshd.user, key_file=sshd.client_key)
    with ssh.Connection('127.0.0.2', creds, sshd.port,
                        settings) as connection:
        yield connection


@pytest.fixture
def base(sshd):
    path = os.path.join(sshd.scratch, 'ks-' + uuid.uuid4().hex[:8])
    os.mkdir(path)
    # Writable by the site's user, sticky as /tmp: a workspace parent
    # others could rename entries in is refused (mgmt_driver.remote.isolation).
    os.chmod(path, 0o1777)
    return path


def test_workspace_lifecycle(conn, base):
    path = os.path.join(base, 'inventories', 'vnf 1')
    ws = kubespray.Workspace(conn, path)
    ws.ensure()
    ws.ensure()  # a retried instantiate reuses it
    assert _mode(path) == 0o700
    docs = {'hosts.yaml': 'all: {}\n', 'cluster-vars.yaml': 'a: 1\n',
            'host_vars/node-1.yaml': 'b: 2\n',
            'group_vars/all/x.yml': 'c: 3\n'}
    ws.upload(docs)
    ws.upload({'hosts.yaml': 'all: {hosts: {}}\n'})
    for name, text in dict(docs, **{'hosts.yaml': 'all: {hosts: {}}\n'}
                           ).items():
        with open(os.path.join(path, name)) as f:
            assert f.read() == text
        assert _mode(os.path.join(path, name)) == 0o600
    for sub in ('host_vars', 'group_vars', 'group_vars/all'):
        assert _mode(os.path.join(path, sub)) == 0o700
    leftovers = [n for _, _, files in os.walk(path) for n in files
                 if n.endswith('.tmp')]
    assert leftovers == []
    ws.remove()
    assert not os.path.exists(path)
    ws.remove()  # already gone: fine
    assert os.path.isdir(os.path.join(base, 'inventories'))


def test_ensure_tightens_an_existing_directory(conn, base):
    path = os.path.join(base, 'existing')
    kubespray.Workspace(conn, path).ensure()
    os.chmod(path, 0o755)
    kubespray.Workspace(conn, path).ensure()
    assert _mode(path) == 0o700


FAKE_PLAYBOOK = '''#!/bin/sh
FAIL=${FAIL:-0}
pwd
for a in "$@"; do printf 'ARG[%s]\\n' "$a"; done
printf 'NOCOLOR=%s\\n' "$ANSIBLE_NOCOLOR"
echo "PLAY [Fake] ***"
echo "TASK [fake : step] ***"
echo "ok: [node-1]"
echo
echo "PLAY RECAP ***"
echo "node-1                     : ok=2    changed=1    unreachable=0    \
failed=$FAIL    skipped=0    rescued=0    ignored=0"
[ "$FAIL" = 0 ] || echo "ERROR! boom" >&2
exit $((FAIL * 2))
'''


def _checkout(base):
    root = os.path.join(base, 'kube spray')
    os.makedirs(os.path.join(root, 'playbooks'))
    for name in ('cluster.yml', 'scale.yml', 'reset.yml',
                 'playbooks/facts.yml'):
        with open(os.path.join(root, name), 'w') as f:
            f.write('---\n')
    with open(os.path.join(root, 'remove-node.yml'), 'w') as f:
        f.write('- import_playbook: playbooks/remove_node.yml\n')
    with open(os.path.join(root, 'playbooks', 'remove_node.yml'), 'w') as f:
        f.write('when: not (skip_confirmation | default(false) | bool)\n')
    tool = os.path.join(base, 'ansible-playbook')
    with open(tool, 'w') as f:
        f.write(FAKE_PLAYBOOK)
    os.chmod(tool, 0o755)
    return root, tool


def test_detect_and_run_over_ssh(conn, base):
    root, tool = _checkout(base)
    layout = kubespray.detect_layout(conn, root)
    assert layout == kubespray.Layout('playbooks/facts.yml', True, None)
    ws = kubespray.Workspace(conn, os.path.join(base, 'ws'))
    ws.ensure()
    lines = []
    runner = kubespray.Runner(
        conn, root, layout, ws, on_progress=lines.append,
        settings=kubespray.PlaybookSettings(forks=7, ansible_playbook=tool))
    run = runner.remove_nodes(['node-1'], reachable=False)
    assert run.recap == {'node-1': {'ok': 2, 'changed': 1, 'unreachable': 0,
                                    'failed': 0, 'skipped': 0, 'rescued': 0,
                                    'ignored': 0}}
    # The run and its log are named first (issue 31, defect 13).
    assert lines[0].startswith('running remove-node.yml on %s: --limit='
                               'node-1,' % conn.host)
    assert lines[1].startswith('log: %s/logs/' % ws.path)
    lines = lines[2:]
    assert lines[0] == root
    assert lines[1:11] == ['ARG[%s]' % a for a in (
        '-i', ws.path + '/hosts.yaml', '-e', '@' + ws.path +
        '/cluster-vars.yaml', '-e', '@' + ws.path + '/remove-node-vars.yaml',
        '--become', '--become-user=root', '--forks', '7')]
    assert lines[11:14] == [
        'ARG[--limit=node-1,kube_control_plane,etcd,localhost]',
        'ARG[remove-node.yml]', 'NOCOLOR=1']
    assert _mode(ws.file('remove-node-vars.yaml')) == 0o600


def test_failed_run_over_ssh(conn, base):
    root, tool = _checkout(base)
    failing = os.path.join(base, 'failing-playbook')
    with open(failing, 'w') as f:
        f.write('#!/bin/sh\nFAIL=1 exec %s "$@"\n' % ssh.quote(tool))
    os.chmod(failing, 0o755)
    ws = kubespray.Workspace(conn, os.path.join(base, 'ws'))
    runner = kubespray.Runner(
        conn, root, kubespray.detect_layout(conn, root), ws,
        settings=kubespray.PlaybookSettings(ansible_playbook=failing))
    with pytest.raises(exceptions.PlaybookFailed) as info:
        runner.scale(['node-1'])
    message = str(info.value)
    assert 'scale.yml on 127.0.0.2 failed with exit code 2' in message
    assert 'failed hosts: node-1;' in message and 'ERROR! boom' in message
