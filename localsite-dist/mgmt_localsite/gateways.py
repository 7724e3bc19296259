"""Highly available gateways in network namespaces, for tests and benchmarks.

:class:`GatewayLab` builds, as root, a small network that exists only in
network namespaces it creates itself: a LAN namespace holding a bridge,
the client address and the backends (a control-plane node's API server,
a worker's NodePort: :class:`~mgmt_localsite.haproxy.NameServer`
sockets opened inside that namespace), and one namespace per gateway,
joined to the bridge by a veth pair.  Every address is in TEST-NET-1
(192.0.2.0/24) and lives inside those namespaces, so nothing on the host
changes and no packet leaves them.

Each gateway runs a real HAProxy and a real keepalived, configured by the
driver's own code (:func:`mgmt_driver.remote.keepalived.apply_gateway`) through
:class:`NetnsConnection`: the ``ssh.Connection`` interface whose commands
run under ``ip netns exec``.  Its reload commands are small scripts that
reload the program if it runs and start it otherwise, as
``systemctl reload-or-restart`` does on a gateway VM.

:meth:`GatewayLab.close` stops every process inside the namespaces by
PID (``ip netns pids``) and deletes the namespaces.
"""

import concurrent.futures
import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import time

from mgmt_driver.model import core
from mgmt_driver.remote import keepalived
from mgmt_driver.remote import loadbalancer
from mgmt_localsite import haproxy as site_haproxy

KEEPALIVED = shutil.which('keepalived') or '/usr/sbin/keepalived'
IP = shutil.which('ip') or '/usr/sbin/ip'

NETWORK_PREFIX = 24
CLIENT_ADDRESS = '192.0.2.1'
MASTER_ADDRESS = '192.0.2.21'
WORKER_ADDRESS = '192.0.2.31'
VIP = '192.0.2.100'
APISERVER_PORT = 6443
NODEPORT = 30080
NODEPORT_RANGE = (30080, 30089)
ROUTER_ID = 42
PASSWORD = 'Lab:ha1'
BRIDGE_MAC = '02:00:00:00:02:01'  # locally administered

_CLONE_NEWNET = 0x40000000

_RELOAD_HAPROXY = '''#!/bin/sh
# Reload HAProxy (master-worker) if it runs here, else start it.
pid=$(cat "$1/haproxy.pid" 2>/dev/null || true)
if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    exec kill -USR2 "$pid"
fi
exec %(haproxy)s -W -D -p "$1/haproxy.pid" -f "$1/haproxy.cfg"
'''
_RELOAD_KEEPALIVED = '''#!/bin/sh
# Reload keepalived if it runs here, else start it (VRRP only, in the
# background, logging to a file: no syslog in a namespace).
pid=$(cat "$1/keepalived.pid" 2>/dev/null || true)
if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    exec kill -HUP "$pid"
fi
%(keepalived)s -n -l -P -D -f "$1/keepalived.conf" -p "$1/keepalived.pid" \\
    -r "$1/vrrp.pid" </dev/null >>"$1/keepalived.log" 2>&1 &
'''
_STOP_KEEPALIVED = '''#!/bin/sh
# Stop keepalived as "systemctl stop" does: SIGTERM, wait until it ends.
pid=$(cat "$1/keepalived.pid" 2>/dev/null || true)
[ -n "$pid" ] || exit 0
kill -TERM "$pid" 2>/dev/null || exit 0
for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || exit 0
    sleep 0.1
done
exit 1
'''


def available():
    """Why the lab cannot run here, or None if it can."""
    for path in (site_haproxy.HAPROXY, KEEPALIVED, IP):
        if not os.access(path, os.X_OK):
            return '%s not found (tools/host-packages installs it)' % path
    if os.geteuid() != 0:
        return 'network namespaces need root'
    return None


def ip(*args, check=True):
    """``ip ARGS...``; the CompletedProcess."""
    proc = subprocess.run([IP, *args], capture_output=True, text=True,
                          timeout=30)
    if check and proc.returncode:
        raise RuntimeError('ip %s: %s' % (' '.join(args), proc.stderr))
    return proc


def in_netns(name, *argv, check=True):
    """Run *argv* inside namespace *name*; the CompletedProcess."""
    return ip('netns', 'exec', name, *argv, check=check)


class NetnsConnection(site_haproxy.LocalConnection):
    """:class:`LocalConnection` whose commands run in namespace *netns*.

    Files are the host's (the gateway's directory), commands see the
    namespace's interfaces and addresses.
    """

    def __init__(self, netns, host):
        super().__init__()
        self.netns = netns
        self.host = host

    def run(self, command, timeout=None, check=True, env=None, stdin=None,
            on_line=None, keep_tail=False):
        return super().run([IP, 'netns', 'exec', self.netns, *command],
                           timeout=timeout, check=check, stdin=stdin)


def _enter(netns):
    """Move the calling thread into namespace *netns* (setns(2))."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open('/run/netns/%s' % netns, os.O_RDONLY)
    try:
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), 'setns %s' % netns)
    finally:
        os.close(fd)


class Gateway:
    """One gateway: its namespace, its files and its connection."""

    def __init__(self, lab, name, address):
        self.name = name
        self.address = address
        self.netns = '%s-%s' % (lab.prefix, name)
        self.veth = ('v%s-%s' % (lab.tag, name))[:15]
        self.dir = os.path.join(lab.work_dir, name)
        self.conn = NetnsConnection(self.netns, name)

    def settings(self):
        """HAProxy's and keepalived's ApplySettings for this gateway."""
        haproxy = loadbalancer.ApplySettings(
            config_path=os.path.join(self.dir, 'haproxy.cfg'),
            reload_command=('sh', os.path.join(self.dir, 'reload-haproxy'),
                            self.dir))
        return haproxy, keepalived.apply_settings(
            haproxy, config_path=os.path.join(self.dir, 'keepalived.conf'),
            reload_command=('sh', os.path.join(self.dir,
                                               'reload-keepalived'),
                            self.dir))

    def stop_command(self):
        """What stops keepalived here (``systemctl stop`` on a VM)."""
        return ('sh', os.path.join(self.dir, 'stop-keepalived'), self.dir)

    def pid(self, program):
        """The main PID of *program* ('haproxy' or 'keepalived'), or None."""
        with contextlib.suppress(OSError, ValueError):
            with open(os.path.join(self.dir, program + '.pid')) as f:
                return int(f.read().split()[0])
        return None

    def has_vip(self):
        """True while the VIP is on this gateway's interface."""
        out = in_netns(self.netns, IP, '-o', 'addr', 'show', 'dev', 'eth0',
                       check=False).stdout
        return ' %s/' % VIP in out


class GatewayLab:
    """The LAN namespace, the backends and the gateways.

    :param work_dir: a directory for the gateways' files.
    :param tag: a short word making names unique to this run.
    """

    def __init__(self, work_dir, tag):
        self.work_dir = work_dir
        self.tag = tag
        self.prefix = 'kmgmt-%s' % tag
        self.lan = '%s-lan' % self.prefix
        self.gateways = {}
        self._namespaces = []
        self._backends = site_haproxy.Backends()
        self._executor = None

    # Building.

    def start(self):
        """The LAN namespace, its bridge, addresses and backends."""
        self._add_netns(self.lan)
        in_netns(self.lan, IP, 'link', 'set', 'lo', 'up')
        # A fixed MAC: a bridge without one takes its ports' lowest, so
        # losing a gateway's veth would change the backends' MAC under
        # the other gateways' ARP caches.
        in_netns(self.lan, IP, 'link', 'add', 'br0', 'address',
                 BRIDGE_MAC, 'type', 'bridge')
        for address in (CLIENT_ADDRESS, MASTER_ADDRESS, WORKER_ADDRESS):
            in_netns(self.lan, IP, 'addr', 'add', '%s/%d' % (
                address, NETWORK_PREFIX), 'dev', 'br0')
        in_netns(self.lan, IP, 'link', 'set', 'br0', 'up')
        # One thread lives in the LAN namespace: sockets made there (the
        # backends' and the client's) belong to it.
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, initializer=_enter, initargs=(self.lan,))
        self.inside(self._backends.add, 'master-1', MASTER_ADDRESS,
                    [APISERVER_PORT])
        self.inside(self._backends.add, 'worker-1', WORKER_ADDRESS,
                    [NODEPORT])

    def inside(self, func, *args):
        """``func(*args)`` on the LAN namespace's thread; its result."""
        return self._executor.submit(func, *args).result()

    def _add_netns(self, name):
        ip('netns', 'add', name)
        self._namespaces.append(name)

    def add_gateway(self, name, address):
        """A gateway namespace on the bridge, with nothing running yet."""
        gateway = Gateway(self, name, address)
        os.makedirs(gateway.dir, mode=0o700, exist_ok=True)
        for script, text in (('reload-haproxy', _RELOAD_HAPROXY),
                             ('reload-keepalived', _RELOAD_KEEPALIVED),
                             ('stop-keepalived', _STOP_KEEPALIVED)):
            with open(os.path.join(gateway.dir, script), 'w') as f:
                f.write(text % {'haproxy': site_haproxy.HAPROXY,
                                'keepalived': KEEPALIVED})
        self._add_netns(gateway.netns)
        ip('netns', 'exec', self.lan, IP, 'link', 'add', gateway.veth,
           'type', 'veth', 'peer', 'name', 'eth0', 'netns', gateway.netns)
        in_netns(self.lan, IP, 'link', 'set', gateway.veth, 'master', 'br0')
        in_netns(self.lan, IP, 'link', 'set', gateway.veth, 'up')
        for argv in (('link', 'set', 'lo', 'up'),
                     ('addr', 'add', '%s/%d' % (address, NETWORK_PREFIX),
                      'dev', 'eth0'),
                     ('link', 'set', 'eth0', 'up')):
            in_netns(gateway.netns, IP, *argv)
        self.gateways[name] = gateway
        return gateway

    def haproxy_text(self):
        """HAProxy's file for every gateway: the lab's master and worker."""
        layout = loadbalancer.LbLayout(
            control_plane=[('master-1', MASTER_ADDRESS)],
            workers=[('worker-1', WORKER_ADDRESS)],
            nodeport_range=NODEPORT_RANGE, user=None, group=None,
            chroot=None, connect_timeout=1, maxconn=1000)
        return loadbalancer.render_haproxy_config(layout)

    def spec(self):
        """The ``external_lb_param`` of the lab: the VIP and its group."""
        return core.ExternalLbSpec(
            None, None, None, None, vip=VIP, vrrp_router_id=ROUTER_ID,
            vrrp_password=PASSWORD)

    def configure(self, names=None):
        """The driver's gateway steps on every gateway of the lab (or on
        those called *names*: the ones staying after a scale-in).

        Each gateway's interface is found on the gateway itself, every
        gateway gets the same HAProxy file and its keepalived file, each
        checked before its swap (:func:`keepalived.update_gateways`, as
        the driver calls it).

        :returns: ``{name: (haproxy changed, keepalived changed)}``.
        """
        gateways = [g for g in self.gateways.values()
                    if names is None or g.name in names]
        settings = {g.name: g.settings() for g in gateways}
        return keepalived.update_gateways(
            {g.name: g.conn for g in gateways},
            [(g.name, g.address) for g in gateways], self.haproxy_text(),
            self.spec(), {n: s[0] for n, s in settings.items()},
            {n: s[1] for n, s in settings.items()}, '127.0.0.1')

    def holders(self):
        """Names of the gateways that hold the VIP now."""
        return [g.name for g in self.gateways.values() if g.has_vip()]

    def served(self):
        """The API and the NodePort through the VIP, asked from the LAN:
        ``(api greeting, nodeport greeting)``, None where nothing answered.
        """
        return (self.inside(site_haproxy.reachable, VIP,
                            loadbalancer.DEFAULT_API_PORT),
                self.inside(site_haproxy.reachable, VIP, NODEPORT))

    def seconds_until_served(self, since, timeout=60):
        """Seconds from *since* (``time.monotonic()``) until both the API
        and the NodePort answer through the VIP."""
        site_haproxy.wait_for(lambda: all(self.served()), timeout,
                              interval=0.05, what='the VIP to serve')
        return time.monotonic() - since

    # Stopping.

    def leave(self, name):
        """keepalived stopped on a leaving gateway by the driver's own
        step (:func:`keepalived.stop`), as a scale-in does before Heat
        deletes the VM."""
        gateway = self.gateways[name]
        keepalived.stop(gateway.conn, gateway.settings()[1],
                        command=gateway.stop_command())

    def stop_haproxy(self, name):
        """SIGTERM to a gateway's HAProxy master; waits for it to end."""
        gateway = self.gateways[name]
        self._signal_and_wait([gateway.pid('haproxy')], signal.SIGTERM)

    def destroy(self, name):
        """Lose a gateway as a VM dies: SIGKILL its processes, delete its
        namespace (its veth goes with it) and its files."""
        gateway = self.gateways.pop(name)
        self._kill_namespace(gateway.netns, signal.SIGKILL)
        # A rebuilt VM starts from an empty disk.
        shutil.rmtree(gateway.dir, ignore_errors=True)

    def _pids_in(self, netns):
        out = ip('netns', 'pids', netns, check=False).stdout
        return [int(p) for p in out.split() if p.isdigit()]

    def _kill_namespace(self, netns, sig):
        pids = self._pids_in(netns)
        if sig == signal.SIGKILL:
            # Freeze them all first: keepalived's VRRP process gets a
            # SIGTERM when its parent dies (and would then say goodbye
            # with a priority-0 advert, which a crashed VM never sends).
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
        self._signal_and_wait(pids, sig)
        self._signal_and_wait(self._pids_in(netns), signal.SIGKILL)
        ip('netns', 'del', netns, check=False)
        if netns in self._namespaces:
            self._namespaces.remove(netns)

    @staticmethod
    def _signal_and_wait(pids, sig, timeout=10):
        pids = [p for p in pids if p]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if _alive(p)]
            time.sleep(0.05)
        return not pids

    def close(self):
        """Stop every process in the namespaces (by PID) and delete them."""
        for name in list(self.gateways):
            gateway = self.gateways.pop(name)
            self._kill_namespace(gateway.netns, signal.SIGTERM)
        if self._executor is not None:
            with contextlib.suppress(Exception):
                self.inside(self._backends.stop)
            self._executor.shutdown(wait=True)
            self._executor = None
        for netns in list(self._namespaces):
            self._kill_namespace(netns, signal.SIGTERM)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie child of this process is gone for the network's sake.
    with contextlib.suppress(OSError):
        with open('/proc/%d/stat' % pid) as f:
            if f.read().rsplit(')', 1)[1].split()[0] == 'Z':
                return False
    return True
