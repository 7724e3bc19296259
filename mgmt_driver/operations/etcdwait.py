"""Wait until etcd would accept the removal of members, or refuse.

etcd refuses ``member remove`` unless the cluster it leaves behind keeps
a working quorum, by default (``--strict-reconfig-check``, "Reject
reconfiguration requests that would cause quorum loss", true since etcd
3.1; https://etcd.io/docs/v3.5/op-guide/configuration/).  Its server
(``server/etcdserver/server.go``, ``mayRemoveMember``, in
github.com/etcd-io/etcd) checks two things:

1. the members that stay, *started* ones (they published their name:
   ``etcdctl member list`` shows a name) are a quorum of them
   (``RaftCluster.IsReadyToRemoveVotingMember``,
   ``server/etcdserver/api/membership/cluster.go``), else "etcdserver:
   re-configuration failed due to not enough started members";
2. unless the member removed is down (never connected: removing it
   costs no active vote), the members *connected to the server that
   takes the request since HealthInterval ago* (5 s,
   ``numConnectedSince``/``isConnectedSince`` in
   ``server/etcdserver/util.go``), minus the one removed, are a quorum
   of the rest, else "etcdserver: unhealthy cluster".

A member that joined (or restarted) a moment ago is healthy yet not
connected for 5 s: kubespray v2.31.0's ``remove-node/remove-etcd-node``
runs ``etcdctl member remove`` once, so a removal right after a join
fails half-way.  etcdctl does not show how long peers have been
connected; what it shows (member names, ``endpoint health --cluster``)
is watched instead until every member that stays is started and
healthy, with nothing changed in the members' state for
:data:`HEALTH_INTERVAL` seconds.  A member being removed may be down
(a dead master's); if it answers, its state must hold still too.

:func:`wait` polls with ``kubectl.poll`` (bounded by the
``etcd_member_wait`` option, with progress) and raises
:class:`mgmt_driver.common.exceptions.EtcdNotReady` naming the members not
ready, the time waited and the option; :func:`read` is the one reading
of etcd's state (also the upgrade gates').
"""

import ipaddress
import time
import urllib.parse

from mgmt_driver.common import exceptions
from mgmt_driver.operations import gates
from mgmt_driver.remote import kubectl

#: etcd's ``HealthInterval`` (seconds): how long a peer must have been
#: connected to count for a reconfiguration; not configurable in etcd.
HEALTH_INTERVAL = 5.0
#: The option that bounds the wait (:mod:`mgmt_driver.common.conf`).
OPTION = 'etcd_member_wait'
#: What reading etcd's state may raise: a problem to wait on.
READ_ERRORS = (exceptions.MgmtDriverRemoteCommandError,
               exceptions.MgmtDriverRemoteCommandTimeOut,
               exceptions.MgmtDriverOtherError)
#: Problems a refusal names at most (each clipped: remote text).
SHOWN = 10


def read(conn, etcdctl, timeout):
    """``(members, health)`` of etcd, asked on *conn*.

    :param etcdctl: argv prefix of etcdctl there (sudo included).
    :param timeout: seconds for each of the two commands.
    :returns: :func:`mgmt_driver.remote.kubectl.parse_etcd_members`' dicts and
        :func:`mgmt_driver.operations.gates.parse_etcd_health`'s tuples.
    :raises RemoteDataInvalid: an answer that does not parse (no
        answer at all, e.g. etcdctl failed, is one).
    :raises MgmtDriverRemoteCommandError: the member list failed.
    """
    listed = conn.run(list(etcdctl) + ['member', 'list', '-w', 'json'],
                      timeout=timeout)
    members = kubectl.parse_etcd_members(listed.stdout, conn.host)
    # Non-zero when an endpoint is unhealthy; the JSON still says which.
    health = conn.run(list(etcdctl) + ['endpoint', 'health', '--cluster',
                                       '-w', 'json'],
                      timeout=timeout, check=False)
    return members, gates.parse_etcd_health(health.stdout, conn.host)


def _host(url):
    try:
        host = urllib.parse.urlsplit(url).hostname
    except ValueError:
        return None
    try:
        return ipaddress.ip_address(host or '')
    except ValueError:
        return host


def is_leaving(member, leaving):
    """Whether *member* belongs to a node of *leaving* (``{node name:
    address}``): by its name (the inventory's ``etcd_member_name`` is
    the node name) or, as kubespray finds it, its peer URL's host."""
    if member['name'] and member['name'] in leaving:
        return True
    addresses = {_host('//' + a if ':' not in a else '//[%s]' % a)
                 for a in leaving.values()}
    return any(_host(u) in addresses for u in member['peer_urls'])


def label(member):
    """How a member is named to the operator."""
    if member['name']:
        return member['name']
    return 'unstarted member %s (%s)' % (
        member['id'], ', '.join(member['peer_urls']) or 'no peer URL')


def states(members, health):
    """``{label: state}``: ``healthy``, ``not started``, ``did not
    answer`` or ``not healthy: <error>`` of each member."""
    found = {}
    for member in members:
        answers = [(ok, error) for endpoint, ok, error in health
                   if endpoint in member['client_urls']]
        if not member['name']:
            state = 'not started'
        elif not answers:
            state = 'did not answer'
        elif all(ok for ok, _ in answers):
            state = 'healthy'
        else:
            state = 'not healthy: %s' % (
                '; '.join(e for ok, e in answers if not ok and e)
                or 'no reason given')
        found[label(member)] = state
    return found


def blockers(members, health, leaving):
    """Why etcd would refuse removing *leaving*'s members now, apart
    from time: every member that stays must be started and healthy.

    :returns: sentences, one per member not ready.
    """
    seen = states(members, health)
    return ['%s %s' % (label(m), seen[label(m)]) for m in members
            if not is_leaving(m, leaving) and seen[label(m)] != 'healthy']


class _Watch:
    """The probe :func:`wait` polls: ready once no member blocks and
    the members' states have held for :data:`HEALTH_INTERVAL`."""

    def __init__(self, ask, leaving, clock):
        self.ask = ask
        self.leaving = leaving
        self.clock = clock
        self.seen = None
        self.since = None
        self.problems = ['etcd was not asked yet']
        self.removing = []

    def __call__(self):
        try:
            members, health = self.ask()
        except READ_ERRORS as exc:
            self.seen = self.since = None
            self.problems = [exceptions.plain_message(exc)]
            return False, None
        self.removing = [label(m) for m in members
                         if is_leaving(m, self.leaving)]
        if not self.removing:
            return True, None
        return self._judge(states(members, health),
                           blockers(members, health, self.leaving))

    def _judge(self, seen, problems):
        now = self.clock()
        before, self.seen = self.seen, seen
        if seen != before:
            self.since = now
        if problems:
            self.problems = problems
            return False, None
        held = now - self.since
        if held >= HEALTH_INTERVAL:
            return True, None
        changed = sorted(n for n in seen if before and before.get(n) !=
                         seen[n])
        self.problems = ['the members healthy for %.0f s of the %g s etcd '
                         'requires before a removal%s' % (
                             held, HEALTH_INTERVAL,
                             ' (changed just now: %s)' % ', '.join(changed)
                             if changed else '')]
        return False, None


def wait(ask, leaving, timeout, settings, operation, progress=None,
         changed='Nothing was changed.', sleep=time.sleep,
         clock=time.monotonic):
    """Wait until etcd would accept removing the members of *leaving*.

    Returns at once when none of them is a member (nothing for etcd to
    refuse).

    :param ask: ``() -> (members, health)``, as :func:`read` (it may
        raise one of :data:`READ_ERRORS`: waited on as a problem).
    :param leaving: ``{node name: address}`` of the nodes whose etcd
        members are to be removed.
    :param timeout: seconds (the ``etcd_member_wait`` option).
    :param settings: ``kubectl.KubectlSettings`` (its poll delays).
    :param operation: what removes them, for the messages (``heal``).
    :param progress: called with a line at each probe that waits.
    :param changed: what the refusal says was changed so far.
    :returns: the seconds waited.
    :raises EtcdNotReady: not ready within *timeout*.
    """
    watch = _Watch(ask, leaving, clock)
    start = clock()

    def probe():
        done, _ = watch()
        if not done and progress:
            progress('waiting for etcd before removing the etcd member(s) '
                     'of %s (%.0f s of %d s, %s): %s' % (
                         ', '.join(sorted(leaving)), clock() - start,
                         timeout, OPTION, '; '.join(watch.problems)))
        return done, None

    done, _ = kubectl.poll(probe, timeout, settings, sleep=sleep,
                           clock=clock)
    if not done:
        raise exceptions.EtcdNotReady(
            operation=operation, nodes=', '.join(sorted(leaving)),
            waited='%.0f' % (clock() - start), option=OPTION,
            limit=timeout, interval='%g' % HEALTH_INTERVAL, changed=changed,
            problems=exceptions.clip_list(watch.problems, count=SHOWN,
                                          width=300, separator='; '))
    return clock() - start
