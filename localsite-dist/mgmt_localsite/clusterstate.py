"""The Kubernetes state kept by the kubespray test double (stdlib only).

One JSON document per site, ``<state_dir>/cluster.json``, stands in for
a cluster's API server (etcd itself is real: localsite/etcd.py): the
nodes the playbooks joined, the pods on them, and the few API objects
the driver creates
(ServiceAccount, ClusterRoleBinding, Secret).  The double's playbooks
write it through ``bin/kube-double``, the fake ``bin/kubectl`` reads and
changes it, and tests read it through :mod:`mgmt_localsite`.
Every host of the local site is the same machine, so "the API server on
the first control-plane node" is simply this file.

This module is imported three ways: as part of the test package, and as
a top-level module by the two scripts (from the site root, one directory
above ``bin/``).  Hence no relative imports and nothing but the stdlib.

Writers take an exclusive ``flock`` on ``<state_dir>/cluster.lock`` and
replace the file atomically, so readers never see half a document and
parallel Ansible forks joining nodes do not lose each other's updates.
The file holds tokens, hence mode 0600.
"""

import base64
import contextlib
import fcntl
import json
import os
import secrets
import tempfile
import time

STATE_FILE = 'cluster.json'
LOCK_FILE = 'cluster.lock'
CA_FILE = 'ca.crt'
FAIL_PREFIX = 'fail-next-'
#: ``slow-next-<playbook>`` holds seconds the next run of it pauses.
SLOW_PREFIX = 'slow-next-'
#: ... or :data:`HOLD`: it pauses while ``held-<playbook>`` exists.
HOLD = 'hold'
HELD_PREFIX = 'held-'
DEFAULT_KUBE_VERSION = 'v1.33.5'

#: Tunables a test may change in ``state['settings']``.
DEFAULT_SETTINGS = {
    # Seconds before the token controller fills a token Secret.
    'token_delay': 0.0,
    # Upper bound, in seconds, for a drain that has no --timeout
    # (real kubectl would wait forever).
    'max_wait': 120.0,
    # How often drain retries a refused eviction, in seconds.
    'eviction_retry': 0.5,
    # Seconds one node's upgrade (kube-double upgrade) takes.
    'upgrade_delay': 0.0,
    # The node lifecycle controller (kube-controller-manager): a node
    # whose kubelet stopped answering is NotReady once this many seconds
    # passed since it was first seen dead (kubespray's
    # kube_controller_node_monitor_grace_period, 40s) ...
    'node_monitor_grace_period': 40.0,
    # ... and it looks at each kubelet at most this often
    # (kube_controller_node_monitor_period, 5s).
    'node_monitor_period': 5.0,
    # A pod's terminationGracePeriodSeconds (Kubernetes' default).
    'pod_grace_period': 30.0,
    # Days the leaf certificates of a new control-plane node are valid
    # (pki.py; kubeadm: 365).
    'cert_days': 365,
    # Seconds "crictl rmp" of static pods takes (fake_kubeadm.py): the
    # API server's restart after a certificate renewal.
    'static_pod_restart': 0.0,
}

#: DaemonSets kubespray deploys on every node (Calico, kube-proxy,
#: nodelocaldns).
DAEMONSETS = ('calico-node', 'kube-proxy', 'nodelocaldns')
#: Static pods kubeadm puts on every control-plane node.
STATIC_PODS = ('kube-apiserver', 'kube-controller-manager',
               'kube-scheduler')
#: Deployments kubespray creates once per cluster (name, replicas).
DEPLOYMENTS = (('coredns', 2), ('dns-autoscaler', 1))

CP_ROLE_LABEL = 'node-role.kubernetes.io/control-plane'
CP_TAINT = {'key': CP_ROLE_LABEL, 'effect': 'NoSchedule'}
UNSCHEDULABLE_TAINT = {'key': 'node.kubernetes.io/unschedulable',
                       'effect': 'NoSchedule'}
#: What the node lifecycle controller puts on a node that went NotReady
#: because its kubelet stopped posting status.
UNREACHABLE_TAINTS = (
    {'key': 'node.kubernetes.io/unreachable', 'effect': 'NoSchedule'},
    {'key': 'node.kubernetes.io/unreachable', 'effect': 'NoExecute'})


class StateError(Exception):
    """A request the cluster would refuse; the message is for the user."""


TAINT_EFFECTS = ('NoSchedule', 'PreferNoSchedule', 'NoExecute')


def parse_taint(spec):
    """A taint as kubectl reads one: ``key=value:Effect``, ``key:Effect``
    or ``key`` (no effect: only a removal may say that).

    :returns: ``{'key', 'effect'[, 'value']}`` (``effect`` '' for a bare
        key), or None when kubectl would call it an invalid taint spec.
    """
    parts = spec.split(':')
    if len(parts) > 2 or (len(parts) == 2 and parts[1] not in TAINT_EFFECTS):
        return None
    pair = parts[0].split('=')
    if len(pair) > 2 or not pair[0] or (len(parts) == 1 and len(pair) > 1):
        return None
    taint = {'key': pair[0], 'effect': parts[1] if len(parts) == 2 else ''}
    if len(pair) == 2 and pair[1]:
        taint['value'] = pair[1]
    return taint


def taint_text(taint):
    """kubectl's way of writing a taint: ``key=value:Effect``."""
    return '%s%s%s' % (taint['key'], '=%s' % taint['value'] if taint.get(
        'value') else '', ':%s' % taint['effect'] if taint['effect'] else '')


def put_taints(node, taints):
    """``kubectl taint node --overwrite``: *taints* replace those of the
    same key and effect and come first; every other taint stays.

    :returns: whether the node has more taints than before.
    """
    given = [(t['key'], t['effect']) for t in taints]
    old = node['taints']
    node['taints'] = list(taints) + [t for t in old if (
        t['key'], t['effect']) not in given]
    return len(node['taints']) != len(old)


def state_path(state_dir):
    return os.path.join(state_dir, STATE_FILE)


def read(state_dir):
    """The current state, or None when no cluster exists.

    :param state_dir: the site's state directory.
    """
    try:
        with open(state_path(state_dir)) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


class Transaction:
    """A locked read-modify-write of the state; set ``state`` to None to
    delete the cluster."""

    def __init__(self, state):
        self.state = state


@contextlib.contextmanager
def locked(state_dir):
    """Hold the state's exclusive lock (the directory is created if
    missing)."""
    os.makedirs(state_dir, mode=0o700, exist_ok=True)
    with open(os.path.join(state_dir, LOCK_FILE), 'a') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@contextlib.contextmanager
def transaction(state_dir):
    """Lock the state, yield a :class:`Transaction`, save it if it
    changed and no exception escaped.

    :param state_dir: the site's state directory.
    """
    with locked(state_dir):
        txn = Transaction(read(state_dir))
        before = json.dumps(txn.state, sort_keys=True)
        yield txn
        if json.dumps(txn.state, sort_keys=True) != before:
            _save(state_dir, txn.state)


def _save(state_dir, state):
    path = state_path(state_dir)
    if state is None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return
    fd, tmp = tempfile.mkstemp(dir=state_dir, prefix='.cluster-')
    try:
        with os.fdopen(fd, 'w') as f:
            json.dump(state, f, indent=1, sort_keys=True)
            f.write('\n')
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def empty_state():
    """State before ``kubeadm init``."""
    return {'cluster': None, 'nodes': {}, 'pods': [],
            'objects': {}, 'settings': dict(DEFAULT_SETTINGS)}


def running(state):
    """True when an API server answers (the cluster was initialised)."""
    return bool(state and state.get('cluster'))


def init_cluster(state, name, kube_version, ca_pem):
    state['cluster'] = {'name': name, 'kube_version': kube_version,
                        'created': time.time(), 'ca_crt': ca_pem}
    return state


#: Where kubeadm publishes the discovery kubeconfig for joining nodes.
CLUSTER_INFO_KEY = 'ConfigMap/kube-public/cluster-info'
#: The API server port of a control-plane node (kube_apiserver_port).
APISERVER_PORT = 6443


def split_endpoint(text):
    """``(host, port)`` of ``https://host:port``, ``host:port`` or
    ``[v6]:port`` (port None when absent)."""
    text = text.split('://', 1)[-1].split('/', 1)[0]
    if text.startswith('['):
        host, _, rest = text[1:].partition(']')
        return host, int(rest[1:]) if rest.startswith(':') else None
    host, sep, port = text.rpartition(':')
    if not sep or ':' in host:
        return text, None
    return host, int(port)


def set_cluster_info(state, endpoint):
    """Publish ``kube-public/cluster-info`` as ``kubeadm init`` does: a
    kubeconfig (JSON, which is YAML too) naming the CA and *endpoint*,
    the control-plane endpoint (``host:port``)."""
    host, port = split_endpoint(endpoint)
    shown = '[%s]' % host if ':' in host else host
    kubeconfig = {
        'apiVersion': 'v1', 'kind': 'Config',
        'clusters': [{'name': '', 'cluster': {
            'certificate-authority-data': b64(state['cluster']['ca_crt']),
            'server': 'https://%s:%d' % (shown, port or APISERVER_PORT)}}],
        'contexts': None, 'current-context': '', 'preferences': {},
        'users': None}
    now = time.time()
    state['objects'][CLUSTER_INFO_KEY] = {
        'apiVersion': 'v1', 'kind': 'ConfigMap',
        'metadata': {'name': 'cluster-info', 'namespace': 'kube-public',
                     'creationTimestamp': iso(now), 'uid': suffix(24),
                     '_applied': now, '_manifest': ''},
        'data': {'kubeconfig': json.dumps(kubeconfig, indent=2)}}


def cluster_info_server(state):
    """The ``server`` of the cluster-info kubeconfig, or None."""
    obj = state['objects'].get(CLUSTER_INFO_KEY)
    try:
        config = json.loads(obj['data']['kubeconfig'])
        return config['clusters'][0]['cluster']['server']
    except (TypeError, KeyError, IndexError, ValueError):
        return None


def setting(state, key):
    return state.get('settings', {}).get(key, DEFAULT_SETTINGS[key])


def suffix(length=5):
    """A random pod-name suffix like Kubernetes' (lowercase, digits)."""
    alphabet = 'bcdfghjklmnpqrstvwxz2456789'
    return ''.join(secrets.choice(alphabet) for _ in range(length))


def make_pod(name, namespace, node, owner_kind=None, owner_name=None,
             emptydir=False, stuck=False, tolerates_cp=False, labels=None):
    """A pod record.

    :param owner_kind: 'DaemonSet', 'ReplicaSet', 'Node' (static pod) or
        None for a bare pod.
    :param emptydir: the pod uses emptyDir (local) storage.
    :param stuck: eviction is refused whatever the budgets say (a
        shortcut for tests; :func:`eviction_refusal` models the real
        PodDisruptionBudget check).
    :param tolerates_cp: the pod may run on tainted control-plane nodes
        (kubespray's kube-system Deployments do).
    :param labels: the pod's labels (what budgets select).
    """
    return {'name': name, 'namespace': namespace, 'node': node,
            'owner_kind': owner_kind, 'owner_name': owner_name,
            'emptydir': emptydir, 'stuck': stuck,
            'tolerates_cp': tolerates_cp, 'labels': dict(labels or {}),
            'deleting': None,
            'phase': 'Running' if node else 'Pending',
            'created': time.time()}


def pods_on(state, node):
    return [p for p in state['pods'] if p['node'] == node]


def schedulable_nodes(state, exclude=(), tolerates_cp=False):
    return [n for n in state['nodes'].values()
            if n['schedulable'] and is_ready(n) and n['name'] not in exclude
            and not _tainted(n, tolerates_cp)]


def _tainted(node, tolerates_cp):
    return any(t['effect'] == 'NoSchedule' and not (
        tolerates_cp and t['key'] == CP_ROLE_LABEL) for t in node['taints'])


def place(state, pod, exclude=()):
    """Bind *pod* to the least loaded schedulable node, or leave it
    Pending when there is none."""
    candidates = schedulable_nodes(state, exclude,
                                   pod.get('tolerates_cp', False))
    if not candidates:
        pod['node'], pod['phase'] = None, 'Pending'
        return pod
    load = dict.fromkeys((n['name'] for n in candidates), 0)
    for other in state['pods']:
        if other['node'] in load:
            load[other['node']] += 1
    pod['node'] = min(sorted(load), key=load.get)
    pod['phase'] = 'Running'
    return pod


def replace_pod(state, pod, exclude=()):
    """Recreate a ReplicaSet pod elsewhere (what its controller does)."""
    state['pods'].remove(pod)
    clone = _clone(pod)
    state['pods'].append(place(state, clone, exclude))
    return clone


def _clone(pod):
    """The pod a ReplicaSet creates in place of *pod*."""
    return make_pod('%s-%s' % (pod['owner_name'], suffix()),
                    pod['namespace'], None, pod['owner_kind'],
                    pod['owner_name'], pod['emptydir'], pod['stuck'],
                    pod.get('tolerates_cp', False), pod.get('labels'))


def node_gone(state, name):
    """Drop a deleted node's pods the way the pod GC and controllers do:
    DaemonSet and static pods vanish, ReplicaSet pods are recreated."""
    del state['nodes'][name]
    for pod in pods_on(state, name):
        if pod['owner_kind'] == 'ReplicaSet' and not pod.get('deleting'):
            replace_pod(state, pod, exclude=(name,))
        else:
            state['pods'].remove(pod)
    for pod in state['pods']:
        if pod['node'] is None:
            place(state, pod)


# --- node liveness (the node lifecycle controller) ---------------------
#
# Every host of the site is the same machine, so a node's kubelet is
# alive as long as its VM is: its sshd answers (``node['ssh']``, the
# host:port kubespray connected to; a killed VM is a stopped sshd), and
# nobody stopped the kubelet on purpose (``node['kubelet_stopped']``,
# set by :meth:`mgmt_localsite.Site.stop_kubelet`).  Nodes
# without an sshd on record (a seeded test cluster) are alive.  The
# controller looks at each kubelet at most once per node_monitor_period
# and remembers when it first found it dead (``node['lost']``); the
# node's Ready condition turns Unknown once node_monitor_grace_period has
# passed since then, and True again as soon as the kubelet answers.


def is_ready(node):
    """The node's Ready condition as the controller last set it (a node
    kubeadm reset, ``ready`` False, is NotReady at once)."""
    return node['ready'] and node.get('condition', 'True') == 'True'


def kubelet_dead(node):
    """Whether the controller found the node's kubelet dead: its pods
    cannot finish terminating."""
    return node.get('lost') is not None


def watch_nodes(state, probe, now=None):
    """One pass of the node lifecycle controller over every node.

    :param probe: ``probe(node) -> bool``, whether its kubelet answers.
    :param now: the time (default: now).
    :returns: the names of the nodes whose Ready condition changed.
    """
    now = time.time() if now is None else now
    period = float(setting(state, 'node_monitor_period'))
    grace = float(setting(state, 'node_monitor_grace_period'))
    changed = []
    for node in state['nodes'].values():
        if now - node.get('probed', float('-inf')) >= period:
            node['probed'] = now
            alive = not node.get('kubelet_stopped') and probe(node)
            if alive:
                node['lost'] = None
            elif node.get('lost') is None:
                node['lost'] = now
        lost = node.get('lost')
        condition = ('Unknown' if lost is not None and now - lost >= grace
                     else 'True')
        # Written only when it changes: a node never looked at is Ready
        # (a read-only command must not add the default to it).
        if condition != node.get('condition', 'True'):
            changed.append(node['name'])
            node['condition'] = condition
    _finish_terminations(state)
    return changed


def _finish_terminations(state):
    """A live kubelet ends the pods being deleted on its node."""
    state['pods'] = [p for p in state['pods'] if not (
        p.get('deleting') and not kubelet_dead(
            state['nodes'].get(p['node'], {})))]


def delete_pod(state, pod, grace, now=None):
    """Delete *pod* as the API server does (after an eviction, too).

    The pod is gone at once when its kubelet is alive (the double's
    containers stop in no time), when it is not bound to a node, or when
    *grace* is 0 (a forced deletion).  On a node whose kubelet is dead it
    only gets a deletionTimestamp (now + grace) and stays Terminating
    until the node is deleted or its kubelet returns; deleting it again
    with a shorter grace period brings its deletionTimestamp forward.  A
    ReplicaSet pod is replaced elsewhere at once (terminating pods are
    not counted as the ReplicaSet's), once.

    :param grace: seconds, or a negative number for the pod's own
        terminationGracePeriodSeconds.
    :returns: True when the pod is gone, False when it is terminating.
    """
    now = time.time() if now is None else now
    if grace < 0:
        grace = float(setting(state, 'pod_grace_period'))
    node = state['nodes'].get(pod['node']) if pod['node'] else None
    stays = node is not None and kubelet_dead(node) and grace > 0
    if pod.get('deleting'):
        # Deleted again: a shorter grace period brings it forward.
        if not stays:
            state['pods'].remove(pod)
            return True
        pod['deleting'] = min(pod['deleting'], now + grace)
        return False
    if pod['owner_kind'] == 'ReplicaSet':
        state['pods'].append(place(state, _clone(pod),
                                   exclude=(pod['node'],)))
    if stays:
        pod['deleting'] = now + grace
        return False
    state['pods'].remove(pod)
    return True


# --- PodDisruptionBudgets ----------------------------------------------
#
# Stored as applied (``state['objects']``, kind PodDisruptionBudget); the
# disruption controller's status is computed when asked, from the pods.

PDB_KIND = 'PodDisruptionBudget'
EVICTION_REFUSED = ("Cannot evict pod as it would violate the pod's "
                    "disruption budget.")


def selector_matches(selector, labels):
    """Whether a LabelSelector (``matchLabels``, ``matchExpressions``
    with In, NotIn, Exists, DoesNotExist) selects *labels*; an empty
    selector selects everything, a missing one (None) nothing."""
    if selector is None:
        return False
    for key, value in (selector.get('matchLabels') or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get('matchExpressions') or []:
        key, op = expr.get('key'), expr.get('operator')
        values = expr.get('values') or []
        present = key in labels
        if not {'In': present and labels.get(key) in values,
                'NotIn': not present or labels[key] not in values,
                'Exists': present,
                'DoesNotExist': not present}.get(op, False):
            return False
    return True


def budgets(state):
    """Every PodDisruptionBudget object."""
    return [o for o in state['objects'].values() if o['kind'] == PDB_KIND]


def budgets_of(state, pod):
    """The budgets that select *pod* (same namespace, its labels; a pod
    without labels has none, as the eviction API says)."""
    if not pod.get('labels'):
        return []
    return [b for b in budgets(state)
            if b['metadata'].get('namespace') == pod['namespace'] and
            selector_matches(b.get('spec', {}).get('selector'),
                             pod['labels'])]


def pod_healthy(state, pod):
    """Running, not being deleted, and on a Ready node (the kubelet
    marks a pod Ready; a NotReady node's pods are marked not Ready)."""
    node = state['nodes'].get(pod['node']) if pod['node'] else None
    return (pod['phase'] == 'Running' and not pod.get('deleting') and
            node is not None and is_ready(node))


def _scaled(value, total):
    """An IntOrString of a budget: a number or a percentage of *total*,
    rounded up (the disruption controller's rounding)."""
    if isinstance(value, str) and value.endswith('%'):
        return -(-int(value[:-1] or 0) * total // 100)
    return int(value)


def budget_status(state, budget):
    """The disruption controller's status of *budget*: expectedPods,
    currentHealthy, desiredHealthy, disruptionsAllowed."""
    namespace = budget['metadata'].get('namespace')
    selector = budget.get('spec', {}).get('selector')
    pods = [p for p in state['pods'] if p['namespace'] == namespace and
            not p.get('deleting') and
            selector_matches(selector, p.get('labels') or {})]
    expected = len(pods)
    healthy = sum(1 for p in pods if pod_healthy(state, p))
    spec = budget.get('spec', {})
    if spec.get('maxUnavailable') is not None:
        desired = max(expected - _scaled(spec['maxUnavailable'], expected),
                      0)
    else:
        desired = _scaled(spec.get('minAvailable', 1), expected)
    return {'expectedPods': expected, 'currentHealthy': healthy,
            'desiredHealthy': desired,
            'disruptionsAllowed': max(healthy - desired, 0)}


def eviction_refusal(state, pod):
    """Why the eviction API refuses to evict *pod* now, or None.

    :returns: None, or ``(code, message, cause)``: 429 while a budget
        allows no disruption (the cause names the budget; kubectl
        prints only the message), 500 when several budgets select the
        pod.  A pod being deleted, not Running, or selected by no budget
        is always evictable; an unhealthy pod is when its budget is met
        (unhealthyPodEvictionPolicy IfHealthyBudget, the default) or
        when the budget says AlwaysAllow.
    """
    if pod.get('stuck') and not pod.get('deleting'):
        return 429, EVICTION_REFUSED, 'the test marked the pod stuck'
    if pod.get('deleting') or pod['phase'] != 'Running':
        return None
    found = budgets_of(state, pod)
    if len(found) > 1:
        return 500, ('This pod has more than one PodDisruptionBudget, which '
                     'the eviction subresource does not support.'), None
    if not found:
        return None
    budget = found[0]
    status = budget_status(state, budget)
    if not pod_healthy(state, pod):
        policy = budget.get('spec', {}).get('unhealthyPodEvictionPolicy')
        if policy == 'AlwaysAllow' or (
                status['currentHealthy'] >= status['desiredHealthy'] and
                status['desiredHealthy'] > 0):
            return None
    if status['disruptionsAllowed'] > 0:
        return None
    return 429, EVICTION_REFUSED, (
        'The disruption budget %s needs %d healthy pods and has %d '
        'currently' % (budget['metadata']['name'], status['desiredHealthy'],
                       status['currentHealthy']))


# --- Kubernetes-shaped views -------------------------------------------

def iso(timestamp):
    return time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(timestamp))


def node_object(node):
    ready = 'True' if is_ready(node) else 'Unknown'
    taints = list(node['taints'])
    if node.get('condition') == 'Unknown':
        taints.extend(UNREACHABLE_TAINTS)
    if not node['schedulable']:
        taints.append(UNSCHEDULABLE_TAINT)
    spec = {'podCIDR': node.get('pod_cidr', '10.233.64.0/24')}
    if taints:
        spec['taints'] = taints
    if not node['schedulable']:
        spec['unschedulable'] = True
    return {
        'apiVersion': 'v1', 'kind': 'Node',
        'metadata': {'name': node['name'], 'labels': node['labels'],
                     'creationTimestamp': iso(node['created'])},
        'spec': spec,
        'status': {
            'addresses': [
                {'type': 'InternalIP', 'address': node['address']},
                {'type': 'Hostname', 'address': node['name']}],
            'conditions': [{'type': 'Ready', 'status': ready}],
            'nodeInfo': {'kubeletVersion': node['kubelet_version']}},
    }


def pod_object(pod, healthy=None):
    """The Pod; *healthy* is its Ready condition (default: Running)."""
    meta = {'name': pod['name'], 'namespace': pod['namespace'],
            'creationTimestamp': iso(pod['created'])}
    if pod.get('labels'):
        meta['labels'] = dict(pod['labels'])
    if pod.get('deleting'):
        meta['deletionTimestamp'] = iso(pod['deleting'])
    if pod['owner_kind']:
        meta['ownerReferences'] = [{
            'apiVersion': 'v1' if pod['owner_kind'] == 'Node' else 'apps/v1',
            'kind': pod['owner_kind'], 'name': pod['owner_name'],
            'controller': True}]
    if pod['owner_kind'] == 'Node':
        # A static pod's mirror: kubectl drain (and the driver) know it
        # by this annotation, which the kubelet always sets.
        digest = base64.b16encode(pod['name'].encode()).decode().lower()
        meta['annotations'] = {'kubernetes.io/config.mirror': digest[:32],
                               'kubernetes.io/config.source': 'file'}
    spec = {'containers': [{'name': pod['name'].split('-')[0]}]}
    if pod['node']:
        spec['nodeName'] = pod['node']
    if pod['emptydir']:
        spec['volumes'] = [{'name': 'scratch', 'emptyDir': {}}]
    if healthy is None:
        healthy = pod['phase'] == 'Running'
    return {'apiVersion': 'v1', 'kind': 'Pod', 'metadata': meta,
            'spec': spec, 'status': {'phase': pod['phase'], 'conditions': [
                {'type': 'Ready', 'status': 'True' if healthy else 'False'}]}}


def object_key(kind, namespace, name):
    return '%s/%s/%s' % (kind, namespace or '', name)


def b64(text):
    return base64.b64encode(text.encode()).decode()


def fill_token_secrets(state, now=None):
    """Run the token controller: fill every service-account token Secret
    whose ServiceAccount exists once ``token_delay`` has passed.

    :returns: True if something changed.
    """
    now = time.time() if now is None else now
    changed = False
    for obj in state['objects'].values():
        if _needs_token(state, obj, now):
            obj.setdefault('data', {}).update({
                'token': b64(_jwt_like()),
                'ca.crt': b64(state['cluster']['ca_crt']),
                'namespace': b64(obj['metadata']['namespace'])})
            changed = True
    return changed


def _needs_token(state, obj, now):
    if obj.get('kind') != 'Secret' or obj.get('type') != (
            'kubernetes.io/service-account-token'):
        return False
    if 'token' in obj.get('data', {}):
        return False
    meta = obj['metadata']
    account = meta.get('annotations', {}).get(
        'kubernetes.io/service-account.name')
    if object_key('ServiceAccount', meta['namespace'],
                  account) not in state['objects']:
        return False
    return now >= meta['_applied'] + setting(state, 'token_delay')


def _jwt_like():
    def part(n):
        return base64.urlsafe_b64encode(
            secrets.token_bytes(n)).decode().rstrip('=')
    return 'eyJhbGciOiJSUzI1NiJ9.%s.%s' % (part(96), part(192))
