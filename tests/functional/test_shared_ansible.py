"""A shared Ansible server: another account cannot read a workspace.

doc/source/security/threat-model.rst: tenants that share an Ansible server are
kept apart by accounts.  Here the driver builds a cluster as root on the
Ansible server (the site's Ansible account), and the site's other account, as a
second tenant's playbook would, tries to read the workspace: its inventory,
host vars, private keys and vars files.
"""

import os
import stat

import pytest
from mgmt_localsite import lab as lab_mod
from mgmt_localsite import site as site_mod

from mgmt_driver.operations import lcm
from mgmt_driver.remote import ssh

ANSIBLE = '127.0.5.10'
LB = '127.0.5.20'
MASTERS = ['127.0.5.11']
WORKERS = ['127.0.5.21']

pytestmark = pytest.mark.skipif(site_mod.unavailable() is not None,
                                reason=str(site_mod.unavailable()))


@pytest.fixture(scope='module')
def built():
    if os.geteuid() != 0:
        pytest.skip('optional: two accounts on the Ansible server need root')
    lab = lab_mod.Lab(ANSIBLE, LB, MASTERS, WORKERS, nodeports=1,
                      backends=False)
    lab.start()
    try:
        spec = lab.spec()
        drv, _ = lab.driver(spec, 'tenant-a')
        with drv.pool:
            lcm.COMMANDS['instantiate'](
                drv, lab.cluster(spec, MASTERS, WORKERS), [], 'a')
        yield lab
    finally:
        lab.stop()


def _other_account(lab):
    creds = ssh.Credentials(lab.sshd.user, key_file=lab.sshd.client_key)
    return ssh.Connection(ANSIBLE, creds, port=lab.sshd.port,
                          settings=ssh.SSHSettings(
                              known_hosts_file=str(lab.root / 'kh-other')))


def test_the_workspace_is_closed_to_other_accounts(built):
    workspace = built.workspace('tenant-a')
    info = os.stat(workspace)
    assert info.st_uid == 0 and stat.S_IMODE(info.st_mode) == 0o700
    files = sorted(str(p.relative_to(workspace))
                   for p in workspace.rglob('*') if p.is_file())
    assert 'hosts.yaml' in files and any(f.startswith('keys/')
                                         for f in files), files
    with _other_account(built) as conn:
        assert conn.run(['id', '-un']).stdout.strip() == built.sshd.user
        for name in files + ['.']:
            result = conn.run(['cat', str(workspace / name)], check=False)
            assert result.failed, name
            assert 'Permission denied' in result.stderr, result.stderr
        listing = conn.run(['ls', str(workspace)], check=False)
        assert listing.failed and 'Permission denied' in listing.stderr
