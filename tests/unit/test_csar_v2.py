"""kubespray-mgmt csar build / check of the Tacker v2 package source.

The v2 package carries the installed v2 script (``mgmt_driver.adapters.v2``) as
``Scripts/kubespray_mgmt_v2.py``, named from its flavour as a Python
artifact whose path is relative to ``Definitions/`` (Tacker v2's rule).
"""

import pathlib
import re

import pytest

from mgmt_driver.adapters import cli
from mgmt_driver.adapters import csar
from mgmt_driver.adapters import v2
from tests import packages

V2_PACKAGE = 'kubespray_v2_simple'
V2_PACKAGES = (V2_PACKAGE, 'kubespray_v2_ha')
DF = 'Definitions/kubespray_v2_simple_df.yaml'


def _build(tmp, name):
    out = tmp / (name + '.zip')
    rc = cli.main(['csar', 'build', str(packages.PACKAGES_DIR / name),
                   '-o', str(out), '--sol001-dir',
                   str(packages.sol001_dir())])
    assert rc == cli.EXIT_OK
    return out


@pytest.fixture(scope='module')
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('csar_v2')
    lb = packages.lb_script(tmp)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(csar, 'lb_script_path', lambda: lb)
        return {name: _build(tmp, name)
                for name in V2_PACKAGES + ('kubespray_simple',)}


@pytest.fixture
def extracted(built, tmp_path):
    return packages.extract(built[V2_PACKAGE], tmp_path / 'pkg')


@pytest.mark.parametrize('name', V2_PACKAGES)
def test_v2_package_carries_the_installed_script(built, name, tmp_path,
                                                 capsys):
    extracted = packages.extract(built[name], tmp_path / 'pkg')
    script = extracted / v2.SCRIPT
    assert script.read_bytes() == pathlib.Path(v2.script_path()).read_bytes()
    meta = (extracted / csar.TOSCA_META).read_text()
    assert re.search(r'Name: %s\nContent-Type: text/x-python\n' % v2.SCRIPT,
                     meta)
    capsys.readouterr()
    assert cli.main(['csar', 'check', str(built[name])]) == cli.EXIT_OK
    assert capsys.readouterr().out.strip() == '%s: OK' % built[name]


def test_v1_package_does_not_carry_the_v2_script(built, tmp_path):
    v1 = packages.extract(built['kubespray_simple'], tmp_path / 'v1')
    assert not (v1 / v2.SCRIPT).exists()


def _retag(extracted, old, new):
    df = extracted / DF
    df.write_text(df.read_text().replace(old, new))


def test_stale_v2_script(extracted):
    script = extracted / v2.SCRIPT
    script.write_bytes(script.read_bytes() + b'# older release\n')
    problems = csar.check(extracted)
    assert ('flavour simple (%s): artifact %s: ../%s differs from the '
            'installed %s: rebuild the package'
            % (DF, v2.ARTIFACT, v2.SCRIPT, v2.script_path())) in problems


def test_v2_script_path_is_relative_to_definitions(extracted):
    _retag(extracted, 'file: ../Scripts/kubespray_mgmt_v2.py',
           'file: Scripts/kubespray_mgmt_v2.py')
    assert csar.check(extracted) == [
        'flavour simple (%s): artifact %s: file Scripts/kubespray_mgmt_v2.py '
        'is not in the package (Tacker v2 resolves it against Definitions/: '
        '../%s)' % (DF, v2.ARTIFACT, v2.SCRIPT)]


def test_v2_script_must_be_a_python_artifact(extracted):
    _retag(extracted, 'type: tosca.artifacts.Implementation.Python',
           'type: tosca.artifacts.Implementation.Bash')
    problems = csar.check(extracted)
    assert 'flavour simple (%s): artifact %s: type must be %s (Tacker v2 ' \
        'refuses others)' % (DF, v2.ARTIFACT, csar.PYTHON_ARTIFACT) in \
        problems
