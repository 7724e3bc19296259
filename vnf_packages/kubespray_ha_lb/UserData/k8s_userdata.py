"""Heat stack parameters of the kubespray cluster VNF (Tacker user data).

Tacker (v1 VNF LCM API, OpenStack VIM) runs this class when the
InstantiateVnfRequest's ``additionalParams`` hold::

    "lcm-operation-user-data": "./UserData/k8s_userdata.py",
    "lcm-operation-user-data-class": "KubesprayUserData"

It imports the module from the extracted package and calls
``KubesprayUserData.instantiate(base_hot_dict, vnfd_dict, inst_req_info,
grant_info)`` with the BaseHOT of the selected flavour, the flavour's VNFD
and the request; the returned dict becomes the parameters of the stack.

What it returns:

- ``nfv.VDU.<vdu>.flavor`` / ``.image``: the VNFD's
  ``requested_additional_capability_name`` and ``sw_image_data.name``,
  unless ``additionalParams.vdu_flavors`` / ``vdu_images`` (objects keyed
  by VDU name: masterNode, workerNode, externalLB) name others;
- ``nfv.CP.<cpd>.network``: the network (``resourceId``) of each
  external CP, from the request's ``extVirtualLinks`` (every external CP
  of the BaseHOT must be listed there);
- any other top-level BaseHOT parameter given by the same name in
  ``additionalParams`` (``floating_network``, ``cluster_network_cidr``).

This file runs inside tacker-conductor only; it is not part of the
``mgmt_driver`` package.
"""

from tacker.extensions import vnfm
from tacker.vnfm.lcm_user_data import utils as userdata_utils
from tacker.vnfm.lcm_user_data.abstract_user_data import AbstractUserData

FLAVOR_OVERRIDES = 'vdu_flavors'
IMAGE_OVERRIDES = 'vdu_images'


def _fail(reason):
    # Tacker formats the message as "LCM user data <reason>".
    raise vnfm.LCMUserDataFailed(reason=reason)


def _overrides(additional_params, key, vdu_names):
    """Return the ``{vdu: name}`` override object *key*, checked."""
    value = additional_params.get(key) or {}
    if not isinstance(value, dict):
        _fail('failed: additionalParams.%s must be an object keyed by VDU '
              'name' % key)
    for vdu, name in value.items():
        if vdu not in vdu_names:
            _fail('failed: additionalParams.%s names unknown VDU "%s" '
                  '(known: %s)' % (key, vdu, ', '.join(sorted(vdu_names))))
        if not isinstance(name, str) or not name:
            _fail('failed: additionalParams.%s.%s must be a non-empty '
                  'string' % (key, vdu))
    return value


def _external_networks(inst_req_info, initial_params):
    """Map every external CP of the BaseHOT to its network, or fail.

    Tacker's ``create_network_dict`` would also build fixed IPs, and fails
    on an extCp whose cpProtocolData has no ipOverEthernet (which Tacker's
    API accepts); the BaseHOT only needs each port's network.
    """
    cp_names = sorted(initial_params['nfv']['CP'])
    networks = {}
    for ext_vl in inst_req_info.ext_virtual_links or []:
        for ext_cp in ext_vl.ext_cps:
            networks[ext_cp.cpd_id] = {'network': ext_vl.resource_id}
    missing = [cp for cp in cp_names if cp not in networks]
    if missing:
        _fail('failed: extVirtualLinks has no extCps entry for %s' %
              ', '.join(missing))
    return {cp: networks[cp] for cp in cp_names}


class KubesprayUserData(AbstractUserData):
    """Builds the BaseHOT parameters of both kubespray flavours."""

    @staticmethod
    def instantiate(base_hot_dict=None, vnfd_dict=None, inst_req_info=None,
                    grant_info=None):
        """Return the Heat parameters for the stack of this instance."""
        additional_params = inst_req_info.additional_params or {}
        initial = userdata_utils.create_initial_param_server_port_dict(
            base_hot_dict)
        vdu_names = set(initial['nfv']['VDU'])

        flavors = userdata_utils.create_vdu_flavor_capability_name_dict(
            vnfd_dict)
        flavors.update(_overrides(additional_params, FLAVOR_OVERRIDES,
                                  vdu_names))
        images = userdata_utils.create_sw_image_dict(vnfd_dict)
        images.update(_overrides(additional_params, IMAGE_OVERRIDES,
                                 vdu_names))
        networks = _external_networks(inst_req_info, initial)

        params = userdata_utils.create_final_param_dict(
            initial, flavors, images, networks)
        overrides = userdata_utils.get_diff_base_hot_param_from_api(
            base_hot_dict, inst_req_info)
        overrides.pop('nfv', None)  # computed above, never taken as is
        params.update(overrides)
        return params
