"""Kubespray MgmtDriver: the Tacker v2 coordinate-VNF script.

Tacker's v2 rolling update (Change current VNF package, ``upgrade_type:
RollingUpdate``) runs this file with its own interpreter after it
replaced each VNFC's VM, a pickled dict on stdin; a non-zero exit fails
the operation with stderr as its detail.  It brings that node back into
the cluster and takes the next one out (``mgmt_driver.operations.rolling``).
``kubespray-mgmt csar build`` copies it into the package as
``Scripts/kubespray_coordinate_v2.py``; the request names it as both
``lcm-operation-coordinate-new-vnf`` and ``-old-vnf``.
"""

import sys

if __name__ == '__main__':
    # Tacker reads a failure from stderr, never by its class: Tacker's
    # exceptions module need not be imported (see tacker_compat).
    from mgmt_driver.common import tacker_compat
    tacker_compat.without_tacker()
    from mgmt_driver.adapters import v2

    sys.exit(v2.coordinate_main())
