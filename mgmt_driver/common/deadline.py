"""The wall-clock bound of one hook (issue 39 item 3, issue 40 item 4).

A hook gets a :class:`Deadline` when it starts (``hook_deadline``, per
operation); the session carries it and every wait consults it: a remote
command, a file transfer, a playbook's slot and run, a lock.  Each wait
then lasts at most ``min(its own bound, what is left of the hook)``, and
a wait that finds nothing left fails with :class:`HookDeadlineExceeded`,
naming what it was about to wait on.  Nothing is killed: the waits are
bounded, so the hook unwinds through its own ``finally`` blocks and
every lock and slot it held is released the ordinary way.
"""

import contextlib
import threading
import time

from mgmt_driver.common import exceptions

#: Seconds a cleanup (:meth:`Deadline.cleanup`) may go on past the
#: deadline: stopping a playbook run so that its slot is released must
#: not be refused for want of time.
CLEANUP_GRACE = 60.0


class Deadline:
    """The end of one hook's time.

    :param operation: the hook (``heal_end``), for messages.
    :param seconds: how long it may take in all, or None: no bound.
    :param setting: the option that set *seconds*, for messages.
    :param clock: a monotonic clock (tests).
    """

    def __init__(self, operation, seconds, setting='hook_deadline',
                 clock=time.monotonic):
        self.operation = operation
        self.seconds = seconds
        self.setting = setting
        self._clock = clock
        self._end = None if seconds is None else clock() + seconds
        self._local = threading.local()

    def remaining(self):
        """Seconds left (``float('inf')`` without a bound); inside
        :meth:`cleanup`, :data:`CLEANUP_GRACE` more."""
        if self._end is None:
            return float('inf')
        extra = CLEANUP_GRACE if getattr(self._local, 'depth', 0) else 0
        return max(0.0, self._end + extra - self._clock())

    @contextlib.contextmanager
    def cleanup(self):
        """Waits of this thread inside get :data:`CLEANUP_GRACE` more
        seconds: what releases a lock or a slot runs even when the
        deadline came."""
        self._local.depth = getattr(self._local, 'depth', 0) + 1
        try:
            yield
        finally:
            self._local.depth -= 1

    def bound(self, own, what):
        """How long a wait on *what* may last: the lesser of *own* and
        the time left.

        :param own: the wait's own bound in seconds, or None.
        :param what: what the caller waits on, for the error.
        :raises HookDeadlineExceeded: no time is left.
        """
        left = self.remaining()
        if left <= 0:
            raise self.error(what)
        return left if own is None else min(own, left)

    def error(self, what):
        """The :class:`HookDeadlineExceeded` of a wait on *what*."""
        return exceptions.HookDeadlineExceeded(
            operation=self.operation, seconds=self.seconds, what=what,
            setting=self.setting)

    def expired(self, what):
        """Raise :class:`HookDeadlineExceeded` if no time is left."""
        self.bound(None, what)


def unbounded(operation='operation'):
    """A deadline that never comes (commands run by hand, tests)."""
    return Deadline(operation, None)
