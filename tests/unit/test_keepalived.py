"""Unit tests of mgmt_driver.remote.keepalived and the VIP keys of params.

Rendered files are checked by the real ``keepalived -t`` (its config-test
mode) where keepalived is installed (``tools/host-packages`` installs it).
"""

import hashlib
import os
import re
import shutil
import socket
import subprocess

import pytest

from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.model import params
from mgmt_driver.remote import keepalived
from mgmt_driver.remote import loadbalancer as lb
from tests import docs
from tests.fakes import FakeConnection
from tests.unit import params_data

P = 'k8s_cluster_installation_param'
PASSWORD = 'Vr:p4ss'
SPEC = core.ExternalLbSpec(None, None, None, None, vip='192.0.2.100',
                           vrrp_router_id=51, vrrp_password=PASSWORD)
GATEWAYS = [('gw-c', '192.0.2.13'), ('gw-a', '192.0.2.11'),
            ('gw-b', '192.0.2.12')]
KEEPALIVED = shutil.which('keepalived') or '/usr/sbin/keepalived'


def interfaces(names, interface='eth0', prefix=24):
    return {name: (interface, prefix) for name in names}


def layouts(gateways=GATEWAYS, spec=SPEC, interface='eth0', **options):
    return keepalived.gateway_layouts(
        gateways, interfaces([g[0] for g in gateways], interface), spec,
        **options)


def one(**fields):
    values = dict(name='gw-a', address='192.0.2.11', peers=['192.0.2.12'],
                  interface='eth0', prefix=24, vip='192.0.2.100',
                  router_id=51, priority=200, password=PASSWORD)
    values.update(fields)
    return keepalived.VrrpLayout(**values)


def block(text, name):
    """The lines of the ``name { ... }`` block (one nesting level)."""
    body = text.split(name + ' {\n', 1)[1].split('\n    }\n', 1)[0]
    return [line.strip() for line in body.splitlines() if line.strip()]


# ------------------------------------------------------------- render --

def test_every_gateway_gets_the_others_as_peers_and_its_priority():
    result = layouts()
    assert sorted(result) == ['gw-a', 'gw-b', 'gw-c']
    assert [result[n].priority for n in ('gw-a', 'gw-b', 'gw-c')] == [
        200, 199, 198]
    text = keepalived.render_keepalived_config(result['gw-b'])
    assert block(text, 'unicast_peer') == ['192.0.2.11', '192.0.2.13']
    assert '\n    unicast_src_ip 192.0.2.12\n' in text
    assert '\n    priority 199\n' in text
    assert '\n    virtual_router_id 51\n' in text
    assert block(text, 'virtual_ipaddress') == ['192.0.2.100/24 dev eth0']
    assert block(text, 'authentication') == [
        'auth_type PASS', 'auth_pass %s' % PASSWORD]
    assert '\n    state BACKUP\n    nopreempt\n' in text


def test_the_order_gateways_are_listed_in_changes_nothing():
    first = layouts()
    second = layouts(list(reversed(GATEWAYS)))
    for name in first:
        assert keepalived.render_keepalived_config(first[name]) == \
            keepalived.render_keepalived_config(second[name])


def test_the_health_check_connects_to_haproxys_api_port():
    spec = core.ExternalLbSpec(None, None, None, None, api_port=9443,
                               vip='192.0.2.100', vrrp_router_id=7,
                               vrrp_password='x')
    text = keepalived.render_keepalived_config(layouts(spec=spec)['gw-a'])
    assert 'script "/bin/bash -c \'</dev/tcp/127.0.0.1/9443\'"' in text
    assert block(text, 'track_script') == ['chk_haproxy']


def test_check_address_follows_haproxys_binds():
    assert keepalived.check_address(('0.0.0.0', '::')) == '127.0.0.1'
    assert keepalived.check_address(('::',)) == '::1'
    assert keepalived.check_address(('10.0.0.5',)) == '10.0.0.5'
    layout = layouts(check_at='10.0.0.5')['gw-a']
    assert '/dev/tcp/10.0.0.5/8383' in layout.check_command


def test_a_lone_gateway_has_no_unicast_block():
    text = keepalived.render_keepalived_config(
        layouts([('gw-a', '192.0.2.11')])['gw-a'])
    assert 'unicast_peer' not in text and 'unicast_src_ip' not in text
    assert '\n    priority 200\n' in text


def test_the_password_stays_out_of_repr():
    assert PASSWORD not in repr(one())
    assert PASSWORD not in repr(SPEC)


def test_ipv6_gateways():
    spec = core.ExternalLbSpec(None, None, None, None, vip='2001:db8::64',
                               vrrp_router_id=9, vrrp_password='abc')
    result = layouts([('gw-a', '2001:db8::b'), ('gw-b', '2001:db8::c')],
                     spec=spec, check_at='::1')
    text = keepalived.render_keepalived_config(result['gw-a'])
    assert block(text, 'unicast_peer') == ['2001:db8::c']
    assert block(text, 'virtual_ipaddress') == ['2001:db8::64/24 dev eth0']


@pytest.mark.parametrize('fields, message', [
    ({'router_id': 0}, 'router_id: 0 is not an integer from 1 to 255'),
    ({'router_id': 256}, 'router_id: 256 is not an integer'),
    ({'router_id': True}, 'router_id: True is not'),
    ({'priority': 255}, 'priority: 255 is not an integer from 1 to 254'),
    ({'prefix': 33}, 'prefix: 33 is not an integer from 1 to 32'),
    ({'vip': '192.0.2.300'}, "vip: '192.0.2.300' is not an IP address"),
    ({'vip': '2001:db8::1'}, 'vip: 2001:db8::1 and the gateway address'),
    ({'vip': '192.0.2.12'}, "vip: 192.0.2.12 is a gateway's own"),
    ({'vip': '192.0.2.11'}, "vip: 192.0.2.11 is a gateway's own"),
    ({'peers': ['192.0.2.11']}, "peers: 192.0.2.11 is the gateway's own"),
    ({'peers': ['192.0.2.12', '192.0.2.12']},
     "peers: address '192.0.2.12' appears twice"),
    ({'peers': '192.0.2.12'}, 'peers: give a list'),
    ({'peers': ['x']}, "peers[0]: 'x' is not an IP address"),
    ({'interface': 'eth0 x'}, "interface: 'eth0 x' is not an interface"),
    ({'interface': 'a' * 16}, 'interface: '),
    ({'name': 'gw a'}, "name: 'gw a' is not a valid gateway name"),
    ({'password': 'toolongpw'}, 'password: not 1 to 8 characters'),
    ({'password': 'a"b'}, 'password: not 1 to 8 characters'),
    ({'password': 'a#b'}, 'password: not 1 to 8 characters'),
    ({'check_port': 0}, 'check_port: 0 is not an integer'),
])
def test_bad_layouts_are_refused_naming_the_field(fields, message):
    with pytest.raises(exceptions.LoadBalancerLayoutInvalid) as err:
        one(**fields)
    assert message in str(err.value)
    if 'password' in fields:
        assert fields['password'] not in str(err.value)


def test_gateway_layouts_need_a_vip_and_every_interface():
    no_vip = core.ExternalLbSpec(None, None, None, None)
    with pytest.raises(exceptions.LoadBalancerLayoutInvalid,
                       match='vip: external_lb_param.vip is not set'):
        layouts(spec=no_vip)
    with pytest.raises(exceptions.LoadBalancerLayoutInvalid,
                       match="no \\(interface, prefix\\) for gateway 'gw-c'"):
        keepalived.gateway_layouts(GATEWAYS, interfaces(['gw-a', 'gw-b']),
                                   SPEC)
    with pytest.raises(exceptions.LoadBalancerLayoutInvalid,
                       match='gateways: 0 gateway'):
        layouts([])
    with pytest.raises(exceptions.LoadBalancerLayoutInvalid,
                       match="gateways: address '192.0.2.11' appears twice"):
        layouts([('gw-a', '192.0.2.11'), ('gw-b', '192.0.2.11')])


# ------------------------------------------------- the real keepalived --

def _real_interface():
    # The interfaces of this process's network namespace, which
    # keepalived sees (/sys/class/net shows those of the namespace that
    # mounted sysfs: in a test run's own namespace, not these).
    names = sorted(name for _, name in socket.if_nameindex())
    return next((n for n in names if n != 'lo'), None)


def keepalived_test(text, tmp_path):
    path = tmp_path / 'keepalived.conf'
    path.write_text(text)
    path.chmod(0o600)
    return subprocess.run([KEEPALIVED, '-t', '-f', str(path)],
                          capture_output=True, text=True, timeout=30)


@pytest.fixture
def real_interface():
    if not os.access(KEEPALIVED, os.X_OK):
        pytest.skip('%s not found (tools/host-packages installs it)'
                    % KEEPALIVED)
    interface = _real_interface()
    if interface is None:
        pytest.skip('optional: no network interface besides lo here')
    return interface


@pytest.mark.parametrize('count', [1, 2, 3])
def test_keepalived_accepts_the_rendered_files(count, real_interface,
                                               tmp_path):
    for name, layout in layouts(GATEWAYS[:count],
                                interface=real_interface).items():
        result = keepalived_test(
            keepalived.render_keepalived_config(layout), tmp_path)
        assert result.returncode == 0, (name, result.stderr)


def test_keepalived_refuses_a_broken_file(real_interface, tmp_path):
    # The check can fail: the same file with a bad router id is refused.
    text = keepalived.render_keepalived_config(
        layouts(interface=real_interface)['gw-a'])
    broken = text.replace('virtual_router_id 51', 'virtual_router_id 300')
    assert keepalived_test(broken, tmp_path).returncode != 0


# ------------------------------------------------- discover_interface --

ADDR_V4 = ('2: veth-gw1@if7    inet 192.0.2.11/24 brd 192.0.2.255 scope '
           'global veth-gw1\\       valid_lft forever preferred_lft '
           'forever\n')


def test_discover_interface_reads_ip_addr():
    conn = FakeConnection('gw1')
    conn.script(r'^ip -o addr show to 192\.0\.2\.11$', stdout=ADDR_V4)
    assert keepalived.discover_interface(conn, '192.0.2.11') == (
        'veth-gw1', 24)
    conn = FakeConnection('gw2')
    conn.script('ip -o addr', stdout=(
        '3: ens3    inet6 2001:db8::b/64 scope global \\       valid_lft '
        'forever preferred_lft forever\n'))
    assert keepalived.discover_interface(conn, '2001:db8:0::b') == (
        'ens3', 64)


@pytest.mark.parametrize('stdout', [
    '', ADDR_V4.replace('192.0.2.11', '192.0.2.12'),
    'x' * 100000, '2: $(reboot)    inet 192.0.2.11/24 brd\n',
    '2: ' + 'e' * 16 + '    inet 192.0.2.11/24 brd\n'])
def test_discover_interface_refuses_anything_else(stdout):
    conn = FakeConnection('gw1')
    conn.script('ip -o addr', stdout=stdout)
    with pytest.raises(exceptions.RemoteDataInvalid) as err:
        keepalived.discover_interface(conn, '192.0.2.11')
    assert 'gw1' in str(err.value)
    assert 'no interface has the address 192.0.2.11' in str(err.value)
    assert len(str(err.value)) < 300


# ------------------------------------------------------------- apply --

HAPROXY_SETTINGS = lb.ApplySettings()
KA_SETTINGS = keepalived.apply_settings(HAPROXY_SETTINGS)
KA_PATH = keepalived.DEFAULT_CONFIG_PATH
HAPROXY_TEXT = lb.render([('m1', '10.0.0.11')], [('w1', '10.0.0.21')])


def staged(conn):
    """The last keepalived file written (the fake does not run mv)."""
    return conn.files[KA_PATH + '.new']


def test_apply_gateway_installs_both_files_checked_first():
    conn = FakeConnection('gw-a')
    layout = layouts()['gw-a']
    changed = keepalived.apply_gateway(conn, HAPROXY_TEXT, layout,
                                       HAPROXY_SETTINGS, KA_SETTINGS)
    assert changed == (True, True)
    assert conn.modes[KA_PATH + '.new'] == 0o600
    assert conn.modes[lb.DEFAULT_CONFIG_PATH + '.new'] == 0o644
    commands = conn.commands
    check = 'keepalived -t -f %s.new' % KA_PATH
    swap = 'mv -f -- %s.new %s' % (KA_PATH, KA_PATH)
    assert commands.index(check) < commands.index(swap) < commands.index(
        'systemctl reload-or-restart keepalived')
    # HAProxy's file is in place before keepalived tracks it.
    assert commands.index('systemctl reload haproxy') < commands.index(check)
    assert not any(PASSWORD in c for c in commands)


def test_an_unchanged_secret_file_is_compared_on_the_gateway_not_read():
    conn = FakeConnection('gw-a')
    layout = layouts()['gw-a']
    text = keepalived.render_keepalived_config(layout)
    compare = 'cmp -- %s.new %s' % (KA_PATH, KA_PATH)
    conn.script('^%s$' % re.escape(compare), exit_code=0)
    assert not lb.apply_config(conn, text, KA_SETTINGS)
    assert ('read_file', KA_PATH) not in conn.calls
    assert compare in conn.commands
    assert not any(c.startswith(('mv ', 'systemctl')) for c in conn.commands)
    assert KA_PATH + '.new' not in conn.files  # removed again
    # cmp says they differ: replaced.
    conn = FakeConnection('gw-a')
    conn.script('^cmp ', exit_code=1)
    assert lb.apply_config(conn, text, KA_SETTINGS)
    assert 'cp -p -- %s %s.bak' % (KA_PATH, KA_PATH) in conn.commands


class Recording(FakeConnection):
    """A fake that keeps the argv of every command (the fake plays
    ``lb-apply`` as the commands it runs: its own words are here)."""

    def __init__(self, host):
        super().__init__(host)
        self.argvs = []

    def run(self, command, **kwargs):
        self.argvs.append(command)
        return super().run(command, **kwargs)


def test_no_word_of_a_command_derives_from_the_secret_file():
    # Any user of the gateway reads every process's words: a digest of
    # a known template holding an 8-character password gives it away.
    conn = Recording('gw-a')
    keepalived.apply_gateway(conn, HAPROXY_TEXT, layouts()['gw-a'],
                             HAPROXY_SETTINGS, KA_SETTINGS)
    data = staged(conn).encode()
    assert 'auth_pass %s' % PASSWORD in staged(conn)
    secret = [PASSWORD] + [hashlib.new(name, data).hexdigest() for name in
                           ('md5', 'sha1', 'sha256', 'sha512')]
    words = [w for argv in conn.argvs
             for w in ([argv] if isinstance(argv, str) else argv)]
    assert KA_PATH in words
    assert not [w for w in words for s in secret if s in w]


def test_under_sudo_the_new_secret_is_0600_too():
    settings = keepalived.apply_settings(lb.ApplySettings(sudo=True))
    conn = FakeConnection('gw-a')
    lb.apply_config(conn, keepalived.render_keepalived_config(one()),
                    settings)
    assert conn.modes[KA_PATH + '.new'] == 0o600
    assert lb.apply_argv(settings)[:2] == ['sudo', '-n']


def test_a_refused_file_is_not_applied_and_its_password_not_shown(caplog):
    conn = FakeConnection('gw-a')
    conn.script('^keepalived -t', exit_code=5,
                stderr='(Line 40) Unknown keyword \'%s\'\n' % PASSWORD)
    with pytest.raises(exceptions.LoadBalancerConfigInvalid) as err:
        lb.apply_config(conn, keepalived.render_keepalived_config(one()),
                        KA_SETTINGS, secrets=(PASSWORD,))
    assert str(err.value).startswith('keepalived refused the new config')
    assert "Unknown keyword '***'" in str(err.value)
    assert PASSWORD not in str(err.value) and PASSWORD not in caplog.text
    assert 'rm -f -- %s.new' % KA_PATH in conn.commands
    assert not any(c.startswith('mv ') for c in conn.commands)


def test_configure_gateways_tries_every_gateway_and_names_the_failed():
    conns = {name: FakeConnection(name) for name, _ in GATEWAYS}
    conns['gw-b'].script('^keepalived -t', exit_code=1, stderr='bad')
    with pytest.raises(exceptions.GatewaysFailed) as err:
        keepalived.configure_gateways(conns, HAPROXY_TEXT, layouts(),
                                      HAPROXY_SETTINGS, KA_SETTINGS)
    assert str(err.value).startswith('1 of 3 gateway(s) could not be '
                                     'configured')
    assert 'gw-b: keepalived refused' in str(err.value)
    for name in ('gw-a', 'gw-c'):
        assert 'systemctl reload-or-restart keepalived' in \
            conns[name].commands
        assert '192.0.2.100/24 dev eth0' in staged(conns[name])
    assert not any(c.startswith('mv ') and 'keepalived' in c
                   for c in conns['gw-b'].commands)


def test_configure_gateways_again_changes_nothing():
    conns = {name: FakeConnection(name) for name, _ in GATEWAYS}
    first = keepalived.configure_gateways(
        conns, HAPROXY_TEXT, layouts(), HAPROXY_SETTINGS, KA_SETTINGS)
    assert set(first.values()) == {(True, True)}
    for conn in conns.values():
        conn.files[KA_PATH] = staged(conn)
        conn.files[lb.DEFAULT_CONFIG_PATH] = HAPROXY_TEXT
    again = keepalived.configure_gateways(
        conns, HAPROXY_TEXT, layouts(), HAPROXY_SETTINGS, KA_SETTINGS)
    assert set(again.values()) == {(False, False)}


def test_scaling_out_updates_the_peers_of_every_gateway():
    conns = {name: FakeConnection(name) for name, _ in GATEWAYS}
    keepalived.configure_gateways(conns, HAPROXY_TEXT,
                                  layouts(GATEWAYS[1:]), HAPROXY_SETTINGS,
                                  KA_SETTINGS)
    assert block(staged(conns['gw-a']), 'unicast_peer') == [
        '192.0.2.12']
    keepalived.configure_gateways(conns, HAPROXY_TEXT, layouts(),
                                  HAPROXY_SETTINGS, KA_SETTINGS)
    for name, peers in (('gw-a', ['192.0.2.12', '192.0.2.13']),
                        ('gw-b', ['192.0.2.11', '192.0.2.13']),
                        ('gw-c', ['192.0.2.11', '192.0.2.12'])):
        assert block(staged(conns[name]), 'unicast_peer') == peers


# ------------------------------------------------------------ params --

def _request(**lb_keys):
    request = params_data.minimal()
    request[P]['external_lb_param'].update(lb_keys)
    return request


def _problems(request):
    with pytest.raises((exceptions.ParamsInvalid,
                        exceptions.ParamsNotFound)) as info:
        params.parse_params(request, need_cp_names=False)
    return [str(p) for p in info.value.problems]


def test_a_request_without_vip_is_a_single_gateway():
    spec = params.parse_params(params_data.minimal(), need_cp_names=False)
    assert not spec.external_lb.highly_available
    assert spec.external_lb.vip is None
    assert 'VIP' not in core.describe(spec)


def test_the_vip_keys_parse():
    spec = params.parse_params(_request(
        vip='192.0.2.100', vrrp_router_id=51, vrrp_password=PASSWORD),
        need_cp_names=False)
    lb_spec = spec.external_lb
    assert lb_spec.highly_available
    assert (lb_spec.vip, lb_spec.vrrp_router_id, lb_spec.vrrp_password) == (
        '192.0.2.100', 51, PASSWORD)
    assert lb_spec.aspect_id is None
    spec = params.parse_params(_request(
        vip='192.0.2.100', vrrp_router_id=51, vrrp_password=PASSWORD,
        aspect_id='gateway_aspect'), need_cp_names=False)
    assert spec.external_lb.aspect_id == 'gateway_aspect'
    assert 'VIP 192.0.2.100 (VRRP 51)' in core.describe(spec)
    assert PASSWORD not in core.describe(spec)


@pytest.mark.parametrize('keys, expected', [
    ({'vip': '192.0.2.100'}, [
        '%s.external_lb_param.vrrp_router_id: missing: required with vip'
        % P,
        '%s.external_lb_param.vrrp_password: missing: required with vip'
        % P]),
    ({'vrrp_router_id': 5}, [
        '%s.external_lb_param.vrrp_router_id: only used with vip' % P]),
    ({'aspect_id': 'gateway_aspect'}, [
        '%s.external_lb_param.aspect_id: only used with vip' % P]),
    ({'vip': '192.0.2.1000', 'vrrp_router_id': 5, 'vrrp_password': 'a'},
     ["%s.external_lb_param.vip: '192.0.2.1000' is not an IP address"
      % P]),
    ({'vip': '192.0.2.100', 'vrrp_router_id': 256, 'vrrp_password': 'a'},
     ['%s.external_lb_param.vrrp_router_id: 256 must be between 1 and 255'
      % P]),
    ({'vip': '192.0.2.100', 'vrrp_router_id': 1,
      'vrrp_password': 'Secret#99'},
     ['%s.external_lb_param.vrrp_password: must be 1 to 8 characters' % P]),
    ({'vip': '192.0.2.100', 'vrrp_router_id': '1', 'vrrp_password': 'a'},
     ['%s.external_lb_param.vrrp_router_id: must be an integer, not str'
      % P]),
])
def test_bad_vip_keys_name_their_field(keys, expected):
    problems = sorted(_problems(_request(**keys)))
    assert len(problems) == len(expected), problems
    for problem, start in zip(problems, sorted(expected), strict=True):
        assert problem.startswith(start), problem
    assert not any('Secret#99' in p for p in problems)


def test_vip_cp_name_stands_for_the_vip_until_resolved():
    spec = params.parse_params(_request(
        vip_cp_name='externalLB_VIP_CP', vrrp_router_id=9,
        vrrp_password='x'), need_cp_names=False)
    lb_spec = spec.external_lb
    assert lb_spec.highly_available and lb_spec.vip is None
    assert lb_spec.vip_cp_name == 'externalLB_VIP_CP'
    assert 'VIP from externalLB_VIP_CP (VRRP 9)' in core.describe(spec)


@pytest.mark.parametrize('keys, expected', [
    ({'vip': '192.0.2.100', 'vip_cp_name': 'vip_CP', 'vrrp_router_id': 1,
      'vrrp_password': 'a'},
     ['%s.external_lb_param.vip_cp_name: give vip or vip_cp_name, not '
      'both' % P]),
    ({'vip_cp_name': 'vip_CP'}, [
        '%s.external_lb_param.vrrp_password: missing: required with vip'
        % P,
        '%s.external_lb_param.vrrp_router_id: missing: required with vip'
        % P]),
])
def test_bad_vip_cp_name_keys_name_their_field(keys, expected):
    problems = sorted(_problems(_request(**keys)))
    assert len(problems) == len(expected), problems
    for problem, start in zip(problems, expected, strict=True):
        assert problem.startswith(start), problem


def test_vip_cp_name_needs_vms_from_heat():
    request = params_data.minimal()
    request[P]['external_lb_param'].update(
        vip_cp_name='vip_CP', vrrp_router_id=1, vrrp_password='a')
    request[P]['nodes'] = [
        {'role': 'master', 'ssh_ip': '10.0.0.11'},
        {'role': 'worker', 'ssh_ip': '10.0.0.21'},
        {'role': 'external_lb', 'ssh_ip': '10.0.0.40'}]
    assert _problems(request) == [
        '%s.external_lb_param.vip_cp_name: only with VMs found in Heat; '
        'with nodes give vip' % P]


def test_the_docs_document_the_vip_keys():
    text = docs.page('user/parameters')
    for key in ('vip', 'vip_cp_name', 'vrrp_router_id', 'vrrp_password'):
        assert '``%s``' % key in text, key


# ------------------------------------------------------------ options --

def _conf(**options):
    from oslo_config import cfg

    from mgmt_driver.common import conf as kconf
    config = cfg.ConfigOpts()
    kconf.register_opts(config)
    config([], project='kubespray-mgmt-test', default_config_files=[])
    for name, value in options.items():
        config.set_override(name, value, group='kubespray_mgmt')
    return config


def test_the_option_defaults_are_the_fixed_commands():
    config = _conf()
    haproxy = lb.ApplySettings(sudo=True, timeout=30)
    assert keepalived.settings_from_conf(config, haproxy) == \
        keepalived.apply_settings(haproxy)
    assert keepalived.stop_command_from_conf(config) == \
        keepalived.STOP_COMMAND


def test_the_options_replace_path_and_commands():
    config = _conf(keepalived_config_path='/srv/ka/k.conf',
                   keepalived_check_command='/opt/keepalived -t -f',
                   keepalived_reload_command="sh -c 'kill -HUP $(cat p)'",
                   keepalived_stop_command='record-stop keepalived')
    settings = keepalived.settings_from_conf(config, lb.ApplySettings())
    assert settings.config_path == '/srv/ka/k.conf'
    assert settings.temp_path == '/srv/ka/k.conf.new'
    assert settings.check_command == ('/opt/keepalived', '-t', '-f')
    assert settings.reload_command == ('sh', '-c', 'kill -HUP $(cat p)')
    assert settings.mode == 0o600 and settings.program == 'keepalived'
    assert keepalived.stop_command_from_conf(config) == (
        'record-stop', 'keepalived')


@pytest.mark.parametrize('option', ['keepalived_check_command',
                                    'keepalived_reload_command',
                                    'keepalived_stop_command'])
def test_an_empty_command_option_is_refused_naming_it(option):
    config = _conf(**{option: '  '})
    with pytest.raises(exceptions.MgmtDriverParamInvalid, match=option):
        keepalived.settings_from_conf(config, lb.ApplySettings())
        keepalived.stop_command_from_conf(config)
