"""The LCM hooks: orchestration only.

:class:`LcmHooks` receives every hook Tacker calls (through the shim in
:mod:`mgmt_driver.kubespray_mgmt`) as ``(context, vnf_instance, request,
grant, grant_request, **kwargs)``; *request* may be ``None`` on rollback.
Rendering lives in pure modules, remote work in the modules that own it.
"""

from oslo_log import log as logging

from mgmt_driver import DRIVER_NAME  # noqa: F401  (re-exported for the shim)
from mgmt_driver import exceptions

LOG = logging.getLogger(__name__)

DESCRIPTION = ('Builds, scales, heals and terminates a Kubernetes cluster '
               'VNF with kubespray run from an Ansible server over SSH.')


def _instance_id(vnf_instance):
    return getattr(vnf_instance, 'id', None) or '(unknown instance)'


class LcmHooks:
    """The hook implementations behind :class:`KubesprayMgmtDriver`."""

    def _noop(self, hook, vnf_instance):
        LOG.info('%s: nothing to do for VNF instance %s', hook,
                 _instance_id(vnf_instance))

    def _not_implemented(self, hook, vnf_instance):
        raise exceptions.MgmtDriverOtherError(
            error_message='%s for VNF instance %s is not implemented in '
                          'this version of %s' % (
                              hook, _instance_id(vnf_instance), DRIVER_NAME))

    # Hooks this driver deliberately leaves to Tacker.

    def instantiate_start(self, context, vnf_instance, request, grant,
                          grant_request, **kwargs):
        self._noop('instantiate_start', vnf_instance)

    def terminate_start(self, context, vnf_instance, request, grant,
                        grant_request, **kwargs):
        self._noop('terminate_start', vnf_instance)

    def change_external_connectivity_start(self, context, vnf_instance,
                                           request, grant, grant_request,
                                           **kwargs):
        self._noop('change_external_connectivity_start', vnf_instance)

    def change_external_connectivity_end(self, context, vnf_instance,
                                         request, grant, grant_request,
                                         **kwargs):
        self._noop('change_external_connectivity_end', vnf_instance)

    def modify_information_start(self, context, vnf_instance, request,
                                 grant, grant_request, **kwargs):
        self._noop('modify_information_start', vnf_instance)

    def modify_information_end(self, context, vnf_instance, request,
                               grant, grant_request, **kwargs):
        self._noop('modify_information_end', vnf_instance)

    # Hooks that build and change the cluster.

    def instantiate_end(self, context, vnf_instance, request, grant,
                        grant_request, **kwargs):
        self._not_implemented('instantiate_end', vnf_instance)

    def terminate_end(self, context, vnf_instance, request, grant,
                      grant_request, **kwargs):
        self._not_implemented('terminate_end', vnf_instance)

    def scale_start(self, context, vnf_instance, request, grant,
                    grant_request, **kwargs):
        self._not_implemented('scale_start', vnf_instance)

    def scale_end(self, context, vnf_instance, request, grant,
                  grant_request, **kwargs):
        self._not_implemented('scale_end', vnf_instance)

    def heal_start(self, context, vnf_instance, request, grant,
                   grant_request, **kwargs):
        self._not_implemented('heal_start', vnf_instance)

    def heal_end(self, context, vnf_instance, request, grant,
                 grant_request, **kwargs):
        self._not_implemented('heal_end', vnf_instance)
