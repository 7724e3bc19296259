"""Day-2 steps on a running cluster: relabel nodes, upgrade Kubernetes,
renew the control-plane certificates.

What :mod:`mgmt_driver.model.labels` and :mod:`mgmt_driver.operations.upgrade`
decide (both pure), run over the operation's context (a
:class:`mgmt_driver.session.driver.ClusterDriver`, called *drv*); the
operations (:mod:`mgmt_driver.operations.lcm`: modify, relabel, upgrade) call
them after claiming the workspace.
"""

import dataclasses
import time

from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.model import labels as labels_mod
from mgmt_driver.operations import certificates
from mgmt_driver.operations import etcdsnapshots
from mgmt_driver.operations import etcdwait
from mgmt_driver.operations import gates
from mgmt_driver.operations import gateways
from mgmt_driver.operations import membership
from mgmt_driver.operations import upgrade as upgrade_mod
from mgmt_driver.remote import kubectl
from mgmt_driver.remote import kubespray
from mgmt_driver.remote import loadbalancer
from mgmt_driver.remote import plan
from mgmt_driver.remote import programs
from mgmt_driver.state import registry

# What reading etcd's state may raise (reported as a problem).
_READ_ERRORS = etcdwait.READ_ERRORS


def relabel(drv, cluster, names, labels=(), taints=()):
    """Change the labels and taints of existing nodes (day 2).

    The record (:mod:`mgmt_driver.model.labels`) and the inventory change
    first, so kubespray's later runs and a node that joins again (a
    heal) keep the new values; then ``kubectl label`` and ``kubectl
    taint`` with what each node lacks (each value an argv entry of
    its own; a taint removal only for a taint the node has), one
    command for all the nodes that need the same change.  Running it
    again converges, and costs one ``kubectl get`` once done.

    :param names: node names of *cluster*.
    :param labels: ``(key, value)`` pairs, as
        :func:`mgmt_driver.model.labels.parse_label_list` returns them
        (a None value removes the label).
    :param taints: strings, as
        :func:`mgmt_driver.model.labels.parse_taint_list` returns them
        (``key=value:Effect``, or a removal ending in ``-``).
    :returns: the names of the nodes that are not both in *cluster*
        and in Kubernetes (nothing was changed on them), a
        :class:`NotRelabelled`.
    """
    # Before anything is read or changed (the identity labels).
    labels_mod.check_relabel(labels, 'relabel labels')
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
    changed = {n for groups in (label_groups, taint_groups)
               for change, group in groups.items() if change for n in group}
    return NotRelabelled(missing, [n for n in present if n not in changed])


class NotRelabelled(list):
    """The names :func:`relabel` changed nothing on because they are not
    Kubernetes nodes of the cluster (the list), and, apart, those that
    already had every label and taint asked (:attr:`unchanged`).

    :param missing: the nodes that are not Kubernetes nodes.
    :param unchanged: the nodes that needed no change.
    """

    def __init__(self, missing, unchanged=()):
        super().__init__(missing)
        self.unchanged = list(unchanged)


def upgrade(drv, cluster, target, serial=None, field='kube_version',
            every_node=False, excused=()):
    """Upgrade Kubernetes to *target*, node by node, between gates.

    The version is checked against the nodes' kubelet versions and
    the checkout first (:func:`mgmt_driver.operations.upgrade.plan`), then the
    cluster (:func:`preflight`): every node Ready and schedulable
    unless *excused*, etcd healthy with all its members, and no
    PodDisruptionBudget that would stop the drain of a node to
    upgrade; a refusal changes nothing and names every problem.  Then
    the version is recorded in the workspace, so every later operation
    renders it, and ``upgrade-cluster.yml`` runs once per control-plane
    node, in the inventory's order, with that node out of HAProxy's API
    backends meanwhile (a lone control-plane node stays: there is no
    other), then once per batch of *serial* workers (kubespray's
    node-based upgrade: control plane first, then the workers in any
    order, each run ``--limit``-ed).  After each run, a gate
    (:func:`gate`): the nodes of that run Ready at *target*, the API
    ready through the load balancer, etcd healthy; the upgrade stops
    there otherwise.  Nodes already at *target* are skipped, so the
    same request run again after a failure completes the upgrade.
    Workers declared absent (:attr:`ClusterDriver.absent`) are left
    out, at their version.

    :param target: the version, ``'1.34.3'`` or ``'v1.34.3'``.
    :param serial: workers upgraded at once (``3`` or ``'25%'``), or
        None for kubespray's default (20 %).
    :param field: where *target* came from, for messages.
    :param every_node: plan every node without asking Kubernetes for
        their versions (a dry run: there is no cluster to ask).
    :param excused: node names the preflight accepts not Ready or
        cordoned (kubespray upgrades them where they stand, undrained).
    :returns: the :class:`mgmt_driver.operations.upgrade.Plan` that was run.
    :raises ParamsInvalid: *target* or *serial* is refused.
    :raises UpgradeGateClosed: the preflight or a gate found problems.
    """
    wanted = upgrade_mod.parse_version(target, field)
    cluster = drv.in_recorded_order(cluster)
    state = _upgrade_state(drv, cluster, wanted, field, every_node)
    _check_before_upgrade(drv, cluster, state, excused, every_node)
    _record_upgrade(drv, cluster, wanted, state)
    checked = None if every_node else set(excused).union(state.before)
    _upgrade_nodes(drv, cluster, wanted, state.todo, serial, checked)
    gateways.update(drv, cluster)
    etcdsnapshots.finished(drv, 'upgrade')
    return state.todo


@dataclasses.dataclass(frozen=True)
class _UpgradeState:
    """What an upgrade read before changing anything."""

    #: The kubectl client, or None in a dry run (no cluster to ask).
    client: object
    #: ``kubectl.NodeInfo`` of the cluster, or None in a dry run.
    nodes: object
    #: The cordons an earlier run of this upgrade recorded, or None.
    recorded: object
    #: The nodes cordoned before the upgrade's first run.
    before: frozenset
    #: The :class:`mgmt_driver.operations.upgrade.Plan`.
    todo: object
    #: Nodes an earlier run cordoned and left so.
    left: list


def _upgrade_state(drv, cluster, wanted, field, every_node):
    client = None if every_node else drv.kubectl_client(cluster)
    nodes = None if client is None else client.nodes()
    recorded = _recorded_cordons(drv, wanted, nodes)
    before = recorded if recorded is not None else frozenset(
        n.name for n in nodes or () if not n.schedulable)
    todo = _without_absent(drv, _plan(drv, cluster, wanted, field, nodes,
                                      before))
    left = [] if nodes is None else upgrade_mod.left_cordoned(
        nodes, todo, before)
    return _UpgradeState(client, nodes, recorded, before, todo, left)


def _check_before_upgrade(drv, cluster, state, excused, every_node):
    """The preflight (a dry run says what it would check), then an etcd
    snapshot when there is work to do."""
    if state.nodes is not None and not state.todo.done:
        preflight(drv, cluster, state.client, state.nodes, state.todo,
                  set(excused).union(state.recorded or (), state.left),
                  uncordoned=state.left)
    elif every_node:
        _planned_check(drv, cluster, 'the preflight, before any change: '
                       'every node Ready and schedulable (but those '
                       'excused), etcd healthy with all its members, no '
                       'PodDisruptionBudget that would stop a drain; a '
                       'problem refuses the upgrade')
    if not state.todo.done:
        etcdsnapshots.before_risky(drv, cluster, 'upgrade')


def _record_upgrade(drv, cluster, wanted, state):
    """Record the target and the cordons before the first run, make
    schedulable what an earlier run left cordoned, upload the
    inventory."""
    todo = state.todo
    drv.step('upgrade to %s: control plane %s; workers %s',
             upgrade_mod.version_text(wanted),
             ', '.join(todo.masters) or 'done',
             ', '.join(todo.workers) or 'done')
    # Dry run (no nodes): nothing is known of the cordons to record.
    drv.record_kube_version(wanted, {} if state.nodes is None else {
        upgrade_mod.CORDONS_FILE: upgrade_mod.render_cordons(
            wanted, state.before)})
    _uncordon_left(drv, cluster, state.left)
    drv.upload_inventory(cluster)
    if not todo.done:
        membership.refresh_facts(drv, cluster, ())


def _upgrade_nodes(drv, cluster, wanted, todo, serial, checked):
    """``upgrade-cluster.yml`` per control-plane node, then per batch
    of *serial* workers, each run followed by its gate."""
    for name in todo.masters:
        _upgrade_master(drv, cluster, name)
        gate(drv, cluster, [name], wanted, checked)
    for batch in gates.worker_batches(todo.workers, serial):
        drv.step('upgrading workers %s', ', '.join(batch))
        drv.runner().upgrade(batch, len(batch))
        gate(drv, cluster, batch, wanted, checked)


def _without_absent(drv, todo):
    absent = drv.absent
    if not absent:
        return todo
    drv.warn('left out of the upgrade, declared absent: %s (they stay at '
             'their version until healed or upgraded again)',
             ', '.join(sorted(absent)))
    return upgrade_mod.Plan(todo.target, todo.masters, tuple(
        n for n in todo.workers if n not in absent))


def preflight(drv, cluster, client, nodes, todo, excused, uncordoned=()):
    """Refuse an upgrade the cluster is not fit for, before any change.

    The budgets are checked for every node kubespray will drain
    (:func:`mgmt_driver.operations.gates.upgrade_drains`): an excused node that
    is Ready and schedulable is drained too.

    :param nodes: ``kubectl.NodeInfo`` of the cluster.
    :param todo: the :class:`mgmt_driver.operations.upgrade.Plan`.
    :param excused: names accepted not Ready or cordoned.
    :param uncordoned: names made schedulable before the runs
        (:func:`_uncordon_left`).
    :raises UpgradeGateClosed: every problem found, at once.
    """
    present = [n for n in cluster.names if n not in drv.absent]
    unfit = gates.node_problems(nodes, present, excused)
    unhealthy = gates.etcd_problems([n.name for n in cluster.masters],
                                    *etcd_state(drv, client))
    problems = unfit + unhealthy
    drained = gates.upgrade_drains(nodes, todo.masters + todo.workers,
                                   uncordoned)
    blockers = gates.drain_blockers(client.pods(), client.budgets(),
                                    drained)
    lines = gates.blocker_lines(blockers, drained)
    stops, why = gates.pdb_policy(drv.rendered_spec().kubespray.extra_vars)
    if lines and not stops:
        drv.warn('%s; %s', '; '.join(lines), why)
    elif lines:
        problems += lines
    if problems:
        gates.refuse('preflight (nothing was changed)', problems,
                     gates.preflight_advice(bool(unfit), bool(unhealthy),
                                            bool(lines and stops)))
    drv.step('upgrade preflight passed: %d node(s) Ready, etcd healthy, '
             'no drain blocked', len(present))


def gate(drv, cluster, names, wanted, excused):
    """After one upgrade run: its nodes Ready at *wanted*, the API ready
    through the load balancer, etcd healthy; else stop.

    :param excused: names not required Ready and schedulable, only at
        *wanted* when Ready (None: a dry run, nothing to check).
    :raises UpgradeGateClosed: naming the run and every problem.
    """
    if excused is None:
        _planned_check(drv, cluster, 'the check after upgrading %s: '
                       'Ready at %s, the API ready through the load '
                       'balancer, etcd healthy; a problem stops the '
                       'upgrade there' % (', '.join(names),
                                          upgrade_mod.version_text(wanted)))
        return
    client = drv.kubectl_client(cluster)
    problems = gates.node_problems(client.nodes(), names, excused,
                                   version=wanted)
    ready, why = client.api_ready(drv.discovery_server(cluster))
    if not ready:
        problems.append('the API is not ready through %s: %s' % (
            drv.discovery_server(cluster), why))
    problems += gates.etcd_problems([n.name for n in cluster.masters],
                                    *etcd_state(drv, client))
    if problems:
        gates.refuse('the check after upgrading %s' % ', '.join(names),
                     problems, 'The nodes upgraded so far stay upgraded; '
                     'fix the problems and run the same upgrade again '
                     '(it continues with the nodes not done).')


def _planned_check(drv, cluster, what):
    """A dry run's line for a check it cannot make (it reads nodes,
    etcd and budgets: there is no cluster to ask)."""
    if isinstance(drv.pool, plan.PlanPool):
        plan.note(drv.pool, cluster.masters[0].ssh_address,
                  'not read: %s (a real run reads the nodes, etcd and '
                  'the budgets here)' % what)


def etcd_state(drv, client):
    """``(member names, [(endpoint, healthy, error)])`` of etcd, read
    on *client*'s control-plane node; ``(None, None)`` when etcdctl
    gave no answer that parses (reported as a problem)."""
    group = drv.conf.kubespray_mgmt
    sudo = ['sudo', '-n'] if kconf.use_sudo(
        drv.settings.kubectl_sudo, drv.spec.master.login.username) else []
    conn = client.conn
    try:
        members, health = etcdwait.read(conn, sudo + [group.etcdctl_command],
                                        group.kubectl_timeout)
        return [m['name'] for m in members], health
    except _READ_ERRORS as exc:
        drv.warn('etcd could not be asked on %s: %s', conn.host, exc)
        return None, None




def _plan(drv, cluster, wanted, field, nodes, before):
    runner = drv.runner()
    supported = upgrade_mod.parse_supported(
        kubespray.supported_kube_versions(runner.conn, runner.root))
    # A dry run (no nodes) does not read the list: nothing to warn of
    # (its plan says the check was skipped).
    if supported is None and nodes is not None:
        drv.warn('the kubespray checkout lists no kubelet_checksums: '
                 'kubespray itself checks the version')
    return upgrade_mod.plan(
        wanted, nodes,
        [n.name for n in cluster.masters],
        [n.name for n in cluster.workers], supported, field, before)


def _recorded_cordons(drv, wanted, nodes):
    """The nodes that were cordoned when the upgrade to *wanted*
    started, as its first run recorded them (the runs after keep
    them), or None when this is its first run (or a dry run)."""
    if nodes is None:
        return None
    recorded = drv.read_record(
        upgrade_mod.CORDONS_FILE, upgrade_mod.parse_cordons)
    if recorded is not None and recorded[0] == wanted:
        return recorded[1]
    return None


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


def renew_certificates(drv, cluster, request=None, planned=False):
    """Renew the control-plane certificates, one master at a time.

    For each master, in the inventory's order: out of HAProxy's API
    backends (a lone master stays: there is no other), ``kubeadm certs
    renew all`` and a restart of its control-plane static pods
    (``scripts/renew-certs.sh``, kubespray's ``k8s-certs-renew.sh``
    steps), its own API server polled until it answers (or
    ``cert_renew_timeout``), then back into HAProxy; the API is checked
    through the load balancer at the end.  With a *request* id (a
    PATCH), the masters done are recorded in the workspace as they
    finish, so the same request run again after a failure goes on with
    the others and, once all are done, renews nothing.

    :param request: the PATCH's ``renew_certificates`` id, or None (the
        command line: always renew).
    :param planned: a dry run: each readiness probe is planned once,
        not polled (nothing answers).
    :returns: the names of the masters renewed.
    :raises MgmtDriverRemoteCommandError, MgmtDriverOtherError: a master
        failed (it stays out of HAProxy until the next update) or the
        API did not answer.
    """
    cluster = drv.in_recorded_order(cluster)
    record = drv.read_record(certificates.RECORD_FILE,
                             certificates.parse_record) if request else None
    done = set(record[1]) if record and record[0] == request else set()
    todo = [n for n in cluster.masters if n.name not in done]
    drv.step('renewing certificates: %s', ', '.join(
        n.name for n in todo) or 'all done already for request %s' % request)
    probe = _ReadyProbe(drv, cluster, planned)
    for node in todo:
        _renew_master(drv, cluster, node, probe)
        done.add(node.name)
        if request:
            drv.write_record(certificates.RECORD_FILE,
                             certificates.render_record(request, done))
    if todo:
        _check_api(drv, cluster, probe)
    return [n.name for n in todo]


def _master_argv(drv, *argv):
    sudo = kconf.use_sudo(drv.settings.kubectl_sudo,
                          drv.spec.master.login.username)
    return (['sudo', '-n'] if sudo else []) + list(argv)


def _renew_master(drv, cluster, node, probe):
    if len(cluster.masters) > 1:
        gateways.update(drv, cluster.remove(node.name))
    else:
        drv.warn('%s is the only control-plane node: the API is down '
                 'while it restarts', node.name)
    group = drv.conf.kubespray_mgmt
    drv.step('renewing the certificates of %s (kubeadm certs renew all, '
             'then its control-plane pods restarted; up to %d s: '
             'cert_renew_timeout)', node.name, group.cert_renew_timeout)
    conn = drv.connection(node)
    conn.run(_master_argv(drv, 'sh', '-c', programs.program(
        certificates.RENEW_PROGRAM), 'sh', group.kubeadm_command,
        group.crictl_command), timeout=group.cert_renew_timeout)
    probe.wait(registry.server_url(
        node.cluster_address, loadbalancer.DEFAULT_APISERVER_PORT),
        node.name)
    gateways.update(drv, cluster)


class _ReadyProbe:
    """``kubectl --server SERVER get --raw /readyz``, polled on one
    master (picked once, at the first wait) until it answers ``ok``.

    :param planned: a dry run: each probe is planned once, not polled.
    """

    def __init__(self, drv, cluster, planned=False):
        self.drv, self.cluster, self.planned = drv, cluster, planned
        self.timeout = drv.conf.kubespray_mgmt.cert_renew_timeout
        self._client = None

    def wait(self, server, where):
        """:raises MgmtDriverOtherError: not within
        ``cert_renew_timeout``."""
        if self._client is None:
            self._client = self.drv.kubectl_client(self.cluster)
        argv = self._client.argv('--server', server, 'get', '--raw',
                                 '/readyz')

        def probe():
            result = self._client.conn.run(
                argv, timeout=min(self.timeout, 30), check=False)
            return result.ok and result.stdout.strip() == 'ok', result
        if self.planned:
            probe()
            return
        report = _WaitReport(self.drv, 'the API server of %s (%s) to '
                             'answer /readyz' % (where, server),
                             self.timeout)

        def reported():
            ready, result = probe()
            report(ready)
            return ready, result
        ready, result = kubectl.poll(
            reported, self.timeout,
            kubectl.KubectlSettings.from_conf(self.drv.conf))
        if not ready:
            raise exceptions.MgmtDriverOtherError(
                error_message='the API server of %s (%s) did not answer '
                              '/readyz within %d s after its certificates '
                              'were renewed: %s' % (
                                  where, server, self.timeout,
                                  result.tail(3) or 'no answer'))


#: Seconds between two "still waiting" progress lines of a wait.
WAIT_REPORT_EVERY = 60
#: The clock of the progress lines (tests give their own).
_clock = time.monotonic


class _WaitReport:
    """Progress lines of a wait, as a slot wait has them: when it
    starts (the first probe was not the answer), once every
    :data:`WAIT_REPORT_EVERY` seconds, and when it ends.

    :param what: what is waited for, as ``waiting up to N s for WHAT``.
    :param timeout: the bound of the wait, in seconds.
    """

    def __init__(self, drv, what, timeout):
        self.drv, self.what, self.timeout = drv, what, timeout
        self.start = self.last = None

    def __call__(self, done):
        now = _clock()
        if self.start is None:
            if not done:
                self.start = self.last = now
                self.drv.step('waiting up to %d s for %s', self.timeout,
                              self.what)
        elif done:
            self.drv.step('%s: answered after %d s', self.what,
                          now - self.start)
        elif now - self.last >= WAIT_REPORT_EVERY:
            self.last = now
            self.drv.step('still waiting for %s: %d s of %d s', self.what,
                          now - self.start, self.timeout)


def _check_api(drv, cluster, probe):
    """The API answers through the load balancer (its VIP or VM)."""
    if cluster.external_lb is None:
        return
    server = drv.discovery_server(cluster)
    drv.step('checking the API through the load balancer (%s)', server)
    probe.wait(server, 'the load balancer')
