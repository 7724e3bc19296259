"""Fixtures shared by the functional tests (real processes on loopback)."""

import os
import shutil
import tempfile

import pytest

from tests.functional import sshd_fixture


@pytest.fixture(scope='session')
def sshd():
    """A running sshd on 127.0.0.2 and 127.0.0.3 (one port for both)."""
    yield from sshd_fixture.serve(('127.0.0.2', '127.0.0.3'))


@pytest.fixture(scope='session', autouse=True)
def private_cwd():
    """Run the whole suite from a fresh 0700 directory of the runner.

    As CI and a root user's clone in ``~`` do: a process the local site
    starts as another user must not need to enter the caller's working
    directory (HAProxy failed to start from one).
    """
    before = os.getcwd()
    private = tempfile.mkdtemp(prefix='kmgmt-cwd-')
    os.chmod(private, 0o700)
    os.chdir(private)
    try:
        yield private
    finally:
        os.chdir(before)
        shutil.rmtree(private, ignore_errors=True)
