"""Day-2 steps on a running cluster: relabel nodes, upgrade Kubernetes.

What :mod:`mgmt_driver.labels` and :mod:`mgmt_driver.upgrade` decide
(both pure), run over the operation's context (a
:class:`mgmt_driver.driver.ClusterDriver`, called *drv*); the operations
(:mod:`mgmt_driver.operations`: modify, relabel, upgrade) call them
after claiming the workspace.
"""

from mgmt_driver import etcdsnapshots
from mgmt_driver import gateways
from mgmt_driver import kubespray
from mgmt_driver import labels as labels_mod
from mgmt_driver import upgrade as upgrade_mod


def relabel(drv, cluster, names, labels=(), taints=()):
    """Change the labels and taints of existing nodes (day 2).

    The record (:mod:`mgmt_driver.labels`) and the inventory change
    first, so kubespray's later runs and a node that joins again (a
    heal) keep the new values; then ``kubectl label`` and ``kubectl
    taint`` with what each node lacks (each value an argv entry of
    its own; a taint removal only for a taint the node has), one
    command for all the nodes that need the same change.  Running it
    again converges, and costs one ``kubectl get`` once done.

    :param names: node names of *cluster*.
    :param labels: ``(key, value)`` pairs, as
        :func:`mgmt_driver.params.parse_label_list` returns them
        (a None value removes the label).
    :param taints: strings, as
        :func:`mgmt_driver.params.parse_taint_list` returns them
        (``key=value:Effect``, or a removal ending in ``-``).
    :returns: the names of the nodes that are not both in *cluster*
        and in Kubernetes (nothing was changed on them).
    """
    client = drv.kubectl_client(cluster)
    recorded = drv.node_settings()
    settings = dict(recorded)
    names = list(dict.fromkeys(names))
    known = set(cluster.names)
    present = client.nodes_named([n for n in names if n in known])
    missing = [name for name in names if name not in present]
    for name in missing:
        drv.warn('%s is not a Kubernetes node of this cluster: '
                 'nothing set', name)
    for name in present:
        settings[name] = labels_mod.apply_change(
            settings.get(name) or drv.spec.node_settings(
                cluster.get(name)), labels, taints)
    if settings != recorded:
        drv.set_node_settings(settings)
        drv.upload_inventory(cluster)
    # Nodes that need the same change share one command.
    label_groups, taint_groups = {}, {}
    for name, info in present.items():
        label_groups.setdefault(tuple(labels_mod.labels_to_send(
            labels, info.labels)), []).append(name)
        taint_groups.setdefault(tuple(labels_mod.taints_to_send(
            taints, info.taints)), []).append(name)
    drv.step('relabelling %s', ', '.join(present) or 'no node')
    for change, group in label_groups.items():
        if change:
            client.label(group, change)
    for change, group in taint_groups.items():
        if change:
            client.taint(group, change)
    return missing


def upgrade(drv, cluster, target, serial=None, field='kube_version',
            every_node=False):
    """Upgrade Kubernetes to *target*, node by node.

    The version is checked against the nodes' kubelet versions and
    the checkout first (:func:`mgmt_driver.upgrade.plan`); a refused
    one changes nothing.  Then it is recorded in the workspace, so
    every later operation renders it, and ``upgrade-cluster.yml``
    runs once per control-plane node, in the inventory's order, with
    that node out of HAProxy's API backends meanwhile (a lone
    control-plane node stays: there is no other), then once over the
    workers, in batches of *serial*.  Nodes already at *target* are
    skipped, so the same request run again after a failure
    completes the upgrade.

    :param target: the version, ``'1.34.3'`` or ``'v1.34.3'``.
    :param serial: workers upgraded at once (``3`` or ``'25%'``), or
        None for kubespray's default.
    :param field: where *target* came from, for messages.
    :param every_node: plan every node without asking Kubernetes for
        their versions (a dry run: there is no cluster to ask).
    :returns: the :class:`mgmt_driver.upgrade.Plan` that was run.
    :raises ParamsInvalid: *target* or *serial* is refused.
    """
    wanted = upgrade_mod.parse_version(target, field)
    cluster = drv.in_recorded_order(cluster)
    nodes = None if every_node else drv.kubectl_client(cluster).nodes()
    before = _cordoned_before(drv, wanted, nodes)
    todo = _plan(drv, cluster, wanted, field, nodes, before)
    if not todo.done:
        etcdsnapshots.before_risky(drv, cluster, 'upgrade')
    drv.step('upgrade to %s: control plane %s; workers %s',
             upgrade_mod.version_text(wanted),
              ', '.join(todo.masters) or 'done',
              ', '.join(todo.workers) or 'done')
    # Dry run (no nodes): nothing is known of the cordons to record.
    drv.record_kube_version(wanted, {} if nodes is None else {
        upgrade_mod.CORDONS_FILE: upgrade_mod.render_cordons(
            wanted, before)})
    if nodes is not None:
        _uncordon_left(drv, cluster, upgrade_mod.left_cordoned(
            nodes, todo, before))
    drv.upload_inventory(cluster)
    if not todo.done:
        drv.refresh_facts(cluster, ())
    for name in todo.masters:
        _upgrade_master(drv, cluster, name)
    drv.runner().upgrade(list(todo.workers), serial)
    gateways.update(drv, cluster)
    return todo


def _plan(drv, cluster, wanted, field, nodes, before):
    runner = drv.runner()
    supported = upgrade_mod.parse_supported(
        kubespray.supported_kube_versions(runner.conn, runner.root))
    if supported is None:
        drv.warn('the kubespray checkout lists no kubelet_checksums: '
                 'kubespray itself checks the version')
    return upgrade_mod.plan(
        wanted, nodes,
        [n.name for n in cluster.masters],
        [n.name for n in cluster.workers], supported, field, before)


def _cordoned_before(drv, wanted, nodes):
    """The nodes that were cordoned when the upgrade to *wanted*
    started: recorded by its first run, kept by the runs after."""
    if nodes is None:
        return frozenset()
    recorded = drv.read_record(
        upgrade_mod.CORDONS_FILE, upgrade_mod.parse_cordons)
    if recorded is not None and recorded[0] == wanted:
        return recorded[1]
    return frozenset(n.name for n in nodes if not n.schedulable)


def _uncordon_left(drv, cluster, names):
    """Make schedulable the nodes an earlier, failed run of this
    upgrade left cordoned, so that kubespray drains them and
    uncordons them afterwards (it does neither for a node it finds
    cordoned)."""
    if not names:
        return
    drv.step('uncordoning %s, left cordoned by an earlier run of '
             'this upgrade, so that kubespray drains and uncordons '
              'them', ', '.join(names))
    client = drv.kubectl_client(cluster)
    for name in names:
        client.uncordon(name)


def _upgrade_master(drv, cluster, name):
    """One control-plane node, out of the API backends meanwhile.

    After a failure it stays out until the upgrade is run again (or
    any operation rewrites the configuration).
    """
    if len(cluster.masters) > 1:
        gateways.update(drv, cluster.remove(name))
    else:
        drv.warn('%s is the only control-plane node: the API is down '
                 'while it restarts', name)
    drv.step('upgrading control-plane node %s', name)
    drv.runner().upgrade([name])
    gateways.update(drv, cluster)
