"""mgmt_driver.state.registry with a fake NfvoPlugin and VNF instance."""

import base64
import os
import stat

import pytest
import yaml

from mgmt_driver.common import exceptions
from mgmt_driver.state import registry

TOKEN = 'tok-SECRET-0123456789'
ACCESS = registry.ClusterAccess('kubernetes_vim_i1', 'https://10.0.0.5:8383',
                                TOKEN, '-----BEGIN CERTIFICATE-----\nx\n')


class FakePlugin:
    def __init__(self, fail=None):
        self.vims = {}
        self.calls = []
        self.fail = fail
        self.created = 0

    def get_vims(self, context, filters=None):
        [(field, values)] = filters.items()
        return [v for v in self.vims.values() if v[field] in values]

    def create_vim(self, context, body):
        self.calls.append(('create', body))
        if self.fail:
            raise self.fail
        self.created += 1
        vim = dict(body['vim'], id='vim-%d' % self.created)
        self.vims[vim['id']] = vim
        return vim

    def delete_vim(self, context, vim_id):
        self.calls.append(('delete', vim_id))
        del self.vims[vim_id]


class Info:
    def __init__(self, **fields):
        self.__dict__.update(fields)


class Instance:
    def __init__(self, instance_id='i1'):
        self.id = instance_id
        self.vim_connection_info = []
        self.saves = 0

    def save(self):
        self.saves += 1


class Context:
    project_id = 'proj-1'


def _registry(plugin):
    return registry.TackerVimRegistry(plugin, Info)


def test_register_creates_vim_and_connection_info():
    plugin, instance = FakePlugin(), Instance()
    vim_id = _registry(plugin).register(Context(), instance, ACCESS)
    body = plugin.calls[0][1]['vim']
    assert body['type'] == 'kubernetes'
    assert body['auth_url'] == 'https://10.0.0.5:8383'
    assert body['auth_cred'] == {'bearer_token': TOKEN,
                                 'ssl_ca_cert': ACCESS.ca_cert}
    assert body['tenant_id'] == 'proj-1'
    assert body['description'].endswith('for VNF instance i1')
    [info] = instance.vim_connection_info
    assert (info.vim_id, info.vim_type) == (vim_id, 'kubernetes')
    assert instance.saves == 1


def test_register_again_reuses_vim_and_info():
    plugin, instance = FakePlugin(), Instance()
    reg = _registry(plugin)
    first = reg.register(Context(), instance, ACCESS)
    assert reg.register(Context(), instance, ACCESS, first) == first
    assert len(plugin.vims) == 1 and len(instance.vim_connection_info) == 1
    assert instance.saves == 1


def test_owned_vim_at_another_url_is_replaced():
    """The LB came back with a new address: Tacker cannot change a VIM's
    auth_url, so the owned VIM is detached, deleted by id and created
    again; the connection info names the new one only."""
    plugin, instance = FakePlugin(), Instance()
    reg = _registry(plugin)
    owned = reg.register(Context(), instance, ACCESS)
    instance.vim_connection_info.append(Info(vim_id='openstack-vim'))
    moved = registry.ClusterAccess(ACCESS.name, 'https://10.9.9.9:8383',
                                   TOKEN, 'ca')
    plugin.calls.clear()
    new = reg.register(Context(), instance, moved, owned)
    assert [call[0] for call in plugin.calls] == ['delete', 'create']
    assert plugin.calls[0][1] == owned
    assert [v['auth_url'] for v in plugin.vims.values()] == [
        'https://10.9.9.9:8383']
    assert list(plugin.vims) == [new] and new != owned
    assert sorted(i.vim_id for i in instance.vim_connection_info) == sorted(
        ['openstack-vim', new])


def test_replacement_that_fails_to_create_completes_on_the_next_run():
    plugin, instance = FakePlugin(), Instance()
    reg = _registry(plugin)
    owned = reg.register(Context(), instance, ACCESS)
    moved = registry.ClusterAccess(ACCESS.name, 'https://10.9.9.9:8383',
                                   TOKEN, 'ca')
    plugin.fail = RuntimeError('Tacker is down')
    with pytest.raises(exceptions.MgmtDriverOtherError):
        reg.register(Context(), instance, moved, owned)
    assert not plugin.vims and not instance.vim_connection_info
    plugin.fail = None
    new = reg.register(Context(), instance, moved, owned)
    assert plugin.vims[new]['auth_url'] == 'https://10.9.9.9:8383'
    assert [i.vim_id for i in instance.vim_connection_info] == [new]


def test_vim_of_that_name_not_owned_is_never_replaced():
    plugin = FakePlugin()
    theirs = _registry(plugin).register(Context(), Instance(), ACCESS)
    moved = registry.ClusterAccess(ACCESS.name, 'https://10.9.9.9:8383',
                                   TOKEN, 'ca')
    for owned in (None, 'vim-of-an-earlier-life'):
        with pytest.raises(exceptions.VimNameInUse):
            _registry(plugin).register(Context(), Instance(), moved, owned)
    assert plugin.vims[theirs]['auth_url'] == ACCESS.server


def test_failed_registration_hides_the_token():
    plugin = FakePlugin(fail=RuntimeError('bad token %s' % TOKEN))
    with pytest.raises(exceptions.MgmtDriverOtherError) as info:
        _registry(plugin).register(Context(), Instance(), ACCESS)
    assert TOKEN not in str(info.value) and '***' in str(info.value)


def test_unregister_detaches_and_deletes_and_is_idempotent():
    plugin, instance = FakePlugin(), Instance()
    reg = _registry(plugin)
    vim_id = reg.register(Context(), instance, ACCESS)
    instance.vim_connection_info.append(Info(vim_id='openstack-vim'))
    assert reg.unregister(Context(), instance, vim_id)
    assert [i.vim_id for i in instance.vim_connection_info] == [
        'openstack-vim']
    assert not plugin.vims
    assert not reg.unregister(Context(), instance, vim_id)


def test_access_repr_hides_token():
    assert TOKEN not in repr(ACCESS)


@pytest.mark.parametrize('address, url', [
    ('10.0.0.5', 'https://10.0.0.5:8383'),
    ('fd00::5', 'https://[fd00::5]:8383'),
])
def test_server_url(address, url):
    assert registry.server_url(address, 8383) == url


def test_kubeconfig_file(tmp_path):
    reg = registry.KubeconfigRegistry(str(tmp_path / 'kc'))
    path = reg.register(ACCESS)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    doc = yaml.safe_load(open(path))
    cluster = doc['clusters'][0]['cluster']
    assert cluster['server'] == ACCESS.server
    assert base64.b64decode(cluster['certificate-authority-data']).decode() \
        == ACCESS.ca_cert
    assert doc['users'][0]['user']['token'] == TOKEN
    assert doc['current-context'] == ACCESS.name
    assert reg.unregister(path) and not reg.unregister(path)


@pytest.mark.parametrize('name', ['', '../x', '.hidden', 'a/b'])
def test_kubeconfig_refuses_unsafe_names(tmp_path, name):
    with pytest.raises(exceptions.MgmtDriverParamInvalid):
        registry.KubeconfigRegistry(str(tmp_path)).path(name)
