"""Hooks called through Tacker's DriverManager, as vnflcm_driver calls them.

Tacker calls ``DriverManager.invoke(name, hook, **kwargs)`` with keyword
arguments only; the request objects below are built from our samples the
way Tacker's API builds them.  The behaviour behind each hook lives in
:class:`mgmt_driver.adapters.v1.LcmHooks`; these tests replace its methods
with autospec mocks (nothing reaches a host) and check that the shim hands
them Tacker's own objects unchanged.
"""

import importlib
import uuid
from unittest import mock

import pytest

from mgmt_driver import DRIVER_NAME
from mgmt_driver.adapters import v1 as hooks_module
from tests import packages

pytest.importorskip('tacker')
importlib.import_module('tacker.objects')

# hook -> (request keyword, request class, sample, extra kwargs), as in
# tacker/vnflcm/vnflcm_driver.py.  The request is built from the sample.
_VNF = {'id': 'vnf-id', 'attributes': {}}
_STACKS = ['5c1a5c1b-4f0e-4a52-a7b4-5a2d7f3b6c01']
CALLS = {
    'instantiate_start': ('instantiate_vnf_request', 'InstantiateVnfRequest',
                          'instantiate_simple.json', {}),
    'instantiate_end': ('instantiate_vnf_request', 'InstantiateVnfRequest',
                        'instantiate_simple.json', {'vnf': _VNF}),
    'terminate_start': ('terminate_vnf_request', 'TerminateVnfRequest',
                        'terminate.json', {'vnf': _VNF}),
    'terminate_end': ('terminate_vnf_request', 'TerminateVnfRequest',
                      'terminate.json', {}),
    # scale_start runs for SCALE_IN with the nested stacks being removed.
    'scale_start': ('scale_vnf_request', 'ScaleVnfRequest', 'scale_in.json',
                    {'scale_name_list': ['r1'], 'scale_out_id_list': _STACKS,
                     'vnf': _VNF}),
    # scale_end runs for SCALE_OUT with the nested stacks just added.
    'scale_end': ('scale_vnf_request', 'ScaleVnfRequest', 'scale_out.json',
                  {'scale_out_id_list': _STACKS, 'vnf': _VNF}),
    'heal_start': ('heal_vnf_request', 'HealVnfRequest', 'heal_vnfc.json',
                   {}),
    'heal_end': ('heal_vnf_request', 'HealVnfRequest', 'heal_vnfc.json',
                 {'vnf': _VNF}),
    'change_external_connectivity_start': (
        'change_ext_conn_request', 'ChangeExtConnRequest', None, {}),
    'change_external_connectivity_end': (
        'change_ext_conn_request', 'ChangeExtConnRequest', None, {}),
}
# modify_information_* get modify_vnf_request=None and no grant arguments.
MODIFY_HOOKS = ('modify_information_start', 'modify_information_end')


def _request(objects, request_from_sample, cls_name, sample):
    if sample is None:
        return getattr(objects, cls_name)(ext_virtual_links=[])
    return request_from_sample(cls_name, sample)


def _grant(objects, vnf_instance):
    return objects.Grant(id=str(uuid.uuid4()),
                         vnf_instance_id=vnf_instance.id,
                         vnf_lcm_op_occ_id=str(uuid.uuid4()))


@pytest.mark.parametrize('hook', sorted(CALLS))
def test_hook_reaches_lcm_hooks_with_tackers_objects(
        hook, mgmt_manager, objects, admin_context, vnf_instance,
        request_from_sample):
    keyword, cls_name, sample, extra = CALLS[hook]
    request = _request(objects, request_from_sample, cls_name, sample)
    grant = _grant(objects, vnf_instance)
    with mock.patch.object(hooks_module.LcmHooks, hook,
                           autospec=True) as method:
        method.return_value = None
        result = mgmt_manager.invoke(
            DRIVER_NAME, hook, context=admin_context,
            vnf_instance=vnf_instance, grant=grant, grant_request=None,
            **{keyword: request}, **extra)
    assert result is None
    method.assert_called_once_with(
        mgmt_manager[DRIVER_NAME]._hooks, admin_context, vnf_instance,
        request, grant, None, **extra)
    assert isinstance(request, getattr(objects, cls_name))


@pytest.mark.parametrize('hook', MODIFY_HOOKS)
def test_modify_information_hooks_reach_lcm_hooks(hook, mgmt_manager,
                                                  admin_context,
                                                  vnf_instance):
    with mock.patch.object(hooks_module.LcmHooks, hook,
                           autospec=True) as method:
        mgmt_manager.invoke(DRIVER_NAME, hook, context=admin_context,
                            modify_vnf_request=None,
                            vnf_instance=vnf_instance)
    method.assert_called_once_with(
        mgmt_manager[DRIVER_NAME]._hooks, admin_context, vnf_instance,
        None, None, None)


def test_scale_out_rollback_reaches_scale_start(
        mgmt_manager, admin_context, vnf_instance, request_from_sample):
    """Rollback of a failed SCALE_OUT: scale_start, no stack id list."""
    request = request_from_sample('ScaleVnfRequest', 'scale_out.json')
    assert request.type == 'SCALE_OUT'
    with mock.patch.object(hooks_module.LcmHooks, 'scale_start',
                           autospec=True) as method:
        mgmt_manager.invoke(
            DRIVER_NAME, 'scale_start', context=admin_context,
            vnf_instance=vnf_instance, scale_vnf_request=request,
            grant=None, grant_request=None, scale_name_list=['r1'])
    method.assert_called_once_with(
        mgmt_manager[DRIVER_NAME]._hooks, admin_context, vnf_instance,
        request, None, None, scale_name_list=['r1'])


@pytest.mark.parametrize('hook', ['terminate_start', 'terminate_end'])
def test_instantiate_rollback_terminates_without_a_request(
        hook, mgmt_manager, admin_context, vnf_instance):
    with mock.patch.object(hooks_module.LcmHooks, hook,
                           autospec=True) as method:
        mgmt_manager.invoke(DRIVER_NAME, hook, context=admin_context,
                            vnf_instance=vnf_instance,
                            terminate_vnf_request=None, grant=None,
                            grant_request=None)
    method.assert_called_once_with(
        mgmt_manager[DRIVER_NAME]._hooks, admin_context, vnf_instance,
        None, None, None)


@pytest.mark.parametrize('hook', packages.NOOP_HOOKS)
def test_hooks_left_to_tacker_do_nothing(hook, mgmt_manager, objects,
                                         admin_context, vnf_instance,
                                         request_from_sample):
    """The hooks the VNFDs leave to vnflcm_noop are no-ops in ours too."""
    if hook in MODIFY_HOOKS:
        kwargs = {'modify_vnf_request': None}
    else:
        keyword, cls_name, sample, extra = CALLS[hook]
        kwargs = dict(extra, grant=None, grant_request=None)
        kwargs[keyword] = _request(objects, request_from_sample, cls_name,
                                   sample)
    assert mgmt_manager.invoke(DRIVER_NAME, hook, context=admin_context,
                               vnf_instance=vnf_instance, **kwargs) is None


def test_noop_driver_accepts_the_same_calls(mgmt_manager, admin_context,
                                            vnf_instance,
                                            request_from_sample):
    """Sanity check of the call shape against Tacker's own driver."""
    request = request_from_sample('ScaleVnfRequest', 'scale_in.json')
    assert mgmt_manager.invoke(
        packages.NOOP_DRIVER, 'scale_start', context=admin_context,
        vnf_instance=vnf_instance, scale_vnf_request=request, grant=None,
        grant_request=None, **CALLS['scale_start'][3]) is None
