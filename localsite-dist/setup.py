"""mgmt-driver-kubespray-localsite: the local test site, packaged apart.

The site (``localsite-dist/mgmt_localsite/``: the kubespray test double, the
fake kubectl and sudo, the sshd, HAProxy and etcd helpers, the demo) is not
part of the driver a Tacker conductor loads, so the driver's distribution
(``mgmt-driver-kubespray``, the repository's setup.py) leaves it out and this
one ships it: the same package path, ``mgmt_localsite``, installed into the
same environment beside the driver, from the same files
(``mgmt_driver/localsite`` here is a link to them).  ``tools/demo`` installs
both::

    pip install '.[demo]' ./localsite-dist

Tests and ``tools/run-tests`` import the site from the source tree and
install neither.
"""

import setuptools

SITE = 'mgmt_localsite'

setuptools.setup(
    name='mgmt-driver-kubespray-localsite',
    # Not released on its own: installed with the driver of the same
    # clone (its version is pbr's, from git).
    version='0.0.0',
    description='Local test site of mgmt-driver-kubespray (kubespray test '
                'double, fake kubectl, sshd and HAProxy helpers, demo)',
    license='Apache-2.0',
    python_requires='>=3.10',
    install_requires=[
        'mgmt-driver-kubespray',
        # The site runs the real ansible-playbook, in the range kubespray
        # v2.31.0 (the double it runs) accepts.
        'ansible-core>=2.18,<2.19',
    ],
    packages=[SITE],
    package_data={SITE: [
        'README.rst', 'bin/*', 'kubespray/*.yml', 'kubespray/*.cfg',
        'kubespray/**/*.yml', 'kubespray/**/*.py']},
    include_package_data=False,
    zip_safe=False,
)
