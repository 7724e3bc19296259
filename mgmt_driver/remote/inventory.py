"""kubespray's inventory and extra-vars documents: pure functions, no I/O.

:func:`render_files` returns every file of one inventory directory as
``{relative path: RenderedFile}``:

``hosts.yaml`` (mode 0644)
    groups ``kube_control_plane`` and ``etcd`` (the masters),
    ``kube_node`` (the workers), empty ``calico_rr``, and ``k8s_cluster``
    declared with its children; host vars ``ansible_host``,
    ``ansible_port``, ``ip``/``access_ip`` (``ip6``/``access_ip6`` for an
    IPv6 cluster address), ``main_ip``/``main_access_ip``,
    ``etcd_member_name``, ``node_labels`` and ``node_taints``.  No
    credential.
``host_vars/<node name>.yaml`` (mode 0600)
    ``ansible_user`` and ``ansible_ssh_private_key_file`` or
    ``ansible_password``, and ``ansible_become_password`` when the
    role's sudo asks one (``model.Login.sudo_password``: kubespray runs
    with ``--become``).  Ansible loads ``host_vars/`` next to the
    inventory file for exactly that host, so a host gets its own role's
    login whatever groups it is in (``group_vars`` per group would let
    one group's login win over another's for a host in both).
``cluster-vars.yaml`` (mode 0644), for ``-e @cluster-vars.yaml``
    networks, NodePort range, external LB, Calico MTU, ``no_proxy`` and
    proxy URLs without credentials, then the request's ``extra_vars``.
``secret-vars.yaml`` (mode 0600), for ``-e @secret-vars.yaml``
    the proxy URLs that carry credentials (``{}`` when none do), so that
    no secret is ever in ``cluster-vars.yaml``.

:func:`parse_recorded` reads a ``hosts.yaml`` back from the workspace,
where it may have been tampered with, and checks every type it uses.

No text from a request is ever templated by Ansible: every string with
"{" is written ``!unsafe`` (:func:`_inert`), a request's mapping keys may
not hold "{" (:mod:`mgmt_driver.model.params` refuses them), and
:func:`check_inert` reads each document back before it is returned and
refuses any key with "{" or untagged string with "{" that got through.

Whoever writes the directory replaces ``host_vars/`` as a whole, so a
removed node leaves no file behind.  Output is deterministic: the same
spec and node set give the same bytes, however the set was reached.
"""

import dataclasses
import ipaddress
import re
import urllib.parse

import yaml

from mgmt_driver.common import blockyaml
from mgmt_driver.common import exceptions
from mgmt_driver.common import safeyaml
from mgmt_driver.common import untrusted

HOSTS_FILE = 'hosts.yaml'
CLUSTER_VARS_FILE = 'cluster-vars.yaml'
SECRET_VARS_FILE = 'secret-vars.yaml'
HOST_VARS_DIR = 'host_vars'
PUBLIC_MODE = 0o644
SECRET_MODE = 0o600

#: Calico's encapsulation overhead (VXLAN; IPIP needs less).
CALICO_OVERHEAD = {4: 50, 6: 70}
#: The MTUs :func:`render_cluster_vars` accepts (IPv6 needs 1280; 576 is
#: IPv4's minimum datagram every host must take).
MIN_MTU, MAX_MTU = 576, 65535
DEFAULT_DNS_DOMAIN = 'cluster.local'


@dataclasses.dataclass(frozen=True)
class RenderedFile:
    """One rendered file: its text and the mode to write it with."""

    content: str = dataclasses.field(repr=False)
    mode: int = PUBLIC_MODE


class Unsafe(str):
    """A string Ansible must never template (a password may hold "{{")."""


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data):
        return True  # a shared list would otherwise become &id001/*id001


def _represent_unsafe(dumper, value):
    return dumper.represent_scalar('!unsafe', str(value), style="'")


_Dumper.add_representer(Unsafe, _represent_unsafe)

#: libyaml's emitter, when PyYAML has it: the pure-Python one takes
#: seconds for the ``hosts.yaml`` of 5,000 nodes (issue 40).  It writes
#: other bytes for a few inputs (see :func:`_libyaml_writes_the_same`),
#: which keep the pure one, so a document never depends on the build.
_CDumper = None
if getattr(yaml, 'CSafeDumper', None) is not None:
    class _CDumper(yaml.CSafeDumper):
        ignore_aliases = _Dumper.ignore_aliases

    _CDumper.add_representer(Unsafe, _represent_unsafe)

#: Characters libyaml's emitter treats otherwise than PyYAML's: NEL and
#: BOM (libyaml escapes them), surrogates, and characters beyond the
#: BMP (libyaml escapes them, PyYAML writes them as they are).
_LIBYAML_DIFFERS = re.compile('[\x85\ufeff\ud800-\udfff'
                              '\U00010000-\U0010ffff]')
#: A mapping key this long (in UTF-8 bytes) or longer may be written as
#: a simple key by one emitter and as "? key" by the other (PyYAML
#: counts characters up to 127, libyaml bytes up to 128).
_LONG_KEY_BYTES = 128


def _libyaml_writes_the_same(data):
    """Whether libyaml's emitter writes *data* (a mapping) byte for byte
    as PyYAML's does with :func:`dump_yaml`'s options.

    They differ only for strings holding :data:`_LIBYAML_DIFFERS` and for
    mapping keys that are empty, hold a character that is not printable
    (``\\r`` is a line break to libyaml only) or are long (tested,
    property-based, in ``tests/unit/test_inventory_yaml.py``).  One walk,
    linear in the data.
    """
    return all(_plain_key(text) if is_key else
               not _LIBYAML_DIFFERS.search(text)
               for text, is_key in _strings_of(data))


def _strings_of(data):
    """Every string of *data*, paired with whether it is a mapping key:
    one walk, lazily (the caller may stop at the first)."""
    todo = [data]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if isinstance(key, str):
                    yield key, True
                todo.append(value)
        elif isinstance(item, (list, tuple)):
            todo.extend(item)
        elif isinstance(item, str):
            yield item, False


def _plain_key(key):
    return (key.isprintable() and not _LIBYAML_DIFFERS.search(key) and
            0 < len(key.encode('utf-8')) < _LONG_KEY_BYTES)


def dump_yaml(data):
    """Deterministic YAML text of *data* (mapping order kept as built).

    :param data: a mapping (a document of the inventory).
    """
    # The plain documents (hosts.yaml, host_vars) need no representer.
    text = blockyaml.dump(data)
    if text is not None:
        return text
    dumper = _CDumper if _CDumper is not None and isinstance(
        data, dict) and _libyaml_writes_the_same(data) else _Dumper
    return yaml.dump(data, Dumper=dumper, default_flow_style=False,
                     sort_keys=False, allow_unicode=True, width=1000)


def _inert(data):
    """*data* with every string that could hold a Jinja2 template (a "{"
    anywhere) tagged ``!unsafe``: request values are data, never code
    that Ansible would run on the Ansible server."""
    if isinstance(data, dict):
        return {key: _inert(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [_inert(item) for item in data]
    if isinstance(data, str) and '{' in data:
        return Unsafe(data)
    return data


#: What starts every Jinja2 delimiter ("{{", "{%", "{#").
TEMPLATE_MARK = '{'
#: Characters of a field path shown in a :class:`TemplatedText` error.
_MAX_SHOWN_PATH = 200


#: libyaml's parser when PyYAML has it (the guard reads whole documents).
_PARSER = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)
_STARTS = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_ENDS = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


def _event_path(frames, inner):
    """The field path of the node being read, clipped.

    :param frames: ``[is mapping, nodes read, last key]`` of each open
        mapping or sequence, outermost first.
    :param inner: whether the node is a value of the innermost frame
        (False for a key: the path is the mapping's).
    """
    parts = []
    for depth, (mapping, count, key) in enumerate(frames):
        if depth == len(frames) - 1 and not inner:
            break
        # An outer frame counted the open child already, the innermost
        # one not yet.
        index = count - 1 if depth < len(frames) - 1 else count
        parts.append('.%s' % key if mapping else '[%d]' % index)
    return exceptions.clip(''.join(parts).lstrip('.') or '(top)',
                           _MAX_SHOWN_PATH)


def check_inert(name, text):
    """The last guard before upload: *text*, read as Ansible will read
    it, holds nothing Ansible would template.

    Every mapping key must be free of :data:`TEMPLATE_MARK` (kubespray
    templates some keys: ``item.key`` of ``dict2items`` loops), and
    every scalar holding it must be tagged ``!unsafe``.  Whatever
    :func:`_inert` or request validation missed is refused here.  Reads
    the parser's events, each once, building nothing (linear time).

    :param name: the document's name (for the error).
    :param text: the rendered YAML document.
    :returns: *text*.
    :raises TemplatedText: naming the document and the path, never the
        text.
    """
    frames = []
    for event in yaml.parse(text, Loader=_PARSER):
        _read_event(name, frames, event)
    return text


def _read_event(name, frames, event):
    """One parser event for :func:`check_inert`: checked, then followed in
    *frames* (``[is a mapping, events read, last key]`` for each open
    collection)."""
    if isinstance(event, _ENDS):
        frames.pop()
        return
    frame = frames[-1] if frames else None
    key = frame is not None and frame[0] and frame[1] % 2 == 0
    if isinstance(event, yaml.ScalarEvent) and \
            TEMPLATE_MARK in event.value:
        _refuse_templated(name, frames, event, key)
    if frame is not None:
        if key:
            frame[2] = getattr(event, 'value', '?')
        frame[1] += 1
    if isinstance(event, _STARTS):
        frames.append([isinstance(event, yaml.MappingStartEvent), 0,
                       None])


def _refuse_templated(name, frames, event, key):
    """A scalar holding :data:`TEMPLATE_MARK`: refused as a mapping key,
    and as a value unless tagged ``!unsafe``."""
    if key:
        raise exceptions.TemplatedText(
            document=name, what='mapping key #%d' % (
                frames[-1][1] // 2 + 1), path=_event_path(frames, False))
    if event.tag != '!unsafe':
        raise exceptions.TemplatedText(
            document=name, what='a string not tagged !unsafe',
            path=_event_path(frames, True))


def _sorted(data):
    """*data* with every mapping's keys sorted, recursively."""
    if isinstance(data, dict):
        return {key: _sorted(data[key]) for key in sorted(data)}
    if isinstance(data, (list, tuple)):
        return [_sorted(item) for item in data]
    return data


def _unique(items):
    return list(dict.fromkeys(item for item in items if item))


# ------------------------------------------------------------------ hosts

def _host_vars(spec, node, etcd, settings):
    host = {'ansible_host': node.ssh_address, 'ansible_port': node.ssh_port}
    if ipaddress.ip_address(node.cluster_address).version == 6:
        host.update(ip6=node.cluster_address, access_ip6=node.cluster_address)
    else:
        host.update(ip=node.cluster_address, access_ip=node.cluster_address)
    # What kubespray's network_facts computes and caches (v2.29+).  Its
    # cached or freshly set fact wins over these; they matter when a dead
    # node's cache entry has expired: removing its etcd member reads the
    # peer URL from main_access_ip (v2.30+).
    host.update(main_ip=node.cluster_address,
                main_access_ip=node.cluster_address)
    if etcd:
        # The node name, not "etcd<index>": an index would rename the
        # surviving members when a master is removed or healed.
        host['etcd_member_name'] = node.name
    node_settings = settings.get(node.name) or spec.node_settings(node)
    if node_settings.labels:
        host['node_labels'] = node_settings.label_map
    if node_settings.taints:
        host['node_taints'] = list(node_settings.taints)
    return _sorted(host)


def render_hosts(spec, nodes, settings=None):
    """The ``hosts.yaml`` document.

    :param spec: the :class:`~mgmt_driver.model.core.ClusterSpec`.
    :param nodes: the :class:`~mgmt_driver.model.nodes.ClusterNodes`; masters
        keep their order (the first is kubespray's first control plane).
    :param settings: ``{node name: NodeSettings}`` recorded for nodes
        (they win over what *spec* gives them), or None.
    :returns: the inventory as a dict (see :func:`dump_yaml`).
    """
    settings = settings or {}
    masters = {node.name: {} for node in nodes.masters}
    workers = {node.name: {} for node in nodes.workers}
    hosts = {node.name: _host_vars(spec, node, node.name in masters,
                                   settings)
             for node in nodes.k8s_nodes}
    return {'all': {'hosts': hosts, 'children': _groups(masters, workers)}}


def _groups(masters, workers):
    """kubespray's inventory groups; masters are also the etcd members."""
    return {
        'kube_control_plane': {'hosts': masters},
        'etcd': {'hosts': dict(masters)},
        'kube_node': {'hosts': workers},
        'calico_rr': {'hosts': {}},
        'k8s_cluster': {'children': {'kube_control_plane': {},
                                     'kube_node': {},
                                     'calico_rr': {}}},
    }


# --------------------------------------------------------------- recorded

#: Longest host name or address accepted from a recorded inventory.
_MAX_NAME = 253


@dataclasses.dataclass(frozen=True)
class RecordedInventory:
    """What the driver uses of a ``hosts.yaml`` read back.

    :param masters: control-plane names, in the recorded order.
    :param hosts: ``(name, ssh address or None, ssh port or None)``.
    """

    masters: tuple = ()
    hosts: tuple = ()


def parse_recorded(text, host, path):
    """Check and extract a ``hosts.yaml`` read back from *host*.

    :param text: the file's text, or None when there is none.
    :param host: the Ansible server (for messages).
    :param path: the file's path there (for messages).
    :returns: a :class:`RecordedInventory` (empty for no file).
    :raises RemoteDataInvalid: not YAML, or a type is not the one this
        module writes; the message has the key path, never the values.
    """
    def invalid(problem):
        return exceptions.RemoteDataInvalid(
            host=host, what='inventory %s' % path, problem=problem)

    group = _recorded_group(text, invalid)
    masters = _members(group, 'all.children.kube_control_plane', invalid)
    hosts = _mapping(group.get('hosts'), 'all.hosts', invalid)
    return RecordedInventory(
        masters=tuple(masters),
        hosts=tuple(_recorded_host(name, hosts[name], invalid)
                    for name in _names(hosts, 'all.hosts', invalid)))


def _recorded_group(text, invalid):
    """The ``all`` group of a recorded ``hosts.yaml`` ({} for no file)."""
    try:
        doc = untrusted.load_yaml(
            text, per_entry=untrusted.RECORD_TEXT_PER_ENTRY) if text else None
    except yaml.YAMLError as exc:
        raise invalid('not valid YAML' + safeyaml.describe(exc))
    return _mapping(_mapping(doc, '(document)', invalid).get('all'),
                    'all', invalid)


def _mapping(value, where, invalid):
    """*value* if a mapping, {} if null, else RemoteDataInvalid."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid('%s must be a mapping, not %s'
                      % (where, type(value).__name__))
    return value


def _names(mapping, where, invalid):
    for name in mapping:
        if not isinstance(name, str) or not 0 < len(name) <= _MAX_NAME:
            raise invalid('%s has a name that is not a string of 1 to %d '
                          'characters' % (where, _MAX_NAME))
    return list(mapping)


def _members(group, where, invalid):
    children = _mapping(group.get('children'), 'all.children', invalid)
    members = _mapping(children.get('kube_control_plane'), where, invalid)
    where += '.hosts'
    return _names(_mapping(members.get('hosts'), where, invalid), where,
                  invalid)


def _recorded_host(name, variables, invalid):
    shown = repr(name)
    where = 'all.hosts[%s]' % (shown if len(shown) <= 40
                               else shown[:37] + '...')
    variables = _mapping(variables, where, invalid)
    address = variables.get('ansible_host')
    port = variables.get('ansible_port')
    if address is not None and not (
            isinstance(address, str) and 0 < len(address) <= _MAX_NAME):
        raise invalid('%s.ansible_host must be a host address' % where)
    if port is not None and (isinstance(port, bool) or not isinstance(
            port, int) or not 0 < port < 65536):
        raise invalid('%s.ansible_port must be a port number' % where)
    return name, address, port


# ------------------------------------------------------------ credentials

def remote_key_paths(spec, nodes, remote_dir):
    """Where each role's private key goes on the Ansible server.

    Ansible runs there, so ``ansible_ssh_private_key_file`` must name a
    file there; the caller uploads each local key (mode 0600).

    :param remote_dir: a directory on the Ansible server.
    :returns: ``{local key file: remote path}``; a key shared by roles is
        uploaded once (named after the first role using it).
    """
    paths = {}
    for role in _roles_present(nodes):
        key_file = spec.login_for(role).key_file
        if key_file and key_file not in paths:
            paths[key_file] = '%s/ssh-key-%s' % (remote_dir.rstrip('/'), role)
    return paths


def _roles_present(nodes):
    return list(dict.fromkeys(node.role for node in nodes.k8s_nodes))


def _credentials(login, key_paths):
    creds = {'ansible_user': login.username}
    if login.key_file:
        # A key wins over a password: with a password Ansible would need
        # sshpass on the Ansible server.
        creds['ansible_ssh_private_key_file'] = key_paths.get(
            login.key_file, login.key_file)
    else:
        creds['ansible_password'] = Unsafe(login.password)
    if login.sudo_password:
        # Per host, as the login: masters and workers may differ.  Never
        # -e (it would apply to every host) nor argv.
        creds['ansible_become_password'] = Unsafe(login.sudo_password)
    return creds


def render_credentials(spec, nodes, key_paths=None):
    """The ``host_vars`` document of each Kubernetes node.

    :param key_paths: ``{local key file: path Ansible uses}`` (see
        :func:`remote_key_paths`); a key not in it keeps its local path.
    :returns: ``{node name: {ansible_user, ansible_password |
        ansible_ssh_private_key_file[, ansible_become_password]}}``.
    """
    key_paths = key_paths or {}
    return {node.name: _credentials(spec.login_for(node.role), key_paths)
            for node in nodes.k8s_nodes}


# ----------------------------------------------------------- cluster vars

def _has_credentials(url):
    return bool(url) and '@' in urllib.parse.urlsplit(url).netloc


def _no_proxy(spec, nodes, extra_vars):
    domain = extra_vars.get('dns_domain', DEFAULT_DNS_DOMAIN)
    proxy = spec.proxy
    entries = list(proxy.no_proxy) + [
        'localhost', '127.0.0.1', 'svc', 'svc.%s' % domain,
        proxy.k8s_node_cidr and str(proxy.k8s_node_cidr),
        str(spec.service_cidr), str(spec.pod_cidr)] + _gateway_addresses(
            nodes) + [spec.external_lb and spec.external_lb.vip]
    for node in nodes.k8s_nodes:
        entries += [node.cluster_address, node.ssh_address]
    return ','.join(_unique(entries))


def proxy_environment(spec, nodes):
    """``http_proxy``, ``https_proxy`` and ``no_proxy`` as the request
    sets them for the cluster (no_proxy as kubespray gets it), for a
    program the driver runs on a gateway; {} without a proxy.  The URLs
    may hold credentials: never on a command line.
    """
    proxy = spec.proxy
    if not proxy.enabled:
        return {}
    found = {key: getattr(proxy, key) for key in ('http_proxy',
                                                  'https_proxy')
             if getattr(proxy, key)}
    found['no_proxy'] = _no_proxy(spec, nodes, spec.kubespray.variables)
    return found


def _gateway_addresses(nodes):
    """Cluster and SSH address of every gateway, in gateway order."""
    return [address for gateway in nodes.gateways
            for address in (gateway.cluster_address, gateway.ssh_address)]


def lb_address(spec, lb):
    """Where the nodes reach the API through the load balancer: the VIP
    of the gateways when ``external_lb_param.vip`` is set, else the LB
    VM's cluster address.

    :param lb: the LB :class:`~mgmt_driver.model.nodes.Node`.
    """
    return spec.external_lb.vip or lb.cluster_address


def _load_balancer_vars(spec, nodes, extra_vars):
    lb = nodes.external_lb
    if lb is None:
        return {}
    address = lb_address(spec, lb)
    # The certificate names every address a client may use: the VIP and
    # the gateways' own ones (kubectl on a gateway, a gateway reached
    # directly while the VIP moves).
    sans = [address] + _gateway_addresses(nodes) + list(
        extra_vars.get('supplementary_addresses_in_ssl_keys', []))
    return {
        'loadbalancer_apiserver': {'address': address,
                                   'port': spec.external_lb.api_port},
        # An address, not kubespray's default name: since v2.29 kubespray
        # no longer writes /etc/hosts, so a name might not resolve.
        'apiserver_loadbalancer_domain_name': address,
        'supplementary_addresses_in_ssl_keys': _unique(sans),
    }


def _calico_vars(nodes, mtu, extra_vars):
    if mtu is None or extra_vars.get('kube_network_plugin',
                                     'calico') != 'calico':
        return {}
    version = max((ipaddress.ip_address(n.cluster_address).version
                   for n in nodes.k8s_nodes), default=4)
    return {'calico_mtu': mtu, 'calico_veth_mtu': mtu - CALICO_OVERHEAD[
        version]}


def render_cluster_vars(spec, nodes, mtu=None):
    """The ``cluster-vars.yaml`` document (typed values, sorted keys).

    :param mtu: the MTU of the nodes' cluster network interface when the
        caller measured it; sets ``calico_mtu`` and ``calico_veth_mtu``
        (minus the VXLAN overhead) for the Calico plugin.
    :returns: a dict: derived settings, then the request's ``extra_vars``
        (which win for the Calico MTU; ``supplementary_addresses_in_ssl_keys``
        is merged).  Proxy URLs with credentials are left out: see
        :func:`render_secret_vars`.
    :raises ValueError: if *mtu* is not a sensible MTU.
    """
    _check_mtu(mtu)
    extra_vars = spec.kubespray.variables
    result = _network_vars(spec)
    result.update(_calico_vars(nodes, mtu, extra_vars))
    result.update(extra_vars)
    result.update(_load_balancer_vars(spec, nodes, extra_vars))
    if spec.proxy.enabled:
        result.update(_public_proxy_vars(spec, nodes, extra_vars))
    return _sorted(result)


def _check_mtu(mtu):
    """ValueError unless *mtu* is None or a sensible MTU."""
    if mtu is not None and (isinstance(mtu, bool) or not isinstance(
            mtu, int) or not MIN_MTU <= mtu <= MAX_MTU):
        raise ValueError('mtu must be an integer from %d to %d' % (
            MIN_MTU, MAX_MTU))


def _network_vars(spec):
    """The pod and service networks and the NodePort range."""
    first, last = spec.external_lb.nodeport_range
    return {
        'kube_pods_subnet': str(spec.pod_cidr),
        'kube_service_addresses': str(spec.service_cidr),
        'kube_apiserver_node_port_range': '%d-%d' % (first, last),
    }


def _public_proxy_vars(spec, nodes, extra_vars):
    """``no_proxy`` and the proxy URLs without credentials (those with
    go to :func:`render_secret_vars`)."""
    result = {'no_proxy': _no_proxy(spec, nodes, extra_vars)}
    for key in ('http_proxy', 'https_proxy'):
        url = getattr(spec.proxy, key)
        if url and not _has_credentials(url):
            result[key] = url
    return result


def render_secret_vars(spec):
    """The ``secret-vars.yaml`` document: proxy URLs with credentials.

    ``https_proxy`` comes from ``proxy.https_proxy`` (never from
    ``http_proxy``).

    :returns: a dict, empty when no proxy URL carries credentials.
    """
    result = {}
    for key in ('http_proxy', 'https_proxy'):
        url = getattr(spec.proxy, key)
        if _has_credentials(url):
            result[key] = Unsafe(url)
    return result


def render_files(spec, nodes, key_paths=None, mtu=None, settings=None):
    """Every file of the inventory directory.

    :param spec: the :class:`~mgmt_driver.model.core.ClusterSpec`.
    :param nodes: the :class:`~mgmt_driver.model.nodes.ClusterNodes`.
    :param key_paths: see :func:`render_credentials`.
    :param mtu: see :func:`render_cluster_vars`.
    :param settings: see :func:`render_hosts`.
    :returns: ``{relative path: RenderedFile}``.
    :raises TemplatedText: a document would hold text Ansible templates
        (see :func:`check_inert`).
    """
    documents = _documents(spec, nodes, key_paths, mtu, settings)
    texts = {}  # a document equal to one rendered before: its text
    files = {}
    for name, (data, mode) in documents.items():
        key = _flat_key(data)
        if key not in texts or key is None:
            texts[key] = check_inert(name, dump_yaml(_inert(data)))
        files[name] = RenderedFile(texts[key], mode)
    return files


def _documents(spec, nodes, key_paths, mtu, settings):
    """``{relative path: (data, mode)}`` of :func:`render_files`."""
    # kubespray.extra_vars may hold secrets (registry or OIDC passwords):
    # the file that carries them is 0600 (and hidden by --dry-run).
    documents = {
        HOSTS_FILE: (render_hosts(spec, nodes, settings), PUBLIC_MODE),
        CLUSTER_VARS_FILE: (
            render_cluster_vars(spec, nodes, mtu),
            SECRET_MODE if spec.kubespray.extra_vars else PUBLIC_MODE),
        SECRET_VARS_FILE: (render_secret_vars(spec), SECRET_MODE),
    }
    credentials = render_credentials(spec, nodes, key_paths)
    for name in sorted(credentials):
        documents['%s/%s.yaml' % (HOST_VARS_DIR, name)] = (
            credentials[name], SECRET_MODE)
    return documents


def _flat_key(data):
    """A key equal for equal flat documents of strings (the ``host_vars``
    of each node of one role: 5,000 nodes, two documents), else None.
    The type is part of it: :class:`Unsafe` is written otherwise."""
    if not isinstance(data, dict) or not all(
            type(v) in (str, Unsafe) for v in data.values()):
        return None
    return tuple((k, type(v), v) for k, v in data.items())
