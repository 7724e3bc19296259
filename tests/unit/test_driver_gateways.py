"""The LCM hooks with several gateways behind a VIP: every LB step on all
of them, a gateway scale-out/scale-in, a gateway heal, terminate
(recording SSH fake)."""

import types

import pytest
import yaml

from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.model import nodes
from mgmt_driver.model import params
from mgmt_driver.operations import gateways
from mgmt_driver.remote import heat
from mgmt_driver.remote import keepalived
from tests.unit.test_driver import Harness
from tests.unit.test_driver import _instantiate_params
from tests.unit.test_driver import _request
from tests.unit.test_driver import conf  # noqa: F401 (a fixture)

VIP = '10.10.0.100'
PASSWORD = 'Gw:pass1'
KA_NEW = keepalived.DEFAULT_CONFIG_PATH + '.new'
HAPROXY_NEW = '/etc/haproxy/haproxy.cfg.new'
#: Gateway number -> (SSH address, cluster address); 1 is test_driver's LB.
GATEWAYS = {n: ('192.168.10.%d' % (39 + n), '10.10.0.%d' % (39 + n))
            for n in (1, 2, 3)}


def _name(n):
    return 'lb-10-10-0-%d' % (39 + n)


def _params(gateways):
    extra = _instantiate_params()
    root = extra['k8s_cluster_installation_param']
    root['external_lb_param'].update(
        vip=VIP, vrrp_router_id=77, vrrp_password=PASSWORD,
        aspect_id='gateway_aspect')
    root['nodes'] = [n for n in root['nodes'] if n['role'] != 'external_lb']
    root['nodes'] += [{'role': 'external_lb', 'ssh_ip': GATEWAYS[n][0],
                       'nic_ip': GATEWAYS[n][1]} for n in gateways]
    return extra


class Gateways:
    """A harness whose VMs come as Heat gives them: gateway *n* is the
    member ``gw-n`` (stack ``stack-gw-n``, server ``server-gw-n``)."""

    def __init__(self, config, gateways=(1, 2), package=None):
        self.h = Harness(config, k8s_nodes=[
            'master-10-10-0-11', 'worker-10-10-0-21', 'worker-10-10-0-22'])
        if package is not None:
            self.h.hooks._package_dir_of = lambda c, i: str(package)
        self.set_gateways(gateways)
        for ssh_ip, nic_ip in GATEWAYS.values():
            self.h.pool.connection(ssh_ip).script(
                r'^ip -o addr show to %s$' % nic_ip.replace('.', r'\.'),
                stdout='2: ens3    inet %s/24 brd 10.10.0.255 scope '
                       'global ens3\n' % nic_ip)

    def set_gateways(self, gateways):
        """The VMs Heat holds from now on (and the params naming them)."""
        self.extra = _params(gateways)
        spec = params.parse_params(self.extra)
        self.h.hooks._vms = lambda c, i, r, s: self._records(spec)

    @staticmethod
    def _records(spec):
        cluster = nodes.nodes_from_spec(spec)
        records = {}
        for node in cluster.k8s_nodes + cluster.gateways:
            member = None
            if node.role == core.ROLE_EXTERNAL_LB:
                member = 'gw-%d' % (int(node.cluster_address.split('.')[-1])
                                    - 39)
            records[node.name] = heat.VmRecord(
                address=core.NodeAddress(node.role, node.ssh_address,
                                         node.cluster_address),
                server_id=member and 'server-' + member,
                stack_id=member and 'stack-' + member, member_name=member)
        return cluster, records

    def conn(self, n):
        return self.h.pool.connection(GATEWAYS[n][0])

    def instance(self):
        instance = self.h.instance(self.heat_extra())
        instance.instantiated_vnf_info.vnfc_resource_info = [
            types.SimpleNamespace(id='vnfc-gw-%d' % n,
                                  compute_resource=types.SimpleNamespace(
                                      resource_id='server-gw-%d' % n))
            for n in GATEWAYS]
        return instance

    def heat_extra(self):
        extra = _params(())
        del extra['k8s_cluster_installation_param']['nodes']
        return extra

    def instantiate(self):
        self.h.hooks.instantiate_end(None, self.instance(),
                                     _request(self.heat_extra()), None,
                                     None)

    def reset_calls(self):
        for conn in self.h.pool.connections.values():
            conn.calls.clear()
        self.h.pool.forgotten.clear()
        self.h.registry.calls.clear()


def _peers(text):
    if 'unicast_peer {' not in text:
        return []
    block = text.split('unicast_peer {', 1)[1].split('}', 1)[0]
    return sorted(block.split())


def _install_script(tmp_path):
    (tmp_path / 'Scripts').mkdir()
    (tmp_path / 'Scripts' / 'install_external_lb.sh').write_text('exit 0\n')
    return tmp_path


def _installs(conn):
    return [c for c in conn.commands if gateways.LB_SCRIPT in c]


def test_instantiate_configures_every_gateway(conf, tmp_path):  # noqa: F811
    g = Gateways(conf, (1, 2, 3), package=_install_script(tmp_path))
    g.instantiate()
    for n in (1, 2, 3):
        conn = g.conn(n)
        assert 'worker-10-10-0-22' in conn.files[HAPROXY_NEW]
        assert _peers(conn.files[KA_NEW]) == sorted(
            GATEWAYS[m][1] for m in GATEWAYS if m != n)
        assert len(_installs(conn)) == 1
        assert 'https://%s:8383' % VIP in conn.files['.kube/config']
    # Priorities by name: the first gateway gets the top one.
    assert 'priority %d' % keepalived.TOP_PRIORITY in g.conn(1).files[KA_NEW]
    assert 'priority %d' % (keepalived.TOP_PRIORITY - 2) in \
        g.conn(3).files[KA_NEW]
    assert g.h.registry.current['kubernetes_vim_simple'].server == \
        'https://%s:8383' % VIP
    cluster_vars = yaml.safe_load(g.h.workspace_files()['cluster-vars.yaml'])
    no_proxy = cluster_vars['no_proxy'].split(',')
    for ssh_ip, nic_ip in GATEWAYS.values():
        assert ssh_ip in no_proxy and nic_ip in no_proxy
        assert nic_ip in cluster_vars['supplementary_addresses_in_ssl_keys']
    hosts = yaml.safe_load(g.h.workspace_files()['hosts.yaml'])
    assert not any(name.startswith('lb-') for name in hosts['all']['hosts'])


def test_scale_out_of_the_gateway_aspect_adds_a_gateway(conf, tmp_path):  # noqa: F811,E501
    g = Gateways(conf, (1, 2), package=_install_script(tmp_path))
    g.instantiate()
    assert g.conn(3).calls == []
    g.reset_calls()
    g.set_gateways((1, 2, 3))
    g.h.hooks.scale_end(None, g.instance(), _request({}, type='SCALE_OUT'),
                        None, None, scale_out_id_list=['stack-gw-3'])
    # The new gateway is installed and gets its kubeconfig; the others
    # only learn their new peer.
    assert len(_installs(g.conn(3))) == 1
    assert 'https://%s:8383' % VIP in g.conn(3).files['.kube/config']
    for n in (1, 2):
        assert _installs(g.conn(n)) == []
        assert GATEWAYS[3][1] in _peers(g.conn(n).files[KA_NEW])
    assert _peers(g.conn(3).files[KA_NEW]) == [GATEWAYS[1][1],
                                               GATEWAYS[2][1]]
    # No worker was added: kubespray does not run.
    assert g.h.playbooks() == []
    assert g.h.registry.calls == []


def test_scale_in_of_the_gateway_aspect_removes_a_gateway(conf):  # noqa: F811,E501
    g = Gateways(conf, (1, 2, 3))
    g.instantiate()
    g.reset_calls()
    g.h.hooks.scale_start(None, g.instance(), _request({}, type='SCALE_IN'),
                          None, None, scale_out_id_list=['stack-gw-1'],
                          scale_name_list=['gw-1'])
    for n in (2, 3):
        assert GATEWAYS[1][1] not in _peers(g.conn(n).files[KA_NEW])
        assert 'systemctl stop keepalived' not in g.conn(n).commands
    leaving = g.conn(1).commands
    assert leaving == ['systemctl stop keepalived']
    assert g.h.pool.forgotten == [(GATEWAYS[1][0], 22)]
    # No Kubernetes node is touched.
    assert g.h.playbooks() == []
    assert not any(' drain ' in c for c in g.h.master.commands)
    no_proxy = yaml.safe_load(g.h.workspace_files()['cluster-vars.yaml'])[
        'no_proxy'].split(',')
    assert GATEWAYS[1][0] not in no_proxy and GATEWAYS[2][0] in no_proxy


def test_a_leaving_gateway_that_does_not_answer_is_only_a_warning(conf):  # noqa: F811,E501
    g = Gateways(conf, (1, 2))
    g.instantiate()
    g.conn(2).script(r'^systemctl stop keepalived$', exit_code=1,
                     stderr='Failed to connect to bus')
    g.h.hooks.scale_start(None, g.instance(), _request({}, type='SCALE_IN'),
                          None, None, scale_out_id_list=['stack-gw-2'])
    assert _peers(g.conn(1).files[KA_NEW]) == []
    assert (GATEWAYS[2][0], 22) in g.h.pool.forgotten


def test_the_last_gateway_cannot_be_scaled_in(conf):  # noqa: F811
    g = Gateways(conf, (1,))
    g.instantiate()
    g.reset_calls()
    with pytest.raises(exceptions.MgmtDriverOtherError,
                       match='cannot remove every gateway'):
        g.h.hooks.scale_start(None, g.instance(),
                              _request({}, type='SCALE_IN'), None, None,
                              scale_out_id_list=['stack-gw-1'])
    assert 'systemctl stop keepalived' not in g.conn(1).commands
    assert g.h.pool.forgotten == []


def test_a_rolled_back_gateway_scale_out_removes_it(conf):  # noqa: F811
    g = Gateways(conf, (1, 2, 3))
    g.instantiate()
    g.reset_calls()
    # Tacker's rollback of a SCALE_OUT names the members it deletes.
    g.h.hooks.scale_start(None, g.instance(), _request({}, type='SCALE_OUT'),
                          None, None, scale_name_list=['gw-3'])
    assert _peers(g.conn(1).files[KA_NEW]) == [GATEWAYS[2][1]]
    assert g.conn(3).commands == ['systemctl stop keepalived']


def test_heal_of_one_gateway_rebuilds_only_it(conf, tmp_path):  # noqa: F811
    g = Gateways(conf, (1, 2, 3), package=_install_script(tmp_path))
    g.instantiate()
    g.reset_calls()
    request = _request({}, vnfc_instance_id=['vnfc-gw-2'])
    g.h.hooks.heal_start(None, g.instance(), request, None, None)
    assert g.conn(2).calls == []  # nothing to do before the new VM
    g.h.hooks.heal_end(None, g.instance(), request, None, None)
    assert g.h.pool.forgotten == [(GATEWAYS[2][0], 22)]
    assert len(_installs(g.conn(2))) == 1
    assert '.kube/config' in [c[1] for c in g.conn(2).calls
                              if c[0] == 'write_file']
    for n in (1, 3):
        # Still serving: configuration applied, no reinstall, no new
        # kubeconfig.
        assert _installs(g.conn(n)) == []
        assert '.kube/config' not in [c[1] for c in g.conn(n).calls
                                      if c[0] == 'write_file']
        assert KA_NEW in [c[1] for c in g.conn(n).calls
                          if c[0] == 'write_file']
    assert [c[0] for c in g.h.registry.calls] == ['register']


def test_terminate_forgets_every_gateway(conf):  # noqa: F811
    g = Gateways(conf, (1, 2, 3))
    g.instantiate()
    g.h.hooks.terminate_end(None, g.instance(), None, None, None)
    assert {(ssh_ip, 22) for ssh_ip, _ in GATEWAYS.values()} <= set(
        g.h.pool.forgotten)
    assert g.h.registry.calls[-1] == ('unregister', 'kubernetes_vim_simple')


def test_several_gateways_need_a_vip(conf):  # noqa: F811
    h = Harness(conf)
    extra = _instantiate_params()
    extra['k8s_cluster_installation_param']['nodes'].append(
        {'role': 'external_lb', 'ssh_ip': '192.168.10.41',
         'nic_ip': '10.10.0.41'})
    with pytest.raises(exceptions.MgmtDriverParamInvalid,
                       match='needs exactly one external_lb node, found 2'):
        h.hooks.instantiate_end(None, h.instance(extra), _request(extra),
                                None, None)
    assert all(c.calls == [] for c in h.pool.connections.values())


def test_keepalived_commands_come_from_the_options(conf):  # noqa: F811
    """keepalived_config_path and its check, reload and stop commands
    replace the defaults on every gateway (a gateway whose keepalived is
    not run by systemd, the local site)."""
    for name, value in (
            ('keepalived_config_path', '/srv/vrrp/keepalived.conf'),
            ('keepalived_check_command', '/opt/ka/sbin/keepalived -t -f'),
            ('keepalived_reload_command', "sh -c 'kill -HUP 1234'"),
            ('keepalived_stop_command', 'kill-keepalived --now')):
        conf.set_override(name, value, group='kubespray_mgmt')
    g = Gateways(conf, (1, 2))
    g.instantiate()
    for n in (1, 2):
        commands = g.conn(n).commands
        assert '/opt/ka/sbin/keepalived -t -f ' \
               '/srv/vrrp/keepalived.conf.new' in commands
        assert "sh -c 'kill -HUP 1234'" in commands
        assert not any('systemctl' in c and 'keepalived' in c
                       for c in commands)
        assert 'priority' in g.conn(n).files['/srv/vrrp/keepalived.conf.new']
    g.reset_calls()
    g.h.hooks.scale_start(None, g.instance(), _request({}, type='SCALE_IN'),
                          None, None, scale_out_id_list=['stack-gw-2'])
    assert g.conn(2).commands == ['kill-keepalived --now']


def test_an_empty_keepalived_stop_command_changes_nothing(conf):  # noqa: F811,E501
    g = Gateways(conf, (1, 2))
    g.instantiate()
    g.reset_calls()
    conf.set_override('keepalived_stop_command', ' ', group='kubespray_mgmt')
    with pytest.raises(exceptions.MgmtDriverParamInvalid,
                       match='keepalived_stop_command'):
        g.h.hooks.scale_start(None, g.instance(),
                              _request({}, type='SCALE_IN'), None, None,
                              scale_out_id_list=['stack-gw-2'])
    assert g.conn(1).commands == [] and g.conn(2).commands == []
