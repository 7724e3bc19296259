"""The typed cluster spec: what a validated request means.

:func:`mgmt_driver.model.params.parse_params` builds a :class:`ClusterSpec`
from a request's ``additionalParams``; every other module reads the
spec, never the request.  The values are frozen dataclasses, and a
secret (a password) stays out of every ``repr``.  ``samples/README.rst``
documents the request keys the fields come from.
"""

import dataclasses
import functools
import ipaddress
import re
import types

from mgmt_driver.common import exceptions

#: The key of ``additionalParams`` that holds the driver's parameters.
ROOT = 'k8s_cluster_installation_param'

ROLE_MASTER = 'master'
ROLE_WORKER = 'worker'
ROLE_EXTERNAL_LB = 'external_lb'
ROLES = (ROLE_MASTER, ROLE_WORKER, ROLE_EXTERNAL_LB)
#: The section of ``k8s_cluster_installation_param`` of each role.
ROLE_SECTIONS = {ROLE_MASTER: 'master_node', ROLE_WORKER: 'worker_node',
                 ROLE_EXTERNAL_LB: 'external_lb_param'}

# kubespray's own defaults (roles/kubespray_defaults), made explicit so that
# the overlap check and no_proxy always know the cluster's networks.
DEFAULT_POD_CIDR = '10.233.64.0/18'
DEFAULT_SERVICE_CIDR = '10.233.0.0/18'
DEFAULT_SSH_PORT = 22
DEFAULT_API_PORT = 8383
DEFAULT_NODEPORT_RANGE = (30000, 32767)
DEFAULT_NODE_PREFIX = 24  # kubespray's kube_network_node_prefix


@dataclasses.dataclass(frozen=True)
class Login:
    """How the driver and Ansible log in to the hosts of one role.

    :param username: the SSH user.
    :param password: its password, or None.  Never in ``repr``.
    :param key_file: private key file on the conductor host, or None; when
        both are set, Ansible uses the key.
    :param port: the SSH port (a node entry may override it).
    :param default_key: *key_file* is the operator's default key
        (``[kubespray_mgmt] ssh_private_key_file``), not the request's.
    :param key_text: the key itself, once
    :func:`mgmt_driver.remote.trust.apply`
        has read it; nothing reads *key_file* again after that.
    :param become_password: sudo's password when it is not *password*
        (``become_password``), or None.  Never in ``repr``.
    :param passwordless_sudo: the user's sudo asks no password
        (``passwordless_sudo``: NOPASSWD, or the user is root).
    """

    username: str
    password: str | None = dataclasses.field(default=None, repr=False)
    key_file: str | None = None
    port: int = DEFAULT_SSH_PORT
    default_key: bool = False
    key_text: str | None = dataclasses.field(default=None, repr=False)
    become_password: str | None = dataclasses.field(default=None,
                                                    repr=False)
    passwordless_sudo: bool = False

    @property
    def sudo_password(self):
        """The password sudo is given on this role's VMs, or None.

        ``become_password`` when given; else the login ``password`` (the
        usual sudoers rule asks the user's own password), unless
        ``passwordless_sudo`` says sudo asks none.  A key login without
        either gets None: kubespray's and the driver's sudo run
        non-interactively and fail if it asks.
        """
        if self.passwordless_sudo:
            return None
        return self.become_password or self.password



@dataclasses.dataclass(frozen=True)
class NodeGroupSpec:
    """``master_node`` or ``worker_node``.

    :param role: :data:`ROLE_MASTER` or :data:`ROLE_WORKER`.
    :param labels: sorted ``(key, value)`` pairs for kubespray's
        ``node_labels``; :attr:`label_map` gives them as a dict.
    :param taints: ``key=value:Effect`` strings for kubespray's
        ``node_taints``, in the given order.
    """

    role: str
    aspect_id: str | None
    ssh_cp_name: str | None
    nic_cp_name: str | None
    login: Login
    labels: tuple = ()
    taints: tuple = ()

    @property
    def label_map(self):
        return dict(self.labels)

    @property
    def settings(self):
        """The group's :class:`NodeSettings`."""
        return NodeSettings(self.labels, self.taints)


@dataclasses.dataclass(frozen=True)
class NodeSettings:
    """The labels and taints one Kubernetes node is given.

    :param labels: sorted ``(key, value)`` pairs (kubespray's
        ``node_labels``).
    :param taints: ``key=value:Effect`` strings (``node_taints``).
    """

    labels: tuple = ()
    taints: tuple = ()

    @property
    def label_map(self):
        return dict(self.labels)

    def overlaid(self, top):
        """These settings with *top*'s laid over them.

        Labels are merged, *top*'s value winning on the same key.  Taints
        keep their order, *top*'s after these; a taint of *top* takes the
        place of one here with the same key and effect (a node cannot
        hold both: Kubernetes keys a taint by key and effect).

        :param top: a :class:`NodeSettings` (a pool's).
        :returns: a new :class:`NodeSettings`.
        """
        labels = dict(self.labels)
        labels.update(top.labels)
        replacing = {taint_slot(taint): taint for taint in top.taints}
        # A dict keeps the first of each taint, in order, in linear time.
        taints = dict.fromkeys(
            [replacing.get(taint_slot(t), t) for t in self.taints] +
            list(top.taints))
        return NodeSettings(tuple(sorted(labels.items())), tuple(taints))


def taint_slot(taint):
    """``(key, effect)`` of a ``key=value:Effect`` (or ``key:Effect``)
    taint: a node holds at most one taint of each."""
    pair, _, effect = taint.rpartition(':')
    return pair.partition('=')[0], effect


@dataclasses.dataclass(frozen=True)
class NodePoolSpec:
    """One entry of ``node_pools``: labels and taints for some nodes.

    An *aspect pool* has VMs of its own: the workers of the scaling group
    *aspect_id* (Heat), or the worker entries that name it (``nodes``, a
    topology file).  A *listed pool* names existing or future Kubernetes
    nodes, masters included, in *nodes*.

    :param name: the pool's name (a DNS-1123 label).
    :param nodes: normalised node names and cluster addresses; empty for
        an aspect pool.
    :param labels: sorted ``(key, value)`` pairs, laid over the role's.
    :param taints: ``key=value:Effect`` strings, after the role's.
    """

    name: str
    aspect_id: str | None = None
    ssh_cp_name: str | None = None
    nic_cp_name: str | None = None
    nodes: tuple = ()
    labels: tuple = ()
    taints: tuple = ()

    @property
    def listed(self):
        """True for a pool that lists its nodes."""
        return bool(self.nodes)

    @property
    def settings(self):
        """The pool's own :class:`NodeSettings`."""
        return NodeSettings(self.labels, self.taints)

    @functools.cached_property
    def _listed(self):
        # Asked once per node of the cluster: a set, not the tuple.
        return frozenset(self.nodes)

    def lists(self, *entries):
        """True when *nodes* holds one of *entries* (normalised names
        or addresses)."""
        return any(entry in self._listed for entry in entries)


def _ip_or_text(text):
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return text


@dataclasses.dataclass(frozen=True)
class ProxySpec:
    """``proxy``; :attr:`enabled` is False when no proxy URL is set.

    :param no_proxy: the user's extra no_proxy entries, in order.
    """

    http_proxy: str | None = dataclasses.field(default=None, repr=False)
    https_proxy: str | None = dataclasses.field(default=None, repr=False)
    no_proxy: tuple = ()
    k8s_node_cidr: object = None

    @property
    def enabled(self):
        return bool(self.http_proxy or self.https_proxy)


@dataclasses.dataclass(frozen=True)
class AnsibleSpec:
    """``ansible``: the server that runs kubespray, and where."""

    ip_address: str
    login: Login
    kubespray_root_path: str
    transferring_inventory_path: str


@dataclasses.dataclass(frozen=True)
class ExternalLbSpec:
    """``external_lb_param``: the HAProxy VM in front of the cluster.

    :param script_path: package-relative script to run on the LB VM, or
        None.
    :param nodeport_range: ``(first, last)`` port, both included.
    :param vip: the virtual IP the gateways share (keepalived), or None
        for a single gateway.
    :param vip_cp_name: instead of *vip*, the Heat resource (a Neutron
        port) whose address is the VIP; the driver fills *vip* from it.
    :param vrrp_router_id: VRRP ``virtual_router_id`` (1-255), with *vip*.
    :param vrrp_password: VRRP authentication password (1-8 characters,
        keepalived uses no more), with *vip*.  Never in ``repr``.
    :param aspect_id: the scaling aspect (Heat scaling group) of the
        gateways, with *vip*; None for one gateway in the top stack.
    """

    ssh_cp_name: str | None
    nic_cp_name: str | None
    login: Login
    script_path: str | None
    api_port: int = DEFAULT_API_PORT
    nodeport_range: tuple = DEFAULT_NODEPORT_RANGE
    vip: str | None = None
    vrrp_router_id: int | None = None
    vrrp_password: str | None = dataclasses.field(default=None, repr=False)
    vip_cp_name: str | None = None
    aspect_id: str | None = None

    @property
    def highly_available(self):
        """True when gateways share a VIP through VRRP (:attr:`vip`, or
        :attr:`vip_cp_name` until the driver resolved it)."""
        return self.vip is not None or self.vip_cp_name is not None


# A Kubernetes release: full x.y.z, optional "v".  Bounded digit runs.
_KUBE_VERSION_RE = re.compile(r'(v?)([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,4})')


@dataclasses.dataclass(frozen=True)
class KubeVersion:
    """A Kubernetes release, as kubespray's ``kube_version`` names it.

    :param number: ``(major, minor, patch)``: what versions compare by.
    :param v_prefix: written with a "v" (``v1.31.4``, as kubespray up to
        v2.27 wants it; v2.28 and later want ``1.31.4``): the driver
        renders the request's spelling, and an upgrade's target without.
    """

    number: tuple
    v_prefix: bool = False

    @classmethod
    def parse(cls, text):
        """The version *text* names (``'1.34.3'``, ``'v1.31.4'``), or
        None when it is not one."""
        match = _KUBE_VERSION_RE.fullmatch(text) if isinstance(
            text, str) else None
        if match is None:
            return None
        return cls(tuple(int(part) for part in match.groups()[1:]),
                   v_prefix=bool(match.group(1)))

    def __str__(self):
        return ('v' if self.v_prefix else '') + '%d.%d.%d' % self.number


@dataclasses.dataclass(frozen=True)
class KubesprayOptions:
    """``kubespray``: what is passed to kubespray besides the inventory.

    :param extra_vars: read-only mapping passed through as extra vars,
        without ``kube_version``.
    :param kube_version: ``extra_vars.kube_version`` as a
        :class:`KubeVersion`, or None for the checkout's default.  An
        upgrade recorded in the workspace replaces it in the spec the
        driver renders (``ClusterDriver.rendered_spec``).
    :param forks: ``ansible-playbook --forks``, or None for the option
        ``[kubespray_mgmt] ansible_forks``.
    :param version: the kubespray version the checkout must have
        (``'2.24.0'``, no "v"), or None to accept what is there.
    :param reset_on_terminate: run kubespray's ``reset.yml`` on terminate.
    """

    extra_vars: types.MappingProxyType = dataclasses.field(
        default_factory=lambda: types.MappingProxyType({}))
    forks: int | None = None
    version: str | None = None
    reset_on_terminate: bool = False
    kube_version: KubeVersion | None = None

    @property
    def variables(self):
        """The request's kubespray variables as kubespray is given them:
        a new dict of :attr:`extra_vars` and ``kube_version``."""
        found = dict(self.extra_vars)
        if self.kube_version is not None:
            found['kube_version'] = str(self.kube_version)
        return found


@dataclasses.dataclass(frozen=True)
class NodeAddress:
    """One VM as a VIM or a topology file reports it.

    :param role: one of :data:`ROLES`.
    :param ssh_ip: where SSH reaches it (for example a floating IP).
    :param nic_ip: its address inside the cluster (defaults to *ssh_ip*).
    :param ssh_port: its SSH port, or None for the role's ``port``.
    :param source: the field path of the entry, for error messages.
    :param pool: the name of its node pool (``node_pools``), or None.
    """

    role: str
    ssh_ip: str
    nic_ip: str
    ssh_port: int | None = None
    source: str = dataclasses.field(default='', compare=False)
    pool: str | None = None


@dataclasses.dataclass(frozen=True)
class ClusterSpec:
    """A validated ``k8s_cluster_installation_param``.

    :param pod_cidr: ``master_node.pod_cidr`` as an ``IPv4Network``.
    :param service_cidr: ``master_node.cluster_cidr`` as an
        ``IPv4Network``.
    :param nodes: the explicit ``nodes`` entries (tuple of
        :class:`NodeAddress`), or None to discover the VMs.
    :param node_pools: the ``node_pools`` (tuple of
        :class:`NodePoolSpec`, in request order).
    """

    vim_name: str | None
    script_path: str | None
    master: NodeGroupSpec
    worker: NodeGroupSpec
    pod_cidr: ipaddress.IPv4Network
    service_cidr: ipaddress.IPv4Network
    cluster_cp_name: str | None
    proxy: ProxySpec
    ansible: AnsibleSpec
    external_lb: ExternalLbSpec
    kubespray: KubesprayOptions
    nodes: tuple | None = None
    node_pools: tuple = ()

    def login_for(self, role):
        """:returns: the :class:`Login` of *role* (one of :data:`ROLES`)."""
        return {ROLE_MASTER: self.master.login,
                ROLE_WORKER: self.worker.login,
                ROLE_EXTERNAL_LB: self.external_lb.login}[role]

    def labels_for(self, role):
        """:returns: the node labels of *role* as a dict (LB: none)."""
        group = {ROLE_MASTER: self.master, ROLE_WORKER: self.worker}
        return group[role].label_map if role in group else {}

    def taints_for(self, role):
        """:returns: the node taints of *role*, a list (LB: none)."""
        group = {ROLE_MASTER: self.master, ROLE_WORKER: self.worker}
        return list(group[role].taints) if role in group else []

    def node_settings(self, node):
        """What the parameters give *node* when it joins.

        :param node: a :class:`mgmt_driver.model.nodes.Node`.
        :returns: its :class:`NodeSettings` (an LB VM: none).
        """
        group = {ROLE_MASTER: self.master, ROLE_WORKER: self.worker}
        if node.role not in group:
            return NodeSettings()
        pool = self.pool_of(node)
        settings = group[node.role].settings
        return settings if pool is None else settings.overlaid(
            pool.settings)

    def pool(self, name):
        """:returns: the :class:`NodePoolSpec` called *name*, or None."""
        return next((p for p in self.node_pools if p.name == name), None)

    def pools_of(self, node):
        """Every pool that claims *node*: the pool it was found in
        (``node.pool``), then the listed pools naming it.  More than one
        is an error (:meth:`pool_of`)."""
        own = self.pool(node.pool)
        entries = (node.name, _ip_or_text(node.cluster_address))
        return ([own] if own is not None else []) + [
            p for p in self.node_pools
            if p.listed and p is not own and p.lists(*entries)]

    def pool_of(self, node):
        """:returns: the :class:`NodePoolSpec` of *node*, or None.
        :raises ParamsInvalid: when two pools claim it.
        """
        pools = self.pools_of(node)
        if len(pools) > 1:
            raise exceptions.ParamsInvalid([pool_conflict(node, pools)])
        return pools[0] if pools else None


def _pool_claim(pool):
    """How *pool* claims a node, for messages: its ``nodes``, its
    ``aspect_id``, or (neither) the node entry naming it."""
    how = '.nodes' if pool.listed else '.aspect_id' if pool.aspect_id \
        else ''
    return '%s.node_pools.%s%s' % (ROOT, pool.name, how)


def pool_conflict(node, pools):
    """The message for a node claimed by several *pools*."""
    return '%s.node_pools: node %s (%s) is in %s; a node belongs to one ' \
        'pool' % (ROOT, node.name, node.cluster_address,
                  ' and in '.join(_pool_claim(pool) for pool in pools))


def _login_text(login):
    # Not "ubuntu:22", which reads as an OS version.
    return 'as %s (SSH port %d) by %s%s' % (
        login.username, login.port, 'key' if login.key_file else 'password',
        ', sudo with a password' if login.sudo_password else '')


def describe(spec):
    """A one-line summary of *spec*, without any secret."""
    lb = spec.external_lb
    parts = [
        'masters %s' % _login_text(spec.master.login),
        'workers %s' % _login_text(spec.worker.login),
        'ansible at %s %s' % (spec.ansible.ip_address,
                              _login_text(spec.ansible.login)),
        'LB api port %d, nodeports %d-%d%s' % ((lb.api_port,) +
                                               tuple(lb.nodeport_range) + (
            ', VIP %s (VRRP %d)' % (lb.vip or 'from ' + lb.vip_cp_name,
                                    lb.vrrp_router_id)
            if lb.highly_available else '',)),
        'pods %s, services %s' % (spec.pod_cidr, spec.service_cidr),
        'proxy %s' % ('on' if spec.proxy.enabled else 'off'),
        '%d extra var(s)' % len(spec.kubespray.variables),
    ]
    if spec.nodes is not None:
        parts.append('%d explicit node(s)' % len(spec.nodes))
    if spec.node_pools:
        parts.append('%d node pool(s)' % len(spec.node_pools))
    return 'valid: ' + ', '.join(parts)
