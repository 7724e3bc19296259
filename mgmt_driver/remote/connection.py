"""The interface of a connection to a host, and of a pool of them.

A module of its own (not in DESIGN's list; it belongs to ``ssh``, which
it keeps from growing): the driver talks to hosts only through these
methods, and several classes offer them:

* :class:`mgmt_driver.remote.ssh.Connection` / ``ssh.ConnectionPool``: SSH;
* :class:`mgmt_driver.remote.plan.PlanConnection` / ``plan.PlanPool``: the dry
  run, which records instead of connecting;
* ``mgmt_localsite.haproxy.LocalConnection`` and
  ``localsite.gateways.NetnsConnection``: the test site's commands on
  this machine (or in a network namespace of it);
* ``tests.fakes.FakeConnection`` / ``FakePool``: the unit tests' doubles.

Each of them names the protocol as a base class, and
``tests/unit/test_connection.py`` checks that each defines every method
here with a compatible signature.  So a new method is added here first,
and that test lists every class that must get it.

Naming a :class:`typing.Protocol` as a base class inherits its stubs:
they raise :class:`NotImplementedError` rather than return None, so a
method a class forgot fails loudly, and the test finds it first.
"""

import typing

from mgmt_driver.common import deadline as deadlines


class Connection(typing.Protocol):
    """One host: commands and files.

    :ivar host: the address the connection reaches (for messages).
    :ivar deadline: the :class:`~mgmt_driver.common.deadline.Deadline` of
        the hook using it; every wait of the connection ends by then
        (the pool sets it; none by default).
    """

    host: str
    deadline: deadlines.Deadline = deadlines.unbounded()

    def run(self, command, timeout=None, check=True, env=None, stdin=None,
            on_line=None, keep_tail=False):
        """Run *command* (an argv list, or a shell string of quoted
        parts) and wait for it; see
        :meth:`mgmt_driver.remote.ssh.Connection.run`.

        :returns: a :class:`mgmt_driver.remote.ssh.CommandResult`.
        """
        raise NotImplementedError

    def write_file(self, path, content, mode=0o600):
        """Write *content* (str or bytes) to *path* atomically."""
        raise NotImplementedError

    def read_file(self, path, missing_ok=False):
        """The text of *path*, or None when it is missing and
        *missing_ok*."""
        raise NotImplementedError

    def close(self):
        """Close the connection; the next call may open it again."""
        raise NotImplementedError


class Pool(typing.Protocol):
    """The connections of one operation, one per host."""

    def connection(self, host, credentials, port=22, on_new_key=None):
        """The pool's :class:`Connection` to *host*."""
        raise NotImplementedError

    def reachable(self, host, credentials, port=22, timeout=30,
                  on_new_key=None):
        """Whether *host* takes a login and a command right now."""
        raise NotImplementedError

    def forget_host(self, host, port=22, key=None):
        """Drop the recorded host key of *host*."""
        raise NotImplementedError

    def close_all(self):
        """Close every connection of the pool."""
        raise NotImplementedError

    def __enter__(self):
        raise NotImplementedError

    def __exit__(self, *exc_info):
        raise NotImplementedError
