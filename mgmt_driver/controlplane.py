"""Control-plane nodes out and in (a heal): the steps over the
operation's context (a :class:`mgmt_driver.driver.ClusterDriver`, called
*drv*), which :func:`mgmt_driver.operations.heal_begin` and
:func:`~mgmt_driver.operations.heal_finish` compose.

kubespray's node-operations guide is the reference: its
``remove-node.yml`` delegates to the first host of
``kube_control_plane`` and ``etcd``, and a new control-plane node joins
through ``cluster.yml``, never ``scale.yml``.
"""

from mgmt_driver import exceptions
from mgmt_driver import gateways


def check_masters_left(cluster, names):
    """Refuse to take out every control-plane node of *cluster*.

    :param names: the control-plane nodes to remove (a heal).
    :raises EveryMasterHealed: *names* are all of them.
    """
    if names and len(set(names)) >= len(cluster.masters):
        raise exceptions.EveryMasterHealed()


def remove(drv, cluster, names):
    """Remove control-plane nodes (for a heal), first one included.

    kubespray cannot remove the first control-plane node (its
    remove-node.yml delegates to the first host of
    ``kube_control_plane`` and of ``etcd``), so when it is among
    *names* the healthy masters are moved to the front first.  With
    every node to remove still answering, ``cluster.yml`` is re-run
    over the control plane in the new order, as kubespray's
    node-operations guide says; a dead one would make that run fail
    (Ansible cannot reach it), so then the new order goes straight
    to the ungraceful removal, which only needs the new first host,
    and heal_end's ``cluster.yml`` applies it to every node.  At the
    end ``kube-public/cluster-info`` names a live endpoint
    (:meth:`point_cluster_info`).

    :returns: the cluster without them.
    """
    cluster = drv.in_recorded_order(cluster)
    chosen = set(names)
    names = [n.name for n in cluster.masters if n.name in chosen]
    check_masters_left(cluster, names)
    if cluster.masters[0].name in names:
        healthy = [n for n in cluster.masters if n.name not in chosen]
        sick = [n for n in cluster.masters if n.name in chosen]
        cluster = cluster.with_masters(healthy + sick)
        drv.step('moving %s to the front of the control plane',
                 healthy[0].name)
        drv.upload_inventory(cluster)
        dead = [n.name for n in sick if not drv.reachable(n)]
        if dead:
            drv.step('not re-running cluster.yml over %s (unreachable)',
                     ', '.join(dead))
        else:
            drv.refresh_facts(cluster,
                              [n.name for n in cluster.masters])
            drv.runner().cluster(len(cluster.k8s_nodes),
                                 limit=['etcd', 'kube_control_plane'])
    remaining = cluster.remove(*names)
    gateways.update(drv, remaining)
    drv.remove_from_kubernetes(cluster, names, exclude=names)
    drv.upload_inventory(remaining)
    drv.forget_host_keys(cluster, names)
    drv.point_cluster_info(remaining)
    return remaining


def add(drv, cluster):
    """Re-run ``cluster.yml`` so new control-plane nodes join last.

    cluster-info is checked first: the joins discover the cluster
    through it.  With an external load balancer the run is limited
    to ``etcd,kube_control_plane``, as kubespray's node-operations
    guide does for control-plane and etcd nodes: the workers reach
    the API through the load balancer, so nothing on them changes,
    and only their cached facts are needed (refreshed where stale),
    so a worker that is down does not stop the heal.  Without one,
    every node's localhost proxy lists the control-plane addresses:
    the run covers every host.
    """
    cluster = drv.in_recorded_order(cluster)
    drv.upload_inventory(cluster)
    drv.point_cluster_info(cluster)
    runner = drv.runner()
    if cluster.external_lb is None:
        runner.cluster(len(cluster.k8s_nodes))
    else:
        drv.refresh_facts(cluster, [n.name for n in cluster.masters])
        runner.cluster(len(cluster.masters),
                       limit=['etcd', 'kube_control_plane'])
    gateways.update(drv, cluster)
