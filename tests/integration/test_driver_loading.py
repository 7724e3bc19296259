"""Tacker loads our driver through its own DriverManager and entry points."""

import importlib
import inspect
from importlib import metadata

import pytest

from mgmt_driver import DRIVER_NAME
from mgmt_driver import kubespray_mgmt
from mgmt_driver.adapters import csar
from mgmt_driver.common import exceptions
from mgmt_driver.common import tacker_compat
from tests.packages import MGMT_NAMESPACE
from tests.packages import NOOP_DRIVER

pytest.importorskip('tacker')
# Imported after the skip; a broken tacker install must fail, not skip.
tacker_exceptions = importlib.import_module('tacker.common.exceptions')
vnflcm_abstract_driver = importlib.import_module(
    'tacker.vnfm.mgmt_drivers.vnflcm_abstract_driver')


def test_entry_point_is_registered():
    (entry,) = [e for e in metadata.entry_points(group=MGMT_NAMESPACE)
                if e.name == DRIVER_NAME]
    assert entry.value == 'mgmt_driver.kubespray_mgmt:KubesprayMgmtDriver'


def test_driver_manager_loads_both_configured_drivers(mgmt_manager):
    # stevedore skips a driver that fails to load, silently: check both.
    assert DRIVER_NAME in mgmt_manager
    assert NOOP_DRIVER in mgmt_manager
    driver = mgmt_manager[DRIVER_NAME]
    assert type(driver) is kubespray_mgmt.KubesprayMgmtDriver


def test_loaded_class_is_a_complete_tacker_driver(mgmt_manager):
    cls = type(mgmt_manager[DRIVER_NAME])
    base = vnflcm_abstract_driver.VnflcmMgmtAbstractDriver
    assert issubclass(cls, base)
    assert not cls.__abstractmethods__
    assert len(base.__abstractmethods__) == 15
    # Tacker instantiates drivers without arguments.
    assert list(inspect.signature(cls).parameters) == []


def test_driver_is_stored_under_its_configured_name(mgmt_manager):
    """DriverManager keys by get_type(); the config uses the entry name."""
    driver = mgmt_manager[DRIVER_NAME]
    assert driver.get_type() == DRIVER_NAME
    assert driver.get_name() == DRIVER_NAME
    assert driver.get_description()


def test_conductor_start_hashes_the_shim_module(lcm_driver):
    hashes = lcm_driver._mgmt_driver_hash
    assert set(hashes) == {NOOP_DRIVER, DRIVER_NAME}
    installed = inspect.getfile(kubespray_mgmt.KubesprayMgmtDriver)
    assert installed == str(csar.driver_module_path())
    assert hashes[DRIVER_NAME] == csar.tacker_hash(installed)


@pytest.mark.parametrize('name', [
    'MgmtDriverOtherError', 'MgmtDriverParamInvalid', 'MgmtDriverNotFound',
    'MgmtDriverRemoteCommandError', 'MgmtDriverRemoteCommandTimeOut',
    'TackerException'])
def test_compat_exposes_tackers_own_exceptions(name):
    assert tacker_compat.TACKER_AVAILABLE
    assert getattr(tacker_compat, name) is getattr(tacker_exceptions, name)


def test_compat_base_class_is_tackers():
    assert tacker_compat.VnflcmMgmtAbstractDriver is \
        vnflcm_abstract_driver.VnflcmMgmtAbstractDriver


def test_our_errors_format_with_tackers_base_class():
    error = exceptions.CsarError(reason='no TOSCA.meta')
    assert isinstance(error, tacker_exceptions.MgmtDriverParamInvalid)
    assert str(error) == 'CSAR build failed: no TOSCA.meta'
    other = exceptions.MgmtDriverOtherError(error_message='boom')
    assert str(other) == 'An error occurred in MgmtDriver: boom.'
