"""What the two distributions of this repository install.

``pip install .`` (what a Tacker conductor gets) is the driver with its
remote programs and templates, without the local test site; the site is
the top-level package ``mgmt_localsite`` of ``localsite-dist/`` (setup.py
says why).  Both wheels are built once, from a copy of the tracked files
(pbr lists a package's files with git); both distributions install side
by side, editable or not.
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
SITE = 'localsite-dist/mgmt_localsite/'
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
                     if name.startswith('mgmt_driver/')}
    assert 'mgmt_driver/remote/scripts/lib/ws_guard.sh' in files


def test_the_site_distribution_is_the_whole_site_and_only_it(wheels):
    names, _, site = wheels
    assert _files(site) == {name[len('localsite-dist/'):] for name in names
                            if name.startswith(SITE)}
    requires = _requires(site)
    assert 'mgmt-driver-kubespray' in requires
    assert any(r.startswith('ansible-core') for r in requires)


#: Run by the installed copies: both packages, the driver's root names
#: and a module of each layer, from where pip put them.
_PROBE = """
import sys
import mgmt_driver, mgmt_localsite
from mgmt_driver import DRIVER_NAME
from mgmt_driver.adapters import cli, v1
from mgmt_driver.session import driver
import mgmt_localsite.lab
for module in (mgmt_driver, mgmt_localsite):
    assert module.__file__.startswith(sys.argv[1]), module.__file__
print(DRIVER_NAME)
"""


def _probe(python, where, env=None):
    # (cwd: "-c" puts the working directory first on sys.path.)
    done = subprocess.run([str(python), '-c', _PROBE, str(where)],
                          capture_output=True, text=True, timeout=120,
                          env=env, cwd=str(where.parent))
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip() == 'mgmt-drivers-kubespray'


def test_both_wheels_install_side_by_side(wheels, tmp_path):
    # The old layout's site wheel made site-packages/mgmt_driver/ and hid
    # an editable driver; now each distribution has a package of its own.
    target = tmp_path / 'target'
    for wheel in wheels[1:]:
        with wheel:
            wheel.extractall(target)
    _probe(sys.executable, target,
           dict(os.environ, PYTHONPATH=str(target)))


def test_both_install_editable_side_by_side(tmp_path):
    # "pip install -e . -e ./localsite-dist", in a venv of its own whose
    # only other path is this environment's site-packages (for the
    # dependencies and the build tools), not its editable installs.
    source = tmp_path / 'src'
    _copy([n for n in _tracked() if n.startswith(_BUILD_INPUTS)], source)
    subprocess.run(['git', 'init', '-q'], cwd=source, check=True)
    subprocess.run(['git', 'add', '-A'], cwd=source, check=True)
    venv = tmp_path / 'venv'
    subprocess.run([sys.executable, '-m', 'venv', '--without-pip',
                    str(venv)], check=True, timeout=120)
    python = venv / 'bin' / 'python'
    site_dir = subprocess.run(
        [str(python), '-c', 'import sysconfig; '
         'print(sysconfig.get_paths()["purelib"])'],
        capture_output=True, text=True, check=True).stdout.strip()
    ours = [p for p in sys.path if p.endswith('site-packages')]
    pathlib.Path(site_dir, 'deps.pth').write_text('\n'.join(ours) + '\n')
    done = subprocess.run(
        [sys.executable, '-m', 'pip', '--python', str(python), 'install',
         '-q', '--no-deps', '--no-build-isolation',
         '--disable-pip-version-check', '-e', str(source), '-e',
         str(source / 'localsite-dist')],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, PBR_VERSION='0.0.0'))
    assert done.returncode == 0, done.stderr[-4000:]
    # Nor a PYTHONPATH of the caller's (a checkout on it would be found
    # before the editable installs).
    _probe(python, source, {k: v for k, v in os.environ.items()
                            if k != 'PYTHONPATH'})
