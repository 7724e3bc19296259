"""``additionalParams`` -> a typed, validated cluster spec.

:func:`parse_params` reads ``additionalParams.k8s_cluster_installation_param``
(every key of Tacker's kubespray sample, plus this driver's extensions),
checks all of it and raises **once** with every problem found, each as
``k8s_cluster_installation_param.<path>: <problem>``:

* :class:`~mgmt_driver.common.exceptions.ParamsNotFound` (a Tacker
  ``MgmtDriverNotFound``) when every problem is a missing field;
* :class:`~mgmt_driver.common.exceptions.ParamsInvalid` (a Tacker
  ``MgmtDriverParamInvalid``) as soon as one problem is something else.

A secret (password, proxy URL, the value of an unknown key, a kubespray
extra var) is never echoed: its problem says what is wrong, not what was
given.  This module holds the request's rules; the rest of the request
handling lives beside it, one concern per module:

* :mod:`mgmt_driver.model.core`: the spec the rules build;
* :mod:`mgmt_driver.model.validation`: the kit (problems, sections, bounds);
* :mod:`mgmt_driver.model.labels`: the grammar of node labels and taints;
* :mod:`mgmt_driver.model.merging`: a scale or heal request's overrides.

``samples/README.rst`` documents every key with its default.
"""

import copy
import dataclasses
import ipaddress
import posixpath
import re
import types
import urllib.parse

from mgmt_driver.model import core
from mgmt_driver.model import labels
from mgmt_driver.model import validation

MIN_KUBESPRAY_VERSION = (2, 16)
MAX_FORKS = 500
#: Gateways (LB VMs) sharing one VIP at most.
MAX_GATEWAYS = 100

#: Named node pools (``node_pools``) at most.
MAX_NODE_POOLS = 64
#: Entries of one listed pool's ``nodes`` at most.
MAX_POOL_NODES = 1000

#: How the driver and kubespray gain root on a role's VMs (sudo).
_BECOME_KEYS = ('become_password', 'passwordless_sudo')
_ROLE_KEYS = ('aspect_id', 'ssh_cp_name', 'nic_cp_name', 'username',
              'password', 'ssh_key_file', 'port', 'labels',
              'taints') + _BECOME_KEYS
_SECTION_KEYS = {
    core.ROOT: ('vim_name', 'master_node', 'worker_node', 'proxy', 'ansible',
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

_VAR_NAME_RE = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
_USERNAME_RE = re.compile(r'[A-Za-z_][A-Za-z0-9_.-]{0,31}')
_VERSION_RE = re.compile(r'v?([0-9]+)\.([0-9]+)(?:\.([0-9]+))?')
_PACKAGE_FILE_RE = re.compile(r'[A-Za-z0-9_][A-Za-z0-9_./-]*')
_RANGE_RE = re.compile(r'([0-9]{1,5})-([0-9]{1,5})')
# keepalived's PASS authentication: 8 characters at most; no blank,
# quote, brace or comment sign, which its configuration syntax would read.
VRRP_PASSWORD_PUNCT = '_.:+=%@^~,-'
VRRP_PASSWORD_RE = re.compile(r'[A-Za-z0-9%s]{1,8}' % re.escape(
    VRRP_PASSWORD_PUNCT))


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
                             % validation.show(name))
        return None
    return name


def _int(sec, key, default, low, high, what='must be'):
    value = sec.value(key, int)
    if value is None:
        return None if sec.given(key) else default
    if not low <= value <= high:
        sec.problems.invalid(sec.at(key), '%s %s between %d and %d' % (
            validation.show(value), what, low, high))
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
        problems.invalid(path, '%s is not an IP address'
                         % validation.show(value))
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
        problems.invalid(path, '%s is not a CIDR' % validation.show(text))
        return None
    problems.invalid(path, '%s has host bits set (did you mean %r?)' % (
        validation.show(text), str(loose)))
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
                validation.show(text), var, var))
        return None
    return net


def _remote_path(sec, key, required=False):
    path = sec.value(key, str, required=required)
    if path is None:
        return None
    if not path.startswith('/'):
        sec.problems.invalid(sec.at(key), '%s is not an absolute path'
                             % validation.show(path))
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
                             % validation.show(path))
        return None
    return posixpath.normpath(path)


def _local_file(sec, key):
    """A file on the conductor: absolute, ``~/``, or relative to the VNF
    package (without ``..``); which ones may be read is
    :mod:`mgmt_driver.remote.trust`'s decision."""
    path = sec.value(key, str)
    if path is None:
        return None
    relative = not path.startswith(('/', '~/'))
    if validation.CONTROL_RE.search(path) or (relative and (
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
    reason = _proxy_url_problem(url)
    if reason is None:
        return url
    sec.problems.invalid(sec.at(key), 'is not a valid proxy URL '
                         '(http[s]://[user:password@]host[:port]): %s '
                         '(value not shown)' % reason)
    return None


def _proxy_url_problem(url):
    """Why *url* is no usable proxy URL (never its text), or None."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        return 'its port is not a number between 1 and 65535'
    if parts.scheme not in ('http', 'https'):
        return 'the scheme must be http or https'
    if not parts.hostname:
        return 'it has no host'
    if port == 0 or ' ' in url:
        return 'it has port 0 or a space'
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
                             % validation.show(bad[0]))
        return None
    return entries


def _login(sec, user_key, password_key, port_key, default_key_file):
    username = _username(sec, user_key)
    password = _text(sec, password_key, secret=True)
    key_file = _local_file(sec, 'ssh_key_file')
    port = _port(sec, port_key, core.DEFAULT_SSH_PORT)
    default_key = False
    if not sec.given(password_key) and not sec.given('ssh_key_file'):
        if default_key_file:
            key_file, default_key = default_key_file, True
        else:
            sec.problems.missing(sec.at(password_key), (
                'missing: give %s or ssh_key_file, or set the option '
                '[kubespray_mgmt] ssh_private_key_file') % password_key)
    return core.Login(username, password, key_file, port, default_key)


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
    return core.NodeGroupSpec(
        role=role, aspect_id=_text(sec, 'aspect_id'),
        ssh_cp_name=_cp_name(sec, 'ssh_cp_name', options['need_cp_names']),
        nic_cp_name=_text(sec, 'nic_cp_name'), login=login,
        labels=labels.read_labels(sec, 'labels'),
        taints=labels.read_taints(sec, 'taints'))


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
    if not validation.is_dns_label(name):
        problems.invalid('%s.%s' % (path, validation.key_text(name)), (
            'is not a pool name: a DNS-1123 label (1-63 of "a-z0-9-", '
            'alphanumeric at both ends)'))
        return None
    if not isinstance(body, dict):
        problems.invalid('%s.%s' % (path, name), 'must be a mapping, not %s'
                         % validation.type_name(body))
        return None
    sec = validation.Section(problems, '%s.%s' % (path, name), body,
                             _SECTION_KEYS['node_pool'])
    aspect_id, listed = _text(sec, 'aspect_id'), _pool_nodes(sec)
    _check_pool_source(sec, aspect_id, options)
    return core.NodePoolSpec(
        name=name, aspect_id=aspect_id,
        ssh_cp_name=_cp_name(sec, 'ssh_cp_name', aspect_id is not None and
                             options['need_cp_names']),
        nic_cp_name=_text(sec, 'nic_cp_name'), nodes=listed or (),
        labels=labels.read_labels(sec, 'labels'),
        taints=labels.read_taints(sec, 'taints'))


def _check_pool_source(sec, aspect_id, options):
    """A pool's VMs come from its scaling aspect or from its ``nodes``
    list: exactly one of them, and the CP names only with the aspect."""
    problems = sec.problems
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
                'a cluster address') % validation.show(item))
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
    name_ok = validation.is_dns_label(item) and item.startswith(
        ('%s-' % core.ROLE_MASTER, '%s-' % core.ROLE_WORKER))
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
                    'role') % (validation.show(value), core.ROOT, first))


def _role_claims(spec):
    """``{(key, value): field}`` of the roles' aspects and SSH CPs."""
    claims = {}
    for role, group in ((core.ROLE_MASTER, spec.master),
                        (core.ROLE_WORKER, spec.worker),
                        (core.ROLE_EXTERNAL_LB, spec.external_lb)):
        for key in ('aspect_id', 'ssh_cp_name'):
            value = getattr(group, key, None) if group else None
            if value is not None:
                claims[key, value] = '%s.%s' % (core.ROLE_SECTIONS[role], key)
    return claims


def check_pool_references(problems, spec, addresses):
    """The ``pool`` of node entries: a worker's, naming an aspect pool.

    :param addresses: :class:`~mgmt_driver.model.core.NodeAddress` entries
        (``nodes``, a topology file, Heat).
    """
    for address in addresses:
        if address is None or address.pool is None:
            continue
        path = '%s.pool' % address.source if address.source else 'pool'
        pool = spec.pool(address.pool)
        if address.role != core.ROLE_WORKER:
            problems.invalid(path, 'only a worker entry may name a pool '
                             '(name other nodes in a pool\'s nodes list)')
        elif pool is None:
            problems.invalid(path, '%s is not in %s.node_pools' % (
                validation.show(address.pool), core.ROOT))
        elif pool.listed:
            problems.invalid(path, (
                '%s.node_pools.%s lists its nodes; an entry may name only '
                'a pool without a nodes list') % (core.ROOT, pool.name))


def _master_networks(sec, kubespray):
    pod = _cidr_field(sec, 'pod_cidr', core.DEFAULT_POD_CIDR, ipv4_only=True,
                      var='kube_pods_subnet')
    service = _cidr_field(sec, 'cluster_cidr', core.DEFAULT_SERVICE_CIDR,
                          ipv4_only=True, var='kube_service_addresses')
    if pod is not None and service is not None and pod.overlaps(service):
        sec.problems.invalid(sec.at('cluster_cidr'), (
            '%s overlaps the pod CIDR %s (master_node.pod_cidr); '
            'kubespray needs them apart') % (str(service), str(pod)))
    prefix = kubespray.extra_vars.get('kube_network_node_prefix',
                                      core.DEFAULT_NODE_PREFIX)
    if pod is not None and isinstance(prefix, int) and \
            not isinstance(prefix, bool) and pod.prefixlen >= prefix:
        sec.problems.invalid(sec.at('pod_cidr'), (
            '%s leaves no room for node pod ranges: its prefix must be '
            'shorter than /%d (kube_network_node_prefix)') % (
                str(pod), prefix))
    return pod, service


def _proxy(sec, pod, service):
    if sec is None:
        return core.ProxySpec()
    proxy = core.ProxySpec(
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
                validation.show(inventory), root))
        inventory = None
    return core.AnsibleSpec(ip_address=_ip_field(sec, 'ip_address', True),
                            login=login, kubespray_root_path=root,
                            transferring_inventory_path=inventory)


def _nodeport_range(sec):
    text = sec.value('nodeport_range', str)
    if text is None:
        return None if sec.given('nodeport_range') else \
            core.DEFAULT_NODEPORT_RANGE
    match = _RANGE_RE.fullmatch(text.strip())
    first, last = (int(match.group(1)), int(match.group(2))) if match \
        else (0, 0)
    if not 1 <= first <= last <= 65535:
        sec.problems.invalid(sec.at('nodeport_range'), (
            '%s is not a port range "FIRST-LAST" with 1 <= FIRST <= LAST '
            '<= 65535') % validation.show(text))
        return None
    return first, last


def _external_lb(sec, options):
    if sec is None:
        return None
    login = _become(sec, _login(sec, 'ssh_username', 'ssh_password',
                                'ssh_port', options['default_key_file']))
    api_port = _port(sec, 'api_port', core.DEFAULT_API_PORT)
    ports = _nodeport_range(sec)
    if api_port and ports and ports[0] <= api_port <= ports[1]:
        sec.problems.invalid(sec.at('api_port'), (
            '%d lies inside nodeport_range %d-%d; HAProxy cannot bind '
            'both') % (api_port, ports[0], ports[1]))
    return core.ExternalLbSpec(
        ssh_cp_name=_cp_name(sec, 'ssh_cp_name', options['need_cp_names']),
        nic_cp_name=_text(sec, 'nic_cp_name'), login=login,
        script_path=_package_path(sec, 'script_path'),
        api_port=api_port, nodeport_range=ports, **_vrrp(sec))


def _vrrp(sec):
    """``vip`` (or ``vip_cp_name``), ``vrrp_router_id`` and
    ``vrrp_password``: all or none."""
    vip, vip_cp_name = _vip(sec)
    fields = {'vip': vip, 'vip_cp_name': vip_cp_name,
              'vrrp_router_id': _int(sec, 'vrrp_router_id', None, 1, 255),
              'vrrp_password': _vrrp_password(sec),
              'aspect_id': _text(sec, 'aspect_id')}
    if vip is not None or vip_cp_name is not None:
        for key in ('vrrp_router_id', 'vrrp_password'):
            if not sec.given(key):
                sec.problems.missing(sec.at(key), 'missing: required '
                                     'with vip (the gateways\' VRRP group)')
    elif not sec.given('vip') and not sec.given('vip_cp_name'):
        for key in ('vrrp_router_id', 'vrrp_password', 'aspect_id'):
            if fields[key] is not None:
                sec.problems.invalid(sec.at(key), 'only used with vip '
                                     '(the virtual IP of the gateways)')
    return fields


def _vip(sec):
    """``vip`` or ``vip_cp_name`` (not both): the pair, None for unset."""
    vip = _ip_field(sec, 'vip')
    vip_cp_name = _text(sec, 'vip_cp_name')
    if vip_cp_name is not None and sec.given('vip'):
        sec.problems.invalid(sec.at('vip_cp_name'), 'give vip or '
                             'vip_cp_name, not both')
        vip_cp_name = None
    return vip, vip_cp_name


def _vrrp_password(sec):
    """``vrrp_password``, None when unset or unusable."""
    password = _text(sec, 'vrrp_password', secret=True)
    if password is not None and not VRRP_PASSWORD_RE.fullmatch(password):
        sec.problems.invalid(sec.at('vrrp_password'), (
            'must be 1 to 8 characters among letters, digits and "%s" '
            '(keepalived reads no more)') % VRRP_PASSWORD_PUNCT)
        return None
    return password


def _version(sec):
    text = sec.value('version', str)
    if text is None:
        return None
    match = _VERSION_RE.fullmatch(text.strip())
    if not match:
        sec.problems.invalid(sec.at('version'), (
            '%s is not a kubespray version such as "2.24.0"')
            % validation.show(text))
        return None
    if (int(match.group(1)), int(match.group(2))) < MIN_KUBESPRAY_VERSION:
        sec.problems.invalid(sec.at('version'), (
            '%s is older than the oldest supported kubespray, v%d.%d') % (
                (validation.show(text),) + MIN_KUBESPRAY_VERSION))
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
    return _extra_var_name_problem(name) or \
        _extra_var_value_problem(name, value)


def _extra_var_name_problem(name):
    """Why *name* may not be given as an extra var, or None."""
    if not isinstance(name, str) or not _VAR_NAME_RE.fullmatch(name):
        return 'is not an Ansible variable name'
    if name in _DERIVED_VARS:
        return 'is set by the driver from %s; set that instead' % (
            _DERIVED_VARS[name])
    if name.startswith('ansible_'):
        return ('connection settings come from the role sections '
                '(username, password, ssh_key_file, port, '
                'become_password, passwordless_sudo)')
    return None


def _extra_var_value_problem(name, value):
    """What is wrong with the value of extra var *name* (never the value
    itself), or None."""
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
        return 'must be %s, not %s%s' % (validation.TYPE_NAMES[kind],
                                         validation.type_name(value), hint)
    return None


def _extra_vars(sec):
    data = sec.value('extra_vars', dict)
    if data is None:
        return {}
    accepted = {}
    for name, value in data.items():
        path = sec.at('extra_vars.%s' % validation.key_text(name))
        problem = _extra_var_problem(name, value)
        if problem:
            sec.problems.invalid(path, problem)
        elif validation.report_templated_keys(sec.problems, value, path):
            accepted[name] = copy.deepcopy(value)
    return accepted


def _kube_version(sec, text):
    """``extra_vars.kube_version`` (already checked to be a string), typed:
    kubespray asserts the version is one its checkout lists, which are
    all ``x.y.z``."""
    if text is None:
        return None
    version = core.KubeVersion.parse(text)
    if version is None:
        # Not echoed: no extra var's value is (some are secrets).
        sec.problems.invalid(sec.at('extra_vars.kube_version'), (
            'is not a Kubernetes version such as 1.34.3 (or v1.31.4 for '
            'kubespray v2.27 and older)'))
    return version


def _kubespray(sec):
    if sec is None:
        return core.KubesprayOptions()
    extra_vars = _extra_vars(sec)
    kube_version = _kube_version(sec, extra_vars.pop('kube_version', None))
    return core.KubesprayOptions(
        extra_vars=types.MappingProxyType(extra_vars),
        kube_version=kube_version,
        forks=_int(sec, 'forks', None, 1, MAX_FORKS),
        version=_version(sec),
        reset_on_terminate=_bool(sec, 'reset_on_terminate', False))


def parse_node_address(problems, path, data, role=None):
    """One VM entry: ``{role, ssh_ip, nic_ip, ssh_port, pool}``.

    :param problems: the :class:`~mgmt_driver.model.validation.Problems` to
        report to.
    :param path: the entry's field path, e.g. ``topology.workers[0]``.
    :param data: the entry (a mapping).
    :param role: the role when the container implies it (topology
        files); None to read the entry's own ``role`` key.
    :returns: a :class:`~mgmt_driver.model.core.NodeAddress`, or None if the
        entry is unusable.
    """
    if not isinstance(data, dict):
        problems.invalid(path, 'must be a mapping, not %s'
                         % validation.type_name(data))
        return None
    keys = _SECTION_KEYS['node']
    sec = validation.Section(problems, path, data,
                             keys if role is None else keys[1:])
    role = _entry_role(sec) if role is None else role
    return _node_address(sec, path, role)


def _entry_role(sec):
    """A VM entry's own ``role`` key, None when missing or unknown."""
    role = sec.value('role', str, required=True)
    if role is not None and role not in core.ROLES:
        sec.problems.invalid(sec.at('role'), '%s is not one of %s' % (
            validation.show(role), ', '.join(core.ROLES)))
        return None
    return role


def _node_address(sec, path, role):
    """The addresses of a VM entry whose role is read (None for an
    unusable role): the NodeAddress, or None if any is unusable."""
    ssh_ip = _ip_field(sec, 'ssh_ip', required=True)
    nic_ip = _ip_field(sec, 'nic_ip') if sec.given('nic_ip') else ssh_ip
    port = _port(sec, 'ssh_port', None)
    pool = sec.value('pool', str)
    if None in (role, ssh_ip, nic_ip) or (
            port is None and sec.given('ssh_port')) or (
            pool is None and sec.given('pool')):
        return None
    return core.NodeAddress(role, ssh_ip, nic_ip, port, source=path,
                            pool=pool)


def check_node_addresses(problems, path, addresses, ports=None,
                         networks=(), max_gateways=1):
    """Checks on a whole node set: counts, duplicates, addresses.

    One master at least and one external LB (up to *max_gateways* when
    the gateways share a VIP); an even number of
    masters (etcd members) is refused because kubespray refuses it; no
    two Kubernetes nodes share a cluster address or an SSH endpoint, and
    no cluster address lies in the pod or service network.

    :param path: where the set came from, e.g. ``topology``.
    :param addresses: the :class:`~mgmt_driver.model.core.NodeAddress` entries.
    :param ports: ``{role: default SSH port}`` (22 for a missing role).
    :param networks: ``(network, description)`` pairs no node may be in.
    """
    _check_role_counts(problems, path, addresses, max_gateways)
    k8s_nodes = [a for a in addresses if a.role != core.ROLE_EXTERNAL_LB]
    _check_duplicates(problems, k8s_nodes, ports or {})
    _check_outside_networks(problems, k8s_nodes, networks)


def _check_role_counts(problems, path, addresses, max_gateways):
    """An odd number of masters and 1 to *max_gateways* gateways."""
    count = {role: 0 for role in core.ROLES}
    for address in addresses:
        count[address.role] += 1
    if not count[core.ROLE_MASTER]:
        problems.invalid(path, 'no master node (need 1, 3 or 5 ...)')
    elif count[core.ROLE_MASTER] % 2 == 0:
        problems.invalid(path, '%d master nodes: etcd needs an odd '
                         'number (kubespray refuses an even one)'
                         % count[core.ROLE_MASTER])
    if max_gateways == 1 and count[core.ROLE_EXTERNAL_LB] != 1:
        problems.invalid(path, 'needs exactly one external_lb node, '
                         'found %d' % count[core.ROLE_EXTERNAL_LB])
    elif not 1 <= count[core.ROLE_EXTERNAL_LB] <= max_gateways:
        problems.invalid(path, 'needs 1 to %d external_lb nodes, found %d'
                         % (max_gateways, count[core.ROLE_EXTERNAL_LB]))


def _check_outside_networks(problems, k8s_nodes, networks):
    """No cluster address in the pod or service network."""
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
        port = address.ssh_port or ports.get(address.role,
                                             core.DEFAULT_SSH_PORT)
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
    for role, group in ((core.ROLE_MASTER, spec.master),
                        (core.ROLE_WORKER, spec.worker),
                        (core.ROLE_EXTERNAL_LB, spec.external_lb)):
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


def _root_section(problems, additional_params, max_size):
    if not isinstance(additional_params, dict):
        problems.invalid('additionalParams', 'must be a mapping, not %s'
                         % validation.type_name(additional_params))
        return None
    data = additional_params.get(core.ROOT)
    if data is None:
        problems.missing(core.ROOT)
        return None
    if not isinstance(data, dict):
        problems.invalid(core.ROOT, 'must be a mapping, not %s'
                         % validation.type_name(data))
        return None
    if not validation.check_bounds(problems, core.ROOT, data, max_size):
        return None
    return validation.Section(problems, core.ROOT, data,
                              _SECTION_KEYS[core.ROOT])


def _build(root, options):
    keys = _SECTION_KEYS
    kubespray = _kubespray(root.section('kubespray', keys['kubespray']))
    nodes = _nodes(root)
    options['need_cp_names'] = options['need_cp_names'] and \
        not root.given('nodes')
    groups = _node_groups(root, kubespray, options)
    spec = core.ClusterSpec(
        vim_name=_vim_name(root),
        script_path=_package_path(root, 'script_path'),
        proxy=_proxy(root.section('proxy', keys['proxy']),
                     groups['pod_cidr'], groups['service_cidr']),
        ansible=_ansible(root.section('ansible', keys['ansible'], True),
                         options),
        external_lb=_external_lb(root.section(
            'external_lb_param', keys['external_lb_param'], True), options),
        kubespray=kubespray, nodes=nodes,
        node_pools=_node_pools(root, options), **groups)
    _check_pools(root, spec)
    _check_nodes(root, spec)
    _check_vip_source(root, spec)
    return spec


def _node_groups(root, kubespray, options):
    """The ClusterSpec fields that ``master_node`` and ``worker_node``
    give (None for a missing section)."""
    keys = _SECTION_KEYS
    master_sec = root.section('master_node', keys['master_node'], True)
    worker_sec = root.section('worker_node', keys['worker_node'], True)
    groups = dict.fromkeys(('master', 'worker', 'pod_cidr', 'service_cidr',
                            'cluster_cp_name'))
    if master_sec is not None:
        groups['master'] = _node_group(master_sec, core.ROLE_MASTER, options)
        groups['pod_cidr'], groups['service_cidr'] = _master_networks(
            master_sec, kubespray)
        groups['cluster_cp_name'] = _text(master_sec, 'cluster_cp_name')
    if worker_sec is not None:
        groups['worker'] = _node_group(worker_sec, core.ROLE_WORKER, options)
    return groups


def _check_vip_source(root, spec):
    """``vip_cp_name`` names a Heat port: not with an explicit nodes list."""
    if spec.nodes is not None and spec.external_lb is not None and \
            spec.external_lb.vip_cp_name is not None:
        root.problems.invalid(root.at('external_lb_param.vip_cp_name'), (
            'only with VMs found in Heat; with nodes give vip'))


def parse_params(additional_params, default_key_file=None,
                 need_cp_names=True, max_size=None):
    """Validate ``additionalParams`` and return its
    :class:`~mgmt_driver.model.core.ClusterSpec`.

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
    :param max_size: see :func:`~mgmt_driver.model.validation.check_bounds`.
    :returns: the validated :class:`~mgmt_driver.model.core.ClusterSpec`.
    :raises ParamsNotFound: when every problem is a missing field.
    :raises ParamsInvalid: for any other problem (all are listed).
    """
    problems = validation.Problems()
    root = _root_section(problems, additional_params, max_size)
    spec = None
    if root is not None:
        spec = _build(root, {'default_key_file': default_key_file,
                             'need_cp_names': need_cp_names})
    problems.raise_if_any()
    return spec
