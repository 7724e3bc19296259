"""The request bodies in ``samples/v2`` pass Tacker's v2 API schemas, and
the instantiate sample names the v2 package's user data."""

import json

import pytest

pytest.importorskip('tacker')

from tests import packages  # noqa: E402

SCHEMAS = {'instantiate_simple.json': 'InstantiateVnfRequest_V200',
           'instantiate_ha.json': 'InstantiateVnfRequest_V200',
           'scale_out.json': 'ScaleVnfRequest_V200',
           'scale_in.json': 'ScaleVnfRequest_V200',
           'heal_vnfc.json': 'HealVnfRequest_V200',
           'heal_vnf.json': 'HealVnfRequest_V200',
           'terminate.json': 'TerminateVnfRequest_V200',
           'modify_upgrade.json': 'VnfInfoModificationRequest_V200',
           'modify_autoheal.json': 'VnfInfoModificationRequest_V200',
           'change_vnfpkg_rolling.json': 'ChangeCurrentVnfPkgRequest_V200'}
V2_SAMPLES = packages.SAMPLES_DIR / 'v2'


def test_every_v2_sample_has_a_schema():
    assert sorted(p.name for p in V2_SAMPLES.glob('*.json')) == \
        sorted(SCHEMAS)


@pytest.mark.parametrize('name', sorted(SCHEMAS))
def test_v2_sample_passes_tackers_schema(name):
    from tacker.sol_refactored.api import validator
    from tacker.sol_refactored.api.schemas import vnflcm_v2

    body = json.loads((V2_SAMPLES / name).read_text())
    validator.SolSchemaValidator(getattr(vnflcm_v2, SCHEMAS[name])).validate(
        body)


@pytest.mark.parametrize('flavour', ['simple', 'ha'])
def test_v2_instantiate_sample_names_the_packages_user_data(flavour):
    body = json.loads((V2_SAMPLES / ('instantiate_%s.json' % flavour))
                      .read_text())
    assert body['flavourId'] == flavour
    extra = body['additionalParams']
    path = packages.PACKAGES_DIR / ('kubespray_v2_' + flavour) / extra[
        'lcm-operation-user-data']
    assert 'class %s(' % extra['lcm-operation-user-data-class'] in \
        path.read_text()
    [vim] = body['vimConnectionInfo'].values()
    assert vim['vimType'] == 'ETSINFV.OPENSTACK_KEYSTONE.V_3'


def test_v2_rolling_sample_passes_tackers_request_checks():
    """What Tacker's controller checks past the schema
    (``_check_vdu_params``), against the HA package's VDUs, and both
    script names are the one ``csar build`` ships."""
    import types

    import webob.dec  # noqa: F401  (Tacker's wsgi module needs it loaded)
    from tacker.sol_refactored.controller import vnflcm_v2

    from mgmt_driver.adapters import v2

    body = json.loads((V2_SAMPLES / 'change_vnfpkg_rolling.json')
                      .read_text())
    extra = body['additionalParams']
    assert extra['upgrade_type'] == 'RollingUpdate'
    new, old = (extra['lcm-operation-coordinate-%s-vnf' % which]
                for which in ('new', 'old'))
    assert new == old == v2.COORDINATE_SCRIPT
    vnfd = (packages.PACKAGES_DIR / 'kubespray_v2_ha' / 'Definitions' /
            'kubespray_v2_ha_df.yaml').read_text()
    vdus = [p['vdu_id'] for p in extra['vdu_params']]
    assert all('\n    %s:\n      type: tosca.nodes.nfv.Vdu.Compute' % vdu
               in vnfd for vdu in vdus)
    inst = types.SimpleNamespace(instantiatedVnfInfo=types.SimpleNamespace(
        obj_attr_is_set=lambda name: True,
        vnfcResourceInfo=[types.SimpleNamespace(vduId=v) for v in vdus]))
    vnflcm_v2.VnfLcmControllerV2._check_vdu_params(
        None, inst, extra['vdu_params'], 'ETSINFV.OPENSTACK_KEYSTONE.V_3',
        new, old)
