"""Paths and helpers for tests that build the CSAR VNF packages.

The ETSI SOL001 files are test data kept outside the repository
(``../shared/etsi-sol001-2.6.1`` next to the checkout, or the directory
named by ``KMGMT_SOL001_DIR``); a test that needs them skips when they are
absent.  The load balancer script comes from ``mgmt_driver/templates``;
while it does not exist yet, :func:`lb_script` writes a stand-in.
"""

import os
import pathlib
import shutil
import zipfile

import pytest

from mgmt_driver.adapters import csar

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGES_DIR = REPO / 'vnf_packages'
SAMPLES_DIR = REPO / 'samples'
SOL001_DIR = pathlib.Path(os.environ.get(
    'KMGMT_SOL001_DIR', REPO.parent / 'shared' / 'etsi-sol001-2.6.1'))

#: package source name -> its deployment flavour id.
FLAVOURS = {'kubespray_simple': 'simple', 'kubespray_ha': 'ha',
            'kubespray_ha_lb': 'ha_lb'}
#: package source name -> VNFD descriptor_id.
DESCRIPTOR_IDS = {
    'kubespray_simple': '32de6835-93cc-47f0-bbab-03b902a877ad',
    'kubespray_ha': '755c05e4-ee20-45bd-943b-22acb198dd66',
    'kubespray_ha_lb': '00ef90aa-ec79-416e-af2b-75ef47bb95b0',
}
#: Tacker's entry point group of mgmt drivers, and its default driver.
MGMT_NAMESPACE = 'tacker.tacker.mgmt.drivers'
NOOP_DRIVER = 'vnflcm_noop'
#: Hooks the VNFDs map to our driver; Tacker runs vnflcm_noop for others.
# terminate_start: kubespray.reset_on_terminate runs reset.yml there,
# while the VMs still exist; modify_information_end: a PATCH's
# vnf_metadata.kube_version upgrades the cluster.
DRIVER_HOOKS = ('instantiate_end', 'scale_start', 'scale_end', 'heal_start',
                'heal_end', 'terminate_start', 'terminate_end',
                'modify_information_end')
NOOP_HOOKS = ('instantiate_start',
              'change_external_connectivity_start',
              'change_external_connectivity_end',
              'modify_information_start')

_STAND_IN_LB_SCRIPT = b'#!/bin/sh\n# stand-in used by the tests\nexit 0\n'


def sol001_dir():
    """The SOL001 directory, or skip the test when it is not there."""
    if not all((SOL001_DIR / n).is_file() for n in csar.SOL001_FILES):
        pytest.skip('ETSI SOL001 files not found in %s (set '
                    'KMGMT_SOL001_DIR)' % SOL001_DIR)
    return SOL001_DIR


def lb_script(tmp_dir):
    """The real LB script, or a stand-in written into *tmp_dir*."""
    real = csar.lb_script_path()
    if real.is_file():
        return real
    stand_in = pathlib.Path(tmp_dir) / 'install_external_lb.sh'
    stand_in.write_bytes(_STAND_IN_LB_SCRIPT)
    return stand_in


def extract(zip_path, directory):
    """Extract a built CSAR into *directory*; return the directory."""
    directory = pathlib.Path(directory)
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(directory)
    return directory


def copy_tree(src, dst):
    """Copy a package directory (tests then modify the copy)."""
    shutil.copytree(src, dst)
    return pathlib.Path(dst)


def zip_dir(directory, zip_path):
    """Zip an extracted package again (after a test changed it)."""
    directory = pathlib.Path(directory)
    files = {p.relative_to(directory).as_posix(): p.read_bytes()
             for p in sorted(directory.rglob('*')) if p.is_file()}
    pathlib.Path(zip_path).write_bytes(csar.zip_bytes(files))
    return pathlib.Path(zip_path)
