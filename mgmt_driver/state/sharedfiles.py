"""Local files that several tacker-conductor processes change at once.

Not in the design's layout: the driver's ``known_hosts`` file and its
per-instance records (:mod:`mgmt_driver.state.records`) are read, changed and
written back by every worker process of the conductor host.  A lock held
inside one process does not stop another one from writing between our
read and our write, so each change is made under an exclusive
``fcntl.flock`` on a sibling ``<file>.lock``, and the file is replaced
atomically (temporary file in the same directory, fsync, ``os.replace``)
so a reader never sees half a file.

The ``flock`` is taken without blocking, and tried again after a short
sleep while another process holds it: a blocking ``flock`` waits inside
C, where an eventlet-patched conductor (Tacker <= 15) cannot switch to
another green thread, so every operation of the process would stop
until the other process let go (:mod:`mgmt_driver.common.runtime`).
The wait has a bound (``shared_file_lock_wait``): a process that hangs
while it holds a lock (a stuck file system) fails the others' changes
with an error naming the file, rather than holding them forever.
"""

import contextlib
import fcntl
import os
import threading
import time
import uuid

from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions

#: Longest pause between two tries of a held ``flock`` (seconds).
MAX_LOCK_PAUSE = 0.1

_THREAD_LOCKS = {}
_THREAD_LOCKS_GUARD = threading.Lock()


def _thread_lock(path):
    with _THREAD_LOCKS_GUARD:
        return _THREAD_LOCKS.setdefault(path, threading.Lock())


def ensure_directory(path):
    """Create the directory of *path* (mode 0700) if it is missing."""
    directory = os.path.dirname(path) or '.'
    os.makedirs(directory, mode=0o700, exist_ok=True)
    return directory


@contextlib.contextmanager
def locked(path, wait=None):
    """Hold the lock of *path* (threads and processes) for a change.

    The lock file ``<path>.lock`` (mode 0600) is never removed: removing
    it would let two processes lock two different files.

    :param wait: seconds to wait for another holder (default:
        ``shared_file_lock_wait``).
    :raises OSError: the lock file cannot be created.
    :raises SharedFileBusy: another holder kept it past *wait*.
    """
    if wait is None:
        wait = kconf.CONF.kubespray_mgmt.shared_file_lock_wait
    ensure_directory(path)
    end = time.monotonic() + wait
    thread_lock = _thread_lock(path)
    if not thread_lock.acquire(timeout=wait):
        raise exceptions.SharedFileBusy(path=path, wait=wait)
    try:
        fd = os.open(path + '.lock', os.O_RDWR | os.O_CREAT, 0o600)
        try:
            _flock(fd, path, end, wait)
            yield
        finally:
            os.close(fd)  # releases the flock
    finally:
        thread_lock.release()


def _flock(fd, path, end, wait):
    """Take the exclusive ``flock`` of *fd*, pausing while it is held,
    until the monotonic time *end*."""
    pause = 0.005
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            left = end - time.monotonic()
            if left <= 0:
                raise exceptions.SharedFileBusy(path=path, wait=wait) \
                    from None
            # time.sleep looked up now: eventlet's, once it patched time.
            time.sleep(min(pause, left))
            pause = min(pause * 2, MAX_LOCK_PAUSE)


def replace(path, text, mode=0o600):
    """Write *text* to *path* atomically, with permission bits *mode*.

    :raises OSError: the file cannot be written.
    """
    directory = ensure_directory(path)
    tmp = '%s.%s.tmp' % (path, uuid.uuid4().hex[:8])
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, 'w', encoding='utf-8') as stream:
            os.fchmod(stream.fileno(), mode)  # the umask must not widen it
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _sync_directory(directory)


def _sync_directory(directory):
    # The rename itself survives a crash only once the directory is synced.
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
