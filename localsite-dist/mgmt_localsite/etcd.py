"""Real etcd members for the masters of the local site.

kubespray runs an etcd member on every host of its ``etcd`` group; the
local site runs a real one (Debian's ``etcd-server``/``etcd-client``,
etcd 3.4, the v3 API kubespray's etcd 3.5 speaks for membership) on each
master's loopback address, so that joins, removals, quorum and the
member list the driver reads are etcd's own.  Only what kubespray's etcd
role would download is not reproduced: the binaries are the host's.

Differences from kubespray, on purpose:

* plain ``http`` on loopback, no certificates: the driver's only etcd
  command, ``etcdctl.sh member list -w json`` (``bin/etcdctl.sh`` here),
  is the same either way, and the site has no root to keep keys;
* a VM's ``127.0.0.1:2379`` is its own address here (the masters share
  one machine), so the site's ``etcdctl.sh`` talks to the address the
  SSH session reached;
* etcd's own Raft timers (:data:`HEARTBEAT_MS`, :data:`ELECTION_MS`),
  shorter than kubespray's (250 ms and 5 s): a member serves within
  about a second.

Every member lives in ``<etcd dir>/<address>/`` (``data/``, ``etcd.pid``,
``etcd.log``), ``<etcd dir>`` being the site's ``etcd/``.  The double's
playbooks start and stop members through ``kube-double etcd-*`` on the
host (the site user's processes, in a session of their own, as a
service); the site stops whatever is left by PID (:func:`stop_all`),
checking that the PID is still that member's etcd.

A standard-library module: the site's tools import it as ``etcd``.
"""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

CLIENT_PORT = 2379
PEER_PORT = 2380
#: Raft timers (ms): etcd's defaults.  A new member elects a leader
#: after about one election timeout.  Not shorter: an idle member's CPU
#: grows with its heartbeats (three idle members took 1.8 CPU-s in 30 s
#: at 25 ms, 0.7 at 100 ms, and they idle through whole test modules),
#: and a member that a loaded machine keeps from running for one
#: election timeout makes the others elect a new leader.
HEARTBEAT_MS = 100
ELECTION_MS = 1000
#: Seconds a started member has to become healthy.
START_TIMEOUT = 30.0
#: Seconds one health probe may take.
PROBE_TIMEOUT = 1.0
#: etcdctl's timeouts (what kubespray's etcdctl would wait, shortened).
CTL_TIMEOUTS = ('--dial-timeout=2s', '--command-timeout=5s')
INSTALL_HINT = 'apt-get install etcd-server etcd-client'


class EtcdError(Exception):
    """etcd refused or could not do what was asked; the message says."""


def binary(name):
    """Path of the ``etcd`` or ``etcdctl`` binary (PATH, else /usr/bin)."""
    return shutil.which(name) or '/usr/bin/' + name


def available():
    """Why real etcd cannot run here, or None."""
    missing = [n for n in ('etcd', 'etcdctl')
               if not os.access(binary(n), os.X_OK)]
    if missing:
        return 'no %s binary (%s)' % (' or '.join(missing), INSTALL_HINT)
    return None


# ----------------------------------------------------------------- URLs --

def _host(address):
    return '[%s]' % address if ':' in address else address


def client_url(address):
    return 'http://%s:%d' % (_host(address), CLIENT_PORT)


def peer_url(address):
    return 'http://%s:%d' % (_host(address), PEER_PORT)


def address_of(url):
    """The host of a peer or client URL.

    :raises EtcdError: not an http(s) URL with a host.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ('http', 'https') or not parts.hostname:
        raise EtcdError('not an etcd URL: %r' % url)
    return parts.hostname


# ------------------------------------------------------------- commands --

def paths(etcd_dir, address):
    """``{'dir', 'data', 'pid', 'log'}`` of the member at *address*."""
    base = os.path.join(etcd_dir, address)
    return {'dir': base, 'data': os.path.join(base, 'data'),
            'pid': os.path.join(base, 'etcd.pid'),
            'log': os.path.join(base, 'etcd.log')}


def cluster_token(etcd_dir):
    """The initial cluster token of a site: members of two sites never
    form one cluster, even on the same addresses."""
    digest = hashlib.sha256(os.path.abspath(etcd_dir).encode())
    return 'kube-double-' + digest.hexdigest()[:16]


def server_argv(name, address, data_dir, initial_cluster, state, token):
    """etcd's command line for one member (kubespray's ``etcd.env``,
    over http, listening only on *address*).

    :param initial_cluster: ``[(name, peer URL)]``.
    :param state: ``'new'`` or ``'existing'``.
    """
    if state not in ('new', 'existing'):
        raise ValueError('initial cluster state %r' % state)
    client, peer = client_url(address), peer_url(address)
    return [binary('etcd'), '--name', name, '--data-dir', data_dir,
            '--listen-client-urls', client, '--advertise-client-urls', client,
            '--listen-peer-urls', peer,
            '--initial-advertise-peer-urls', peer,
            '--initial-cluster', ','.join('%s=%s' % m
                                          for m in initial_cluster),
            '--initial-cluster-state', state,
            '--initial-cluster-token', token,
            '--heartbeat-interval', str(HEARTBEAT_MS),
            '--election-timeout', str(ELECTION_MS),
            '--logger', 'zap', '--log-outputs', 'stderr',
            '--log-level', 'warn']


def ctl_argv(endpoints, *args):
    """etcdctl (v3 API) against *endpoints* (client URLs)."""
    return [binary('etcdctl'), '--endpoints=' + ','.join(endpoints),
            *CTL_TIMEOUTS, *args]


def ctl(endpoints, *args):
    """Run etcdctl; the CompletedProcess (text)."""
    return subprocess.run(ctl_argv(endpoints, *args), capture_output=True,
                          text=True, timeout=30, check=False,
                          env=dict(os.environ, ETCDCTL_API='3'))


def member_list(endpoints):
    """``member list -w json``'s members.

    :raises EtcdError: no endpoint answered.
    """
    result = ctl(endpoints, 'member', 'list', '-w', 'json')
    if result.returncode:
        raise EtcdError('etcdctl member list: %s' % _tail(result.stderr))
    return json.loads(result.stdout).get('members') or []


def _tail(text, lines=3):
    return ' | '.join(text.strip().splitlines()[-lines:])[-600:]


def parse_initial_cluster(text):
    """``ETCD_INITIAL_CLUSTER`` of ``etcdctl member add``'s output, as
    ``[(name, peer URL)]``."""
    for line in text.splitlines():
        key, _, value = line.partition('=')
        if key.strip() == 'ETCD_INITIAL_CLUSTER':
            pairs = [p.partition('=') for p in value.strip('" ').split(',')]
            return [(n, u) for n, _, u in pairs if n and u]
    raise EtcdError('no ETCD_INITIAL_CLUSTER in: %s' % _tail(text))


# ------------------------------------------------------------ processes --

def _cmdline(pid):
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            return f.read().decode(errors='replace').split('\0')
    except OSError:
        return []


def _zombie(pid):
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0] == 'Z'
    except OSError:
        return True


def running_pid(etcd_dir, address):
    """PID of the member's etcd if it runs (its PID file names a live
    etcd serving that member's data directory), else None."""
    where = paths(etcd_dir, address)
    try:
        with open(where['pid']) as f:
            pid = int(f.read().strip())
    except (OSError, ValueError):
        return None
    argv = _cmdline(pid)
    if (argv and os.path.basename(argv[0]) == 'etcd'
            and where['data'] in argv and not _zombie(pid)):
        return pid
    return None


def start(etcd_dir, name, address, initial_cluster, state):
    """Start the member at *address* in a session of its own (it
    outlives the SSH command that starts it, as a service); its PID goes
    to the PID file.

    :returns: the PID.
    """
    where = paths(etcd_dir, address)
    os.makedirs(where['dir'], mode=0o700, exist_ok=True)
    argv = server_argv(name, address, where['data'], initial_cluster,
                       state, cluster_token(etcd_dir))
    with open(where['log'], 'ab') as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
    tmp = where['pid'] + '.tmp'
    with open(tmp, 'w') as f:
        f.write('%d\n' % proc.pid)
    os.replace(tmp, where['pid'])
    _wait_exec(proc, where['data'])
    return proc.pid


def _wait_exec(proc, data_dir, timeout=5.0):
    """Wait until the child shows etcd's command line (``/proc`` may
    show an empty one for a moment after Popen returns), so that
    :func:`running_pid` finds it; an etcd that exits at once is left to
    the health wait, which reports its log."""
    deadline = time.monotonic() + timeout
    while data_dir not in _cmdline(proc.pid) and proc.poll() is None:
        if time.monotonic() > deadline:
            break
        time.sleep(0.005)


def _gone(pid, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _cmdline(pid) or _zombie(pid):
            return True
        time.sleep(0.02)
    return False


def stop(etcd_dir, address, sig=signal.SIGTERM, wipe=False, timeout=10.0):
    """Stop the member at *address* (SIGKILL if *sig* does not end it in
    *timeout* s); with *wipe*, delete its data too (a reset, or a VM
    re-created with a fresh disk).

    :returns: whether a process was stopped.
    """
    pid = running_pid(etcd_dir, address)
    if pid is not None:
        for signum in (sig, signal.SIGKILL):
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                break
            if _gone(pid, timeout):
                break
    where = paths(etcd_dir, address)
    for path in (where['pid'],):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    if wipe:
        shutil.rmtree(where['data'], ignore_errors=True)
    return pid is not None


def kill_at(address):
    """A VM's crash: SIGKILL the etcd serving *address* (found by its
    peer URL in ``/proc``, whichever site started it); its data stays,
    as a dead VM's disk does.

    Only a member in this process's network namespace: ``/proc`` shows
    every namespace's processes, and another suite run in a namespace of
    its own serves the same addresses there (two such runs killed each
    other's members).

    :returns: the PIDs killed.
    """
    flag = ['--listen-peer-urls', peer_url(address)]
    here = _netns('self')
    killed = []
    for name in os.listdir('/proc'):
        argv = _cmdline(int(name)) if name.isdigit() else []
        if argv and os.path.basename(argv[0]) == 'etcd' and any(
                argv[i:i + 2] == flag for i in range(len(argv) - 1)) and \
                _netns(name) == here:
            try:
                os.kill(int(name), signal.SIGKILL)
            except ProcessLookupError:
                continue
            killed.append(int(name))
    for pid in killed:
        _gone(pid, 10.0)
    return killed


def _netns(pid):
    """The network namespace of *pid* (``'self'`` too), or None."""
    try:
        return os.readlink('/proc/%s/ns/net' % pid)
    except OSError:
        return None


def addresses(etcd_dir):
    """Addresses that have (or had) a member in *etcd_dir*."""
    try:
        return sorted(os.listdir(etcd_dir))
    except FileNotFoundError:
        return []


def stop_all(etcd_dir, timeout=10.0):
    """Stop every member of a site (its teardown).

    :returns: the addresses whose etcd was stopped.
    """
    return [a for a in addresses(etcd_dir)
            if stop(etcd_dir, a, timeout=timeout)]


def running_endpoints(etcd_dir):
    """Client URLs of the members running in *etcd_dir*."""
    return [client_url(a) for a in addresses(etcd_dir)
            if running_pid(etcd_dir, a) is not None]


# ------------------------------------------------------------- snapshots --

#: What :func:`save` writes beside the members' directories.
SAVED_MEMBERS = 'members.json'


def copy_tree(source, target):
    """Copy *source* to the new *target* with modes and owners (a copy
    as root keeps the site user's files the site user's).

    :raises FileExistsError: *target* exists.
    """
    shutil.copytree(source, target, symlinks=True)
    if os.geteuid() != 0:
        return  # only root can give a file another owner
    for directory, dirs, files in os.walk(source):
        for name in ['.'] + dirs + files:
            path = os.path.normpath(os.path.join(directory, name))
            info = os.lstat(path)
            copy = os.path.join(target, os.path.relpath(path, source))
            os.lchown(copy, info.st_uid, info.st_gid)


def _running_members(etcd_dir):
    """``[{address, argv, uid, gid}]`` of the members running now: what
    starts each again, as the account that runs it."""
    members = []
    for address in addresses(etcd_dir):
        pid = running_pid(etcd_dir, address)
        if pid is not None:
            info = os.stat('/proc/%d' % pid)
            argv = _cmdline(pid)
            if argv and argv[-1] == '':  # /proc ends each argument with NUL
                argv.pop()
            members.append({'address': address, 'argv': argv,
                            'uid': info.st_uid, 'gid': info.st_gid})
    return members


def save(etcd_dir, target):
    """Snapshot the site's etcd as the masters' disks would be: every
    running member stopped (SIGTERM: etcd syncs its log), all of them
    before any is copied, so that no copy is of a live log; every
    member's directory copied into the new *target*; the members started
    again (:func:`restart`).

    Members whose process is not running (a dead VM's disk) are copied
    and stay stopped, here and on :func:`restore`.
    """
    members = _running_members(etcd_dir)
    for member in members:
        stop(etcd_dir, member['address'])
    os.makedirs(target, mode=0o700)
    for address in addresses(etcd_dir):
        copy_tree(paths(etcd_dir, address)['dir'],
                  os.path.join(target, address))
    with open(os.path.join(target, SAVED_MEMBERS), 'w') as f:
        json.dump(members, f)
    restart(etcd_dir, members)


def restore(etcd_dir, source):
    """Put back what :func:`save` wrote to *source*: every member of the
    site stopped, its directory replaced by the saved one (a member the
    snapshot does not have is deleted), the members that ran then
    started again with their own data, IDs and command lines."""
    with open(os.path.join(source, SAVED_MEMBERS)) as f:
        members = json.load(f)
    stop_all(etcd_dir)
    for address in addresses(etcd_dir):
        shutil.rmtree(paths(etcd_dir, address)['dir'])
    for address in os.listdir(source):
        if address != SAVED_MEMBERS:
            copy_tree(os.path.join(source, address),
                      paths(etcd_dir, address)['dir'])
    restart(etcd_dir, members)


def restart(etcd_dir, members):
    """Start *members* (:func:`save`'s records) with their command lines
    as their accounts, then wait until each is healthy (all are started
    first: a member of several needs the others for quorum)."""
    for member in members:
        where = paths(etcd_dir, member['address'])
        with open(where['log'], 'ab') as log:
            proc = subprocess.Popen(
                member['argv'], stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
                close_fds=True, **_as_account(member))
        with open(where['pid'], 'w') as f:
            f.write('%d\n' % proc.pid)
        if os.geteuid() == 0:
            os.chown(where['pid'], member['uid'], member['gid'])
        _wait_exec(proc, where['data'])
    for member in members:
        wait_healthy(etcd_dir, member['address'])


def _as_account(member):
    """Popen arguments that run a member as its account (only root can
    and must switch)."""
    if os.geteuid() != 0 or member['uid'] == 0:
        return {}
    return {'user': member['uid'], 'group': member['gid'],
            'extra_groups': []}


# --------------------------------------------------------------- health --

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def health(address, timeout=PROBE_TIMEOUT):
    """``'healthy'`` (the member serves quorum reads), ``'unhealthy'``
    (it answers, or hangs, without quorum) or ``'down'`` (nothing
    listens)."""
    try:
        with _NO_PROXY.open(client_url(address) + '/health',
                            timeout=timeout) as response:
            body = json.loads(response.read(4096) or b'{}')
    except urllib.error.HTTPError as exc:
        body = _json(exc.read(4096))
    except (ConnectionRefusedError, urllib.error.URLError) as exc:
        reason = getattr(exc, 'reason', exc)
        if isinstance(reason, ConnectionRefusedError):
            return 'down'
        return 'unhealthy'
    except (OSError, ValueError):
        return 'unhealthy'
    return 'healthy' if body.get('health') == 'true' else 'unhealthy'


def _json(data):
    try:
        body = json.loads(data or b'{}')
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def cluster_health(endpoint_addresses):
    """``'healthy'`` if a member serves, ``'absent'`` if none listens.

    :raises EtcdError: members answer but none is healthy (no quorum):
        kubespray's "Wait for etcd cluster to be healthy" fails too.
    """
    seen = {a: health(a) for a in endpoint_addresses}
    if 'healthy' in seen.values():
        return 'healthy'
    if 'unhealthy' in seen.values():
        raise EtcdError('etcd cluster is unhealthy (no quorum?): %s' % ', '
                        .join('%s %s' % item for item in sorted(seen.items())))
    return 'absent'


def wait_healthy(etcd_dir, address, timeout=START_TIMEOUT):
    """Wait until the member at *address* is healthy.

    :raises EtcdError: it exited, or the deadline passed (with the tail
        of its log).
    """
    deadline = time.monotonic() + timeout
    while health(address) != 'healthy':
        if running_pid(etcd_dir, address) is None:
            raise EtcdError('etcd member at %s is not running: %s' % (
                address, log_tail(etcd_dir, address)))
        if time.monotonic() > deadline:
            raise EtcdError('etcd member at %s is not healthy after %gs: %s'
                            % (address, timeout,
                               log_tail(etcd_dir, address)))
        time.sleep(0.05)


def log_tail(etcd_dir, address):
    try:
        with open(paths(etcd_dir, address)['log'], errors='replace') as f:
            return _tail(f.read()[-4000:])
    except OSError:
        return '(no log)'


# ------------------------------------------------------------ membership --

def start_new(etcd_dir, name, address, initial_cluster):
    """kubespray's first start of a new cluster on one of its hosts
    (``ETCD_INITIAL_CLUSTER_STATE=new``, every etcd host in
    ``ETCD_INITIAL_CLUSTER``), then wait until it is healthy: the hosts
    do this in parallel and form quorum together.  A member already
    running is left alone.

    :returns: a message for the run's output.
    """
    if running_pid(etcd_dir, address) is not None:
        return 'etcd member %s running' % name
    start(etcd_dir, name, address, initial_cluster, 'new')
    wait_healthy(etcd_dir, address)
    return 'etcd member %s started (new cluster)' % name


def join(etcd_dir, name, address, endpoints, first_peer_url=None):
    """kubespray's ``join_etcd_member.yml`` on a host of a healthy
    cluster: ``etcdctl member add`` unless the member is there, then
    start it with ``ETCD_INITIAL_CLUSTER_STATE=existing`` and wait until
    it is healthy (the next member add needs it started).

    :param endpoints: client URLs of the cluster.
    :param first_peer_url: the first etcd host's: it must be a member.
    :returns: a message for the run's output.
    :raises EtcdError: what etcd refused, or a conflicting member.
    """
    if running_pid(etcd_dir, address) is not None:
        return 'etcd member %s running' % name
    members = member_list(endpoints)
    peers = {m.get('peerURLs', [''])[0]: m for m in members}
    if first_peer_url and first_peer_url not in peers:
        raise EtcdError(
            'the first host of the etcd group (%s) is not a member of the '
            'existing etcd cluster: kubespray would start a new etcd '
            'cluster there; keep an existing member first' % first_peer_url)
    own = peer_url(address)
    where = paths(etcd_dir, address)
    mine = peers.get(own)
    if mine is None:
        _check_name_free(members, name, own)
        shutil.rmtree(where['data'], ignore_errors=True)
        cluster = parse_initial_cluster(_member_add(endpoints, name, own))
        verb = 'joined'
    elif mine.get('name') not in ('', name):
        raise EtcdError(
            'etcd member add %s: peer URL %s already belongs to member %s '
            '(etcd_member_name changed?)' % (name, own, mine['name']))
    elif mine.get('name') and not os.path.isdir(where['data']):
        # A started member without its data would restart with an
        # empty log under its old ID, which Raft does not allow.
        raise EtcdError(
            'etcd member %s (%s) is in the cluster but its data is gone: '
            'remove the member first' % (name, own))
    else:
        # Added by an earlier run that failed before the start (no name
        # yet), or a member whose process stopped: start it as it is.
        cluster = [(m.get('name') or name, m['peerURLs'][0])
                   for m in members if m.get('peerURLs')]
        verb = 'restarted' if mine.get('name') else 'joined'
    start(etcd_dir, name, address, cluster, 'existing')
    wait_healthy(etcd_dir, address)
    return 'etcd member %s %s' % (name, verb)


def _member_add(endpoints, name, own, timeout=START_TIMEOUT):
    """``etcdctl member add``, retried while etcd refuses it as an
    "unhealthy cluster" (a member added less than 5 s ago is not counted
    yet), as kubespray retries it; its output.

    :raises EtcdError: another refusal, or still refused at *timeout*.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = ctl(endpoints, 'member', 'add', name, '--peer-urls=' + own)
        if result.returncode == 0:
            return result.stdout
        if ('unhealthy cluster' not in result.stderr
                or time.monotonic() > deadline):
            raise EtcdError('etcdctl member add %s: %s' % (
                name, _tail(result.stderr)))
        time.sleep(0.5)


def _check_name_free(members, name, own):
    for member in members:
        if member.get('name') == name:
            raise EtcdError(
                'etcd member add %s (%s): a member of that name exists with '
                'peer URL %s; remove it first' % (
                    name, own, (member.get('peerURLs') or ['?'])[0]))


def member_names(etcd_dir):
    """Names of the site's etcd members as etcd lists them ('' for one
    added but not started); [] when no member runs."""
    endpoints = running_endpoints(etcd_dir)
    if not endpoints:
        return []
    return [m.get('name', '') for m in member_list(endpoints)]
