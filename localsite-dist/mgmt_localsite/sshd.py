"""A real OpenSSH ``sshd`` on loopback addresses, for functional tests.

:class:`Sshd` writes its own host key, client keys and ``sshd_config`` in
a fresh directory, listens on one free port of one or more 127.0.0.x
addresses and stops in :meth:`Sshd.stop`, leaving nothing running.
Every session (a command, a shell, SFTP) starts in a home directory of
that sshd (:meth:`Sshd.home`, ``HOME`` too), never in the account's
passwd home: every test sshd of the machine logs in the same account,
and what the driver keeps under ``~`` (playbook slots, Ansible control
sockets, kubeconfigs) must not be shared by two tests running at once.
Run as root (as CI does), it logs in a dedicated test user with a random
password and with keys; as another user it can only log that user in with
a key, so password tests skip.
"""

import getpass
import os
import pathlib
import pwd
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from mgmt_localsite import procs

SSHD = shutil.which('sshd') or '/usr/sbin/sshd'
SSH_KEYGEN = shutil.which('ssh-keygen') or '/usr/bin/ssh-keygen'
TEST_USER = 'kmgmt-test'
#: sshd's own limit of listening sockets (MAX_LISTEN_SOCKS) per process.
MAX_LISTEN_ADDRESSES = 16


_SFTP_SERVERS = ('/usr/lib/openssh/sftp-server',
                 '/usr/libexec/openssh/sftp-server',
                 '/usr/libexec/sftp-server', '/usr/lib/ssh/sftp-server')


def sftp_server():
    """The path of OpenSSH's ``sftp-server`` binary, or None."""
    return next((p for p in _SFTP_SERVERS if os.access(p, os.X_OK)), None)


def available():
    """Why the site cannot run here, or None if it can."""
    for tool in (SSHD, SSH_KEYGEN):
        if not os.access(tool, os.X_OK):
            return '%s not found (apt-get install openssh-server)' % tool
    if not sftp_server():
        return 'no sftp-server binary (apt-get install openssh-sftp-server)'
    return None


def free_port(address='127.0.0.1'):
    with socket.socket() as sock:
        sock.bind((address, 0))
        return sock.getsockname()[1]


def _keygen(path, key_type='ed25519', passphrase=''):
    subprocess.run([SSH_KEYGEN, '-q', '-t', key_type, '-N', passphrase,
                    '-C', 'kmgmt-test', '-f', path], check=True)


#: Where the test user's password is kept (root only), so that several
#: test processes on one machine agree on it instead of resetting it.
PASSWORD_FILE = '/var/lib/kmgmt-test/password'


def _shared_password():
    """The test user's password, and whether this call chose it.

    Written whole under a temporary name and linked into place, so that
    a test process starting at the same moment (CI runs two suites side
    by side) reads a complete password or makes its own attempt fail.
    """
    directory = os.path.dirname(PASSWORD_FILE)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    password = 'pw-' + secrets.token_hex(8)
    fd, temporary = tempfile.mkstemp(dir=directory)
    try:
        with os.fdopen(fd, 'w') as f:
            f.write(password)
        os.link(temporary, PASSWORD_FILE)
    except FileExistsError:
        with open(PASSWORD_FILE) as f:
            return f.read().strip(), False
    finally:
        os.unlink(temporary)
    return password, True


def _user_exists(name):
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def _ensure_test_user():
    password, new = _shared_password()
    try:
        pwd.getpwnam(TEST_USER)
    except KeyError:
        added = subprocess.run(['useradd', '-m', '-s', '/bin/sh', TEST_USER],
                               capture_output=True, text=True)
        # Another test process may have added it in the meantime.
        if added.returncode != 0 and not _user_exists(TEST_USER):
            raise RuntimeError('useradd %s failed: %s'
                               % (TEST_USER, added.stderr.strip()))
        new = True
    if new:
        subprocess.run(['chpasswd'], input='%s:%s' % (TEST_USER, password),
                       text=True, check=True)
    return password


#: sshd's ``ForceCommand``: sshd itself would start a session in the
#: passwd home whatever ``HOME`` says (``SetEnv HOME`` alone parts the
#: relative paths of commands from SFTP's), so the session moves there
#: before it runs the command, the shell or the SFTP server (a
#: subsystem's command reaches a forced command as the original one).
_SESSION_SCRIPT = '''#!/bin/sh
# A test sshd: each SSH session runs in a home directory of that sshd.
HOME=%(homes)s/$(id -un)
export HOME
mkdir -p -m 0700 "$HOME" && cd "$HOME" || exit 1
[ -n "${SSH_ORIGINAL_COMMAND+set}" ] || exec /bin/sh -l
exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"
'''


class Sshd:
    """One sshd process serving *addresses* on one port.

    :param addresses: loopback addresses to listen on.
    """

    def __init__(self, addresses=('127.0.0.2',)):
        self.addresses = tuple(addresses)
        self.root = tempfile.mkdtemp(prefix='kmgmt-sshd-')
        os.chmod(self.root, 0o755)
        self.port = free_port(self.addresses[0])
        self.is_root = os.geteuid() == 0
        if self.is_root:
            self.user = TEST_USER
            self.password = _ensure_test_user()
        else:
            self.user = getpass.getuser()
            self.password = None
        self.scratch = self._path('scratch')
        os.mkdir(self.scratch)
        os.chmod(self.scratch, 0o1777)
        self._make_homes()
        self.client_key = self._path('id_ed25519')
        #: Where the client keys are (the driver's ``ssh_key_dirs``).
        self.key_dir = self.root
        _keygen(self.client_key)
        self.passphrase = 'pass-' + secrets.token_hex(6)
        self.encrypted_key = self._path('id_rsa_enc')
        _keygen(self.encrypted_key, 'rsa', self.passphrase)
        self._write_authorized_keys()
        self.host_key = self._path('ssh_host_ed25519_key')
        _keygen(self.host_key)
        self.log = self._path('sshd.log')
        self._procs = []

    def _path(self, name):
        return os.path.join(self.root, name)

    def _make_homes(self):
        """The accounts' homes on this sshd and the session script that
        starts every session in its account's home."""
        self.homes = self._path('home')
        os.mkdir(self.homes)
        os.chmod(self.homes, 0o1777)
        home = self.home()
        os.mkdir(home, 0o700)
        if self.is_root:
            entry = pwd.getpwnam(self.user)
            os.chown(home, entry.pw_uid, entry.pw_gid)
        self.session_script = self._path('session')
        with open(self.session_script, 'w') as f:
            f.write(_SESSION_SCRIPT % {'homes': shlex.quote(self.homes)})
        os.chmod(self.session_script, 0o755)

    def home(self, user=None):
        """The home on this sshd of *user* (default: :attr:`user`), where
        its sessions start and its ``HOME`` points (removed with the
        sshd's files by :meth:`cleanup`).

        :param user: an account this sshd logs in.
        :returns: a :class:`pathlib.Path`.
        """
        return pathlib.Path(self.homes) / (user or self.user)

    def _write_authorized_keys(self):
        lines = []
        for key in (self.client_key, self.encrypted_key):
            with open(key + '.pub') as f:
                lines.append(f.read().strip())
        path = self._path('authorized_keys')
        with open(path, 'w') as f:
            f.write('\n'.join(lines) + '\n')
        os.chmod(path, 0o644)

    def _config(self, addresses, index):
        """``sshd_config`` text of the process listening on *addresses*."""
        listen = ''.join('ListenAddress %s:%d\n' % (addr, self.port)
                         for addr in addresses)
        return (
            listen +
            'HostKey %s\n' % self.host_key +
            'PidFile %s\n' % self._path('sshd.%d.pid' % index) +
            'AuthorizedKeysFile %s\n' % self._path('authorized_keys') +
            'PasswordAuthentication %s\n' % (
                'yes' if self.is_root else 'no') +
            'KbdInteractiveAuthentication no\n'
            'PubkeyAuthentication yes\n'
            'UsePAM no\n'
            'StrictModes no\n'
            'PermitRootLogin no\n'
            'AllowUsers %s\n' % self.user +
            'MaxSessions 100\n'
            'MaxStartups 200\n'
            'LogLevel VERBOSE\n'
            # A binary instead of internal-sftp, which ForceCommand
            # replaces.
            'Subsystem sftp %s\n' % sftp_server() +
            'ForceCommand %s\n' % self.session_script)

    def _chunks(self):
        step = MAX_LISTEN_ADDRESSES
        return [self.addresses[i:i + step]
                for i in range(0, len(self.addresses), step)]

    def start(self, timeout=15):
        """Start sshd and wait until every address accepts connections.

        sshd listens on at most 16 sockets, so more addresses take more
        processes (same port, same keys).  Starting a running sshd does
        nothing (a retry callback may call this more than once).
        """
        if self._procs and all(p.poll() is None for p in self._procs):
            return self
        self.stop()
        if self.is_root:
            os.makedirs('/run/sshd', mode=0o755, exist_ok=True)
        deadline = time.monotonic() + timeout
        try:
            for index, chunk in enumerate(self._chunks()):
                config = self._path('sshd_config.%d' % index)
                with open(config, 'w') as f:
                    f.write(self._config(chunk, index))
                proc = subprocess.Popen(
                    [SSHD, '-D', '-f', config, '-E', self.log],
                    stdin=subprocess.DEVNULL, cwd=self.root)
                self._procs.append(proc)
                for address in chunk:
                    self._wait_listening(proc, address, deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_listening(self, proc, address, deadline):
        while True:
            if proc.poll() is not None:
                raise RuntimeError('sshd exited: %s' % self.read_log())
            try:
                socket.create_connection((address, self.port), 1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError('sshd is not listening on %s:%d'
                                       % (address, self.port))
                time.sleep(0.05)

    def stop(self):
        """Stop sshd (and the sessions it forked)."""
        for proc in self._procs:
            proc.send_signal(signal.SIGTERM)
        for proc in self._procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._procs = []

    def new_host_key(self):
        """Replace the host key and restart: a "re-created VM"."""
        self.stop()
        os.unlink(self.host_key)
        os.unlink(self.host_key + '.pub')
        _keygen(self.host_key)
        self.start()

    def read_log(self):
        try:
            with open(self.log) as f:
                return f.read()
        except FileNotFoundError:
            return ''

    def accepted_logins(self):
        """How many logins sshd accepted so far (from its log)."""
        return len(re.findall(r'Accepted (?:publickey|password) for ',
                              self.read_log()))

    def cleanup(self):
        """Stop sshd and every session it forked, then remove its files.

        The sessions go too: an SSH master connection that a client keeps
        open (``ControlPersist``, 30 min in kubespray's ansible.cfg and
        the double's) would otherwise keep its session, and itself,
        running long after the site is gone.
        """
        sessions = procs.descendants(p.pid for p in self._procs)
        self.stop()
        # The control masters: daemons of their own, no sshd descendants.
        for pid in sessions + procs.with_marker(self.root):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)
