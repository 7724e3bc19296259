"""Heat stack parameters of the kubespray cluster VNF (Tacker v2 user data).

Tacker's v2 OpenStack infra driver runs this class when the
InstantiateVnfRequest's ``additionalParams`` hold::

    "lcm-operation-user-data": "./UserData/kubespray_userdata_v2.py",
    "lcm-operation-user-data-class": "KubesprayUserData"

The BaseHOT is laid out for Tacker's own ``StandardUserData`` (one nested
stack per VM, named ``<VDU>-<index>``), which does all the work: flavors
and images from the VNFD, networks from ``extVirtualLinks``, overrides
from ``additionalParams.nfv``.  This file runs with the conductor's
Python only; it is not part of the ``mgmt_driver`` package.
"""

from tacker.sol_refactored.infra_drivers.openstack import userdata_standard


class KubesprayUserData(userdata_standard.StandardUserData):
    """Tacker's StandardUserData, under the name the samples use."""
