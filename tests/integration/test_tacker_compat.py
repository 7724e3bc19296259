"""mgmt_driver.common.tacker_compat against the real tacker package from
PyPI."""

import inspect

import pytest

pytest.importorskip('tacker')

from tacker.common import exceptions as tacker_exceptions  # noqa: E402
from tacker.vnfm.mgmt_drivers import vnflcm_abstract_driver  # noqa: E402

from mgmt_driver import kubespray_mgmt  # noqa: E402
from mgmt_driver.common import exceptions  # noqa: E402
from mgmt_driver.common import tacker_compat  # noqa: E402
from mgmt_driver.remote import ssh  # noqa: E402


def test_tacker_classes_are_used():
    assert tacker_compat.TACKER_AVAILABLE
    assert tacker_compat.VnflcmMgmtAbstractDriver is \
        vnflcm_abstract_driver.VnflcmMgmtAbstractDriver
    for name in ('MgmtDriverOtherError', 'MgmtDriverParamInvalid',
                 'MgmtDriverNotFound', 'MgmtDriverRemoteCommandError',
                 'MgmtDriverRemoteCommandTimeOut'):
        assert getattr(tacker_compat, name) is getattr(tacker_exceptions,
                                                       name)


def test_driver_is_a_complete_tacker_driver():
    cls = kubespray_mgmt.KubesprayMgmtDriver
    assert issubclass(cls, vnflcm_abstract_driver.VnflcmMgmtAbstractDriver)
    assert not inspect.isabstract(cls)
    assert cls().get_type() == 'mgmt-drivers-kubespray'


def test_our_errors_are_tacker_errors_with_detail():
    result = ssh.CommandResult('10.0.0.7', 'ansible-playbook cluster.yml',
                               '', 'fatal: unreachable\n', 4)
    exc = exceptions.RemoteCommandFailed(result)
    assert isinstance(exc, tacker_exceptions.MgmtDriverRemoteCommandError)
    assert isinstance(exc, tacker_exceptions.TackerException)
    assert '10.0.0.7' in str(exc) and 'fatal: unreachable' in str(exc)
    timeout = exceptions.RemoteCommandTimedOut(result, 9)
    assert isinstance(timeout,
                      tacker_exceptions.MgmtDriverRemoteCommandTimeOut)
    assert 'timed out after 9 s' in str(timeout)


def test_entry_point_loads_through_tackers_driver_manager():
    from tacker.common import driver_manager
    manager = driver_manager.DriverManager(
        'tacker.tacker.mgmt.drivers', ['mgmt-drivers-kubespray'])
    assert manager.invoke('mgmt-drivers-kubespray', 'get_type') == \
        'mgmt-drivers-kubespray'
