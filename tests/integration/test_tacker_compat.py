"""mgmt_driver.common.tacker_compat against the real tacker package from
PyPI."""

import inspect

import pytest

pytest.importorskip('tacker')

from tacker.common import exceptions as tacker_exceptions  # noqa: E402
from tacker.vnfm.mgmt_drivers import vnflcm_abstract_driver  # noqa: E402

from mgmt_driver import kubespray_mgmt  # noqa: E402
from mgmt_driver.adapters import v2  # noqa: E402
from mgmt_driver.common import exceptions  # noqa: E402
from mgmt_driver.common import tacker_compat  # noqa: E402
from mgmt_driver.remote import ssh  # noqa: E402
from tests.unit import test_startup  # noqa: E402


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


def test_v2_scripts_do_not_import_tacker():
    # Tacker reads a v2 script's failure from its stderr: the stand-ins
    # say the same, and Tacker's modules are not worth their start-up.
    names = test_startup.DEFERRED + ('tacker',)
    assert test_startup.script_run(v2.script_path(), names, {
        'operation': 'modify_information_start',
        'vnf_instance': {'id': 'i-1'}, 'request': {}}) == ([0], {})
    assert test_startup.script_run(v2.coordinate_script_path(), names,
                                   'not a mapping') == ([1], None)


def test_the_command_does_not_import_tacker():
    # A command reports an error by its message and exit status: the
    # stand-ins say the same, and Tacker's modules cost every command.
    names = test_startup.DEFERRED + ('tacker',)
    assert test_startup.command_run(['--version'], names) == [0]
    assert test_startup.command_run(['params', 'check', '/nonexistent'],
                                    names) == [1]


def test_without_tacker_refuses_once_tackers_classes_are_in_use():
    assert tacker_compat.TACKER_AVAILABLE
    with pytest.raises(RuntimeError, match='in use already'):
        tacker_compat.without_tacker()
    assert tacker_compat.MgmtDriverOtherError is \
        tacker_exceptions.MgmtDriverOtherError
