"""Tacker v1 entry point: the MgmtDriver class that Tacker loads.

Tacker compares the SHA-256 of THIS file with the copy in every onboarded
CSAR (``Scripts/kubespray_mgmt.py``), so the file stays tiny and stable:
each hook forwards its arguments to :class:`mgmt_driver.driver.LcmHooks`,
where all behaviour lives.  Change it only when Tacker's interface changes.
"""

from mgmt_driver import driver
from mgmt_driver import tacker_compat


class KubesprayMgmtDriver(tacker_compat.VnflcmMgmtAbstractDriver):
    """Builds and runs a Kubernetes cluster VNF with kubespray."""

    def __init__(self):
        super().__init__()
        self._hooks = driver.LcmHooks()

    def get_type(self):
        return driver.DRIVER_NAME

    def get_name(self):
        return driver.DRIVER_NAME

    def get_description(self):
        return driver.DESCRIPTION

    def instantiate_start(self, context, vnf_instance,
                          instantiate_vnf_request, grant,
                          grant_request, **kwargs):
        return self._hooks.instantiate_start(
            context, vnf_instance, instantiate_vnf_request, grant,
            grant_request, **kwargs)

    def instantiate_end(self, context, vnf_instance,
                        instantiate_vnf_request, grant,
                        grant_request, **kwargs):
        return self._hooks.instantiate_end(
            context, vnf_instance, instantiate_vnf_request, grant,
            grant_request, **kwargs)

    def terminate_start(self, context, vnf_instance,
                        terminate_vnf_request, grant,
                        grant_request, **kwargs):
        return self._hooks.terminate_start(
            context, vnf_instance, terminate_vnf_request, grant,
            grant_request, **kwargs)

    def terminate_end(self, context, vnf_instance,
                      terminate_vnf_request, grant,
                      grant_request, **kwargs):
        return self._hooks.terminate_end(
            context, vnf_instance, terminate_vnf_request, grant,
            grant_request, **kwargs)

    def scale_start(self, context, vnf_instance,
                    scale_vnf_request, grant,
                    grant_request, **kwargs):
        return self._hooks.scale_start(
            context, vnf_instance, scale_vnf_request, grant,
            grant_request, **kwargs)

    def scale_end(self, context, vnf_instance,
                  scale_vnf_request, grant,
                  grant_request, **kwargs):
        return self._hooks.scale_end(
            context, vnf_instance, scale_vnf_request, grant,
            grant_request, **kwargs)

    def heal_start(self, context, vnf_instance,
                   heal_vnf_request, grant,
                   grant_request, **kwargs):
        return self._hooks.heal_start(
            context, vnf_instance, heal_vnf_request, grant,
            grant_request, **kwargs)

    def heal_end(self, context, vnf_instance,
                 heal_vnf_request, grant,
                 grant_request, **kwargs):
        return self._hooks.heal_end(
            context, vnf_instance, heal_vnf_request, grant,
            grant_request, **kwargs)

    def change_external_connectivity_start(
            self, context, vnf_instance,
            change_ext_conn_request, grant,
            grant_request, **kwargs):
        return self._hooks.change_external_connectivity_start(
            context, vnf_instance, change_ext_conn_request, grant,
            grant_request, **kwargs)

    def change_external_connectivity_end(
            self, context, vnf_instance,
            change_ext_conn_request, grant,
            grant_request, **kwargs):
        return self._hooks.change_external_connectivity_end(
            context, vnf_instance, change_ext_conn_request, grant,
            grant_request, **kwargs)

    def modify_information_start(self, context, vnf_instance,
                                 modify_vnf_request, **kwargs):
        return self._hooks.modify_information_start(
            context, vnf_instance, modify_vnf_request, None, None, **kwargs)

    def modify_information_end(self, context, vnf_instance,
                               modify_vnf_request, **kwargs):
        return self._hooks.modify_information_end(
            context, vnf_instance, modify_vnf_request, None, None, **kwargs)
