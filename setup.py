"""Two distributions from this repository (pbr reads setup.cfg).

``mgmt-driver-kubespray`` (this file): the driver, the package
``mgmt_driver``, what a Tacker conductor installs.  The local test site
(the package ``mgmt_localsite``: the kubespray double, the fake kubectl,
the sshd and HAProxy helpers) is ``mgmt-driver-kubespray-localsite``,
built from ``localsite-dist/`` (see its setup.py), which ``tools/demo``
installs beside it.
"""

import setuptools

if __name__ == '__main__':
    setuptools.setup(
        setup_requires=['pbr>=5.8.0'],
        pbr=True)
