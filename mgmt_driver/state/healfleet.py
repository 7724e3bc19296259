"""The fleet's guard rails of automatic heals, kept in the shared state
store so that every conductor applies the same ones.

Not in the design's layout: :func:`mgmt_driver.operations.autoheal.
check_heal` looks at one cluster.  After a rack or power failure every
cluster's alerts fire at once, each within its own budget, and Tacker
(no cap across instances) would re-create VMs on the failed
infrastructure everywhere at the same time.  One file,
``<records_dir>/fleet/auto-heals.json`` (changed under
:func:`mgmt_driver.state.sharedfiles.locked`, replaced atomically), holds
what the conductors need to refuse that:

* **leases**: one per automatic heal in flight, taken by its
  ``heal_start`` (:func:`admit`), renewed by its ``heal_end``
  (:func:`renew`) and released when the heal ends, whatever its result
  (:func:`release`).  A lease expires ``auto_heal_lease`` seconds after it
  was taken or renewed, so a conductor that died, or a heal Tacker never
  ended (its VM re-creation failed, the operator marked it failed),
  holds no place for ever;
* **observations**: what each instance's last automatic-heal check saw
  (its Kubernetes nodes, how many not Ready, when).  An observation older
  than ``auto_heal_observation_max_age`` seconds is stale and no longer
  counts, so no hook has to reach every cluster;
* **pause**: set when the not-Ready share of the fleet reaches
  ``auto_heal_fleet_pause_percent``; it lifts by itself when fresh
  observations of at least ``auto_heal_fleet_min_instances`` instances
  show a smaller share, or when the operator runs ``kubespray-mgmt state
  resume-heals`` (:func:`resume`).

The share's denominator is every Kubernetes node of every instance this
store has a record of (its hosts), not only those observed: only
instances with a firing alert are observed, and counting only them would
make three one-node failures in small clusters look like a rack failure.
An instance without a fresh observation counts as all Ready.

Refusals reach the tenant (Tacker shows them): they name the rule and
the setting, never another tenant's instances or counts, which go to
the conductor's log at INFO (under v2 a warning reaches the tenant).
Timestamps are the conductors' wall clocks (seconds since the epoch):
the conductor hosts keep their clocks in step (NTP), as Tacker's own
database timestamps need too.
"""

import dataclasses
import json
import os
import socket

from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.common import safetext
from mgmt_driver.model import core
from mgmt_driver.state import sharedfiles

LOG = safetext.logger(__name__)

#: The file, under ``records_dir``.
FILE = os.path.join('fleet', 'auto-heals.json')
FORMAT = 1
#: Most bytes read from the file, and most entries kept in each part
#: (beyond them, the oldest go: the file never grows without bound).
MAX_BYTES = 8 * 1024 * 1024
MAX_ENTRIES = 20000

#: The rules, as ``AutoHealRefused.rule``.
RULE_IN_FLIGHT = 'automatic heals in flight'
RULE_IN_FLIGHT_SERVER = 'automatic heals in flight per Ansible server'
RULE_PAUSED = 'fleet paused'

_G = '[%s] ' % kconf.GROUP
_K8S_ROLES = frozenset((core.ROLE_MASTER, core.ROLE_WORKER))


@dataclasses.dataclass(frozen=True)
class Limits:
    """The options of the fleet's rules (:func:`from_conf`)."""

    max_in_flight: int
    max_per_server: int
    pause_percent: int
    min_instances: int
    max_age: int
    lease: int


def limits(conf=None):
    """:class:`Limits` from ``[kubespray_mgmt]``."""
    group = (conf or kconf.CONF)[kconf.GROUP]
    return Limits(group.auto_heal_max_in_flight,
                  group.auto_heal_max_in_flight_per_ansible_server,
                  group.auto_heal_fleet_pause_percent,
                  group.auto_heal_fleet_min_instances,
                  group.auto_heal_observation_max_age,
                  group.auto_heal_lease)


def path_in(directory):
    """The fleet file of the store whose records are in *directory*."""
    return os.path.join(directory, FILE)


# ------------------------------------------------------------ the file


def _empty():
    return {'format': FORMAT, 'leases': {}, 'observations': {},
            'pause': None}


def load(path):
    """The fleet document at *path* (an empty one when there is none).

    :raises StateStoreUnusable: it is too large or not one.
    """
    try:
        with open(path, 'rb') as f:
            data = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return _empty()
    try:
        if len(data) > MAX_BYTES:
            raise ValueError('more than %d bytes' % MAX_BYTES)
        return _parse(json.loads(data.decode('utf-8')))
    except (ValueError, TypeError, RecursionError) as exc:
        raise exceptions.StateStoreUnusable(
            reason='%s is no fleet file of the driver (%s); remove it to '
                   'start again' % (path, safetext.clip(str(exc), 200)))


def _parse(doc):
    if not isinstance(doc, dict) or doc.get('format') != FORMAT:
        raise ValueError('not of format %d' % FORMAT)
    result = _empty()
    for part in ('leases', 'observations'):
        entries = doc.get(part)
        if not isinstance(entries, dict):
            raise ValueError('%s is no mapping' % part)
        result[part] = {str(k): v for k, v in entries.items()
                        if isinstance(v, dict)}
    pause = doc.get('pause')
    result['pause'] = pause if isinstance(pause, dict) else None
    return result


def _save(path, doc):
    for part, stamp in (('leases', 'taken'), ('observations', 'at')):
        entries = doc[part]
        if len(entries) > MAX_ENTRIES:
            keep = sorted(entries, key=lambda k: _number(entries[k], stamp))
            doc[part] = {k: entries[k] for k in keep[-MAX_ENTRIES:]}
    sharedfiles.replace(path, json.dumps(doc, indent=1, sort_keys=True) +
                        '\n')


def _number(entry, key):
    value = entry.get(key)
    return value if isinstance(value, (int, float)) and \
        not isinstance(value, bool) else 0


def _live_leases(doc, now):
    return {k: v for k, v in doc['leases'].items()
            if _number(v, 'expires') > now}


def _fresh(doc, now, max_age):
    return {k: v for k, v in doc['observations'].items()
            if now - _number(v, 'at') <= max_age}


# ------------------------------------------------------------ the rules


def fleet_nodes(store):
    """``{instance id: Kubernetes nodes}`` of every record in *store*
    (a :class:`~mgmt_driver.state.records.RecordStore`); a record that
    cannot be read counts as none."""
    counts = {}
    for instance_id in store.instance_ids():
        try:
            record = store.load(instance_id)
        except exceptions.InstanceRecordInvalid:
            continue
        counts[instance_id] = sum(1 for h in record.hosts
                                  if h.role in _K8S_ROLES)
    return counts


def share(doc, sizes, now, max_age):
    """The fleet's not-Ready share from fresh observations.

    :param sizes: ``{instance id: Kubernetes nodes}`` (:func:`fleet_nodes`).
    :returns: ``(not Ready, nodes, instances observed with a not-Ready
        node)``.
    """
    fresh = _fresh(doc, now, max_age)
    total = dict(sizes)
    down = 0
    for instance_id, seen in fresh.items():
        nodes = int(_number(seen, 'nodes'))
        bad = min(int(_number(seen, 'not_ready')), nodes)
        total[instance_id] = max(total.get(instance_id, 0), nodes)
        down += bad
    hit = sum(1 for seen in fresh.values() if _number(seen, 'not_ready'))
    return down, sum(total.values()), hit


def _update_pause(doc, sizes, now, lim):
    """Set or lift the pause from the fresh observations."""
    if not lim.pause_percent:
        doc['pause'] = None
        return
    down, total, hit = share(doc, sizes, now, lim.max_age)
    over = total and down * 100 >= lim.pause_percent * total
    if over and hit >= lim.min_instances:
        if doc['pause'] is None:
            doc['pause'] = {'since': now}
            LOG.warning('automatic heals paused across the fleet: %d of %d '
                        'Kubernetes nodes not Ready, in %d instances',
                        down, total, hit)
        doc['pause'].update(not_ready=down, nodes=total, instances=hit)
    elif doc['pause'] is not None and not over and \
            len(_fresh(doc, now, lim.max_age)) >= lim.min_instances:
        LOG.warning('automatic heals resume across the fleet: %d of %d '
                    'Kubernetes nodes not Ready', down, total)
        doc['pause'] = None


def check(doc, instance_id, server, lim, now):
    """The fleet's rules for an automatic heal of *instance_id* (pure).

    :returns: ``(rule, reason)`` of the first rule that refuses, or None.
    """
    if doc['pause'] is not None:
        return RULE_PAUSED, (
            'automatic heals are paused across the fleet: the share of '
            'Kubernetes nodes not Ready reached %sauto_heal_fleet_pause_'
            'percent (%d%%), an infrastructure failure that re-creating VMs '
            'does not heal; it lifts when fresh checks show less, or the '
            'operator resumes (kubespray-mgmt state resume-heals)' % (
                _G, lim.pause_percent))
    others = {k: v for k, v in _live_leases(doc, now).items()
              if k != instance_id}
    if len(others) >= lim.max_in_flight:
        return RULE_IN_FLIGHT, (
            '%sauto_heal_max_in_flight automatic heals (%d) are in flight '
            'in the fleet; this one may come again when one ends' % (
                _G, lim.max_in_flight))
    same = [k for k, v in others.items() if v.get('server') == server]
    if len(same) >= lim.max_per_server:
        return RULE_IN_FLIGHT_SERVER, (
            '%sauto_heal_max_in_flight_per_ansible_server automatic heals '
            '(%d) are in flight on this instance\'s Ansible server; this '
            'one may come again when one ends' % (_G, lim.max_per_server))
    return None


def admit(path, sizes, instance_id, observed, server, lim, now):
    """Record what the instance's check *observed*, apply the fleet's
    rules, and take a lease when they pass (one locked change).

    :param sizes: ``{instance id: Kubernetes nodes}`` (:func:`fleet_nodes`).
    :param observed: ``(Kubernetes nodes, not Ready)`` of the instance.
    :param server: the instance's Ansible server (its address).
    :returns: ``(rule, reason)`` when refused (no lease), else None.
    :raises StateStoreUnusable: the file is not the driver's.
    """
    with sharedfiles.locked(path):
        doc = load(path)
        doc['leases'] = _live_leases(doc, now)
        doc['observations'] = _fresh(doc, now, lim.max_age)
        doc['observations'][instance_id] = {
            'at': now, 'nodes': observed[0], 'not_ready': observed[1]}
        _update_pause(doc, sizes, now, lim)
        refused = check(doc, instance_id, server, lim, now)
        if refused is None:
            doc['leases'][instance_id] = {
                'server': server, 'taken': now, 'expires': now + lim.lease,
                'conductor': socket.gethostname(), 'pid': os.getpid()}
        _save(path, doc)
    if refused is not None:
        LOG.info('automatic heal of VNF instance %s refused (%s): %d heals '
                 'in flight, %d on Ansible server %s', instance_id,
                 refused[0], len(doc['leases']),
                 sum(1 for v in doc['leases'].values()
                     if v.get('server') == server), server)
    return refused


def _change(path, change):
    with sharedfiles.locked(path):
        doc = load(path)
        if change(doc) is not False:
            _save(path, doc)
        return doc


def renew(path, instance_id, lim, now):
    """Extend the lease of *instance_id* (its ``heal_end`` starts);
    nothing when it holds none."""
    def change(doc):
        lease = doc['leases'].get(instance_id)
        if lease is None:
            return False
        lease['expires'] = now + lim.lease
    _change(path, change)


def release(path, instance_id):
    """Drop the lease of *instance_id* (its heal ended), if any.

    :returns: whether there was one.
    """
    found = []

    def change(doc):
        found.append(doc['leases'].pop(instance_id, None))
        return found[0] is not None
    _change(path, change)
    return found[0] is not None


def resume(path, now):
    """Lift the pause, forgetting the observations that set it (each
    instance's next check observes again).

    :returns: the pause lifted, or None.
    """
    lifted = []

    def change(doc):
        lifted.append(doc['pause'])
        doc['pause'] = None
        doc['observations'] = {k: v for k, v in doc['observations'].items()
                               if _number(v, 'at') > now}
    _change(path, change)
    return lifted[0]


def report(path, sizes, lim, now):
    """What ``kubespray-mgmt state heals`` prints: ``[(kind, text)]``."""
    doc = load(path)
    leases = _live_leases(doc, now)
    down, total, hit = share(doc, sizes, now, lim.max_age)
    lines = [('note', '%d automatic heal(s) in flight (at most %d, %d per '
              'Ansible server)' % (len(leases), lim.max_in_flight,
                                   lim.max_per_server))]
    for instance_id, lease in sorted(leases.items()):
        lines.append(('note', 'in flight: VNF instance %s on Ansible '
                      'server %s, conductor %s, lease ends in %d s' % (
                          instance_id, lease.get('server'),
                          lease.get('conductor'),
                          _number(lease, 'expires') - now)))
    lines.append(('note', 'fresh observations (last %d s): %d of %d '
                  'Kubernetes nodes not Ready, in %d instance(s)' % (
                      lim.max_age, down, total, hit)))
    for instance_id, seen in sorted(_fresh(doc, now, lim.max_age).items()):
        if _number(seen, 'not_ready'):
            lines.append(('note', 'observed: VNF instance %s, %d of %d not '
                          'Ready, %d s ago' % (
                              instance_id, _number(seen, 'not_ready'),
                              _number(seen, 'nodes'),
                              now - _number(seen, 'at'))))
    pause = doc['pause']
    if pause is not None:
        lines.append(('problem', 'automatic heals paused since %d s ago '
                      '(%sauto_heal_fleet_pause_percent %d); '
                      '"kubespray-mgmt state resume-heals" lifts it' % (
                          now - _number(pause, 'since'), _G,
                          lim.pause_percent)))
    return lines
