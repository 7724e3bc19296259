"""Control-plane nodes out and in (a heal): the steps over the
operation's context (a :class:`mgmt_driver.session.driver.ClusterDriver`,
called *drv*), which :func:`mgmt_driver.operations.lcm.heal_begin` and
:func:`~mgmt_driver.operations.lcm.heal_finish` compose.

kubespray's node-operations guide is the reference: its
``remove-node.yml`` delegates to the first host of
``kube_control_plane`` and ``etcd``, and a new control-plane node joins
through ``cluster.yml``, never ``scale.yml``.
"""

from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.operations import etcdwait
from mgmt_driver.operations import gateways
from mgmt_driver.operations import membership
from mgmt_driver.remote import kubectl
from mgmt_driver.remote import plan


def check_masters_left(cluster, names):
    """Refuse to take out every control-plane node of *cluster*.

    :param names: the control-plane nodes to remove (a heal).
    :raises EveryMasterHealed: *names* are all of them.
    """
    if names and len(set(names)) >= len(cluster.masters):
        raise exceptions.EveryMasterHealed()


def wait_for_etcd(drv, cluster, names, changed='Nothing was changed.'):
    """Wait until etcd would accept removing the members of the
    control-plane nodes *names* (:func:`mgmt_driver.operations.etcdwait.wait`,
    bounded by ``etcd_member_wait``), asking on the first other master
    whose etcdctl answers.

    :param changed: what the refusal says was changed so far.
    :raises EtcdNotReady: etcd did not get ready in time.
    """
    chosen = set(names)
    leaving = {n.name: n.cluster_address for n in cluster.masters
               if n.name in chosen}
    group = drv.conf.kubespray_mgmt
    if not leaving:
        return
    if isinstance(drv.pool, plan.PlanPool):
        drv.step('(dry run) a real run waits here, up to %d s (%s), until '
                 'etcd would accept removing the member(s) of %s',
                 group.etcd_member_wait, etcdwait.OPTION,
                 ', '.join(sorted(leaving)))
        return
    staying = [n for n in cluster.masters if n.name not in chosen]
    waited = etcdwait.wait(
        lambda: _ask_etcd(drv, staying), leaving, group.etcd_member_wait,
        kubectl.KubectlSettings.from_conf(drv.conf), 'heal',
        progress=drv.step, changed=changed, sleep=drv.sleep,
        clock=drv.clock)
    drv.step('etcd is ready for removing the member(s) of %s (after %.0f s)',
             ', '.join(sorted(leaving)), waited)


def _ask_etcd(drv, masters):
    """``(members, health)`` from the first of *masters* that answers.

    :raises MgmtDriverOtherError: none did, naming each and why.
    """
    group = drv.conf.kubespray_mgmt
    sudo = ['sudo', '-n'] if kconf.use_sudo(
        group.kubectl_sudo, drv.spec.master.login.username) else []
    failures = []
    for node in masters:
        try:
            return etcdwait.read(drv.connection(node),
                                 sudo + [group.etcdctl_command],
                                 group.kubectl_timeout)
        except etcdwait.READ_ERRORS as exc:
            failures.append('%s: %s' % (node.name,
                                        exceptions.plain_message(exc)))
    raise exceptions.MgmtDriverOtherError(
        error_message='etcd could not be asked (%s)' % (
            '; '.join(failures) or 'no control-plane node stays'))


def remove(drv, cluster, names, lead=()):
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
    (:func:`mgmt_driver.operations.gateways.point_cluster_info`).

    :param lead: names of control-plane nodes to put first, in this
        order, when the first one is removed (the others keep theirs): a
        rolling replacement leads with nodes it will not take out soon,
        so that fewer of its steps find their node first.
    :returns: the cluster without them.
    """
    cluster = drv.in_recorded_order(cluster)
    chosen = set(names)
    names = [n.name for n in cluster.masters if n.name in chosen]
    check_masters_left(cluster, names)
    if cluster.masters[0].name in names:
        rank = {name: i for i, name in enumerate(lead)}
        healthy = sorted(
            (n for n in cluster.masters if n.name not in chosen),
            key=lambda n: rank.get(n.name, len(rank)))
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
            membership.refresh_facts(drv, cluster,
                                     [n.name for n in cluster.masters])
            drv.runner().cluster(len(cluster.k8s_nodes),
                                 limit=['etcd', 'kube_control_plane'])
            # The new order rewrites etcd's settings: members restart.
            wait_for_etcd(drv, cluster, names, changed=(
                'cluster.yml re-ran over the control plane with %s first; '
                'nothing was removed.' % healthy[0].name))
    remaining = cluster.remove(*names)
    gateways.update(drv, remaining)
    membership.remove_from_kubernetes(drv, cluster, names, exclude=names)
    # Ansible's SSH masters to them close with this command: the VM
    # re-created at the same address is not reached through them.
    drv.upload_inventory(remaining, gone=[
        n for n in cluster.masters if n.name in chosen])
    drv.forget_host_keys(cluster, names)
    gateways.point_cluster_info(drv, remaining)
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
    gateways.point_cluster_info(drv, cluster)
    runner = drv.runner()
    if cluster.external_lb is None:
        runner.cluster(len(cluster.k8s_nodes))
    else:
        membership.refresh_facts(drv, cluster,
                                 [n.name for n in cluster.masters])
        runner.cluster(len(cluster.masters),
                       limit=['etcd', 'kube_control_plane'])
    gateways.update(drv, cluster)
