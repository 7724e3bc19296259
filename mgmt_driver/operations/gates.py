"""Upgrade preflight and the gates between its steps, and which nodes
are drained: the rules, pure.

Not in the design's layout: a day-2 concern of its own (STYLE), used by
:func:`mgmt_driver.operations.day2.upgrade`, which reads the cluster and calls
these; :mod:`mgmt_driver.heal` style guard rails may call
:func:`node_problems` too (it only needs ``kubectl.NodeInfo``).
:func:`undrained` is the one rule of which nodes a removal (scale-in,
heal) takes out without a drain, used by
:meth:`mgmt_driver.operations.membership.remove_from_kubernetes`, which
every removal goes through, and by :func:`upgrade_drains`, the nodes an
upgrade's preflight expects kubespray to drain.

What kubespray v2.31.0 does, read from its code, and why each rule:

- ``roles/upgrade/pre-upgrade/tasks/main.yml`` cordons and drains only a
  node whose Ready condition is ``True`` and that is schedulable
  (``needs_cordoning``); a NotReady or cordoned node is upgraded where it
  stands.  So a node that is not Ready and schedulable before the
  upgrade is upgraded undrained: refused unless the request names it
  (:func:`node_problems`, ``excused``).
- The drain is ``kubectl drain --force --ignore-daemonsets
  --delete-emptydir-data --timeout {{ drain_timeout }}`` (360s, 3
  retries); an eviction a PodDisruptionBudget refuses (HTTP 429) is
  retried until that timeout, then the play fails
  (``upgrade_node_fail_if_drain_fails``) after uncordoning the node.  A
  budget that allows no disruption now and selects a pod of a node to
  drain blocks that node: :func:`drain_blockers` names it and its pods,
  from the budgets' status and the pods' placement (what ``kubectl drain
  --dry-run=server`` would only find out by waiting out the timeout: a
  server-side dry-run eviction still answers 429 and kubectl retries it).
  With ``drain_nodes: false`` or ``drain_fallback_enabled: true``
  (``--disable-eviction``) or ``upgrade_node_fail_if_drain_fails:
  false`` kubespray gets past such a budget: :func:`pdb_policy`.
- etcd: every control-plane node is a member and every member answers
  ``etcdctl endpoint health --cluster`` (:func:`etcd_problems`).

Each rule returns sentences, so a report lists every problem at once.
"""

import math

from mgmt_driver.common import exceptions
from mgmt_driver.model import absence
from mgmt_driver.operations import upgrade as upgrade_mod
from mgmt_driver.remote import kubectl

#: What a preflight or gate message lists of one kind at most.
SHOWN = 20
# Most etcd endpoints read from one answer.
_MAX_ENTRIES = 1000

#: kubespray's ``serial`` default for the worker play
#: (``playbooks/upgrade_cluster.yml``).
DEFAULT_SERIAL = '20%'


def node_problems(nodes, names, excused=(), version=None):
    """Why the nodes *names* are not fit: not registered, not Ready,
    cordoned, or (with *version*) not at *version*.

    :param nodes: ``kubectl.NodeInfo`` of the cluster.
    :param names: the node names to check, in the order to report.
    :param excused: names the request accepts not Ready or cordoned
        (their version is still checked when *version* is given and
        they are Ready: a dead kubelet reports no new version).
    :param version: ``(major, minor, patch)`` every node must run, or
        None.
    :returns: sentences, one per node, in *names*' order.
    """
    by_name = {n.name: n for n in nodes}
    excused = set(excused)
    found = []
    for name in names:
        node = by_name.get(name)
        if node is None:
            found.append('%s is not a Kubernetes node' % name)
            continue
        why = []
        if name not in excused:
            if node.ready != 'True':
                why.append('not Ready (Ready is %s)' % node.ready)
            if not node.schedulable:
                why.append('cordoned')
        if version is not None and (
                name not in excused or node.ready == 'True') and \
                upgrade_mod.kubelet_version(node) != version:
            why.append('at %s, not %s' % (node.kubelet_version or '?',
                                          upgrade_mod.version_text(version)))
        if why:
            found.append('%s is %s' % (name, ' and '.join(why)))
    return found


# ------------------------------------------- which nodes are drained

#: Why :func:`undrained` leaves a node undrained (its values).
NOT_READY = 'not Ready'
KNOWN_DEAD = 'known dead'
UNREACHABLE = 'unreachable'


def readiness(nodes):
    """``{name: Ready condition}`` (``'True'``, ``'False'``,
    ``'Unknown'``) of ``kubectl.NodeInfo`` *nodes*."""
    return {n.name: n.ready for n in nodes}


def undrained(names, ready, known_dead=(), answers=None):
    """Which of the nodes *names* a removal takes out without a drain,
    and why: the one rule of every removal (scale-in, the heal of a
    worker or of a control-plane node, whichever adapter asked), and
    the readiness half of :func:`upgrade_drains`.

    A drain ends only when the node's kubelet confirms that each
    evicted pod has terminated, so a node whose kubelet cannot is
    removed as a dead one (no drain of ours; kubespray's
    ``remove-node.yml`` with ``reset_nodes: false`` and
    ``allow_ungraceful_removal: true``), for the first of these
    reasons, checked in this order (the costly question last):

    - :data:`NOT_READY`: its Ready condition is not ``True``: the
      kubelet is dead or cut off, a drain would wait out its timeout
      for every pod, SSH answering or not (kubespray's own upgrade
      drains only a Ready node);
    - :data:`KNOWN_DEAD`: the operation already knows it is dead
      (*known_dead*: the nodes an automatic heal found not Ready and
      re-creates anyway), whatever Kubernetes says now;
    - :data:`UNREACHABLE`: ``answers(name)`` is false: SSH does not
      answer, so neither a drain's end nor a reset can be seen there.

    :param names: the registered nodes to remove, in order.
    :param ready: ``{name: Ready condition}`` (:func:`readiness`); a
        name missing from it counts as Ready; None: it could not be
        read, readiness decides nothing.
    :param known_dead: names the operation knows are dead.
    :param answers: ``name -> bool``, asked only about the nodes no
        earlier reason took (a dead host costs connect retries); None:
        not asked.
    :returns: ``{name: reason}``, in *names*' order.
    """
    ready = ready or {}
    known_dead = set(known_dead)
    found = {}
    for name in names:
        if ready.get(name, 'True') != 'True':
            found[name] = NOT_READY
        elif name in known_dead:
            found[name] = KNOWN_DEAD
        elif answers is not None and not answers(name):
            found[name] = UNREACHABLE
    return found


def upgrade_drains(nodes, names, uncordoned=()):
    """The nodes of *names* kubespray's upgrade drains: those
    :func:`undrained` leaves (Ready) that are schedulable when their
    run comes (``needs_cordoning``: a cordoned node is upgraded where it
    stands).

    :param nodes: ``kubectl.NodeInfo`` of the cluster.
    :param names: the nodes to upgrade, in order.
    :param uncordoned: names made schedulable before the runs (left
        cordoned by an earlier, failed run of the same upgrade).
    :returns: names, in *names*' order.
    """
    skipped = undrained(names, readiness(nodes))
    schedulable = {n.name for n in nodes if n.schedulable}
    schedulable.update(uncordoned)
    return [n for n in names if n not in skipped and n in schedulable]


def drain_blockers(pods, budgets, names):
    """The PodDisruptionBudgets that would stop the drain of *names*.

    A budget blocks a node when it allows no disruption now and selects
    one of the node's pods that a drain evicts (not a DaemonSet,
    static or finished pod); a pod selected by several budgets is
    refused by the eviction API outright, so it blocks too.

    :param pods: ``kubectl.PodInfo`` of the cluster.
    :param budgets: ``kubectl.Budget`` of the cluster.
    :param names: the nodes to drain.
    :returns: ``{node: [(what, [namespace/pod, ...]), ...]}`` for the
        blocked nodes only, *what* a budget's ``str`` or a sentence;
        budgets and pods sorted.
    """
    wanted = set(names)
    eligible = [pod for pod in pods
                if pod.node in wanted and not pod.evacuated and pod.labels]
    chosen = {}  # position in eligible: the budgets that select it
    for budget, selected in kubectl.selections(budgets, [
            (pod.namespace, pod.labels, at)
            for at, pod in enumerate(eligible)]):
        for at in selected:
            chosen.setdefault(at, []).append(budget)
    found = {}
    for at, pod in enumerate(eligible):
        what = _blocking(chosen.get(at, ()))
        if what:
            found.setdefault(pod.node, {}).setdefault(what, []).append(
                '%s/%s' % (pod.namespace, pod.name))
    return {node: [(what, sorted(refs)) for what, refs in sorted(
        entries.items())] for node, entries in found.items()}


def _blocking(chosen):
    """Why the budgets *chosen* for one pod block its eviction, or
    None."""
    if len(chosen) > 1:
        return 'several PodDisruptionBudgets (%s): evictions refused' % (
            ', '.join(sorted('%s/%s' % (b.namespace, b.name)
                             for b in chosen)))
    if chosen and chosen[0].allowed <= 0:
        return '%s, allows no disruption' % chosen[0]
    return None


def blocker_lines(blockers, order):
    """One sentence per blocked node of :func:`drain_blockers`, in
    *order*."""
    lines = []
    for name in order:
        for what, refs in blockers.get(name, ()):
            shown = refs[:SHOWN]
            lines.append('draining %s would be blocked by %s: pod%s %s%s' % (
                name, what, 's' if len(refs) > 1 else '', ', '.join(shown),
                ' and %d more' % (len(refs) - len(shown))
                if len(refs) > len(shown) else ''))
    return lines


#: kubespray variables (``roles/upgrade/pre-upgrade/defaults/main.yml``)
#: that decide whether a blocked drain stops the upgrade, with their
#: defaults.
DRAIN_VARS = (('drain_nodes', True), ('drain_fallback_enabled', False),
              ('upgrade_node_fail_if_drain_fails', True))


def pdb_policy(extra_vars):
    """Whether a budget that blocks a drain stops kubespray's upgrade,
    given the request's kubespray extra vars; and if not, why.

    :returns: ``(stops, reason)``, *reason* None when it stops.
    """
    value = {key: _flag(extra_vars.get(key, default))
             for key, default in DRAIN_VARS}
    if not value['drain_nodes']:
        return False, 'drain_nodes is false: kubespray drains no node'
    if value['drain_fallback_enabled']:
        return False, ('drain_fallback_enabled is true: kubespray deletes '
                       'the pods past their budgets (--disable-eviction)')
    if not value['upgrade_node_fail_if_drain_fails']:
        return False, ('upgrade_node_fail_if_drain_fails is false: '
                       'kubespray upgrades such a node undrained')
    return True, None


def _flag(value):
    # Ansible's "| bool": yes/true/on/1 (any case) are true.
    if isinstance(value, str):
        return value.strip().lower() in ('yes', 'true', 'on', '1', 'y')
    return bool(value)


def etcd_problems(masters, members, health):
    """Why etcd is not healthy with all its members.

    :param masters: the control-plane node names (each an etcd member,
        by ``etcd_member_name``'s member name or the node name).
    :param members: member names (``etcdctl member list``), or None when
        they could not be read.
    :param health: ``[(endpoint, healthy, error)]`` of ``etcdctl
        endpoint health --cluster``, or None when not read.
    :returns: sentences.
    """
    if members is None or health is None:
        return ['etcd could not be asked for its members and health']
    found = []
    if len(members) < len(masters):
        found.append('etcd has %d member(s) for %d control-plane node(s)'
                     % (len(members), len(masters)))
    unstarted = [m for m in members if not m]
    if unstarted:
        found.append('%d etcd member(s) not started' % len(unstarted))
    for endpoint, healthy, error in health:
        if not healthy:
            found.append('etcd member at %s is not healthy%s' % (
                endpoint, ': %s' % error if error else ''))
    if len(health) < len(members):
        found.append('only %d of %d etcd member(s) answered'
                     % (len(health), len(members)))
    return found


def worker_batches(workers, serial):
    """The workers in kubespray's batches (Ansible's ``serial``).

    Ansible takes a percentage of the play's hosts rounded down, at
    least one (``serial: 20%`` of 3 hosts is 1).

    :param workers: names, in the order to upgrade.
    :param serial: an int, a ``'NN%'`` string, or None for kubespray's
        default (:data:`DEFAULT_SERIAL`).
    :returns: a list of lists of names.
    """
    workers = list(workers)
    if not workers:
        return []
    serial = DEFAULT_SERIAL if serial is None else serial
    if isinstance(serial, str) and serial.endswith('%'):
        size = math.floor(len(workers) * int(serial[:-1]) / 100)
    else:
        size = int(serial)
    size = max(size, 1)
    return [workers[i:i + size] for i in range(0, len(workers), size)]


def preflight_advice(nodes=False, etcd=False, budgets=False):
    """What to do about the preflight's problems, one sentence per kind
    found: only what helps (excusing a node does nothing for etcd),
    with the command line's option and Tacker's metadata key.

    :param nodes: a node is not Ready, cordoned or unknown.
    :param etcd: etcd is not healthy with all its members.
    :param budgets: a PodDisruptionBudget would stop a drain.
    """
    advice = []
    if nodes:
        advice.append(
            'A node not Ready or cordoned: fix it (kubectl uncordon NAME '
            'if it was left cordoned), or have it upgraded where it stands '
            '(--excuse NAME on the command line; the %s metadata key under '
            'Tacker), or declare a dead worker absent (--absent NAME; %s).'
            % (absence.EXCUSED_KEY, absence.ABSENT_KEY))
    if etcd:
        advice.append(
            'etcd: bring every member back to health first (heal the '
            'control-plane node of a lost one); excusing a node does not '
            'excuse etcd.')
    if budgets:
        advice.append(
            'A blocking PodDisruptionBudget: make it allow a disruption '
            '(e.g. scale its workload up).')
    return ' '.join(advice + ['Then run the upgrade again.'])


def refuse(stage, problems, advice):
    """:raises UpgradeGateClosed: listing *problems* (at most
    :data:`SHOWN`, each clipped: they quote names read from the
    cluster), what *stage* was and what to do (*advice*)."""
    raise exceptions.UpgradeGateClosed(
        stage=stage, advice=advice, problems=exceptions.clip_list(
            problems, count=SHOWN, width=600, separator='; '))


def parse_etcd_health(text, host):
    """``[(endpoint, healthy, error)]`` of ``etcdctl endpoint health
    --cluster -w json`` (a JSON list of ``endpoint``, ``health``,
    ``error``); the endpoints and errors are clipped (remote text).

    :raises RemoteDataInvalid: naming *host*, when it is not such a list.
    """
    what = 'etcdctl endpoint health output'
    with kubectl.parsing(host, what):
        data = kubectl.load_json(text, list)
        found = []
        for i, entry in enumerate(data[:_MAX_ENTRIES]):
            where = '[%d]' % i
            if not isinstance(entry, dict):
                raise kubectl.BadShape('%s must be an object' % where)
            healthy = entry.get('health', False)
            if not isinstance(healthy, bool):
                raise kubectl.BadShape('%s.health must be true or false'
                                       % where)
            found.append((
                exceptions.clip(kubectl.json_field(entry, 'endpoint', str,
                                                   where, '?'), 200),
                healthy,
                exceptions.clip(kubectl.json_field(entry, 'error', str,
                                                   where, ''), 300)))
        return found
