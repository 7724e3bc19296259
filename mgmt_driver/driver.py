"""The context of one operation, and Tacker v1's hooks.

:class:`ClusterDriver` is the per-operation context: connections,
workspace and lock, playbook runner, records, inventory upload, and the
worker steps (join, drain, remove); what it caches is in one
:class:`Reads`, and its spec never changes.  The operations that
compose these steps live in :mod:`mgmt_driver.operations`;
:class:`LcmHooks` only turns Tacker v1's hook calls into their inputs
(:mod:`mgmt_driver.v2` and :mod:`mgmt_driver.cli` are the other
adapters).  Rendering lives in pure modules, remote work in the modules
that own it.

Every step converges when run again: the workspace is reused, documents
are rewritten whole, kubespray's playbooks are idempotent, node removal
skips nodes that are already gone and the HAProxy configuration is only
replaced when it differs.  The inventory on the Ansible server is the
record of the control-plane order, which kubespray cares about.

What the driver may delete or forget is never taken from the request or
the Ansible server: every host is put in the instance's local record
(:mod:`mgmt_driver.records`) before it is contacted, a host key when one
of the instance's own logins recorded it (only those are forgotten
again), the VIM when it is registered, and terminate acts on that record
only.  Terminate always finishes its local part: a remote side that
fails is reported as a warning.  Each hook of :class:`LcmHooks` first
passes :func:`mgmt_driver.statestore.hook` (the state store is the shared
one, the instance's record is there, no other operation of the instance
runs).
"""

import dataclasses
import posixpath

from oslo_log import log as logging

from mgmt_driver import DRIVER_NAME  # noqa: F401 (the shim reads it)
from mgmt_driver import absence
from mgmt_driver import autoheal
from mgmt_driver import conf as kconf
from mgmt_driver import detached
from mgmt_driver import exceptions
from mgmt_driver import factcache
from mgmt_driver import follow
from mgmt_driver import gates
from mgmt_driver import gateways
from mgmt_driver import heat
from mgmt_driver import inventory
from mgmt_driver import kubectl
from mgmt_driver import kubespray
from mgmt_driver import labels as labels_mod
from mgmt_driver import loadbalancer
from mgmt_driver import merging
from mgmt_driver import model
from mgmt_driver import nodes as nodes_mod
from mgmt_driver import operations
from mgmt_driver import params
from mgmt_driver import records as records_mod
from mgmt_driver import registry
from mgmt_driver import safeyaml
from mgmt_driver import ssh
from mgmt_driver import statestore
from mgmt_driver import trust
from mgmt_driver import upgrade as upgrade_mod

LOG = logging.getLogger(__name__)

DESCRIPTION = ('Builds, scales, heals and terminates a Kubernetes cluster '
               'VNF with kubespray run from an Ansible server over SSH.')

#: The VNF package directory holding private keys uploaded for Ansible.
KEY_DIR = 'keys'
#: Where the LB install script is copied on the LB VM (home-relative).
LB_SCRIPT = gateways.LB_SCRIPT


_PROGRESS_LINES = ('PLAY [', 'TASK [', 'PLAY RECAP',
                   # a run queued for a slot (detached.SlotReporter)
                   'waiting for a playbook slot', 'got playbook slot',
                   # which run, on which nodes, and its log
                   'running ', 'log: ')

#: What a failed playbook run raises.
_PLAYBOOK_ERRORS = (exceptions.MgmtDriverRemoteCommandError,
                    exceptions.MgmtDriverRemoteCommandTimeOut)

#: The warning for a node removed undrained, by
#: :func:`mgmt_driver.gates.undrained`'s reason.
_UNDRAINED = {
    gates.NOT_READY: '%s is NotReady (its kubelet does not answer): '
                     'removing it without draining',
    gates.KNOWN_DEAD: '%s is being replaced as a dead node: removing it '
                      'without draining',
    gates.UNREACHABLE: '%s is not reachable: removing it without draining',
}

#: Appended to the error of a failed scale_end (now composed in
#: :mod:`mgmt_driver.operations`).
SCALE_OUT_ADVICE = operations.SCALE_OUT_ADVICE


@dataclasses.dataclass
class Settings:
    """What the driver needs from ``[kubespray_mgmt]`` besides SSH."""

    kubectl_command: str = 'kubectl'
    kubectl_kubeconfig: str | None = '/etc/kubernetes/admin.conf'
    kubectl_sudo: str = 'auto'
    admin_service_account: str = 'tacker-admin'
    drain_timeout: int = 600
    fact_cache_margin: int = 3600

    @classmethod
    def from_conf(cls, conf=None):
        group = (conf or kconf.CONF).kubespray_mgmt
        return cls(kubectl_command=group.kubectl_command,
                   kubectl_kubeconfig=group.kubectl_kubeconfig or None,
                   kubectl_sudo=group.kubectl_sudo,
                   admin_service_account=group.admin_service_account,
                   drain_timeout=group.drain_timeout,
                   fact_cache_margin=group.fact_cache_margin)


#: Workspace documents every later operation reads back (through
#: :mod:`safeyaml`, which refuses more than ``MAX_CHARS``).
_READ_BACK = (inventory.HOSTS_FILE, labels_mod.RECORD_FILE)


def _check_read_back(documents):
    """Refuse, before anything is written, documents that the next
    operation could not read back: they would lock the instance out of
    every later operation.  Only many or long labels and taints (a
    request's, a pool's or a relabel's, recorded per node) make them
    that large.

    :param documents: ``{name: (text, mode)}`` about to be uploaded.
    :raises ParamsInvalid: naming the fields and the sizes.
    """
    too_big = ['%s (%d characters)' % (name, len(documents[name][0]))
               for name in _READ_BACK
               if len(documents[name][0]) > safeyaml.MAX_CHARS]
    if too_big:
        raise exceptions.ParamsInvalid([
            'labels, taints: the labels and taints of the nodes would '
            'make %s, more than the %d characters the driver reads back; '
            'give the nodes fewer or shorter labels and taints (nothing '
            'was changed)' % (', '.join(too_big), safeyaml.MAX_CHARS)])


@dataclasses.dataclass
class Reads:
    """Everything a :class:`ClusterDriver` caches, in one place: what it
    read from the Ansible server and the nodes, kept until the next
    :meth:`~ClusterDriver.claim` (a new hook reads afresh) or until
    terminate deletes the workspace."""

    #: The ``kubespray.Runner``: the checkout's layout and versions,
    #: checked once.
    runner: object = None
    #: The workspace exists (a claim or the runner made it).
    workspace_ready: bool = False
    #: ``{node name: NodeSettings}``: the workspace's record plus this
    #: operation's changes, written with the next inventory.
    node_settings: dict | None = None
    #: The Kubernetes version of the last upgrade recorded in the
    #: workspace (None: the request's).
    kube_version: tuple | None = None
    #: ``{node name: bool}``: SSH answered (asked once: a dead host
    #: costs the connect retries).
    reachability: dict = dataclasses.field(default_factory=dict)


class ClusterDriver:
    """The context of one operation on one cluster, and its steps.

    :param spec: the :class:`~mgmt_driver.model.ClusterSpec`.
    :param instance_id: the VNF instance id; names the workspace.
    :param pool: an ``ssh.ConnectionPool`` (one connection per host).
    :param conf: an oslo.config object (default: the global one).
    :param package_dir: local VNF package directory holding the LB
        install script, or None.
    :param lb_script: local file to run as the LB install script instead
        of ``package_dir``'s ``script_path`` (``kubespray-mgmt``: the one
        ``csar build`` would package), or None.
    :param progress: called with each progress line (playbook plays and
        tasks, steps), or None.
    :param trusted_paths: the request's key files may be anywhere on this
        host (``kubespray-mgmt``: its user wrote the request); see
        :mod:`mgmt_driver.trust`.
    :param records: the ``records.RecordStore`` of the instances
        (default: from *conf*).
    :param operation: the hook or command it runs for (``scale_end``);
        names the playbook logs and the lock (:meth:`claim`).
    :raises ParamsInvalid: the operator's rules refuse a key file, the
        default key or an extra var (before any remote work).
    """

    def __init__(self, spec, instance_id, pool, conf=None,
                 package_dir=None, progress=None, trusted_paths=False,
                 lb_script=None, records=None, operation='operation'):
        self.conf = conf or kconf.CONF
        self._policy = trust.Policy.from_conf(self.conf, package_dir,
                                              trusted_paths)
        self.spec = trust.apply(spec, self._policy)
        self.instance_id = instance_id
        self.pool = pool
        self.settings = Settings.from_conf(self.conf)
        self.package_dir = package_dir
        self.lb_script = lb_script
        self._progress = progress
        self._past_timings = []
        self._past_runs = []
        #: The hook or command running (names the playbook logs).
        self.operation = operation
        self.records = records or records_mod.RecordStore.from_conf(
            self.conf)
        self.records.path(instance_id)  # refuses an unsafe id early
        #: Hosts already put in the local record (never forgotten: the
        #: record is local and only grows until terminate).
        self._remembered = set()
        #: ``{node name: identity labels}`` (mgmt_driver.autoheal), or
        #: None: no identity labels (v1, the command line).
        self.node_identity = None
        #: Nodes the operation already knows are dead: an automatic
        #: heal's, found not Ready by its guard rails (Tacker v2).  Only
        #: context: :func:`mgmt_driver.gates.undrained` decides which
        #: nodes a removal leaves undrained.
        self.known_dead = frozenset()
        self._reads = Reads()
        #: Workers declared absent for this operation
        #: (:meth:`declare_absent`).
        self.absent = frozenset()

    # Plumbing.

    def step(self, text, *args):
        message = text % args if args else text
        LOG.info('[%s] %s', self.instance_id, message)
        if self._progress:
            self._progress(message)

    def warn(self, text, *args):
        """Log a warning and show it as a progress line."""
        message = text % args if args else text
        LOG.warning('[%s] %s', self.instance_id, message)
        if self._progress:
            self._progress('WARNING: ' + message)

    def _remember(self, hosts):
        # Recorded before the first contact.  Listing a host is not
        # owning its key: a request may name any host; _claim_key notes
        # the keys the instance's own logins record.
        new = [h for h in hosts if h not in self._remembered]
        if new:
            self.records.add_hosts(self.instance_id, new)
            self._remembered.update(new)

    def _claim_key(self, address, port, key):
        # Called by a connection whose login recorded the host's key.
        self.records.claim_key(self.instance_id, address, port, key)

    def connection(self, node):
        """The connection to *node* (recorded first as the instance's)."""
        self._remember([_host_of(node)])
        login = self.spec.login_for(node.role)
        return self.pool.connection(node.ssh_address, login.credentials(),
                                    node.ssh_port, on_new_key=self._claim_key)

    def _ansible(self):
        login = self.spec.ansible.login
        self._remember([records_mod.Host(self.spec.ansible.ip_address,
                                         int(login.port),
                                         records_mod.ROLE_ANSIBLE)])
        return self.pool.connection(self.spec.ansible.ip_address,
                                    login.credentials(), login.port)

    @property
    def workspace_path(self):
        """``<transferring_inventory_path>/<instance id>`` on the server."""
        return posixpath.join(self.spec.ansible.transferring_inventory_path,
                              self.instance_id)

    def _workspace(self):
        return kubespray.Workspace(self._ansible(), self.workspace_path)

    def workspace(self):
        """The instance's ``kubespray.Workspace`` on the Ansible server
        (its connection recorded first as the instance's)."""
        return self._workspace()

    def claim(self, operation=None):
        """Begin *operation*: ready the workspace and check the lock.

        One command.  A playbook run of another operation holding the
        cluster's lock (see :mod:`mgmt_driver.detached`) makes this wait
        up to ``playbook_lock_wait`` and then refuse, before anything is
        changed; one of the same operation (a hook run again after its
        conductor died) is followed when its playbook comes.  What an
        earlier claim of this context read is read afresh, as a new
        hook would (the command line runs both halves of a heal in one
        context).

        :param operation: the hook or command (``scale_end``); names the
            playbook logs (default: the one given to the constructor).
        :raises ClusterBusy: the other run did not end in time.
        """
        if operation is not None:
            self.operation = operation
        self._forget_reads()
        workspace = self._workspace()
        detached.wait_while_busy(
            workspace.ensure,
            lambda holder: holder.operation == self.operation,
            self.conf.kubespray_mgmt.playbook_lock_wait, workspace.conn.host,
            workspace.path, progress=self.step)
        self._reads.workspace_ready = True

    def runner(self):
        """The ``kubespray.Runner`` of the workspace, made once per claim:
        the checkout's layout, kubespray and Ansible versions checked,
        the recorded Kubernetes version read (:meth:`rendered_spec`).

        :raises KubesprayCheckoutUnsupported: the checkout is refused.
        """
        if self._reads.runner is None:
            conn = self._ansible()
            workspace = self._workspace()
            if not self._reads.workspace_ready:
                workspace.ensure()
            root = self.spec.ansible.kubespray_root_path
            settings = kubespray.PlaybookSettings.from_conf(
                self.conf, forks=self.spec.kubespray.forks)
            layout = kubespray.detect_layout(conn, root,
                                             settings.ansible_playbook)
            self.step('kubespray at %s: %s (Ansible %s)', root,
                      layout.version or 'version unknown',
                      layout.ansible or 'version unknown')
            kubespray.check_version(layout, self.spec.kubespray.version,
                                    conn.host, root)
            kubespray.check_ansible(layout, conn.host, root,
                                    settings.ansible_playbook)
            # The version of the last upgrade wins over the request's:
            # the instantiate parameters Tacker keeps name the original.
            self._reads.kube_version = workspace.read_record(
                upgrade_mod.RECORD_FILE, upgrade_mod.parse_record)
            self._reads.runner = kubespray.Runner(
                conn, root, layout, workspace,
                inventory=inventory.HOSTS_FILE,
                extra_vars_files=(inventory.CLUSTER_VARS_FILE,
                                  inventory.SECRET_VARS_FILE),
                settings=settings, on_progress=self._playbook_line,
                operation=self.operation)
        return self._reads.runner

    def read_record(self, name, parse):
        """The workspace's record file *name*, parsed by *parse*
        (``kubespray.Workspace.read_record``)."""
        return self._workspace().read_record(name, parse)

    def write_record(self, name, text):
        """Write the workspace's record file *name* (mode 0644, as the
        inventory), e.g. a day-2 operation's progress."""
        self._workspace().upload({name: text}, mode=inventory.PUBLIC_MODE)

    def rendered_spec(self):
        """The spec the documents are rendered from: the request's, with
        the Kubernetes version of the last upgrade recorded in the
        workspace, if any (:attr:`spec` itself never changes), spelled
        as the request spelled its own (a "v" for kubespray up to
        v2.27), without a "v" when it gave none."""
        version = self._reads.kube_version
        if version is None:
            return self.spec
        options = self.spec.kubespray
        spelled = options.kube_version is not None and \
            options.kube_version.v_prefix
        return dataclasses.replace(self.spec, kubespray=dataclasses.replace(
            options, kube_version=model.KubeVersion(version, spelled)))

    def record_kube_version(self, version, others=None):
        """Record *version* (and the *others* records of the upgrade,
        ``{name: text}``) in the workspace, one transfer: every later
        document renders it (:meth:`rendered_spec`)."""
        self._workspace().upload(
            dict(others or {}, **{
                upgrade_mod.RECORD_FILE: upgrade_mod.render_record(version)}),
            mode=inventory.PUBLIC_MODE)
        self._reads.kube_version = version

    def _forget_reads(self):
        # A new hook (claim) or a workspace that is gone: read afresh.
        if self._reads.runner is not None:
            self._past_timings += self._reads.runner.timings
            self._past_runs += self._reads.runner.runs
        self._reads = Reads()

    def node_settings(self):
        """``{node name: NodeSettings}`` recorded in the workspace
        (:mod:`mgmt_driver.labels`) with this operation's changes: a
        copy; change them with :meth:`forget_node_settings` and
        :meth:`set_node_settings`, written with the next inventory.

        :raises RemoteDataInvalid: the record was tampered with.
        """
        if self._reads.node_settings is None:
            self._reads.node_settings = self._workspace().read_record(
                labels_mod.RECORD_FILE, labels_mod.parse_record)
        return dict(self._reads.node_settings)

    def set_node_settings(self, settings):
        """Make *settings* (``{name: NodeSettings}``) what the next
        inventory records."""
        self._reads.node_settings = dict(settings)

    def forget_node_settings(self, names):
        """Drop the record of *names*: nodes that are gone for good, or
        that join afresh with the request's labels and taints.  Written
        with the next inventory."""
        settings = self.node_settings()
        for name in names:
            settings.pop(name, None)
        self.set_node_settings(settings)

    @property
    def playbook_timings(self):
        """``(playbook, seconds)`` of every ansible-playbook run so far."""
        runner = self._reads.runner
        return self._past_timings + (
            list(runner.timings) if runner is not None else [])

    @property
    def playbook_runs(self):
        """Every ansible-playbook run so far, as
        :func:`mgmt_driver.kubespray.run_entry` dicts."""
        runner = self._reads.runner
        return self._past_runs + (
            list(runner.runs) if runner is not None else [])

    def _playbook_line(self, line):
        if self._progress and line.startswith(_PROGRESS_LINES):
            self._progress('  ' + line.rstrip(' *'))

    def declare_absent(self, cluster, names, field):
        """Leave the workers *names* of *cluster* out of every playbook
        run of this operation: they are dead (kubespray's ``--limit``
        runs would need their cached facts, #13491), their VMs stay.
        The runs' inventory omits them (kubespray sees a cluster
        without them; the next operation that does not declare them
        absent puts them back); HAProxy keeps them as backends (its
        checks skip them while they are down).

        :raises ParamsInvalid: a name is not a worker of *cluster*.
        """
        self.absent = absence.check_absent(cluster, names, field)
        if self.absent:
            self.warn('declared absent, left out of every playbook run: '
                      '%s', ', '.join(sorted(self.absent)))

    # Documents.

    def upload_inventory(self, cluster):
        """Write the inventory of *cluster* into the workspace.

        Private keys named in the request are uploaded too (0600), and
        host_vars of nodes no longer in the cluster are deleted; all in
        one transfer (:meth:`~mgmt_driver.kubespray.Workspace.replace`).
        """
        self._remember([_host_of(n)
                        for n in cluster.k8s_nodes + cluster.gateways])
        runner = self.runner()
        spec = self.rendered_spec()
        key_paths = inventory.remote_key_paths(
            spec, cluster, runner.workspace.file(KEY_DIR))
        # A node's labels and taints are fixed when it first appears
        # here; the record keeps them (mgmt_driver.labels).
        settings = self.node_settings()
        for node in cluster.k8s_nodes:
            settings.setdefault(node.name, spec.node_settings(node))
        if self.node_identity is not None:
            # Tacker v2: each node's VNF instance and VNFC, laid over
            # whatever the record holds (mgmt_driver.autoheal).
            settings = {name: autoheal.with_identity(
                value, self.node_identity.get(name))
                for name, value in settings.items()}
        files = inventory.render_files(
            spec, cluster.remove(*self.absent) if self.absent else cluster,
            key_paths, settings=settings)
        documents = {name: (rendered.content, rendered.mode)
                     for name, rendered in files.items()}
        documents[labels_mod.RECORD_FILE] = (
            labels_mod.render_record(settings), inventory.PUBLIC_MODE)
        # For status: why a worker is not in this inventory.
        documents[absence.RECORD_FILE] = (
            absence.render_record(self.absent), inventory.PUBLIC_MODE)
        _check_read_back(documents)
        key_texts = {login.key_file: login.key_text for login in (
            self.spec.master.login, self.spec.worker.login)}
        for local, remote in sorted(key_paths.items()):
            documents[posixpath.relpath(remote, runner.workspace.path)] = (
                key_texts[local], 0o600)
        # One transfer and one command whatever the node count; host_vars/
        # is replaced as a whole, so a removed node's file is gone.
        runner.workspace.replace(documents)
        self.set_node_settings(settings)
        self._record_cluster(cluster)

    def _record_cluster(self, cluster):
        # What "kubespray-mgmt status/logs --instance-id" reach the
        # cluster with, without the request (no secret: key references).
        self.records.set_cluster(self.instance_id, follow.describe(
            self.spec, cluster, self.workspace_path,
            lambda login: trust.key_path(login, self._policy)))

    def recorded_inventory(self):
        """The inventory last uploaded to the workspace, checked.

        :returns: an :class:`~mgmt_driver.inventory.RecordedInventory`
            (empty when there is none).
        :raises RemoteDataInvalid: the file was tampered with.
        """
        conn = self._ansible()
        path = self._workspace().file(inventory.HOSTS_FILE)
        return inventory.parse_recorded(
            conn.read_file(path, missing_ok=True), conn.host, path)

    def recorded_masters(self):
        """Control-plane names in the order of the uploaded inventory."""
        return list(self.recorded_inventory().masters)

    def in_recorded_order(self, cluster):
        """*cluster* with its masters in the recorded order, new ones last."""
        order = {name: i for i, name in enumerate(self.recorded_masters())}
        masters = sorted(cluster.masters,
                         key=lambda n: (n.name not in order,
                                        order.get(n.name, 0)))
        return cluster.with_masters(masters)

    # kubectl.

    def kubectl_client(self, cluster, exclude=()):
        """kubectl on the first control-plane node that answers."""
        exclude = set(exclude)
        masters = [n for n in cluster.masters if n.name not in exclude]
        if not masters:
            raise exceptions.MgmtDriverOtherError(
                error_message='no control-plane node is left to run '
                              'kubectl on')
        return kubectl.client_on_first_reachable(
            [self.connection(n) for n in masters],
            kubectl=self.settings.kubectl_command,
            kubeconfig=self.settings.kubectl_kubeconfig,
            sudo=kconf.use_sudo(self.settings.kubectl_sudo,
                                self.spec.master.login.username),
            settings=kubectl.KubectlSettings.from_conf(self.conf))

    def cluster_access(self, cluster, name):
        """Admin token and CA of the cluster, reached through the LB."""
        client = self.kubectl_client(cluster)
        creds = client.admin_credentials(
            name=self.settings.admin_service_account)
        lb = cluster.external_lb
        return registry.ClusterAccess(
            name=name,
            server=registry.server_url(
                self.spec.external_lb.vip or lb.ssh_address,
                self.spec.external_lb.api_port),
            token=creds.token, ca_cert=creds.ca_cert)

    # Operations.

    def not_in_kubernetes(self, cluster):
        """Names of *cluster*'s nodes that Kubernetes does not know.

        What a scale-out or heal still has to add, so a re-run after a
        failure finishes the work instead of skipping it.
        """
        known = set(self.kubectl_client(cluster).node_names())
        return [name for name in cluster.names if name not in known]

    #: What :meth:`scale_out` says it does, by *purpose*.
    JOIN_STEPS = {'scale out': 'scale out: adding %s',
                  'heal': 'heal: joining %s again',
                  'rollback': 'scale-out rollback: joining %s'}

    def scale_out(self, cluster, new_names, advice=None, purpose='scale out'):
        """Join the workers *new_names* of *cluster* (already in it).

        When the join fails, the nodes that got into Kubernetes are taken
        out again before the error is raised, so that a rollback that
        only deletes the new VMs leaves a consistent cluster.

        :param advice: appended to the error of a failed join: what the
            operator should do next.
        :param purpose: a key of :data:`JOIN_STEPS`: what the progress
            calls the join (a heal is not a scale out).
        """
        cluster = self.in_recorded_order(cluster)
        new_names = [n for n in new_names if n not in self.absent]
        self.step(self.JOIN_STEPS[purpose], ', '.join(new_names) or 'nothing')
        self.upload_inventory(cluster)
        runner = self.runner()
        if new_names:
            self.point_cluster_info(cluster)
            self.refresh_facts(cluster, new_names)
            try:
                runner.scale(new_names)
            except _PLAYBOOK_ERRORS as exc:
                self._undo_join(cluster, new_names)
                raise exceptions.with_advice(exc, advice)
        gateways.update(self, cluster)

    def refresh_facts(self, cluster, limited):
        """Cached facts for every host a run limited to *limited* leaves
        out, gathered only where missing or about to expire
        (:func:`~mgmt_driver.factcache.refresh_facts`)."""
        limited = set(limited) | self.absent
        factcache.refresh_facts(
            self.runner(), [n for n in cluster.names if n not in limited],
            self.settings.fact_cache_margin)

    def _undo_join(self, cluster, names):
        """Best effort: *names* out of Kubernetes and the inventory."""
        try:
            absent = set(self.not_in_kubernetes(cluster))
            joined = [n for n in names if n not in absent]
            self.step('the join failed: taking %s out again',
                      ', '.join(names))
            if joined:
                self.remove_from_kubernetes(cluster, joined)
            self.forget_node_settings(names)
            self.upload_inventory(cluster.remove(*names))
        except _PLAYBOOK_ERRORS + (exceptions.MgmtDriverOtherError,) as exc:
            LOG.warning('[%s] could not take %s out after the failed join '
                        '(the next operation removes what is left): %s',
                        self.instance_id, ', '.join(names), exc)

    def reconcile(self, cluster, exclude=()):
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
            :meth:`not_in_kubernetes` (what a scale-out or heal still has
            to join).
        """
        masters = set(self.recorded_masters())
        self.forget_node_settings(
            set(self.node_settings()) - set(cluster.names))
        client = self.kubectl_client(cluster, exclude=exclude)
        known = set(client.node_names())
        for name in sorted(known - set(cluster.names) - masters):
            self.step('%s has no VM any more: deleting its Kubernetes '
                      'node', name)
            client.delete_node(name)
        return [name for name in cluster.names if name not in known]

    def remove_workers(self, cluster, names, rejoin=False):
        """Take the workers *names* out of the LB, drain and remove them.

        Nodes that never joined (or are already gone) are only dropped
        from the inventory and the LB.

        :param rejoin: they join again later (a heal): their recorded
            labels and taints are kept for it.
        :returns: the cluster without them.
        """
        cluster = self.in_recorded_order(cluster)
        remaining = cluster.remove(*names)
        self.step('removing %s', ', '.join(names) or 'nothing')
        gateways.update(self, remaining)
        if names:
            self.remove_from_kubernetes(cluster, names)
        if not rejoin:
            self.forget_node_settings(names)
        self.upload_inventory(remaining)
        self.forget_host_keys(cluster, names)
        return remaining

    def remove_from_kubernetes(self, cluster, names, exclude=()):
        """Drain the nodes *names* that can be drained and remove them
        all (``remove-node.yml``): the registered ones only.

        Which are removed undrained, as dead ones, is
        :func:`mgmt_driver.gates.undrained`'s to say, given their
        readiness (:meth:`_readiness`), :attr:`known_dead` and whether
        SSH answers (:meth:`reachable`); each is named in a warning.

        :param exclude: control-plane nodes not to run kubectl on.
        """
        client = self.kubectl_client(cluster, exclude=exclude)
        present = [n for n in names if client.node_exists(n)]
        dead = gates.undrained(
            present, self._readiness(client, present), self.known_dead,
            lambda name: self.reachable(cluster.get(name)))
        for name, why in dead.items():
            self.warn(_UNDRAINED[why], name)
        drained = [n for n in present if n not in dead]
        for name in drained:
            self.step('draining %s', name)
            client.drain(name, timeout=self.settings.drain_timeout)
            client.wait_evacuated(name, timeout=self.settings.drain_timeout)
        self.upload_inventory(cluster)
        runner = self.runner()
        runner.remove_nodes(drained, reachable=True)
        runner.remove_nodes(list(dead), reachable=False)

    def _readiness(self, client, names):
        """``{name: Ready condition}`` of the registered *names* (one
        command per ``kubectl.NODES_PER_COMMAND``), or None when kubectl
        printed no valid node (a warning: readiness then decides
        nothing, :func:`mgmt_driver.gates.undrained`)."""
        if not names:
            return {}
        try:
            return gates.readiness(client.nodes_named(names).values())
        except exceptions.RemoteDataInvalid as exc:
            LOG.warning('[%s] readiness of %s unknown: %s', self.instance_id,
                        ', '.join(names), exc)
            return None

    def record_host_keys(self, nodes):
        """Log in once to each of *nodes*, so that its SSH host key is
        recorded now (as ``host_key_policy`` says) and claimed as the
        instance's, while the operation vouches for the VMs it has just
        built or re-created.

        ``kubespray-mgmt status`` records no key (``accept-new`` is
        ``read-only`` there) yet reads every control-plane node, while
        an operation reaches only the first one that answers (kubectl):
        without this step status could not read the others.  ``true``
        on each node's connection of the pool (:meth:`connection`: the
        one the operation's other steps use, so no host gets a second
        SSH session); no certificate or other state is read.  Best
        effort: a node that does not answer is a warning, its key
        recorded by the next operation that reaches it.
        """
        for node in nodes:
            try:
                self.connection(node).run(['true'])
            except _PLAYBOOK_ERRORS + (exceptions.MgmtDriverOtherError,):
                self.warn('%s did not answer SSH: its host key is not '
                          'recorded (status cannot read it until an '
                          'operation does)', node.name)

    def reachable(self, node):
        """Whether *node* answers SSH: asked once per claim (a dead host
        costs the connect retries); None (no such node) does not."""
        if node is None:
            return False
        if node.name not in self._reads.reachability:
            login = self.spec.login_for(node.role)
            self._reads.reachability[node.name] = self.pool.reachable(
                node.ssh_address, login.credentials(), node.ssh_port,
                on_new_key=self._claim_key)
        return self._reads.reachability[node.name]

    def forget_host_keys(self, cluster, names, drop=True):
        """Forget the host keys of the nodes or gateways *names* of
        *cluster*: only those the instance owns (mgmt_driver.records).

        :param drop: the hosts are gone for good: out of the record too
            (a re-created VM keeps its place in it).
        """
        gone = {_host_of(n).endpoint for n in (
            cluster.get(name) or cluster.gateway(name) for name in names)
            if n}
        self.records.forget_keys(self.instance_id, gone,
                                 self.pool.forget_host, drop=drop)
        if drop:
            self._remembered = {h for h in self._remembered
                                if h.endpoint not in gone}

    def discovery_server(self, cluster):
        """The API endpoint ``kube-public/cluster-info`` must name.

        kubeadm's ``controlPlaneEndpoint`` as the inventory sets it: the
        load balancer's cluster address (its VIP, when set) and API port
        (``loadbalancer_apiserver``), or without a load balancer the
        first control-plane node's API server.
        """
        lb = cluster.external_lb
        if lb is not None:
            return registry.server_url(
                inventory.lb_address(self.spec, lb),
                self.spec.external_lb.api_port)
        return registry.server_url(cluster.masters[0].cluster_address,
                                   loadbalancer.DEFAULT_APISERVER_PORT)

    def point_cluster_info(self, cluster):
        """Make ``kube-public/cluster-info`` name :meth:`discovery_server`.

        Every ``kubeadm join`` kubespray runs discovers the cluster
        there; it was written once by ``kubeadm init`` on the first
        control-plane node and names a removed node or an old load
        balancer address after those were replaced.
        """
        server = self.discovery_server(cluster)
        old = self.kubectl_client(cluster).point_cluster_info(server)
        if old != server:
            self.step('cluster-info names %s (was %s)', server, old)

    def reset(self):
        """Run ``reset.yml`` over the recorded inventory, if there is one.

        Called before the VMs are deleted (terminate_start): afterwards
        there would be nothing left to reset.
        """
        hosts = self.recorded_inventory().hosts
        if not hosts:
            self.step('no inventory recorded: nothing to reset')
            return
        self.step('resetting %d node(s)', len(hosts))
        self.runner().reset(len(hosts))

    def terminate(self, kind, unregister):
        """Delete the workspace, the VIM and the local record's host keys.

        Only the local record says what to forget and delete (nothing is
        read from the Ansible server); a workspace that cannot be removed
        is a warning, so a broken or hostile Ansible server cannot stop
        the local cleanup.  Running it again succeeds.

        :param kind: what the caller registers (``records.TACKER_VIM``
            or ``records.KUBECONFIG``).
        :param unregister: ``(id)`` -> deletes what the record names as
            *kind*.
        """
        self.remove_workspace()
        self._forget_reads()
        gone = records_mod.release(self.records, self.instance_id,
                                   self.pool.forget_host, kind, unregister)
        self.step('forgot the SSH host keys of %d host(s) (those its own '
                  'logins recorded)', len(gone))

    def remove_workspace(self):
        """Delete the workspace; a failure is only a warning.

        :returns: True if it is gone.
        """
        path, host = self.workspace_path, self.spec.ansible.ip_address
        try:
            self._workspace().remove()
        except Exception as exc:  # whatever the remote side did
            self.warn('could not remove the workspace %s on the Ansible '
                      'server %s (remove it by hand): %s', path, host, exc)
            return False
        self.step('workspace %s removed', path)
        return True


def _declare_absent(drv, cluster, vms, named, field):
    """Declare absent the workers *named* by the request's *field* and
    those whose VM Heat reports gone (*vms*: ``{name: VmRecord}``)."""
    workers = {n.name for n in cluster.workers}
    gone = sorted(name for name, r in (vms or {}).items()
                  if r is not None and r.gone and name in workers
                  and name not in named)
    if gone:
        drv.warn('Heat reports the VM of %s gone', ', '.join(gone))
    drv.declare_absent(cluster, tuple(named) + tuple(gone), field)


def _host_of(node):
    return records_mod.Host(node.ssh_address, int(node.ssh_port), node.role)


# ----------------------------------------------------------------- Tacker v1


def _instance_id(vnf_instance):
    return getattr(vnf_instance, 'id', None) or '(unknown instance)'


def _additional_params(obj):
    return dict(getattr(obj, 'additional_params', None) or {})


#: Config files whose ignored keys were already logged (once a process).
_WARNED_FILES = set()


def _warn_ignored_options(conf):
    """Log each ``[kubespray_mgmt]`` key of Tacker's config files that
    names no option (``kubespray-mgmt doctor`` lists them too): a typo
    would otherwise lose the setting silently."""
    files = tuple(kconf.config_files(conf))
    if files in _WARNED_FILES:
        return
    _WARNED_FILES.add(files)
    for ignored in kconf.unknown_options(conf, files=files):
        LOG.warning('%s', ignored)


class LcmHooks:
    """Tacker v1's hooks, adapted to :class:`ClusterDriver`.

    :param conf: an oslo.config object (default: the global one).
    :param pool_factory: returns a new ``ssh.ConnectionPool``.
    :param heat_factory: ``(context, vnf_instance, request)`` -> Heat
        client.
    :param vim_registry: a ``registry.TackerVimRegistry``.
    :param package_dir_of: ``(context, vnf_instance)`` -> local VNF
        package directory, or None.
    :param records: a ``records.RecordStore`` (default: from *conf* at
        each hook).
    """

    def __init__(self, conf=None, pool_factory=None, heat_factory=None,
                 vim_registry=None, package_dir_of=None, records=None):
        self.conf = conf or kconf.CONF
        self._records = records
        self._pool_factory = pool_factory or (
            lambda: ssh.ConnectionPool(ssh.SSHSettings.from_conf(self.conf)))
        self._heat_factory = heat_factory or heat.heat_client
        self._registry = vim_registry or registry.TackerVimRegistry()
        self._package_dir_of = package_dir_of or _tacker_package_dir
        _warn_ignored_options(self.conf)

    def _noop(self, hook, vnf_instance):
        LOG.info('%s: nothing to do for VNF instance %s', hook,
                 _instance_id(vnf_instance))

    # Hooks this driver deliberately leaves to Tacker.

    def instantiate_start(self, context, vnf_instance, request, grant,
                          grant_request, **kwargs):
        self._noop('instantiate_start', vnf_instance)

    @statestore.hook
    def terminate_start(self, context, vnf_instance, request, grant,
                        grant_request, **kwargs):
        # Only kubespray.reset_on_terminate needs this hook: the VMs
        # still exist here, and are gone by terminate_end.
        spec = self._spec_or_none(context, vnf_instance, request,
                                  'terminate', log=LOG.debug)
        if spec is None or not spec.kubespray.reset_on_terminate:
            self._noop('terminate_start', vnf_instance)
            return
        with self._pool_factory() as pool:
            operations.terminate_begin(self._driver(
                context, vnf_instance, spec, pool, 'terminate_start'))

    def change_external_connectivity_start(self, context, vnf_instance,
                                           request, grant, grant_request,
                                           **kwargs):
        self._noop('change_external_connectivity_start', vnf_instance)

    def change_external_connectivity_end(self, context, vnf_instance,
                                         request, grant, grant_request,
                                         **kwargs):
        self._noop('change_external_connectivity_end', vnf_instance)

    def modify_information_start(self, context, vnf_instance, request,
                                 grant, grant_request, **kwargs):
        self._noop('modify_information_start', vnf_instance)

    @statestore.hook
    def modify_information_end(self, context, vnf_instance, request,
                               grant, grant_request,
                               metadata_field='vnf_metadata', **kwargs):
        """A PATCH with ``vnf_metadata.kube_version`` upgrades the cluster;
        one with ``relabel_nodes`` or ``relabel_pools`` and
        ``relabel_labels`` or ``relabel_taints`` relabels those nodes
        (first); one with ``renew_certificates: <request id>`` renews
        the control-plane certificates (once per id; before an upgrade).

        Tacker v1 passes no request here and has already stored the new
        metadata: the keys are read from the instance, and a version the
        cluster already runs on every node, or labels and taints the
        nodes have, are nothing to do, so any other PATCH changes nothing
        (it reads the nodes).  ``etcd_snapshot`` (a tag) takes an etcd
        snapshot first, once per tag.  ``kube_upgrade_serial`` sets the worker
        batch size.  The keys are checked by
        :func:`mgmt_driver.upgrade.check_metadata`, the pools named
        before any connection.

        :param metadata_field: the metadata's name in messages (the v2
            adapter passes ``'metadata'``).
        """
        wanted = upgrade_mod.check_metadata(
            dict(getattr(vnf_instance, 'vnf_metadata', None) or {}),
            metadata_field)
        if wanted.empty:
            self._noop('modify_information_end', vnf_instance)
            return
        spec = self._spec(context, vnf_instance, None, 'upgrade')
        cluster, vms = self._vms(context, vnf_instance, None, spec)
        relabel = wanted.relabel
        if relabel is not None:
            relabel = (list(relabel.nodes) + labels_mod.pool_members(
                spec, cluster, relabel.pools,
                wanted.field(labels_mod.METADATA_POOLS)),
                relabel.labels, relabel.taints)
        target = None if wanted.kube_version is None else \
            upgrade_mod.version_text(wanted.kube_version)
        with self._pool_factory() as pool:
            drv = self._driver(context, vnf_instance, spec, pool,
                               'modify_information_end')
            _declare_absent(drv, cluster, vms, wanted.absent,
                            wanted.field(absence.ABSENT_KEY))
            operations.modify(
                drv, cluster, relabel, target, wanted.serial,
                wanted.field(upgrade_mod.METADATA_VERSION), wanted.excused,
                renew=wanted.renew, snapshot=wanted.etcd_snapshot)

    # Inputs.

    def _default_key(self):
        return self.conf.kubespray_mgmt.ssh_private_key_file

    def _spec(self, context, vnf_instance, request, operation):
        """The request's spec, checked against the operator's rules
        (:mod:`mgmt_driver.trust`) before any connection is opened; a
        VIP named by its port (``vip_cp_name``) is read from Heat."""
        instantiated = _additional_params(getattr(
            vnf_instance, 'instantiated_vnf_info', None))
        max_size = self.conf.kubespray_mgmt.max_request_size
        if operation == 'instantiate':
            spec = params.parse_params(_additional_params(request),
                                       self._default_key(),
                                       max_size=max_size)
        else:
            spec = merging.parse_for_operation(
                instantiated, _additional_params(request), operation,
                self._default_key(), max_size=max_size)
        spec = trust.apply(spec, trust.Policy.from_conf(
            self.conf, self._package_dir_of(context, vnf_instance)))
        # Terminate needs no VIP, and its VMs and ports may be gone.
        if operation != 'terminate' and spec.external_lb.vip_cp_name and \
                spec.external_lb.vip is None:
            spec = self._resolve_vip(context, vnf_instance, request, spec)
        return spec

    def _resolve_vip(self, context, vnf_instance, request, spec):
        """*spec* with the VIP read from its port in Heat."""
        return heat.resolve_vip(
            spec, heat.HeatNodeFinder(self._heat_factory(
                context, vnf_instance, request)),
            vnf_instance.instantiated_vnf_info.instance_id)

    def _spec_or_none(self, context, vnf_instance, request, operation,
                      log=LOG.warning):
        try:
            return self._spec(context, vnf_instance, request, operation)
        except (exceptions.ParamsInvalid, exceptions.ParamsNotFound) as exc:
            log('%s of VNF instance %s: parameters unusable (%s)',
                operation, _instance_id(vnf_instance), exc)
            return None

    def _vms(self, context, vnf_instance, request, spec):
        """:returns: ``(ClusterNodes, {name: VmRecord or None})``."""
        if spec.nodes is not None:
            cluster = nodes_mod.nodes_from_spec(spec)
            return cluster, dict.fromkeys(cluster.names)
        client = self._heat_factory(context, vnf_instance, request)
        stack_id = vnf_instance.instantiated_vnf_info.instance_id
        records = heat.HeatNodeFinder(client).cluster_vms(stack_id, spec)
        cluster = nodes_mod.build_nodes(spec, [r.address for r in records],
                                        path='heat stack %s' % stack_id)
        by_name = {nodes_mod.node_name(r.address.role, r.address.nic_ip): r
                   for r in records}
        return cluster, by_name

    def _store(self):
        return self._records or records_mod.RecordStore.from_conf(self.conf)

    def _driver(self, context, vnf_instance, spec, pool, operation,
                request=None, cluster=None, vms=None):
        """The :class:`ClusterDriver` of the hook *operation*; the
        workers *request*'s ``additionalParams.absent_nodes`` names, and
        those whose VM Heat reports gone (*vms*: ``{name: VmRecord}``),
        are declared absent in *cluster*."""
        drv = ClusterDriver(spec, vnf_instance.id, pool, self.conf,
                            self._package_dir_of(context, vnf_instance),
                            records=self._store(), operation=operation)
        if request is not None:
            field = 'additionalParams.' + absence.ABSENT_KEY
            _declare_absent(drv, cluster, vms, absence.parse_names(
                _additional_params(request).get(absence.ABSENT_KEY), field),
                field)
        return drv

    def _vims(self, context, vnf_instance):
        """The VIM registry, as :mod:`mgmt_driver.operations` calls it."""
        return TackerVims(self._registry, context, vnf_instance)

    @staticmethod
    def _vim_name(spec, vnf_instance):
        return spec.vim_name or registry.default_vim_name(vnf_instance.id)

    # Hooks that build and change the cluster.

    @statestore.hook
    def instantiate_end(self, context, vnf_instance, request, grant,
                        grant_request, **kwargs):
        spec = self._spec(context, vnf_instance, request, 'instantiate')
        self._instantiate(context, vnf_instance, request, spec)

    def _instantiate(self, context, vnf_instance, request, spec,
                     operation='instantiate_end'):
        cluster, _ = self._vms(context, vnf_instance, request, spec)
        with self._pool_factory() as pool:
            operations.instantiate(
                self._driver(context, vnf_instance, spec, pool, operation),
                cluster, self._vim_name(spec, vnf_instance),
                self._vims(context, vnf_instance))

    @statestore.hook
    def terminate_end(self, context, vnf_instance, request, grant,
                      grant_request, **kwargs):
        spec = self._spec_or_none(context, vnf_instance, request,
                                  'terminate')
        if spec is None:
            # Rollback of an instantiate refused for its parameters.
            with self._pool_factory() as pool:
                operations.release(self._store(), vnf_instance.id, pool,
                                   self._vims(context, vnf_instance))
            return
        self._terminate(context, vnf_instance, spec)

    def _terminate(self, context, vnf_instance, spec,
                   operation='terminate_end'):
        with self._pool_factory() as pool:
            operations.terminate_finish(
                self._driver(context, vnf_instance, spec, pool, operation),
                self._vims(context, vnf_instance))

    @statestore.hook
    def scale_end(self, context, vnf_instance, request, grant,
                  grant_request, **kwargs):
        spec = self._spec(context, vnf_instance, request, 'scale')
        cluster, records = self._vms(context, vnf_instance, request, spec)
        # New gateways (a scale-out of external_lb_param.aspect_id): the
        # members Tacker added.
        new_gateways = _members(records, kwargs.get('scale_out_id_list'),
                                'stack_id', model.ROLE_EXTERNAL_LB)
        with self._pool_factory() as pool:
            operations.scale_out(
                self._driver(context, vnf_instance, spec, pool,
                             'scale_end', request, cluster, records),
                cluster, gateways=new_gateways,
                vim_name=self._vim_name(spec, vnf_instance),
                advice=SCALE_OUT_ADVICE)

    @statestore.hook
    def scale_start(self, context, vnf_instance, request, grant,
                    grant_request, **kwargs):
        spec = self._spec(context, vnf_instance, request, 'scale')
        self._need_heat(spec, 'scale-in')
        cluster, records = self._vms(context, vnf_instance, request, spec)
        if getattr(request, 'type', 'SCALE_IN') == 'SCALE_OUT':
            chosen = set(kwargs.get('scale_name_list') or [])
            match = 'member_name'
        else:
            chosen = set(kwargs.get('scale_out_id_list') or [])
            match = 'stack_id'
        with self._pool_factory() as pool:
            operations.scale_in(
                self._driver(context, vnf_instance, spec, pool,
                             'scale_start', request, cluster, records),
                cluster,
                _members(records, chosen, match, model.ROLE_WORKER),
                _members(records, chosen, match, model.ROLE_EXTERNAL_LB))

    @staticmethod
    def _need_heat(spec, operation):
        # Tacker names the VMs of these operations by Heat ids, which an
        # explicit nodes list cannot be matched against: refuse rather
        # than leave a stale node in Kubernetes and HAProxy.
        if spec.nodes is not None:
            raise exceptions.MgmtDriverParamInvalid(
                param='%s.nodes (%s needs the VMs from Heat; with an '
                      'explicit nodes list use "kubespray-mgmt run" with '
                      '--nodes)' % (model.ROOT, operation))

    def _healed(self, vnf_instance, request, records):
        servers = set(heat.server_ids_for_vnfcs(
            vnf_instance, list(request.vnfc_instance_id)))
        return [name for name, r in records.items()
                if r is not None and r.server_id in servers]

    @statestore.hook
    def heal_start(self, context, vnf_instance, request, grant,
                   grant_request, **kwargs):
        spec = self._spec(context, vnf_instance, request, 'heal')
        if not getattr(request, 'vnfc_instance_id', None):
            self._terminate(context, vnf_instance, spec, 'heal_start')
            return
        self._need_heat(spec, 'heal of single VNFCs')
        cluster, records = self._vms(context, vnf_instance, request, spec)
        with self._pool_factory() as pool:
            operations.heal_begin(
                self._driver(context, vnf_instance, spec, pool,
                             'heal_start', request, cluster, records),
                cluster, self._healed(vnf_instance, request, records))

    @statestore.hook
    def heal_end(self, context, vnf_instance, request, grant,
                 grant_request, **kwargs):
        spec = self._spec(context, vnf_instance, request, 'heal')
        if not getattr(request, 'vnfc_instance_id', None):
            self._instantiate(context, vnf_instance, request, spec,
                              'heal_end')
            return
        cluster, records = self._vms(context, vnf_instance, request, spec)
        with self._pool_factory() as pool:
            operations.heal_finish(
                self._driver(context, vnf_instance, spec, pool, 'heal_end',
                             request, cluster, records),
                cluster, self._healed(vnf_instance, request, records),
                self._vim_name(spec, vnf_instance),
                self._vims(context, vnf_instance),
                new_settings=merging.sets_node_settings(
                    _additional_params(request)))


class TackerVims:
    """Tacker's VIM registry bound to one hook call, with the interface
    of :class:`mgmt_driver.operations.KubeconfigVims`.

    :param vim_registry: a ``registry.TackerVimRegistry`` (or v2's).
    """

    kind = records_mod.TACKER_VIM

    def __init__(self, vim_registry, context, vnf_instance):
        self._registry = vim_registry
        self._context = context
        self._vnf_instance = vnf_instance

    def check_free(self, name, owned_id=None):
        self._registry.check_free(self._context, name, owned_id)

    def register(self, access, owned_id=None):
        return self._registry.register(self._context, self._vnf_instance,
                                       access, owned_id)

    def unregister(self, vim_id):
        return self._registry.unregister(self._context, self._vnf_instance,
                                         vim_id)


def _members(records, chosen, match, role):
    """Names of the VMs of *role* whose ``VmRecord`` field *match*
    (``stack_id``, ``member_name``) is in *chosen*, sorted."""
    chosen = set(chosen or ())
    return sorted(name for name, r in records.items()
                  if r is not None and getattr(r, match) in chosen
                  and r.address.role == role)


def _tacker_package_dir(context, vnf_instance):
    try:
        from tacker.vnflcm import utils as vnflcm_utils
    except ImportError:
        return None
    return vnflcm_utils._get_vnf_package_path(context, vnf_instance.vnfd_id)
