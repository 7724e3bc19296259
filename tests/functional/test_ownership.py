"""Terminate on the local site: only what the instance owns, always done.

Issue 27 (items 3 and 6, on a second site on 127.0.32.0/24): a host key
is the instance's only when its own login recorded it, so naming another
instance's LB or the Ansible server keeps nothing and forgets nothing of
theirs; the operator's default key does not log in to an address a
request names unless the operator lists it.

One site (on 127.0.13.0/24) serves the first tests; the Ansible server has an
sshd of its own (:class:`tests.functional.test_faults.FaultLab`) so it
can be stopped.  Each case instantiates a new VNF instance through
Tacker's hooks, breaks the Ansible server's side, and checks that
``terminate_end`` still deletes the VIM, forgets the host keys of the
instance's VMs (the LB included) and no other, drops the instance's
record, and succeeds when run again.
"""

import copy
import logging
import pathlib
import types

import pytest
import yaml
from mgmt_localsite import lab as lab_mod
from mgmt_localsite import site as site_mod

from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.model import nodes as nodes_mod
from mgmt_driver.model import params
from mgmt_driver.remote import ssh
from mgmt_driver.session import driver
from mgmt_driver.state import records
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

    def __init__(self, lab, masters=MASTERS, workers=WORKERS, lb=LB):
        self.lab = lab
        self.vnf, self.registry, self.hooks = tacker_fakes.vnf_on_lab(
            lab, masters, workers, lb)
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
        caplog.set_level(logging.WARNING, logger='mgmt_driver.session.driver')
        instance.call('terminate_end', None)
    finally:
        lab.aside[ANSIBLE].start()
    [warning] = [r.getMessage() for r in caplog.records
                 if r.levelno == logging.WARNING and
                 r.name == 'mgmt_driver.session.driver']
    assert str(instance.workspace) in warning and ANSIBLE in warning
    assert instance.workspace.exists()
    _check_released(instance, other)
    # Run again once the server answers: the workspace goes too.
    instance.call('terminate_end', None)
    assert not instance.workspace.exists()
    _check_released(instance, other)


# ------------------------------------------- issue 27, on 127.0.32.0/24 --

ANSIBLE32, LB32 = '127.0.32.1', '127.0.32.2'
MASTERS32, WORKERS32 = ['127.0.32.10'], ['127.0.32.20']
#: A worker for scaling out.
SPARE32 = '127.0.32.21'


@pytest.fixture(scope='module')
def lab32():
    with running(lab_mod.Lab(ANSIBLE32, LB32, MASTERS32,
                             WORKERS32 + [SPARE32], options=OPTIONS,
                             backends=False)) as lab:
        yield lab


@pytest.fixture
def fresh(lab32, tmp_path):
    """*lab32* with a known_hosts file and records of its own; set more
    options with ``fresh(name, value)``, all undone afterwards."""
    group = lab32.conf[kconf.GROUP]
    before = {}

    def override(name, value):
        before.setdefault(name, group[name])
        lab32.conf.set_override(name, value, group=kconf.GROUP)
    override('known_hosts_file', str(tmp_path / 'known_hosts'))
    override('records_dir', str(tmp_path / 'records'))
    yield override
    for name, value in before.items():
        lab32.conf.set_override(name, value, group=kconf.GROUP)


def _request_naming(lab, masters, workers, lb):
    """The lab's additionalParams with explicit ``nodes``."""
    extra = copy.deepcopy(lab.additional_params)
    extra[core.ROOT]['nodes'] = site_mod.explicit_nodes(masters, workers,
                                                        lb)
    for entry in extra[core.ROOT]['nodes']:
        entry['ssh_port'] = lab.sshd.port
    return extra


def _tenant(lab, instance_id, masters, workers, lb):
    """Another tenant's driver, whose request names these addresses."""
    spec = params.parse_params(_request_naming(lab, masters, workers, lb))
    pool = ssh.ConnectionPool(ssh.SSHSettings.from_conf(lab.conf))
    drv = driver.ClusterDriver(spec, instance_id, pool, lab.conf)
    return drv, nodes_mod.nodes_from_spec(drv.spec)


def _kept(lab):
    return site_mod.known_hosts_entries(_known_hosts(lab))


def test_naming_another_instances_lb_does_not_keep_its_key(lab32, fresh):
    port = lab32.sshd.port
    c = Instance(lab32, MASTERS32, WORKERS32, LB32)
    lb_entry = ssh.KnownHosts.entry(LB32, port)
    assert lb_entry in _kept(lab32)
    # Tenant B names C's LB (as its master and LB) and logs in there.
    b, cluster = _tenant(lab32, 'tenant-b', [LB32], [], LB32)
    with b.pool:
        b.kubectl_client(cluster)
    c.call('terminate_end', None)
    # C's key goes with C's VMs: a new VM on that address is welcome.
    assert not _kept(lab32) & _entries_of(lab32, [LB32] + MASTERS32)
    # B lists C's LB, having logged in there, but does not own its key.
    record = records.RecordStore.from_conf(lab32.conf).load('tenant-b')
    assert (LB32, port) in {h.endpoint for h in record.hosts}
    assert record.keys == {}
    kept = _kept(lab32)
    with b.pool:
        b.terminate(records.TACKER_VIM, lambda vim_id: None)
    assert _kept(lab32) == kept
    assert ssh.KnownHosts.entry(ANSIBLE32, port) in kept


def _entries_of(lab, addresses):
    return {ssh.KnownHosts.entry(a, lab.sshd.port) for a in addresses}


def test_naming_the_ansible_server_as_a_worker_keeps_its_pinned_key(
        lab32, fresh):
    port = lab32.sshd.port
    login = ssh.Credentials(lab32.sshd.ansible_user,
                            key_file=str(lab32.sshd.client_key))
    # The operator pins the Ansible server's key, then rejects others.
    with ssh.ConnectionPool(ssh.SSHSettings.from_conf(lab32.conf)) as pool:
        pool.connection(ANSIBLE32, login, port).run(['true'])
    fresh('host_key_policy', 'reject')
    d, cluster = _tenant(lab32, 'tenant-d', MASTERS32, [ANSIBLE32], LB32)
    with d.pool:
        d.upload_inventory(cluster)
        d.terminate(records.TACKER_VIM, lambda vim_id: None)
    assert ssh.KnownHosts.entry(ANSIBLE32, port) in _kept(lab32)
    # Every tenant still reaches the server.
    with ssh.ConnectionPool(ssh.SSHSettings.from_conf(lab32.conf)) as pool:
        assert pool.connection(ANSIBLE32, login, port).run(['true']).ok


def test_the_default_key_is_refused_for_named_addresses_before_connecting(
        lab32, fresh):
    fresh('ssh_private_key_file', str(lab32.sshd.client_key))
    fresh('default_key_ansible_servers', [ANSIBLE32])
    extra = _request_naming(lab32, MASTERS32, WORKERS32, LB32)
    for section in ('master_node', 'worker_node'):
        del extra[core.ROOT][section]['ssh_key_file']
    pools = []

    def pool_factory():
        pools.append(ssh.ConnectionPool(ssh.SSHSettings.from_conf(
            lab32.conf)))
        return pools[-1]
    vnf, _, hooks = tacker_fakes.vnf_on_lab(
        lab32, MASTERS32, WORKERS32, LB32, pool_factory)
    with pytest.raises(exceptions.ParamsInvalid) as info:
        hooks.instantiate_end(CONTEXT, vnf.instance,
                              tacker_fakes.instantiate_request(extra),
                              None, None)
    message = str(info.value)
    assert '%s.master_node' % core.ROOT in message
    assert '[kubespray_mgmt] default_key_login_hosts' in message
    assert MASTERS32[0] in message
    # Nothing was contacted: no pool, no host key, no workspace.
    assert pools == [] and _kept(lab32) == set()
    assert not lab32.workspace(vnf.id).exists()


def test_only_a_login_that_succeeds_records_and_reports_a_key(lab32, fresh):
    port, address = lab32.sshd.port, MASTERS32[0]
    settings = ssh.SSHSettings.from_conf(lab32.conf)
    seen = []
    wrong = ssh.Credentials('no-such-user',
                            key_file=str(lab32.sshd.client_key))
    with pytest.raises(exceptions.SSHAuthError):
        with ssh.Connection(address, wrong, port, settings,
                            on_new_key=lambda *a: seen.append(a)) as conn:
            conn.run(['true'])
    # Otherwise anyone's failed login could own a key it cannot use.
    assert (seen, _kept(lab32)) == ([], set())
    good = ssh.Credentials(lab32.sshd.user,
                           key_file=str(lab32.sshd.client_key))
    with ssh.Connection(address, good, port, settings,
                        on_new_key=lambda *a: seen.append(a)) as conn:
        conn.run(['true'])
        conn.run(['true'])
    [(host, at, key)] = seen
    assert (host, at) == (address, port)
    line = pathlib.Path(_known_hosts(lab32)).read_text().strip()
    assert line == '%s %s' % (ssh.KnownHosts.entry(address, port), key)


def test_a_lifecycle_forgets_exactly_the_keys_it_recorded(lab32, fresh):
    # No regression: scale-out, scale-in, an LB heal and terminate leave
    # only the Ansible server's key, and what the instance owns follows.
    port = lab32.sshd.port
    c = Instance(lab32, MASTERS32, WORKERS32, LB32)
    store = records.RecordStore.from_conf(lab32.conf)

    def owned():
        return set(store.load(c.vnf.id).keys)
    assert owned() == {(a, port) for a in MASTERS32 + [LB32]}
    vm = c.vnf.add_vm(core.ROLE_WORKER, SPARE32)
    c.hooks.scale_end(CONTEXT, c.vnf.instance,
                      tacker_fakes.scale_request('SCALE_OUT'), None, None,
                      scale_out_id_list=[vm.stack_id])
    c.hooks.scale_start(CONTEXT, c.vnf.instance,
                        tacker_fakes.scale_request('SCALE_IN'), None, None,
                        scale_name_list=[vm.member],
                        scale_out_id_list=[vm.stack_id])
    c.vnf.remove_vm(vm)
    # The driver logged in to the leaving worker (to drain it) and
    # forgot that key with it.
    assert ssh.KnownHosts.entry(SPARE32, port) not in _kept(lab32)
    assert (SPARE32, port) not in owned()
    lb = c.vnf.vm(LB32)
    c.call('heal_start', tacker_fakes.heal_request([lb]))
    c.vnf.recreate_vm(lb)
    c.call('heal_end', tacker_fakes.heal_request([lb]))
    assert (LB32, port) in owned()
    c.call('terminate_end', None)
    assert _kept(lab32) == {ssh.KnownHosts.entry(ANSIBLE32, port)}
