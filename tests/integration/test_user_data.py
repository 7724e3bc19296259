"""The packages' UserData class, run the way Tacker's OpenStack driver does.

Tacker imports ``UserData/k8s_userdata.py`` from the extracted package
(``lcm-operation-user-data``), reads the BaseHOT with its own
``get_base_nest_hot_dict`` and calls ``KubesprayUserData.instantiate``
with the flavour VNFD it stored at onboarding and the request object.
The result must be a complete parameter set for the BaseHOT.
"""

import copy
import importlib
import sys

import pytest

from tests import packages

pytest.importorskip('tacker')
vnflcm_utils = importlib.import_module('tacker.vnflcm.utils')
vnfm_extension = importlib.import_module('tacker.extensions.vnfm')

NAMES = sorted(packages.FLAVOURS)
VDUS = ('masterNode', 'workerNode', 'externalLB')
EXTERNAL_CPS = ('masterNode_CP1', 'workerNode_CP2', 'externalLB_CP3')
SAMPLES = {'kubespray_simple': 'instantiate_simple.json',
           'kubespray_ha': 'instantiate_ha.json',
           'kubespray_ha_lb': 'instantiate_ha_lb.json'}


def _user_data_class(package_dir, request):
    """Import the class as Tacker does: package dir on sys.path."""
    module_name = request.additional_params['lcm-operation-user-data']
    module_name = module_name.lstrip('./').rsplit('.py', 1)[0].replace(
        '/', '.')
    sys.path.append(str(package_dir))
    try:
        module = importlib.import_module(module_name)
    finally:
        sys.path.remove(str(package_dir))
    try:
        return getattr(module,
                       request.additional_params[
                           'lcm-operation-user-data-class'])
    finally:
        # Tacker drops the modules again after each call.
        for name in (module_name, module_name.split('.')[0]):
            sys.modules.pop(name, None)


def _run(name, onboarded, package_dirs, request):
    flavour_id = packages.FLAVOURS[name]
    base_hot, nested = vnflcm_utils.get_base_nest_hot_dict(
        None, flavour_id, packages.DESCRIPTOR_IDS[name])
    param_base_hot = copy.deepcopy(nested)
    param_base_hot['heat_template'] = base_hot
    (flavour,) = onboarded[name][1]
    klass = _user_data_class(package_dirs[name], request)
    return base_hot, klass.instantiate(param_base_hot, flavour['tpl_dict'],
                                       request, None)


def _nfv_paths(node):
    """Every ``get_param: [nfv, ...]`` path in a HOT fragment."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == 'get_param' and isinstance(value, list) and \
                    value[0] == 'nfv':
                yield value[1:]
            else:
                yield from _nfv_paths(value)
    elif isinstance(node, list):
        for item in node:
            yield from _nfv_paths(item)


@pytest.mark.parametrize('name', NAMES)
def test_parameters_for_the_sample_request(name, onboarded, package_dirs,
                                           request_from_sample):
    request = request_from_sample('InstantiateVnfRequest', SAMPLES[name])
    base_hot, params = _run(name, onboarded, package_dirs, request)
    assert set(params) == {'nfv'}
    vdus = params['nfv']['VDU']
    assert sorted(vdus) == sorted(VDUS)
    for vdu in VDUS:
        assert vdus[vdu]['image'] == 'ubuntu-22.04-server-cloudimg-amd64'
    assert vdus['masterNode']['flavor'] == 'm1.medium'
    assert vdus['externalLB']['flavor'] == 'm1.small'
    networks = {cp.cpd_id: vl.resource_id
                for vl in request.ext_virtual_links for cp in vl.ext_cps}
    cps = params['nfv']['CP']
    assert sorted(cps) == sorted(EXTERNAL_CPS)
    for cp in EXTERNAL_CPS:
        assert cps[cp]['network'] == networks[cp]
    # Every nfv path the BaseHOT reads is there (Heat fails otherwise).
    for path in _nfv_paths(base_hot['resources']):
        value = params['nfv']
        for key in path:
            value = value[key]
        assert value


def test_overrides_from_additional_params(onboarded, package_dirs,
                                          request_from_sample):
    request = request_from_sample('InstantiateVnfRequest',
                                  'instantiate_simple.json')
    request.additional_params.update({
        'vdu_images': {'workerNode': 'gpu-worker-image'},
        'vdu_flavors': {'masterNode': 'm1.large'},
        'floating_network': 'ext-net',
        'cluster_network_cidr': '172.31.0.0/24',
    })
    base_hot, params = _run('kubespray_simple', onboarded, package_dirs,
                            request)
    vdus = params['nfv']['VDU']
    assert vdus['workerNode']['image'] == 'gpu-worker-image'
    assert vdus['masterNode']['image'] == 'ubuntu-22.04-server-cloudimg-amd64'
    assert vdus['masterNode']['flavor'] == 'm1.large'
    assert params['floating_network'] == 'ext-net'
    assert params['cluster_network_cidr'] == '172.31.0.0/24'
    # Heat refuses parameters the template does not declare.
    assert set(params) <= set(base_hot['parameters'])


def test_missing_external_cp_is_named(onboarded, package_dirs,
                                      request_from_sample):
    request = request_from_sample('InstantiateVnfRequest',
                                  'instantiate_simple.json')
    request.ext_virtual_links = [
        vl for vl in request.ext_virtual_links
        if vl.ext_cps[0].cpd_id != 'externalLB_CP3']
    with pytest.raises(vnfm_extension.LCMUserDataFailed) as info:
        _run('kubespray_simple', onboarded, package_dirs, request)
    assert 'externalLB_CP3' in str(info.value)
    assert 'masterNode_CP1' not in str(info.value)


def test_unknown_vdu_override_is_refused(onboarded, package_dirs,
                                         request_from_sample):
    request = request_from_sample('InstantiateVnfRequest',
                                  'instantiate_simple.json')
    request.additional_params['vdu_flavors'] = {'mastrNode': 'm1.large'}
    with pytest.raises(vnfm_extension.LCMUserDataFailed) as info:
        _run('kubespray_simple', onboarded, package_dirs, request)
    assert 'vdu_flavors names unknown VDU "mastrNode"' in str(info.value)
