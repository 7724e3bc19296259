"""The Tacker entry point: mgmt_driver.kubespray_mgmt.KubesprayMgmtDriver."""

import inspect
import logging
from unittest import mock

import pytest

from mgmt_driver import kubespray_mgmt
from mgmt_driver.adapters import v1
from mgmt_driver.common import tacker_compat

HOOKS = ['instantiate_start', 'instantiate_end', 'terminate_start',
         'terminate_end', 'scale_start', 'scale_end', 'heal_start',
         'heal_end', 'change_external_connectivity_start',
         'change_external_connectivity_end']
NOOP_HOOKS = ['instantiate_start', 'terminate_start',
              'change_external_connectivity_start',
              'change_external_connectivity_end',
              'modify_information_start', 'modify_information_end']


class _Instance:
    id = 'vnf-1234'


def test_loadable_without_arguments_and_complete():
    mgmt = kubespray_mgmt.KubesprayMgmtDriver()
    assert isinstance(mgmt, tacker_compat.VnflcmMgmtAbstractDriver)
    assert not inspect.isabstract(kubespray_mgmt.KubesprayMgmtDriver)
    abstract = tacker_compat.VnflcmMgmtAbstractDriver.__abstractmethods__
    assert len(abstract) == 15


def test_type_and_name():
    mgmt = kubespray_mgmt.KubesprayMgmtDriver()
    assert mgmt.get_type() == 'mgmt-drivers-kubespray'
    assert mgmt.get_name() == 'mgmt-drivers-kubespray'
    assert 'kubespray' in mgmt.get_description()


@pytest.mark.parametrize('hook', HOOKS)
def test_hooks_forward_keyword_calls(hook):
    mgmt = kubespray_mgmt.KubesprayMgmtDriver()
    request_name = inspect.signature(getattr(mgmt, hook)).parameters
    request_kw = list(request_name)[2]
    with mock.patch.object(v1.LcmHooks, hook, autospec=True) as impl:
        getattr(mgmt, hook)(context='ctx', vnf_instance=_Instance,
                            grant=None, grant_request=None,
                            scale_out_id_list=['s1'],
                            **{request_kw: 'REQ'})
    impl.assert_called_once_with(mgmt._hooks, 'ctx', _Instance, 'REQ',
                                 None, None, scale_out_id_list=['s1'])


@pytest.mark.parametrize('hook', ['modify_information_start',
                                  'modify_information_end'])
def test_modify_hooks_forward(hook):
    mgmt = kubespray_mgmt.KubesprayMgmtDriver()
    with mock.patch.object(v1.LcmHooks, hook, autospec=True) as impl:
        getattr(mgmt, hook)(context='ctx', vnf_instance=_Instance,
                            modify_vnf_request=None)
    impl.assert_called_once_with(mgmt._hooks, 'ctx', _Instance, None,
                                 None, None)


@pytest.mark.parametrize('hook', NOOP_HOOKS)
def test_noop_hooks_log_one_line(hook, caplog):
    mgmt = kubespray_mgmt.KubesprayMgmtDriver()
    caplog.set_level(logging.INFO, logger='mgmt_driver.adapters.v1')
    params = list(inspect.signature(getattr(mgmt, hook)).parameters)
    kwargs = dict.fromkeys(params[:-1])  # every named argument, as None
    kwargs['vnf_instance'] = _Instance
    assert getattr(mgmt, hook)(**kwargs) is None
    records = [r for r in caplog.records
               if r.name == 'mgmt_driver.adapters.v1']
    assert len(records) == 1
    assert hook in records[0].getMessage()
    assert 'vnf-1234' in records[0].getMessage()
