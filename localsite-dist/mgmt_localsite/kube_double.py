"""``bin/kube-double``: what the kubespray test double runs on its hosts.

The double's playbooks call this (through ``ansible.builtin.command`` on
each targeted host, so every play really connects over SSH) where
kubespray would run ``kubeadm init/join/reset`` and start etcd.  It
changes the shared state in :mod:`clusterstate`; etcd is real
(:mod:`etcd`), and members are removed with the real etcdctl.  It is
a test tool, not a fake of any real command: subcommand names say what
they stand for.

  init         kubeadm init on the first control-plane node (publishes
               ``kube-public/cluster-info`` naming the control-plane
               endpoint)
  join         kubeadm join (``--control-plane`` for control-plane nodes);
               with ``--discovery-server`` (the server of cluster-info)
               it fails, as kubeadm's discovery does, unless that
               endpoint is a live control-plane node or the cluster's
               load balancer
  label        kubespray's node-label and node-taint roles on one node:
               ``node_labels`` set, ``node_taints`` put with --overwrite,
               nothing removed; logged in ``state['labelled']``
  reset        kubeadm reset on one node (kubelet stops: node NotReady;
               once no control-plane node is left running, the cluster
               is gone); with ``--etcd-peer-url``, kubespray's reset of
               etcd too (member stopped, data deleted)
  upgrade      kubeadm upgrade apply (``--apply``, the first control-plane
               node: the cluster's version) or kubeadm upgrade node,
               then the kubelet: the node's version; refuses a skipped
               minor release and a kubelet newer than the control plane,
               and logs the step in ``state['upgrades']`` (version,
               whether the node was cordoned and emptied, its batch)
  etcd-health  kubespray's etcd cluster health check: healthy, absent
               (nothing listens) or an error (members without quorum)
  etcd-member  this host's real etcd member (see etcd.py): a new
               cluster's (``--new``), or ``etcdctl member add`` to the
               running one, then started as kubespray's service; returns
               once the member is healthy
  etcd-stop    kubespray's reset of etcd alone
  status       what exists (JSON), for the playbooks' checks

init and join of a control-plane node write its PKI (real X.509 files,
:mod:`pki`); reset deletes it.
  check-fail   the failure-injection hook (see README.rst)

Exit status 1 with ``error: ...`` on stderr when the cluster would refuse.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import clusterstate as cs
import etcd
import pki


def _state_dir():
    # The modules sit at the site root, next to bin/ and state/.
    default = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           'state')
    return os.environ.get('KUBE_DOUBLE_STATE_DIR', default)


def _json_arg(option, text, kind, default):
    try:
        value = json.loads(text or default)
    except ValueError:
        value = None
    if not isinstance(value, kind):
        raise cs.StateError('%s wants JSON %s, not %r' % (
            option, 'an object' if kind is dict else 'a list', text))
    return value


def _labels(text):
    labels = _json_arg('--labels', text, dict, '{}')
    return {str(k): str(v) for k, v in labels.items()}


def _taints(text):
    """kubespray's ``node_taints`` (``key=value:Effect`` strings) as
    node taints; ``kubectl taint`` refuses anything else."""
    result = []
    for spec in _json_arg('--taints', text, list, '[]'):
        taint = cs.parse_taint(str(spec))
        if taint is None or not taint['effect']:
            raise cs.StateError('kubectl taint: invalid taint spec: %s'
                                % spec)
        result.append(taint)
    return result


def _ca_pem():
    """A real self-signed CA certificate when openssl is there (the
    driver hands it to Tacker as ``ssl_ca_cert``), else a placeholder."""
    openssl = shutil.which('openssl')
    if openssl:
        with tempfile.TemporaryDirectory() as tmp:
            crt = os.path.join(tmp, 'ca.crt')
            result = subprocess.run(
                [openssl, 'req', '-x509', '-newkey', 'ec', '-pkeyopt',
                 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '3650',
                 '-subj', '/CN=kubernetes', '-keyout',
                 os.path.join(tmp, 'ca.key'), '-out', crt],
                capture_output=True, check=False)
            if result.returncode == 0:
                with open(crt) as f:
                    return f.read()
    return ('-----BEGIN CERTIFICATE-----\n%s\n-----END CERTIFICATE-----\n'
            % cs.b64('kubespray test double CA %s' % cs.suffix(12)))


def _node(args, roles):
    labels = {'kubernetes.io/hostname': args.node,
              'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64'}
    taints = []
    if 'control-plane' in roles:
        labels[cs.CP_ROLE_LABEL] = ''
        labels['node.kubernetes.io/exclude-from-external-load-balancers'] = ''
        if 'worker' not in roles:
            # kubespray keeps the control-plane taint unless the host is
            # in kube_node too.
            taints.append(dict(cs.CP_TAINT))
    return {'name': args.node, 'host': args.host or args.node,
            'address': args.address, 'roles': roles,
            'labels': labels, 'taints': taints, 'schedulable': True,
            'ready': True, 'created': time.time(),
            'kubelet_version': args.kube_version, 'ssh': args.ssh}


def _system_pods(state, node):
    name = node['name']
    pods = [cs.make_pod('%s-%s' % (ds, cs.suffix()), 'kube-system', name,
                        'DaemonSet', ds) for ds in cs.DAEMONSETS]
    if 'control-plane' in node['roles']:
        pods += [cs.make_pod('%s-%s' % (sp, name), 'kube-system', name,
                             'Node', name) for sp in cs.STATIC_PODS]
    state['pods'].extend(pods)


def _add_node(state, args, roles, init=False):
    node = _node(args, roles)
    old = state['nodes'].get(args.node)
    if old:
        # kubeadm join on a joined node: kubespray skips it.  Reset nodes
        # rejoin (kubelet starts again).
        old['ready'] = True
        return 'node %s already joined' % args.node
    state['nodes'][args.node] = node
    _system_pods(state, node)
    if 'control-plane' in roles:
        # kubeadm writes the node's /etc/kubernetes/pki (real X.509).
        pki.install(_state_dir(), args.node,
                    int(cs.setting(state, 'cert_days')), init)
    for pod in state['pods']:
        if pod['node'] is None:
            cs.place(state, pod)
    return 'node %s joined as %s' % (args.node, ','.join(roles))


def _roles(args):
    roles = []
    if getattr(args, 'control_plane', True):
        roles.append('control-plane')
    if args.worker:
        roles.append('worker')
    return roles


def cmd_init(args, txn):
    state = txn.state
    if cs.running(state):
        node = state['nodes'].get(args.node)
        if node is None or 'control-plane' not in node['roles']:
            raise cs.StateError(
                'kubeadm init on %s would create a second cluster: a '
                'cluster already exists and %s is not one of its '
                'control-plane nodes (the first host of kube_control_plane '
                'must be an existing control-plane node; append new ones '
                'at the end)' % (args.node, args.node))
        return _add_node(state, args, node['roles'], init=True)
    state = txn.state = cs.init_cluster(
        state or cs.empty_state(), args.cluster_name, args.kube_version,
        _ca_pem())
    cs.set_cluster_info(state, args.control_plane_endpoint or '%s:%d' % (
        args.address, cs.APISERVER_PORT))
    message = _add_node(state, args, _roles(args), init=True)
    for name, replicas in cs.DEPLOYMENTS:
        for _ in range(replicas):
            state['pods'].append(cs.make_pod(
                '%s-%s' % (name, cs.suffix()), 'kube-system', args.node,
                'ReplicaSet', name, tolerates_cp=True))
    return 'cluster %s initialised; %s' % (args.cluster_name, message)


def cmd_join(args, txn):
    if not cs.running(txn.state):
        raise cs.StateError(
            'couldn\'t validate the identity of the API Server: no cluster '
            'is running (kubeadm join before kubeadm init)')
    node = txn.state['nodes'].get(args.node)
    if args.existing_control_plane and (
            node is None or 'control-plane' not in node['roles']):
        raise cs.StateError(
            '%s is in kube_control_plane but is not a control-plane node of '
            'the cluster: scale.yml cannot add control-plane nodes, use '
            'cluster.yml' % args.node)
    if args.existing_control_plane:
        return 'control-plane node %s already joined' % args.node
    if node is None and args.discovery_server:
        _check_discovery(txn.state, args.discovery_server,
                         args.load_balancer)
    return _add_node(txn.state, args, _roles(args))


def _answers(endpoint, timeout=3.0):
    """Whether something accepts TCP connections at ``host:port``."""
    host, port = cs.split_endpoint(endpoint)
    try:
        socket.create_connection((host, port), timeout).close()
        return True
    except (OSError, TypeError, ValueError):
        return False


def _check_discovery(state, server, load_balancer):
    """kubeadm join's discovery: the cluster-info server must answer.

    The server is the load balancer (``loadbalancer_apiserver`` of this
    run, which must accept connections) or a control-plane node, whose
    VM must be alive (its sshd answers: every host of the site is the
    same machine, so the VM's sshd is what dies with it).  Anything else
    (a removed node, an old load balancer address) answers nothing.
    """
    host, port = cs.split_endpoint(server)
    port = port or 443
    refused = cs.StateError(
        'couldn\'t validate the identity of the API Server: Get "%s/api/v1/'
        'namespaces/kube-public/configmaps/cluster-info?timeout=10s": dial '
        'tcp %s: connect: connection refused (the server of the '
        'kube-public/cluster-info ConfigMap)' % (server, server.split(
            '://', 1)[-1]))
    if load_balancer and (host, port) == cs.split_endpoint(load_balancer):
        if not _answers(load_balancer):
            raise refused
        return
    for node in state['nodes'].values():
        if 'control-plane' in node['roles'] and node['address'] == host \
                and port == cs.APISERVER_PORT:
            if node.get('ssh') and not _answers(node['ssh']):
                raise refused
            return
    raise refused


def cmd_reset(args, txn):
    state = txn.state
    if not cs.running(state) or args.node not in state['nodes']:
        return 'node %s reset (not part of a cluster)' % args.node
    state['nodes'][args.node]['ready'] = False
    pki.remove(_state_dir(), args.node)  # kubeadm reset deletes the PKI
    running = [n for n in state['nodes'].values()
               if 'control-plane' in n['roles'] and n['ready']]
    if not running:
        txn.state = None
        return 'node %s reset; no control plane left: cluster gone' % (
            args.node)
    return 'node %s reset' % args.node


def cmd_label(args, txn):
    """kubespray's node-label and node-taint roles for one node, as
    ``kubectl label node N KEY=VALUE --overwrite=true`` per label and
    ``kubectl taint node N TAINT... --overwrite=true``: the keys given
    get their value, a taint of the same key and effect is replaced, and
    nothing else is removed.  Logged in ``state['labelled']``."""
    state = txn.state
    node = state['nodes'].get(args.node) if cs.running(state) else None
    if node is None:
        raise cs.StateError('nodes "%s" not found (kubectl label)'
                            % args.node)
    labels, taints = _labels(args.labels), _taints(args.taints)
    node['labels'].update(labels)
    cs.put_taints(node, taints)
    state.setdefault('labelled', []).append({
        'node': args.node, 'host': args.host, 'playbook': args.during,
        'labels': labels, 'taints': [cs.taint_text(t) for t in taints],
        'time': time.time()})
    return 'node %s: %d label(s), %d taint(s) applied' % (
        args.node, len(labels), len(taints))


def _minor(version):
    return tuple(int(p) for p in version.lstrip('v').split('.')[:2])


def cmd_upgrade(args, txn):
    state = txn.state
    node = state['nodes'].get(args.node) if cs.running(state) else None
    if node is None:
        raise cs.StateError('kubeadm upgrade: node %s is not part of the '
                            'cluster' % args.node)
    cluster, new = state['cluster'], args.kube_version
    if args.apply:
        if _minor(new) > (_minor(cluster['kube_version'])[0],
                          _minor(cluster['kube_version'])[1] + 1):
            raise cs.StateError(
                'kubeadm upgrade apply: specified version to upgrade to %s '
                'is too high; kubeadm can upgrade only 1 minor version at a '
                'time (cluster at %s)' % (new, cluster['kube_version']))
        cluster['kube_version'] = new
    elif _minor(new) > _minor(cluster['kube_version']):
        raise cs.StateError(
            'kubeadm upgrade node: the kubelet of %s (%s) would be newer '
            'than the control plane (%s): upgrade the first control-plane '
            'node first' % (args.node, new, cluster['kube_version']))
    old = node['kubelet_version']
    state.setdefault('upgrades', []).append({
        'node': args.node, 'from': old, 'to': new,
        'started': getattr(args, 'started', None), 'time': time.time(),
        'cordoned': not node['schedulable'],
        'workload_pods': [p['name'] for p in cs.pods_on(state, args.node)
                          if p['owner_kind'] not in ('DaemonSet', 'Node')],
        'batch': json.loads(args.batch or '[]')})
    node['kubelet_version'] = new
    return 'node %s upgraded from %s to %s' % (args.node, old, new)


def _upgrade_pause(state_dir):
    """``settings.upgrade_delay``: how long one node's upgrade takes,
    outside the state's lock (kubectl keeps working meanwhile)."""
    state = cs.read(state_dir)
    if cs.running(state):
        time.sleep(min(float(cs.setting(state, 'upgrade_delay')), 60.0))


def _etcd_cluster(text):
    """``--cluster NAME=PEER_URL,...``: ``[(name, peer URL)]``."""
    pairs = [p.partition('=') for p in (text or '').split(',') if p]
    if not pairs or not all(n and u for n, _, u in pairs):
        raise cs.StateError('--cluster: expected NAME=PEER_URL,... not %r'
                            % text)
    return [(n, u) for n, _, u in pairs]


def etcd_health(args):
    """kubespray's "Check if etcd cluster is healthy" (run once)."""
    cluster = _etcd_cluster(args.cluster)
    return etcd.cluster_health([etcd.address_of(u) for _, u in cluster])


def etcd_member(args):
    """This host's member: started with a new cluster (``--new``), or
    joined to the running one (``etcdctl member add``, then started)."""
    address = etcd.address_of(args.peer_url)
    if args.new:
        return etcd.start_new(args.etcd_dir, args.name, address,
                              _etcd_cluster(args.cluster))
    endpoints = [etcd.client_url(etcd.address_of(u))
                 for _, u in _etcd_cluster(args.cluster)]
    return etcd.join(args.etcd_dir, args.name, address, endpoints,
                     args.first_peer_url)


def etcd_stop(args):
    """kubespray's reset: the etcd service stopped, its data deleted."""
    address = etcd.address_of(args.peer_url)
    stopped = etcd.stop(args.etcd_dir, address, wipe=True)
    return 'etcd at %s %s' % (address, 'stopped' if stopped
                              else 'not running')


def cmd_status(args, txn):
    state = txn.state or cs.empty_state()
    nodes = state['nodes'].values()
    return json.dumps({
        'exists': cs.running(state),
        'control_plane_hosts': sorted(n['host'] for n in nodes
                                      if 'control-plane' in n['roles']),
        'nodes': sorted(n['name'] for n in nodes)})


def _take(state_dir, prefix, playbook, wanted=lambda text: True):
    """The text of ``<prefix><playbook>``, consumed if *wanted* accepts
    it; None when there is none (or it is left for another host)."""
    path = os.path.join(state_dir, prefix + playbook)
    with cs.locked(state_dir):  # parallel hosts: only one consumes it
        try:
            with open(path) as f:
                text = f.read().strip()
        except FileNotFoundError:
            return None
        if not wanted(text):
            return None
        os.unlink(path)
        return text


#: Longest pause of :func:`pause_if_asked` (seconds).
MAX_PAUSE = 600.0


def check_fail(state_dir, playbook, host):
    """Consume ``fail-next-<playbook>`` if it targets *host*.

    :returns: the failure message, or None.
    """
    if _take(state_dir, cs.FAIL_PREFIX, playbook,
             lambda target: not target or target == host) is None:
        return None
    return ('injected failure (kubespray test double): %s%s on %s'
            % (cs.FAIL_PREFIX, playbook, host))


def pause_if_asked(state_dir, playbook):
    """Consume ``slow-next-<playbook>`` and sleep the seconds it holds:
    the run lasts long enough for a test to cut or kill something.

    ``hold`` instead of seconds: wait while ``held-<playbook>`` exists
    (at most :data:`MAX_PAUSE`), so that a test releases the run when
    it has done what needed the run still going, not after a guess.
    """
    text = _take(state_dir, cs.SLOW_PREFIX, playbook) or ''
    if text == cs.HOLD:
        held = os.path.join(state_dir, cs.HELD_PREFIX + playbook)
        end = time.monotonic() + MAX_PAUSE
        while os.path.exists(held) and time.monotonic() < end:
            time.sleep(0.05)
        return
    seconds = float(text) if text.replace('.', '', 1).isdigit() else 0.0
    time.sleep(min(seconds, MAX_PAUSE))


def _node_command(sub, name):
    """A subcommand about one node: ``--node`` and ``--host``."""
    p = sub.add_parser(name)
    p.add_argument('--node', required=True, help='Kubernetes node name')
    p.add_argument('--host', help='inventory host name')
    return p


def _parser():
    parser = argparse.ArgumentParser(prog='kube-double')
    sub = parser.add_subparsers(dest='command', required=True)
    for name in ('init', 'join'):
        p = _node_command(sub, name)
        p.add_argument('--address', required=True)
        p.add_argument('--worker', action='store_true')
        p.add_argument('--kube-version', default=cs.DEFAULT_KUBE_VERSION)
        p.add_argument('--playbook', help='consult the failure hook')
        p.add_argument('--ssh', help='host:port of the VM\'s sshd')
        if name == 'init':
            p.add_argument('--cluster-name', default='cluster.local')
            p.add_argument('--control-plane-endpoint',
                           help='host:port (default: --address:6443)')
        else:
            p.add_argument('--discovery-server',
                           help='server of kube-public/cluster-info')
            p.add_argument('--load-balancer',
                           help='host:port of loadbalancer_apiserver')
            p.add_argument('--control-plane', action='store_true')
            p.add_argument('--existing-control-plane', action='store_true',
                           help='only check that it is one already')
    p = _node_command(sub, 'upgrade')
    p.add_argument('--kube-version', required=True)
    p.add_argument('--apply', action='store_true',
                   help='kubeadm upgrade apply (first control-plane node)')
    p.add_argument('--batch', help='the hosts of the play batch, JSON')
    p.add_argument('--playbook', help='consult the failure hook')
    p = _node_command(sub, 'label')
    p.add_argument('--labels', help='node_labels, a JSON object')
    p.add_argument('--taints', help='node_taints, a JSON list')
    p.add_argument('--during', help='the playbook, for the log')
    p = _node_command(sub, 'reset')
    p.add_argument('--playbook', help='consult the failure hook')
    p.add_argument('--etcd-peer-url',
                   help='an etcd host: stop its member, delete its data')
    p.add_argument('--etcd-dir')
    for name in ETCD_COMMANDS:
        p = sub.add_parser(name)
        p.add_argument('--etcd-dir', required=True)
        p.add_argument('--peer-url', required=name != 'etcd-health')
        if name in ('etcd-health', 'etcd-member'):
            p.add_argument('--cluster', required=True,
                           help='the etcd hosts: NAME=PEER_URL,...')
    p = sub.choices['etcd-member']
    p.add_argument('--name', required=True)
    p.add_argument('--new', action='store_true',
                   help='no cluster answers: start a new one')
    p.add_argument('--first-peer-url')
    sub.add_parser('status')
    p = sub.add_parser('check-fail')
    p.add_argument('--playbook', required=True)
    p.add_argument('--host', required=True)
    return parser


COMMANDS = {'init': cmd_init, 'join': cmd_join, 'reset': cmd_reset,
            'upgrade': cmd_upgrade, 'label': cmd_label,
            'status': cmd_status}
#: Real etcd (localsite-dist/mgmt_localsite/etcd.py): outside the state's lock,
#: since a member may take seconds to become healthy.
ETCD_COMMANDS = {'etcd-health': etcd_health, 'etcd-member': etcd_member,
                 'etcd-stop': etcd_stop}


def main(argv=None):
    args = _parser().parse_args(argv)
    state_dir = _state_dir()
    try:
        playbook = getattr(args, 'playbook', None)
        if playbook:
            pause_if_asked(state_dir, playbook)
            message = check_fail(state_dir, playbook, args.host or args.node)
            if message:
                raise cs.StateError(message)
        if args.command == 'upgrade':
            args.started = time.time()
            _upgrade_pause(state_dir)
        if args.command in ETCD_COMMANDS:
            print(ETCD_COMMANDS[args.command](args))
        elif args.command != 'check-fail':
            with cs.transaction(state_dir) as txn:
                print(COMMANDS[args.command](args, txn))
            if args.command == 'reset' and args.etcd_peer_url:
                # kubespray's reset also stops etcd and deletes its data.
                args.peer_url = args.etcd_peer_url
                print(etcd_stop(args))
    except (cs.StateError, etcd.EtcdError, pki.PkiError) as exc:
        print('error: %s' % exc, file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
