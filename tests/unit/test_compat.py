"""Stand-ins for Tacker's classes (tests/integration checks the real ones)."""

import pytest

from mgmt_driver.common import exceptions
from mgmt_driver.common import tacker_compat
from mgmt_driver.remote import ssh

needs_standins = pytest.mark.skipif(
    tacker_compat.TACKER_AVAILABLE,
    reason='optional: tacker is installed (its own classes are used)')


@needs_standins
@pytest.mark.parametrize('cls, kwargs, text', [
    (tacker_compat.MgmtDriverOtherError, {'error_message': 'boom'},
     'An error occurred in MgmtDriver: boom.'),
    (tacker_compat.MgmtDriverParamInvalid, {'param': 'pod_cidr'},
     'The pod_cidr in the additionalParams is invalid.'),
    (tacker_compat.MgmtDriverNotFound, {'param': 'ansible'},
     'The ansible in the additionalParams does not exist.'),
    (tacker_compat.MgmtDriverRemoteCommandError, {'err_info': 'x'},
     'Failed to execute remote command.'),
    (tacker_compat.MgmtDriverRemoteCommandTimeOut, {},
     'The execution of the remote command timed out.'),
])
def test_standin_messages_match_tacker(cls, kwargs, text):
    assert str(cls(**kwargs)) == text
    assert cls(**kwargs).code == 500


@needs_standins
def test_unfillable_template_falls_back_and_explicit_message_wins():
    assert str(tacker_compat.MgmtDriverNotFound()) == \
        'The %(param)s in the additionalParams does not exist.'
    assert str(tacker_compat.MgmtDriverNotFound('custom')) == 'custom'


def test_remote_command_failed_keeps_the_detail():
    result = ssh.CommandResult('10.0.0.5', 'ansible-playbook cluster.yml',
                               '', 'line1\nfatal: boom\n', 2)
    exc = exceptions.RemoteCommandFailed(result)
    assert isinstance(exc, tacker_compat.MgmtDriverRemoteCommandError)
    assert exc.result is result
    text = str(exc)
    assert '10.0.0.5' in text and 'cluster.yml' in text
    assert 'exit code 2' in text and 'fatal: boom' in text


def test_timeout_error_names_host_and_limit():
    result = ssh.CommandResult('h1', 'sleep 99', 'partial\n', '', -1)
    exc = exceptions.RemoteCommandTimedOut(result, 5)
    assert isinstance(exc, tacker_compat.MgmtDriverRemoteCommandTimeOut)
    assert 'h1' in str(exc) and '5 s' in str(exc) and 'partial' in str(exc)
