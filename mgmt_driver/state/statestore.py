"""The driver's state on the conductor side, when several conductors serve
one VNF instance.

Not in the design's layout: Tacker runs several ``tacker-conductor``
processes on different hosts, and any operation of an instance may land
on any of them.  What the driver owns for an instance (its record:
:mod:`mgmt_driver.state.records`), the v2 instantiate parameters it keeps
(:class:`mgmt_driver.adapters.v2.SpecStore`, with passwords), the v2
kubeconfigs and ``known_hosts_file`` must therefore be one store that every
conductor sees: one directory on storage shared by the conductor hosts (where
Tacker keeps its own shared files, doc/source/security/threat-model.rst says
why not Tacker's database, its key manager or the Ansible server).

This module keeps a conductor from acting on another store than the one
the instance's state is in:

* **identity** (:func:`check_identity`): with ``[kubespray_mgmt]
  state_store_id`` set, each state location must lie in a directory whose
  file :data:`MARKER` holds that id; a conductor whose shared directory
  is not mounted, or is another one, refuses before changing anything;
* **presence** (:func:`require_record`): an operation that needs what
  instantiate recorded (scale, heal, terminate, an upgrade) refuses when
  this store never had the instance's record, naming the path and the
  option that points at it; a record terminate released
  (:data:`~mgmt_driver.state.records.RELEASED`) is fine: there is nothing left;
* **one operation at a time** (:func:`instance_lock`): a hook holds an
  ``flock`` on ``<records_dir>/locks/<instance id>.lock`` while it runs,
  so a retry that Tacker starts on another conductor while the first
  still runs (Tacker v2 marks every PROCESSING operation FAILED_TEMP when
  any v2 conductor starts) waits ``state_lock_wait`` seconds and is then
  refused, naming the holder.  The Ansible server's run lock
  (:mod:`mgmt_driver.remote.detached`) still covers the playbooks; this one
  covers the records, the kept parameters and the VIM registration.

The lock is re-entrant within one thread (the v2 script holds it for
the whole call and calls the v1 hooks, which take it again); threads and
processes, here or on another host, exclude each other.  ``flock`` over
NFSv4, CephFS or GlusterFS excludes across hosts; waiting polls with a
non-blocking attempt, so an eventlet hub is never blocked.
"""

import contextlib
import datetime
import errno
import fcntl
import functools
import os
import re
import socket
import threading
import time

from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.common import safetext
from mgmt_driver.model import core
from mgmt_driver.state import records as records_mod

LOG = safetext.logger(__name__)

#: The file, in the shared state directory, holding the store's id.
MARKER = 'kubespray-mgmt-store-id'
#: Where the per-instance lock files are, in ``records_dir``.
LOCKS = 'locks'
ID_OPTION = '[%s] state_store_id' % kconf.GROUP
RECORDS_OPTION = '[%s] records_dir' % kconf.GROUP
#: Most bytes read from a marker or a lock file's holder line.
_READ_LIMIT = 512
_POLL = 0.5

#: Hooks that act on what instantiate recorded: the instance's record
#: must be in this store (terminate_end: unless Tacker rolls back an
#: instantiate, when it passes no request).
NEEDS_RECORD = frozenset(('terminate_start', 'terminate_end', 'scale_start',
                          'scale_end', 'heal_start', 'heal_end',
                          'modify_information_end'))


# ------------------------------------------------------------ identity


def locations(conf=None):
    """``[(option, directory)]`` of every place the driver keeps state."""
    group = (conf or kconf.CONF)[kconf.GROUP]
    known_hosts = os.path.expanduser(group.known_hosts_file)
    return [('records_dir', records_mod.default_directory(conf)),
            ('known_hosts_file', os.path.dirname(known_hosts) or '.'),
            ('kubeconfig_dir', os.path.expanduser(group.kubeconfig_dir))]


def find_marker(directory):
    """The :data:`MARKER` file nearest above *directory* (itself
    included, links resolved), or None."""
    here = os.path.realpath(directory)
    while True:
        candidate = os.path.join(here, MARKER)
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def read_marker(path):
    """The id a marker file holds (its first line, stripped)."""
    with open(path, encoding='utf-8', errors='replace') as f:
        lines = f.read(_READ_LIMIT).strip().splitlines()
    return lines[0].strip() if lines else ''


def identity_problems(conf=None, only=None):
    """What keeps the configured store from being the shared one.

    :param only: the option names (``records_dir``...) of the locations
        to check; None: every one of :func:`locations`.
    :returns: one text per state location that is not in the store named
        by ``state_store_id``; empty when it is unset (one conductor).
    """
    wanted = (conf or kconf.CONF)[kconf.GROUP].state_store_id
    if not wanted:
        return []
    problems = []
    for option, directory in locations(conf):
        if only is not None and option not in only:
            continue
        marker = find_marker(directory)
        if marker is None:
            problems.append(
                '[%s] %s: %s is in no directory holding %s (the shared '
                'state directory is not mounted on this host, or the '
                'option points elsewhere)' % (kconf.GROUP, option,
                                              directory, MARKER))
            continue
        try:
            found = read_marker(marker) or ''
        except OSError as exc:
            found, reason = None, exc.strerror or str(exc)
        if found is None:
            problems.append('[%s] %s: cannot read %s: %s' % (
                kconf.GROUP, option, marker, reason))
        elif found != wanted:
            problems.append(
                '[%s] %s: %s belongs to the store %r (%s), not to %s %r' % (
                    kconf.GROUP, option, directory, found, marker,
                    ID_OPTION, wanted))
    return problems


def check_identity(conf=None):
    """Refuse to work on a store that is not the shared one.

    :raises StateStoreUnusable: see :func:`identity_problems`.
    """
    problems = identity_problems(conf)
    if problems:
        raise exceptions.StateStoreUnusable(reason='; '.join(problems))


# ------------------------------------------------------------ presence


def _ours(vnf_instance):
    """The instance was instantiated with this driver's parameters."""
    info = getattr(vnf_instance, 'instantiated_vnf_info', None)
    additional = getattr(info, 'additional_params', None) or {}
    return core.ROOT in additional


def needs_record(hook, vnf_instance, request):
    """Whether *hook* needs the instance's record in this store."""
    if hook not in NEEDS_RECORD or not _ours(vnf_instance):
        return False
    return not (hook == 'terminate_end' and request is None)


def require_record(store, instance_id, operation):
    """Refuse *operation* when this store never had the instance's record.

    :raises InstanceStateMissing: the record is :data:`~records.MISSING`.
    """
    if store.state(instance_id) != records_mod.MISSING:
        return
    raise missing_state(instance_id, operation, 'its record',
                        store.path(instance_id))


def missing_state(instance_id, operation, what, path):
    """:class:`~exceptions.InstanceStateMissing` for *what* (at *path*).

    The error reaches the tenant (Tacker shows it, v1 and v2): it names
    the option, not the conductor's path, which goes to the conductor's
    log for the operator (at INFO: under v2 a warning reaches the
    script's stderr, which Tacker shows the tenant).
    """
    LOG.info('%s of VNF instance %s: %s not found at %s', operation,
             instance_id, what, path)
    return exceptions.InstanceStateMissing(
        instance=instance_id, operation=operation,
        missing='%s (see the conductor\'s log)' % what,
        option=RECORDS_OPTION)


# ------------------------------------------------------------ the lock


_HELD = threading.local()


def _held():
    if not hasattr(_HELD, 'ids'):
        _HELD.ids = set()
    return _HELD.ids


def lock_path(store, instance_id):
    """``<records_dir>/locks/<instance id>.lock``."""
    name = os.path.basename(store.path(instance_id))[:-len('.json')]
    return os.path.join(store.directory, LOCKS, name + '.lock')


def _holder_text(operation):
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    return 'operation %s on host %s, pid %d, since %s\n' % (
        operation, socket.gethostname(), os.getpid(), now.isoformat())


def _read_holder(fd):
    try:
        return os.pread(fd, _READ_LIMIT, 0).decode(
            'utf-8', 'replace').strip() or 'unknown holder'
    except OSError:
        return 'unknown holder'


_HOLDER = re.compile(r'operation ([A-Za-z0-9_-]{1,64}) on host .*, '
                     r'pid [0-9]+, since ([0-9T:+-]{1,40})')


def _tenant_holder(holder):
    """What the tenant is told of the lock's holder: the operation and
    since when, not the conductor's host name or pid (the conductor's
    log has them)."""
    found = _HOLDER.fullmatch(holder)
    if not found:
        return 'another operation'
    return 'operation %s since %s' % found.groups()


@contextlib.contextmanager
def instance_lock(store, instance_id, operation, wait=0, sleep=None,
                  clock=None):
    """Hold the state lock of *instance_id* (re-entrant in a thread).

    :param wait: seconds to wait for another holder before refusing.
    :param sleep: default ``time.sleep`` as it is when called (eventlet
        may have patched it after this module was imported).
    :raises InstanceBusy: another operation held it for *wait* seconds.
    """
    sleep, clock = sleep or time.sleep, clock or time.monotonic
    held = _held()
    if instance_id in held:
        yield
        return
    path = lock_path(store, instance_id)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        _acquire(fd, instance_id, operation, wait, sleep, clock)
        os.ftruncate(fd, 0)
        os.pwrite(fd, _holder_text(operation).encode('utf-8'), 0)
        held.add(instance_id)
        try:
            yield
        finally:
            held.discard(instance_id)
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # releases the flock


def _acquire(fd, instance_id, operation, wait, sleep, clock):
    deadline = clock() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN,
                                 errno.EACCES):
                raise
        left = deadline - clock()
        if left <= 0:
            holder = _read_holder(fd)
            # INFO: under v2 a warning reaches the tenant (stderr).
            LOG.info('VNF instance %s: %s refused, the state lock is held '
                     'by %s', instance_id, operation, safetext.clip(holder))
            raise exceptions.InstanceBusy(
                instance=instance_id, operation=operation,
                holder=_tenant_holder(holder), wait=wait)
        sleep(min(_POLL, left))


# ------------------------------------------------------------ hooks


@contextlib.contextmanager
def guard(conf, store, vnf_instance, hook, request):
    """Around one hook: the store is the shared one, the instance's
    record is there if *hook* needs it (:func:`needs_record`), no other
    operation of the instance runs meanwhile, and the record notes the
    hook and its result (:func:`recorded`)."""
    instance_id = getattr(vnf_instance, 'id', None)
    with locked_operation(conf, store, instance_id, hook):
        if needs_record(hook, vnf_instance, request):
            require_record(store, instance_id, hook)
        with recorded(store, instance_id, hook):
            yield


@contextlib.contextmanager
def locked_operation(conf, store, instance_id, operation):
    """The store is the shared one and *operation* holds the instance's
    lock (``state_lock_wait``): a hook's (:func:`guard`), and the
    command line's ``run`` on this store."""
    conf = conf or kconf.CONF
    check_identity(conf)
    store.path(instance_id)  # refuses an unsafe id before any file
    with instance_lock(store, instance_id, operation,
                       conf[kconf.GROUP].state_lock_wait):
        yield


# ------------------------------------------------------------ last operation

#: ``last_operation.result`` values.
RUNNING, SUCCEEDED, FAILED, INTERRUPTED = (
    'running', 'succeeded', 'failed', 'interrupted')
#: Characters of an error kept in ``last_operation.error``.
ERROR_CHARS = 300
#: Operations that make the instance's record: noted from their start
#: (``kubespray-mgmt list`` shows an instantiate running), while the
#: others never write a record that is missing or that terminate closed.
CREATES_RECORD = frozenset(('instantiate_end', 'run instantiate'))


def _now():
    return datetime.datetime.now(datetime.timezone.utc).replace(
        microsecond=0).isoformat()


@contextlib.contextmanager
def recorded(store, instance_id, operation):
    """Note *operation* in the instance's record as its last one:
    ``running`` while it runs (when the record exists already), then
    ``succeeded``, ``failed`` (with the error's first
    :data:`ERROR_CHARS` characters) or ``interrupted``.  A record that
    terminate deleted is not written again (only
    :data:`CREATES_RECORD` make one); a note that cannot be written is
    logged, never the operation's failure."""
    entry = {'operation': operation, 'result': RUNNING, 'started': _now(),
             'ended': None, 'error': None, 'host': socket.gethostname()}
    _note(store, instance_id, entry, operation in CREATES_RECORD)
    try:
        yield
    except KeyboardInterrupt:
        _note(store, instance_id, dict(entry, result=INTERRUPTED,
                                       ended=_now()))
        raise
    except Exception as exc:
        _note(store, instance_id, dict(
            entry, result=FAILED, ended=_now(),
            error=exceptions.clip(str(exc), ERROR_CHARS)))
        raise
    _note(store, instance_id, dict(entry, result=SUCCEEDED, ended=_now()))


def _note(store, instance_id, entry, create=False):
    try:
        store.set_last_operation(instance_id, entry, create)
    except (OSError, exceptions.InstanceRecordInvalid,
            exceptions.SharedFileBusy) as exc:
        LOG.warning('VNF instance %s: cannot note its last operation (%s) '
                    'in its record: %s', instance_id, entry['operation'],
                    exc)


def hook(method):
    """Decorate a :class:`~mgmt_driver.adapters.v1.LcmHooks` hook (``(self,
    context, vnf_instance, request, ...)``) with :func:`guard`."""
    name = method.__name__

    @functools.wraps(method)
    def guarded(self, context, vnf_instance, request, *args, **kwargs):
        with guard(self.conf, self._store(), vnf_instance, name, request):
            return method(self, context, vnf_instance, request, *args,
                          **kwargs)
    return guarded


# ------------------------------------------------------------ operator check


def report(conf=None):
    """What ``kubespray-mgmt state check`` prints: is this conductor's
    store the shared one, writable, with private modes?

    :returns: ``[(kind, text)]``, *kind* ``ok``, ``note`` or ``problem``.
    """
    conf = conf or kconf.CONF
    lines = [('problem', p) for p in identity_problems(conf)]
    wanted = conf[kconf.GROUP].state_store_id
    if not wanted:
        lines.append(('note', '%s is unset: nothing tells this store from '
                      'another conductor\'s; with several conductors, put '
                      'the state in one shared directory holding %s and '
                      'set the option' % (ID_OPTION, MARKER)))
    elif not lines:
        lines.append(('ok', 'every state location is in the store %r' %
                      wanted))
    for option, directory in locations(conf):
        lines += _directory_lines(option, directory)
    store = records_mod.RecordStore.from_conf(conf)
    # Not in a store that is not the shared one (an empty mount point).
    if os.path.isdir(store.directory) and not identity_problems(conf):
        lines += _lock_lines(store)
    return lines


def _directory_lines(option, directory):
    name = '[%s] %s' % (kconf.GROUP, option)
    try:
        info = os.stat(directory)
    except FileNotFoundError:
        return [('note', '%s: %s does not exist yet (created with mode 0700 '
                 'when first used)' % (name, directory))]
    lines = []
    if info.st_mode & 0o022:
        lines.append(('problem', '%s: %s is writable by other accounts '
                      '(mode %04o)' % (name, directory,
                                       info.st_mode & 0o7777)))
    if info.st_uid != os.getuid():
        lines.append(('problem', '%s: %s belongs to uid %d, not to this '
                      'account (%d)' % (name, directory, info.st_uid,
                                        os.getuid())))
    if not os.access(directory, os.W_OK | os.X_OK):
        lines.append(('problem', '%s: %s is not writable' % (name,
                                                             directory)))
    open_files = [f for f in _state_files(directory)
                  if os.stat(f).st_mode & 0o077]
    lines += [('problem', '%s: %s is readable or writable by other '
               'accounts (want 0600)' % (name, f)) for f in open_files]
    if not lines and info.st_mode & 0o077:
        # Not private, though no file in it is readable by others.
        lines.append(('note', '%s: %s is writable by this account only, '
                      'but other accounts can list it (mode %04o: they see '
                      'which instances it holds); chmod 700 it' % (
                          name, directory, info.st_mode & 0o7777)))
    if not lines:
        lines.append(('ok', '%s: %s is private and writable' % (name,
                                                                directory)))
    return lines


def _state_files(directory):
    """Files in *directory* and its ``v2`` that hold state (secrets)."""
    found = []
    for folder in (directory, os.path.join(directory, 'v2')):
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            found += [entry.path for entry in os.scandir(folder)
                      if entry.is_file(follow_symlinks=False) and
                      entry.name != MARKER]
    return sorted(found)


def _lock_lines(store):
    try:
        with instance_lock(store, 'state-check', 'state check'):
            pass
    except (OSError, exceptions.InstanceBusy) as exc:
        return [('problem', 'cannot take a lock in %s: %s' % (
            os.path.join(store.directory, LOCKS), exc))]
    return [('ok', 'locks in %s work on this host (they exclude other '
             'hosts only on a file system whose flock does: NFSv4, '
             'CephFS, GlusterFS)' % os.path.join(store.directory, LOCKS))]
