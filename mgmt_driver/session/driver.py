"""The context of one operation, and Tacker v1's hooks.

:class:`ClusterDriver` is the per-operation context: connections,
workspace and lock, playbook runner, records, inventory upload, and the
worker steps (join, drain, remove); what it caches is in one
:class:`Reads`, and its spec never changes.  The operations that
compose these steps live in :mod:`mgmt_driver.operations.lcm`;
:class:`LcmHooks` only turns Tacker v1's hook calls into their inputs
(:mod:`mgmt_driver.adapters.v2` and :mod:`mgmt_driver.adapters.cli` are the
other adapters).  Rendering lives in pure modules, remote work in the modules
that own it.

Every step converges when run again: the workspace is reused, documents
are rewritten whole, kubespray's playbooks are idempotent, node removal
skips nodes that are already gone and the HAProxy configuration is only
replaced when it differs.  The inventory on the Ansible server is the
record of the control-plane order, which kubespray cares about.

What the driver may delete or forget is never taken from the request or
the Ansible server: every host is put in the instance's local record
(:mod:`mgmt_driver.state.records`) before it is contacted, a host key when one
of the instance's own logins recorded it (only those are forgotten
again), the VIM when it is registered, and terminate acts on that record
only.  Terminate always finishes its local part: a remote side that
fails is reported as a warning.  Each hook of :class:`LcmHooks` first
passes :func:`mgmt_driver.state.statestore.hook` (the state store is the shared
one, the instance's record is there, no other operation of the instance
runs).
"""

import dataclasses
import posixpath
import time

from mgmt_driver.common import conf as kconf
from mgmt_driver.common import deadline as deadlines
from mgmt_driver.common import exceptions
from mgmt_driver.common import safetext
from mgmt_driver.common import safeyaml
from mgmt_driver.model import absence
from mgmt_driver.model import core
from mgmt_driver.model import labels as labels_mod
from mgmt_driver.remote import detached
from mgmt_driver.remote import inventory
from mgmt_driver.remote import kubectl
from mgmt_driver.remote import kubespray
from mgmt_driver.remote import loadbalancer
from mgmt_driver.remote import ssh
from mgmt_driver.remote import trust
from mgmt_driver.state import follow
from mgmt_driver.state import kubeversion
from mgmt_driver.state import records as records_mod
from mgmt_driver.state import registry

LOG = safetext.logger(__name__)
#: The attribute of a warning's log record that says it was already
#: shown as a progress line (:meth:`ClusterDriver.warn`): a handler that
#: turns the driver's warnings into progress lines skips it.
SHOWN_AS_PROGRESS = 'shown_as_progress'

#: The VNF package directory holding private keys uploaded for Ansible.
KEY_DIR = 'keys'


_PROGRESS_LINES = ('PLAY [', 'TASK [', 'PLAY RECAP',
                   # a run queued for a slot (detached.SlotReporter)
                   'waiting for a playbook slot', 'got playbook slot',
                   # which run, on which nodes, and its log
                   'running ', 'log: ')

#: What a failed playbook run raises.
_PLAYBOOK_ERRORS = (exceptions.MgmtDriverRemoteCommandError,
                    exceptions.MgmtDriverRemoteCommandTimeOut)




@dataclasses.dataclass
class Settings:
    """What the driver needs from ``[kubespray_mgmt]`` besides SSH."""

    kubectl_command: str = 'kubectl'
    kubectl_kubeconfig: str | None = '/etc/kubernetes/admin.conf'
    kubectl_sudo: str = 'auto'
    admin_service_account: str = 'tacker-admin'
    drain_timeout: int = 600
    fact_cache_margin: int = 3600
    master_exit_timeout: int = 5

    @classmethod
    def from_conf(cls, conf=None):
        group = (conf or kconf.CONF).kubespray_mgmt
        return cls(kubectl_command=group.kubectl_command,
                   kubectl_kubeconfig=group.kubectl_kubeconfig or None,
                   kubectl_sudo=group.kubectl_sudo,
                   admin_service_account=group.admin_service_account,
                   drain_timeout=group.drain_timeout,
                   fact_cache_margin=group.fact_cache_margin,
                   master_exit_timeout=group.ssh_master_exit_timeout)


#: Workspace documents every later operation reads back (through
#: :mod:`safeyaml`, which refuses more than ``MAX_CHARS``).
_READ_BACK = (inventory.HOSTS_FILE, labels_mod.RECORD_FILE)
#: The records a claim reads ahead (Reads.opened): the inventory, the
#: nodes' labels and taints, the Kubernetes version of the last upgrade,
#: the etcd snapshots pinned by an unfinished operation (named here as
#: ``operations.etcdsnapshots.PINNED_RECORD``, a layer above; a test
#: keeps the two equal), which a heal's end reads.
_OPENED_RECORDS = (inventory.HOSTS_FILE, labels_mod.RECORD_FILE,
                   kubeversion.RECORD_FILE, 'etcd-snapshots-pinned.txt')
#: Playbooks after which a control-plane node that ran kubectl still
#: does (they add nodes or refresh facts; the others may remove, reset
#: or restart it).
_KEEPS_MASTERS = frozenset({'cluster.yml', 'scale.yml', 'facts.yml'})


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


#: A :class:`Reads` field not read yet.
UNREAD = object()


@dataclasses.dataclass
class Reads:
    """Everything a :class:`ClusterDriver` caches, in one place: what it
    read from the Ansible server and the nodes, kept until the next
    :meth:`~ClusterDriver.claim` (a new hook reads afresh) or until
    terminate deletes the workspace."""

    #: The ``kubespray.Runner``: the checkout's layout and versions,
    #: checked once.
    runner: object = None
    #: What the claim's ``kubespray.Workspace.open`` found: the
    #: checkout's layout (for the runner), and ``{record: text}`` of the
    #: records it read, each taken once (:meth:`ClusterDriver._record`).
    opened: object = None
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
    #: ``{key: KubectlClient}``: the control-plane node kubectl answered
    #: on, per list of candidates (:meth:`ClusterDriver.kubectl_client`).
    kubectl: dict = dataclasses.field(default_factory=dict)
    #: ``(playbook runs then, kubectl.NodeList)`` of the last
    #: :meth:`ClusterDriver.kubectl_nodes`, or None.
    nodes: tuple | None = None
    #: The text of the inventory last uploaded (``hosts.yaml``; None:
    #: none), as read or written by this claim; :data:`UNREAD` before.
    recorded_hosts: object = UNREAD


class ClusterDriver:
    """The context of one operation on one cluster, and its steps.

    :param spec: the :class:`~mgmt_driver.model.core.ClusterSpec`.
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
        :mod:`mgmt_driver.remote.trust`.
    :param records: the ``records.RecordStore`` of the instances
        (default: from *conf*).
    :param operation: the hook or command it runs for (``scale_end``);
        names the playbook logs and the lock (:meth:`claim`).
    :raises ParamsInvalid: the operator's rules refuse a key file, the
        default key or an extra var (before any remote work).
    """

    #: What the operation's waits sleep and measure with (tests set
    #: fakes): the etcd wait before a member removal.
    sleep = staticmethod(time.sleep)
    clock = staticmethod(time.monotonic)

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
        #: Its wall-clock bound: every wait of the session consults it
        #: (the pool hands it to each connection).
        self.deadline = _deadline_of(self.conf, operation)
        pool.deadline = self.deadline
        self.records = records or records_mod.RecordStore.from_conf(
            self.conf)
        self.records.path(instance_id)  # refuses an unsafe id early
        #: Hosts already put in the local record (never forgotten: the
        #: record is local and only grows until terminate).
        self._remembered = set()
        #: ``{node name: identity labels}`` (mgmt_driver.operations.autoheal),
        #: or None: no identity labels (v1, the command line).
        self.node_identity = None
        #: Nodes the operation already knows are dead: an automatic
        #: heal's, found not Ready by its guard rails (Tacker v2).  Only
        #: context: :func:`mgmt_driver.operations.gates.undrained` decides
        #: which nodes a removal leaves undrained.
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
        """Log a warning and show it as a progress line (once: the
        record says so, :data:`SHOWN_AS_PROGRESS`)."""
        message = text % args if args else text
        LOG.warning('[%s] %s', self.instance_id, message,
                    extra={SHOWN_AS_PROGRESS: bool(self._progress)})
        if self._progress:
            self._progress('warning: ' + message)

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
        return self.pool.connection(node.ssh_address,
                                    ssh.credentials_for(login), node.ssh_port,
                                    on_new_key=self._claim_key)

    def _ansible(self):
        login = self.spec.ansible.login
        self._remember([records_mod.Host(self.spec.ansible.ip_address,
                                         int(login.port),
                                         records_mod.ROLE_ANSIBLE)])
        return self.pool.connection(self.spec.ansible.ip_address,
                                    ssh.credentials_for(login), login.port)

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

        One command.  A playbook run of another operation holding the cluster's
        lock (see :mod:`mgmt_driver.remote.detached`) makes this wait up to
        ``playbook_lock_wait`` and then refuse, before anything is changed; one
        of the same operation (a hook run again after its conductor died) is
        followed when its playbook comes.  What an earlier claim of this
        context read is read afresh, as a new hook would (the command line runs
        both halves of a heal in one context).

        :param operation: the hook or command (``scale_end``); names the
            playbook logs (default: the one given to the constructor).
        :raises ClusterBusy: the other run did not end in time.
        """
        if operation is not None:
            self.operation = operation
        self._forget_reads()
        workspace = self._workspace()
        group = self.conf.kubespray_mgmt
        detached.wait_while_busy(
            lambda: self._open(workspace),
            lambda holder: holder.operation == self.operation,
            group.playbook_lock_wait, workspace.conn.host, workspace.path,
            group.playbook_lock_poll, progress=self.step)
        self._reads.workspace_ready = True

    def _open(self, workspace):
        # The claim's reads of the Ansible server in its one command:
        # the layout the runner checks and the records a hook reads.
        ssh_settings = ssh.SSHSettings.from_conf(self.conf)
        self._reads.opened = workspace.open(
            self.spec.ansible.kubespray_root_path,
            kubespray.PlaybookSettings.from_conf(
                self.conf, forks=self.spec.kubespray.forks).ansible_playbook,
            _OPENED_RECORDS, min(ssh_settings.max_file_size,
                                 ssh_settings.max_output // 8))
        return self._reads.opened.holder

    def _record(self, name):
        """The text of record *name* the claim read (None: missing), or
        ``kubespray.NOT_READ``: each is taken once, a later read goes to
        the server."""
        opened = self._reads.opened
        if opened is None:
            return kubespray.NOT_READ
        return opened.records.pop(name, kubespray.NOT_READ)

    def _wrote(self, names):
        # What the claim read of these records is stale now.
        if self._reads.opened is not None:
            for name in names:
                self._reads.opened.records.pop(name, None)

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
            layout = self._layout(conn, root, settings.ansible_playbook)
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
                kubeversion.RECORD_FILE, kubeversion.parse_record,
                self._record(kubeversion.RECORD_FILE))
            self._reads.runner = kubespray.Runner(
                conn, root, layout, workspace,
                inventory=inventory.HOSTS_FILE,
                extra_vars_files=(inventory.CLUSTER_VARS_FILE,
                                  inventory.SECRET_VARS_FILE),
                settings=settings, on_progress=self._playbook_line,
                operation=self.operation)
            self._reads.runner.on_wait = self._note_waiting
        return self._reads.runner

    def _note_waiting(self, what):
        """Note what the operation waits for in the instance's record
        (``kubespray-mgmt list``); a note that cannot be written is only
        logged."""
        try:
            self.records.set_waiting(self.instance_id, what)
        except (OSError, exceptions.InstanceRecordInvalid,
                exceptions.SharedFileBusy) as exc:
            LOG.warning('[%s] cannot note what it waits for: %s',
                        self.instance_id, exc)

    def _layout(self, conn, root, ansible_playbook):
        """The checkout's layout: what the claim found, else asked now."""
        opened = self._reads.opened
        if opened is not None:
            return kubespray.parse_layout(opened.layout_output, conn.host,
                                          root)
        return kubespray.detect_layout(conn, root, ansible_playbook)

    def read_record(self, name, parse):
        """The workspace's record file *name*, parsed by *parse*
        (``kubespray.Workspace.read_record``): what the claim read
        ahead, unless written since (:meth:`_record`)."""
        return self._workspace().read_record(name, parse, self._record(name))

    def write_record(self, name, text):
        """Write the workspace's record file *name* (mode 0644, as the
        inventory), e.g. a day-2 operation's progress."""
        self._wrote([name])
        self._workspace().upload({name: text}, mode=inventory.PUBLIC_MODE)

    def rendered_spec(self):
        """The request's spec (never changed) with the Kubernetes version
        the last upgrade recorded, if any, spelled as the request spelled
        its own (with or without a "v": kubespray up to v2.27 wants one)."""
        version = self._reads.kube_version
        if version is None:
            return self.spec
        options = self.spec.kubespray
        spelled = options.kube_version is not None and \
            options.kube_version.v_prefix
        return dataclasses.replace(self.spec, kubespray=dataclasses.replace(
            options, kube_version=core.KubeVersion(version, spelled)))

    def record_kube_version(self, version, others=None):
        """Record *version* (and the *others* records of the upgrade,
        ``{name: text}``) in the workspace, one transfer: every later
        document renders it (:meth:`rendered_spec`)."""
        documents = dict(others or {}, **{
            kubeversion.RECORD_FILE: kubeversion.render_record(version)})
        self._wrote(documents)
        self._workspace().upload(documents, mode=inventory.PUBLIC_MODE)
        self._reads.kube_version = version

    def _forget_reads(self):
        # A new hook (claim) or a workspace that is gone: read afresh.
        if self._reads.runner is not None:
            self._past_timings += self._reads.runner.timings
            self._past_runs += self._reads.runner.runs
        self._reads = Reads()

    def node_settings(self):
        """``{node name: NodeSettings}`` recorded in the workspace
        (:mod:`mgmt_driver.model.labels`) with this operation's changes: a
        copy; change them with :meth:`forget_node_settings` and
        :meth:`set_node_settings`, written with the next inventory.

        :raises RemoteDataInvalid: the record was tampered with.
        """
        if self._reads.node_settings is None:
            self._reads.node_settings = self._workspace().read_record(
                labels_mod.RECORD_FILE, labels_mod.parse_record,
                self._record(labels_mod.RECORD_FILE))
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
        :func:`mgmt_driver.remote.kubespray.run_entry` dicts."""
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

    def upload_inventory(self, cluster, extra=None, gone=()):
        """Write the inventory of *cluster* into the workspace.

        Private keys named in the request are uploaded too (0600), and
        host_vars of nodes no longer in the cluster are deleted; all in
        one transfer (:meth:`~mgmt_driver.remote.kubespray.Workspace.replace`).

        :param extra: ``{name: (text, mode)}`` more top-level documents
            for the same transfer (a playbook's vars file), or None.
        :param gone: nodes taken out: Ansible's SSH masters to them close.
        """
        self._remember([_host_of(n)
                        for n in cluster.k8s_nodes + cluster.gateways])
        runner = self.runner()
        spec = self.rendered_spec()
        key_paths = inventory.remote_key_paths(
            spec, cluster, runner.workspace.file(KEY_DIR))
        # A node's labels and taints are fixed when it first appears
        # here; the record keeps them (mgmt_driver.model.labels).
        settings = self.node_settings()
        for node in cluster.k8s_nodes:
            settings.setdefault(node.name, spec.node_settings(node))
        if self.node_identity is not None:
            # Tacker v2: each node's VNF instance and VNFC, laid over
            # whatever the record holds (mgmt_driver.operations.autoheal).
            settings = {name: labels_mod.with_identity(
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
        self._wrote(documents)
        runner.workspace.replace({**(extra or {}), **documents}, gone=[
            (n.ssh_address, n.ssh_port, self.spec.login_for(n.role).username)
            for n in gone], exit_timeout=self.settings.master_exit_timeout)
        self._reads.recorded_hosts = documents[inventory.HOSTS_FILE][0]
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

        :returns: an :class:`~mgmt_driver.remote.inventory.RecordedInventory`
            (empty when there is none).
        :raises RemoteDataInvalid: the file was tampered with.
        """
        conn = self._ansible()
        path = self._workspace().file(inventory.HOSTS_FILE)
        if self._reads.recorded_hosts is UNREAD:
            text = self._record(inventory.HOSTS_FILE)
            self._reads.recorded_hosts = conn.read_file(
                path, missing_ok=True) if text is kubespray.NOT_READ else text
        return inventory.parse_recorded(self._reads.recorded_hosts,
                                        conn.host, path)

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
        key, masters = _kubectl_key(cluster, exclude, self.playbook_runs)
        if key not in self._reads.kubectl:
            self._reads.kubectl[key] = kubectl.client_on_first_reachable(
                [self.connection(n) for n in masters],
                **_kubectl_args(self.settings, self.conf, self.spec))
        return self._reads.kubectl[key]

    def kubectl_nodes(self, cluster, exclude=()):
        """``(KubectlClient, kubectl.NodeList)`` of :meth:`kubectl_client`:
        one command if no client was chosen yet; see :meth:`node_read`."""
        key, masters = _kubectl_key(cluster, exclude, self.playbook_runs)
        return _nodes_read(self._reads, key, len(self.playbook_runs), lambda: (
            [self.connection(n) for n in masters],
            _kubectl_args(self.settings, self.conf, self.spec)))

    def node_read(self):
        """:meth:`kubectl_nodes`' last list if no playbook ran since."""
        runs, listed = self._reads.nodes or (None, None)
        return listed if runs == len(self.playbook_runs) else None

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
                node.ssh_address, ssh.credentials_for(login), node.ssh_port,
                on_new_key=self._claim_key)
        return self._reads.reachability[node.name]

    def forget_host_keys(self, cluster, names, drop=True):
        """Forget the host keys of the nodes or gateways *names* of
        *cluster*: only those the instance owns (mgmt_driver.state.records).

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
            self._workspace().remove(self.settings.master_exit_timeout)
        except Exception as exc:  # whatever the remote side did
            self.warn('could not remove the workspace %s on the Ansible '
                      'server %s (remove it by hand): %s', path, host, exc)
            return False
        self.step('workspace %s removed', path)
        return True


def _kubectl_key(cluster, exclude, playbook_runs):
    """The cache key of kubectl's host among *cluster*'s masters not in
    *exclude*, and those masters.

    :raises MgmtDriverOtherError: no master is left.
    """
    exclude = set(exclude)
    masters = [n for n in cluster.masters if n.name not in exclude]
    if not masters:
        raise exceptions.MgmtDriverOtherError(
            error_message='no control-plane node is left to run '
                          'kubectl on')
    # The node that answered a moment ago answers again, unless a
    # playbook that removes or resets nodes ran since: ask once.
    key = (tuple((n.name, n.ssh_address, n.ssh_port) for n in masters),
           sum(1 for run in playbook_runs
               if posixpath.basename(run['playbook']) not in _KEEPS_MASTERS))
    return key, masters


def _nodes_read(reads, key, runs, candidates):
    """:meth:`ClusterDriver.kubectl_nodes` on the claim's *reads*: the
    client cached at *key*, or the first of ``candidates()`` (the
    connections and the client's arguments) where kubectl runs, chosen
    by the same command that lists the nodes."""
    if key in reads.kubectl:
        client = reads.kubectl[key]
        listed = client.node_list()
    else:
        connections, args = candidates()
        client, listed = kubectl.nodes_on_first_reachable(connections,
                                                          **args)
        reads.kubectl[key] = client
    reads.nodes = (runs, listed)
    return client, listed


def _kubectl_args(settings, conf, spec):
    """The :class:`~mgmt_driver.remote.kubectl.KubectlClient` arguments."""
    return dict(
        kubectl=settings.kubectl_command,
        kubeconfig=settings.kubectl_kubeconfig,
        sudo=kconf.use_sudo(settings.kubectl_sudo,
                            spec.master.login.username),
        settings=kubectl.KubectlSettings.from_conf(conf))


def _deadline_of(conf, operation):
    """The :class:`~mgmt_driver.common.deadline.Deadline` of *operation*,
    starting now.

    :raises MgmtDriverParamInvalid: its hook_deadlines value is invalid.
    """
    try:
        seconds, setting = kconf.hook_deadline(conf, operation)
    except ValueError as exc:
        raise exceptions.MgmtDriverParamInvalid(param=str(exc)) from None
    return deadlines.Deadline(operation, seconds, setting)


def _host_of(node):
    return records_mod.Host(node.ssh_address, int(node.ssh_port), node.role)
