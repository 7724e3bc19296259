"""Tacker's VNFD interface lookup and mgmt-driver hash check.

``VnfLcmDriver._load_vnf_interface`` runs before every hook: it reads the
hook's ``implementation`` from the onboarded package's VNFD and, for our
driver, compares the package's ``Scripts/kubespray_mgmt.py`` with the
installed module (``_check_mgmt_driver``).
"""

import importlib

import pytest

from mgmt_driver import DRIVER_NAME
from mgmt_driver.adapters import csar
from tests import packages

pytest.importorskip('tacker')
tacker_exceptions = importlib.import_module('tacker.common.exceptions')
vnflcm_utils = importlib.import_module('tacker.vnflcm.utils')

NAMES = sorted(packages.FLAVOURS)


def _vnfd(name):
    return vnflcm_utils._get_vnfd_dict(
        None, packages.DESCRIPTOR_IDS[name], packages.FLAVOURS[name])


def _instance(objects, name):
    return objects.VnfInstance(vnfd_id=packages.DESCRIPTOR_IDS[name])


@pytest.mark.parametrize('name', NAMES)
@pytest.mark.parametrize('hook', packages.DRIVER_HOOKS)
def test_listed_hooks_resolve_to_our_driver(lcm_driver, package_dirs,
                                            objects, name, hook):
    driver = lcm_driver._load_vnf_interface(
        None, hook, _instance(objects, name), _vnfd(name))
    assert driver == DRIVER_NAME


@pytest.mark.parametrize('name', NAMES)
@pytest.mark.parametrize('hook', packages.NOOP_HOOKS)
def test_other_hooks_resolve_to_noop(lcm_driver, package_dirs, objects,
                                     name, hook):
    driver = lcm_driver._load_vnf_interface(
        None, hook, _instance(objects, name), _vnfd(name))
    assert driver == packages.NOOP_DRIVER


@pytest.mark.parametrize('name', NAMES)
def test_modified_artifact_is_refused(lcm_driver, package_dirs, objects,
                                      name):
    shim = package_dirs[name] / csar.DRIVER_ARTIFACT
    shim.write_text(shim.read_text() + '# local change\n')
    with pytest.raises(tacker_exceptions.MgmtDriverHashMatchFailure):
        lcm_driver._load_vnf_interface(
            None, 'instantiate_end', _instance(objects, name), _vnfd(name))


def test_line_endings_do_not_matter_to_tacker(lcm_driver, package_dirs,
                                              objects):
    """Tacker hashes in text mode; csar.tacker_hash must agree."""
    shim = package_dirs['kubespray_simple'] / csar.DRIVER_ARTIFACT
    shim.write_bytes(shim.read_bytes().replace(b'\n', b'\r\n'))
    assert csar.tacker_hash(shim) == csar.tacker_hash(
        csar.driver_module_path())
    driver = lcm_driver._load_vnf_interface(
        None, 'scale_end', _instance(objects, 'kubespray_simple'),
        _vnfd('kubespray_simple'))
    assert driver == DRIVER_NAME


def test_driver_missing_from_config_is_inconsistent(lcm_driver, package_dirs,
                                                    objects):
    # As if vnflcm_mgmt_driver listed only vnflcm_noop.
    lcm_driver._mgmt_driver_hash = {
        packages.NOOP_DRIVER:
            lcm_driver._mgmt_driver_hash[packages.NOOP_DRIVER]}
    with pytest.raises(tacker_exceptions.MgmtDriverInconsistent) as info:
        lcm_driver._load_vnf_interface(
            None, 'heal_end', _instance(objects, 'kubespray_simple'),
            _vnfd('kubespray_simple'))
    assert DRIVER_NAME in str(info.value)
