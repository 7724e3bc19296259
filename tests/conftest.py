"""Every test layer: under CI, a missing environment piece is an error.

The functional, integration and CSAR tests skip where this machine lacks
what they run (sshd, haproxy, ansible-playbook, the tacker package, the
SOL001 definitions) or where a port they need is busy.  On a developer's
machine that is a convenience; in CI it would turn missing coverage into
a green run.  So when ``CI`` is set (CI runs ``.ci/run`` with
``CI=true``) or ``KMGMT_STRICT_ENV=1``, every skip becomes a failure that
names what was missing, unless its reason starts with
:data:`OPTIONAL_PREFIX` (a test that does not apply to this machine by
design, not for lack of a tool) and names none of the real parts CI
must have (:data:`REQUIRED_IN_CI`).
"""

import os

import pytest

#: Reasons that never fail a strict run start with this.
OPTIONAL_PREFIX = 'optional: '
#: Real parts CI must have: a skip whose reason names one fails a strict
#: run even when marked optional (it would hide a missing real part).
REQUIRED_IN_CI = ('kubespray', 'zsh')

_TRUE = ('1', 'true', 'yes', 'on')


def strict_environment():
    """True when an environment skip must fail the run (CI)."""
    return (os.environ.get('CI', '').lower() in _TRUE or
            os.environ.get('KMGMT_STRICT_ENV', '').lower() in _TRUE)


def _skip_reason(report):
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def _optional(reason):
    return reason.startswith(OPTIONAL_PREFIX) and not any(
        part in reason.lower() for part in REQUIRED_IN_CI)


def _fail_skip(report, where):
    if not (report.skipped and strict_environment()):
        return
    if getattr(report, 'wasxfail', None) is not None:
        return
    reason = _skip_reason(report)
    if _optional(reason.split('Skipped: ', 1)[-1]):
        return
    report.outcome = 'failed'
    report.longrepr = ('%s skipped under CI (a missing environment piece '
                       'must fail the run): %s' % (where, reason))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_skip(outcome.get_result(), item.nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_skip(outcome.get_result(), collector.nodeid or 'collection')
