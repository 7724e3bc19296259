"""What version of the driver this is: ``kubespray-mgmt --version``, and
the ``Created-By`` line of the CSARs ``csar build`` makes.

The package's version as installed (pbr derives it from git at install
time), and, when the package is imported from a git checkout (a source
tree, an editable install), ``git describe`` of that checkout: the
installed metadata may then be older than the code that runs.
"""

import functools
import os
import subprocess

DISTRIBUTION = 'mgmt-driver-kubespray'
#: The package's own directory (this module is in ``common/``).
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def package_version():
    """The installed distribution's version, or None when this code is
    not the installed copy (a source tree on ``PYTHONPATH``)."""
    from importlib import metadata
    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None
    mine = os.path.join(_PACKAGE_DIR, '__init__.py')
    installed = dist.locate_file(os.path.join('mgmt_driver', '__init__.py'))
    if os.path.exists(installed) and not os.path.samefile(installed, mine):
        return None  # an older copy is installed; this one is not it
    return dist.version


def git_describe(directory=None):
    """``git describe --tags --always --dirty`` of the checkout holding
    the package, or None (no checkout, no git)."""
    top = os.path.dirname(directory or _PACKAGE_DIR)
    if not os.path.exists(os.path.join(top, '.git')):
        return None
    try:
        result = subprocess.run(
            ['git', 'describe', '--tags', '--always', '--dirty'], cwd=top,
            capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    text = result.stdout.strip()
    return text[:80] if result.returncode == 0 and text else None


@functools.cache
def version_text():
    """``0.1.0``, ``0.1.0 (git v0.1.0-3-gabc1234)``, ``unknown (git
    abc1234-dirty)`` or ``unknown``."""
    installed = package_version() or 'unknown'
    described = git_describe()
    return '%s (git %s)' % (installed, described) if described \
        else installed
