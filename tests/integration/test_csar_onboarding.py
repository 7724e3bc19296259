"""Tacker's CSAR loader onboards both built packages."""

import hashlib
import importlib
import pathlib
import re
import uuid
import zipfile

import pytest

from mgmt_driver.adapters import csar
from tests import packages

pytest.importorskip('tacker')
csar_utils = importlib.import_module('tacker.common.csar_utils')
tacker_exceptions = importlib.import_module('tacker.common.exceptions')
vnflcm_utils = importlib.import_module('tacker.vnflcm.utils')

NAMES = sorted(packages.FLAVOURS)


@pytest.mark.parametrize('name', NAMES)
def test_load_csar_data_accepts_the_package(onboarded, name):
    vnf_data, flavours, artifacts, _ = onboarded[name]
    assert vnf_data['descriptor_id'] == packages.DESCRIPTOR_IDS[name]
    assert vnf_data['vnfm_info'] == ['Tacker']
    (flavour,) = flavours
    assert flavour['flavour_id'] == packages.FLAVOURS[name]
    levels = flavour['instantiation_levels']
    assert levels['default_level'] == 'instantiation_level_1'
    # What Tacker stores as the flavour's VNFD (used by the user data).
    nodes = flavour['tpl_dict']['topology_template']['node_templates']
    assert {'masterNode', 'workerNode', 'externalLB'} <= set(nodes)
    assert 'VNF' not in nodes  # Tacker strips it (exclude_node)


@pytest.mark.parametrize('name', NAMES)
def test_tosca_meta_hashes_are_verified_by_tacker(onboarded, built_csars,
                                                  name):
    artifacts = {a['Source']: a for a in onboarded[name][2]}
    with zipfile.ZipFile(built_csars[name]) as archive:
        expected = sorted(n for n in archive.namelist()
                          if n.startswith(csar.HASHED_DIRS))
        digests = {n: hashlib.sha256(archive.read(n)).hexdigest()
                   for n in expected}
    assert sorted(artifacts) == expected
    for name_, artifact in artifacts.items():
        assert artifact['Algorithm'] == 'SHA-256'
        assert artifact['Hash'] == digests[name_]


def test_package_uses_the_sol001_files_of_installed_tacker(built_csars):
    """Built without --sol001-dir: the copies come from the tacker wheel."""
    tacker_dir = pathlib.Path(importlib.import_module('tacker').__file__
                              ).parent.joinpath(*csar.TACKER_SOL001_DIR)
    with zipfile.ZipFile(built_csars['kubespray_simple']) as archive:
        for name in csar.SOL001_FILES:
            assert archive.read('Definitions/' + name) == \
                (tacker_dir / name).read_bytes()


@pytest.mark.parametrize('name', NAMES)
def test_our_check_agrees(built_csars, name):
    assert csar.check(built_csars[name]) == []


def test_tacker_refuses_a_wrong_hash(built_csars, tacker_conf, tmp_path):
    extracted = packages.extract(built_csars['kubespray_simple'],
                                 tmp_path / 'pkg')
    meta = extracted / csar.TOSCA_META
    meta.write_text(re.sub(
        r'(Name: Scripts/kubespray_mgmt.py\n.*\n.*\nHash: )\w+',
        r'\g<1>' + 'a' * 64, meta.read_text()))
    tampered = packages.zip_dir(extracted, tmp_path / 'tampered.zip')
    # Both Tacker and our check refuse it, naming the same file.
    with pytest.raises(tacker_exceptions.InvalidCSAR) as info:
        csar_utils.load_csar_data(None, str(uuid.uuid4()), str(tampered))
    assert 'Scripts/kubespray_mgmt.py' in str(info.value)
    assert 'is an invalid value' in str(info.value)
    (problem,) = csar.check(tampered)
    assert 'hash of Scripts/kubespray_mgmt.py does not match' in problem


@pytest.mark.parametrize('name', NAMES)
def test_tackers_v1_flavour_reader_finds_the_vnf_node(package_dirs, name):
    vnfd = vnflcm_utils._get_vnfd_dict(
        None, packages.DESCRIPTOR_IDS[name], packages.FLAVOURS[name])
    vnf = vnfd['topology_template']['node_templates']['VNF']
    assert sorted(vnf['interfaces']['Vnflcm']) == \
        sorted(packages.DRIVER_HOOKS)
    # Imports were made absolute against the package directory.
    for path in vnfd['imports']:
        assert pathlib.Path(path).is_file()
