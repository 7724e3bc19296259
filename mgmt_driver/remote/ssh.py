"""SSH access to the Ansible server, the cluster nodes and the LB VM.

The only module that imports paramiko.  A :class:`Connection` opens lazily,
retries with backoff while a VM boots, reuses one transport for every
command and file transfer, and closes in a ``with`` block.  Commands are
argv lists (quoted here) or shell strings built by this package from
quoted parts; :meth:`Connection.run` returns a :class:`CommandResult` and
raises the errors of :mod:`mgmt_driver.common.exceptions`.  SSH, SFTP and
socket errors are translated here and nowhere else.
"""

import codecs
import dataclasses
import importlib
import io
import math
import os
import posixpath
import select
import shlex
import socket
import threading
import time
import uuid

from mgmt_driver.common import conf as kconf
from mgmt_driver.common import deadline as deadlines
from mgmt_driver.common import exceptions
from mgmt_driver.common import runtime
from mgmt_driver.common import safetext
from mgmt_driver.remote import connection
from mgmt_driver.remote import escalation
from mgmt_driver.state import sharedfiles

LOG = safetext.logger(__name__)


class _Deferred:
    """A module imported on the first use of one of its attributes.

    paramiko (with invoke, which it imports when installed) costs about
    0.1 s of CPU to import: a process that opens no connection (a v2
    hook with nothing to do, most ``kubespray-mgmt`` commands) does not
    pay it.  The import statement's lock makes a first use from two
    threads at once safe.
    """

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        return getattr(importlib.import_module(self._name), attr)


paramiko = _Deferred('paramiko')

#: Exit code of coreutils ``timeout`` when it had to stop the command.
REMOTE_TIMEOUT_EXIT = 124


def quote(value):
    """Quote one value for a POSIX shell (``shlex.quote`` of ``str``)."""
    return shlex.quote(str(value))


def display_command(command, env=None):
    """The shell form of *command* (argv list or string) with its *env*.

    :param command: a list of arguments, each quoted, or a shell string
        that the caller built from quoted parts.
    :param env: optional mapping of environment variables, set with
        ``env NAME=VALUE`` in front of the command.  Never put a secret
        here: it would be visible in the remote process list.
    """
    text = command if isinstance(command, str) else shlex.join(
        [str(arg) for arg in command])
    if env:
        assignments = ' '.join(
            quote('%s=%s' % (name, value))
            for name, value in sorted(env.items()))
        if isinstance(command, str):
            text = 'env %s sh -c %s' % (assignments, quote(text))
        else:
            text = 'env %s %s' % (assignments, text)
    return text


@dataclasses.dataclass(frozen=True)
class Credentials:
    """How to log in to a host.  Secrets are left out of ``repr``.

    :param username: the login user.
    :param password: a password, or None.
    :param key_file: a private key file on this host, or None.
    :param key_text: the private key itself (PEM/OpenSSH text), or None.
    :param key_passphrase: passphrase of the private key, or None.
    :param sudo_password: what sudo asks on the host, or None: an argv
        run as ``sudo -n ...`` gets it (:mod:`mgmt_driver.remote.escalation`).
    """

    username: str
    password: str | None = dataclasses.field(default=None, repr=False)
    key_file: str | None = None
    key_text: str | None = dataclasses.field(default=None, repr=False)
    key_passphrase: str | None = dataclasses.field(default=None, repr=False)
    sudo_password: str | None = dataclasses.field(default=None, repr=False)


def credentials_for(login):
    """The :class:`Credentials` of a request's *login* (a
    :class:`mgmt_driver.model.core.Login`): its key text when the request
    carries one, else its key file."""
    key = {'key_text': login.key_text} if login.key_text else \
        {'key_file': login.key_file}
    return Credentials(username=login.username, password=login.password,
                       sudo_password=login.sudo_password, **key)


@dataclasses.dataclass(frozen=True)
class CommandResult:
    """What one remote command did.

    :param host: the host it ran on.
    :param command: its shell form (see :func:`display_command`).
    :param stdout: standard output, decoded as UTF-8.
    :param stderr: standard error, decoded as UTF-8.
    :param exit_code: its exit status; -1 when it never finished.
    """

    host: str
    command: str
    stdout: str
    stderr: str
    exit_code: int

    @property
    def ok(self):
        return self.exit_code == 0

    @property
    def failed(self):
        return not self.ok

    def tail(self, lines=20):
        """The last *lines* lines of stderr, or of stdout if stderr is empty.

        Each line is clipped and escaped (:func:`safetext.clip_lines`):
        the output comes from a host that may be hostile, and the tail
        ends up in messages and logs.

        :returns: the lines joined by newlines ('' if there was no output).
        """
        text = self.stderr if self.stderr.strip() else self.stdout
        return safetext.clip_lines(text, lines)

    def __repr__(self):
        return '<CommandResult %s %r exit=%s>' % (
            self.host, self.command[:60], self.exit_code)


@dataclasses.dataclass(frozen=True)
class SSHSettings:
    """Connection policy; :meth:`from_conf` reads ``[kubespray_mgmt]``."""

    connect_timeout: float = 10
    connect_retries: int = 10
    retry_initial_delay: float = 1.0
    retry_max_delay: float = 15.0
    command_timeout: float = 600
    host_key_policy: str = 'accept-new'
    known_hosts_file: str = '~/.kubespray-mgmt/known_hosts'
    #: Seconds the local side waits past a command's timeout for the
    #: remote ``timeout`` wrapper to report before giving up on its own.
    timeout_grace: float = 10.0
    #: Bytes kept of each output stream of one command (see
    #: :meth:`Connection.run`), of a playbook's output tail, of one line
    #: passed to ``on_line``, and of a file read back.
    max_output: int = 16 * 1024 * 1024
    max_tail_output: int = 2 * 1024 * 1024
    max_line: int = 64 * 1024
    max_file_size: int = 4 * 1024 * 1024
    #: A connection whose connect failed (retries spent) fails again at
    #: once instead of trying anew: a read-only command's parts do not
    #: each pay the retries of a host that is down.
    connect_once: bool = False
    #: Seconds one SFTP exchange waits for the server's answer.
    sftp_timeout: float = 120

    @classmethod
    def from_conf(cls, conf=None):
        """Build settings from an ``oslo_config`` object (default global).

        :param conf: a ``ConfigOpts`` with the ``[kubespray_mgmt]`` group.
        """
        group = (conf or kconf.CONF).kubespray_mgmt
        return cls(connect_timeout=group.ssh_connect_timeout,
                   connect_retries=group.ssh_connect_retries,
                   retry_initial_delay=group.ssh_retry_initial_delay,
                   retry_max_delay=group.ssh_retry_max_delay,
                   command_timeout=group.ssh_command_timeout,
                   host_key_policy=group.host_key_policy,
                   known_hosts_file=group.known_hosts_file,
                   max_output=group.max_command_output,
                   max_tail_output=group.max_playbook_output,
                   max_line=group.max_output_line,
                   max_file_size=group.max_remote_file_size,
                   sftp_timeout=group.sftp_timeout)


class Stats:
    """Thread-safe counters of connections, commands and transfers per host.

    Tests and benchmarks read :meth:`snapshot`; the driver never relies
    on it.
    """

    KINDS = ('connections', 'commands', 'transfers')

    def __init__(self):
        self._lock = threading.Lock()
        self._counts = {}

    def record(self, host, kind):
        with self._lock:
            per_host = self._counts.setdefault(
                host, dict.fromkeys(self.KINDS, 0))
            per_host[kind] += 1

    def snapshot(self):
        """:returns: ``{host: {'connections': n, 'commands': n, ...}}``."""
        with self._lock:
            return {host: dict(counts)
                    for host, counts in self._counts.items()}

    def total(self, kind):
        with self._lock:
            return sum(counts[kind] for counts in self._counts.values())


def _fingerprint(key):
    return key.fingerprint


# Host key algorithms that can carry a key of a given type.
_KEY_ALGORITHMS = {
    'ssh-rsa': ('rsa-sha2-512', 'rsa-sha2-256', 'ssh-rsa'),
}


class KnownHosts:
    """The driver's own known_hosts file and its host key policy.

    The file is read afresh for every check; a change re-reads it and
    rewrites it atomically (mode 0600) under a lock that holds across
    threads and processes (:func:`mgmt_driver.state.sharedfiles.locked`), so
    several conductor workers can record and forget keys at once.

    :param path: file path; ``~`` is expanded.
    :param policy: ``reject``, ``accept-new`` or ``warn``; or
        ``read-only``: ``accept-new`` for a command that must record
        nothing (``status``, ``logs``), which rejects as ``reject`` does
        and says why
        (:class:`~mgmt_driver.common.exceptions.HostKeyNotRecorded`).
    """

    POLICIES = ('reject', 'accept-new', 'warn', 'read-only')

    def __init__(self, path, policy='accept-new'):
        if policy not in self.POLICIES:
            raise ValueError('host key policy %r is not one of %s'
                             % (policy, ', '.join(self.POLICIES)))
        self.path = os.path.expanduser(path)
        self.policy = policy

    @staticmethod
    def entry(host, port):
        """The known_hosts name of *host*:*port*, as OpenSSH writes it."""
        return host if int(port) == 22 else '[%s]:%d' % (host, int(port))

    def _load(self):
        keys = paramiko.HostKeys()
        if os.path.exists(self.path):
            keys.load(self.path)
        return keys

    def _save(self, keys):
        self._write((host, key) for host, entry in keys.items()
                    for key in entry.values())

    def _write(self, pairs):
        sharedfiles.replace(self.path, ''.join(
            '%s %s\n' % (host, key_line(key)) for host, key in pairs))

    def known_key_types(self, host, port):
        """Key types recorded for *host*:*port* (to prefer in negotiation)."""
        # No lock: the file is always replaced whole.
        found = self._load().lookup(self.entry(host, port))
        return list(found.keys()) if found else []

    def check(self, host, port, key):
        """Check *key* against the file and apply the policy.

        Records nothing: under ``accept-new`` an unknown key is recorded
        by :meth:`record` once the login succeeded, so a login that fails
        leaves no key behind, and the instance whose login recorded a
        key knows that it did (see :mod:`mgmt_driver.state.records`).

        :returns: True if *key* is unknown and the policy wants it
            recorded after the login.
        :raises HostKeyChanged: a different key is recorded for the host.
        :raises HostKeyUnknown: the key is unknown and the policy rejects.
        """
        entry = self.entry(host, port)
        recorded = self._load().lookup(entry)  # replaced whole: no lock
        if recorded:
            self._check_recorded(host, port, entry, key, recorded)
            return False
        if self.policy in ('reject', 'read-only'):
            refused = exceptions.HostKeyNotRecorded \
                if self.policy == 'read-only' else exceptions.HostKeyUnknown
            raise refused(host=host, port=port, fingerprint=_fingerprint(key),
                          known_hosts=self.path)
        if self.policy == 'warn':
            LOG.warning('Accepting unknown SSH host key %s of %s without '
                        'recording it (host_key_policy=warn)',
                        _fingerprint(key), entry)
            return False
        return True

    def record(self, host, port, key):
        """Record *key* for *host*:*port* unless the host has one.

        :returns: True if this call added it (the file had no entry for
            the host); False if the same key was there already.
        :raises HostKeyChanged: another key was recorded meanwhile.
        """
        entry = self.entry(host, port)
        with sharedfiles.locked(self.path):
            keys = self._load()
            recorded = keys.lookup(entry)
            if recorded:
                self._check_recorded(host, port, entry, key, recorded)
                return False
            keys.add(entry, key.get_name(), key)
            self._save(keys)
        LOG.info('Recorded new SSH host key %s of %s in %s',
                 _fingerprint(key), entry, self.path)
        return True

    def verify(self, host, port, key):
        """:meth:`check`, then :meth:`record` what the policy accepts.

        :returns: True if the key was added to the file.
        """
        return self.check(host, port, key) and self.record(host, port, key)

    def _check_recorded(self, host, port, entry, key, recorded):
        same = recorded.get(key.get_name())
        if same is not None and same == key:
            return
        expected = ', '.join(_fingerprint(k) for k in recorded.values())
        raise exceptions.HostKeyChanged(
            host=host, port=port, fingerprint=_fingerprint(key),
            expected=expected, known_hosts=self.path, entry=entry)

    def forget(self, host, port=22, key=None):
        """Drop the keys of *host*:*port*, e.g. when its VM is re-created.

        :param key: only this key (:func:`key_line` text): another key
            recorded for the host (the operator's, a newer one) stays.
        :returns: True if a key was removed.
        """
        entry = self.entry(host, port)
        with sharedfiles.locked(self.path):
            keys = self._load()
            if entry not in keys:
                return False
            pairs = [(name, k) for name, found in keys.items()
                     for k in found.values()]
            kept = [(name, k) for name, k in pairs if name != entry or (
                key is not None and key_line(k) != key)]
            if len(kept) == len(pairs):
                return False
            self._write(kept)
            return True


def key_line(key):
    """``<type> <base64>`` of a paramiko public key (no host name)."""
    return '%s %s' % (key.get_name(), key.get_base64())


_NEEDS_PASSPHRASE = 'the private key is encrypted and no passphrase was given'


def _load_private_key(credentials):
    """The credentials' private key as a paramiko key, or None."""
    passphrase = credentials.key_passphrase
    try:
        if credentials.key_text:
            return _key_from_text(credentials.key_text, passphrase)
        if credentials.key_file:
            return paramiko.PKey.from_path(
                os.path.expanduser(credentials.key_file),
                passphrase.encode('utf-8') if passphrase else None)
    except paramiko.PasswordRequiredException:
        raise _KeyError(_NEEDS_PASSPHRASE)
    except TypeError:
        # cryptography's way of saying that an encrypted key needs one.
        if passphrase:
            raise
        raise _KeyError(_NEEDS_PASSPHRASE)
    except (OSError, paramiko.SSHException, ValueError) as exc:
        source = credentials.key_file or 'given as text'
        raise _KeyError('cannot load the private key (%s): %s'
                        % (source, type(exc).__name__))
    return None


def _key_from_text(text, passphrase):
    for key_class in (paramiko.Ed25519Key, paramiko.ECDSAKey,
                      paramiko.RSAKey):
        try:
            return key_class.from_private_key(io.StringIO(text), passphrase)
        except paramiko.PasswordRequiredException:
            raise
        except (paramiko.SSHException, ValueError):
            continue
    raise paramiko.SSHException('not a supported private key')


def is_private_key(text):
    """Whether *text* is a private key paramiko can use (an encrypted one
    counts: its passphrase problem is reported at login)."""
    try:
        _key_from_text(text, None)
    except (paramiko.PasswordRequiredException, TypeError):
        return True  # TypeError: cryptography's "needs a passphrase"
    except (paramiko.SSHException, ValueError):
        return False
    return True


class _KeyError(Exception):
    """A private key could not be loaded (reason has no key material)."""


class _AuthRefused(Exception):
    """The server refused every credential we offered."""


class _LineHandlerFailed(Exception):
    """The caller's ``on_line`` raised *error*: carried past the
    translation of connection errors (a closed standard output, ``|
    head``, is an OSError too, and not the connection's)."""

    def __init__(self, error):
        super().__init__(error)
        self.error = error


class _Output:
    """Accumulates one output stream, decoding UTF-8 across chunk borders.

    Bounded: past *limit* bytes the stream either overflows (the caller
    stops the command) or, with *keep_tail*, keeps only about its last
    *limit* characters.  Lines given to *on_line* are cut at *max_line*
    characters, so a remote host that never prints a newline cannot make
    the pending line grow without end.

    :param on_line: called with each complete line (no newline), or None.
    :param limit: bytes kept, or None for no limit.
    :param keep_tail: drop the oldest output instead of overflowing.
    :param max_line: longest line passed to *on_line*.
    """

    def __init__(self, on_line=None, limit=None, keep_tail=False,
                 max_line=64 * 1024):
        self._decoder = codecs.getincrementaldecoder('utf-8')('replace')
        self._parts = []
        self._kept = 0
        self._pending = []
        self._pending_len = 0
        self._on_line = on_line
        self._limit = limit
        self._keep_tail = keep_tail
        self._max_line = max_line
        self.received = 0
        self.overflowed = False

    def feed(self, data):
        self.received += len(data)
        if self._limit is not None and self.received > self._limit \
                and not self._keep_tail:
            self.overflowed = True
            return
        self._take(self._decoder.decode(data))

    def _take(self, text):
        self._parts.append(text)
        self._kept += len(text)
        if self._keep_tail and self._kept > 2 * self._limit:
            self._trim()
        if self._on_line:
            self._emit(text)

    def _trim(self):
        # Amortised linear: the buffer is cut only when it doubled.
        text = ''.join(self._parts)[-self._limit:]
        self._parts = [text[text.find('\n') + 1:]]
        self._kept = len(self._parts[0])

    def _emit(self, text):
        *complete, rest = text.split('\n')
        for piece in complete:
            self._add_pending(piece)
            line = ''.join(self._pending)
            self._pending, self._pending_len = [], 0
            self._give(line.rstrip('\r'))
        self._add_pending(rest)

    def _give(self, line):
        try:
            self._on_line(line)
        except Exception as exc:
            raise _LineHandlerFailed(exc) from exc

    def _add_pending(self, piece):
        room = self._max_line - self._pending_len
        if piece and room > 0:
            self._pending.append(piece[:room])
            self._pending_len += min(room, len(piece))

    def text(self):
        self._take(self._decoder.decode(b'', final=True))
        if self._on_line and self._pending:
            self._give(''.join(self._pending).rstrip('\r'))
            self._pending, self._pending_len = [], 0
        if self._keep_tail and self._kept > self._limit:
            self._trim()
        return ''.join(self._parts)


#: Chunks read from one stream before the deadline is checked again.
_DRAIN_CHUNKS = 16


def _sftp_errors():
    """What an SFTP operation raises on a failure of the host or the
    link (paramiko.SFTPError is no SSHException: a malformed packet)."""
    return (OSError, EOFError, paramiko.SSHException, paramiko.SFTPError)


def _drain(chan, out, err):
    # Bounded: a host that writes as fast as we read must not keep us
    # here past the deadline or past an overflow.
    got = False
    for _ in range(_DRAIN_CHUNKS):
        if not chan.recv_ready() or out.overflowed:
            break
        out.feed(chan.recv(65536))
        got = True
    for _ in range(_DRAIN_CHUNKS):
        if not chan.recv_stderr_ready() or err.overflowed:
            break
        err.feed(chan.recv_stderr(65536))
        got = True
    return got


#: Seconds to wait for a closed transport's reader thread to end
#: (paramiko's reader wakes every 0.1 s to see whether it was closed).
TRANSPORT_JOIN_TIMEOUT = 5.0


def _close_transport(transport):
    """Close *transport* and wait until its reader thread has ended.

    paramiko closes the socket while its reader still waits on it, and
    the reader only notices at its next 0.1 s wake-up.  Under eventlet
    (Tacker <= 15) that waiting green thread stays registered on the
    file descriptor: the next green thread that reads a new pipe or
    socket given the same number (a subprocess, another connection)
    fails with "Second simultaneous read".  With native threads the
    reader could meet a recycled descriptor too.  So no descriptor of a
    closed connection is left to reuse while its reader lives.
    """
    transport.close()
    if transport.is_alive() and transport is not threading.current_thread():
        transport.join(TRANSPORT_JOIN_TIMEOUT)


def _is_transient(exc):
    """Worth another connection attempt: the host may still be booting."""
    if isinstance(exc, (exceptions.HostKeyChanged,
                        exceptions.HostKeyUnknown, _KeyError)):
        return False
    return isinstance(exc, (OSError, EOFError, paramiko.SSHException,
                            _AuthRefused))


class Connection(connection.Connection):
    """One SSH connection to one host, opened on first use.

    Every command and file transfer of the connection shares one
    transport; a transport that dropped is re-opened on the next call.

    :param host: address to connect to.
    :param credentials: a :class:`Credentials`.
    :param port: SSH port.
    :param settings: :class:`SSHSettings` (default: from ``[kubespray_mgmt]``).
    :param known_hosts: a :class:`KnownHosts` (default: from settings).
    :param stats: a :class:`Stats` to count into, or None.
    :param sleep: the sleep function used between connection attempts.
    :param on_new_key: called with ``(host, port, key_line(key))`` after
        a login of this connection recorded the host's key (it was
        unknown and the policy is ``accept-new``), or None.
    """

    def __init__(self, host, credentials, port=22, settings=None,
                 known_hosts=None, stats=None, sleep=time.sleep,
                 on_new_key=None):
        self.host = host
        self.port = int(port)
        self.credentials = credentials
        self.settings = settings or SSHSettings.from_conf()
        self.known_hosts = known_hosts or KnownHosts(
            self.settings.known_hosts_file, self.settings.host_key_policy)
        self.stats = stats
        self._sleep = sleep
        self._lock = threading.Lock()
        self._transport_obj = None
        self._sftp_obj = None
        self._on_new_key = on_new_key
        self._new_key = None
        self._connect_failure = None
        #: The hook's :class:`~mgmt_driver.common.deadline.Deadline`:
        #: every command and transfer waits at most until then.
        self.deadline = deadlines.unbounded()

    def __repr__(self):
        return '<Connection %s@%s:%s>' % (self.credentials.username,
                                          self.host, self.port)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def _count(self, kind):
        if self.stats is not None:
            self.stats.record(self.host, kind)

    # Connecting.

    def _transport(self):
        with self._lock:
            if self._transport_obj is None or \
                    not self._transport_obj.is_active():
                self._sftp_obj = None
                self._transport_obj = self._connect_remembered()
                self._report_new_key()
            return self._transport_obj

    def _connect_remembered(self):
        """:meth:`_connect_with_retries`; with ``connect_once``, its
        failure is the answer of every later attempt."""
        if self._connect_failure is not None:
            raise self._connect_failure
        try:
            return self._connect_with_retries()
        except exceptions.SSHConnectError as exc:
            if self.settings.connect_once:
                self._connect_failure = exc
            raise

    def _report_new_key(self):
        # Outside the retries: a failure to note it is no reason to
        # connect again (the key is recorded by then).
        key, self._new_key = self._new_key, None
        if key is not None and self._on_new_key is not None:
            self._on_new_key(self.host, self.port, key_line(key))

    def _connect_with_retries(self):
        import tenacity  # as paramiko: only a connection needs it
        settings = self.settings
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(settings.connect_retries + 1),
            wait=tenacity.wait_exponential(
                multiplier=settings.retry_initial_delay,
                max=settings.retry_max_delay),
            retry=tenacity.retry_if_exception(_is_transient),
            sleep=self._sleep, reraise=True,
            before_sleep=self._log_retry)
        try:
            return retrying(self._connect_once)
        except exceptions.MgmtDriverOtherError:
            raise
        except _KeyError as exc:
            raise exceptions.SSHAuthError(
                user=self.credentials.username, host=self.host,
                port=self.port, reason=str(exc))
        except _AuthRefused as exc:
            raise exceptions.SSHAuthError(
                user=self.credentials.username, host=self.host,
                port=self.port, reason=str(exc))
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise exceptions.SSHConnectError(
                host=self.host, port=self.port,
                attempts=settings.connect_retries + 1,
                reason=_describe(exc))

    def _log_retry(self, state):
        # WARNING, so that a user waiting on an unreachable host sees each
        # attempt (kubespray-mgmt prints these with its progress).
        LOG.warning('SSH to %s:%s: attempt %d of %d failed (%s), next try '
                    'in %.1f s', self.host, self.port, state.attempt_number,
                    self.settings.connect_retries + 1,
                    _describe(state.outcome.exception()),
                    state.next_action.sleep)

    def _connect_once(self):
        timeout = self.settings.connect_timeout
        sock = socket.create_connection((self.host, self.port),
                                        timeout=timeout)
        transport = paramiko.Transport(sock)
        try:
            transport.banner_timeout = timeout
            transport.auth_timeout = timeout
            self._prefer_known_key_types(transport)
            transport.start_client(timeout=timeout)
            key = transport.get_remote_server_key()
            unknown = self.known_hosts.check(self.host, self.port, key)
            self._authenticate(transport)
            # Only a login that succeeded records a key.
            if unknown and self.known_hosts.record(self.host, self.port,
                                                   key):
                self._new_key = key
        except BaseException:
            _close_transport(transport)
            raise
        transport.set_keepalive(30)
        self._count('connections')
        LOG.debug('Connected to %s', self)
        return transport

    def _prefer_known_key_types(self, transport):
        # Negotiate a key type we have on record, so that a host that
        # still has its recorded key is never reported as changed.
        known = self.known_hosts.known_key_types(self.host, self.port)
        if not known:
            return
        options = transport.get_security_options()
        first = [alg for name in known
                 for alg in _KEY_ALGORITHMS.get(name, (name,))
                 if alg in options.key_types]
        options.key_types = first + [alg for alg in options.key_types
                                     if alg not in first]

    def _authenticate(self, transport):
        creds = self.credentials
        refused = []
        # Decrypting a key is seconds of C under eventlet: off the hub.
        pkey = runtime.offload(_load_private_key, creds)
        if pkey is not None:
            try:
                transport.auth_publickey(creds.username, pkey)
                return
            except paramiko.AuthenticationException:
                refused.append('public key refused')
        if creds.password is not None:
            try:
                transport.auth_password(creds.username, creds.password)
                return
            except paramiko.AuthenticationException:
                refused.append('password refused')
        if not refused:
            raise _KeyError('no password and no private key given')
        raise _AuthRefused(', '.join(refused))

    def close(self):
        """Close the connection; the next call would open it again."""
        with self._lock:
            transport, self._transport_obj = self._transport_obj, None
            self._sftp_obj = None
        if transport is not None:
            _close_transport(transport)

    # Commands.

    def run(self, command, timeout=None, check=True, env=None, stdin=None,
            on_line=None, keep_tail=False):
        """Run *command* on the host and wait for it.

        The command runs under coreutils ``timeout``, so a command that
        overruns is stopped on the host too, not only abandoned here.
        Its output is bounded (the host may be hostile): past
        ``max_output`` bytes on one stream the command is stopped, or,
        with *keep_tail*, only the last ``max_tail_output`` bytes are kept.

        :param command: argv list (each item quoted) or a shell string
            built from :func:`quote`-d parts.
        :param timeout: seconds (default: ``ssh_command_timeout``).
        :param check: raise when the exit code is not 0.
        :param env: environment variables (never secrets: they are on the
            remote command line).
        :param stdin: str or bytes sent to the command's standard input
            (the place for secrets a command needs).
        :param on_line: called with each line of stdout as it arrives
            (lines cut at ``max_line`` characters).
        :param keep_tail: for long logs (playbooks): keep the end of the
            output instead of failing when it is too long.
        :returns: a :class:`CommandResult`.
        :raises RemoteCommandFailed: exit code not 0 and *check* is set.
        :raises RemoteCommandTimedOut: the command ran past *timeout*.
        :raises RemoteOutputTooLarge: it printed more than ``max_output``
            bytes on one stream (never with *keep_tail*).
        """
        own = timeout or self.settings.command_timeout
        command, stdin = escalation.wrap(command, stdin,
                                         self.credentials.sudo_password)
        text = display_command(command, env)
        what = 'command "%s" on %s' % (_shorten(text, 60), self.host)
        timeout = self.deadline.bound(own, what)
        wrapped = 'timeout -k 5 %d sh -c %s' % (math.ceil(timeout),
                                                quote(text))
        LOG.debug('Running on %s: %s', self.host, text)
        start = time.monotonic()
        exit_code, out, err = self._execute(
            wrapped, timeout + self.settings.timeout_grace, stdin,
            self._streams(on_line, keep_tail), text)
        result = CommandResult(self.host, text, out, err, exit_code)
        elapsed = time.monotonic() - start
        if exit_code == -1 or (exit_code in (REMOTE_TIMEOUT_EXIT, 137)
                               and elapsed >= timeout):
            if timeout < own:
                self.deadline.expired(what)
            raise exceptions.RemoteCommandTimedOut(result, timeout)
        if check and result.failed:
            raise exceptions.RemoteCommandFailed(result)
        return result

    def _streams(self, on_line, keep_tail):
        """The stdout and stderr collectors of one command."""
        settings = self.settings
        limit = settings.max_tail_output if keep_tail \
            else settings.max_output
        return (_Output(on_line, limit, keep_tail, settings.max_line),
                _Output(None, limit, keep_tail, settings.max_line))

    def _check_size(self, streams, text):
        """Raise RemoteOutputTooLarge if a stream went past its cap."""
        for name, stream in zip(('stdout', 'stderr'), streams, strict=True):
            if stream.overflowed:
                # The caller closes the channel: the command gets EPIPE.
                raise exceptions.RemoteOutputTooLarge(
                    command=_shorten(text), host=self.host, stream=name,
                    limit=self.settings.max_output)

    def _execute(self, command, deadline_after, stdin, streams, text):
        transport = self._transport()
        self._count('commands')
        try:
            chan = transport.open_session(
                timeout=self.settings.connect_timeout)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise exceptions.SSHConnectError(
                host=self.host, port=self.port, attempts=1,
                reason='cannot open a session: %s' % _describe(exc))
        try:
            _answered(chan, lambda: chan.exec_command(command),
                      self.deadline.bound(self.settings.connect_timeout,
                                          'a session on ' + self.host),
                      'start a command')
            if stdin is not None:
                chan.sendall(stdin.encode('utf-8')
                             if isinstance(stdin, str) else stdin)
            chan.shutdown_write()
            return self._collect(chan, time.monotonic() + deadline_after,
                                 streams, text)
        except _LineHandlerFailed as exc:
            raise exc.error from None  # the caller's, as it raised it
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise exceptions.SSHConnectError(
                host=self.host, port=self.port, attempts=1,
                reason='connection lost while running "%s" (it may still '
                       'be running there): %s' % (_shorten(text),
                                                  _describe(exc)))
        finally:
            chan.close()

    def _collect(self, chan, deadline, streams, text):
        out, err = streams
        while not (chan.exit_status_ready() and chan.eof_received):
            self._check_size(streams, text)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return -1, out.text(), err.text()
            if chan.closed and not chan.eof_received:
                # Closed without EOF: the transport died (paramiko then
                # fakes an exit status); the command's fate is unknown.
                _drain(chan, out, err)
                raise EOFError('the connection closed before the command '
                               'finished')
            if not _drain(chan, out, err):
                # Stdout and EOF wake select at once; stderr-only output
                # is picked up by the short timeout.
                select.select([chan], [], [], min(remaining, 0.05))
        while _drain(chan, out, err):
            pass  # EOF came: what is buffered is all there is
        self._check_size(streams, text)
        return chan.recv_exit_status(), out.text(), err.text()

    # Files.

    def _sftp(self, path='a file'):
        """The SFTP client, its waits bounded for one more exchange.

        Each call sets the channel's timeout to ``sftp_timeout`` (or
        what is left of the hook): paramiko's SFTP client reads its
        answers from the channel, so a server that never answers fails
        the call with a timeout instead of holding the hook.

        :raises RemoteFileError: the SFTP subsystem did not start.
        :raises HookDeadlineExceeded: the hook has no time left.
        """
        bound = self.deadline.bound(
            self.settings.sftp_timeout,
            'an SFTP transfer of %s on %s' % (path, self.host))
        transport = self._transport()
        with self._lock:
            if self._sftp_obj is None:
                self._sftp_obj = self._open_sftp(transport, bound, path)
            self._sftp_obj.get_channel().settimeout(bound)
            return self._sftp_obj

    def _open_sftp(self, transport, bound, path):
        # SFTPClient.from_transport waits without a bound for the
        # subsystem's answer and the server's version: open it by hand.
        try:
            chan = transport.open_session(
                timeout=min(bound, self.settings.connect_timeout))
            chan.settimeout(bound)
            _answered(chan, lambda: chan.invoke_subsystem('sftp'),
                      min(bound, self.settings.connect_timeout),
                      'start SFTP')
            return paramiko.SFTPClient(chan)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise exceptions.RemoteFileError(
                action='Starting SFTP for', path=path, host=self.host,
                reason=self._timeout_reason(exc, bound))

    def _timeout_reason(self, exc, bound):
        if isinstance(exc, TimeoutError):
            return 'no answer within %d s (sftp_timeout)' % math.ceil(bound)
        return _describe(exc)

    def _file_error(self, action, path, exc):
        if isinstance(exc, (TimeoutError, EOFError, paramiko.SSHException)):
            # A client whose exchange failed half-way (a timeout above
            # all) may take the next answer for this one's: start a new
            # one.  The server's refusals (no such file) leave it sound.
            with self._lock:
                sftp, self._sftp_obj = self._sftp_obj, None
            if sftp is not None:
                sftp.get_channel().close()
        return exceptions.RemoteFileError(
            action=action, path=path, host=self.host,
            reason=self._timeout_reason(exc, self.settings.sftp_timeout))

    def write_file(self, path, content, mode=0o600):
        """Write *content* to *path* atomically (temp file, then rename).

        The temp file gets *mode* before any byte is written, so a secret
        is never readable by others, not even for a moment.

        :param content: str (written as UTF-8) or bytes.
        :param mode: permission bits of the file.
        :raises RemoteFileError: the transfer or rename failed.
        """
        data = content.encode('utf-8') if isinstance(content, str) \
            else content
        directory, name = posixpath.split(path)
        tmp = posixpath.join(directory, '.%s.%s.tmp'
                             % (name, uuid.uuid4().hex[:8]))
        sftp = self._sftp(path)
        self._count('transfers')
        try:
            with sftp.open(tmp, 'wb') as remote:
                remote.chmod(mode)
                remote.write(data)
            sftp.posix_rename(tmp, path)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            self._remove_quietly(sftp, tmp)
            raise self._file_error('Writing', path, exc)

    @staticmethod
    def _remove_quietly(sftp, path):
        try:
            sftp.remove(path)
        except _sftp_errors():
            pass  # the listing shows what is left (etcdsnapshots)

    def read_file(self, path, missing_ok=False):
        """Return the content of *path* as text (invalid UTF-8 replaced).

        :param missing_ok: return None instead of raising if it is absent.
        :raises RemoteFileError: the file cannot be read.
        :raises RemoteFileTooLarge: it is larger than ``max_file_size``.
        """
        sftp = self._sftp(path)
        self._count('transfers')
        limit = self.settings.max_file_size
        try:
            with sftp.open(path, 'rb') as remote:
                # One byte more than allowed tells "too large" without
                # trusting the size the server reports.
                data = remote.read(limit + 1)
        except FileNotFoundError as exc:
            if missing_ok:
                return None
            raise self._file_error('Reading', path, exc)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise self._file_error('Reading', path, exc)
        if len(data) > limit:
            raise exceptions.RemoteFileTooLarge(path=path, host=self.host,
                                                limit=limit)
        return data.decode('utf-8', 'replace')

    def put(self, local_path, remote_path, mode=None):
        """Copy a local file to the host atomically.

        :param mode: permission bits (default: those of the local file).
        """
        with open(local_path, 'rb') as f:
            data = f.read()
        if mode is None:
            mode = os.stat(local_path).st_mode & 0o777
        self.write_file(remote_path, data, mode)

    def get(self, remote_path, local_path):
        """Copy a file from the host; the local file appears whole or not."""
        sftp = self._sftp(remote_path)
        self._count('transfers')
        tmp = '%s.%s.tmp' % (local_path, uuid.uuid4().hex[:8])
        try:
            sftp.get(remote_path, tmp)
            os.replace(tmp, local_path)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise self._file_error('Fetching', remote_path, exc)


    def copy_to(self, path, target, target_path, mode=0o600, limit=None,
                chunk=1024 * 1024):
        """Stream *path* of this host to *target_path* on *target* (a
        Connection to another host) over SFTP, through this process a
        chunk at a time; the copy appears whole (a temp file, then a
        rename) or not at all.

        :param mode: permission bits of the copy, set before any byte.
        :param limit: most bytes copied; past it nothing is kept.
        :returns: the number of bytes copied.
        :raises RemoteFileTooLarge: the file is larger than *limit*.
        :raises RemoteFileError: a read, a write or the rename failed.
        """
        source, sink = self._sftp(path), target._sftp(target_path)
        directory, name = posixpath.split(target_path)
        tmp = posixpath.join(directory, '.%s.%s.tmp'
                             % (name, uuid.uuid4().hex[:8]))
        self._count('transfers')
        target._count('transfers')
        copied = 0
        try:
            with source.open(path, 'rb') as reader, \
                    sink.open(tmp, 'wb') as writer:
                writer.chmod(mode)
                writer.set_pipelined(True)
                while True:
                    data = reader.read(chunk)
                    if not data:
                        break
                    copied += len(data)
                    if limit is not None and copied > limit:
                        raise exceptions.RemoteFileTooLarge(
                            path=path, host=self.host, limit=limit)
                    writer.write(data)
            sink.posix_rename(tmp, target_path)
        except BaseException as exc:
            # Whatever ended the copy (a malformed SFTP packet raises
            # paramiko.SFTPError, a broken one struct.error), the
            # temporary file goes; the driver's own refusal and what is
            # no error (an interrupt, eventlet's Timeout) go on as they
            # are.
            self._remove_quietly(sink, tmp)
            if isinstance(exc, exceptions.RemoteFileTooLarge) or \
                    not isinstance(exc, Exception):
                raise
            raise self._file_error('Copying', '%s (to %s:%s)' % (
                path, target.host, target_path), exc) from None
        return copied


def _answered(chan, request, timeout, what):
    """Make *request* on *chan*, waiting at most *timeout* seconds.

    paramiko waits for the answer to a channel request (exec, subsystem)
    without a bound; a watchdog closes the channel when none came, which
    ends that wait with an error.

    :raises TimeoutError: no answer within *timeout*.
    """
    fired = threading.Event()

    def expire():
        fired.set()
        try:
            chan.close()
        except (OSError, EOFError, paramiko.SSHException):
            # The connection died under the request: the request ends
            # with its own error, which the caller gets as the timeout.
            pass

    watchdog = threading.Timer(timeout, expire)
    watchdog.daemon = True
    watchdog.start()
    try:
        request()
    except (OSError, EOFError, paramiko.SSHException):
        if fired.is_set():
            raise TimeoutError('no answer to the request to %s within '
                               '%d s' % (what, math.ceil(timeout))) from None
        raise
    finally:
        watchdog.cancel()


def _shorten(text, limit=120):
    return text if len(text) <= limit else text[:limit - 3] + '...'


def _describe(exc):
    # paramiko quotes what the server sent (a banner line, for one):
    # clipped and escaped, it goes into messages and warnings.
    text = safetext.clip(str(exc).strip(), 500)
    return '%s: %s' % (type(exc).__name__, text) if text \
        else type(exc).__name__


class ConnectionPool(connection.Pool):
    """Hands out one :class:`Connection` per (host, port, user).

    A hook uses one pool, so it opens at most one SSH connection per
    host; leaving the ``with`` block closes them all.

    :param settings: :class:`SSHSettings` shared by the connections.
    :param known_hosts: :class:`KnownHosts` shared by the connections.
    :param stats: :class:`Stats` to count into (default: a new one).
    :param sleep: sleep function for connection retries.
    """

    def __init__(self, settings=None, known_hosts=None, stats=None,
                 sleep=time.sleep):
        self.settings = settings or SSHSettings.from_conf()
        self.known_hosts = known_hosts or KnownHosts(
            self.settings.known_hosts_file, self.settings.host_key_policy)
        self.stats = stats if stats is not None else Stats()
        self._sleep = sleep
        self._connections = {}
        self._lock = threading.Lock()
        #: The deadline of the hook that uses the pool, given to every
        #: connection it hands out (see :class:`Connection`).
        self.deadline = deadlines.unbounded()

    def connection(self, host, credentials, port=22, on_new_key=None):
        """The pool's connection to *host* (created, not yet opened).

        :param on_new_key: see :class:`Connection`; the first caller's
            is kept with the connection.
        """
        key = (host, int(port), credentials.username)
        with self._lock:
            if key not in self._connections:
                self._connections[key] = Connection(
                    host, credentials, port, self.settings,
                    self.known_hosts, self.stats, self._sleep, on_new_key)
            self._connections[key].deadline = self.deadline
            return self._connections[key]

    def reachable(self, host, credentials, port=22, timeout=30,
                  on_new_key=None):
        """Whether *host* takes a login and a command right now.

        One connection attempt, not the pool's retries: for deciding
        whether a node can be drained or must be removed ungracefully.
        """
        probe = Connection(host, credentials, port,
                           dataclasses.replace(self.settings,
                                               connect_retries=0),
                           self.known_hosts, self.stats, self._sleep,
                           on_new_key)
        probe.deadline = self.deadline
        try:
            with probe:
                probe.run(['true'], timeout=timeout)
            return True
        except (exceptions.MgmtDriverOtherError,
                exceptions.MgmtDriverRemoteCommandError,
                exceptions.MgmtDriverRemoteCommandTimeOut) as exc:
            LOG.info('%s:%s is not reachable: %s', host, port, exc)
            return False

    def forget_host(self, host, port=22, key=None):
        """Drop the recorded host key of a VM that is being replaced.

        :param key: only this key (:func:`key_line` text), if given.
        :returns: True if a key was removed.
        """
        if self.known_hosts.forget(host, port, key):
            LOG.info('Forgot the SSH host key of %s:%s', host, port)
            return True
        return False

    def close_all(self):
        with self._lock:
            connections = list(self._connections.values())
            self._connections.clear()
        for conn in connections:
            conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close_all()
