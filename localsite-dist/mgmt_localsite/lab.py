"""One cluster's worth of local site, started and stopped as a unit.

A :class:`Lab` starts the real sshd on every VM address, lays out the
kubespray test double, starts the LB's real HAProxy and greeting servers
on the node ports, and gives the driver's inputs for that site: its
options, the cluster's ``additionalParams`` and spec, and the node set
for any subset of the VMs.  ``kubespray-mgmt demo`` and the lifecycle
benchmark use it; :meth:`Lab.check` says what differs between the
Kubernetes state, HAProxy and the VMs a step should have left.

Nothing listens or connects outside 127.0.0.0/8.
"""

import pathlib
import signal
import sys
import threading
import uuid

from mgmt_driver.model import core
from mgmt_driver.model import nodes
from mgmt_driver.model import params
from mgmt_driver.operations import lcm
from mgmt_driver.remote import ssh
from mgmt_driver.session import driver
from mgmt_localsite import haproxy as haproxy_site
from mgmt_localsite import materialise
from mgmt_localsite import site as site_mod


class LabError(Exception):
    """The local site cannot start here; the message says why."""


class Lab:
    """A started local site for one cluster (use it as a context manager).

    :param ansible: the Ansible server's address.
    :param lb: the load balancer's address.
    :param masters: every master address the cluster may use.
    :param workers: every worker address the cluster may use.
    :param nodeports: how many NodePorts HAProxy forwards.
    :param backends: start greeting servers on the node ports, so that
        :meth:`check` can see which nodes HAProxy serves.
    :param options: ``[kubespray_mgmt]`` values over the site's.
    """

    def __init__(self, ansible, lb, masters, workers, nodeports=2,
                 backends=True, options=None):
        self.ansible = ansible
        self.lb = lb
        self.masters = list(masters)
        self.workers = list(workers)
        self.nodeport_count = nodeports
        self.want_backends = backends
        self.options = dict(options or {})
        self.sshd = self.site = self.haproxy = self.backends = None
        self.api_port = None
        self.nodeports = []
        self.conf = None
        self.additional_params = None

    # --- life ---------------------------------------------------------

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc_info):
        self.stop()

    def start(self):
        reason = site_mod.unavailable()
        if reason:
            raise LabError(reason)
        if self.want_backends:
            busy = [a for a in self.masters
                    if not site_mod.bindable(a, site_mod.APISERVER_PORT)]
            if busy:
                raise LabError('port %d is in use on %s' % (
                    site_mod.APISERVER_PORT, ', '.join(busy)))
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self):
        ports = haproxy_site.free_ports(1 + self.nodeport_count,
                                        [self.lb] + self.workers)
        self.api_port, self.nodeports = ports[0], ports[1:]
        self._start_sshd([self.ansible, self.lb] + self.masters +
                         self.workers)
        if self.want_backends:
            self.backends = site_mod.Backends(self.masters, self.workers,
                                              self.nodeports)
        root = pathlib.Path(self.sshd.scratch) / (
            'site-' + uuid.uuid4().hex[:8])
        self.site = materialise(root, owner=self.sshd.user)
        self.haproxy = site_mod.LbHaproxy(root / 'lb', self.lb,
                                          self.api_port, self.sshd.user)
        self.haproxy.start()
        self.conf = site_mod.make_conf(
            self.site, self.haproxy, root / 'known_hosts',
            key_dirs=[self.sshd.key_dir],
            kubeconfig_dir=str(root / 'kubeconfigs'), **self.options)
        self.additional_params = site_mod.cluster_params(
            self.sshd, self.site, self.ansible, self.api_port,
            self.nodeports)

    def _start_sshd(self, addresses):
        """Start ``self.sshd`` serving *addresses* (a subclass may serve
        some of them otherwise)."""
        self.sshd = site_mod.SiteSshd(addresses, self.ansible)
        self.sshd.start()

    def stop(self):
        """Stop etcd, HAProxy, the greeting servers and sshd; remove the
        files."""
        if self.site is not None:
            self.site.stop_etcd()
        if self.haproxy is not None:
            self.haproxy.stop()
        if self.backends is not None:
            self.backends.stop()
            self.backends = None
        if self.sshd is not None:
            self.sshd.cleanup()

    # --- driver inputs ------------------------------------------------

    @property
    def root(self):
        return self.site.root

    def spec(self):
        return params.parse_params(self.additional_params)

    def topology(self, masters, workers):
        """A topology document (as ``kubespray-mgmt run`` reads)."""
        return {'masters': [{'ssh_ip': a} for a in masters],
                'workers': [{'ssh_ip': a} for a in workers],
                'external_lb': {'ssh_ip': self.lb}}

    def cluster(self, spec, masters, workers):
        """The node set of the VMs at *masters* and *workers*."""
        return nodes.build_nodes(spec, nodes.load_topology(
            self.topology(masters, workers)))

    def driver(self, spec, instance_id, progress=None, operation=None):
        """A :class:`~mgmt_driver.session.driver.ClusterDriver` with a fresh
        pool counting into a fresh :class:`~mgmt_driver.remote.ssh.Stats`.

        :param operation: the ``run`` command it does (``scale-out``):
            its playbook logs are named after it, as ``run`` names them.
        :returns: ``(driver, stats)``; close ``driver.pool`` after use.
        """
        stats = ssh.Stats()
        pool = ssh.ConnectionPool(ssh.SSHSettings.from_conf(self.conf),
                                  stats=stats)
        named = {} if operation is None else {
            'operation': lcm.log_name(operation)}
        return driver.ClusterDriver(spec, instance_id, pool, conf=self.conf,
                                    progress=progress, **named), stats

    def workspace(self, instance_id):
        return self.site.root / 'inventories' / instance_id

    # --- observations -------------------------------------------------

    def check(self, masters, workers, timeout=site_mod.DEADLINE):
        """What differs from a cluster of *masters* and *workers*.

        Compares the Kubernetes nodes (roles, readiness), the etcd
        members and, with backends, what HAProxy really serves on the
        API port and on each NodePort.

        :returns: a list of problems, empty when everything agrees.
        """
        problems = []
        want = dict([(site_mod.name_of(core.ROLE_MASTER, a),
                      ['control-plane']) for a in masters] +
                    [(site_mod.name_of(core.ROLE_WORKER, a), ['worker'])
                     for a in workers])
        state = self.site.nodes()
        got = {name: node['roles'] for name, node in state.items()}
        if got != want:
            problems.append('Kubernetes nodes %s, expected %s' % (
                sorted(got), sorted(want)))
        not_ready = sorted(n for n, node in state.items()
                           if not node['ready'])
        if not_ready:
            problems.append('not ready: %s' % ', '.join(not_ready))
        masters_named = sorted(site_mod.name_of(core.ROLE_MASTER, a)
                               for a in masters)
        if sorted(self.site.etcd_members()) != masters_named:
            problems.append('etcd members %s, expected %s' % (
                sorted(self.site.etcd_members()), masters_named))
        if self.backends is not None and masters:
            problems += self._check_served(masters, workers, timeout)
        return problems

    def _check_served(self, masters, workers, timeout):
        wanted = [(self.api_port, {(a, site_mod.APISERVER_PORT)
                                   for a in masters})]
        wanted += [(port, {(a, port) for a in workers})
                   for port in self.nodeports]
        problems = []
        for port, expected in wanted:
            try:
                site_mod.wait_served(self.lb, port, expected, timeout)
            except AssertionError as exc:
                problems.append(str(exc))
        return problems

    def runs_since(self, count):
        """Playbook runs logged by the double after the first *count*."""
        return self.site.runs()[count:]


def stop_on_sigterm():
    """Make SIGTERM unwind like Ctrl-C, so that a ``with Lab(...)`` block
    stops its processes when the demo or a benchmark is killed."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
