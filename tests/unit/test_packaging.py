"""What the two distributions of this repository install.

``pip install .`` (what a Tacker conductor gets) is the driver with its
remote programs and templates, without the local test site; the site is
``localsite-dist/`` (setup.py says why).  Both wheels are built once,
from a copy of the tracked files (pbr lists a package's files with git).
"""

import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SITE = 'mgmt_driver/localsite/'
#: What the two builds read (pbr: setup.cfg's files and requirements).
_BUILD_INPUTS = ('setup.py', 'setup.cfg', 'README.rst', 'requirements.txt',
                 'test-requirements.txt', 'mgmt_driver/', 'localsite-dist/')


def _tracked():
    try:
        out = subprocess.run(['git', 'ls-files', '-z'], cwd=ROOT, check=True,
                             capture_output=True, timeout=60).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip('needs a git checkout of the repository: %s' % exc)
    return [name for name in out.decode().split('\0')
            if name and os.path.lexists(ROOT / name)]


def _copy(names, target):
    for name in names:
        source, copy = ROOT / name, target / name
        copy.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            copy.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, copy)


def _wheels(sources, out):
    """The wheels of *sources* (one pip: its start is most of the cost)."""
    done = subprocess.run(
        [sys.executable, '-m', 'pip', 'wheel', '-q', '--no-deps',
         '--no-build-isolation', '--disable-pip-version-check', '-w',
         str(out)] + [str(source) for source in sources],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, PBR_VERSION='0.0.0', SKIP_GENERATE_AUTHORS='1',
                 SKIP_WRITE_GIT_CHANGELOG='1'))
    assert done.returncode == 0, done.stderr[-4000:]
    return {path.name.split('-')[0]: zipfile.ZipFile(path)
            for path in out.glob('*.whl')}


@pytest.fixture(scope='module')
def wheels(tmp_path_factory):
    if not (importlib.util.find_spec('wheel') or importlib.util.find_spec(
            'setuptools.command.bdist_wheel')):
        pytest.skip('building a wheel needs setuptools>=70.1 or wheel '
                    '(test-requirements.txt)')
    tmp = tmp_path_factory.mktemp('packaging')
    names = _tracked()
    source = tmp / 'src'
    _copy([n for n in names if n.startswith(_BUILD_INPUTS)], source)
    subprocess.run(['git', 'init', '-q'], cwd=source, check=True)
    subprocess.run(['git', 'add', '-A'], cwd=source, check=True)
    built = _wheels([source, source / 'localsite-dist'], tmp / 'out')
    return (names, built['mgmt_driver_kubespray'],
            built['mgmt_driver_kubespray_localsite'])


def _files(wheel):
    return {name for name in wheel.namelist()
            if '.dist-info/' not in name}


def _requires(wheel):
    metadata = next(n for n in wheel.namelist()
                    if n.endswith('.dist-info/METADATA'))
    return [line.split(':', 1)[1].strip() for line in
            wheel.read(metadata).decode().splitlines()
            if line.startswith('Requires-Dist:')]


def test_a_plain_install_is_the_driver_without_the_test_site(wheels):
    names, driver, _ = wheels
    files = _files(driver)
    assert not {name for name in files if name.startswith(SITE)}
    # every other file of the package, the remote programs included
    assert files == {name for name in names
                     if name.startswith('mgmt_driver/')
                     and not name.startswith(SITE)}
    assert 'mgmt_driver/scripts/lib/ws_guard.sh' in files


def test_the_site_distribution_is_the_whole_site_and_only_it(wheels):
    names, _, site = wheels
    assert _files(site) == {name for name in names
                            if name.startswith(SITE)}
    requires = _requires(site)
    assert 'mgmt-driver-kubespray' in requires
    assert any(r.startswith('ansible-core') for r in requires)
