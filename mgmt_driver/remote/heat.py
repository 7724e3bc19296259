"""Find the cluster's VMs in Heat, as Tacker's v1 stacks lay them out.

Kept apart from :mod:`mgmt_driver.model.nodes` on purpose: nodes.py is pure
(names, node sets, topology files) while this module talks to a VIM.

Layout (the one Tacker's kubespray sample and our VNF packages use): the
VNF's top stack (``instantiated_vnf_info.instance_id``) holds, for a role
with an ``aspect_id``, an ``OS::Heat::AutoScalingGroup`` resource named
after the aspect; each group member is a nested stack with the role's VDU
(``OS::Nova::Server``), its port (``nic_cp_name``) and optionally a
floating IP (``ssh_cp_name``).  A role without ``aspect_id`` has its port
and floating IP in the top stack itself.
"""

import dataclasses
import ipaddress

from mgmt_driver.common import exceptions
from mgmt_driver.common import safetext
from mgmt_driver.model import core

LOG = safetext.logger(__name__)

SERVER_TYPE = 'OS::Nova::Server'
FLOATING_IP_TYPE = 'OS::Neutron::FloatingIP'


@dataclasses.dataclass(frozen=True)
class VmRecord:
    """One VM found in Heat.

    :param address: the VM as a :class:`~mgmt_driver.model.core.NodeAddress`.
    :param server_id: its Nova server id (``compute_resource.resource_id``
        of the VNFC), or None when the stack does not say.
    :param stack_id: the scaling-group member stack holding it (what
        Tacker passes in ``scale_out_id_list``), or None.
    :param member_name: that member's resource name in the group (what
        Tacker passes in ``scale_name_list``), or None.
    :param gone: Heat reports the server gone or broken
        (:data:`GONE_STATUSES`): a worker is then declared absent
        (:meth:`mgmt_driver.session.driver.ClusterDriver.declare_absent`).
    """

    address: core.NodeAddress
    server_id: str | None = None
    stack_id: str | None = None
    member_name: str | None = None
    gone: bool = False


#: Heat resource statuses of a server that is gone or broken: Tacker's
#: heal marks a VM unhealthy (``CHECK_FAILED``, "marked by tacker"), a
#: stack check finds a server deleted outside Heat likewise, and a
#: failed or half-done delete leaves no usable VM.
GONE_STATUSES = frozenset(('CHECK_FAILED', 'DELETE_IN_PROGRESS',
                           'DELETE_COMPLETE', 'DELETE_FAILED'))


def _not_found(what):
    return exceptions.MgmtDriverNotFound(param=what)


class HeatNodeFinder:
    """Looks the VMs up through a Heat client.

    :param heat: an object with Tacker's ``HeatClient`` methods
        ``resource_get(stack_id, name)`` and
        ``resource_get_list(stack_id, nested_depth=0)``.
    """

    def __init__(self, heat):
        self._heat = heat

    def _get(self, stack_id, name, what):
        try:
            return self._heat.resource_get(stack_id, name)
        except Exception as exc:  # heatclient raises HTTPNotFound & co
            LOG.debug('Heat resource %s of stack %s: %s', name, stack_id,
                      exc)
            raise _not_found('%s (Heat resource %r in stack %s)'
                             % (what, name, stack_id))

    def _address(self, stack_id, name, what):
        resource = self._get(stack_id, name, what)
        attributes = getattr(resource, 'attributes', None) or {}
        if resource.resource_type == FLOATING_IP_TYPE:
            address = attributes.get('floating_ip_address')
        else:
            fixed = attributes.get('fixed_ips') or [{}]
            address = fixed[0].get('ip_address')
        if not address:
            raise _not_found('%s (Heat resource %r in stack %s has no IP '
                             'address yet)' % (what, name, stack_id))
        return address

    def _server(self, stack_id):
        """``(id, gone)`` of the one server of *stack_id* (a member stack,
        or the top stack for a VM outside any scaling group); the id is
        None if not exactly one."""
        servers = [r for r in self._heat.resource_get_list(stack_id)
                   if r.resource_type == SERVER_TYPE]
        if len(servers) != 1:
            return None, False
        return servers[0].physical_resource_id, getattr(
            servers[0], 'resource_status', None) in GONE_STATUSES

    def _vm(self, stack_id, role, ssh_cp_name, nic_cp_name, member=None,
            pool=None):
        section = section_path(role, pool)
        ssh_ip = self._address(stack_id, ssh_cp_name,
                               section + '.ssh_cp_name')
        nic_ip = self._address(stack_id, nic_cp_name,
                               section + '.nic_cp_name') \
            if nic_cp_name else ssh_ip
        server_id, gone = self._server(stack_id)
        return VmRecord(
            address=core.NodeAddress(role=role, ssh_ip=ssh_ip,
                                     nic_ip=nic_ip,
                                     source='heat:%s' % stack_id,
                                     pool=pool),
            server_id=server_id, gone=gone,
            stack_id=stack_id if member else None,
            member_name=member)

    def role_vms(self, top_stack_id, role, aspect_id, ssh_cp_name,
                 nic_cp_name=None, pool=None):
        """The VMs of one role (or of one node pool's scaling group).

        :param top_stack_id: the VNF's Heat stack.
        :param role: one of :data:`mgmt_driver.model.core.ROLES`.
        :param aspect_id: scaling group resource name, or None.
        :param pool: the node pool these VMs make up, or None for the
            role's own VMs; messages then name the pool's fields.
        :raises MgmtDriverNotFound: a named resource is not in the stack.
        """
        section = section_path(role, pool)
        if not ssh_cp_name:
            raise _not_found('%s.ssh_cp_name' % section)
        if not aspect_id:
            return [self._vm(top_stack_id, role, ssh_cp_name, nic_cp_name)]
        group = self._get(top_stack_id, aspect_id, '%s.aspect_id' % section)
        members = self._heat.resource_get_list(group.physical_resource_id)
        return [self._vm(m.physical_resource_id, role, ssh_cp_name,
                         nic_cp_name, member=m.resource_name, pool=pool)
                for m in sorted(members, key=lambda m: m.resource_name)]

    def cluster_vms(self, top_stack_id, spec):
        """Masters, workers and the gateways (external LB VMs) of
        *spec*'s cluster; the gateways are in the scaling group
        ``external_lb_param.aspect_id`` when it is set.  The workers of
        each node pool with an ``aspect_id`` are in that scaling group.

        :param spec: a :class:`mgmt_driver.model.core.ClusterSpec`.
        :returns: a list of :class:`VmRecord`.
        """
        vms = []
        for group in (spec.master, spec.worker):
            vms += self.role_vms(top_stack_id, group.role, group.aspect_id,
                                 group.ssh_cp_name, group.nic_cp_name)
        vms += self._pool_vms(top_stack_id, spec.node_pools)
        lb = spec.external_lb
        if lb.ssh_cp_name:
            vms += self.role_vms(top_stack_id, core.ROLE_EXTERNAL_LB,
                                 lb.aspect_id, lb.ssh_cp_name,
                                 lb.nic_cp_name)
        return vms

    def _pool_vms(self, top_stack_id, node_pools):
        """The workers of each node pool with an ``aspect_id`` (the
        listed pools' nodes are the ``nodes`` list's)."""
        vms = []
        for pool in node_pools:
            if pool.aspect_id:
                vms += self.role_vms(top_stack_id, core.ROLE_WORKER,
                                     pool.aspect_id, pool.ssh_cp_name,
                                     pool.nic_cp_name, pool=pool.name)
        return vms


    def vip_address(self, top_stack_id, vip_cp_name):
        """The address of the VIP's Neutron port (``vip_cp_name``).

        :raises MgmtDriverNotFound: no such resource, or no address yet.
        :raises RemoteDataInvalid: what Heat holds is no IP address.
        """
        path = '%s.external_lb_param.vip_cp_name' % core.ROOT
        address = self._address(top_stack_id, vip_cp_name, path)
        try:
            return str(ipaddress.ip_address(str(address)))
        except ValueError:
            raise exceptions.RemoteDataInvalid(
                host='Heat', what='address of %s (%s)' % (vip_cp_name, path),
                problem='not an IP address')


def resolve_vip(spec, finder, top_stack_id):
    """*spec* with ``external_lb.vip`` read from its ``vip_cp_name``.

    :param finder: a :class:`HeatNodeFinder`.
    :returns: *spec* itself when it names no VIP port or already has the
        address.
    """
    lb = spec.external_lb
    if lb is None or lb.vip is not None or lb.vip_cp_name is None:
        return spec
    vip = finder.vip_address(top_stack_id, lb.vip_cp_name)
    LOG.info('VIP of the gateways: %s (Heat resource %s)', vip,
             lb.vip_cp_name)
    return dataclasses.replace(spec, external_lb=dataclasses.replace(
        lb, vip=vip))



def section_path(role, pool=None):
    """The field path of the section that names a VM's resources: its
    role's, or its node pool's."""
    if pool is not None:
        return '%s.node_pools.%s' % (core.ROOT, pool)
    return '%s.%s' % (core.ROOT, core.ROLE_SECTIONS[role])


def server_ids_for_vnfcs(vnf_instance, vnfc_instance_ids):
    """Map healed VNFC ids to their Nova server ids.

    :param vnf_instance: Tacker's ``VnfInstance``.
    :param vnfc_instance_ids: ``HealVnfRequest.vnfc_instance_id``.
    :returns: the server ids, in request order.
    :raises MgmtDriverNotFound: an id is not a VNFC of the instance.
    """
    info = getattr(vnf_instance, 'instantiated_vnf_info', None)
    resources = {r.id: r for r in getattr(info, 'vnfc_resource_info', [])}
    missing = [v for v in vnfc_instance_ids if v not in resources]
    if missing:
        raise _not_found('vnfc_instance_id %s (not a VNFC of VNF instance '
                         '%s)' % (', '.join(missing), vnf_instance.id))
    return [resources[v].compute_resource.resource_id
            for v in vnfc_instance_ids]


def _openstack_vim(vnf_instance, request=None):
    infos = list(getattr(request, 'vim_connection_info', None) or []) or \
        list(getattr(vnf_instance, 'vim_connection_info', None) or [])
    for info in infos:
        if 'kubernetes' not in (info.vim_type or '').lower():
            return info.vim_id, (info.access_info or {}).get('region')
    return None, None  # Tacker's default VIM


class VimHeat:
    """A Heat client, and the auth URLs of the VIM it reaches Heat
    through (:func:`mgmt_driver.remote.trust.check_heat_logins` asks whether
    they are the operator's).  Every other attribute is the client's.

    :param client: a Heat client (v1's ``HeatClient``, v2's).
    :param urls: the URLs the client authenticates or connects to.
    """

    def __init__(self, client, urls):
        self._client = client
        self.vim_urls = tuple(urls)

    def __getattr__(self, name):
        return getattr(self._client, name)


def vim_urls(client):
    """The auth URLs *client* reaches Heat through; () when it does not
    say (no VIM vouches then)."""
    urls = getattr(client, 'vim_urls', None)
    return tuple(urls) if isinstance(urls, (list, tuple)) else ()


def tacker_heat_client(context, vnf_instance, request=None):
    """Tacker's own Heat client for the VNF's OpenStack VIM, as a
    :class:`VimHeat` naming the VIM's ``auth_url``.

    Only usable inside tacker-conductor (needs its database).
    """
    from tacker.vnfm import vim_client
    from tacker.vnfm.infra_drivers.openstack import heat_client as theat
    vim_id, region = _openstack_vim(vnf_instance, request)
    vim = vim_client.VimClient().get_vim(context, vim_id,
                                         region_name=region)
    # The registry entry may be a VIM the tenant registered: the URL
    # is what decides whether its Heat vouches for addresses.
    return VimHeat(theat.HeatClient(vim['vim_auth'], region_name=region),
                   [vim['vim_auth'].get('auth_url')])


class HeatclientAdapter:
    """python-heatclient's ``Client`` behind Tacker's HeatClient methods."""

    def __init__(self, client):
        self._client = client

    def resource_get(self, stack_id, name):
        return self._client.resources.get(stack_id, name)

    def resource_get_list(self, stack_id, nested_depth=0):
        return self._client.resources.list(stack_id,
                                           nested_depth=nested_depth)


def keystone_heat_client(vim_auth, region=None):
    """A Heat client from python-heatclient and a keystoneauth1 session.

    For use where Tacker cannot be imported.

    :param vim_auth: ``auth_url``, ``username``, ``password``,
        ``project_name``, ``user_domain_name``, ``project_domain_name``
        and optional ``cert_verify`` (Tacker's ``vim_auth`` keys).
    """
    from heatclient import client as heatclient
    from keystoneauth1 import loading
    from keystoneauth1 import session
    plugin = loading.get_plugin_loader('password').load_from_options(
        auth_url=vim_auth['auth_url'], username=vim_auth['username'],
        password=vim_auth['password'],
        project_name=vim_auth.get('project_name'),
        user_domain_name=vim_auth.get('user_domain_name', 'Default'),
        project_domain_name=vim_auth.get('project_domain_name', 'Default'))
    verify = str(vim_auth.get('cert_verify', 'True')).lower() != 'false'
    sess = session.Session(auth=plugin, verify=verify)
    return HeatclientAdapter(heatclient.Client('1', session=sess,
                                               region_name=region))


def heat_client(context, vnf_instance, request=None):
    """Tacker's Heat client when Tacker is importable.

    :raises MgmtDriverOtherError: Tacker is not installed; outside Tacker
        give the VMs in a topology file or the ``nodes`` parameter.
    """
    try:
        return tacker_heat_client(context, vnf_instance, request)
    except ImportError:
        raise exceptions.MgmtDriverOtherError(
            error_message='Heat lookups need Tacker; outside Tacker list '
                          'the VMs in the "nodes" parameter')
