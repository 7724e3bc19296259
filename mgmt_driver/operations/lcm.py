"""The LCM operations, each composed once.

Every adapter turns its inputs into normalised ones (a
:class:`~mgmt_driver.session.driver.ClusterDriver` context for the operation, a
:class:`~mgmt_driver.model.nodes.ClusterNodes`, node names, options) and calls
the function here; none composes an operation itself:

================  =================================  =====================
operation         Tacker v1 hook (``driver``) and    ``kubespray-mgmt run``
                  v2 script (``v2``)                 (``cli``, the demo)
================  =================================  =====================
instantiate       instantiate_end: :func:`instantiate`      instantiate
scale out         scale_end: :func:`scale_out`              scale-out
scale in          scale_start: :func:`scale_in`             scale-in
heal (VNFCs)      heal_start: :func:`heal_begin`;           heal --nodes
                  heal_end: :func:`heal_finish`
heal (whole VNF)  heal_start: :func:`heal_vnf_begin`;       heal
                  heal_end: :func:`heal_vnf_finish`
terminate         terminate_start: :func:`terminate_begin`; terminate
                  terminate_end: :func:`terminate_finish`
upgrade, relabel, modify_information_end: :func:`modify`    upgrade, relabel,
renew certs                                                 renew-certs
etcd snapshot     modify_information_end: :func:`modify`    snapshot
scale rollback    v2 scale_rollback_end: :func:`scale_out_rollback`
================  =================================  =====================

The command line runs the same two halves one after the other that
Tacker runs across its two hooks (heal, terminate); :data:`COMMANDS` is
that table by command name, with the one-line summary the command and
the demo print: each states its result once as an
:class:`mgmt_driver.common.outcomes.Outcome`, worded in the past tense after a
run and in the conditional after a dry run.  The steps themselves
(join, drain, remove, the load balancer) are the context's
(:mod:`mgmt_driver.session.driver`) and the gateways'
(:mod:`mgmt_driver.operations.gateways`).

Each function claims the workspace (:meth:`ClusterDriver.claim`) after
its checks that need no remote host, and before its first change.
"""

import os

from mgmt_driver.common import exceptions
from mgmt_driver.common import outcomes
from mgmt_driver.operations import controlplane
from mgmt_driver.operations import day2
from mgmt_driver.operations import etcdsnapshots
from mgmt_driver.operations import gateways as gateway_steps
from mgmt_driver.operations import membership
from mgmt_driver.operations import upgrade as upgrade_mod
from mgmt_driver.remote import plan
from mgmt_driver.state import records as records_mod
from mgmt_driver.state import registry

#: Appended to the error of a failed scale_end (what Tacker v1 does next:
#: README.rst, "Failures, retry and rollback").
SCALE_OUT_ADVICE = (
    'The new worker(s) were taken out of the cluster again.  Tacker does '
    'not run the driver on a retry of this scale-out (it would mark it '
    'COMPLETED with the workers not joined): roll it back, which deletes '
    'the new VMs, or fix the cause and let the next scale-out or heal '
    'join them.')


class KubeconfigVims:
    """Where runs without Tacker register a cluster: a kubeconfig file
    per cluster (:class:`~mgmt_driver.state.registry.KubeconfigRegistry`).

    Every ``vims`` argument below has this interface; the Tacker hooks
    pass one over Tacker's VIM registry.

    :param directory: the kubeconfig directory.
    :param dry_run: register and unregister nothing (names are still
        checked against the files); a
        :class:`~mgmt_driver.remote.plan.PlanPool` (or True) whose plan shows
        the kubeconfig deleted.
    """

    kind = records_mod.KUBECONFIG

    def __init__(self, directory, dry_run=False):
        self._files = registry.KubeconfigRegistry(directory)
        self._dry_run = dry_run

    @classmethod
    def for_context(cls, drv):
        """The kubeconfig directory of *drv*'s configuration; a dry run
        when *drv* plans."""
        return cls(os.path.expanduser(
            drv.conf.kubespray_mgmt.kubeconfig_dir),
            planning(drv) and drv.pool)

    def check_free(self, name, owned_id=None):
        """:raises VimNameInUse: another cluster has *name*."""
        self._files.check_free(name, owned_id)

    def register(self, access, owned_id=None):
        """:returns: the kubeconfig's path (None in a dry run)."""
        return None if self._dry_run else self._files.register(
            access, owned_id)

    def unregister(self, vim_id):
        if not self._dry_run:
            self._files.unregister(vim_id)
        elif isinstance(self._dry_run, plan.PlanPool):
            plan.note(self._dry_run, plan.THIS_HOST, 'delete the kubeconfig '
                      '%s' % vim_id, changes=True)


def planning(drv):
    """True when *drv* only records what it would do (``--dry-run``)."""
    return isinstance(drv.pool, plan.PlanPool)


def _owned(drv, vims):
    return drv.records.load(drv.instance_id).vim_id(vims.kind)


def register(drv, vims, access):
    """Register *access* (or update the VIM the instance owns) and
    record that the instance owns it.

    :returns: the VIM's id (None when *vims* registers nothing).
    """
    vim_id = vims.register(access, _owned(drv, vims))
    drv.records.set_vim(drv.instance_id, vims.kind, vim_id, access.name)
    return vim_id


# Instantiate, terminate.

def instantiate(drv, cluster, vim_name, vims):
    """Build the cluster (``cluster.yml``), front it with HAProxy,
    record the masters' SSH host keys
    (:meth:`~mgmt_driver.session.driver.ClusterDriver.record_host_keys`: status
    reads them all) and register it as *vim_name*.

    The name is checked first: one taken by a VIM this instance did not
    register is refused before any remote work, and so never deleted
    later.

    :returns: ``(ClusterAccess, VIM id)``.
    """
    vims.check_free(vim_name, _owned(drv, vims))
    drv.claim()
    cluster = drv.in_recorded_order(cluster)
    drv.step('instantiate: %d master(s), %d worker(s)',
             len(cluster.masters), len(cluster.workers))
    drv.upload_inventory(cluster)
    drv.runner().cluster(len(cluster.k8s_nodes))
    gateway_steps.prepare(drv, cluster)
    gateway_steps.update(drv, cluster)
    access = drv.cluster_access(cluster, vim_name)
    gateway_steps.place_kubeconfig(drv, cluster, access)
    if not planning(drv):  # a dry run records no key
        drv.record_host_keys(cluster.masters)
    return access, register(drv, vims, access)


def terminate_begin(drv, cluster=None):
    """While the VMs still exist: ``reset.yml`` when the request asks
    for it (``kubespray.reset_on_terminate``).

    :param cluster: the nodes a dry run plans to reset (it cannot read
        the inventory the real run resets).
    :returns: True if it reset the nodes.
    """
    if not drv.spec.kubespray.reset_on_terminate:
        return False
    drv.claim()
    if planning(drv) and cluster is not None:
        plan.note(drv.pool, drv.spec.ansible.ip_address, 'assumed: the '
                  'workspace\'s inventory lists the %d node(s) of the '
                  'topology; a real run reads it and resets every node it '
                  'lists' % len(cluster.k8s_nodes))
        drv.runner().reset(len(cluster.k8s_nodes))
        return True
    drv.reset()
    return True


def terminate_finish(drv, vims):
    """Delete the workspace, the VIM and the host keys the instance
    owns (:meth:`ClusterDriver.terminate`).  Not claimed: it stops
    whatever runs."""
    drv.terminate(vims.kind, vims.unregister)


def release(store, instance_id, pool, vims):
    """What terminate leaves when the parameters are unusable (the
    rollback of a refused instantiate): nothing remote to clean, only
    what the record says the instance owns (a VIM, host keys)."""
    return records_mod.release(store, instance_id, pool.forget_host,
                               vims.kind, vims.unregister)


def heal_vnf_begin(drv, vims):
    """The whole-VNF heal, before its VMs are re-created: what
    :func:`terminate_finish` does, but the etcd snapshots are kept
    beside the workspace (:func:`etcdsnapshots.set_aside`): they are
    what a lost cluster is restored from."""
    etcdsnapshots.set_aside(drv)
    terminate_finish(drv, vims)


def heal_vnf_finish(drv, cluster, vim_name, vims):
    """Build the cluster again on the new VMs (:func:`instantiate`),
    the etcd snapshots back in its workspace."""
    built = instantiate(drv, cluster, vim_name, vims)
    etcdsnapshots.bring_back(drv)
    return built


# Scale.

def scale_out(drv, cluster, workers=None, gateways=(), vim_name=None,
              advice=None):
    """Join new workers (and set up new gateways) of *cluster*.

    Kubernetes' node list is reconciled first
    (:meth:`membership.reconcile`).

    :param workers: the workers to join; None: every worker Kubernetes
        does not know.
    :param gateways: names of new gateways (a scale-out of the gateway
        aspect).
    :param vim_name: the cluster's VIM name (the new gateways'
        kubeconfig names it).
    :param advice: appended to the error of a failed join.
    :returns: the workers joined.
    """
    drv.claim()
    masters = {n.name for n in cluster.masters}
    missing = [name for name in membership.reconcile(drv, cluster)
               if name not in masters]
    if gateways:
        gateway_steps.add(drv, cluster, gateways, vim_name)
    new = [n for n in (missing if workers is None else workers)
           if n not in drv.absent]
    membership.scale_out(drv, cluster, new, advice=advice)
    return new


def scale_in(drv, cluster, workers, gateways=()):
    """Take workers (drained) and gateways out before their VMs go.

    With neither, the load balancer and the inventory are still
    rewritten (a scale-out rolled back before any VM joined).

    :returns: the cluster without them.
    """
    drv.claim()
    _operated_on(drv, workers)
    membership.reconcile(drv, cluster)
    if gateways:
        cluster = gateway_steps.remove(drv, cluster, gateways)
    if workers or not gateways:
        cluster = membership.remove_workers(drv, cluster, workers)
    return cluster


def scale_out_rollback(drv, cluster):
    """A rolled-back scale-out (its VMs are gone): what is left of them
    leaves Kubernetes, the inventory and HAProxy."""
    drv.claim()
    membership.reconcile(drv, cluster)
    membership.scale_out(drv, cluster, [], purpose='rollback')


def _operated_on(drv, names):
    """Workers the operation removes or heals are its own business, not
    absent: remove-node.yml and the join need them in the inventory."""
    mine = drv.absent.intersection(names)
    if mine:
        drv.warn('%s: removed or healed by this operation, not left out',
                 ', '.join(sorted(mine)))
        drv.absent = drv.absent - mine


# Heal of single nodes.

def heal_begin(drv, cluster, names, snapshot=True, lead=()):
    """Before the VMs called *names* are re-created: take the workers
    out (their labels and taints kept for their return) and the
    control-plane nodes out of etcd and the control plane.  A gateway
    needs nothing here: :func:`heal_finish` sets the new VM up.

    :param snapshot: take an etcd snapshot first when *names* include a
        control-plane node (a rolling replacement takes one before its
        first control-plane node only).
    :param lead: for :func:`controlplane.remove`: who comes first when
        the first control-plane node goes.
    :raises MgmtDriverOtherError: *names* are every control-plane node.
    """
    healed = set(names)
    masters = [n.name for n in cluster.masters if n.name in healed]
    workers = [n.name for n in cluster.workers if n.name in healed]
    # Before any remote work (kubectl would find no master to run on).
    controlplane.check_masters_left(cluster, masters)
    drv.claim()
    _operated_on(drv, names)
    if masters and snapshot:
        etcdsnapshots.before_risky(drv, cluster, 'heal', exclude=masters)
    if masters:
        # Before any change: etcd refuses a member removal it cannot
        # take (a member just joined or restarted), half-way otherwise.
        controlplane.wait_for_etcd(drv, cluster, masters)
    membership.reconcile(drv, cluster, exclude=masters)
    if workers:
        cluster = membership.remove_workers(drv, cluster, workers, rejoin=True)
    if masters:
        controlplane.remove(drv, cluster, masters, lead=lead)


def heal_finish(drv, cluster, names, vim_name, vims, new_settings=False):
    """After the VMs called *names* were re-created: set up the
    gateways among them (and register the cluster again), then join
    what Kubernetes lacks, control-plane nodes through ``cluster.yml``.

    :param new_settings: the request gives the healed nodes new labels
        or taints; otherwise they join with what they had.
    """
    healed = set(names)
    gateways = [n.name for n in cluster.gateways if n.name in healed]
    drv.claim()
    _operated_on(drv, names)
    if gateways:
        # First: the gateways' old host keys must go before any step
        # below connects to them; the other gateways keep serving.
        register(drv, vims, gateway_steps.rebuild(drv, cluster, vim_name,
                                                  gateways))
    missing = membership.reconcile(drv, cluster)
    if planning(drv):
        # Nothing to ask: the plan joins the healed nodes only.
        missing = [name for name in cluster.names if name in healed]
    if new_settings:
        drv.forget_node_settings(healed)
    masters = {n.name for n in cluster.masters}
    if masters.intersection(missing):
        controlplane.add(drv, cluster)
        if not planning(drv):
            # The new masters' host keys, for status (as instantiate).
            drv.record_host_keys(cluster.masters)
    membership.scale_out(drv, cluster,
                         [n for n in missing if n not in masters],
                         purpose='heal')
    etcdsnapshots.finished(drv, 'heal')


# Day 2.

def modify(drv, cluster, relabel=None, target=None, serial=None,
           field='kube_version', excused=(), renew=None, snapshot=None):
    """Take the etcd snapshot tagged *snapshot* (first, once per tag:
    :func:`mgmt_driver.operations.etcdsnapshots.requested`), relabel nodes,
    renew the control-plane certificates, then upgrade Kubernetes to *target*.

    :param relabel: ``(names, labels, taints)``
        (:func:`mgmt_driver.operations.day2.relabel`), or None.
    :param target: the version to upgrade to
        (:func:`mgmt_driver.operations.day2.upgrade`; a dry run plans every
        node), or None.
    :param excused: node names the upgrade's preflight accepts not Ready
        or cordoned (:func:`mgmt_driver.operations.day2.upgrade`).
    :param renew: renew the certificates
        (:func:`mgmt_driver.operations.day2.renew_certificates`): a request id
        (a PATCH: done once per id), True (always), or None.
    :returns: ``(names not relabelled, upgrade Plan or None)``.
    """
    drv.claim()
    if snapshot is not None:
        etcdsnapshots.requested(drv, cluster, snapshot)
    missing = day2.relabel(drv, cluster, *relabel) \
        if relabel is not None else []
    if renew is not None:
        # Before an upgrade: expired certificates would stop kubeadm.
        day2.renew_certificates(drv, cluster,
                                None if renew is True else renew,
                                planned=planning(drv))
    done = None
    if target is not None:
        done = day2.upgrade(drv, cluster, target, serial, field,
                            every_node=planning(drv), excused=excused)
    return missing, done


def upgrade(drv, cluster, target, serial=None, field='kube_version',
            excused=()):
    """:func:`modify` with an upgrade only.

    :returns: the :class:`mgmt_driver.operations.upgrade.Plan` that was run.
    """
    return modify(drv, cluster, target=target, serial=serial,
                  field=field, excused=excused)[1]


def renew_certificates(drv, cluster):
    """:func:`modify` with a renewal of the certificates only (every
    master, in the inventory's order)."""
    modify(drv, cluster, renew=True)


def relabel(drv, cluster, names, labels=(), taints=()):
    """:func:`modify` with a relabel only.

    :returns: the names that are not Kubernetes nodes of *cluster*.
    """
    return modify(drv, cluster, (names, labels, taints))[0]


def snapshot(drv, cluster, reason='manual'):
    """Take an etcd snapshot now and keep it in the workspace
    (:func:`mgmt_driver.operations.etcdsnapshots.take`).

    :returns: ``{name, path, directory, bytes, host, pruned}`` of the
        snapshot.
    """
    etcdsnapshots.check_reason(reason, 'reason')
    drv.claim()
    return etcdsnapshots.take(drv, cluster, reason)


# By command name (kubespray-mgmt run, the demo).

#: The commands that take node names (``--nodes``); the others refuse
#: any.
TAKES_NODES = frozenset(('scale-out', 'scale-in', 'heal', 'relabel'))


def _access_outcome(template, access, path, added=(), **values):
    """*template* then the cluster's name and address (and, after a run,
    its kubeconfig's path: a dry run writes none)."""
    return outcomes.Outcome(
        template + 'cluster {cluster} at {server}{kubeconfig}', added,
        cluster=access.name, server=access.server,
        kubeconfig='; kubeconfig: %s' % path if path else '', **values)


def _every_node(cluster):
    """Names of the nodes a record holds (``follow.describe``)."""
    return [n.name for n in cluster.k8s_nodes + cluster.gateways]


def _run_instantiate(drv, cluster, names, name, vims):
    access, path = instantiate(drv, cluster, name, vims)
    # A run says where the cluster is; a dry run what it would build.
    return _access_outcome('{building}', access, path, _every_node(cluster),
                           building=outcomes.Tense('', 'would build '))


def _run_scale_out(drv, cluster, names, name, vims):
    workers = [n for n in names if cluster.get(n) is not None]
    gateways = [n for n in names if cluster.gateway(n) is not None]
    new = scale_out(drv, cluster, workers if names else None, gateways,
                    name)
    # A dry run cannot ask Kubernetes which workers it lacks: it plans
    # every one, and says so.
    which = '' if names or not planning(drv) else (
        ' Kubernetes lacks among %s (a dry run cannot ask it: the plan '
        'joins every one)' % ', '.join(new))
    return outcomes.Outcome(
        '{add} {count} worker(s){names}{which}{gateways}', new + gateways,
        count=len(new), which=which,
        names=': ' + ', '.join(new) if new and not which else '',
        gateways=', %d gateway(s): %s' % (len(gateways), ', '.join(gateways))
        if gateways else '')


def _run_scale_in(drv, cluster, names, name, vims):
    gateways = [n for n in names if cluster.gateway(n) is not None]
    scale_in(drv, cluster, [n for n in names if n not in gateways],
             gateways)
    return outcomes.Outcome('{remove} {names}', removed=names,
                            names=', '.join(names))


#: ``run heal --phase``: the heal's first half alone (the nodes taken
#: out, their VMs to be re-created by the operator: a new image), or its
#: second half alone (the re-created VMs join again under their names).
PHASE_OUT, PHASE_IN = 'out', 'in'


def _run_heal(drv, cluster, names, name, vims, phase=None):
    if not names:
        heal_vnf_begin(drv, vims)
        return _access_outcome('{heal} the whole VNF: ', *heal_vnf_finish(
            drv, cluster, name, vims))
    if phase == PHASE_OUT:
        heal_begin(drv, cluster, names)
        return outcomes.Outcome(
            '{take} {names} out of the cluster; re-create their VMs, then '
            'run heal --phase in', removed=names, names=', '.join(names),
            take=outcomes.Tense('took', 'would take'))
    if phase is None:
        heal_begin(drv, cluster, names)
    heal_finish(drv, cluster, names, name, vims)
    return outcomes.Outcome('{heal} {names}', names=', '.join(names))


def _run_terminate(drv, cluster, names, name, vims):
    terminate_begin(drv, cluster)
    terminate_finish(drv, vims)
    return outcomes.Outcome('{terminate} {name}',
                            removed=_every_node(cluster), name=name)


def _run_upgrade(drv, cluster, names, name, vims, kube_version=None,
                 serial=None, excused=()):
    done = upgrade(drv, cluster, kube_version, serial, '--kube-version',
                   excused)
    version = upgrade_mod.version_text(done.target)
    count = len(done.masters) + len(done.workers)
    if not count:  # a dry run plans every node
        return outcomes.Outcome(
            '{name} is already at {version}: no node to upgrade',
            name=name, version=version)
    return outcomes.Outcome(
        '{upgrade} {name} to {version}: {count} node(s){how}', name=name,
        version=version, count=count, how=outcomes.Tense(
            ' upgraded', ', every one planned (a dry run cannot ask their '
            'versions; a real run skips those already there)'))


def _run_relabel(drv, cluster, names, name, vims, labels=(), taints=()):
    missing = relabel(drv, cluster, names, labels, taints)
    same = set(getattr(missing, 'unchanged', ()))
    gone = set(missing)
    done = [n for n in names if n not in gone and n not in same]
    same = [n for n in names if n in same]
    missing_text = '; not Kubernetes nodes: ' + ', '.join(missing) \
        if missing else ''
    if same and not done:
        return outcomes.Outcome(
            'nothing changed: {same} had every label and taint '
            'asked{missing}', same=', '.join(same), missing=missing_text)
    return outcomes.Outcome(
        '{relabel} {names}{same}{missing}',
        names=', '.join(done) or 'no node',
        same='; nothing changed on %s (every label and taint asked was '
        'there)' % ', '.join(same) if same else '', missing=missing_text)


def _run_renew_certs(drv, cluster, names, name, vims):
    renew_certificates(drv, cluster)
    return outcomes.Outcome(
        '{renew} the control-plane certificates of {name}, one master at a '
        'time; the API {answer} through the load balancer', name=name)


def _run_snapshot(drv, cluster, names, name, vims):
    taken = snapshot(drv, cluster)
    # A dry run knows the directory only: the name is the time it is taken.
    kept = outcomes.Outcome('{snapshot} in {where}', snapshot=outcomes.Tense(
        'etcd snapshot %s kept' % taken['name'],
        'would take a new etcd snapshot and keep it'), where=outcomes.Tense(
        taken['path'], taken['directory']))
    if not taken['pruned']:
        return kept
    return kept.extended('; {pruned}', pruned=outcomes.Tense(
        'deleted the older ' + ', '.join(taken['pruned']),
        'would delete the older ' + ', '.join(taken['pruned'])))


def log_name(command):
    """The operation name a run of *command* (``scale-out``) gives its
    playbook logs (``...-scale_out-scale.log``), as ``status`` lists
    them; one spelling for ``run``, the demo and the kept site."""
    return command.replace('-', '_')


def _by_name(command, function):
    def run(drv, cluster, names, name, vims=None, absent=(), **options):
        """Run the operation; :returns: its one-line summary, a
        :class:`mgmt_driver.common.outcomes.Summary` in the past tense, or in
        the conditional for a dry run.

        :param absent: workers to leave out of every playbook run
            (:meth:`ClusterDriver.declare_absent`); the summary names
            them.
        :raises ParamsInvalid: *names* for one that takes none, or
            *absent* names that are not workers.
        """
        if names and command not in TAKES_NODES:
            raise exceptions.ParamsInvalid(
                ['nodes: %s takes none (given: %s)' % (
                    command, ', '.join(names))])
        drv.declare_absent(cluster, absent, '--absent')
        outcome = function(drv, cluster, list(names), name,
                           vims or KubeconfigVims.for_context(drv),
                           **options)
        return skipped(drv, outcome).words(planning(drv))
    return run


def skipped(drv, outcome):
    """*outcome* with what it says of the workers left out: ``'; skipped
    (declared absent): NAMES'`` (a dry run: "would skip")."""
    if not drv.absent:
        return outcome
    return outcome.extended('; {skip} (declared absent): {absent_names}',
                            absent_names=', '.join(sorted(drv.absent)))


#: ``kubespray-mgmt run`` OPERATION -> ``(drv, cluster, names, vim name,
#: vims=None, **options)`` -> summary line (an
#: :class:`mgmt_driver.common.outcomes.Summary`); *vims* defaults to the
#: kubeconfig files of *drv*'s configuration (:class:`KubeconfigVims`).
COMMANDS = {name: _by_name(name, function) for name, function in (
    ('instantiate', _run_instantiate), ('scale-out', _run_scale_out),
    ('scale-in', _run_scale_in), ('heal', _run_heal),
    ('terminate', _run_terminate), ('upgrade', _run_upgrade),
    ('relabel', _run_relabel), ('renew-certs', _run_renew_certs),
    ('snapshot', _run_snapshot))}
