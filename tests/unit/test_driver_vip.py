"""The LCM hooks with ``external_lb_param.vip``: keepalived on the gateway,
the VIP in the inventory, the VIM and cluster-info (recording SSH fake)."""

import types

import pytest
import yaml

from mgmt_driver.common import exceptions
from mgmt_driver.operations import gateways
from mgmt_driver.remote import heat
from mgmt_driver.remote import keepalived
from tests.unit.test_driver import LB
from tests.unit.test_driver import Harness
from tests.unit.test_driver import _instantiate_params
from tests.unit.test_driver import _request
from tests.unit.test_driver import conf  # noqa: F401 (a fixture)

VIP = '10.10.0.100'
PASSWORD = 'Gw:pass1'
KA_PATH = keepalived.DEFAULT_CONFIG_PATH
ADDR = ('2: ens3    inet 10.10.0.40/24 brd 10.10.0.255 scope global ens3\\'
        '       valid_lft forever preferred_lft forever\n')


def _vip_params():
    extra = _instantiate_params()
    extra['k8s_cluster_installation_param']['external_lb_param'].update(
        vip=VIP, vrrp_router_id=77, vrrp_password=PASSWORD)
    return extra


def _instantiate(h, extra):
    h.hooks.instantiate_end(None, h.instance(extra), _request(extra), None,
                            None)


def _all_commands(h):
    return [c for conn in h.pool.connections.values() for c in conn.commands]


def test_instantiate_with_a_vip_configures_keepalived(conf):  # noqa: F811
    h = Harness(conf)
    h.lb.script(r'^ip -o addr show to 10\.10\.0\.40$', stdout=ADDR)
    _instantiate(h, _vip_params())
    text = h.lb.files[KA_PATH + '.new']
    assert h.lb.modes[KA_PATH + '.new'] == 0o600
    assert '\n        %s/24 dev ens3\n' % VIP in text
    assert '\n    virtual_router_id 77\n' in text
    assert '\n        auth_pass %s\n' % PASSWORD in text
    assert '/dev/tcp/127.0.0.1/8383' in text
    commands = h.lb.commands
    check = 'keepalived -t -f %s.new' % KA_PATH
    assert commands.index('haproxy -c -f /etc/haproxy/haproxy.cfg.new') < \
        commands.index(check) < commands.index(
            'systemctl reload-or-restart keepalived')
    assert not any(PASSWORD in c for c in _all_commands(h))
    # Tacker's VIM, the kubeconfig and kubespray all use the VIP.
    access = h.registry.current['kubernetes_vim_simple']
    assert access.server == 'https://%s:8383' % VIP
    assert 'https://%s:8383' % VIP in h.lb.files['.kube/config']
    cluster_vars = yaml.safe_load(h.workspace_files()['cluster-vars.yaml'])
    assert cluster_vars['loadbalancer_apiserver'] == {'address': VIP,
                                                      'port': 8383}
    assert cluster_vars['apiserver_loadbalancer_domain_name'] == VIP
    assert cluster_vars['supplementary_addresses_in_ssl_keys'][:3] == [
        VIP, '10.10.0.40', LB]
    assert VIP in cluster_vars['no_proxy'].split(',')
    assert PASSWORD not in ''.join(h.workspace_files().values())


def test_without_a_vip_nothing_of_keepalived(conf):  # noqa: F811
    h = Harness(conf)
    extra = _instantiate_params()
    _instantiate(h, extra)
    assert not any('keepalived' in c or c.startswith('ip -o addr')
                   for c in h.lb.commands)
    assert h.registry.current['kubernetes_vim_simple'].server == \
        'https://%s:8383' % LB
    cluster_vars = yaml.safe_load(h.workspace_files()['cluster-vars.yaml'])
    assert cluster_vars['loadbalancer_apiserver']['address'] == '10.10.0.40'


def test_a_gateway_without_its_address_is_refused_clearly(conf):  # noqa
    h = Harness(conf)
    h.lb.script(r'^ip -o addr show', stdout='')
    extra = _vip_params()
    try:
        _instantiate(h, extra)
    except Exception as exc:  # the hook's own error type
        message = str(exc)
    else:
        raise AssertionError('instantiate_end did not fail')
    assert 'no interface has the address 10.10.0.40' in message
    assert PASSWORD not in message
    assert not any('keepalived' in c for c in h.lb.commands)


def test_the_install_script_gets_keepalived_with_a_vip(conf, tmp_path):  # noqa: F811,E501
    (tmp_path / 'Scripts').mkdir()
    (tmp_path / 'Scripts' / 'install_external_lb.sh').write_text('exit 0\n')
    h = Harness(conf)
    h.hooks._package_dir_of = lambda c, i: str(tmp_path)
    h.lb.script(r'^ip -o addr show', stdout=ADDR)
    _instantiate(h, _vip_params())
    [install] = [c for c in h.lb.commands if gateways.LB_SCRIPT in c]
    assert install.endswith('bash %s --with-keepalived' % gateways.LB_SCRIPT)


# ---------------------------------------------- the VIP from a Heat port --

class PortHeat:
    """A top stack holding the VIP's port (and what tests put there)."""

    def __init__(self, **ports):
        self.ports = ports
        self.calls = []

    def resource_get(self, stack_id, name):
        self.calls.append((stack_id, name))
        if name not in self.ports:
            raise RuntimeError('HTTPNotFound')
        return types.SimpleNamespace(
            resource_name=name, resource_type='OS::Neutron::Port',
            attributes={'fixed_ips': [{'ip_address': self.ports[name]}]})

    def resource_get_list(self, stack_id, nested_depth=0):
        return []


def test_the_vip_is_read_from_its_port():
    finder = heat.HeatNodeFinder(PortHeat(externalLB_VIP_CP='10.10.0.100'))
    assert finder.vip_address('top', 'externalLB_VIP_CP') == VIP
    with pytest.raises(exceptions.MgmtDriverNotFound,
                       match='external_lb_param.vip_cp_name'):
        finder.vip_address('top', 'nothing_CP')
    finder = heat.HeatNodeFinder(PortHeat(bad_CP='10.10.0.1; reboot'))
    with pytest.raises(exceptions.RemoteDataInvalid,
                       match='not an IP address'):
        finder.vip_address('top', 'bad_CP')


def test_the_hooks_resolve_vip_cp_name_before_anything_else(conf):  # noqa: F811,E501
    h = Harness(conf)
    h.lb.script(r'^ip -o addr show', stdout=ADDR)
    fake_heat = PortHeat(externalLB_VIP_CP=VIP)
    h.hooks._heat_factory = lambda c, i, r: fake_heat
    extra = _heat_like(h)
    lb_param = extra['k8s_cluster_installation_param']['external_lb_param']
    lb_param.update(vip_cp_name='externalLB_VIP_CP', vrrp_router_id=77,
                    vrrp_password=PASSWORD)
    _instantiate(h, extra)
    assert fake_heat.calls == [('stack', 'externalLB_VIP_CP')]
    assert '\n        %s/24 dev ens3\n' % VIP in h.lb.files[KA_PATH + '.new']
    assert h.registry.current['kubernetes_vim_simple'].server == \
        'https://%s:8383' % VIP


def test_terminate_needs_no_vip_port(conf):  # noqa: F811
    h = Harness(conf)
    h.lb.script(r'^ip -o addr show', stdout=ADDR)
    h.hooks._heat_factory = lambda c, i, r: PortHeat(externalLB_VIP_CP=VIP)
    extra = _heat_like(h)
    extra['k8s_cluster_installation_param']['external_lb_param'].update(
        vip_cp_name='externalLB_VIP_CP', vrrp_router_id=77,
        vrrp_password=PASSWORD)
    _instantiate(h, extra)
    gone = PortHeat()  # the stack and its ports are deleted by now
    h.hooks._heat_factory = lambda c, i, r: gone
    for hook in (h.hooks.terminate_start, h.hooks.terminate_end):
        hook(None, h.instance(extra), None, None, None)
    assert gone.calls == []
    assert h.registry.calls[-1] == ('unregister', 'kubernetes_vim_simple')


def _heat_like(h):
    from tests.unit.test_driver import _heat_like as heat_like
    return heat_like(h, 2, {})
