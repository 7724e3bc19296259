"""mgmt_driver.remote.kubectl against a real sshd, with a stand-in kubectl."""

import base64
import json
import os
import uuid

import pytest
from mgmt_localsite import sshd as sshd_site

from mgmt_driver.common import exceptions
from mgmt_driver.remote import kubectl
from mgmt_driver.remote import ssh

TOKEN = 'tok-' + uuid.uuid4().hex
CA_PEM = '-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n'

FAKE_KUBECTL = '''#!/bin/sh
# A stand-in kubectl: keeps the applied manifest, serves one Secret.
dir=$(dirname "$0")
case "$1" in
  version) echo "Client Version: v1.30.0" ;;
  apply) cat > "$dir/applied.yaml" ;;
  get) cat "$dir/secret.json" ;;
  *) echo "unexpected: $*" >&2; exit 1 ;;
esac
'''


def _settings(tmp_path):
    return ssh.SSHSettings(connect_timeout=5, connect_retries=0,
                           command_timeout=30,
                           known_hosts_file=str(tmp_path / 'kh'))


@pytest.fixture
def tool(sshd):
    base = os.path.join(sshd.scratch, 'kc-' + uuid.uuid4().hex[:8])
    os.mkdir(base)
    os.chmod(base, 0o777)
    path = os.path.join(base, 'kubectl')
    with open(path, 'w') as f:
        f.write(FAKE_KUBECTL)
    os.chmod(path, 0o755)
    secret = {'data': {
        'token': base64.b64encode(TOKEN.encode()).decode(),
        'ca.crt': base64.b64encode(CA_PEM.encode()).decode()}}
    with open(os.path.join(base, 'secret.json'), 'w') as f:
        json.dump(secret, f)
    return path


def test_admin_credentials_over_ssh(sshd, tmp_path, tool):
    creds = ssh.Credentials(sshd.user, key_file=sshd.client_key)
    dead = ssh.Connection('127.0.0.3', creds, sshd_site.free_port(
        '127.0.0.3'), _settings(tmp_path))
    live = ssh.Connection('127.0.0.2', creds, sshd.port, _settings(tmp_path))
    with dead, live:
        client = kubectl.client_on_first_reachable(
            [dead, live], kubectl=tool,
            settings=kubectl.KubectlSettings(command_timeout=30))
        assert client.conn is live
        result = client.admin_credentials()
    assert (result.token, result.ca_cert) == (TOKEN, CA_PEM)
    with open(os.path.join(os.path.dirname(tool), 'applied.yaml')) as f:
        applied = json.load(f)['items']
    assert [d['kind'] for d in applied] == [
        'ServiceAccount', 'ClusterRoleBinding', 'Secret']


def test_no_reachable_host_over_ssh(sshd, tmp_path):
    creds = ssh.Credentials(sshd.user, key_file=sshd.client_key)
    port = sshd_site.free_port('127.0.0.3')
    with ssh.Connection('127.0.0.3', creds, port,
                        _settings(tmp_path)) as dead, \
            ssh.Connection('127.0.0.2', creds, sshd.port,
                           _settings(tmp_path)) as live:
        with pytest.raises(exceptions.NoReachableHost) as info:
            kubectl.first_reachable(
                [dead, live], command=['/nonexistent/kubectl', 'version'])
    message = str(info.value)
    assert '127.0.0.3 (SSH connection' in message
    assert '127.0.0.2 (' in message and 'nonexistent' in message
