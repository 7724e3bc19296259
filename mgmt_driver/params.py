"""``additionalParams`` -> a typed, validated :class:`ClusterSpec`.

:func:`parse_params` reads ``additionalParams.k8s_cluster_installation_param``
(every key of Tacker's kubespray sample, plus this driver's extensions),
checks all of it and raises **once** with every problem found, each as
``k8s_cluster_installation_param.<path>: <problem>``:

* :class:`~mgmt_driver.exceptions.ParamsNotFound` (a Tacker
  ``MgmtDriverNotFound``) when every problem is a missing field;
* :class:`~mgmt_driver.exceptions.ParamsInvalid` (a Tacker
  ``MgmtDriverParamInvalid``) as soon as one problem is something else.

A secret (password, proxy URL, the value of an unknown key, a kubespray
extra var) is never echoed: its problem says what is wrong, not what was
given.  :func:`parse_for_operation` lays a scale or heal request's
overrides over the instantiated parameters and validates the result.

``samples/README.rst`` documents every key with its default.
"""

import copy
import dataclasses
import difflib
import functools
import ipaddress
import posixpath
import re
import types
import urllib.parse

from mgmt_driver import conf as kconf
from mgmt_driver import exceptions
from mgmt_driver import ssh

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
MIN_KUBESPRAY_VERSION = (2, 16)
MAX_FORKS = 500
#: Gateways (LB VMs) sharing one VIP at most.
MAX_GATEWAYS = 100
#: Deepest nesting of k8s_cluster_installation_param.  A fixed structural
#: limit: the format nests 4 levels, and kubespray variables rarely more
#: than 5; deeper input would only make the recursive checks, copies and
#: YAML rendering below recurse without end.
MAX_REQUEST_DEPTH = 24

#: Named node pools (``node_pools``) at most.
MAX_NODE_POOLS = 64
#: Entries of one listed pool's ``nodes`` at most.
MAX_POOL_NODES = 1000

#: Sections a scale or heal request may override, key by key.
OVERRIDABLE_SECTIONS = ('worker_node', 'external_lb_param', 'ansible',
                        'node_pools')
#: What a scale or heal request may change in an existing node pool.
OVERRIDABLE_POOL_KEYS = ('labels', 'taints')

#: How the driver and kubespray gain root on a role's VMs (sudo).
_BECOME_KEYS = ('become_password', 'passwordless_sudo')
_ROLE_KEYS = ('aspect_id', 'ssh_cp_name', 'nic_cp_name', 'username',
              'password', 'ssh_key_file', 'port', 'labels',
              'taints') + _BECOME_KEYS
_SECTION_KEYS = {
    ROOT: ('vim_name', 'master_node', 'worker_node', 'proxy', 'ansible',
           'external_lb_param', 'script_path', 'kubespray', 'nodes',
           'node_pools'),
    'master_node': _ROLE_KEYS + ('pod_cidr', 'cluster_cidr',
                                 'cluster_cp_name'),
    'worker_node': _ROLE_KEYS,
    'proxy': ('http_proxy', 'https_proxy', 'no_proxy', 'k8s_node_cidr'),
    'ansible': ('ip_address', 'username', 'password', 'ssh_key_file', 'port',
                'kubespray_root_path', 'transferring_inventory_path'),
    'external_lb_param': ('ssh_cp_name', 'nic_cp_name', 'ssh_username',
                          'ssh_password', 'ssh_key_file', 'ssh_port',
                          'script_path', 'api_port', 'nodeport_range',
                          'vip', 'vip_cp_name', 'vrrp_router_id',
                          'vrrp_password', 'aspect_id') + _BECOME_KEYS,
    'kubespray': ('extra_vars', 'forks', 'version', 'reset_on_terminate'),
    'node': ('role', 'ssh_ip', 'nic_ip', 'ssh_port', 'pool'),
    'node_pool': ('aspect_id', 'ssh_cp_name', 'nic_cp_name', 'nodes',
                  'labels', 'taints'),
}

# Variables this driver derives from typed fields or sets per operation;
# an extra var of the same name would silently contradict them.
_DERIVED_VARS = {
    'kube_pods_subnet': 'master_node.pod_cidr',
    'kube_service_addresses': 'master_node.cluster_cidr',
    'http_proxy': 'proxy.http_proxy',
    'https_proxy': 'proxy.https_proxy',
    'no_proxy': 'proxy.no_proxy',
    'loadbalancer_apiserver': 'external_lb_param.api_port',
    'apiserver_loadbalancer_domain_name': 'the external LB address',
    'kube_apiserver_node_port_range': 'external_lb_param.nodeport_range',
    'node': 'the operation (nodes to remove)',
    'skip_confirmation': 'the operation',
    'delete_nodes_confirmation': 'the operation',
    'reset_nodes': 'the operation',
    'allow_ungraceful_removal': 'the operation',
    # Rendered per node from the validated, recorded labels and taints;
    # an extra var would win over every node's host vars unchecked.
    'node_labels': 'labels (master_node, worker_node, node_pools)',
    'node_taints': 'taints (master_node, worker_node, node_pools)',
}
# Well-known kubespray variables whose type kubespray relies on.
_EXTRA_VAR_TYPES = {
    'kube_version': str, 'kube_network_plugin': str,
    'container_manager': str, 'kube_proxy_mode': str, 'dns_domain': str,
    'kube_network_node_prefix': int, 'calico_mtu': int,
    'calico_veth_mtu': int, 'supplementary_addresses_in_ssl_keys': list,
}
_TYPE_NAMES = {str: 'a string', int: 'an integer', bool: 'a boolean',
               dict: 'a mapping', list: 'a list'}

#: What starts every Jinja2 delimiter ("{{", "{%", "{#"): a mapping key
#: from a request may not hold it (see :func:`templated_keys`).
TEMPLATE_MARK = '{'
#: Mapping keys holding :data:`TEMPLATE_MARK` reported one by one, at most.
MAX_KEY_PROBLEMS = 10
_TEMPLATED_KEY = ('mapping key contains "%s": Ansible would evaluate it as '
                  'a Jinja2 template on the Ansible server; keys may not '
                  'contain it (values may)' % TEMPLATE_MARK)

_VAR_NAME_RE = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
_USERNAME_RE = re.compile(r'[A-Za-z_][A-Za-z0-9_.-]{0,31}')
_CONTROL_RE = re.compile(r'[\x00-\x1f\x7f]')
_VERSION_RE = re.compile(r'v?([0-9]+)\.([0-9]+)(?:\.([0-9]+))?')
_PACKAGE_FILE_RE = re.compile(r'[A-Za-z0-9_][A-Za-z0-9_./-]*')
_RANGE_RE = re.compile(r'([0-9]{1,5})-([0-9]{1,5})')
_LABEL_NAME_RE = re.compile(r'[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?')
# keepalived's PASS authentication: 8 characters at most; no blank,
# quote, brace or comment sign, which its configuration syntax would read.
VRRP_PASSWORD_PUNCT = '_.:+=%@^~,-'
VRRP_PASSWORD_RE = re.compile(r'[A-Za-z0-9%s]{1,8}' % re.escape(
    VRRP_PASSWORD_PUNCT))
_DNS_LABEL_RE = re.compile(r'[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?')
# The kubelet may set only these labels in the kubernetes.io and k8s.io
# namespaces (NodeRestriction); any other makes it refuse to start.
_KUBELET_LABELS = frozenset((
    'kubernetes.io/hostname', 'kubernetes.io/os', 'kubernetes.io/arch',
    'beta.kubernetes.io/instance-type', 'beta.kubernetes.io/os',
    'beta.kubernetes.io/arch', 'failure-domain.beta.kubernetes.io/zone',
    'failure-domain.beta.kubernetes.io/region',
    'topology.kubernetes.io/zone', 'topology.kubernetes.io/region'))
_KUBELET_PREFIXES = ('kubelet.kubernetes.io', 'node.kubernetes.io')
_TAINT_EFFECTS = ('NoSchedule', 'PreferNoSchedule', 'NoExecute')


# ---------------------------------------------------------------- the spec

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
    :param key_text: the key itself, once :func:`mgmt_driver.trust.apply`
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

    def credentials(self):
        """:returns: the :class:`mgmt_driver.ssh.Credentials` to log in."""
        if self.key_text:
            return ssh.Credentials(username=self.username,
                                   password=self.password,
                                   key_text=self.key_text,
                                   sudo_password=self.sudo_password)
        return ssh.Credentials(username=self.username,
                               password=self.password,
                               key_file=self.key_file,
                               sudo_password=self.sudo_password)


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


@dataclasses.dataclass(frozen=True)
class KubesprayOptions:
    """``kubespray``: what is passed to kubespray besides the inventory.

    :param extra_vars: read-only mapping passed through as extra vars.
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

        :param node: a :class:`mgmt_driver.nodes.Node`.
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


# ---------------------------------------------------------------- problems

@dataclasses.dataclass(frozen=True)
class Problem:
    path: str
    text: str
    missing: bool = False

    def __str__(self):
        return '%s: %s' % (self.path, self.text)


class Problems:
    """Collects every problem of one input, then raises them together."""

    def __init__(self):
        self.items = []

    def __len__(self):
        return len(self.items)

    def missing(self, path, text='missing'):
        self.items.append(Problem(path, text, missing=True))

    def invalid(self, path, text):
        self.items.append(Problem(path, text))

    def raise_if_any(self):
        """Raise one exception listing every problem, if there is any.

        :raises ParamsNotFound: when every problem is a missing field.
        :raises ParamsInvalid: when at least one is not.
        """
        if not self.items:
            return
        # Sorted by path: the same input always gives the same message.
        messages = [str(item) for item in sorted(
            self.items, key=lambda item: item.path)]
        if all(item.missing for item in self.items):
            raise exceptions.ParamsNotFound(messages)
        raise exceptions.ParamsInvalid(messages)


def _show(value, limit=60):
    """A short repr of a non-secret value for an error message."""
    try:
        text = repr(value)
    except ValueError:  # an int too long to convert to decimal
        return '(an integer of about %d digits)' % int(
            value.bit_length() * 0.30103)
    return text if len(text) <= limit else text[:limit - 4] + '...' + text[-1]


def _key_text(key):
    """A mapping key as it appears in a field path (never a value)."""
    return _show(key)[1:-1] if isinstance(key, str) else _show(key)


def _type_name(value):
    return type(value).__name__ if value is not None else 'null'


class Section:
    """One mapping of the request: reports unknown keys, reads typed values.

    :param keys: the keys this section accepts (others are reported,
        with the nearest known key as a suggestion).
    """

    def __init__(self, problems, path, data, keys):
        self.problems = problems
        self.path = path
        self.data = data
        for key in data:
            if key not in keys:
                self._unknown(key, keys)

    def _unknown(self, key, keys):
        text = 'unknown key'
        if not isinstance(key, str):
            self.problems.invalid(self.path, 'keys must be strings, not %s'
                                  % _type_name(key))
            return
        near = difflib.get_close_matches(key, keys, n=1, cutoff=0.6)
        if near:
            text += ' (did you mean %r?)' % near[0]
        else:
            text += ' (known keys: %s)' % ', '.join(sorted(keys))
        self.problems.invalid(self.at(_key_text(key)), text)

    def at(self, key):
        return '%s.%s' % (self.path, key)

    def given(self, key):
        """True when *key* holds something other than null or ''."""
        return self.data.get(key) not in (None, '')

    def value(self, key, kind, required=False, secret=False):
        """The value of *key* if it has type *kind*, else None.

        Absent, null and '' count as not given.  *secret* keeps the value
        out of every message (types are never echoed anyway).
        """
        if not self.given(key):
            if required:
                self.problems.missing(self.at(key))
            return None
        value = self.data[key]
        if kind is int and isinstance(value, bool) or not isinstance(
                value, kind):
            hint = ' (quote it)' if kind is str and not secret and \
                isinstance(value, (int, float)) else ''
            self.problems.invalid(self.at(key), 'must be %s, not %s%s' % (
                _TYPE_NAMES[kind], _type_name(value), hint))
            return None
        if kind is str and _CONTROL_RE.search(value):
            self.problems.invalid(
                self.at(key), 'must not contain control characters '
                '(newline, tab, ...)')
            return None
        return value

    def section(self, key, section_keys, required=False):
        """A nested :class:`Section`, or None when absent or not a dict."""
        data = self.value(key, dict, required=required)
        if data is None:
            return None
        return Section(self.problems, self.at(key), data, section_keys)


# ------------------------------------------------------------- field types

def _text(sec, key, required=False, secret=False):
    return sec.value(key, str, required=required, secret=secret)


#: Characters of a VIM name: Tacker keeps it in a column of 255.
MAX_VIM_NAME = 255


def _vim_name(sec):
    name = _text(sec, 'vim_name')
    if name is not None and len(name) > MAX_VIM_NAME:
        sec.problems.invalid(sec.at('vim_name'), 'is %d characters long, '
                             'more than the %d a VIM name may have'
                             % (len(name), MAX_VIM_NAME))
        return None
    return name


def _username(sec, key):
    name = sec.value(key, str, required=True)
    if name is not None and not _USERNAME_RE.fullmatch(name):
        sec.problems.invalid(sec.at(key), '%s is not a valid user name '
                             '(letters, digits, "_.-", at most 32)'
                             % _show(name))
        return None
    return name


def _int(sec, key, default, low, high, what='must be'):
    value = sec.value(key, int)
    if value is None:
        return None if sec.given(key) else default
    if not low <= value <= high:
        sec.problems.invalid(sec.at(key), '%s %s between %d and %d' % (
            _show(value), what, low, high))
        return None
    return value


def _port(sec, key, default):
    return _int(sec, key, default, 1, 65535, what='is not a port: must be')


def _bool(sec, key, default):
    value = sec.value(key, bool)
    return default if value is None and not sec.given(key) else value


def _ip(problems, path, value):
    """The normalised text of an IPv4/IPv6 address, or None."""
    try:
        if '%' in value:
            raise ValueError(value)
        return str(ipaddress.ip_address(value))
    except ValueError:
        problems.invalid(path, '%s is not an IP address' % _show(value))
        return None


def _ip_field(sec, key, required=False):
    value = sec.value(key, str, required=required)
    return None if value is None else _ip(sec.problems, sec.at(key), value)


def _network(problems, path, text):
    try:
        return ipaddress.ip_network(text)
    except ValueError:
        pass
    try:
        loose = ipaddress.ip_network(text, strict=False)
    except ValueError:
        problems.invalid(path, '%s is not a CIDR' % _show(text))
        return None
    problems.invalid(path, '%s has host bits set (did you mean %r?)' % (
        _show(text), str(loose)))
    return None


def _cidr_field(sec, key, default=None, ipv4_only=False, var=None):
    text = sec.value(key, str)
    if text is None:
        return None if sec.given(key) or default is None else \
            ipaddress.ip_network(default)
    net = _network(sec.problems, sec.at(key), text)
    if net is not None and ipv4_only and net.version != 4:
        sec.problems.invalid(sec.at(key), (
            '%s is an IPv6 network; this field sets kubespray\'s IPv4 %s '
            '(put %s_ipv6 in kubespray.extra_vars for IPv6)') % (
                _show(text), var, var))
        return None
    return net


def _remote_path(sec, key, required=False):
    path = sec.value(key, str, required=required)
    if path is None:
        return None
    if not path.startswith('/'):
        sec.problems.invalid(sec.at(key), '%s is not an absolute path'
                             % _show(path))
        return None
    normal = posixpath.normpath(path)
    return '/' + normal.lstrip('/')  # normpath keeps a leading '//'


def _package_path(sec, key):
    """A path inside the VNF package: relative, without '..'."""
    path = sec.value(key, str)
    if path is None:
        return None
    parts = path.replace('\\', '/').split('/')
    if path.startswith('/') or '..' in parts:
        sec.problems.invalid(sec.at(key), '%s must be a path inside the '
                             'VNF package (relative, without "..")'
                             % _show(path))
        return None
    return posixpath.normpath(path)


def _local_file(sec, key):
    """A file on the conductor: absolute, ``~/``, or relative to the VNF
    package (without ``..``); which ones may be read is
    :mod:`mgmt_driver.trust`'s decision."""
    path = sec.value(key, str)
    if path is None:
        return None
    relative = not path.startswith(('/', '~/'))
    if _CONTROL_RE.search(path) or (relative and (
            not _PACKAGE_FILE_RE.fullmatch(path) or
            '..' in path.split('/'))):
        sec.problems.invalid(sec.at(key), 'must be an absolute path (or '
                             'start with ~/) on the conductor host, or a '
                             'path inside the VNF package without ".."')
        return None
    return path


def _proxy_url(sec, key):
    """A proxy URL; never echoed, it may carry credentials."""
    url = sec.value(key, str, secret=True)
    if url is None:
        return None
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        parts, port = None, None
    if parts is None:
        reason = 'its port is not a number between 1 and 65535'
    elif parts.scheme not in ('http', 'https'):
        reason = 'the scheme must be http or https'
    elif not parts.hostname:
        reason = 'it has no host'
    elif port == 0 or ' ' in url:
        reason = 'it has port 0 or a space'
    else:
        return url
    sec.problems.invalid(sec.at(key), 'is not a valid proxy URL '
                         '(http[s]://[user:password@]host[:port]): %s '
                         '(value not shown)' % reason)
    return None


def _no_proxy(sec, key):
    value = sec.data.get(key)
    if value in (None, ''):
        return ()
    if isinstance(value, str):
        value = value.split(',')
    if not isinstance(value, list) or not all(
            isinstance(item, str) for item in value):
        sec.problems.invalid(sec.at(key), 'must be a comma-separated '
                             'string or a list of strings')
        return None
    entries = tuple(item.strip() for item in value if item.strip())
    bad = [entry for entry in entries
           if re.search(r'[\s\x00-\x1f\x7f]', entry)]
    if bad:
        sec.problems.invalid(sec.at(key), 'entry %s contains a space'
                             % _show(bad[0]))
        return None
    return entries


def _label_problem(key, value):
    """What is wrong with one node label, or None."""
    if not isinstance(key, str) or not isinstance(value, str):
        return 'keys and values must be strings (quote numbers)'
    prefix, slash, name = key.rpartition('/')
    if slash and not prefix:
        return 'prefix before "/" is empty'
    if prefix and (len(prefix) > 253 or not all(
            _DNS_LABEL_RE.fullmatch(part) for part in prefix.split('.'))):
        return 'prefix %s is not a DNS subdomain' % _show(prefix)
    if not _LABEL_NAME_RE.fullmatch(name):
        return 'name %s is not a label name (1-63 of "A-Za-z0-9-_.", ' \
               'alphanumeric at both ends)' % _show(name)
    if value and not _LABEL_NAME_RE.fullmatch(value):
        return 'value %s is not a label value (0-63 of "A-Za-z0-9-_.", ' \
               'alphanumeric at both ends)' % _show(value)
    if prefix.endswith(('kubernetes.io', 'k8s.io')) and \
            key not in _KUBELET_LABELS and \
            not prefix.endswith(_KUBELET_PREFIXES):
        return ('the kubelet may not set labels in the kubernetes.io or '
                'k8s.io namespaces (except node.kubernetes.io/ and '
                'kubelet.kubernetes.io/); it would refuse to start')
    return None


def _labels(sec, key):
    data = sec.value(key, dict)
    if data is None:
        return ()
    labels = []
    for name, value in data.items():
        problem = _label_problem(name, value)
        if problem:
            sec.problems.invalid(sec.at('%s.%s' % (key, _key_text(name))),
                                 problem)
        else:
            labels.append((name, value))
    return tuple(sorted(labels))


def _taint_problem(text):
    """What is wrong with one ``key=value:Effect`` taint, or None."""
    if not isinstance(text, str):
        return 'must be a string "key=value:Effect", not %s' % _type_name(
            text)
    pair, colon, effect = text.rpartition(':')
    key, _, value = pair.partition('=')
    if not colon or effect not in _TAINT_EFFECTS:
        return '%s: the effect after ":" must be one of %s' % (
            _show(text), ', '.join(_TAINT_EFFECTS))
    problem = _label_problem(key, value)
    if problem and not problem.startswith('the kubelet'):
        return '%s: %s' % (_show(text), problem.replace('label', 'taint'))
    return None


def parse_label_list(text, field, removals=False):
    """Node labels from ``k=v,k2=v2`` (a command-line option).

    :param removals: accept ``key-`` too (remove the label), returned
        as ``(key, None)``.
    :returns: sorted ``(key, value)`` pairs, checked as ``labels`` are.
    :raises ParamsInvalid: every bad entry, naming *field*.
    """
    labels, problems = {}, []
    for entry in _list_entries(text):
        key, equals, value = entry.partition('=')
        if removals and not equals and key.endswith('-'):
            key, value = key[:-1], None
            problem = _label_problem(key, '')
        else:
            problem = None if equals else 'must be key=value' + (
                ' or key-' if removals else '')
            problem = problem or _label_problem(key, value)
        if problem:
            problems.append('%s: %s: %s' % (field, _show(entry), problem))
        else:
            labels[key] = value
    if problems:
        raise exceptions.ParamsInvalid(problems)
    return tuple(sorted(labels.items()))


def parse_taint_list(text, field, removals=False):
    """Node taints from ``k=v:Effect,...`` (a command-line option).

    :param removals: accept ``key:Effect-`` (remove that taint) and
        ``key-`` (every taint of the key) too, returned as given.
    :returns: the taints, checked as ``taints`` are, repeats dropped.
    :raises ParamsInvalid: every bad entry, naming *field*.
    """
    taints, problems = {}, []
    for entry in _list_entries(text):
        if removals and entry.endswith('-'):
            problem = _taint_removal_problem(entry[:-1])
        else:
            problem = _taint_problem(entry)
        if problem:
            problems.append('%s: %s' % (field, problem))
        else:
            taints.setdefault(entry)
    if problems:
        raise exceptions.ParamsInvalid(problems)
    return tuple(taints)


def _taint_removal_problem(text):
    if ':' in text:
        return _taint_problem(text)
    problem = _label_problem(text, '')
    if problem and not problem.startswith('the kubelet'):
        return '%s: %s' % (_show(text + '-'),
                           problem.replace('label', 'taint'))
    return None


#: The checks of one label and one taint, and the short repr of a
#: value, for other modules (a record read back, a relabel by metadata:
#: :mod:`mgmt_driver.labels`).
label_problem = _label_problem
taint_problem = _taint_problem
show = _show


def _list_entries(text):
    return [entry for entry in (text or '').split(',') if entry]


def _taints(sec, key):
    data = sec.value(key, list)
    taints = {}  # a dict: repeats dropped, order kept, linear time
    for i, text in enumerate(data or ()):
        problem = _taint_problem(text)
        if problem:
            sec.problems.invalid(sec.at('%s[%d]' % (key, i)), problem)
        else:
            taints.setdefault(text)
    return tuple(taints)


# --------------------------------------------------------------- sections

def _login(sec, user_key, password_key, port_key, default_key_file):
    username = _username(sec, user_key)
    password = _text(sec, password_key, secret=True)
    key_file = _local_file(sec, 'ssh_key_file')
    port = _port(sec, port_key, DEFAULT_SSH_PORT)
    default_key = False
    if not sec.given(password_key) and not sec.given('ssh_key_file'):
        if default_key_file:
            key_file, default_key = default_key_file, True
        else:
            sec.problems.missing(sec.at(password_key), (
                'missing: give %s or ssh_key_file, or set the option '
                '[kubespray_mgmt] ssh_private_key_file') % password_key)
    return Login(username, password, key_file, port, default_key)


def _become(sec, login):
    """*login* with the section's ``become_password`` and
    ``passwordless_sudo`` (not both: they contradict each other)."""
    password = _text(sec, 'become_password', secret=True)
    passwordless = _bool(sec, 'passwordless_sudo', False)
    if password is not None and passwordless:
        sec.problems.invalid(sec.at('passwordless_sudo'), (
            'true says sudo asks no password, but become_password gives '
            'one: give one of them'))
    return dataclasses.replace(login, become_password=password,
                               passwordless_sudo=bool(passwordless))


def _cp_name(sec, key, required):
    return _text(sec, key, required=required)


def _node_group(sec, role, options):
    login = _become(sec, _login(sec, 'username', 'password', 'port',
                                options['default_key_file']))
    return NodeGroupSpec(
        role=role, aspect_id=_text(sec, 'aspect_id'),
        ssh_cp_name=_cp_name(sec, 'ssh_cp_name', options['need_cp_names']),
        nic_cp_name=_text(sec, 'nic_cp_name'), login=login,
        labels=_labels(sec, 'labels'), taints=_taints(sec, 'taints'))


def _node_pools(root, options):
    data = root.value('node_pools', dict)
    path = root.at('node_pools')
    if not data:
        return ()
    if len(data) > MAX_NODE_POOLS:
        root.problems.invalid(path, '%d pools: at most %d' % (
            len(data), MAX_NODE_POOLS))
        return ()
    pools = (_node_pool(root.problems, path, name, body, options)
             for name, body in data.items())
    return tuple(pool for pool in pools if pool is not None)


def _node_pool(problems, path, name, body, options):
    """One ``node_pools`` entry, or None when unusable."""
    if not isinstance(name, str) or not _DNS_LABEL_RE.fullmatch(name):
        problems.invalid('%s.%s' % (path, _key_text(name)), (
            'is not a pool name: a DNS-1123 label (1-63 of "a-z0-9-", '
            'alphanumeric at both ends)'))
        return None
    if not isinstance(body, dict):
        problems.invalid('%s.%s' % (path, name), 'must be a mapping, not %s'
                         % _type_name(body))
        return None
    sec = Section(problems, '%s.%s' % (path, name), body,
                  _SECTION_KEYS['node_pool'])
    aspect_id, listed = _text(sec, 'aspect_id'), _pool_nodes(sec)
    if aspect_id is not None and sec.given('nodes'):
        problems.invalid(sec.at('nodes'), 'give aspect_id (VMs of the '
                         'pool\'s own) or nodes (nodes by name or '
                         'address), not both')
    elif not sec.given('aspect_id') and not sec.given('nodes') and \
            options['need_cp_names']:
        problems.missing(sec.at('aspect_id'), 'missing: give aspect_id (the '
                         'scaling aspect of the pool\'s VDU) or nodes')
    for key in ('ssh_cp_name', 'nic_cp_name'):
        if sec.given('nodes') and not sec.given('aspect_id') and \
                sec.given(key):
            problems.invalid(sec.at(key), 'only for a pool with aspect_id')
    return NodePoolSpec(
        name=name, aspect_id=aspect_id,
        ssh_cp_name=_cp_name(sec, 'ssh_cp_name', aspect_id is not None and
                             options['need_cp_names']),
        nic_cp_name=_text(sec, 'nic_cp_name'), nodes=listed or (),
        labels=_labels(sec, 'labels'), taints=_taints(sec, 'taints'))


def _pool_nodes(sec):
    """A listed pool's ``nodes``: normalised names and addresses."""
    data = sec.value('nodes', list)
    if data is None:
        return None
    if not 1 <= len(data) <= MAX_POOL_NODES:
        sec.problems.invalid(sec.at('nodes'), 'must name 1 to %d nodes, '
                             'not %d' % (MAX_POOL_NODES, len(data)))
        return None
    entries = {}  # a dict: repeats dropped, order kept, linear time
    for index, item in enumerate(data):
        entry = _pool_entry(item)
        if entry is None:
            sec.problems.invalid(sec.at('nodes[%d]' % index), (
                '%s is neither a node name (master-..., worker-...) nor '
                'a cluster address') % _show(item))
        else:
            entries.setdefault(entry)
    return tuple(entries)


def _pool_entry(item):
    """A node name as it is, an IP address normalised; None if neither."""
    if not isinstance(item, str) or '%' in item:
        return None
    try:
        return str(ipaddress.ip_address(item))
    except ValueError:
        pass
    name_ok = _DNS_LABEL_RE.fullmatch(item) and item.startswith(
        ('%s-' % ROLE_MASTER, '%s-' % ROLE_WORKER))
    return item if name_ok else None


def _check_pools(root, spec):
    """Pools that would claim the same VMs: a listed entry in two pools,
    or an aspect (or SSH CP) another role or pool uses already."""
    path, seen = root.at('node_pools'), _role_claims(spec)
    for pool in spec.node_pools:
        keys = [('aspect_id', pool.aspect_id), ('ssh_cp_name',
                                                pool.ssh_cp_name)]
        keys += [('nodes', entry) for entry in pool.nodes]
        for key, value in keys:
            if value is None:
                continue
            here = 'node_pools.%s.%s' % (pool.name, key)
            first = seen.setdefault((key, value), here)
            if first != here:
                root.problems.invalid('%s.%s.%s' % (path, pool.name, key), (
                    '%s is also in %s.%s; a VM belongs to one pool or '
                    'role') % (_show(value), ROOT, first))


def _role_claims(spec):
    """``{(key, value): field}`` of the roles' aspects and SSH CPs."""
    claims = {}
    for role, group in ((ROLE_MASTER, spec.master), (ROLE_WORKER, spec.worker),
                        (ROLE_EXTERNAL_LB, spec.external_lb)):
        for key in ('aspect_id', 'ssh_cp_name'):
            value = getattr(group, key, None) if group else None
            if value is not None:
                claims[key, value] = '%s.%s' % (ROLE_SECTIONS[role], key)
    return claims



def check_pool_references(problems, spec, addresses):
    """The ``pool`` of node entries: a worker's, naming an aspect pool.

    :param addresses: :class:`NodeAddress` entries (``nodes``, a
        topology file, Heat).
    """
    for address in addresses:
        if address is None or address.pool is None:
            continue
        path = '%s.pool' % address.source if address.source else 'pool'
        pool = spec.pool(address.pool)
        if address.role != ROLE_WORKER:
            problems.invalid(path, 'only a worker entry may name a pool '
                             '(name other nodes in a pool\'s nodes list)')
        elif pool is None:
            problems.invalid(path, '%s is not in %s.node_pools' % (
                _show(address.pool), ROOT))
        elif pool.listed:
            problems.invalid(path, (
                '%s.node_pools.%s lists its nodes; an entry may name only '
                'a pool without a nodes list') % (ROOT, pool.name))


def _master_networks(sec, kubespray):
    pod = _cidr_field(sec, 'pod_cidr', DEFAULT_POD_CIDR, ipv4_only=True,
                      var='kube_pods_subnet')
    service = _cidr_field(sec, 'cluster_cidr', DEFAULT_SERVICE_CIDR,
                          ipv4_only=True, var='kube_service_addresses')
    if pod is not None and service is not None and pod.overlaps(service):
        sec.problems.invalid(sec.at('cluster_cidr'), (
            '%s overlaps the pod CIDR %s (master_node.pod_cidr); '
            'kubespray needs them apart') % (str(service), str(pod)))
    prefix = kubespray.extra_vars.get('kube_network_node_prefix',
                                      DEFAULT_NODE_PREFIX)
    if pod is not None and isinstance(prefix, int) and \
            not isinstance(prefix, bool) and pod.prefixlen >= prefix:
        sec.problems.invalid(sec.at('pod_cidr'), (
            '%s leaves no room for node pod ranges: its prefix must be '
            'shorter than /%d (kube_network_node_prefix)') % (
                str(pod), prefix))
    return pod, service


def _proxy(sec, pod, service):
    if sec is None:
        return ProxySpec()
    proxy = ProxySpec(
        http_proxy=_proxy_url(sec, 'http_proxy'),
        https_proxy=_proxy_url(sec, 'https_proxy'),
        no_proxy=_no_proxy(sec, 'no_proxy'),
        k8s_node_cidr=_cidr_field(sec, 'k8s_node_cidr'))
    node_net = proxy.k8s_node_cidr
    for net, field in ((pod, 'pod CIDR'), (service, 'service CIDR')):
        if node_net is not None and net is not None and \
                node_net.overlaps(net):
            sec.problems.invalid(sec.at('k8s_node_cidr'), (
                '%s overlaps the %s %s') % (str(node_net), field, str(net)))
    return proxy


def _ansible(sec, options):
    if sec is None:
        return None
    login = _login(sec, 'username', 'password', 'port',
                   options['default_key_file'])
    root = _remote_path(sec, 'kubespray_root_path', required=True)
    inventory = _remote_path(sec, 'transferring_inventory_path',
                             required=True)
    if root and inventory and (
            inventory in ('/', root, root + '/inventory/sample') or
            root.startswith(inventory.rstrip('/') + '/')):
        sec.problems.invalid(sec.at('transferring_inventory_path'), (
            '%s would overwrite kubespray itself; use a directory of its '
            'own, such as %s/inventory/<cluster name>') % (
                _show(inventory), root))
        inventory = None
    return AnsibleSpec(ip_address=_ip_field(sec, 'ip_address', True),
                       login=login, kubespray_root_path=root,
                       transferring_inventory_path=inventory)


def _nodeport_range(sec):
    text = sec.value('nodeport_range', str)
    if text is None:
        return None if sec.given('nodeport_range') else \
            DEFAULT_NODEPORT_RANGE
    match = _RANGE_RE.fullmatch(text.strip())
    first, last = (int(match.group(1)), int(match.group(2))) if match \
        else (0, 0)
    if not 1 <= first <= last <= 65535:
        sec.problems.invalid(sec.at('nodeport_range'), (
            '%s is not a port range "FIRST-LAST" with 1 <= FIRST <= LAST '
            '<= 65535') % _show(text))
        return None
    return first, last


def _external_lb(sec, options):
    if sec is None:
        return None
    login = _become(sec, _login(sec, 'ssh_username', 'ssh_password',
                                'ssh_port', options['default_key_file']))
    api_port = _port(sec, 'api_port', DEFAULT_API_PORT)
    ports = _nodeport_range(sec)
    if api_port and ports and ports[0] <= api_port <= ports[1]:
        sec.problems.invalid(sec.at('api_port'), (
            '%d lies inside nodeport_range %d-%d; HAProxy cannot bind '
            'both') % (api_port, ports[0], ports[1]))
    return ExternalLbSpec(
        ssh_cp_name=_cp_name(sec, 'ssh_cp_name', options['need_cp_names']),
        nic_cp_name=_text(sec, 'nic_cp_name'), login=login,
        script_path=_package_path(sec, 'script_path'),
        api_port=api_port, nodeport_range=ports, **_vrrp(sec))


def _vrrp(sec):
    """``vip`` (or ``vip_cp_name``), ``vrrp_router_id`` and
    ``vrrp_password``: all or none."""
    vip = _ip_field(sec, 'vip')
    vip_cp_name = _text(sec, 'vip_cp_name')
    if vip_cp_name is not None and sec.given('vip'):
        sec.problems.invalid(sec.at('vip_cp_name'), 'give vip or '
                             'vip_cp_name, not both')
        vip_cp_name = None
    wanted = vip is not None or vip_cp_name is not None
    router_id = _int(sec, 'vrrp_router_id', None, 1, 255)
    password = _text(sec, 'vrrp_password', secret=True)
    if password is not None and not VRRP_PASSWORD_RE.fullmatch(password):
        sec.problems.invalid(sec.at('vrrp_password'), (
            'must be 1 to 8 characters among letters, digits and "%s" '
            '(keepalived reads no more)') % VRRP_PASSWORD_PUNCT)
        password = None
    aspect_id = _text(sec, 'aspect_id')
    if wanted:
        for key in ('vrrp_router_id', 'vrrp_password'):
            if not sec.given(key):
                sec.problems.missing(sec.at(key), 'missing: required '
                                     'with vip (the gateways\' VRRP group)')
    elif not sec.given('vip') and not sec.given('vip_cp_name'):
        for key, value in (('vrrp_router_id', router_id),
                           ('vrrp_password', password),
                           ('aspect_id', aspect_id)):
            if value is not None:
                sec.problems.invalid(sec.at(key), 'only used with vip '
                                     '(the virtual IP of the gateways)')
    return {'vip': vip, 'vip_cp_name': vip_cp_name,
            'vrrp_router_id': router_id, 'vrrp_password': password,
            'aspect_id': aspect_id}


def _version(sec):
    text = sec.value('version', str)
    if text is None:
        return None
    match = _VERSION_RE.fullmatch(text.strip())
    if not match:
        sec.problems.invalid(sec.at('version'), '%s is not a kubespray '
                             'version such as "2.24.0"' % _show(text))
        return None
    if (int(match.group(1)), int(match.group(2))) < MIN_KUBESPRAY_VERSION:
        sec.problems.invalid(sec.at('version'), (
            '%s is older than the oldest supported kubespray, v%d.%d') % (
                (_show(text),) + MIN_KUBESPRAY_VERSION))
        return None
    return text.strip().lstrip('v')


def _plain_data(value):
    """True if *value* is made of YAML/JSON scalars, lists and mappings."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return True
    if isinstance(value, list):
        return all(_plain_data(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(key, str) and _plain_data(item)
                   for key, item in value.items())
    return False


def _extra_var_problem(name, value):
    """What is wrong with one extra var (never its value), or None."""
    if not isinstance(name, str) or not _VAR_NAME_RE.fullmatch(name):
        return 'is not an Ansible variable name'
    if name in _DERIVED_VARS:
        return 'is set by the driver from %s; set that instead' % (
            _DERIVED_VARS[name])
    if name.startswith('ansible_'):
        return ('connection settings come from the role sections '
                '(username, password, ssh_key_file, port, '
                'become_password, passwordless_sudo)')
    if name == 'kube_network_node_prefix' and isinstance(value, int) and \
            not isinstance(value, bool) and not 1 <= value <= 32:
        return 'must be a prefix length from 1 to 32'
    if not _plain_data(value):
        return 'value must be YAML data (strings, numbers, booleans, ' \
               'lists, mappings)'
    kind = _EXTRA_VAR_TYPES.get(name)
    if name.endswith('_enabled'):
        kind = bool
    if kind is not None and (not isinstance(value, kind) or (
            kind is int and isinstance(value, bool))):
        hint = ' (quote it)' if kind is str and isinstance(
            value, (int, float)) else ''
        return 'must be %s, not %s%s' % (_TYPE_NAMES[kind],
                                         _type_name(value), hint)
    return None


def templated_keys(value, path):
    """Where *value* has a mapping key holding :data:`TEMPLATE_MARK`.

    Ansible evaluates a mapping key that a playbook templates (kubespray
    loops over ``dict2items`` of variables and templates ``item.key``),
    so a key is never data the way an ``!unsafe`` value is.  Walks
    without recursion, each value once (linear time); stops collecting
    after :data:`MAX_KEY_PROBLEMS`.

    :param path: the field path of *value*.
    :returns: ``(paths, count)``: the field paths of the first mappings
        found with such a key, each followed by the key's position
        (``#1`` is the first key, so the key itself is never shown), and
        how many such keys there are in all.
    """
    found, count, stack = [], 0, [(value, (None, path))]
    while stack:
        item, trail = stack.pop()
        if isinstance(item, list):
            stack.extend((child, (trail, index))
                         for index, child in enumerate(item))
            continue
        if not isinstance(item, dict):
            continue
        for position, (key, child) in enumerate(item.items(), 1):
            if isinstance(key, str) and TEMPLATE_MARK in key:
                count += 1
                if len(found) < MAX_KEY_PROBLEMS:
                    found.append('%s (key #%d)' % (_trail_path(trail),
                                                   position))
            else:
                stack.append((child, (trail, key)))
    return found, count


def report_templated_keys(problems, value, path):
    """Report each key of *value* that :func:`templated_keys` finds.

    :returns: True when there is none.
    """
    found, count = templated_keys(value, path)
    for where in found:
        problems.invalid(where, _TEMPLATED_KEY)
    if count > len(found):
        problems.invalid(path, '%d more mapping keys contain "%s"' % (
            count - len(found), TEMPLATE_MARK))
    return not count


def _extra_vars(sec):
    data = sec.value('extra_vars', dict)
    if data is None:
        return {}
    accepted = {}
    for name, value in data.items():
        path = sec.at('extra_vars.%s' % _key_text(name))
        problem = _extra_var_problem(name, value)
        if problem:
            sec.problems.invalid(path, problem)
        elif report_templated_keys(sec.problems, value, path):
            accepted[name] = copy.deepcopy(value)
    return accepted


def _kubespray(sec):
    if sec is None:
        return KubesprayOptions()
    return KubesprayOptions(
        extra_vars=types.MappingProxyType(_extra_vars(sec)),
        forks=_int(sec, 'forks', None, 1, MAX_FORKS),
        version=_version(sec),
        reset_on_terminate=_bool(sec, 'reset_on_terminate', False))


# ------------------------------------------------------------ node entries

def parse_node_address(problems, path, data, role=None):
    """One VM entry: ``{role, ssh_ip, nic_ip, ssh_port, pool}``.

    :param problems: the :class:`Problems` to report to.
    :param path: the entry's field path, e.g. ``topology.workers[0]``.
    :param data: the entry (a mapping).
    :param role: the role when the container implies it (topology
        files); None to read the entry's own ``role`` key.
    :returns: a :class:`NodeAddress`, or None if the entry is unusable.
    """
    if not isinstance(data, dict):
        problems.invalid(path, 'must be a mapping, not %s'
                         % _type_name(data))
        return None
    keys = _SECTION_KEYS['node']
    sec = Section(problems, path, data, keys if role is None else keys[1:])
    if role is None:
        role = sec.value('role', str, required=True)
        if role is not None and role not in ROLES:
            problems.invalid(sec.at('role'), '%s is not one of %s' % (
                _show(role), ', '.join(ROLES)))
            role = None
    ssh_ip = _ip_field(sec, 'ssh_ip', required=True)
    nic_ip = _ip_field(sec, 'nic_ip') if sec.given('nic_ip') else ssh_ip
    port = _port(sec, 'ssh_port', None)
    pool = sec.value('pool', str)
    if None in (role, ssh_ip, nic_ip) or (
            port is None and sec.given('ssh_port')) or (
            pool is None and sec.given('pool')):
        return None
    return NodeAddress(role, ssh_ip, nic_ip, port, source=path, pool=pool)


def check_node_addresses(problems, path, addresses, ports=None,
                         networks=(), max_gateways=1):
    """Checks on a whole node set: counts, duplicates, addresses.

    One master at least and one external LB (up to *max_gateways* when
    the gateways share a VIP); an even number of
    masters (etcd members) is refused because kubespray refuses it; no
    two Kubernetes nodes share a cluster address or an SSH endpoint, and
    no cluster address lies in the pod or service network.

    :param path: where the set came from, e.g. ``topology``.
    :param addresses: the :class:`NodeAddress` entries.
    :param ports: ``{role: default SSH port}`` (22 for a missing role).
    :param networks: ``(network, description)`` pairs no node may be in.
    """
    count = {role: 0 for role in ROLES}
    for address in addresses:
        count[address.role] += 1
    if not count[ROLE_MASTER]:
        problems.invalid(path, 'no master node (need 1, 3 or 5 ...)')
    elif count[ROLE_MASTER] % 2 == 0:
        problems.invalid(path, '%d master nodes: etcd needs an odd '
                         'number (kubespray refuses an even one)'
                         % count[ROLE_MASTER])
    if max_gateways == 1 and count[ROLE_EXTERNAL_LB] != 1:
        problems.invalid(path, 'needs exactly one external_lb node, '
                         'found %d' % count[ROLE_EXTERNAL_LB])
    elif not 1 <= count[ROLE_EXTERNAL_LB] <= max_gateways:
        problems.invalid(path, 'needs 1 to %d external_lb nodes, found %d'
                         % (max_gateways, count[ROLE_EXTERNAL_LB]))
    k8s_nodes = [a for a in addresses if a.role != ROLE_EXTERNAL_LB]
    _check_duplicates(problems, k8s_nodes, ports or {})
    for address in k8s_nodes:
        ip = ipaddress.ip_address(address.nic_ip)
        for network, what in networks:
            if network is not None and ip in network:
                problems.invalid(address.source, (
                    'cluster address %s lies in the %s %s') % (
                        address.nic_ip, what, network))


def _check_duplicates(problems, addresses, ports):
    # The LB is left out: it is no Kubernetes node and may share a host.
    seen_ip, seen_ssh = {}, {}
    for address in addresses:
        first = seen_ip.setdefault(address.nic_ip, address)
        if first is not address:
            problems.invalid(address.source, (
                'cluster address %s is already used by %s') % (
                    address.nic_ip, first.source))
            continue
        port = address.ssh_port or ports.get(address.role, DEFAULT_SSH_PORT)
        first = seen_ssh.setdefault((address.ssh_ip, port), address)
        if first is not address:
            problems.invalid(address.source, (
                'SSH endpoint %s port %s is already used by %s') % (
                    address.ssh_ip, port, first.source))


def _nodes(root):
    data = root.value('nodes', list)
    if data is None:
        return None
    path = root.at('nodes')
    entries = [parse_node_address(root.problems, '%s[%d]' % (path, index),
                                  item)
               for index, item in enumerate(data)]
    return tuple(entries)


def _check_nodes(root, spec):
    """The set checks of an explicit ``nodes`` list, once roles parsed."""
    if spec.nodes is None or None in spec.nodes:
        return
    ports = {}
    for role, group in ((ROLE_MASTER, spec.master),
                        (ROLE_WORKER, spec.worker),
                        (ROLE_EXTERNAL_LB, spec.external_lb)):
        if group is not None and group.login.port is not None:
            ports[role] = group.login.port
    networks = ((spec.pod_cidr, 'pod CIDR (master_node.pod_cidr)'),
                (spec.service_cidr,
                 'service CIDR (master_node.cluster_cidr)'))
    check_node_addresses(root.problems, root.at('nodes'), spec.nodes,
                         ports, networks, max_gateways(spec.external_lb))
    check_pool_references(root.problems, spec, spec.nodes)


def max_gateways(lb_spec):
    """How many gateways (``external_lb`` VMs) *lb_spec* allows: several
    share a VIP, else there is one."""
    return MAX_GATEWAYS if lb_spec and lb_spec.highly_available else 1


# ------------------------------------------------------------------ bounds

def _size_of(value):
    """Approximate bytes of one value, its children not included."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, int):
        return 8 + value.bit_length() // 8
    return 8


def _children(value):
    """``(key, child)`` pairs of a mapping or list; keys count as text."""
    if isinstance(value, dict):
        return value.items()
    if isinstance(value, list):
        return enumerate(value)
    return ()


def _trail_path(trail):
    """The field path of a ``(parent trail, key)`` chain."""
    keys = []
    while trail is not None:
        trail, key = trail
        keys.append(key)
    path = keys.pop()
    for key in reversed(keys):
        path += '[%d]' % key if isinstance(key, int) and not isinstance(
            key, bool) else '.%s' % _key_text(key)
    return path


def check_bounds(problems, path, data, max_size=None):
    """Report a request tree nested too deep or too large; no recursion.

    Stops at the first excess, so a hostile request costs no more work
    than *max_size* allows, and nothing later recurses without end.

    :param path: the field path of *data*.
    :param max_size: approximate bytes allowed (default: the option
        ``max_request_size``).
    :returns: True when *data* is within the bounds.
    """
    limit = max_size or kconf.CONF.kubespray_mgmt.max_request_size
    size, stack = 0, [(data, 1, (None, path))]
    while stack:
        value, depth, trail = stack.pop()
        size += _size_of(value)
        if depth > MAX_REQUEST_DEPTH:
            problems.invalid(_trail_path(trail), 'nested deeper than %d '
                             'levels' % MAX_REQUEST_DEPTH)
            return False
        if size > limit:
            problems.invalid(path, 'larger than %d bytes (option '
                             '[kubespray_mgmt] max_request_size)' % limit)
            return False
        for key, child in _children(value):
            size += _size_of(key) if isinstance(value, dict) else 0
            stack.append((child, depth + 1, (trail, key)))
    return True


# ------------------------------------------------------------ entry points

def _root_section(problems, additional_params, max_size):
    if not isinstance(additional_params, dict):
        problems.invalid('additionalParams', 'must be a mapping, not %s'
                         % _type_name(additional_params))
        return None
    data = additional_params.get(ROOT)
    if data is None:
        problems.missing(ROOT)
        return None
    if not isinstance(data, dict):
        problems.invalid(ROOT, 'must be a mapping, not %s' % _type_name(data))
        return None
    if not check_bounds(problems, ROOT, data, max_size):
        return None
    return Section(problems, ROOT, data, _SECTION_KEYS[ROOT])


def _build(root, options):
    keys = _SECTION_KEYS
    kubespray = _kubespray(root.section('kubespray', keys['kubespray']))
    nodes = _nodes(root)
    options['need_cp_names'] = options['need_cp_names'] and \
        not root.given('nodes')
    master_sec = root.section('master_node', keys['master_node'], True)
    worker_sec = root.section('worker_node', keys['worker_node'], True)
    master = worker = pod = service = None
    if master_sec is not None:
        master = _node_group(master_sec, ROLE_MASTER, options)
        pod, service = _master_networks(master_sec, kubespray)
    if worker_sec is not None:
        worker = _node_group(worker_sec, ROLE_WORKER, options)
    spec = ClusterSpec(
        vim_name=_vim_name(root),
        script_path=_package_path(root, 'script_path'),
        master=master, worker=worker, pod_cidr=pod, service_cidr=service,
        cluster_cp_name=_text(master_sec, 'cluster_cp_name')
        if master_sec else None,
        proxy=_proxy(root.section('proxy', keys['proxy']), pod, service),
        ansible=_ansible(root.section('ansible', keys['ansible'], True),
                         options),
        external_lb=_external_lb(root.section(
            'external_lb_param', keys['external_lb_param'], True), options),
        kubespray=kubespray, nodes=nodes,
        node_pools=_node_pools(root, options))
    _check_pools(root, spec)
    _check_nodes(root, spec)
    if nodes is not None and spec.external_lb is not None and \
            spec.external_lb.vip_cp_name is not None:
        root.problems.invalid(root.at('external_lb_param.vip_cp_name'), (
            'only with VMs found in Heat; with nodes give vip'))
    return spec


def parse_params(additional_params, default_key_file=None,
                 need_cp_names=True, max_size=None):
    """Validate ``additionalParams`` and return its :class:`ClusterSpec`.

    :param additional_params: the request's ``additionalParams`` (a dict
        holding ``k8s_cluster_installation_param``; other keys, such as
        ``lcm-operation-user-data``, are Tacker's and ignored here).
    :param default_key_file: the ``[kubespray_mgmt] ssh_private_key_file``
        option: the key of every role that gives neither password nor
        ``ssh_key_file``.
    :param need_cp_names: require ``ssh_cp_name`` of each role (the VMs
        are discovered from Heat).  False when the caller has the
        addresses already (a topology file); an explicit ``nodes`` list
        makes them optional too.
    :param max_size: see :func:`check_bounds`.
    :returns: the validated :class:`ClusterSpec`.
    :raises ParamsNotFound: when every problem is a missing field.
    :raises ParamsInvalid: for any other problem (all are listed).
    """
    problems = Problems()
    root = _root_section(problems, additional_params, max_size)
    spec = None
    if root is not None:
        spec = _build(root, {'default_key_file': default_key_file,
                             'need_cp_names': need_cp_names})
    problems.raise_if_any()
    return spec


def merge_operation_params(instantiated, operation, operation_name='scale',
                           max_size=None):
    """Lay a scale/heal request's overrides over the instantiated params.

    Only :data:`OVERRIDABLE_SECTIONS` may be overridden; within a section
    each given key replaces the instantiated one (a mapping value such as
    ``labels`` is replaced whole), other keys are kept.  ``node_pools`` is
    merged pool by pool: a request may give an existing pool other
    :data:`OVERRIDABLE_POOL_KEYS`, nothing else.

    :param instantiated: the ``additionalParams`` of the instantiation.
    :param operation: the operation request's ``additionalParams`` (None
        or without ``k8s_cluster_installation_param``: no override).
    :param operation_name: used in messages (``'scale'``, ``'heal'``).
    :param max_size: see :func:`check_bounds`.
    :returns: a new ``additionalParams`` dict; the inputs are unchanged.
    :raises ParamsInvalid: when the overrides are malformed, or either
        tree is too deep or too large to copy.
    """
    _check_both(instantiated, operation, max_size)
    merged = copy.deepcopy(instantiated) if isinstance(
        instantiated, dict) else instantiated
    overrides = (operation or {}).get(ROOT) if isinstance(
        operation, (dict, type(None))) else operation
    if overrides is None or not isinstance(merged, dict) or not isinstance(
            merged.get(ROOT), dict):
        return merged
    problems = Problems()
    if not isinstance(overrides, dict):
        problems.invalid(ROOT, 'the %s request\'s value must be a mapping, '
                         'not %s' % (operation_name, _type_name(overrides)))
    else:
        _merge_sections(problems, merged[ROOT], overrides, operation_name)
    problems.raise_if_any()
    return merged


def _check_both(instantiated, operation, max_size):
    """Bounds of both trees, before anything copies them (recursively)."""
    problems = Problems()
    for what, tree in (('instantiated', instantiated),
                       ('operation', operation)):
        if isinstance(tree, dict) and tree.get(ROOT) is not None:
            check_bounds(problems, '%s (%s request)' % (ROOT, what),
                         tree[ROOT], max_size)
    problems.raise_if_any()


def _merge_sections(problems, target, overrides, operation_name):
    for name, section in overrides.items():
        path = '%s.%s' % (ROOT, _key_text(name))
        if name not in OVERRIDABLE_SECTIONS:
            problems.invalid(path, 'cannot be changed by a %s request '
                             '(only %s)' % (operation_name,
                                            ', '.join(OVERRIDABLE_SECTIONS)))
        elif not isinstance(section, dict):
            problems.invalid(path, 'must be a mapping, not %s'
                             % _type_name(section))
        elif name == 'node_pools':
            _merge_pools(problems, path, target, section, operation_name)
        elif isinstance(target.get(name), dict):
            target[name].update(copy.deepcopy(section))
        else:
            target[name] = copy.deepcopy(section)


def _merge_pools(problems, path, target, overrides, operation_name):
    """``node_pools`` overrides: labels and taints of existing pools,
    pool by pool and key by key."""
    pools = target.get('node_pools')
    pools = pools if isinstance(pools, dict) else {}
    for name, changes in overrides.items():
        pool_path = '%s.%s' % (path, _key_text(name))
        if not isinstance(pools.get(name), dict):
            problems.invalid(pool_path, 'is not a pool of the instantiation; '
                             'a %s request may only change the labels and '
                             'taints of one' % operation_name)
        elif not isinstance(changes, dict):
            problems.invalid(pool_path, 'must be a mapping, not %s'
                             % _type_name(changes))
        else:
            refused = [key for key in changes
                       if key not in OVERRIDABLE_POOL_KEYS]
            for key in refused:
                problems.invalid('%s.%s' % (pool_path, _key_text(key)), (
                    'cannot be changed by a %s request (only %s)') % (
                        operation_name, ', '.join(OVERRIDABLE_POOL_KEYS)))
            if not refused:
                pools[name].update(copy.deepcopy(changes))


def sets_node_settings(operation):
    """Whether a scale or heal request's ``additionalParams`` give
    labels or taints (``worker_node``, ``node_pools``): the nodes it
    joins take them instead of what was recorded for them."""
    overrides = operation.get(ROOT) if isinstance(operation, dict) \
        else None
    if not isinstance(overrides, dict):
        return False
    worker = overrides.get('worker_node')
    pools = overrides.get('node_pools')
    sections = [worker] + (list(pools.values())
                           if isinstance(pools, dict) else [])
    return any(isinstance(section, dict) and (
        'labels' in section or 'taints' in section)
        for section in sections)


def parse_for_operation(instantiated, operation, operation_name='scale',
                        default_key_file=None, need_cp_names=True,
                        max_size=None):
    """:func:`merge_operation_params`, then :func:`parse_params`.

    :returns: the :class:`ClusterSpec` that applies to this operation.
    :raises ParamsNotFound, ParamsInvalid: as :func:`parse_params`.
    """
    merged = merge_operation_params(instantiated, operation, operation_name,
                                    max_size)
    return parse_params(merged, default_key_file=default_key_file,
                        need_cp_names=need_cp_names, max_size=max_size)


def _login_text(login):
    return '%s:%d by %s%s' % (login.username, login.port,
                              'key' if login.key_file else 'password',
                              ', sudo with a password'
                              if login.sudo_password else '')


def describe(spec):
    """A one-line summary of *spec*, without any secret."""
    lb = spec.external_lb
    parts = [
        'masters %s' % _login_text(spec.master.login),
        'workers %s' % _login_text(spec.worker.login),
        'ansible %s at %s' % (_login_text(spec.ansible.login),
                              spec.ansible.ip_address),
        'LB api port %d, nodeports %d-%d%s' % ((lb.api_port,) +
                                              tuple(lb.nodeport_range) + (
            ', VIP %s (VRRP %d)' % (lb.vip or 'from ' + lb.vip_cp_name,
                                    lb.vrrp_router_id)
            if lb.highly_available else '',)),
        'pods %s, services %s' % (spec.pod_cidr, spec.service_cidr),
        'proxy %s' % ('on' if spec.proxy.enabled else 'off'),
        '%d extra var(s)' % len(spec.kubespray.extra_vars),
    ]
    if spec.nodes is not None:
        parts.append('%d explicit node(s)' % len(spec.nodes))
    if spec.node_pools:
        parts.append('%d node pool(s)' % len(spec.node_pools))
    return 'valid: ' + ', '.join(parts)
