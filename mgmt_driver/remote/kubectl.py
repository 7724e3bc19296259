"""kubectl on a control-plane node (or the LB VM) over one SSH connection.

:class:`KubectlClient` asks about nodes, cordons, drains, waits for pods
to leave a node and deletes nodes; each call is one remote command
(polls one command per attempt), with waits done by polling with
exponential backoff up to a deadline, never by fixed sleeps.  It also
creates the admin ServiceAccount the VIM registration needs and reads its
token from an explicit ``kubernetes.io/service-account-token`` Secret,
which works on Kubernetes 1.24 and newer (no auto-created token Secrets).
The token only ever travels in a command's standard output: it is never
on a command line, in a log record or in an exception message.
What kubectl prints is untrusted (the node may be hostile): JSON is
bounded in depth, every field used is type-checked, and a malformed
answer is a :class:`~mgmt_driver.common.exceptions.RemoteDataInvalid` naming
the host and the field, never a KeyError or TypeError.
:func:`first_reachable` picks the first control-plane host that answers.
"""

import base64
import binascii
import contextlib
import dataclasses
import json
import re
import shlex
import time

import yaml

from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.common import safetext
from mgmt_driver.common import safeyaml
from mgmt_driver.common import untrusted
from mgmt_driver.model import validation
from mgmt_driver.remote import programs

LOG = safetext.logger(__name__)

#: Most node names one ``kubectl get``/``label``/``taint`` names, so the
#: command line stays far below the system's limit.
NODES_PER_COMMAND = 200
_NOT_FOUND = re.compile(r'\(NotFound\)|\b[a-z]+ "[^"]*" not found')
_DNS_LABEL = re.compile(r'^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$')
_MIRROR_ANNOTATION = 'kubernetes.io/config.mirror'
_DONE_PHASES = ('Succeeded', 'Failed')

#: Seconds an SSH command may run past kubectl's own ``--timeout``.
DRAIN_MARGIN = 60

# Fixed structural limits on what kubectl prints (its size is bounded by
# the SSH layer's max_command_output): a Pod nests about 10 levels; a
# service-account token is a JWT of about 1 KB; a CA bundle a few KB.
MAX_JSON_DEPTH = untrusted.MAX_DEPTH
MAX_TOKEN_CHARS = 16 * 1024
MAX_CA_CHARS = 256 * 1024
#: Longest kubeconfig accepted from the cluster-info ConfigMap.
MAX_CLUSTER_INFO_CHARS = 512 * 1024
# What an error message quotes of a master's answers (see safetext):
# the pods a drain left (``namespace/name``: 63 + 1 + 253 characters),
# and the hosts that could not run kubectl, each with its reason.
SHOWN_PODS = 20
SHOWN_POD_WIDTH = 320
SHOWN_HOSTS = 5
SHOWN_HOST_WIDTH = 600
_PEM_BEGIN = '-----BEGIN CERTIFICATE-----'
_PEM_END = '-----END CERTIFICATE-----'


class BadShape(Exception):
    """Remote JSON lacks a field or has another type (text: field path)."""


@contextlib.contextmanager
def parsing(host, what):
    """Turn a :class:`BadShape` inside the block into RemoteDataInvalid."""
    try:
        yield
    except BadShape as exc:
        raise exceptions.RemoteDataInvalid(host=host, what=what,
                                           problem=str(exc)) from None


def json_field(obj, key, kind, where, default=None):
    """``obj[key]`` if it has type *kind*; *default* if absent or null.

    :raises BadShape: *obj* is no mapping, the field has another type,
        or it is absent and *default* is None.
    """
    if not isinstance(obj, dict):
        raise BadShape('%s must be an object, not %s'
                       % (where, type(obj).__name__))
    value = obj.get(key)
    if value is None and default is not None:
        return default
    if not isinstance(value, kind):
        raise BadShape('%s.%s must be %s, not %s' % (
            where, key, _KIND_NAMES[kind], type(value).__name__))
    return value


_KIND_NAMES = {dict: 'an object', list: 'a list', str: 'a string'}


def load_json(text, kind=dict):
    """A JSON object (or list: *kind*) parsed from untrusted *text* by
    :func:`untrusted.load_json` (bounded in depth and entries).

    :param kind: ``dict`` or ``list``: what the document must be.
    :raises BadShape: not JSON, not a *kind*, too deep or too many
        entries; the text is never quoted (it may hold a token).
    """
    try:
        data = untrusted.load_json(text)
    except untrusted.Refused as exc:
        raise BadShape(str(exc)) from None
    if not isinstance(data, kind):
        raise BadShape('the output is not a JSON %s' % (
            'object' if kind is dict else 'list'))
    return data


@dataclasses.dataclass(frozen=True)
class KubectlSettings:
    """Timeouts and polling policy; :meth:`from_conf` reads the options.

    :param command_timeout: seconds for one kubectl command but drain.
    :param drain_timeout: kubectl drain ``--timeout`` in seconds.
    :param poll_initial_delay: first delay between two polls (s).
    :param poll_max_delay: upper bound of the doubling delay (s).
    """

    command_timeout: float = 120
    drain_timeout: float = 600
    poll_initial_delay: float = 1.0
    poll_max_delay: float = 10.0

    @classmethod
    def from_conf(cls, conf=None):
        """Settings from ``[kubespray_mgmt]`` of *conf* (default global)."""
        group = (conf or kconf.CONF).kubespray_mgmt
        return cls(command_timeout=group.kubectl_timeout,
                   drain_timeout=group.drain_timeout,
                   poll_initial_delay=group.poll_initial_delay,
                   poll_max_delay=group.poll_max_delay)


def poll(probe, timeout, settings, sleep=time.sleep, clock=time.monotonic):
    """Call *probe* until it reports done or *timeout* seconds pass.

    The delay starts at ``poll_initial_delay`` and doubles up to
    ``poll_max_delay``; the last sleep never goes past the deadline, and
    the probe runs once more at the deadline.

    :param probe: returns ``(done, state)``.
    :returns: ``(done, state)`` of the last call.
    """
    deadline = clock() + timeout
    delay = settings.poll_initial_delay
    while True:
        done, state = probe()
        remaining = deadline - clock()
        if done or remaining <= 0:
            return done, state
        sleep(min(delay, remaining))
        delay = min(delay * 2, settings.poll_max_delay)


@dataclasses.dataclass(frozen=True, repr=False)
class AdminCredentials:
    """A bearer token for the cluster and the cluster CA (PEM).

    ``repr`` and ``str`` never show the token.
    """

    token: str
    ca_cert: str

    def __repr__(self):
        return '<AdminCredentials token=*** ca_cert=%d chars>' % len(
            self.ca_cert)

    __str__ = __repr__


def _check_node_name(name):
    if not isinstance(name, str) or not validation.NODE_NAME.match(name):
        raise exceptions.MgmtDriverParamInvalid(
            param='Kubernetes node name %r' % (name,))
    return name


def _check_label(value, what):
    if not isinstance(value, str) or not _DNS_LABEL.match(value):
        raise exceptions.MgmtDriverParamInvalid(
            param='%s %r (a DNS label: lower-case letters, digits and '
                  '"-")' % (what, value))
    return value


def _name_of(item, where):
    """``metadata.name`` of a listed object."""
    meta = json_field(item, 'metadata', dict, where)
    return json_field(meta, 'name', str, where + '.metadata')


_ROLE_PREFIX = 'node-role.kubernetes.io/'


@dataclasses.dataclass(frozen=True)
class NodeInfo:
    """One Kubernetes node as ``kubectl get nodes`` shows it.

    :param name: the node name.
    :param roles: the ``node-role.kubernetes.io/<role>`` label suffixes.
    :param ready: the Ready condition: ``True``, ``False`` or
        ``Unknown`` (``Unknown`` too when the node reports none).
    :param kubelet_version: ``status.nodeInfo.kubeletVersion`` or ''.
    :param internal_ip: the ``InternalIP`` address or ''.
    :param labels: every label, ``{key: value}``.
    :param schedulable: False when cordoned.
    :param taints: ``key=value:Effect`` (``key:Effect`` without a value)
        strings, in the node's order.
    """

    name: str
    roles: tuple
    ready: str
    kubelet_version: str
    internal_ip: str
    labels: dict
    schedulable: bool
    taints: tuple = ()


def _node_info(item, where):
    """A :class:`NodeInfo` of one listed node (types checked)."""
    meta = json_field(item, 'metadata', dict, where)
    labels = json_field(meta, 'labels', dict, where + '.metadata', {})
    for value in labels.values():
        if not isinstance(value, str):
            raise BadShape('%s.metadata.labels values must be strings'
                           % where)
    spec = json_field(item, 'spec', dict, where, {})
    taints = tuple(_taint_text(entry, where + '.spec.taints[]')
                   for entry in json_field(spec, 'taints', list,
                                           where + '.spec', []))
    name = _name_of(item, where)
    status = json_field(item, 'status', dict, where, {})
    where += '.status'
    info = json_field(status, 'nodeInfo', dict, where, {})
    return NodeInfo(
        name=name,
        roles=tuple(sorted(k[len(_ROLE_PREFIX):] for k in labels
                           if k.startswith(_ROLE_PREFIX))),
        ready=_condition(status, 'Ready', where),
        kubelet_version=json_field(info, 'kubeletVersion', str,
                                   where + '.nodeInfo', ''),
        internal_ip=_address(status, 'InternalIP', where),
        labels=dict(labels), schedulable=not spec.get('unschedulable'),
        taints=taints)


def _taint_text(entry, where):
    """One ``spec.taints`` entry as ``key=value:Effect``."""
    if not isinstance(entry, dict):
        raise BadShape('%s must be objects' % where)
    key = json_field(entry, 'key', str, where)
    value = json_field(entry, 'value', str, where, '')
    effect = json_field(entry, 'effect', str, where)
    return '%s%s:%s' % (key, '=' + value if value else '', effect)


def _condition(status, kind, where):
    for entry in json_field(status, 'conditions', list, where, []):
        if json_field(entry, 'type', str, where + '.conditions[]', '') == kind:
            value = json_field(entry, 'status', str, where + '.conditions[]',
                               'Unknown')
            return value if value in ('True', 'False') else 'Unknown'
    return 'Unknown'


def _address(status, kind, where):
    for entry in json_field(status, 'addresses', list, where, []):
        if json_field(entry, 'type', str, where + '.addresses[]', '') == kind:
            return json_field(entry, 'address', str,
                              where + '.addresses[]', '')
    return ''


def _pod_entry(pod, where):
    """``('namespace/name', evacuated)`` of one listed pod."""
    meta = json_field(pod, 'metadata', dict, where)
    namespace = json_field(meta, 'namespace', str, where + '.metadata', '')
    return '%s/%s' % (namespace, _name_of(pod, where)), \
        _is_evacuated(pod, meta, where)


def _is_evacuated(pod, meta, where):
    """True for pods that need not leave a drained node."""
    owners = json_field(meta, 'ownerReferences', list, where + '.metadata', [])
    if any(json_field(owner, 'kind', str, where + '.ownerReferences[]', '')
           == 'DaemonSet' for owner in owners):
        return True
    if _MIRROR_ANNOTATION in json_field(meta, 'annotations', dict,
                                        where + '.metadata', {}):
        return True  # static pod: the kubelet runs it, not the API
    status = json_field(pod, 'status', dict, where, {})
    return status.get('phase') in _DONE_PHASES


#: What kubectl drain prints for an eviction refused with HTTP 429 by a
#: PodDisruptionBudget; the API's cause names the budget, kubectl does
#: not print it, so the driver looks the budgets up itself.
EVICTION_REFUSED = "would violate the pod's disruption budget"


def _labels_of(meta, where):
    labels = json_field(meta, 'labels', dict, where, {})
    if not all(isinstance(v, str) for v in labels.values()):
        raise BadShape('%s.labels values must be strings' % where)
    return labels


class Selector:
    """A LabelSelector, checked once and matched in time linear in the
    labels it names (its ``In``/``NotIn`` values are sets: a budget's
    list of a million values costs one pass, not one per pod).

    :param selector: ``spec.selector`` as kubectl printed it; None
        selects nothing, ``{}`` every pod.
    :param where: the field path, for errors.
    :raises BadShape: *selector* is not a LabelSelector (naming *where*).
    """

    def __init__(self, selector, where='spec.selector'):
        self.never = selector is None
        self.wanted, self.terms = {}, ()
        if self.never:
            return
        if not isinstance(selector, dict):
            raise BadShape('%s must be an object' % where)
        self.wanted = json_field(selector, 'matchLabels', dict, where, {})
        self.terms = tuple(_term(expr, where + '.matchExpressions[]')
                           for expr in json_field(
                               selector, 'matchExpressions', list, where, []))
        # An unknown operator selects nothing, as the API would refuse it.
        self.never = any(op not in _OPERATORS for _, op, _ in self.terms)

    @classmethod
    def of(cls, selector):
        """*selector* compiled, unless it already is."""
        return selector if isinstance(selector, cls) else cls(selector)

    def selects(self, labels):
        """Whether these ``{key: value}`` labels are selected."""
        if self.never or any(labels.get(k) != v
                             for k, v in self.wanted.items()):
            return False
        return all(_OPERATORS[op](labels, key, values)
                   for key, op, values in self.terms)

    def narrowest(self, index):
        """The pods of a :class:`_PodIndex` this selector may select,
        found the cheapest way: by its rarest wanted label, the pods
        with an ``In`` or ``Exists`` key, or an ``In`` list's values
        looked up one by one when they are fewer; else all."""
        ways = [(len(index.pods), index.pods)]
        for key, value in self.wanted.items():
            if isinstance(value, str):
                found = index.by_label.get((key, value), ())
                ways.append((len(found), found))
        for key, op, values in self.terms:
            if op in ('In', 'Exists'):
                found = index.by_key.get(key, ())
                ways.append((len(found), found))
            if op == 'In':
                ways.append((len(values), _by_values(index, key, values)))
        return min(ways, key=lambda way: way[0])[1]


def _by_values(index, key, values):
    for value in values:
        yield from index.by_label.get((key, value), ())


def _term(expr, where):
    values = json_field(expr, 'values', list, where, [])
    # Label values are strings: another value equals none of them.
    return (json_field(expr, 'key', str, where),
            json_field(expr, 'operator', str, where),
            frozenset(v for v in values if isinstance(v, str)))


_OPERATORS = {
    'In': lambda labels, key, values: labels.get(key) in values,
    'NotIn': lambda labels, key, values: labels.get(key) not in values,
    'Exists': lambda labels, key, values: key in labels,
    'DoesNotExist': lambda labels, key, values: key not in labels}


class _PodIndex:
    """The pods of one namespace, by label and by label key."""

    def __init__(self):
        self.pods, self.by_label, self.by_key = [], {}, {}

    def add(self, labels, pod):
        self.pods.append((labels, pod))
        for key, value in labels.items():
            self.by_label.setdefault((key, value), []).append((labels, pod))
            self.by_key.setdefault(key, []).append((labels, pod))


def selections(budgets, pods, first=False):
    """Each budget with the pods its selector selects, in linear time
    for selectors that name a label to look up (the pods are indexed by
    namespace, label and label key), not budgets times pods.

    :param budgets: :class:`Budget`.
    :param pods: ``(namespace, labels, pod)``; *pod* is what is returned.
    :param first: stop at a budget's first selected pod.
    :returns: ``[(budget, [pod, ...]), ...]`` for budgets that select
        one, in *budgets*' order (a budget's pods in no set order).
    :raises BadShape: a selector is not one.
    """
    index = {}
    for namespace, labels, pod in pods:
        index.setdefault(namespace, _PodIndex()).add(labels, pod)
    found = []
    for budget in budgets:
        if budget.namespace not in index:
            continue
        selector = Selector.of(budget.selector)
        if selector.never:
            continue
        chosen = []
        for labels, pod in selector.narrowest(index[budget.namespace]):
            if selector.selects(labels):
                chosen.append(pod)
                if first:
                    break
        if chosen:
            found.append((budget, chosen))
    return found


@dataclasses.dataclass(frozen=True)
class Budget:
    """A PodDisruptionBudget as ``kubectl get pdb -A`` shows it; its
    *selector* a :class:`Selector` once read (a raw LabelSelector is
    compiled where it is matched)."""

    namespace: str
    name: str
    selector: object
    allowed: int
    desired: int
    healthy: int

    def __str__(self):
        return '%s/%s (needs %d healthy pods, has %d)' % (
            self.namespace, self.name, self.desired, self.healthy)


def _budget(item, where):
    meta = json_field(item, 'metadata', dict, where)
    spec = json_field(item, 'spec', dict, where, {})
    status = json_field(item, 'status', dict, where, {})

    def count(key):
        value = status.get(key, 0)
        if not isinstance(value, int) or isinstance(value, bool):
            raise BadShape('%s.status.%s must be a number' % (where, key))
        return value
    return Budget(json_field(meta, 'namespace', str, where + '.metadata', ''),
                  _name_of(item, where),
                  Selector(spec.get('selector'), where + '.spec.selector'),
                  count('disruptionsAllowed'), count('desiredHealthy'),
                  count('currentHealthy'))


def _pod_labels(pod, where):
    """``(namespace, labels, evacuated)`` of one listed pod."""
    meta = json_field(pod, 'metadata', dict, where)
    return (json_field(meta, 'namespace', str, where + '.metadata', ''),
            _labels_of(meta, where + '.metadata'),
            _is_evacuated(pod, meta, where))


@dataclasses.dataclass(frozen=True)
class PodInfo:
    """One pod as ``kubectl get pods -A`` shows it.

    :param namespace: its namespace.
    :param name: its name.
    :param node: ``spec.nodeName`` ('' when not bound).
    :param labels: ``{key: value}``.
    :param evacuated: a drain leaves it (DaemonSet, static or finished
        pod).
    """

    namespace: str
    name: str
    node: str
    labels: dict
    evacuated: bool


def _pod_info(pod, where):
    namespace, labels, evacuated = _pod_labels(pod, where)
    spec = json_field(pod, 'spec', dict, where, {})
    return PodInfo(namespace, _name_of(pod, where),
                   json_field(spec, 'nodeName', str, where + '.spec', ''),
                   labels, evacuated)


def blocking_budgets(pods, budgets):
    """The budgets that allow no disruption and select one of *pods*.

    :param pods: ``(namespace, labels, evacuated)`` of a node's pods.
    :param budgets: :class:`Budget` of the cluster.
    :returns: those budgets, sorted, each once.
    :raises BadShape: a selector is not one.
    """
    found = {(b.namespace, b.name): b for b, _ in selections(
        [b for b in budgets if b.allowed <= 0],
        [(namespace, labels, None) for namespace, labels, evacuated in pods
         if labels and not evacuated], first=True)}
    return [found[key] for key in sorted(found)]


def admin_manifest(name='tacker-admin', namespace='kube-system',
                   secret_name=None):
    """The ServiceAccount, ClusterRoleBinding and token Secret.

    :param name: ServiceAccount and ClusterRoleBinding name.
    :param namespace: namespace of the ServiceAccount and Secret.
    :param secret_name: default ``<name>-token``.
    :returns: a JSON ``List`` document for ``kubectl apply -f -``.
    """
    secret_name = secret_name or name + '-token'
    documents = [
        {'apiVersion': 'v1', 'kind': 'ServiceAccount',
         'metadata': {'name': name, 'namespace': namespace}},
        {'apiVersion': 'rbac.authorization.k8s.io/v1',
         'kind': 'ClusterRoleBinding',
         'metadata': {'name': name},
         'roleRef': {'apiGroup': 'rbac.authorization.k8s.io',
                     'kind': 'ClusterRole', 'name': 'cluster-admin'},
         'subjects': [{'kind': 'ServiceAccount', 'name': name,
                       'namespace': namespace}]},
        # Since Kubernetes 1.24 no token Secret is created for a
        # ServiceAccount; an explicit one is filled by the token
        # controller and lives as long as the Secret.
        {'apiVersion': 'v1', 'kind': 'Secret',
         'type': 'kubernetes.io/service-account-token',
         'metadata': {'name': secret_name, 'namespace': namespace,
                      'annotations': {
                          'kubernetes.io/service-account.name': name}}},
    ]
    # One JSON "List": every kubectl reads it, no YAML parser needed.
    return json.dumps({'apiVersion': 'v1', 'kind': 'List',
                       'items': documents}, indent=2) + '\n'


@dataclasses.dataclass(frozen=True)
class NodeList:
    """One ``kubectl get nodes -o json``.

    :param names: every node's name.
    :param infos: ``{name: NodeInfo}``, or None when an item is no
        valid :class:`NodeInfo` (the names alone are checked then, as
        :meth:`KubectlClient.node_names` does).
    """

    names: list
    infos: dict = None


def _parsed_items(host, parse, stdout, verb):
    """``parse(item, 'items[i]')`` of each item of the output *stdout*
    of ``kubectl VERB... -o json`` on *host*.

    :raises RemoteDataInvalid: the output is not such a list, or
        *parse* raised :class:`BadShape`.
    """
    with parsing(host, 'output of kubectl %s' % ' '.join(verb)):
        items = json_field(load_json(stdout), 'items', list,
                           'the output', default=[])
        return [parse(item, 'items[%d]' % index)
                for index, item in enumerate(items)]


def _name_and_info(item, where):
    """``(name, NodeInfo or None)`` of one listed node: a node that is
    no valid :class:`NodeInfo` still has its name checked."""
    try:
        info = _node_info(item, where)
    except BadShape:
        return _name_of(item, where), None
    return info.name, info


def _node_list(host, stdout):
    """The :class:`NodeList` of ``get nodes -o json`` on *host*: each
    item parsed once.

    :raises RemoteDataInvalid: the output is no list of named objects.
    """
    pairs = _parsed_items(host, _name_and_info, stdout, ('get', 'nodes'))
    names = [name for name, _ in pairs]
    if any(info is None for _, info in pairs):
        return NodeList(names)
    return NodeList(names, {info.name: info for _, info in pairs})


class KubectlClient:
    """kubectl commands on one host.

    :param conn: an ``ssh.Connection`` to a control-plane node or LB.
    :param kubectl: the kubectl command or path on that host.
    :param kubeconfig: ``--kubeconfig`` path on that host, or None.
    :param sudo: run kubectl under ``sudo -n`` (e.g. to read
        ``/etc/kubernetes/admin.conf``).
    :param settings: :class:`KubectlSettings` (default: from conf).
    :param sleep: sleep function between polls (tests pass a fake).
    :param clock: monotonic clock for deadlines (tests pass a fake).
    """

    def __init__(self, conn, kubectl='kubectl', kubeconfig=None, sudo=False,
                 settings=None, sleep=time.sleep, clock=time.monotonic):
        self.conn = conn
        self.kubectl = kubectl
        self.kubeconfig = kubeconfig
        self.sudo = sudo
        self.settings = settings or KubectlSettings.from_conf()
        self._sleep = sleep
        self._clock = clock

    def __repr__(self):
        return '<KubectlClient on %s>' % self.conn.host

    def argv(self, *args):
        """The argv of ``kubectl <args>`` with sudo and kubeconfig."""
        argv = ['sudo', '-n'] if self.sudo else []
        argv.append(self.kubectl)
        if self.kubeconfig:
            argv += ['--kubeconfig', self.kubeconfig]
        return argv + list(args)

    def _run(self, *args, timeout=None, check=True, stdin=None):
        return self.conn.run(self.argv(*args),
                             timeout=timeout or self.settings.command_timeout,
                             check=check, stdin=stdin)

    def _items(self, parse, *args):
        """``parse(item, 'items[i]')`` of each item of a kubectl list.

        :raises RemoteDataInvalid: the output is not such a list.
        """
        result = self._run(*args, '-o', 'json')
        return self._parsed_items(parse, result.stdout, args[:2])

    def _parsed_items(self, parse, stdout, verb):
        """:meth:`_items` of the output *stdout* of ``kubectl VERB...``."""
        return _parsed_items(self.conn.host, parse, stdout, verb)

    # Nodes.

    def node_names(self):
        """Names of all nodes of the cluster: one command.

        :raises RemoteDataInvalid: kubectl printed no node list.
        """
        return self._items(_name_of, 'get', 'nodes')

    def node_list(self):
        """The :class:`NodeList` of the cluster: one command.

        :raises RemoteDataInvalid: kubectl printed no node list.
        """
        result = self._run('get', 'nodes', '-o', 'json')
        return _node_list(self.conn.host, result.stdout)

    def nodes(self):
        """Every node with its roles, readiness, version and labels.

        :returns: a list of :class:`NodeInfo`; one command.
        :raises RemoteDataInvalid: kubectl printed no node list, or a
            field has another type.
        """
        return self._items(_node_info, 'get', 'nodes')

    def nodes_named(self, names):
        """The nodes of *names* that are registered, as :meth:`nodes`
        sees them: one command per :data:`NODES_PER_COMMAND` names.

        :returns: ``{name: NodeInfo}``.
        :raises RemoteDataInvalid: kubectl printed no valid node.
        """
        found = {}
        for start in range(0, len(names), NODES_PER_COMMAND):
            chunk = [_check_node_name(name)
                     for name in names[start:start + NODES_PER_COMMAND]]
            result = self._run('get', 'node', *chunk, '--ignore-not-found',
                               '-o', 'json')
            if not result.stdout.strip():
                continue
            with parsing(self.conn.host, 'output of kubectl get node'):
                doc = load_json(result.stdout)
                # One name: the object itself; several: a List.
                items = json_field(doc, 'items', list, 'the output') \
                    if isinstance(doc, dict) and 'items' in doc else [doc]
                infos = [_node_info(item, 'items[%d]' % index)
                         for index, item in enumerate(items)]
            asked = set(chunk)
            found.update((info.name, info) for info in infos
                         if info.name in asked)
        return found

    def node_exists(self, name):
        """Whether node *name* is registered: one command."""
        result = self._run('get', 'node', _check_node_name(name),
                           '--ignore-not-found', '-o', 'name')
        return bool(result.stdout.strip())

    def _on_node(self, name, *args, timeout=None):
        """Run a node command; False if the node does not exist."""
        result = self._run(*args, timeout=timeout, check=False)
        if result.ok:
            return True
        if _NOT_FOUND.search(result.stderr):
            LOG.info('Node %s is not registered (kubectl %s on %s); '
                     'nothing to do', name, args[0], self.conn.host)
            return False
        raise exceptions.RemoteCommandFailed(result)

    def cordon(self, name):
        """Mark node *name* unschedulable: one command.

        :returns: False when the node does not exist (nothing to do).
        :raises RemoteCommandFailed: kubectl failed for another reason.
        """
        return self._on_node(name, 'cordon', _check_node_name(name))

    def uncordon(self, name):
        """Mark node *name* schedulable again: one command.

        :returns: False when the node does not exist (nothing to do).
        :raises RemoteCommandFailed: kubectl failed for another reason.
        """
        return self._on_node(name, 'uncordon', _check_node_name(name))

    def drain(self, name, timeout=None, force=True, grace_period=None):
        """Evict the pods of node *name* (cordons it first): one command.

        ``--ignore-daemonsets`` (DaemonSet pods stay until the node goes),
        ``--delete-emptydir-data`` (emptyDir data dies with the node
        anyway) and, unless *force* is False, ``--force``: pods that no
        controller manages would block the drain forever, and they are
        lost with the VM in any case.

        :param timeout: kubectl ``--timeout`` (default: drain_timeout).
        :param grace_period: ``--grace-period`` seconds, or None for the
            pods' own.
        :returns: False when the node does not exist (nothing to do).
        :raises DrainBlocked: PodDisruptionBudgets never allowed an
            eviction; the message names them.
        :raises RemoteCommandFailed: the drain failed or timed out.
        """
        timeout = int(timeout or self.settings.drain_timeout)
        args = _drain_args(name, timeout, force, grace_period)
        result = self._run(*args, timeout=timeout + DRAIN_MARGIN,
                           check=False)
        return self._drained(name, result)

    def evacuate(self, name, timeout=None):
        """:meth:`drain` (forced, the pods' own grace period), then
        :meth:`wait_evacuated`, whose first read runs in the drain's
        command (:data:`DRAIN_PROGRAM`): one command when the drain
        leaves no pod to wait for.

        :param timeout: seconds for the drain, and again for the wait
            (default: drain_timeout).
        :returns: False when the node does not exist (nothing to do).
        :raises DrainBlocked, RemoteCommandFailed: as :meth:`drain`; a
            failed pod list names ``kubectl get pods``.
        :raises RemoteCommandTimedOut: the drain or the list ran past its
            timeout (the message names which).
        :raises WaitTimedOut: as :meth:`wait_evacuated`.
        """
        timeout = int(timeout or self.settings.drain_timeout)
        drain = _drain_args(name, timeout, True, None)
        prefix = self.argv()
        try:
            result = self.conn.run(
                programs.command(DRAIN_PROGRAM, name, str(len(prefix)),
                                 *prefix, *drain),
                timeout=timeout + DRAIN_MARGIN +
                self.settings.command_timeout, check=False)
        except exceptions.RemoteCommandTimedOut as exc:
            raise exceptions.RemoteCommandTimedOut(
                self._drain_parts(exc.result, drain, name)[-1],
                exc.timeout) from None
        drained, *listed = self._drain_parts(result, drain, name)
        if not self._drained(name, drained):
            return False
        if not listed[0].ok:
            raise exceptions.RemoteCommandFailed(listed[0])
        left = self._left_on(self._parsed_items(
            _pod_entry, listed[0].stdout, ('get', 'pods')))
        self.wait_evacuated(name, timeout, left=left)
        return True

    def _drain_parts(self, result, drain, name):
        """*result* of :data:`DRAIN_PROGRAM` as the results of the
        drain and, if it ran, of the pod list (each its own command,
        output and error, without the program's marks)."""
        parts = [text.split(_PODS_MARK + '\n', 1)
                 for text in (result.stdout, result.stderr)]
        drained = dataclasses.replace(
            result, command=shlex.join(self.argv(*drain)),
            stdout=parts[0][0], stderr=parts[1][0],
            exit_code=result.exit_code if len(parts[0]) == 1 else 0)
        if len(parts[0]) == 1:
            return [drained]
        return [drained, dataclasses.replace(
            result, command=shlex.join(self.argv(*_pods_args(name))),
            stdout=parts[0][1], stderr=parts[1][-1])]

    def _drained(self, name, result):
        """:meth:`drain`'s outcome of its command's *result*."""
        if result.ok:
            return True
        if _NOT_FOUND.search(result.stderr):
            LOG.info('Node %s is not registered (kubectl drain on %s); '
                     'nothing to do', name, self.conn.host)
            return False
        if EVICTION_REFUSED in result.stderr:
            budgets = self._budgets_blocking(name)
            if budgets:
                raise exceptions.DrainBlocked(
                    result, node=name, budgets=exceptions.clip_list(
                        [str(b) for b in budgets], count=SHOWN_PODS,
                        width=SHOWN_POD_WIDTH))
        raise exceptions.RemoteCommandFailed(result)

    def _budgets_blocking(self, name):
        """The PodDisruptionBudgets that refuse to let the pods of node
        *name* go: two commands.  Best effort: [] when they cannot be
        listed (the drain's own error is reported then)."""
        try:
            pods = self._items(_pod_labels, 'get', 'pods', '-A',
                               '--field-selector',
                               'spec.nodeName=' + _check_node_name(name))
            budgets = self._items(_budget, 'get', 'poddisruptionbudgets',
                                  '-A')
            with parsing(self.conn.host, 'PodDisruptionBudget selectors'):
                return blocking_budgets(pods, budgets)
        except (exceptions.MgmtDriverRemoteCommandError,
                exceptions.MgmtDriverRemoteCommandTimeOut,
                exceptions.MgmtDriverOtherError) as exc:
            LOG.warning('Cannot list the disruption budgets blocking the '
                        'drain of %s: %s', name, exc)
            return []

    def pods(self):
        """Every pod of the cluster: one command.

        :returns: a list of :class:`PodInfo`.
        :raises RemoteDataInvalid: kubectl printed no valid pod list.
        """
        return self._items(_pod_info, 'get', 'pods', '-A')

    def budgets(self):
        """Every PodDisruptionBudget with its status: one command.

        :returns: a list of :class:`Budget`.
        :raises RemoteDataInvalid: kubectl printed no valid list.
        """
        return self._items(_budget, 'get', 'poddisruptionbudgets', '-A')

    def api_ready(self, server):
        """Whether the API answers ``/readyz`` at *server* (the load
        balancer's URL), with this host's credentials: one command.

        :returns: ``(ready, why)``: *why* is kubectl's clipped error
            when not ready, else ''.
        """
        result = self._run('--server=' + server, 'get', '--raw=/readyz',
                           check=False)
        if result.ok and result.stdout.strip() == 'ok':
            return True, ''
        return False, result.tail(2) or 'exit status %d' % result.exit_code

    def label(self, names, labels):
        """Set *labels* (``(key, value)`` pairs) on the nodes *names*,
        over any value they had; a None value removes the label: one
        command.

        :returns: False when a node does not exist.
        :raises RemoteCommandFailed: kubectl failed for another reason.
        """
        return self._on_node(
            ', '.join(names), 'label', 'node',
            *(_check_node_name(name) for name in names), '--overwrite',
            *(key + '-' if value is None else '%s=%s' % (key, value)
              for key, value in labels))

    def taint(self, names, taints):
        """Set *taints* (``key=value:Effect`` strings) on the nodes
        *names*, replacing a taint of the same key and effect, or remove
        them (``key:Effect-``, ``key-``: kubectl fails for a taint a node
        does not have): one command.

        :returns: False when a node does not exist.
        :raises RemoteCommandFailed: kubectl failed for another reason.
        """
        return self._on_node(
            ', '.join(names), 'taint', 'node',
            *(_check_node_name(name) for name in names), '--overwrite',
            *taints)

    def pods_left(self, name):
        """Pods on node *name* that a drain must evict: one command.

        DaemonSet pods, static (mirror) pods and finished pods are not
        counted.

        :returns: ``namespace/name`` strings, sorted.
        :raises RemoteDataInvalid: kubectl printed no valid pod list.
        """
        return self._left_on(self._items(_pod_entry,
                                         *_pods_args(name)[:-2]))

    @staticmethod
    def _left_on(pods):
        return sorted(name for name, evacuated in pods if not evacuated)

    def wait_evacuated(self, name, timeout=None, left=None):
        """Poll until no pod but DaemonSet/static ones runs on *name*.

        One command per poll, with exponential backoff.

        :param timeout: seconds (default: drain_timeout).
        :param left: what a read just made found (:meth:`pods_left`'s
            answer): the first poll, which costs no command; None: read.
        :raises WaitTimedOut: pods are still there at the deadline; the
            message names them.
        """
        timeout = timeout or self.settings.drain_timeout
        first = [] if left is None else [left]

        def probe():
            pods = first.pop() if first else self.pods_left(name)
            return not pods, pods

        done, pods = poll(probe, timeout, self.settings, self._sleep,
                          self._clock)
        if not done:
            raise exceptions.WaitTimedOut(
                timeout=timeout, host=self.conn.host,
                what='the pods to leave node %s' % name,
                detail='%d pod(s) left: %s' % (len(pods), exceptions.clip_list(
                    pods, count=SHOWN_PODS, width=SHOWN_POD_WIDTH)))
        LOG.info('Node %s has no pod left to evacuate', name)

    def delete_node(self, name):
        """Delete node *name*; an absent node is fine: one command."""
        self._run('delete', 'node', _check_node_name(name),
                  '--ignore-not-found')
        LOG.info('Node %s deleted (or already absent)', name)

    # Join discovery.

    def point_cluster_info(self, server):
        """Make ``kube-public/cluster-info`` name *server*.

        kubeadm init writes its control-plane endpoint there and every
        later ``kubeadm join`` of kubespray discovers the cluster through
        it, so it must name an endpoint that answers (kubespray's
        node-operations guide: edit it after the first control-plane
        node is replaced).  One ``get``, and one ``apply`` only when the
        server differs; the other keys (the bootstrap signer's
        signatures, which it renews) are left to the cluster.

        :param server: ``https://host:port``.
        :returns: the server it named before (a placeholder when that
            is not a short printable line).
        :raises RemoteDataInvalid: the ConfigMap is not a kubeconfig with
            a cluster (the message names the field, never the text).
        """
        result = self._run('get', 'configmap', 'cluster-info', '-n',
                           'kube-public', '-o', 'json')
        with parsing(self.conn.host, 'ConfigMap kube-public/cluster-info'):
            config, clusters = _cluster_info(result.stdout)
            old = _printable(clusters[0]['server'])
            if old == server:
                return old
            for cluster in clusters:
                cluster['server'] = server
        self._run('apply', '-f', '-', stdin=json.dumps({
            'apiVersion': 'v1', 'kind': 'ConfigMap',
            'metadata': {'name': 'cluster-info',
                         'namespace': 'kube-public'},
            'data': {'kubeconfig': json.dumps(config, indent=2,
                                              default=str)}}))
        LOG.info('cluster-info on %s now names %s (was %s)', self.conn.host,
                 server, old)
        return old

    # Admin credentials for the VIM.

    def ensure_admin_account(self, name='tacker-admin',
                             namespace='kube-system', secret_name=None):
        """Apply the admin ServiceAccount, binding and token Secret.

        Idempotent (``kubectl apply``), one command; the manifest goes on
        standard input.
        """
        manifest = admin_manifest(_check_label(name, 'account name'),
                                  _check_label(namespace, 'namespace'),
                                  secret_name and _check_label(
                                      secret_name, 'secret name'))
        self._run('apply', '-f', '-', stdin=manifest)
        LOG.info('Admin ServiceAccount %s/%s applied on %s', namespace,
                 name, self.conn.host)

    def admin_credentials(self, name='tacker-admin',
                          namespace='kube-system', secret_name=None,
                          timeout=None):
        """Ensure the admin account, then read its token and the CA.

        One ``apply`` command, then one ``get secret`` per poll until
        the token controller has filled the Secret.

        :param timeout: seconds to wait for the token (default:
            kubectl_timeout).
        :returns: :class:`AdminCredentials`.
        :raises WaitTimedOut: the Secret got no token in time.
        :raises RemoteDataInvalid: the Secret is malformed (the message
            never holds the token).
        """
        secret_name = secret_name or name + '-token'
        self.ensure_admin_account(name, namespace, secret_name)
        timeout = timeout or self.settings.command_timeout
        done, creds = poll(
            lambda: self._read_token(secret_name, namespace), timeout,
            self.settings, self._sleep, self._clock)
        if not done:
            raise exceptions.WaitTimedOut(
                timeout=timeout, host=self.conn.host,
                what='the token of Secret %s/%s' % (namespace, secret_name),
                detail='the token controller has not filled it; is '
                       'kube-controller-manager running?')
        LOG.info('Read the admin token of %s/%s on %s', namespace, name,
                 self.conn.host)
        return creds

    def _read_token(self, secret_name, namespace):
        """``(True, AdminCredentials)`` once the Secret holds a token."""
        try:
            result = self._run('get', 'secret', secret_name, '-n',
                               namespace, '-o', 'json', check=False)
        except exceptions.RemoteCommandTimedOut as exc:
            # Partial output could hold the token: keep it out.
            raise exceptions.RemoteCommandTimedOut(
                dataclasses.replace(exc.result, stdout=''), exc.timeout)
        if result.failed:
            if _NOT_FOUND.search(result.stderr):
                return False, None
            # Keep stdout out of the error: it could hold the token.
            raise exceptions.RemoteCommandFailed(
                dataclasses.replace(result, stdout=''))
        with parsing(self.conn.host, 'Secret %s/%s' % (namespace,
                                                       secret_name)):
            return _credentials(result.stdout)


def _printable(text, limit=200):
    """*text* if it is a short printable line, else a placeholder (it
    came from a remote host and goes into logs)."""
    if len(text) <= limit and text.isprintable():
        return text
    return '(%d characters, not shown)' % len(text)


def _cluster_info(stdout):
    """``(kubeconfig, [its cluster entries])`` of ``get configmap -o json``.

    :raises BadShape: malformed.
    """
    data = json_field(load_json(stdout), 'data', dict, 'the ConfigMap')
    text = json_field(data, 'kubeconfig', str, 'data')
    if len(text) > MAX_CLUSTER_INFO_CHARS:
        raise BadShape('data.kubeconfig is longer than %d characters'
                       % MAX_CLUSTER_INFO_CHARS)
    try:
        config = untrusted.load_yaml(text)
    except yaml.YAMLError as exc:
        raise BadShape('data.kubeconfig is not YAML' +
                       safeyaml.describe(exc)) from None
    entries = json_field(config, 'clusters', list, 'data.kubeconfig')
    if not entries:
        raise BadShape('data.kubeconfig.clusters is empty')
    clusters = []
    for index, entry in enumerate(entries):
        where = 'data.kubeconfig.clusters[%d]' % index
        cluster = json_field(entry, 'cluster', dict, where)
        json_field(cluster, 'server', str, where + '.cluster')
        clusters.append(cluster)
    return config, clusters


def _credentials(stdout):
    """``(done, AdminCredentials or None)`` from ``get secret -o json``.

    :raises BadShape: malformed; the message never holds the token.
    """
    data = json_field(load_json(stdout), 'data', dict, 'the Secret', {})
    if not data.get('token') or not data.get('ca.crt'):
        return False, None
    token = _decoded(data, 'token', MAX_TOKEN_CHARS)
    if not (token.isascii() and token.isprintable()) or ' ' in token:
        raise BadShape('data.token is not a printable ASCII token')
    ca_cert = _decoded(data, 'ca.crt', MAX_CA_CHARS)
    if not ca_cert.isascii() or _PEM_BEGIN not in ca_cert or \
            _PEM_END not in ca_cert:
        raise BadShape('data.ca.crt is not a PEM certificate')
    return True, AdminCredentials(token=token, ca_cert=ca_cert)


def _decoded(data, key, limit):
    """The base64 text of Secret field *key*, at most *limit* chars."""
    value = json_field(data, key, str, 'data')
    if len(value) > limit * 4 // 3 + 4:
        raise BadShape('data.%s is longer than %d characters'
                       % (key, limit))
    try:
        return base64.b64decode(value.encode('ascii'),
                                validate=True).decode('ascii')
    except (binascii.Error, UnicodeError):
        raise BadShape('data.%s is not base64 of ASCII text' % key) \
            from None


# Errors that mean "try the next host".
_HOST_ERRORS = (exceptions.SSHConnectError, exceptions.SSHAuthError,
                exceptions.HostKeyUnknown, exceptions.HostKeyChanged,
                exceptions.RemoteCommandFailed,
                exceptions.RemoteCommandTimedOut)


def first_reachable(connections, command=('kubectl', 'version', '--client'),
                    timeout=30):
    """The first connection on which *command* succeeds.

    :param connections: ``ssh.Connection`` objects, in preference order
        (control-plane nodes, then perhaps the LB).
    :param command: a cheap argv that proves the host is usable.
    :param timeout: seconds for the command on each host.
    :returns: the first connection that ran *command* successfully;
        one command per host tried.
    :raises HostKeyChanged: none did, and a host presented a changed key
        (the operator must act on that, as the error says).
    :raises NoReachableHost: none did; names every host and why.
    """
    def attempt(conn):
        conn.run(list(command), timeout=timeout)
        return conn
    return _on_first(connections, attempt, command)


def _on_first(connections, attempt, command):
    """``attempt(conn)`` of the first of *connections* where it raises
    no :data:`_HOST_ERRORS`; *command* (an argv) is what the errors say
    was tried (:func:`first_reachable`'s)."""
    tried, changed = [], []
    for conn in connections:
        try:
            return attempt(conn)
        except _HOST_ERRORS as exc:
            LOG.warning('%s cannot run %s: %s', conn.host, command[0], exc)
            tried.append('%s (%s)' % (conn.host, exc))
            if isinstance(exc, exceptions.HostKeyChanged):
                changed.append(exc)
    if changed:
        raise changed[0]
    raise exceptions.NoReachableHost(
        what=' '.join(command), tried=exceptions.clip_list(
            tried, count=SHOWN_HOSTS, width=SHOWN_HOST_WIDTH,
            separator='; ') or 'no host')


def client_on_first_reachable(connections, **kwargs):
    """A :class:`KubectlClient` on the first host where kubectl runs.

    :param kwargs: :class:`KubectlClient` arguments (kubectl, sudo, ...).
    :raises NoReachableHost: no host could run ``kubectl version
        --client``.
    """
    client = KubectlClient(None, **kwargs)
    client.conn = first_reachable(
        connections, command=client.argv('version', '--client'))
    return client


#: The program that drains a node and lists the pods left on it in one
#: command (``scripts/kubectl-drain.sh``), and its mark between the two.
DRAIN_PROGRAM = 'kubectl-drain'
_PODS_MARK = 'KD:PODS'


def _drain_args(name, timeout, force, grace_period):
    """The words after kubectl of :meth:`KubectlClient.drain`."""
    args = ['drain', _check_node_name(name), '--ignore-daemonsets',
            '--delete-emptydir-data']
    if force:
        args.append('--force')
    if grace_period is not None:
        args.append('--grace-period=%d' % int(grace_period))
    return args + ['--timeout=%ds' % timeout]


def _pods_args(name):
    """The words after kubectl that list the pods of node *name*."""
    return ['get', 'pods', '-A', '--field-selector',
            'spec.nodeName=' + _check_node_name(name), '-o', 'json']


def drain_of(argv):
    """The drain (``kubectl ... drain NODE ...``) that *argv*, a
    :data:`DRAIN_PROGRAM` command, runs: what a dry run shows ('' for
    no drain).  Found by the program's arguments (``NODE N KUBECTL...
    drain NODE ...``, N words of kubectl), not by a place in *argv*."""
    args = programs.args_of(argv) or []
    if len(args) < 2 or not args[1].isdecimal():
        return ''
    node, count, drain = args[0], int(args[1]), args[2:]
    if drain[count:count + 2] != ['drain', node]:
        return ''
    return shlex.join(drain)


#: The program that asks ``version --client`` and lists the nodes in
#: one command (``scripts/kubectl-nodes.sh``).
NODES_PROGRAM = 'kubectl-nodes'
#: Its exit status when ``version --client`` failed, and its marks on
#: standard error before and after the list.
_NO_CLIENT_EXIT = 97
_NO_CLIENT, _CLIENT = 'KN:NOCLIENT', 'KN:CLIENT'


def nodes_on_first_reachable(connections, timeout=30, **kwargs):
    """:func:`client_on_first_reachable`, then
    :meth:`KubectlClient.node_list` there, in one command per host tried
    (:data:`NODES_PROGRAM`).  A host where ``kubectl version --client``
    fails is passed over, with the error that command had alone; a
    failure of the list is raised as :meth:`KubectlClient.node_list`
    raises it, naming ``kubectl get nodes``.

    :param timeout: seconds for ``version --client`` on each host (the
        list has the client's ``command_timeout`` on top).
    :param kwargs: :class:`KubectlClient` arguments.
    :returns: ``(KubectlClient, NodeList)``.
    :raises HostKeyChanged: as :func:`first_reachable`.
    :raises NoReachableHost: no host could run ``kubectl version
        --client``; names every host and why.
    :raises RemoteCommandFailed: the list failed.
    :raises RemoteCommandTimedOut: the list ran past its timeout.
    :raises RemoteDataInvalid: kubectl printed no node list.
    """
    client = KubectlClient(None, **kwargs)

    def attempt(conn):
        return conn, _nodes_there(client, conn,
                                  timeout + client.settings.command_timeout)
    client.conn, listed = _on_first(connections, attempt,
                                    client.argv('version', '--client'))
    if isinstance(listed, Exception):
        # The list's own failure: raised here, where no next host is
        # asked (first_reachable's choice is made).
        raise listed
    return client, listed


def _nodes_there(client, conn, timeout):
    """The :class:`NodeList` of :data:`NODES_PROGRAM` on *conn*, or the
    error of the list (returned); the error of ``version --client``
    (raised: the next host is tried)."""
    probe = client.argv('version', '--client')
    listing = client.argv('get', 'nodes', '-o', 'json')
    try:
        result = conn.run(programs.command(NODES_PROGRAM, *client.argv()),
                          timeout=timeout, check=False)
    except exceptions.RemoteCommandTimedOut as exc:
        if _CLIENT not in exc.result.stderr:
            raise exceptions.RemoteCommandTimedOut(
                _as_run(exc.result, probe), exc.timeout) from None
        return exceptions.RemoteCommandTimedOut(
            _as_run(exc.result, listing), exc.timeout)
    if result.exit_code == _NO_CLIENT_EXIT and \
            _NO_CLIENT in result.stderr:
        raise exceptions.RemoteCommandFailed(_as_run(result, probe))
    result = _as_run(result, listing)
    if not result.ok:
        return exceptions.RemoteCommandFailed(result)
    return _node_list(conn.host, result.stdout)


def _as_run(result, argv):
    """*result* as if *argv* had run alone: its command, its standard
    error without the program's marks."""
    stderr = ''.join(line for line in result.stderr.splitlines(True)
                     if line.rstrip('\n') not in (_CLIENT, _NO_CLIENT))
    return dataclasses.replace(result, command=shlex.join(argv),
                               stderr=stderr)


def parse_etcd_members(text, host):
    """Members of ``etcdctl member list -w json`` output.

    :raises RemoteDataInvalid: naming *host* and the field.
    """
    with parsing(host, 'etcdctl member list output'):
        data = load_json(text)
        members = json_field(data, 'members', list, 'the output', [])
        return [_member(m, 'members[%d]' % i)
                for i, m in enumerate(members)]


def _member(member, where):
    get = json_field
    member_id = member.get('ID') if isinstance(member, dict) else None
    if not isinstance(member_id, int) or isinstance(member_id, bool):
        raise BadShape('%s.ID must be a number' % where)
    urls = {}
    for key in ('peerURLs', 'clientURLs'):
        urls[key] = get(member, key, list, where, [])
        if not all(isinstance(u, str) for u in urls[key]):
            raise BadShape('%s.%s must be strings' % (where, key))
    return {'name': get(member, 'name', str, where, ''),
            'id': '%x' % member_id, 'peer_urls': urls['peerURLs'],
            'client_urls': urls['clientURLs']}
