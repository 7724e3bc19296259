"""Only the operator's VIM vouches for the VMs its Heat returns (issue 39
item 1): a tenant chooses the VIM its instance's Heat is reached through
(a v1 VIM it registered; v2's inline or PATCHed ``vimConnectionInfo``),
and a "Heat" of its own may name another tenant's VMs."""

import subprocess
import sys
import types

import pytest
from oslo_config import cfg

from mgmt_driver.adapters import v2
from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.model import params
from mgmt_driver.remote import heat
from mgmt_driver.remote import trust
from tests.unit import test_v2
from tests.unit.test_driver import Harness
from tests.unit.test_driver import _request
from tests.unit.test_node_pools_heat import GroupHeat
from tests.unit.test_node_pools_heat import _heat_params

P = core.ROOT
OPERATOR = 'https://keystone.operator.example:5000/v3'
TENANT = 'https://keystone.tenant.example/identity/v3'
ANSIBLE = '10.10.0.50'


@pytest.fixture(scope='module')
def key_file(tmp_path_factory):
    path = tmp_path_factory.mktemp('keygen') / 'id'
    subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-f',
                    str(path)], check=True)
    return str(path)


@pytest.fixture
def conf(tmp_path, key_file):
    conf = cfg.ConfigOpts()
    kconf.register_opts(conf)
    conf([])
    for name, value in (('kubectl_sudo', 'never'), ('haproxy_sudo', 'never'),
                        ('records_dir', str(tmp_path / 'records')),
                        ('kubeconfig_dir', str(tmp_path / 'kubeconfigs')),
                        ('ssh_private_key_file', key_file),
                        ('default_key_ansible_servers', [ANSIBLE])):
        conf.set_override(name, value, group=kconf.GROUP)
    return conf


def _trust(conf, **options):
    for name, value in options.items():
        conf.set_override(name, value, group=kconf.GROUP)


def _default_key_logins(extra):
    """*extra* with masters and workers logging in with the default key
    (no password of their own)."""
    for section in ('master_node', 'worker_node'):
        for field in ('password', 'ssh_password'):
            extra[P][section].pop(field, None)
    return extra


# ------------------------------------------------------------ trust

@pytest.mark.parametrize('listed, used', [
    ('https://KeyStone.Operator.example:5000/v3/', OPERATOR),
    ('https://keystone.operator.example:5000', OPERATOR),
    ('https://keystone.operator.example/v3', 'https://keystone.operator.'
     'example:443/v3'),
    ('http://[FD00::1]/identity', 'http://[fd00::1]:80/identity/v3'),
])
def test_one_keystone_spelt_two_ways_vouches(listed, used):
    policy = trust.Policy(trusted_vims=(trust.normal_url(listed),))
    assert trust.vim_vouches([used], policy)


@pytest.mark.parametrize('urls', [
    [TENANT], [], None, [OPERATOR, TENANT],
    ['https://keystone.operator.example:5001/v3'],
    ['http://keystone.operator.example:5000/v3'],
    ['https://keystone.operator.example.evil:5000/v3'],
    ['https://keystone.operator.example:5000@evil/v3'],
    ['https://keystone.operator.example:5000/v3?x=1'], [None], [42]])
def test_any_other_vim_does_not_vouch(urls):
    policy = trust.Policy(trusted_vims=(trust.normal_url(OPERATOR),))
    assert not trust.vim_vouches(urls, policy)


def test_nothing_vouches_by_default():
    conf = cfg.ConfigOpts()
    kconf.register_opts(conf)
    conf([])
    assert not trust.vim_vouches([OPERATOR], trust.Policy.from_conf(conf))


def test_a_listed_auth_url_that_is_no_url_names_the_option():
    conf = cfg.ConfigOpts()
    kconf.register_opts(conf)
    conf([])
    conf.set_override('trusted_vim_auth_urls', [OPERATOR, 'keystone:5000'],
                      group=kconf.GROUP)
    with pytest.raises(exceptions.MgmtDriverOtherError) as info:
        trust.Policy.from_conf(conf)
    assert "trusted_vim_auth_urls: 'keystone:5000' is not" in str(info.value)


def _addresses(*ips):
    return [core.NodeAddress(role=role, ssh_ip=ip, nic_ip=ip)
            for role, ip in ips]


def test_heat_of_an_unlisted_vim_vouches_for_no_default_key_login(
        key_file):
    spec = params.parse_params(_default_key_logins(_heat_params()),
                               default_key_file=key_file)
    found = _addresses(('master', '192.168.10.11'),
                       ('worker', '192.168.10.21'),
                       ('external_lb', '192.168.10.40'))
    policy = trust.Policy(trusted_vims=(trust.normal_url(OPERATOR),),
                          default_key_hosts=())
    with pytest.raises(exceptions.ParamsInvalid) as info:
        trust.check_heat_logins(spec, found, policy, [TENANT])
    assert [p.split(':')[0] for p in info.value.problems] == [
        P + '.master_node', P + '.worker_node']
    for text in ('192.168.10.11', 'vimConnectionInfo',
                 'trusted_vim_auth_urls', 'default_key_login_hosts'):
        assert text in info.value.problems[0]
    # The LB logs in with its own password: not restricted.
    assert '192.168.10.40' not in str(info.value)
    # The operator's VIM vouches; so do listed addresses.
    trust.check_heat_logins(spec, found, policy, [OPERATOR])
    listed = trust.Policy(default_key_hosts=tuple(
        kconf.parse_networks(['192.168.10.0/24'])[0]))
    trust.check_heat_logins(spec, found, listed, [TENANT])


# ------------------------------------------------------------ v1

def _v1(conf, urls):
    """Tacker v1's hooks whose Heat is reached through *urls*."""
    h = Harness(conf)
    fake = GroupHeat()
    h.hooks._heat_factory = lambda c, i, r: heat.VimHeat(fake, urls)
    return h


def _v1_instantiate(h, key_file):
    extra = _default_key_logins(_heat_params())
    h.hooks.instantiate_end(None, h.instance(extra), _request(extra), None,
                            None)


def test_v1_a_tenant_registered_vim_is_refused_before_any_connection(
        conf, key_file):
    _trust(conf, trusted_vim_auth_urls=[OPERATOR])
    h = _v1(conf, [TENANT])
    with pytest.raises(exceptions.ParamsInvalid) as info:
        _v1_instantiate(h, key_file)
    assert 'trusted_vim_auth_urls' in str(info.value)
    assert '192.168.10.21' in str(info.value)
    assert all(not c.commands for c in h.pool.connections.values())


def test_v1_the_operators_vim_still_vouches(conf, key_file):
    _trust(conf, trusted_vim_auth_urls=[OPERATOR])
    h = _v1(conf, [OPERATOR])
    _v1_instantiate(h, key_file)
    assert h.playbooks() == ['cluster.yml']


def test_v1_tacker_heat_client_names_the_registry_vims_auth_url(
        monkeypatch):
    """The v1 client is Tacker's, for the VIM its registry returns (which
    a tenant may have registered): its ``auth_url`` is what is judged."""
    got = {}

    class VimClient:
        def get_vim(self, context, vim_id, region_name=None):
            got['vim'] = vim_id
            return {'vim_auth': {'auth_url': TENANT, 'password': 'x'}}

    client = object()
    modules = {
        'tacker.vnfm.vim_client': types.SimpleNamespace(VimClient=VimClient),
        'tacker.vnfm.infra_drivers.openstack.heat_client':
            types.SimpleNamespace(HeatClient=lambda auth, region_name: client)}
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    for parent in ('tacker', 'tacker.vnfm', 'tacker.vnfm.infra_drivers',
                   'tacker.vnfm.infra_drivers.openstack'):
        monkeypatch.setitem(sys.modules, parent, sys.modules.get(
            parent) or types.ModuleType(parent))
    monkeypatch.setattr(sys.modules['tacker.vnfm'], 'vim_client',
                        modules['tacker.vnfm.vim_client'], raising=False)
    monkeypatch.setattr(
        sys.modules['tacker.vnfm.infra_drivers.openstack'], 'heat_client',
        modules['tacker.vnfm.infra_drivers.openstack.heat_client'],
        raising=False)
    vim = types.SimpleNamespace(vim_id='tenants-vim', vim_type='openstack',
                                access_info={})
    request = types.SimpleNamespace(vim_connection_info=[vim])
    found = heat.tacker_heat_client(None, None, request)
    assert got['vim'] == 'tenants-vim'
    assert heat.vim_urls(found) == (TENANT,)
    assert found._client is client


# ------------------------------------------------------------ v2

def _inline_vim(endpoint):
    """A ``vimConnectionInfo`` entry as a tenant's request gives it
    inline (Tacker keeps it as is: no lookup in its VIM registry)."""
    return {'vim1': {'vimId': 'whatever', 'vimType':
                     'ETSINFV.OPENSTACK_KEYSTONE.V_3',
                     'interfaceInfo': {'endpoint': endpoint},
                     'accessInfo': {'username': 'u', 'password': 'p',
                                    'project': 'p', 'region': 'RegionOne',
                                    'userDomain': 'Default',
                                    'projectDomain': 'Default'}}}


class V2Harness(test_v2.Harness):
    """test_v2's harness whose instance has *vims* as its
    ``vimConnectionInfo`` and whose Heat client names the URLs of the
    OpenStack entry, as :func:`mgmt_driver.adapters.v2.tacker_heat_client`
    does."""

    def __init__(self, conf, vims, **kwargs):
        super().__init__(conf, **kwargs)
        self.vims = vims
        dict_of = self.vnf.dict
        self.vnf.dict = lambda: dict(dict_of(), vimConnectionInfo=self.vims)
        self.heat_factory = lambda inst: heat.VimHeat(
            self.vnf.heat, v2.vim_urls(v2.openstack_vim(inst)))

    def instantiate(self):
        return self.run('instantiate_end', {
            'flavourId': 'simple',
            'additionalParams': _default_key_logins(test_v2._params())})


@pytest.fixture
def v2_conf(conf):
    # test_v2's VMs: masters and workers at 192.168.10.x, the LB at .40.
    _trust(conf, trusted_vim_auth_urls=[OPERATOR])
    return conf


def test_v2_an_inline_vim_connection_info_is_refused(v2_conf):
    h = V2Harness(v2_conf, _inline_vim(TENANT))
    with pytest.raises(exceptions.ParamsInvalid) as info:
        h.instantiate()
    assert 'vimConnectionInfo' in str(info.value)
    assert test_v2.MASTER[0] in str(info.value)
    assert h.ansible.commands == [] and h.master.commands == []


def test_v2_the_operators_vim_still_vouches(v2_conf):
    h = V2Harness(v2_conf, _inline_vim(OPERATOR + '/'))
    assert h.instantiate() == {}
    assert h.playbooks() == ['cluster.yml']


def test_v2_a_patched_vim_connection_info_is_refused_at_the_next_hook(
        v2_conf):
    """Instantiated through the operator's VIM, then a PATCH (Tacker's
    modify_info merges it into the instance) points it at the tenant's:
    the next scale-out logs in nowhere."""
    h = V2Harness(v2_conf, _inline_vim(OPERATOR),
                  k8s_nodes=['master-10-10-0-11', 'worker-10-10-0-21',
                             'worker-10-10-0-22'])
    h.instantiate()
    h.vims = _inline_vim(TENANT)
    h.vnf.add('worker', *test_v2.WORKERS[2])
    commands = {c: len(c.commands) for c in (h.ansible, h.master, h.lb)}
    with pytest.raises(exceptions.ParamsInvalid) as info:
        h.run('scale_end', {'type': 'SCALE_OUT',
                            'aspectId': 'worker_instance',
                            'numberOfSteps': 1})
    assert 'trusted_vim_auth_urls' in str(info.value)
    assert {c: len(c.commands) for c in commands} == commands


def test_v2_every_url_the_heat_client_may_use_must_be_listed(v2_conf):
    """With OAuth2 mTLS Tacker's v2 client reaches heatEndpoint itself."""
    vims = _inline_vim(OPERATOR)
    vims['vim1']['interfaceInfo']['heatEndpoint'] = 'https://heat.tenant/'
    assert v2.vim_urls(vims['vim1']) == (OPERATOR, 'https://heat.tenant/')
    h = V2Harness(v2_conf, vims)
    with pytest.raises(exceptions.ParamsInvalid):
        h.instantiate()
