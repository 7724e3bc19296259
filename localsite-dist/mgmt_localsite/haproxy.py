"""A real HAProxy on loopback with tiny TCP backends, for tests and benchmarks.

:class:`NameServer` listens on one ``(address, port)`` and greets every
connection with ``"<name>:<port>\\n"``, then echoes lines, so a client
learns which backend (and which port) HAProxy picked and can check that an
established connection still carries data.  :class:`HAProxyProcesses`
starts ``haproxy`` processes and always stops them.  Everything binds to
127.0.0.0/8 (and ::1) only.
"""

import contextlib
import os
import random
import shutil
import signal
import socket
import socketserver
import subprocess
import threading
import time

from mgmt_driver.common import exceptions
from mgmt_driver.remote import connection
from mgmt_driver.remote import ssh

HAPROXY = shutil.which('haproxy') or '/usr/sbin/haproxy'

#: Ports tried for tests: below Linux's ephemeral range (32768-60999),
#: where clients' own ports never land.
PORT_LOW, PORT_HIGH = 12000, 32000


def available():
    """Why HAProxy tests cannot run here, or None if they can."""
    if not os.access(HAPROXY, os.X_OK):
        return '%s not found (apt-get install haproxy)' % HAPROXY
    return None


def ipv6_loopback():
    """True if ::1 can be bound here."""
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(('::1', 0))
        return True
    except OSError:
        return False


def _family(address):
    return socket.AF_INET6 if ':' in address else socket.AF_INET


def _bindable(address, port):
    with socket.socket(_family(address)) as sock:
        try:
            sock.bind((address, port))
        except OSError:
            return False
    return True


def free_ports(count, addresses, attempts=500):
    """*count* consecutive ports free on every one of *addresses*.

    :returns: the list of ports.
    """
    rng = random.Random()
    for _ in range(attempts):
        base = rng.randrange(PORT_LOW, PORT_HIGH - count)
        ports = list(range(base, base + count))
        if all(_bindable(a, p) for a in addresses for p in ports):
            return ports
    raise RuntimeError('no %d consecutive free ports on %s'
                       % (count, addresses))


class _Handler(socketserver.StreamRequestHandler):
    def handle(self):
        server = self.server
        try:
            self.wfile.write(b'%s:%d\n' % (server.node_name.encode(),
                                           server.server_address[1]))
            for line in self.rfile:
                self.wfile.write(line)
        except OSError:
            pass  # health checks connect and hang up at once


class NameServer(socketserver.ThreadingTCPServer):
    """A backend on ``(address, port)`` that says its name."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, name, address, port):
        self.address_family = _family(address)
        self.node_name = name
        super().__init__((address, port), _Handler)
        self._thread = threading.Thread(target=self.serve_forever,
                                        kwargs={'poll_interval': 0.05},
                                        daemon=True)
        self._thread.start()

    def stop(self):
        self.shutdown()
        self.server_close()
        self._thread.join(5)


class Backends:
    """A set of NameServers, stopped together."""

    def __init__(self):
        self.servers = []

    def add(self, name, address, ports):
        for port in ports:
            self.servers.append(NameServer(name, address, port))

    def stop(self, name=None):
        """Stop every server (or those of node *name*)."""
        for server in [s for s in self.servers
                       if name is None or s.node_name == name]:
            server.stop()
            self.servers.remove(server)


def ask(address, port, timeout=5.0):
    """Connect through HAProxy; the greeting ``(name, port)`` it got."""
    with socket.create_connection((address, port), timeout=timeout) as sock:
        return _greeting(sock)


def _greeting(sock):
    data = b''
    while not data.endswith(b'\n'):
        chunk = sock.recv(256)
        if not chunk:
            raise ConnectionError('closed before the greeting: %r' % data)
        data += chunk
    name, port = data.decode().strip().rsplit(':', 1)
    return name, int(port)


class Session:
    """One connection kept open across reloads."""

    def __init__(self, address, port, timeout=5.0):
        self.sock = socket.create_connection((address, port),
                                             timeout=timeout)
        self.name, self.port = _greeting(self.sock)

    def echo(self, text):
        self.sock.sendall(text.encode() + b'\n')
        data = b''
        while not data.endswith(b'\n'):
            chunk = self.sock.recv(256)
            if not chunk:
                raise ConnectionError('connection closed')
            data += chunk
        return data.decode().rstrip('\n')

    def close(self):
        self.sock.close()


def wait_for(predicate, timeout, interval=0.02, what='condition'):
    """Poll *predicate* until it is true; its last value.

    :raises TimeoutError: naming *what* after *timeout* seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError('timed out after %ss waiting for %s'
                               % (timeout, what))
        time.sleep(interval)


def reachable(address, port):
    """The greeting through *port*, or None if nothing answers yet."""
    try:
        return ask(address, port, timeout=1.0)
    except OSError:
        return None


def listening_sockets(pid):
    """How many TCP listening sockets process *pid* holds (0 if gone)."""
    inodes = set()
    fd_dir = '/proc/%d/fd' % pid
    with contextlib.suppress(OSError):
        for fd in os.listdir(fd_dir):
            with contextlib.suppress(OSError):
                target = os.readlink(os.path.join(fd_dir, fd))
                if target.startswith('socket:['):
                    inodes.add(target[8:-1])
    count = 0
    for table in ('/proc/net/tcp', '/proc/net/tcp6'):
        with contextlib.suppress(OSError), open(table) as f:
            next(f)
            for line in f:
                fields = line.split()
                if fields[3] == '0A' and fields[9] in inodes:  # LISTEN
                    count += 1
    return count


class HAProxyProcesses:
    """HAProxy processes started here, all stopped by :meth:`stop_all`.

    :param log_dir: where each process's output goes.
    """

    def __init__(self, log_dir):
        self.log_dir = log_dir
        self.procs = []

    def start(self, config, *extra):
        """``haproxy -db -f CONFIG EXTRA...`` in the foreground.

        :param extra: more arguments, e.g. ``'-sf', str(old_pid)`` or
            ``'-W'`` for master-worker mode.
        """
        log = open(os.path.join(self.log_dir, 'haproxy-%d.log'
                                % len(self.procs)), 'wb')
        try:
            proc = subprocess.Popen(
                [HAPROXY, '-db', '-f', str(config), *extra],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        finally:
            log.close()
        self.procs.append(proc)
        return proc

    def logs(self):
        text = []
        for i in range(len(self.procs)):
            path = os.path.join(self.log_dir, 'haproxy-%d.log' % i)
            with open(path, errors='replace') as f:
                text.append('--- haproxy-%d ---\n%s' % (i, f.read()))
        return '\n'.join(text)

    def stop_all(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def check_config(path):
    """``haproxy -c -f PATH``; the CompletedProcess."""
    return subprocess.run([HAPROXY, '-c', '-f', str(path)],
                          capture_output=True, text=True, timeout=60)


class LocalConnection(connection.Connection):
    """The connection interface (:mod:`mgmt_driver.remote.connection`) on this
    machine, without SSH.

    Lets :func:`mgmt_driver.remote.loadbalancer.apply_config` drive a real
    HAProxy in tests; argv lists only, no shell.
    """

    host = 'localhost'

    def __init__(self):
        self.commands = []

    def run(self, command, timeout=None, check=True, env=None, stdin=None,
            on_line=None, keep_tail=False):
        argv = [str(arg) for arg in command]
        self.commands.append(argv)
        proc = subprocess.run(argv, capture_output=True, text=True,
                              input=stdin, timeout=timeout or 60)
        result = ssh.CommandResult(self.host, ssh.display_command(argv),
                                   proc.stdout, proc.stderr,
                                   proc.returncode)
        if check and result.failed:
            raise exceptions.RemoteCommandFailed(result)
        return result

    def read_file(self, path, missing_ok=False):
        try:
            with open(path, encoding='utf-8') as f:
                return f.read()
        except FileNotFoundError:
            if missing_ok:
                return None
            raise

    def write_file(self, path, content, mode=0o600):
        with open(path, 'w', encoding='utf-8') as f:
            f.write(content)
        os.chmod(path, mode)

    def close(self):
        pass
