"""Kubespray MgmtDriver for OpenStack Tacker.

The Tacker entry point is :mod:`mgmt_driver.kubespray_mgmt`; everything else
is importable and usable without Tacker (see :mod:`mgmt_driver.cli`).
"""

DRIVER_NAME = 'mgmt-drivers-kubespray'
