"""The body of every fixture that serves a test sshd of its own."""

import pytest
from mgmt_localsite import sshd as sshd_site


def serve(addresses):
    """Yield a started sshd listening on *addresses* and clean it up
    after (its processes stopped by PID); skip where sshd cannot run.

    Use as ``yield from serve(ADDRESSES)`` in a fixture.
    """
    reason = sshd_site.available()
    if reason:
        pytest.skip(reason)
    site = sshd_site.Sshd(addresses=tuple(addresses))
    try:
        yield site.start()
    finally:
        site.cleanup()
