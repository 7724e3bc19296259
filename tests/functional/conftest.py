"""Fixtures shared by the functional tests (real processes on loopback)."""

import pytest

from mgmt_driver.localsite import sshd as sshd_site


@pytest.fixture(scope='session')
def sshd():
    """A running sshd on 127.0.0.2 and 127.0.0.3 (one port for both)."""
    reason = sshd_site.available()
    if reason:
        pytest.skip(reason)
    site = sshd_site.Sshd(addresses=('127.0.0.2', '127.0.0.3'))
    try:
        yield site.start()
    finally:
        site.cleanup()
