"""``bin/kubeadm`` and ``bin/crictl``: what the driver runs on a master
to read and renew its certificates, over the double's real X.509 files
(:mod:`pki`).  A test double of the subset the driver uses::

  kubeadm certs check-expiration -o json
  kubeadm certs renew all
  crictl pods --namespace NS --name REGEX -q
  crictl rmp -f POD_ID...

The master is the one the SSH session reached (``SSH_CONNECTION``'s
third field, as ``etcdctl.sh`` finds its member), else
``$KUBE_DOUBLE_NODE``.  ``crictl rmp`` of a control-plane node's static
pods is the restart kubespray's ``k8s-certs-renew.sh`` does: the kubelet
starts them again from their manifests, so they stay in the state; the
restart is logged in ``state['restarts']`` (node, pods, start, end) and
takes the ``static_pod_restart`` setting's seconds, during which that
API server would refuse connections.  Exit 1 with ``error: ...`` on
stderr, as the real tools fail.
"""

import os
import re
import sys
import time

import clusterstate as cs
import pki


class ToolError(Exception):
    pass


def _state_dir():
    default = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           'state')
    return os.environ.get('KUBE_DOUBLE_STATE_DIR', default)


def this_node(state):
    """The name of the node this command runs on."""
    address = (os.environ.get('SSH_CONNECTION') or '').split(' ')
    address = address[2] if len(address) > 2 else None
    for name, node in ((state or {}).get('nodes') or {}).items():
        ssh_host = (node.get('ssh') or '').rsplit(':', 1)[0]
        if address and address in (ssh_host, node.get('address')):
            return name
    name = os.environ.get('KUBE_DOUBLE_NODE')
    if name and name in ((state or {}).get('nodes') or {}):
        return name
    raise ToolError('this host is not a node of the cluster')


def kubeadm(argv, state_dir):
    if argv[:2] == ['certs', 'check-expiration'] and \
            argv[2:] in (['-o', 'json'], ['--output', 'json'],
                         ['--output=json']):
        import json
        node = this_node(cs.read(state_dir))
        return json.dumps(pki.expiration(state_dir, node), indent=2)
    if argv == ['certs', 'renew', 'all']:
        with cs.locked(state_dir):
            node = this_node(cs.read(state_dir))
            names = pki.renew_all(state_dir, node)
        return '\n'.join(['certificate %s renewed' % n for n in names] + [
            '', 'Done renewing certificates. You must restart the '
            'kube-apiserver, kube-controller-manager, kube-scheduler and '
            'etcd, so that they can use the new certificates.'])
    raise ToolError('kubeadm (test double): unsupported: %s' % ' '.join(argv))


def _pods(argv, state_dir):
    namespace, pattern, quiet = None, '', False
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == '--namespace' and args:
            namespace = args.pop(0)
        elif arg == '--name' and args:
            pattern = args.pop(0)
        elif arg == '-q':
            quiet = True
        else:
            raise ToolError('crictl pods: unknown option %s' % arg)
    state = cs.read(state_dir)
    node = this_node(state)
    found = [p['name'] for p in state['pods'] if p['node'] == node and (
        namespace is None or p['namespace'] == namespace) and
        re.search(pattern, p['name'])]
    return '\n'.join(found) if quiet else '\n'.join(
        'POD ID %s' % name for name in found)


def _rmp(argv, state_dir):
    ids = [a for a in argv if a not in ('-f', '--force')]
    if not ids:
        raise ToolError('crictl rmp: ID cannot be empty')
    start = time.time()
    with cs.transaction(state_dir) as txn:
        node = this_node(txn.state)
        delay = float(cs.setting(txn.state, 'static_pod_restart'))
    time.sleep(min(delay, 60.0))
    with cs.transaction(state_dir) as txn:
        known = {p['name']: p for p in txn.state['pods']
                 if p['node'] == node}
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise ToolError('crictl rmp: pod sandbox %s not found'
                            % unknown[0])
        end = time.time()
        for pod_id in ids:
            known[pod_id]['restarted'] = end  # the kubelet starts it again
        txn.state.setdefault('restarts', []).append(
            {'node': node, 'pods': ids, 'start': start, 'end': end})
    return '\n'.join('Removed sandbox %s' % i for i in ids)


def crictl(argv, state_dir):
    if argv[:1] == ['pods']:
        return _pods(argv[1:], state_dir)
    if argv[:1] == ['rmp']:
        return _rmp(argv[1:], state_dir)
    raise ToolError('crictl (test double): unsupported: %s' % ' '.join(argv))


def main(tool, argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        text = {'kubeadm': kubeadm, 'crictl': crictl}[tool](
            list(argv), _state_dir())
    except (ToolError, pki.PkiError, cs.StateError) as exc:
        print('error: %s' % exc, file=sys.stderr)
        return 1
    if text:
        print(text)
    return 0
