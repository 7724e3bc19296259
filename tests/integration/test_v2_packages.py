"""Both Tacker v2 packages under Tacker 16's own v2 package handling.

Each package is built by ``kubespray-mgmt csar build``, onboarded by
``csar_utils.load_csar_data`` (what the package API runs for v1 and v2),
read by v2's ``Vnfd`` (the artifact lookup the v2 LCM driver does before
it runs a script), granted by the v2 LCM driver's own grant request
builder, and its BaseHOT expanded by the package's user data class
(Tacker's StandardUserData) for the v2 instantiate sample.
"""

import importlib.util
import json
import uuid

import pytest
import yaml

pytest.importorskip('tacker')

from mgmt_driver.adapters import csar  # noqa: E402
from mgmt_driver.adapters import v2  # noqa: E402
from tests import packages  # noqa: E402

#: package source -> (VNFD id, flavour id, VMs per VDU at instantiate).
V2_PACKAGES = {
    'kubespray_v2_simple': ('7b2a4c1e-5d0f-4a3b-9e61-2f8c0d4b6a17', 'simple',
                            {'masterNode': 1, 'workerNode': 1,
                             'externalLB': 1}),
    'kubespray_v2_ha': ('c3f1e8a2-64b9-4d7e-8a05-91d2b7e4f310', 'ha',
                        {'masterNode': 3, 'workerNode': 2, 'externalLB': 1}),
}
MAPPED = ('instantiate_end', 'instantiate_rollback_end', 'scale_start',
          'scale_end', 'scale_rollback_end', 'heal_start', 'heal_end',
          'terminate_start', 'terminate_end')


def onboard(tacker_conf, tmp, name):
    """Build package *name*, onboard it as Tacker does.

    :returns: v2's ``Vnfd`` of the onboarded package.
    """
    from tacker.common import csar_utils
    from tacker.sol_refactored.common import vnfd_utils

    vnfd_id, flavour_id, _ = V2_PACKAGES[name]
    zip_path = csar.build(packages.PACKAGES_DIR / name, tmp / (name + '.zip'),
                          lb_script=packages.lb_script(tmp)).path
    package_id = str(uuid.uuid4())
    vnf_data, flavours, _ = csar_utils.load_csar_data(
        None, package_id, str(zip_path))
    assert vnf_data['descriptor_id'] == vnfd_id
    assert [f['flavour_id'] for f in flavours] == [flavour_id]
    vnfd = vnfd_utils.Vnfd(vnfd_id)
    vnfd.init_from_csar_dir('%s/%s' % (
        tacker_conf.vnf_package.vnf_package_csar_path, package_id))
    return vnfd


@pytest.fixture(scope='module')
def vnfds(tacker_conf, tmp_path_factory):
    tmp = tmp_path_factory.mktemp('v2_packages')
    return {name: onboard(tacker_conf, tmp, name) for name in V2_PACKAGES}


@pytest.mark.parametrize('name', sorted(V2_PACKAGES))
def test_every_mapped_hook_finds_the_script(vnfds, name):
    vnfd, flavour = vnfds[name], V2_PACKAGES[name][1]
    for operation in MAPPED:
        assert vnfd.get_interface_script(flavour, operation) == \
            '../' + v2.SCRIPT, operation
    # Unmapped: Tacker runs nothing.
    for operation in ('instantiate_start', 'modify_information_start',
                      'instantiate_rollback_start'):
        assert vnfd.get_interface_script(flavour, operation) is None


def _instantiate_grant(vnfd, flavour_id, request):
    from tacker.sol_refactored import objects
    from tacker.sol_refactored.conductor import vnflcm_driver_v2

    objects.register_all()
    grant_req = objects.GrantRequestV1(
        vnfInstanceId='inst', vnfLcmOpOccId='occ', vnfdId=vnfd.vnfd_id,
        operation='INSTANTIATE', isAutomaticInvocation=False)
    lcm = object.__new__(vnflcm_driver_v2.VnfLcmDriverV2)
    lcm.instantiate_grant(grant_req, objects.InstantiateVnfRequest.from_dict(
        request), objects.VnfInstanceV2(id='inst'), vnfd)
    return grant_req.to_dict()


def _sample(flavour_id):
    body = json.loads((packages.SAMPLES_DIR / 'v2' /
                       'instantiate_simple.json').read_text())
    body['flavourId'] = flavour_id
    return body


@pytest.mark.parametrize('name', sorted(V2_PACKAGES))
def test_the_grant_asks_for_the_flavours_vms(vnfds, name):
    vnfd_id, flavour, counts = V2_PACKAGES[name]
    grant_req = _instantiate_grant(vnfds[name], flavour, _sample(flavour))
    asked = {}
    for res in grant_req['addResources']:
        if res['type'] == 'COMPUTE':
            asked[res['resourceTemplateId']] = asked.get(
                res['resourceTemplateId'], 0) + 1
    assert asked == counts


@pytest.mark.parametrize('name', sorted(V2_PACKAGES))
def test_user_data_lays_out_one_stack_per_vm(vnfds, name):
    """The package's user data class, on the BaseHOT, for the sample."""
    vnfd_id, flavour, counts = V2_PACKAGES[name]
    vnfd = vnfds[name]
    request = _sample(flavour)
    extra = request['additionalParams']
    path = '%s/%s' % (vnfd.csar_dir, extra['lcm-operation-user-data'])
    spec = importlib.util.spec_from_file_location('kubespray_userdata', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    user_data = getattr(module, extra['lcm-operation-user-data-class'])
    fields = user_data.instantiate(
        request, {'vnfdId': vnfd_id}, _instantiate_grant(
            vnfd, flavour, request), {}, vnfd.csar_dir)
    resources = yaml.safe_load(fields['template'])['resources']
    for vdu, count in counts.items():
        assert sorted(r for r in resources if r.startswith(vdu + '-')) == \
            ['%s-%d' % (vdu, i) for i in range(count)]
    nfv = fields['parameters']['nfv']
    assert nfv['VDU']['masterNode-0']['computeFlavourId'] == 'm1.medium'
    assert nfv['VDU']['externalLB-0']['vcImageId'] == \
        'ubuntu-22.04-server-cloudimg-amd64'
    assert nfv['CP']['workerNode_CP2-0']['network'] == \
        'REPLACE-WITH-THE-UUID-OF-THE-EXTERNAL-NETWORK'
    # The nested VM template, with the CP names the parameters name.
    nested = yaml.safe_load(fields['files']['master_node.yaml'])
    assert {'masterNode_CP1', 'masterNode_FloatingIP'} <= \
        set(nested['resources'])
