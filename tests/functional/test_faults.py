"""Faults injected while Tacker's hooks run against the local site.

One site (:class:`FaultLab`, on 127.0.6.0/24) serves the whole module:
the Ansible server, the LB and one worker (``DEAD``) each get their own
sshd, so one of them can be made unreachable while the others keep
working; every other VM is served by the lab's main sshd.  The cluster is
instantiated once (by the first test, which is itself a fault case, or
by the ``cluster`` fixture when it runs alone) and each scale-in case
removes another worker, so a case costs one remove-node.yml run instead
of a whole cluster.

Every case: inject the fault, run the hook as Tacker does, expect one
MgmtDriver* error naming the host (and the command or playbook, where
one ran); check that the inventory on the Ansible server, the double's
Kubernetes state and HAProxy are each the old or the intended one;
clear the fault; run the same hook again and check that the cluster
converged.  The last test checks that a connection lost in the middle of
a command is reported at once, not after the command's whole timeout.
"""

import contextlib
import logging
import os
import pathlib
import shutil
import signal
import threading
import time
import types

import pytest
import yaml
from mgmt_localsite import lab as lab_mod
from mgmt_localsite import procs
from mgmt_localsite import site as site_mod

from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.remote import kubectl
from mgmt_driver.remote import ssh
from mgmt_driver.state import registry
from tests.functional import ansible_masters
from tests.functional import tacker_fakes
from tests.functional.tacker_fakes import instantiate_request
from tests.functional.tacker_fakes import scale_request

ANSIBLE = '127.0.6.1'
LB = '127.0.6.2'
MASTERS = ['127.0.6.10']
WORKERS = ['127.0.6.%d' % i for i in range(20, 26)]
#: The worker whose VM dies before it is scaled in (its own sshd).
DEAD = WORKERS[-1]
#: A VM address served but not in the VNF until a test scales out to it.
SPARE = '127.0.6.30'
MASTER, WORKER = core.ROLE_MASTER, core.ROLE_WORKER
CONTEXT = types.SimpleNamespace(project_id='faults-project')
GROUP = 'kubespray_mgmt'
#: Small connection retries, so an unreachable host fails in a second.
OPTIONS = {'ssh_connect_retries': 1, 'ssh_connect_timeout': 5,
           'ssh_retry_initial_delay': 0.2, 'ssh_retry_max_delay': 0.5}
TACKER_ERRORS = (exceptions.MgmtDriverOtherError,
                 exceptions.MgmtDriverRemoteCommandError,
                 exceptions.MgmtDriverRemoteCommandTimeOut)

pytestmark = pytest.mark.skipif(site_mod.unavailable() is not None,
                                reason=str(site_mod.unavailable()))


# ------------------------------------------------------------ processes --

def sessions_of(sshd):
    """Every process under the listeners of *sshd* (this test's sshd,
    found by its private config directory): its sessions and whatever
    they run."""
    # A listener's title: "sshd: /usr/sbin/sshd -D -f <config> ...".
    config = '-f ' + os.path.join(sshd.root, 'sshd_config')
    listeners = [pid for pid in procs.parents()
                 if config in ' '.join(procs.cmdline(pid))
                 and procs.cmdline(pid)[0].startswith(('sshd', '/'))]
    return procs.descendants(listeners)


def kill_vm_sshd(sshd):
    """The VM stops answering: its sshd and every session are gone."""
    sessions = sessions_of(sshd)
    sshd.stop()
    for pid in sessions:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def process_gone(pid, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if procs.gone(pid):
            return True
        time.sleep(0.1)
    return False


#: The node monitor grace period the dead-worker case sets (seconds).
GRACE = 2.0


def ready_after(site, node, status, limit=30.0):
    """Seconds until kubectl shows *node*'s Ready condition *status*."""
    start = time.monotonic()
    while True:
        shown = site.tool('kubectl', 'get', 'node', node, '-o',
                          'jsonpath={.status.conditions[0].status}'
                          ).stdout.strip()
        if shown == status:
            return time.monotonic() - start
        assert time.monotonic() - start < limit, (node, shown)
        time.sleep(0.2)


# ------------------------------------------------------------------ site --

def twin(main, address):
    """An sshd for *address* alone, indistinguishable from *main* (same
    port, host key and authorised keys), that can stop on its own."""
    other = site_mod.SiteSshd([address], main.ansible_address)
    other.port = main.port
    other.host_key = main.host_key
    shutil.copy(os.path.join(main.root, 'authorized_keys'),
                os.path.join(other.root, 'authorized_keys'))
    return other


class FaultLab(lab_mod.Lab):
    """A :class:`~mgmt_localsite.lab.Lab` whose *aside* addresses
    are each served by a :func:`twin` of the main sshd.

    :param aside: addresses with an sshd of their own (``self.aside``).
    """

    def __init__(self, *args, aside=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.aside_addresses = list(aside)
        self.aside = {}

    def _start_sshd(self, addresses):
        # The aside addresses get an sshd of their own.
        super()._start_sshd([a for a in addresses
                             if a not in self.aside_addresses])
        for address in self.aside_addresses:
            self.aside[address] = twin(self.sshd, address).start()

    def stop(self):
        super().stop()
        for sshd in self.aside.values():
            sshd.cleanup()


HANG_WRAPPER = '''#!/bin/sh
# kubectl that hangs on "drain" while %(flag)s exists.
if [ -e %(flag)s ] && [ "$1" = drain ]; then
    echo $$ > %(pid)s
    exec sleep 300
fi
exec %(kubectl)s "$@"
'''


class Cluster:
    """The VNF instance on the lab: Tacker's hooks, Heat, observations."""

    def __init__(self, lab):
        self.lab = lab
        self.vnf, self.registry, self.hooks = tacker_fakes.vnf_on_lab(
            lab, MASTERS, WORKERS, LB, self._pool)
        self.masters, self.workers = list(MASTERS), list(WORKERS)
        self.instantiated = False
        self.hang_dir = lab.root / 'hang'
        self.hang_dir.mkdir()
        site_mod.chown(self.hang_dir, lab.sshd.user)
        self.hang_flag = self.hang_dir / 'on'
        self.hang_pid = self.hang_dir / 'pid'
        wrapper = lab.root / 'kubectl-wrapper'
        wrapper.write_text(HANG_WRAPPER % {
            'flag': self.hang_flag, 'pid': self.hang_pid,
            'kubectl': lab.site.kubectl})
        wrapper.chmod(0o755)
        self.set_option('kubectl_command', str(wrapper))

    def _pool(self):
        return ssh.ConnectionPool(ssh.SSHSettings.from_conf(self.lab.conf))

    def set_option(self, name, value):
        self.lab.conf.set_override(name, value, group=GROUP)

    @contextlib.contextmanager
    def option(self, name, value):
        old = getattr(self.lab.conf.kubespray_mgmt, name)
        self.set_option(name, value)
        try:
            yield
        finally:
            self.set_option(name, old)

    # Hooks, as Tacker calls them.

    def call(self, hook, request, **kwargs):
        getattr(self.hooks, hook)(CONTEXT, self.vnf.instance, request,
                                  None, None, **kwargs)

    def fails(self, error_class, hook, request, **kwargs):
        """Run a hook that must fail with *error_class*; the error."""
        with pytest.raises(error_class) as info:
            self.call(hook, request, **kwargs)
        assert isinstance(info.value, TACKER_ERRORS)
        return info.value

    def instantiate_request(self):
        return instantiate_request(self.vnf.additional_params)

    def instantiate(self):
        self.call('instantiate_end', self.instantiate_request())
        self.instantiated = True
        self.check()

    def scale_in_args(self, address):
        vm = self.vnf.vm(address)
        request = scale_request('SCALE_IN')
        return request, {'scale_name_list': [vm.member],
                         'scale_out_id_list': [vm.stack_id]}

    def scaled_in(self, address):
        """Tacker deletes the VM once scale_start succeeded."""
        self.vnf.remove_vm(self.vnf.vm(address))
        self.workers.remove(address)

    def removable(self):
        """A healthy worker to scale in, keeping one for the NodePorts."""
        healthy = [a for a in self.workers if a != DEAD]
        if len(healthy) < 2:
            pytest.skip('no worker left to scale in')
        return healthy[0]

    # Observations.

    def master_socket(self, address):
        """The name of the control socket of Ansible's SSH master to the
        worker at *address*."""
        return ansible_masters.socket_of(
            self.workspace, site_mod.name_of(WORKER, address))

    def ssh_masters(self, socket_name):
        """PIDs of the workspace's SSH masters at *socket_name*."""
        return ansible_masters.running(self.workspace, socket_name)

    @property
    def workspace(self):
        return self.lab.workspace(self.vnf.id)

    def snapshot(self):
        """What a fault may have changed: inventory, Kubernetes, HAProxy,
        the playbook runs."""
        lb_dir = self.lab.haproxy.dir
        return {
            'inventory': site_mod.read_inventory(self.workspace),
            'nodes': {name: (node['roles'], node['ready'],
                             node['schedulable'])
                      for name, node in self.lab.site.nodes().items()},
            'etcd': self.lab.site.etcd_members(),
            'haproxy': self.lab.haproxy.config.read_text(),
            'lb_files': sorted(p.name for p in lb_dir.glob('haproxy.cfg*')),
            'runs': len(self.lab.site.runs()),
        }

    def check(self, workers=None, masters=None):
        """Kubernetes, HAProxy's backends and the inventory agree with
        the VMs (default: the current ones)."""
        masters = self.masters if masters is None else masters
        workers = self.workers if workers is None else workers
        assert self.lab.check(masters, workers) == []
        inventory = site_mod.read_inventory(self.workspace)
        assert inventory['kube_control_plane'] == [
            site_mod.name_of(MASTER, a) for a in masters]
        assert sorted(inventory['kube_node']) == sorted(
            site_mod.name_of(WORKER, a) for a in workers)
        assert 'haproxy.cfg.new' not in self.snapshot()['lb_files']

    def check_served(self, workers):
        """HAProxy sends the NodePorts to exactly *workers*."""
        for port in self.lab.nodeports:
            site_mod.wait_served(LB, port, {(a, port) for a in workers})


@contextlib.contextmanager
def running(lab):
    """*lab* started (the test skips when it cannot start), then stopped."""
    try:
        lab.start()
    except lab_mod.LabError as exc:
        pytest.skip(str(exc))
    try:
        yield lab
    finally:
        lab.stop()


@pytest.fixture(scope='module')
def faults():
    with running(FaultLab(ANSIBLE, LB, MASTERS, WORKERS + [SPARE],
                          options=OPTIONS,
                          aside=[ANSIBLE, LB, DEAD])) as lab:
        yield Cluster(lab)


@pytest.fixture
def cluster(faults):
    """The instantiated cluster."""
    if not faults.instantiated:
        faults.instantiate()
    return faults


@contextlib.contextmanager
def at_first_play(playbook, action):
    """Call *action* when *playbook*'s first play starts on the Ansible
    server (read from the live output the driver logs), once."""
    fired = []

    class Trigger(logging.Handler):
        def emit(self, record):
            message = record.getMessage()
            if not fired and message.startswith(playbook + ' on ') and \
                    ': PLAY [' in message:
                fired.append(message)
                action()

    logger = logging.getLogger('mgmt_driver.remote.kubespray')
    trigger, level = Trigger(), logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(trigger)
    try:
        yield fired
    finally:
        logger.removeHandler(trigger)
        logger.setLevel(level)


def name(address):
    return site_mod.name_of(WORKER, address)


# ------------------------------------------------------------------ cases --

def test_ansible_server_unreachable_at_instantiate(faults):
    """Case 2: no sshd answers on the Ansible server when instantiate_end
    starts: SSHConnectError naming it after the configured retries,
    nothing changed; the same hook converges once it answers."""
    c = faults
    before, calls = c.snapshot(), list(c.registry.calls)
    kill_vm_sshd(c.lab.aside[ANSIBLE])
    try:
        started = time.monotonic()
        error = c.fails(exceptions.SSHConnectError, 'instantiate_end',
                        c.instantiate_request())
        assert time.monotonic() - started < 15
    finally:
        c.lab.aside[ANSIBLE].start()
    assert 'SSH connection to %s:%d failed after 2 attempt(s)' % (
        ANSIBLE, c.lab.sshd.port) in str(error)
    assert 'Connection refused' in str(error)
    assert c.snapshot() == before
    assert c.registry.calls == calls

    c.instantiate()
    access = c.registry.current[registry.default_vim_name(c.vnf.id)]
    assert access.server == 'https://%s:%d' % (LB, c.lab.api_port)


def test_haproxy_check_refuses_config_at_scale_in(cluster):
    """Case 6: HAProxy's check refuses the new configuration (an
    haproxy_user that does not exist on the LB): LoadBalancerConfigInvalid
    with HAProxy's message, the running file unchanged, HAProxy still
    serving the old backends; converges once the option is fixed."""
    c = cluster
    gone = c.removable()
    request, kwargs = c.scale_in_args(gone)
    before = c.snapshot()
    with c.option('haproxy_user', 'kmgmt-no-such-user'):
        error = c.fails(exceptions.LoadBalancerConfigInvalid, 'scale_start',
                        request, **kwargs)
    assert 'HAProxy refused the new configuration on %s' % LB in str(error)
    assert "cannot find user id for 'kmgmt-no-such-user'" in str(error)
    assert c.snapshot() == before  # haproxy.cfg, no haproxy.cfg.new
    c.check()  # the old backends are still served

    # Ansible's SSH master to the worker (ControlPersist, from the
    # instantiate) closes with its removal, not when ControlPersist ends.
    socket_name = c.master_socket(gone)
    assert c.ssh_masters(socket_name)
    c.call('scale_start', request, **kwargs)
    assert c.ssh_masters(socket_name) == []
    c.scaled_in(gone)
    c.check()


def test_kubectl_hangs_at_scale_in(cluster, monkeypatch):
    """Case 5: kubectl on the master hangs (its drain): RemoteCommandTimedOut
    after the drain's bound (drain_timeout, its margin and kubectl_timeout
    for the pod list that shares its command) naming the master and the
    command, the hung process is stopped on the host; converges once
    kubectl answers again."""
    c = cluster
    gone = c.removable()
    request, kwargs = c.scale_in_args(gone)
    before = c.snapshot()
    # The margin past kubectl's --timeout is 60 s; a hang needs no more
    # than 5 here to show the bound is the sum.
    monkeypatch.setattr(kubectl, 'DRAIN_MARGIN', 5)
    c.hang_flag.touch()
    try:
        with c.option('kubectl_timeout', 5), c.option('drain_timeout', 10):
            error = c.fails(exceptions.RemoteCommandTimedOut, 'scale_start',
                            request, **kwargs)
    finally:
        c.hang_flag.unlink()
    message = str(error)
    assert 'on %s timed out after %d s' % (
        MASTERS[0], 10 + kubectl.DRAIN_MARGIN + 5) in message
    assert 'kubectl-wrapper drain %s ' % name(gone) in message
    hung = int(c.hang_pid.read_text())
    assert process_gone(hung), 'the hung kubectl (pid %d) still runs' % hung
    # The LB stopped sending to the worker first (the driver's order);
    # Kubernetes and the inventory are untouched.
    after = c.snapshot()
    assert (after['inventory'], after['nodes'], after['etcd']) == (
        before['inventory'], before['nodes'], before['etcd'])
    assert after['runs'] == before['runs']
    c.check_served([a for a in c.workers if a != gone])

    c.call('scale_start', request, **kwargs)
    c.scaled_in(gone)
    c.check()
    assert c.snapshot()['haproxy'] == after['haproxy']


def test_lb_unreachable_at_scale_in(cluster):
    """Case 3: the LB VM does not answer: SSHConnectError naming it;
    nothing changed; converges once it answers."""
    c = cluster
    gone = c.removable()
    request, kwargs = c.scale_in_args(gone)
    before = c.snapshot()
    kill_vm_sshd(c.lab.aside[LB])
    try:
        error = c.fails(exceptions.SSHConnectError, 'scale_start', request,
                        **kwargs)
    finally:
        c.lab.aside[LB].start()
    assert 'SSH connection to %s:%d failed after 2 attempt(s)' % (
        LB, c.lab.sshd.port) in str(error)
    assert c.snapshot() == before
    c.check()

    c.call('scale_start', request, **kwargs)
    c.scaled_in(gone)
    c.check()


def test_sshd_stopped_mid_playbook_at_scale_in(cluster):
    """Case 1: the main sshd (the master and the workers but DEAD) stops
    while remove-node.yml runs, once its first play has started, and the
    connections to it drop (a "systemctl stop ssh" alone would not stop
    the run: Ansible's SSH masters persist 30 min, as kubespray sets
    them, and ride their open sessions): PlaybookFailed naming the
    Ansible server, the playbook and the unreachable hosts; converges
    once sshd is back."""
    c = cluster
    gone = c.removable()
    request, kwargs = c.scale_in_args(gone)
    before = c.snapshot()
    try:
        with at_first_play('remove-node.yml',
                           lambda: kill_vm_sshd(c.lab.sshd)) as fired:
            error = c.fails(exceptions.PlaybookFailed, 'scale_start',
                            request, **kwargs)
    finally:
        c.lab.sshd.start()
    assert fired
    assert 'ansible-playbook remove-node.yml on %s failed' % ANSIBLE \
        in str(error)
    assert name(gone) in error.unreachable_hosts
    assert 'Connection refused' in str(error)
    failed_run = c.lab.site.runs()[-1]
    assert failed_run['playbook'] == 'remove-node.yml'
    assert not failed_run['ok'] and name(gone) in failed_run['unreachable']
    # Old inventory and Kubernetes (the worker only drained); HAProxy
    # already without the worker.
    after = c.snapshot()
    assert after['inventory'] == before['inventory']
    assert after['etcd'] == before['etcd']
    drained = dict(before['nodes'])
    drained[name(gone)] = (['worker'], True, False)
    assert after['nodes'] == drained
    c.check_served([a for a in c.workers if a != gone])

    c.call('scale_start', request, **kwargs)
    c.scaled_in(gone)
    c.check()
    assert c.lab.site.runs()[-1]['ok']


def test_scale_out_while_a_worker_is_down(cluster):
    """Case 5: a worker's VM (DEAD) is down while another joins.  When
    its fact cache entry has expired, the scale-out stops before any
    change with FactsUnavailable naming it; while its entry is still
    valid (even inside the refresh margin), it is kept, only the other
    stale hosts are gathered again and the new worker joins."""
    c = cluster
    site = c.lab.site
    kill_vm_sshd(c.lab.aside[DEAD])
    timeout = site.fact_cache_timeout()
    site.age_fact_cache(timeout + 60)  # every entry expired
    new = c.vnf.add_vm(WORKER, SPARE)
    request, kwargs = scale_request('SCALE_OUT'), {
        'scale_out_id_list': [new.stack_id]}
    nodes = c.snapshot()['nodes']

    error = c.fails(exceptions.FactsUnavailable, 'scale_end', request,
                    **kwargs)
    assert '%s unreachable' % name(DEAD) in str(error)
    assert ANSIBLE in str(error)
    assert c.snapshot()['nodes'] == nodes

    # 30 minutes left on DEAD's entry: kept; the others are gathered.
    site.age_fact_cache(timeout - 1800, hosts=[name(DEAD)])
    runs = len(site.runs())
    c.call('scale_end', request, **kwargs)
    c.workers.append(SPARE)
    failed, facts, scale = c.lab.runs_since(runs)
    stale = sorted([site_mod.name_of(MASTER, a) for a in c.masters] +
                   [name(a) for a in c.workers if a != SPARE])
    assert sorted(failed['limit'].split(',')) == stale
    assert not failed['ok']
    assert failed['unreachable'] == [name(DEAD)]
    assert facts['ok'] and name(DEAD) not in facts['limit'].split(',')
    assert sorted(facts['touched']) == [h for h in stale if h != name(DEAD)]
    assert scale['playbook'] == 'scale.yml' and scale['limit'] == name(SPARE)
    assert name(SPARE) in site.nodes()


def test_a_disruption_budget_blocks_the_scale_in(cluster):
    """Case 7: a PodDisruptionBudget allows no disruption of a workload
    with a pod on the worker: the driver's drain is refused (HTTP 429,
    retried until drain_timeout) and the error names the budget;
    Kubernetes keeps the node (cordoned) and the inventory is the old
    one; once the budget allows a disruption the same hook converges."""
    c = cluster
    site = c.lab.site
    gone = c.removable()
    other = next(a for a in c.workers if a not in (gone, DEAD))
    site.add_pod('shop-a1', name(gone), labels={'app': 'shop'})
    site.add_pod('shop-b2', name(other), labels={'app': 'shop'})
    site.add_budget('shop-pdb', {'app': 'shop'}, min_available=2)
    request, kwargs = c.scale_in_args(gone)
    before = c.snapshot()
    with c.option('drain_timeout', 10):
        error = c.fails(exceptions.DrainBlocked, 'scale_start', request,
                        **kwargs)
    message = str(error)
    assert 'Draining node %s failed: PodDisruptionBudget default/shop-pdb ' \
        '(needs 2 healthy pods, has 2) allows no disruption' % name(gone) \
        in message
    assert MASTERS[0] in message
    after = c.snapshot()
    assert (after['inventory'], after['etcd'], after['runs']) == (
        before['inventory'], before['etcd'], before['runs'])
    cordoned = dict(before['nodes'])
    cordoned[name(gone)] = (['worker'], True, False)
    assert after['nodes'] == cordoned
    assert 'shop-a1' in [p['name'] for p in site.pods_on(name(gone))]

    site.delete_budget('shop-pdb')
    site.add_budget('shop-pdb', {'app': 'shop'}, max_unavailable=1)
    c.call('scale_start', request, **kwargs)
    c.scaled_in(gone)
    c.check()
    shop = [p for p in site.state()['pods'] if p['owner_name'] == 'shop']
    assert len(shop) == 2 and all(p['node'] != name(gone) for p in shop)


def test_dead_worker_is_removed_ungracefully(cluster, caplog):
    """Case 4: the worker's VM is dead when it is scaled in: no drain,
    remove-node.yml with reset_nodes false and allow_ungraceful_removal
    true, which never connects to it; the scale-in succeeds."""
    c = cluster
    site = c.lab.site
    caplog.set_level(logging.INFO, logger='mgmt_driver')
    site.add_pod('cache-d1', name(DEAD), labels={'app': 'cache'})
    site.settings(node_monitor_grace_period=GRACE, node_monitor_period=0.5)
    kill_vm_sshd(c.lab.aside[DEAD])
    # The node lifecycle controller marks it NotReady within the grace
    # period of the first look that found its VM gone.
    assert ready_after(site, name(DEAD), 'Unknown') <= GRACE + 1.5
    request, kwargs = c.scale_in_args(DEAD)
    runs = len(c.lab.site.runs())

    c.call('scale_start', request, **kwargs)
    c.scaled_in(DEAD)
    c.check()
    messages = [r.getMessage() for r in caplog.records]
    # Its node is NotReady first: that alone removes it undrained.
    assert [m for m in messages if m.endswith(
        '%s is NotReady (its kubelet does not answer): removing it '
        'without draining' % name(DEAD))]
    assert not [m for m in messages if 'draining' in m and
                'without draining' not in m]
    run, = c.lab.runs_since(runs)
    assert run['playbook'] == 'remove-node.yml' and run['ok']
    assert name(DEAD) not in run['touched']
    vars_file, = [f for f in run['extra_vars_files']
                  if f.endswith('remove-node-vars.yaml')]
    # A forced drain: the dead kubelet never confirms a termination.
    assert yaml.safe_load(pathlib.Path(vars_file).read_text()) == {
        'node': name(DEAD), 'skip_confirmation': True,
        'reset_nodes': False, 'allow_ungraceful_removal': True,
        'drain_grace_period': 0, 'drain_timeout': '60s'}
    cache = [p for p in site.state()['pods'] if p['owner_name'] == 'cache']
    assert [p['node'] in site.nodes() for p in cache] == [True]


class StillWaiting(AssertionError):
    """The command was still waiting after its connection was lost."""


def test_connection_lost_mid_command_is_reported_at_once(faults):
    """Case 1b: the Ansible server's sshd dies with its sessions while a
    command runs: SSHConnectError ("connection lost") at once."""
    c = faults
    spec = c.lab.spec()
    conn = ssh.Connection(ANSIBLE, ssh.credentials_for(spec.ansible.login),
                          spec.ansible.login.port,
                          ssh.SSHSettings.from_conf(c.lab.conf))
    outcome = []

    def run():
        try:
            conn.run(['sleep', '300'], timeout=120)
        except Exception as exc:  # noqa: BLE001 - reported below
            outcome.append(exc)
        finally:
            conn.close()

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    sshd = c.lab.aside[ANSIBLE]
    deadline = time.monotonic() + 60
    while not any(procs.cmdline(p)[:1] == ['sleep']
                  for p in sessions_of(sshd)):
        assert time.monotonic() < deadline, 'the command did not start'
        time.sleep(0.05)
    kill_vm_sshd(sshd)
    try:
        # A command that waited for its deadline would end at 120 s; one
        # that sees the loss ends in moments, even on a loaded machine:
        # half the deadline tells them apart.
        worker.join(60)
    finally:
        sshd.start()
    if worker.is_alive():
        raise StillWaiting('still waiting 60 s after the connection was '
                           'lost')
    error, = outcome
    assert isinstance(error, exceptions.SSHConnectError)
    assert 'connection lost while running "sleep 300"' in str(error)
    assert ANSIBLE in str(error)
