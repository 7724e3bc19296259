"""The wait for etcd before a member removal
(mgmt_driver/operations/etcdwait.py): the rule on scripted etcd answers, a fake
clock, and the master heal that waits on it before its first change."""

import json

import pytest

from mgmt_driver.common import exceptions
from mgmt_driver.operations import controlplane
from mgmt_driver.operations import etcdwait
from mgmt_driver.operations import gateways
from mgmt_driver.operations import lcm
from mgmt_driver.operations import membership
from mgmt_driver.remote import isolation
from mgmt_driver.remote import kubectl
from mgmt_driver.remote import kubespray
from mgmt_driver.state import records
from tests.unit.test_driver import ANSIBLE
from tests.unit.test_etcdsnapshots import MASTERS
from tests.unit.test_etcdsnapshots import _context
from tests.unit.test_etcdsnapshots import conf  # noqa: F401 (fixture)

SETTINGS = kubectl.KubectlSettings(poll_initial_delay=1.0, poll_max_delay=4.0)
NAMES = ['cp1', 'cp2', 'cp3']


class FakeTime:
    """A clock that moves only when slept on."""

    def __init__(self):
        self.now = 100.0
        self.sleeps = []

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds

    def clock(self):
        return self.now


def _member(name, address, started=True, index=1):
    return {'name': name if started else '', 'id': '%x' % index,
            'peer_urls': ['https://%s:2380' % address],
            'client_urls': ['https://%s:2379' % address] if started else []}


def _members(*unstarted):
    return [_member(n, '10.0.0.%d' % i, n not in unstarted, i)
            for i, n in enumerate(NAMES, 1)]


def _health(*sick):
    return [('https://10.0.0.%d:2379' % i, n not in sick,
             'context deadline exceeded' if n in sick else '')
            for i, n in enumerate(NAMES, 1)]


def _asker(answers):
    """``ask`` answering *answers* in turn, then the last for ever."""
    answers = list(answers)

    def ask():
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer
    return ask


def _wait(answers, leaving=None, timeout=60):
    time = FakeTime()
    lines = []
    waited = etcdwait.wait(_asker(answers), leaving or {'cp3': '10.0.0.3'},
                           timeout, SETTINGS, 'heal', progress=lines.append,
                           sleep=time.sleep, clock=time.clock)
    return waited, lines, time


# ------------------------------------------------------------- the rule --

def test_only_the_members_that_stay_must_be_started_and_healthy():
    leaving = {'cp3': '10.0.0.3'}
    assert etcdwait.blockers(_members(), _health('cp3'), leaving) == []
    assert etcdwait.blockers(_members('cp2'), _health(), leaving) == [
        'unstarted member 2 (https://10.0.0.2:2380) not started']
    assert etcdwait.blockers(_members(), _health('cp1'), leaving) == [
        'cp1 not healthy: context deadline exceeded']
    assert etcdwait.blockers(_members(), _health()[1:], leaving) == [
        'cp1 did not answer']


def test_a_leaving_member_is_known_by_name_or_by_its_peer_address():
    unstarted = _member('', '10.0.0.3', started=False, index=3)
    assert etcdwait.is_leaving(unstarted, {'cp3': '10.0.0.3'})
    assert etcdwait.is_leaving(_member('cp3', '10.0.0.9'), {'cp3': 'x'})
    assert not etcdwait.is_leaving(_member('cp2', '10.0.0.2'),
                                   {'cp3': '10.0.0.3'})
    assert etcdwait.is_leaving(_member('a', '[fd00::3]'), {'b': 'fd00:0::3'})
    assert not etcdwait.is_leaving(_member('a', '[fd00::3]'), {'b': 'fd00::4'})


# ------------------------------------------------------------- the wait --

def test_it_waits_for_a_joining_member_then_for_etcd_s_five_seconds():
    waited, lines, time = _wait([(_members('cp2'), _health('cp2')),
                                 (_members(), _health('cp2')),
                                 (_members(), _health())])
    assert 'unstarted member 2 (https://10.0.0.2:2380) not started' in \
        lines[0]
    assert 'cp2 not healthy' in lines[1]
    assert 'healthy for 0 s of the 5 s' in lines[2]
    assert 'changed just now: cp2' in lines[2]
    # Healthy from the third probe (t=3) on; ready once that held 5 s.
    assert waited >= etcdwait.HEALTH_INTERVAL + 3
    assert all('waiting for etcd before removing the etcd member(s) of cp3'
               in line and 'etcd_member_wait' in line for line in lines)


def test_a_member_healthy_at_once_still_waits_out_the_interval():
    waited, lines, time = _wait([(_members(), _health())])
    assert waited >= etcdwait.HEALTH_INTERVAL
    assert time.sleeps and lines


def test_a_change_starts_the_interval_again():
    flapping = [(_members(), _health()), (_members(), _health()),
                (_members(), _health('cp3')), (_members(), _health())]
    waited, lines, time = _wait(flapping)
    # cp3 (leaving) answered, then did not, at t=3, then did at t=7.
    assert waited >= 7 + etcdwait.HEALTH_INTERVAL
    assert any('changed just now: cp3' in line for line in lines)


def test_a_dead_leaving_member_does_not_hold_the_removal():
    waited, lines, time = _wait([(_members(), _health('cp3'))])
    assert waited >= etcdwait.HEALTH_INTERVAL


def test_nothing_to_wait_for_when_no_leaving_node_is_a_member():
    waited, lines, time = _wait([(_members('cp2'), _health('cp2'))],
                                leaving={'cp9': '10.0.0.9'})
    assert (waited, lines, time.sleeps) == (0, [], [])


def test_it_refuses_naming_the_member_the_time_and_the_option():
    with pytest.raises(exceptions.EtcdNotReady) as raised:
        _wait([(_members(), _health('cp2'))], timeout=45)
    message = str(raised.value)
    assert 'cp2 not healthy: context deadline exceeded' in message
    assert 'not ready after 45 s (etcd_member_wait = 45)' in message
    assert 'member(s) of cp3' in message
    assert 'Nothing was changed.' in message


def test_an_etcd_that_cannot_be_asked_is_waited_on_then_named():
    down = exceptions.MgmtDriverOtherError(error_message='etcd down on cp1')
    waited, lines, _ = _wait([down, (_members(), _health())])
    assert 'etcd down on cp1' in lines[0]
    with pytest.raises(exceptions.EtcdNotReady, match='etcd down on cp1'):
        _wait([down])


# ------------------------------------------------------ the master heal --

HEALED = 'master-10-10-10-12'
STAYING = ['master-10-10-0-11', 'master-10-10-10-13']
ADDRESSES = {'master-10-10-0-11': '10.10.0.11', HEALED: '10.10.10.12',
             'master-10-10-10-13': '10.10.10.13'}


def _script_etcd(master, sick_times):
    """etcd on *master*: three started members; the healed master's
    peer cp3 answers unhealthy *sick_times* times (None: always)."""
    master.script(r'member list -w json', stdout=json.dumps({'members': [
        {'ID': i, 'name': name, 'peerURLs': ['https://%s:2380' % address],
         'clientURLs': ['https://%s:2379' % address]}
        for i, (name, address) in enumerate(ADDRESSES.items(), 1)]}))

    def health(sick):
        return json.dumps([
            {'endpoint': 'https://%s:2379' % address,
             'health': not (sick and name == STAYING[1]),
             'error': 'context deadline exceeded'
             if sick and name == STAYING[1] else ''}
            for name, address in ADDRESSES.items()])
    master.script(r'endpoint health --cluster', stdout=health(False))
    master.script(r'endpoint health --cluster', stdout=health(True),
                  exit_code=1, times=sick_times, first=True)


class Reached(Exception):
    """The heal went past the wait to its first change."""


def _heal(conf, monkeypatch, sick_times):  # noqa: F811 (the fixture's)
    drv, cluster, pool = _context(conf)
    _script_etcd(pool.connection(MASTERS[0]), sick_times)
    time = FakeTime()
    drv.sleep, drv.clock = time.sleep, time.clock
    lines = []
    drv._progress = lines.append

    def reconcile(*args, **kwargs):
        raise Reached()
    monkeypatch.setattr(membership, 'reconcile', reconcile)
    return drv, cluster, pool, lines, time


def test_a_master_heal_waits_for_etcd_then_goes_on(conf,  # noqa: F811
                                                   monkeypatch):
    drv, cluster, pool, lines, time = _heal(conf, monkeypatch, sick_times=2)
    with pytest.raises(Reached):
        lcm.heal_begin(drv, cluster, [HEALED])
    waiting = [line for line in lines if line.startswith('waiting for etcd')]
    assert '%s not healthy' % STAYING[1] in waiting[0]
    assert time.sleeps and time.now - 100 >= etcdwait.HEALTH_INTERVAL
    assert any(line.startswith('etcd is ready for removing the member(s) '
                               'of %s' % HEALED) for line in lines)
    # Asked on a master that stays, never on the healed one.
    assert not [c for c in pool.connection(MASTERS[1]).commands
                if 'etcdctl' in c]


def test_a_master_heal_refuses_before_any_change(conf,  # noqa: F811
                                                 monkeypatch):
    removals = []
    monkeypatch.setattr(kubespray.Runner, 'remove_nodes',
                        lambda *args, **kwargs: removals.append(args))
    drv, cluster, pool, lines, time = _heal(conf, monkeypatch,
                                            sick_times=None)
    with pytest.raises(exceptions.EtcdNotReady) as raised:
        lcm.heal_begin(drv, cluster, [HEALED])
    message = str(raised.value)
    assert '%s not healthy: context deadline exceeded' % STAYING[1] in \
        message
    assert 'after 300 s (etcd_member_wait = 300)' in message
    assert 'Nothing was changed.' in message
    everything = [c for conn in pool.connections.values()
                  for c in conn.commands]
    assert removals == []
    assert not [c for c in everything if 'ansible-playbook -i' in c
                or 'kubectl' in c]


def test_healing_the_first_master_waits_again_after_cluster_yml(
        conf, monkeypatch):  # noqa: F811
    """The new order's cluster.yml rewrites etcd's settings (members
    restart): the removal waits again, and refuses naming that run."""
    drv, cluster, pool, lines, time = _heal(conf, monkeypatch,
                                            sick_times=None)
    # The first master is healed: etcd is asked on the second.
    _script_etcd(pool.connection(MASTERS[1]), sick_times=None)
    done = []
    drv.in_recorded_order = lambda c: c
    drv.upload_inventory = lambda c: done.append('inventory')
    drv.reachable = lambda node: True
    monkeypatch.setattr(membership, 'refresh_facts', lambda *args: None)
    drv.runner = lambda: type('Runner', (), {
        'cluster': lambda self, *a, **k: done.append('cluster.yml')})()
    monkeypatch.setattr(membership, 'remove_from_kubernetes',
                        lambda *a, **k: done.append('removed'))
    first = cluster.masters[0].name
    # (HEALED, the second master, is the new first: healthy here.)
    with pytest.raises(exceptions.EtcdNotReady,
                       match='cluster.yml re-ran over the control plane '
                             'with %s first; nothing was removed' % HEALED
                       ) as raised:
        controlplane.remove(drv, cluster, [first])
    assert 'member(s) of %s' % first in str(raised.value)
    assert done == ['inventory', 'cluster.yml']


# ------------------------ issue 43 item 4: the healed master's host key

def test_a_healed_master_s_host_key_is_recorded(conf,  # noqa: F811
                                                monkeypatch):
    """status records no key (``accept-new`` is read-only there) and
    kubectl reaches the first master that answers: unless the heal
    logs in to the re-created master, its new key is recorded by
    nobody, and status under a strict policy cannot read it."""
    drv, cluster, pool = _context(conf)
    healed = cluster.masters[1]
    joined = []
    monkeypatch.setattr(membership, 'reconcile',
                        lambda *args, **kwargs: [healed.name])
    monkeypatch.setattr(controlplane, 'add',
                        lambda drv, cluster: joined.append('cluster.yml'))
    monkeypatch.setattr(membership, 'scale_out', lambda *a, **k: None)
    lcm.heal_finish(drv, cluster, [healed.name], None, None)
    assert joined == ['cluster.yml']
    endpoint = (healed.ssh_address, healed.ssh_port)
    record = records.RecordStore.from_conf(conf).load('inst-1')
    assert record.keys[endpoint] == pool.known[endpoint]


# ------------------- the removed master's SSH master on the Ansible server

REPLACE = 'kubespray-mgmt-script: replace-workspace'


def _removal(conf, monkeypatch):  # noqa: F811
    """:func:`_context` for :func:`controlplane.remove` alone: nothing
    of the gateways or Kubernetes, and no node answers (so no
    ``cluster.yml`` re-run)."""
    drv, cluster, pool = _context(conf)
    monkeypatch.setattr(gateways, 'update', lambda *args: None)
    monkeypatch.setattr(gateways, 'point_cluster_info', lambda *args: None)
    monkeypatch.setattr(membership, 'remove_from_kubernetes',
                        lambda *args, **kwargs: None)
    drv.reachable = lambda node: False
    return drv, cluster, pool


@pytest.mark.parametrize('first', [False, True])
def test_a_master_removal_closes_ansible_s_ssh_master_to_it(
        conf, monkeypatch, first):  # noqa: F811
    """ControlPersist would keep Ansible's master to the removed node
    open, and the VM re-created at its address reached through it: the
    last inventory's command closes it (the first master's removal
    writes one before, with it still first of the moved ones)."""
    drv, cluster, pool = _removal(conf, monkeypatch)
    healed = cluster.masters[0 if first else 1]
    controlplane.remove(drv, cluster, [healed.name])
    replaces = [c for c in pool.connection(ANSIBLE).commands
                if REPLACE in c]
    socket_name = isolation.control_socket_name(
        healed.ssh_address, healed.ssh_port,
        drv.spec.master.login.username)
    assert len(replaces) == 1 + first
    assert replaces[-1].endswith('/.ansible/cp 5 ' + socket_name)
    assert not [c for c in replaces[:-1] if socket_name in c]


# ------------------ who comes first when the first master is removed

@pytest.mark.parametrize('lead, first', [((), 1), (('-', 2), 2),
                                         ((2, 1), 2), ((1, 2), 1)])
def test_the_first_master_s_removal_puts_the_lead_first(
        conf, monkeypatch, lead, first):  # noqa: F811
    """Without a lead the next master in order comes first; a rolling
    replacement names who (a name not in the cluster is passed over),
    and the masters it does not name keep their order after it."""
    drv, cluster, pool = _removal(conf, monkeypatch)
    orders = []
    drv.upload_inventory = lambda c, gone=(): orders.append(
        [n.name for n in c.masters])
    names = [n.name for n in cluster.masters]
    lead = [names[i] if isinstance(i, int) else i for i in lead]
    controlplane.remove(drv, cluster, [names[0]], lead=lead)
    others = [names[first]] + [n for n in names[1:] if n != names[first]]
    assert orders[0] == others + [names[0]]
