"""Terminate on the local site: only what the instance owns, always done.

One site (on 127.0.13.0/24) serves the module; the Ansible server has an
sshd of its own (:class:`tests.functional.test_faults.FaultLab`) so it
can be stopped.  Each case instantiates a new VNF instance through
Tacker's hooks, breaks the Ansible server's side, and checks that
``terminate_end`` still deletes the VIM, forgets the host keys of the
instance's VMs (the LB included) and no other, drops the instance's
record, and succeeds when run again.
"""

import logging
import pathlib
import types

import pytest
import yaml

from mgmt_driver import records
from mgmt_driver import ssh
from mgmt_driver.localsite import site as site_mod
from tests.functional import tacker_fakes
from tests.functional.test_faults import FaultLab
from tests.functional.test_faults import kill_vm_sshd
from tests.functional.test_faults import running

ANSIBLE, LB = '127.0.13.1', '127.0.13.2'
MASTERS = ['127.0.13.10']
WORKERS = ['127.0.13.20']
#: A host of someone else, whose key is in the same known_hosts file.
OTHER = '127.0.13.99'
CONTEXT = types.SimpleNamespace(project_id='ownership-project')
OPTIONS = {'ssh_connect_retries': 1, 'ssh_connect_timeout': 5,
           'ssh_retry_initial_delay': 0.2, 'ssh_retry_max_delay': 0.5}

pytestmark = pytest.mark.skipif(site_mod.unavailable() is not None,
                                reason=str(site_mod.unavailable()))


@pytest.fixture(scope='module')
def lab():
    with running(FaultLab(ANSIBLE, LB, MASTERS, WORKERS, options=OPTIONS,
                          backends=False, aside=[ANSIBLE])) as lab:
        yield lab


class Instance:
    """A new VNF instance on *lab*, instantiated through the hooks."""

    def __init__(self, lab):
        self.lab = lab
        self.vnf, self.registry, self.hooks = tacker_fakes.vnf_on_lab(
            lab, MASTERS, WORKERS, LB)
        self.call('instantiate_end', tacker_fakes.instantiate_request(
            lab.additional_params))
        assert self.registry.current

    def call(self, hook, request):
        getattr(self.hooks, hook)(CONTEXT, self.vnf.instance, request,
                                  None, None)

    @property
    def workspace(self):
        return self.lab.workspace(self.vnf.id)

    def record_path(self):
        return pathlib.Path(records.RecordStore.from_conf(
            self.lab.conf).path(self.vnf.id))


def _known_hosts(lab):
    return lab.conf.kubespray_mgmt.known_hosts_file


def _entries(lab):
    """known_hosts names of the instance's VMs."""
    port = lab.sshd.port
    return {ssh.KnownHosts.entry(a, port) for a in [LB] + MASTERS + WORKERS}


def _add_other_host_key(lab):
    """OTHER's key, recorded by someone else (a copy of LB's line)."""
    path = pathlib.Path(_known_hosts(lab))
    lb_entry = ssh.KnownHosts.entry(LB, lab.sshd.port)
    lines = path.read_text().splitlines()
    line = next(x for x in lines if x.split()[0] == lb_entry)
    other = ssh.KnownHosts.entry(OTHER, lab.sshd.port)
    path.write_text('\n'.join(lines + [other + line[len(lb_entry):]]) + '\n')
    return other


def _check_released(instance, other):
    kept = site_mod.known_hosts_entries(_known_hosts(instance.lab))
    assert not kept & _entries(instance.lab)
    assert {other, ssh.KnownHosts.entry(ANSIBLE, instance.lab.sshd.port)} \
        <= kept
    assert instance.registry.current == {}
    assert not instance.record_path().exists()


def test_hostile_inventory_does_not_choose_the_keys_to_forget(lab):
    instance = Instance(lab)
    # The driver itself talks to these (the workers only via Ansible).
    contacted = {ssh.KnownHosts.entry(a, lab.sshd.port)
                 for a in [ANSIBLE, LB] + MASTERS}
    assert contacted <= site_mod.known_hosts_entries(_known_hosts(lab))
    other = _add_other_host_key(lab)
    # The Ansible server's inventory now names OTHER instead of the VMs.
    hosts = instance.workspace / 'hosts.yaml'
    hosts.write_text(yaml.safe_dump({'all': {'hosts': {'x': {
        'ansible_host': OTHER, 'ansible_port': lab.sshd.port}}}}))
    instance.call('terminate_end', None)
    assert not instance.workspace.exists()
    _check_released(instance, other)
    instance.call('terminate_end', None)
    _check_released(instance, other)


def test_terminate_finishes_with_the_ansible_server_down(lab, caplog):
    instance = Instance(lab)
    other = _add_other_host_key(lab)
    kill_vm_sshd(lab.aside[ANSIBLE])
    try:
        caplog.set_level(logging.WARNING, logger='mgmt_driver.driver')
        instance.call('terminate_end', None)
    finally:
        lab.aside[ANSIBLE].start()
    [warning] = [r.getMessage() for r in caplog.records
                 if r.levelno == logging.WARNING and
                 r.name == 'mgmt_driver.driver']
    assert str(instance.workspace) in warning and ANSIBLE in warning
    assert instance.workspace.exists()
    _check_released(instance, other)
    # Run again once the server answers: the workspace goes too.
    instance.call('terminate_end', None)
    assert not instance.workspace.exists()
    _check_released(instance, other)
