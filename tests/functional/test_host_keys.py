"""Changed SSH host keys during an LCM operation, on the local site.

The default policy (accept-new) records keys at instantiate; when the VMs
later present other keys the operation is refused, and the error's own
instructions (the ``ssh-keygen -R`` command it prints) are enough to go
on once the operator has checked the VMs.
"""

import re
import shlex
import subprocess

import pytest
from mgmt_localsite import lab as lab_mod
from mgmt_localsite import site as site_mod

from mgmt_driver.adapters import cli
from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.remote import ssh
from tests import docs

ANSIBLE, LB = '127.0.9.1', '127.0.9.2'
MASTERS = ['127.0.9.10']
WORKERS = ['127.0.9.20', '127.0.9.21', '127.0.9.22']

pytestmark = pytest.mark.skipif(site_mod.unavailable() is not None,
                                reason=str(site_mod.unavailable()))


def _run(lab, operation, workers, names=()):
    spec = lab.spec()
    cluster = lab.cluster(spec, MASTERS, workers)
    drv, _ = lab.driver(spec, 'hostkeys')
    with drv.pool:
        cli.OPERATIONS[operation](drv, cluster, list(names), 'hostkeys')


def test_default_policy_is_accept_new_and_documented():
    options = {opt.name: opt for _, opts in kconf.list_opts()
               for opt in opts}
    assert options['host_key_policy'].default == 'accept-new'
    assert '``accept-new`` (default)' in docs.page('configuration/conductor')


def test_changed_keys_are_refused_until_the_operator_removes_them():
    with lab_mod.Lab(ANSIBLE, LB, MASTERS, WORKERS, backends=False) as lab:
        known_hosts = lab.conf.kubespray_mgmt.known_hosts_file
        _run(lab, 'instantiate', WORKERS[:2])
        recorded = site_mod.known_hosts_entries(known_hosts)
        assert ssh.KnownHosts.entry(ANSIBLE, lab.sshd.port) in recorded

        # Every VM now presents a new key (re-created behind our back).
        lab.sshd.new_host_key()
        runs = len(lab.site.runs())
        refused = []
        for _ in range(len(MASTERS) + len(WORKERS) + 2):
            try:
                _run(lab, 'scale-out', WORKERS, [
                    site_mod.name_of('worker', WORKERS[2])])
                break
            except exceptions.HostKeyChanged as exc:
                message = str(exc)
                assert 'has CHANGED' in message and 'man-in-the-middle' \
                    in message
                host = re.search(r'SSH host key of (\S+):\d+ ', message)
                refused.append(host.group(1))
                # What the message tells the operator to run, verbatim.
                command = re.search(r'"(ssh-keygen -R [^"]+)"', message)
                subprocess.run(shlex.split(command.group(1)), check=True,
                               capture_output=True)
        else:
            pytest.fail('still refused after removing %s' % refused)
        # The Ansible server is contacted first: nothing ran before the
        # operator dealt with its key.
        assert refused[0] == ANSIBLE
        assert len(refused) == len(set(refused))
        assert lab.site.runs()[-1]['playbook'] == 'scale.yml'
        assert len(lab.site.runs()) > runs
        assert lab.check(MASTERS, WORKERS) == []
