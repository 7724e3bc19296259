"""Password logins whose sudo asks a password, on the local site (issue 30).

The mission's default login is a user name and password; on most images
that user's sudo asks the same password, and kubespray (run with
``--become``) stops at its first task on a host without Ansible's become
password.  The site's sudo (``fake_sudo.py``, the double's become plugin)
asks one on every node here, so the same instantiate fails at the
bootstrap play when the request says ``passwordless_sudo`` (no become
password) or gives a wrong one (by default the login password, here not
sudo's), and builds the cluster with ``become_password`` (one per role: the
workers' tasks that kubespray delegates to the first master get the
master's).

One site, one chain: the refused runs change nothing, then the cluster
is built (one instantiate; the default is tested in tests/unit).
"""

import os
import stat

import pytest
from mgmt_localsite import lab as lab_mod
from mgmt_localsite import site as site_mod

from mgmt_driver.adapters import cli
from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.model import params
from mgmt_driver.remote import inventory
from tests.functional import test_faults

ANSIBLE, LB = '127.0.44.1', '127.0.44.2'
MASTERS = ['127.0.44.10']
WORKERS = ['127.0.44.20']
INSTANCE = 'become'
#: sudo's password on each node: not the login one, and per role (the
#: workers' tasks delegated to the master need the master's).
SUDO_PASSWORDS = {'master_node': 'Master-Sudo {{ 1 }}',
                  'worker_node': "Worker-Sudo 'w'"}
ADDRESSES = {'master_node': MASTERS, 'worker_node': WORKERS}

pytestmark = pytest.mark.skipif(site_mod.unavailable() is not None,
                                reason=str(site_mod.unavailable()))


@pytest.fixture(scope='module')
def lab():
    if os.geteuid() != 0:
        pytest.skip('the SSH password logins need sshd running as root')
    with test_faults.running(lab_mod.Lab(
            ANSIBLE, LB, MASTERS, WORKERS, nodeports=1,
            backends=False)) as lab:
        yield lab


def _instantiate(lab, become=lambda section: {}):
    """Instantiate with password logins on the nodes and ``become(section)``
    (the become fields) in master_node and worker_node."""
    additional = lab.additional_params
    root = additional[core.ROOT]
    for section in ADDRESSES:
        node = {key: value for key, value in root[section].items()
                if key not in ('ssh_key_file',) + params._BECOME_KEYS}
        root[section] = dict(node, password=lab.sshd.password,
                             **become(section))
    spec = params.parse_params(additional)
    drv, _ = lab.driver(spec, INSTANCE)
    with drv.pool:
        cli.OPERATIONS['instantiate'](drv, lab.cluster(spec, MASTERS,
                                                       WORKERS), [],
                                      INSTANCE)


def _failure(lab, *become):
    with pytest.raises(exceptions.MgmtDriverRemoteCommandError) as info:
        _instantiate(lab, *become)
    return str(info.value)


def test_sudo_asking_a_password_needs_ansibles_become_password(lab):
    for section, addresses in ADDRESSES.items():
        for address in addresses:
            lab.site.require_sudo_password(address, SUDO_PASSWORDS[section])

    # Declared NOPASSWD: Ansible has no become password; sudo -n fails
    # on every node at the bootstrap play, before anything changes.
    message = _failure(lab, lambda section: {'passwordless_sudo': True})
    assert 'cluster.yml' in message
    assert 'Missing kube_double password' in message
    assert exceptions.BECOME_HINT in message
    for address in MASTERS + WORKERS:
        assert site_mod.name_of('master' if address in MASTERS
                                else 'worker', address) in message
    # By default sudo gets the login password: not the one it asks here.
    message = _failure(lab)
    assert 'Incorrect kube_double password' in message
    assert lab.site.nodes() == {}
    runs = lab.site.runs()
    assert [(r['ok'], r['become']) for r in runs] == [(False, True)] * 2

    _instantiate(lab, lambda section: {
        'become_password': SUDO_PASSWORDS[section]})
    assert lab.check(MASTERS, WORKERS) == []
    runs = lab.site.runs()
    assert runs[-1]['ok']
    assert not any(p in str(runs) for p in SUDO_PASSWORDS.values())
    host_vars = lab.workspace(INSTANCE) / inventory.HOST_VARS_DIR
    for path in host_vars.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert 'ansible_become_password' in path.read_text()
