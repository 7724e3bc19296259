"""The cluster's VMs: the :class:`Node` model, node names, node sets.

A VIM (Heat, with the LCM hooks), a topology file (the CLI) or the
request's explicit ``nodes`` list reports VMs as
:class:`mgmt_driver.model.core.NodeAddress` entries; :func:`build_nodes`
checks the set and turns it into :class:`ClusterNodes`.

Node names are the kubespray inventory host names and the Kubernetes node
names, so they must be valid DNS-1123 labels, unique, and stable for the
life of the VM.  They come from the role and the **full** cluster address:
``master-10-10-0-11``, ``worker-fd00-0-0-0-0-0-0-21`` (IPv6: all eight
groups, lower-case hex without leading zeros, so one address has exactly
one name and no two addresses share one).
"""

import dataclasses
import functools
import ipaddress

from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.model import params
from mgmt_driver.model import validation

NAME_PREFIXES = {core.ROLE_MASTER: 'master',
                 core.ROLE_WORKER: 'worker',
                 core.ROLE_EXTERNAL_LB: 'lb'}

_TOPOLOGY_KEYS = ('masters', 'workers', 'external_lb')


def node_name(role, address):
    """The node name of a VM of *role* at cluster address *address*.

    :param role: one of :data:`mgmt_driver.model.core.ROLES`.
    :param address: its IPv4 or IPv6 cluster address (text, any form).
    :returns: e.g. ``worker-10-10-0-21`` or ``worker-fd00-0-0-0-0-0-0-21``.
    :raises ValueError: for an unknown role or a bad address.
    """
    ip = ipaddress.ip_address(address)
    if ip.version == 4:
        suffix = str(ip).replace('.', '-')
    else:
        suffix = '-'.join('%x' % int(group, 16)
                          for group in ip.exploded.split(':'))
    name = '%s-%s' % (NAME_PREFIXES[role], suffix)
    if not validation.is_dns_label(name):  # cannot happen: be loud if so
        raise ValueError('node name %r is not a DNS-1123 label' % name)
    return name


def is_node_name(name):
    """Whether *name* could be a node name (a DNS-1123 label)."""
    return validation.is_dns_label(name)


def _address_key(node):
    ip = ipaddress.ip_address(node.cluster_address)
    return ip.version, int(ip)


@dataclasses.dataclass(frozen=True)
class Node:
    """One VM of the cluster.

    :param role: one of :data:`mgmt_driver.model.core.ROLES`; it is also the
        credentials reference: ``spec.login_for(node.role)``.
    :param name: inventory host name == Kubernetes node name.
    :param ssh_address: where SSH reaches it (Ansible's ``ansible_host``).
    :param cluster_address: its address inside the cluster (kubespray's
        ``ip`` and ``access_ip``).
    :param ssh_port: its SSH port.
    :param resource_id: the VIM's id of the VM, when known.
    :param pool: the name of its node pool (``node_pools``), or None.
    """

    role: str
    name: str
    ssh_address: str
    cluster_address: str
    ssh_port: int = core.DEFAULT_SSH_PORT
    resource_id: str | None = None
    pool: str | None = None

    @classmethod
    def from_address(cls, address, default_port, resource_id=None):
        """Build a node from a :class:`~mgmt_driver.model.core.NodeAddress`.

        :param default_port: the role's SSH port, used when the entry
            gives none.
        """
        return cls(role=address.role,
                   name=node_name(address.role, address.nic_ip),
                   ssh_address=address.ssh_ip,
                   cluster_address=address.nic_ip,
                   ssh_port=address.ssh_port or default_port,
                   resource_id=resource_id, pool=address.pool)


def _duplicate_names(nodes):
    seen, duplicates = set(), []
    for node in nodes:
        if node.name in seen:
            duplicates.append(node.name)
        seen.add(node.name)
    return duplicates


@dataclasses.dataclass(frozen=True)
class ClusterNodes:
    """The node set of one cluster.

    Masters keep the order they are given in: kubespray treats the first
    control-plane node specially (``kubeadm init`` runs there; it cannot
    be removed), so existing masters stay first and new ones are
    appended.  Workers are kept sorted by address, so the same set always
    renders the same inventory whatever order a VIM reported it in.

    The gateways (LB VMs; several share a VIP) are sorted by address
    too; :attr:`external_lb` is the first of them, the one gateway of a
    cluster without a VIP.  Given *external_lb* alone, it is the only
    gateway; given both, *external_lb* is one of the gateways.

    :raises ParamsInvalid: if two nodes have the same name.
    """

    masters: tuple = ()
    workers: tuple = ()
    external_lb: Node | None = None
    gateways: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, 'masters', tuple(self.masters))
        object.__setattr__(self, 'workers',
                           tuple(sorted(self.workers, key=_address_key)))
        gateways = list(self.gateways)
        if self.external_lb is not None and \
                self.external_lb not in gateways:
            gateways.append(self.external_lb)
        gateways.sort(key=_address_key)
        object.__setattr__(self, 'gateways', tuple(gateways))
        object.__setattr__(self, 'external_lb',
                           gateways[0] if gateways else None)
        duplicates = _duplicate_names(self.k8s_nodes) + _duplicate_names(
            self.gateways)
        if duplicates:
            raise exceptions.ParamsInvalid(
                ['nodes: %s is in the cluster twice' % name
                 for name in duplicates])

    @property
    def k8s_nodes(self):
        """Masters then workers: every node of the kubespray inventory."""
        return self.masters + self.workers

    @property
    def names(self):
        return [node.name for node in self.k8s_nodes]

    @functools.cached_property
    def _by_name(self):
        # Callers look names up in loops over request-sized lists: one
        # dict per (immutable) set, not a scan per name.
        return ({n.name: n for n in self.k8s_nodes},
                {n.name: n for n in self.gateways})

    def get(self, name):
        """:returns: the Kubernetes node called *name*, or None."""
        return self._by_name[0].get(name)

    def gateway(self, name):
        """:returns: the gateway called *name*, or None."""
        return self._by_name[1].get(name)

    def add(self, *nodes):
        """A new set with *nodes* added (masters at the end).

        An ``external_lb`` node is one more gateway.
        """
        masters, workers = list(self.masters), list(self.workers)
        gateways = list(self.gateways)
        for node in nodes:
            {core.ROLE_MASTER: masters, core.ROLE_WORKER: workers,
             core.ROLE_EXTERNAL_LB: gateways}[node.role].append(node)
        return ClusterNodes(masters, workers, gateways=gateways)

    def remove(self, *names):
        """A new set without the nodes (or gateways) called *names*."""
        gone = set(names)
        return ClusterNodes(
            [n for n in self.masters if n.name not in gone],
            [n for n in self.workers if n.name not in gone],
            gateways=[n for n in self.gateways if n.name not in gone])

    def with_masters(self, masters):
        """The same set with the control plane in the order *masters*."""
        return dataclasses.replace(self, masters=masters)


def build_nodes(spec, addresses, path='nodes'):
    """Check a node set against *spec* and build :class:`ClusterNodes`.

    :param spec: the :class:`~mgmt_driver.model.core.ClusterSpec` (SSH ports
        per role, pod and service networks).
    :param addresses: :class:`~mgmt_driver.model.core.NodeAddress` entries,
        masters in the order kubespray should see them.
    :param path: where the entries came from, for messages.
    :raises ParamsInvalid: listing every problem of the set, a ``pool``
        of an entry that is not a worker's or names no aspect pool, or a
        node that two ``node_pools`` claim.
    """
    addresses = list(addresses)
    ports = {role: spec.login_for(role).port for role in core.ROLES}
    _check_addresses(spec, addresses, ports, path)
    built = [Node.from_address(a, ports[a.role]) for a in addresses]
    _check_one_pool_each(spec, built)
    return ClusterNodes(
        masters=[n for n in built if n.role == core.ROLE_MASTER],
        workers=[n for n in built if n.role == core.ROLE_WORKER],
        gateways=[n for n in built if n.role == core.ROLE_EXTERNAL_LB])


def _check_addresses(spec, addresses, ports, path):
    """The set checks of :mod:`~mgmt_driver.model.params` with *spec*'s
    networks, gateways and pools, and the role's SSH port in *ports*.

    :raises ParamsInvalid: listing every problem.
    """
    networks = ((spec.pod_cidr, 'pod CIDR (master_node.pod_cidr)'),
                (spec.service_cidr,
                 'service CIDR (master_node.cluster_cidr)'))
    problems = validation.Problems()
    params.check_node_addresses(problems, path, addresses, ports, networks,
                                params.max_gateways(spec.external_lb))
    params.check_pool_references(problems, spec, addresses)
    problems.raise_if_any()


def _check_one_pool_each(spec, built):
    """No node in two pools (found in an aspect pool and listed in
    another, or listed by name in one pool and by address in another).

    :raises ParamsInvalid: naming each such node and its pools.
    """
    claims = ((node, spec.pools_of(node)) for node in built)
    problems = [core.pool_conflict(node, pools)
                for node, pools in claims if len(pools) > 1]
    if problems:
        raise exceptions.ParamsInvalid(problems)


def nodes_from_spec(spec):
    """The :class:`ClusterNodes` of the request's explicit ``nodes`` list.

    :raises ParamsInvalid: when the list is absent or the set is wrong.
    """
    if spec.nodes is None:
        raise exceptions.ParamsNotFound(
            ['%s.nodes: missing (no topology given either)' % core.ROOT])
    return build_nodes(spec, spec.nodes, path='%s.nodes' % core.ROOT)


def load_topology(data, path='topology'):
    """Read a topology document (the CLI's stand-in for a VIM).

    Format::

        masters:                 # list, at least one
          - ssh_ip: 10.10.0.11   # required
            nic_ip: 10.10.0.11   # optional, defaults to ssh_ip
            ssh_port: 22         # optional, defaults to the role's port
        workers:                 # list, optional
          - ssh_ip: 10.10.0.21
            pool: dpdk           # optional: a node_pools entry without
                                 # a nodes list
        external_lb: {ssh_ip: 10.10.0.30}   # one entry, or a list of
                                            # them (gateways with a VIP)

    :param data: the parsed document.
    :param path: the name used in messages.
    :returns: a list of :class:`~mgmt_driver.model.core.NodeAddress`, masters
        first in file order; check the set with :func:`build_nodes`.
    :raises ParamsInvalid, ParamsNotFound: listing every problem.
    """
    problems = validation.Problems()
    entries = []
    if not isinstance(data, dict):
        problems.invalid(path, 'must be a mapping with masters, workers '
                         'and external_lb')
    else:
        entries = _topology_entries(problems, path, data)
    problems.raise_if_any()
    return entries


def _topology_entries(problems, path, data):
    top = validation.Section(problems, path, data, _TOPOLOGY_KEYS)
    lists = {}
    for key in ('masters', 'workers'):
        lists[key] = top.value(key, list, required=key == 'masters') or []
    # One mapping, or a list of them for several gateways.
    lb = top.value('external_lb', list if isinstance(
        data.get('external_lb'), list) else dict, required=True)
    entries = []
    for key, role in (('masters', core.ROLE_MASTER),
                      ('workers', core.ROLE_WORKER)):
        for index, item in enumerate(lists[key]):
            entries.append(params.parse_node_address(
                problems, '%s.%s[%d]' % (path, key, index), item, role))
    if isinstance(lb, dict):
        entries.append(params.parse_node_address(
            problems, '%s.external_lb' % path, lb, core.ROLE_EXTERNAL_LB))
    for index, item in enumerate(lb if isinstance(lb, list) else ()):
        entries.append(params.parse_node_address(
            problems, '%s.external_lb[%d]' % (path, index), item,
            core.ROLE_EXTERNAL_LB))
    return [entry for entry in entries if entry is not None]
