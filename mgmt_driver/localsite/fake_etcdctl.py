"""``bin/etcdctl``: a fake etcdctl over the kubespray double's state.

A test double, not an etcd client.  It answers the one command the
driver uses, ``member list`` (``-w``/``--write-out`` ``json``, ``table``
or the default ``simple``), with etcdctl v3's output shape, from the
etcd members the double's playbooks recorded (:mod:`clusterstate`).
Client flags kubespray's ``etcdctl.sh`` wrapper passes (``--endpoints``,
``--cacert``, ``--cert``, ``--key``) are accepted and ignored.  With no
member (no etcd yet) it fails as etcdctl does when nothing answers.
"""

import json
import os
import sys
import zlib

import clusterstate as cs

_IGNORED = ('--endpoints', '--cacert', '--cert', '--key',
            '--command-timeout', '--dial-timeout')
NO_ETCD = ('{"level":"warn","msg":"retrying of unary invoker failed"}\n'
           'Error: context deadline exceeded')


def _state_dir():
    default = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           'state')
    return os.environ.get('KUBE_DOUBLE_STATE_DIR', default)


def member_id(member):
    """A stable uint64 member ID (etcd's are random at member add)."""
    text = member.get('id') or member['peer_url']
    return zlib.crc32(text.encode()) << 32 | zlib.crc32(
        member['name'].encode())


def client_url(peer_url):
    """The member's client URL: kubespray serves clients on 2379."""
    return peer_url.rsplit(':', 1)[0] + ':2379'


def member_list(members):
    """etcdctl's ``member list -w json`` document."""
    ids = [member_id(m) for m in members]
    return {'header': {'cluster_id': zlib.crc32(b'cluster.local'),
                       'member_id': ids[0], 'raft_term': 2},
            'members': [{'ID': i, 'name': m['name'],
                         'peerURLs': [m['peer_url']],
                         'clientURLs': [client_url(m['peer_url'])]}
                        for i, m in zip(ids, members, strict=True)]}


def _simple(members):
    return '\n'.join('%x, started, %s, %s, %s, false' % (
        member_id(m), m['name'], m['peer_url'], client_url(m['peer_url']))
        for m in members)


def _parse(argv):
    """``(positional, output format)``; raises ValueError on misuse."""
    positional, output = [], 'simple'
    args = iter(argv)
    for arg in args:
        name, _, value = arg.partition('=')
        if name in ('-w', '--write-out'):
            output = value or next(args, '')
        elif name in _IGNORED:
            if not value:
                next(args, None)
        elif arg.startswith('-'):
            raise ValueError('unknown flag: %s' % arg)
        else:
            positional.append(arg)
    if positional != ['member', 'list'] or output not in (
            'json', 'simple', 'table'):
        raise ValueError('only "member list [-w json|simple|table]" is '
                         'supported by this double')
    return positional, output


def main(argv=None):
    """Run one etcdctl command line; the exit status."""
    try:
        _, output = _parse(sys.argv[1:] if argv is None else argv)
    except ValueError as exc:
        print('Error: %s' % exc, file=sys.stderr)
        return 1
    state = cs.read(_state_dir())
    members = state['etcd'] if state else []
    if not members:
        print(NO_ETCD, file=sys.stderr)
        return 1
    if output == 'json':
        print(json.dumps(member_list(members)))
    else:
        print(_simple(members))
    return 0
