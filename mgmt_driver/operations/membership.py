"""Workers in and out: join, reconcile, drain and remove, over an
operation's context (a :class:`mgmt_driver.session.driver.ClusterDriver`,
called *drv*), which :mod:`mgmt_driver.operations.lcm` composes.

Each step converges when run again: a join that fails takes out what got
in, and a removal skips nodes that are already gone.
"""


from mgmt_driver.common import exceptions
from mgmt_driver.common import safetext
from mgmt_driver.operations import gates
from mgmt_driver.operations import gateways
from mgmt_driver.remote import factcache

LOG = safetext.logger(__name__)


#: What a failed playbook run raises.
_PLAYBOOK_ERRORS = (exceptions.MgmtDriverRemoteCommandError,
                    exceptions.MgmtDriverRemoteCommandTimeOut)

#: The warning for a node removed undrained, by
#: :func:`mgmt_driver.operations.gates.undrained`'s reason.
_UNDRAINED = {
    gates.NOT_READY: '%s is NotReady (its kubelet does not answer): '
                     'removing it without draining',
    gates.KNOWN_DEAD: '%s is being replaced as a dead node: removing it '
                      'without draining',
    gates.UNREACHABLE: '%s is not reachable: removing it without draining',
}


#: What :func:`scale_out` says it does, by *purpose*.
JOIN_STEPS = {'scale out': 'scale out: adding %s',
              'heal': 'heal: joining %s again',
              'rollback': 'scale-out rollback: joining %s'}
#: ... and when it has no node to join.
NOTHING_TO_JOIN = {'scale out': 'scale out: no worker to add',
                   'heal': 'heal: no worker to join again',
                   'rollback': 'scale-out rollback: no worker to join'}


def scale_out(drv, cluster, new_names, advice=None, purpose='scale out'):
    """Join the workers *new_names* of *cluster* (already in it).

    When the join fails, the nodes that got into Kubernetes are taken
    out again before the error is raised, so that a rollback that
    only deletes the new VMs leaves a consistent cluster.

    :param advice: appended to the error of a failed join: what the
        operator should do next.
    :param purpose: a key of :data:`JOIN_STEPS`: what the progress
        calls the join (a heal is not a scale out).
    """
    cluster = drv.in_recorded_order(cluster)
    new_names = [n for n in new_names if n not in drv.absent]
    if new_names:
        drv.step(JOIN_STEPS[purpose], ', '.join(new_names))
    else:
        drv.step(NOTHING_TO_JOIN[purpose])
    drv.upload_inventory(cluster)
    runner = drv.runner()
    if new_names:
        gateways.point_cluster_info(drv, cluster)
        refresh_facts(drv, cluster, new_names)
        try:
            runner.scale(new_names)
        except _PLAYBOOK_ERRORS as exc:
            _undo_join(drv, cluster, new_names)
            raise exceptions.with_advice(exc, advice)
    gateways.update(drv, cluster)


def refresh_facts(drv, cluster, limited):
    """Cached facts for every host a run limited to *limited* leaves
    out, gathered only where missing or about to expire
    (:func:`~mgmt_driver.remote.factcache.refresh_facts`)."""
    limited = set(limited) | drv.absent
    factcache.refresh_facts(
        drv.runner(), [n for n in cluster.names if n not in limited],
        drv.settings.fact_cache_margin)


def _undo_join(drv, cluster, names):
    """Best effort: *names* out of Kubernetes and the inventory."""
    try:
        absent = set(drv.not_in_kubernetes(cluster))
        joined = [n for n in names if n not in absent]
        drv.step('the join failed: taking %s out again',
                 ', '.join(names))
        if joined:
            remove_from_kubernetes(drv, cluster, joined)
        drv.forget_node_settings(names)
        drv.upload_inventory(cluster.remove(*names))
    except _PLAYBOOK_ERRORS + (exceptions.MgmtDriverOtherError,) as exc:
        LOG.warning('[%s] could not take %s out after the failed join '
                    '(the next operation removes what is left): %s',
                    drv.instance_id, ', '.join(names), exc)


def reconcile(drv, cluster, exclude=()):
    """Bring Kubernetes' node list in line with *cluster*'s VMs.

    Deletes the nodes whose VM is gone: what a failed scale-out that
    Tacker rolled back (it deletes the VMs and calls no hook) or a VM
    deleted outside Tacker leaves behind.  Their VMs are gone, so
    there is nothing to drain: the node object is deleted.
    Control-plane nodes of the recorded inventory are never removed
    this way.  One node listing serves both halves.

    :param exclude: control-plane nodes not to run kubectl on (being
        healed).
    :returns: the names of *cluster* Kubernetes does not know, as
        :meth:`~mgmt_driver.session.driver.ClusterDriver.not_in_kubernetes`
        (what a scale-out or heal still has to join).
    """
    masters = set(drv.recorded_masters())
    drv.forget_node_settings(
        set(drv.node_settings()) - set(cluster.names))
    client, listed = drv.kubectl_nodes(cluster, exclude=exclude)
    known = set(listed.names)
    for name in sorted(known - set(cluster.names) - masters):
        drv.step('%s has no VM any more: deleting its Kubernetes '
                 'node', name)
        client.delete_node(name)
    return [name for name in cluster.names if name not in known]


def remove_workers(drv, cluster, names, rejoin=False):
    """Take the workers *names* out of the LB, drain and remove them.

    Nodes that never joined (or are already gone) are only dropped
    from the inventory and the LB.

    :param rejoin: they join again later (a heal): their recorded
        labels and taints are kept for it.
    :returns: the cluster without them.
    """
    cluster = drv.in_recorded_order(cluster)
    remaining = cluster.remove(*names)
    drv.step('removing %s' % ', '.join(names) if names else
             'no node to remove')
    gateways.update(drv, remaining)
    if names:
        remove_from_kubernetes(drv, cluster, names)
    if not rejoin:
        drv.forget_node_settings(names)
    # Ansible's SSH masters to them close with this command.
    taken = set(names)
    drv.upload_inventory(remaining, gone=[
        node for node in cluster.k8s_nodes if node.name in taken])
    drv.forget_host_keys(cluster, names)
    return remaining


def remove_from_kubernetes(drv, cluster, names, exclude=()):
    """Drain the nodes *names* that can be drained and remove them
    all (``remove-node.yml``): the registered ones only.

    Which are removed undrained, as dead ones, is
    :func:`mgmt_driver.operations.gates.undrained`'s to say, given their
    readiness (:func:`_registered`),
    :attr:`~mgmt_driver.session.driver.ClusterDriver.known_dead` and whether
    SSH answers (:meth:`~mgmt_driver.session.driver.ClusterDriver.reachable`);
    each is named in a warning.

    :param exclude: control-plane nodes not to run kubectl on.
    """
    client = drv.kubectl_client(cluster, exclude=exclude)
    present, ready = _registered(drv, client, names)
    dead = gates.undrained(
        present, ready, drv.known_dead,
        lambda name: drv.reachable(cluster.get(name)))
    for name, why in dead.items():
        drv.warn(_UNDRAINED[why], name)
    drained = [n for n in present if n not in dead]
    for name in drained:
        drv.step('draining %s', name)
        client.evacuate(name, timeout=drv.settings.drain_timeout)
    runner = drv.runner()
    # The first run's vars ride in the inventory's transfer.
    drv.upload_inventory(cluster, extra=runner.removal_vars(
        drained or list(dead), reachable=bool(drained)))
    runner.remove_nodes(drained, reachable=True)
    runner.remove_nodes(list(dead), reachable=False)


def _registered(drv, client, names):
    """The registered ones of *names* and ``{name: Ready condition}``,
    from one read: the claim's node list when it holds them all and no
    playbook ran since
    (:meth:`~mgmt_driver.session.driver.ClusterDriver.node_read`), else
    one command per ``kubectl.NODES_PER_COMMAND``.

    When kubectl printed no valid node, each name is asked on its own
    (``node_exists``) and readiness is None, with a warning: it then
    decides nothing (:func:`mgmt_driver.operations.gates.undrained`).
    """
    if not names:
        return [], {}
    # The claim's node list read a moment ago (reconcile) serves, when
    # it holds them all: one command less.
    listed = drv.node_read()
    if listed is not None and listed.infos is not None and \
            set(names) <= set(listed.infos):
        nodes = {name: listed.infos[name] for name in names}
        return list(names), gates.readiness(nodes.values())
    try:
        nodes = client.nodes_named(names)
    except exceptions.RemoteDataInvalid as exc:
        LOG.warning('[%s] readiness of %s unknown: %s', drv.instance_id,
                    ', '.join(names), exc)
        return [n for n in names if client.node_exists(n)], None
    return [n for n in names if n in nodes], gates.readiness(nodes.values())
