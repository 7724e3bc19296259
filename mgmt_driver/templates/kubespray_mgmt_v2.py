"""Kubespray MgmtDriver: the Tacker v2 management-driver script.

Tacker's v2 conductor runs this file with its own interpreter, a pickled
dict on stdin; the result, if any, is a pickled dict on stdout, and a
failure a message on stderr with a non-zero exit status.  Everything else
is in the installed ``mgmt_driver`` package (``mgmt_driver.adapters.v2``): this
file changes only when that contract does.  ``kubespray-mgmt csar build``
copies it into the package as ``Scripts/kubespray_mgmt_v2.py``.
"""

import sys

if __name__ == '__main__':
    # Tacker reads a failure from stderr, never by its class: Tacker's
    # exceptions module need not be imported (see tacker_compat).
    from mgmt_driver.common import tacker_compat
    tacker_compat.without_tacker()
    from mgmt_driver.adapters import v2

    sys.exit(v2.main())
