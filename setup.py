"""Two distributions from this repository (pbr reads setup.cfg).

``mgmt-driver-kubespray`` (this file): the driver, what a Tacker
conductor installs.  It leaves out the local test site,
``mgmt_driver/localsite/`` (the kubespray double, the fake kubectl, the
sshd and HAProxy helpers): that is ``mgmt-driver-kubespray-localsite``,
built from ``localsite-dist/`` (see its setup.py), which ``tools/demo``
installs beside it.  Tests and tools/run-tests use the source tree, where
both are.
"""

import setuptools
from setuptools.command import build_py

#: The package this distribution leaves out.
SITE = 'mgmt_driver.localsite'


def _in_site(name):
    return name == SITE or name.startswith(SITE + '.')


class BuildPy(build_py.build_py):
    """build_py without the test site's modules and files."""

    command_name = 'build_py'  # the name pbr registers it under

    def finalize_options(self):
        super().finalize_options()
        self.packages = [p for p in self.packages or [] if not _in_site(p)]

    def find_data_files(self, package, src_dir):
        site_dir = SITE.replace('.', '/') + '/'
        return [path for path in super().find_data_files(package, src_dir)
                if not path.replace('\\', '/').startswith(site_dir)]


# pbr sets the commands itself: setup.cfg's [global] commands names
# BuildPy, which pbr imports from this file as the module "setup".
if __name__ == '__main__':
    setuptools.setup(
        setup_requires=['pbr>=5.8.0'],
        pbr=True)
