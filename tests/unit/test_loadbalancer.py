"""Unit tests of mgmt_driver.remote.loadbalancer: pure rendering and apply
logic."""

import dataclasses
import hashlib
import os
import pathlib
import random
import re
import subprocess
import types

import pytest
from oslo_config import cfg

from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.remote import loadbalancer as lb
from mgmt_driver.remote import ssh
from tests.fakes import FakeConnection

MASTERS_1 = [('master-10-0-0-11', '10.0.0.11')]
WORKERS_2 = [('worker-10-0-0-22', '10.0.0.22'),
             ('worker-10-0-0-21', '10.0.0.21')]


def server_lines(text, backend):
    """The ``server`` lines of *backend*, in file order."""
    section = text.split('backend %s\n' % backend, 1)[1]
    section = section.split('\n\n', 1)[0]
    return [line.strip() for line in section.splitlines()
            if line.strip().startswith('server ')]


def bind_lines(text, frontend):
    section = text.split('frontend %s\n' % frontend, 1)[1]
    section = section.split('\n\n', 1)[0]
    return [line.strip() for line in section.splitlines()
            if line.strip().startswith('bind ')]


# ------------------------------------------------------------- render --

def test_one_master_two_workers():
    text = lb.render(MASTERS_1, WORKERS_2)
    assert bind_lines(text, 'kube_apiserver') == ['bind 0.0.0.0:8383']
    assert server_lines(text, 'kube_apiserver') == [
        'server master-10-0-0-11 10.0.0.11:6443 check']
    assert bind_lines(text, 'kube_nodeports') == [
        'bind 0.0.0.0:30000-32767']
    # sorted by name, no port: the client's destination port is kept
    assert server_lines(text, 'kube_nodeports') == [
        'server worker-10-0-0-21 10.0.0.21',
        'server worker-10-0-0-22 10.0.0.22']
    assert 'mode tcp' in text
    assert text.endswith('\n') and not text.endswith('\n\n')


def test_global_and_defaults_are_sane():
    text = lb.render(MASTERS_1, WORKERS_2)
    for line in ('log stdout format raw local0 info', 'maxconn 20000',
                 'hard-stop-after 3600s', 'user haproxy', 'group haproxy',
                 'chroot /var/lib/haproxy', 'timeout connect 5s',
                 'timeout client 3600s', 'timeout server 3600s',
                 'timeout check 5s'):
        assert '\n    %s\n' % line in text
    # the process manager decides how HAProxy runs
    assert not re.search(r'^\s*(daemon|pidfile)\b', text, re.M)


def test_process_settings_can_be_left_out():
    text = lb.render(MASTERS_1, WORKERS_2, user=None, group=None,
                     chroot=None, maxconn=50, idle_timeout=30)
    assert not re.search(r'^\s*(user|group|chroot) ', text, re.M)
    assert '\n    maxconn 50\n' in text
    assert '\n    timeout client 30s\n' in text


def test_three_masters_hundred_workers():
    masters = [('master-%d' % i, '10.0.0.%d' % (10 + i)) for i in (1, 2, 3)]
    workers = [('worker-%03d' % i, '10.1.%d.%d' % (i // 200, i % 200 + 1))
               for i in range(100)]
    text = lb.render(masters, workers)
    assert server_lines(text, 'kube_apiserver') == [
        'server master-1 10.0.0.11:6443 check',
        'server master-2 10.0.0.12:6443 check',
        'server master-3 10.0.0.13:6443 check']
    lines = server_lines(text, 'kube_nodeports')
    assert len(lines) == 100
    assert lines == sorted(lines)
    assert lines[0] == 'server worker-000 10.1.0.1'
    assert lines[-1] == 'server worker-099 10.1.0.100'


def test_ipv6_servers_and_binds():
    masters = [('m1', 'FD00:0:0::11'), ('m2', '10.0.0.12')]
    workers = [('w1', 'fd00::21')]
    text = lb.render(masters, workers)
    assert server_lines(text, 'kube_apiserver') == [
        'server m1 [fd00::11]:6443 check',
        'server m2 10.0.0.12:6443 check']
    # brackets even without a port, or HAProxy reads ":21" as a port
    assert server_lines(text, 'kube_nodeports') == ['server w1 [fd00::21]']
    assert bind_lines(text, 'kube_apiserver') == [
        'bind 0.0.0.0:8383', 'bind [::]:8383 v6only']
    assert bind_lines(text, 'kube_nodeports') == [
        'bind 0.0.0.0:30000-32767', 'bind [::]:30000-32767 v6only']


def test_explicit_bind_addresses():
    text = lb.render(MASTERS_1, WORKERS_2,
                     bind_addresses=['fd00::5', '192.0.2.5', '::'])
    assert bind_lines(text, 'kube_apiserver') == [
        'bind 192.0.2.5:8383', 'bind [::]:8383', 'bind [fd00::5]:8383']


def test_only_ipv6_wildcard_is_dual_stack():
    text = lb.render(MASTERS_1, bind_addresses=['::'])
    assert bind_lines(text, 'kube_apiserver') == ['bind [::]:8383']


def test_changed_ports_and_nodeport_range():
    text = lb.render(MASTERS_1, WORKERS_2, api_port=443,
                     apiserver_port=16443, nodeport_range=(31000, 31010))
    assert bind_lines(text, 'kube_apiserver') == ['bind 0.0.0.0:443']
    assert server_lines(text, 'kube_apiserver') == [
        'server master-10-0-0-11 10.0.0.11:16443 check']
    assert bind_lines(text, 'kube_nodeports') == [
        'bind 0.0.0.0:31000-31010']


def test_single_port_range():
    text = lb.render(MASTERS_1, WORKERS_2, nodeport_range=[30080, 30080])
    assert bind_lines(text, 'kube_nodeports') == ['bind 0.0.0.0:30080']


def test_worker_health_check_port():
    text = lb.render(MASTERS_1, WORKERS_2, worker_check_port=10256)
    assert server_lines(text, 'kube_nodeports') == [
        'server worker-10-0-0-21 10.0.0.21 check port 10256',
        'server worker-10-0-0-22 10.0.0.22 check port 10256']


def test_no_workers_no_nodeport_frontend():
    text = lb.render(MASTERS_1, [])
    assert 'kube_nodeports' not in text
    assert 'Control plane: 1 node(s), workers: 0 node(s).' in text


def test_byte_stable_render_and_input_order():
    masters = [('m%d' % i, '10.0.0.%d' % i) for i in range(1, 4)]
    workers = [('w%02d' % i, '10.0.1.%d' % i) for i in range(1, 40)]
    first = lb.render(masters, workers).encode()
    assert lb.render(masters, workers).encode() == first
    rng = random.Random(5)
    for _ in range(5):
        m, w = list(masters), list(workers)
        rng.shuffle(m)
        rng.shuffle(w)
        assert lb.render(m, w).encode() == first


def test_different_node_sets_render_differently():
    assert lb.render(MASTERS_1, WORKERS_2) != lb.render(
        MASTERS_1, WORKERS_2[:1])


def test_layout_accepts_backends_and_normalises():
    layout = lb.LbLayout(control_plane=[lb.Backend('m', '10.0.0.1')],
                         workers=(('w', 'FD00::0001'),))
    assert layout.workers == (lb.Backend('w', 'fd00::1'),)
    assert layout.bind_addresses == ('0.0.0.0', '::')
    assert lb.render_haproxy_config(layout) == lb.render(
        [('m', '10.0.0.1')], [('w', 'fd00::1')])


@pytest.mark.parametrize('kwargs, message', [
    (dict(control_plane=[]), 'at least one control-plane node'),
    (dict(api_port=0), 'api_port: 0 is not a TCP port'),
    (dict(api_port=65536), 'api_port: 65536 is not a TCP port'),
    (dict(api_port='8383'), "api_port: '8383' is not a TCP port"),
    (dict(api_port=True), 'api_port: True is not a TCP port'),
    (dict(apiserver_port=-1), 'apiserver_port: -1'),
    (dict(worker_check_port=70000), 'worker_check_port: 70000'),
    (dict(nodeport_range=(32767, 30000)), 'first port 32767 is above'),
    (dict(nodeport_range=(0, 10)), 'nodeport_range[0]: 0'),
    (dict(nodeport_range=(30000, 70000)), 'nodeport_range[1]: 70000'),
    (dict(nodeport_range=30000), 'nodeport_range: 30000 is not a'),
    (dict(api_port=30001), 'api_port: 30001 lies inside nodeport_range'),
    (dict(workers=[('w1', 'worker.example')]),
     "workers[0].address: 'worker.example' is not an IP address"),
    (dict(workers=[('w1', 'fe80::1%eth0')]),
     "workers[0].address: 'fe80::1%eth0'"),
    (dict(workers=[('w 1', '10.0.0.5')]),
     "workers[0].name: 'w 1' is not a valid node name"),
    (dict(workers=[('w1\nfrontend x', '10.0.0.5')]),
     'workers[0].name'),
    (dict(workers=[('w1', '10.0.0.5'), ('w1', '10.0.0.6')]),
     "workers: node name 'w1' appears twice"),
    (dict(workers=[('w1', '10.0.0.5'), ('w2', '10.0.0.5')]),
     "workers: address '10.0.0.5' appears twice"),
    (dict(workers=['w1']), "workers[0]: 'w1' is not a (name, address)"),
    (dict(bind_addresses='0.0.0.0'), 'bind_addresses: give a list'),
    (dict(bind_addresses=[]), 'bind_addresses: at least one'),
    (dict(bind_addresses=['lb.example']), 'bind_addresses[0]'),
    (dict(maxconn=0), 'maxconn: 0'),
    (dict(chroot='/var/lib/ha proxy'), 'chroot:'),
    (dict(user='haproxy\nnbthread 1'), 'user:'),
])
def test_invalid_layouts_say_which_field(kwargs, message):
    args = dict(control_plane=MASTERS_1, workers=WORKERS_2)
    args.update(kwargs)
    with pytest.raises(exceptions.LoadBalancerLayoutInvalid) as err:
        lb.LbLayout(**args)
    assert message in str(err.value)
    assert isinstance(err.value, exceptions.MgmtDriverParamInvalid)


def test_api_port_may_overlap_the_range_without_workers():
    text = lb.render(MASTERS_1, [], api_port=30001)
    assert bind_lines(text, 'kube_apiserver') == ['bind 0.0.0.0:30001']


def test_hostport():
    assert lb.hostport('10.0.0.1', 6443) == '10.0.0.1:6443'
    assert lb.hostport('fd00::1', 6443) == '[fd00::1]:6443'
    assert lb.hostport('fd00::1', None) == '[fd00::1]'
    assert lb.hostport('10.0.0.1', None) == '10.0.0.1'


# -------------------------------------------------------------- apply --

PATH = '/etc/haproxy/haproxy.cfg'
SETTINGS = lb.ApplySettings()
NEW = lb.render(MASTERS_1, WORKERS_2)


def lb_host(current=None):
    conn = FakeConnection('192.0.2.10')
    if current is not None:
        conn.files[PATH] = current
    return conn


def test_unchanged_config_is_left_alone():
    conn = lb_host(current=NEW)
    assert lb.apply_config(conn, NEW, SETTINGS) is False
    assert conn.calls == [('write_file', PATH + '.new'),
                          ('run', 'cmp -- %s.new %s' % (PATH, PATH)),
                          ('run', 'rm -f -- %s.new' % PATH)]
    assert PATH + '.new' not in conn.files


def test_custom_paths_and_commands_go_as_words():
    settings = lb.ApplySettings(
        config_path='/etc/haproxy dir/lb.cfg',
        check_command=('/opt/haproxy/sbin/haproxy', '-c', '-f'),
        reload_command=('kill', '-USR2', '1234'))
    argv = lb.apply_argv(settings)
    assert argv[4:] == [
        '/etc/haproxy dir/lb.cfg', '0644', '3',
        '/opt/haproxy/sbin/haproxy', '-c', '-f', 'kill', '-USR2', '1234']
    assert argv[:2] == ['sh', '-c']
    sudo = lb.apply_argv(dataclasses.replace(settings, sudo=True))
    assert sudo == ['sudo', '-n'] + argv


@pytest.mark.parametrize('wrapper', [
    [], ['sudo', '-n'], ['env', 'LC_ALL=C', 'sudo', '-n'],
    ['timeout', '60']])
def test_a_dry_run_finds_the_apply_arguments_after_any_wrapper(wrapper):
    """The summary is found by the program's arguments: a wrapper of
    another length before ``sh -c`` (here ``env LC_ALL=C``) does not
    move them, and a ``sudo -n`` anywhere before it runs the reload."""
    settings = lb.ApplySettings(
        config_path='/etc/haproxy dir/lb.cfg',
        check_command=('/opt/haproxy/sbin/haproxy', '-c', '-f'),
        reload_command=('systemctl', 'reload', 'haproxy'))
    sudo = 'sudo -n ' if 'sudo' in wrapper else ''
    assert lb.plan_change(wrapper + lb.apply_argv(settings)) == (
        "install '/etc/haproxy dir/lb.cfg' (mode 0644, if it differs and "
        'passes its check), then %ssystemctl reload haproxy' % sudo)


HAPROXY_ALERT = (
    '[NOTICE]   (11) : haproxy version is 2.6.12\n'
    '[NOTICE]   (11) : path to executable is /usr/sbin/haproxy\n'
    "[ALERT]    (11) : config : parsing [/etc/haproxy/haproxy.cfg.new:40] "
    ": unknown keyword 'bogus' in 'backend' section\n"
    '[ALERT]    (11) : config : Fatal errors found in configuration.\n')


class Shell:
    """The LB VM as this machine's shell: the program runs for real,
    with ``haproxy``, ``systemctl`` and ``sudo`` of :func:`lb_vm`."""

    host = '192.0.2.10'

    def __init__(self):
        self.commands = []

    def run(self, command, timeout=None, check=True, stdin=None, **kwargs):
        self.commands.append(command)
        done = subprocess.run(command, input=stdin, capture_output=True,
                              text=True, timeout=30)
        result = ssh.CommandResult(self.host, 'sh -c ...', done.stdout,
                                   done.stderr, done.returncode)
        if check and result.failed:
            raise exceptions.RemoteCommandFailed(result)
        return result

    # SFTP, counted as commands (what apply_config once used).
    def read_file(self, path, missing_ok=False):
        self.commands.append(('read', path))
        if missing_ok and not os.path.exists(path):
            return None
        return pathlib.Path(path).read_text()

    def write_file(self, path, content, mode=0o600):
        self.commands.append(('write', path))
        pathlib.Path(path).write_text(content)
        os.chmod(path, mode)


@pytest.fixture
def lb_vm(tmp_path, monkeypatch):
    """A directory for the configuration, and stand-ins that log their
    words to ``log`` and fail as ``fail`` (a file) says."""
    bin_dir, home = tmp_path / 'bin', tmp_path / 'home'
    bin_dir.mkdir()
    home.mkdir()
    vm = types.SimpleNamespace(path=str(tmp_path / 'etc' / 'haproxy.cfg'),
                               log=tmp_path / 'log', home=home,
                               fail=tmp_path / 'fail')
    (tmp_path / 'etc').mkdir()
    for name, body in (
            ('haproxy', 'grep -qx haproxy "$F" && { printf %s "$ALERT" >&2;'
                        ' exit 1; }'),
            ('systemctl', 'grep -qx reload "$F" && { echo haproxy.service '
                          'is not active, cannot reload. >&2; exit 1; }'),
            ('sudo', '[ "$1" = -n ] && shift; exec "$@"')):
        # sudo logs its first two words only (then comes a program)
        words = '$1 $2' if name == 'sudo' else '$*'
        (bin_dir / name).write_text('#!/bin/sh\necho "%s %s" >> "$L"\n%s\n'
                                    'exit 0\n' % (name, words, body))
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv('PATH', '%s:%s' % (bin_dir, os.environ['PATH']))
    monkeypatch.setenv('HOME', str(home))
    monkeypatch.setenv('L', str(vm.log))
    monkeypatch.setenv('F', str(vm.fail))
    monkeypatch.setenv('ALERT', HAPROXY_ALERT)
    vm.settings = lb.ApplySettings(config_path=vm.path)
    vm.logged = lambda: vm.log.read_text().splitlines() \
        if vm.log.exists() else []
    return vm


def test_changed_config_is_checked_swapped_and_reloaded_in_one_command(
        lb_vm):
    pathlib.Path(lb_vm.path).write_text('old config\n')
    conn = Shell()
    assert lb.apply_config(conn, NEW, lb_vm.settings) is True
    assert len(conn.commands) == 1
    assert lb_vm.logged() == ['haproxy -c -f %s.new' % lb_vm.path,
                              'systemctl reload haproxy']
    assert pathlib.Path(lb_vm.path).read_text() == NEW
    assert pathlib.Path(lb_vm.path + '.bak').read_text() == 'old config\n'
    assert os.stat(lb_vm.path).st_mode & 0o777 == 0o644
    assert not os.path.exists(lb_vm.path + '.new')
    # again: nothing to do, nothing run
    assert lb.apply_config(conn, NEW, lb_vm.settings) is False
    assert len(lb_vm.logged()) == 2 and len(conn.commands) == 2


def test_first_config_has_nothing_to_back_up(lb_vm):
    assert lb.apply_config(Shell(), NEW, lb_vm.settings) is True
    assert pathlib.Path(lb_vm.path).read_text() == NEW
    assert not os.path.exists(lb_vm.path + '.bak')


def test_refused_config_is_removed_and_nothing_applied(lb_vm):
    pathlib.Path(lb_vm.path).write_text('old config\n')
    lb_vm.fail.write_text('haproxy\n')
    with pytest.raises(exceptions.LoadBalancerConfigInvalid) as err:
        lb.apply_config(Shell(), NEW + 'bogus\n', lb_vm.settings)
    message = str(err.value)
    assert "unknown keyword 'bogus'" in message
    assert 'Fatal errors found' in message
    assert '192.0.2.10' in message and lb_vm.path + '.new' in message
    assert '[NOTICE]' not in message and 'KL:' not in message
    assert err.value.result.exit_code == 1
    assert lb_vm.logged() == ['haproxy -c -f %s.new' % lb_vm.path]
    assert pathlib.Path(lb_vm.path).read_text() == 'old config\n'
    assert not os.path.exists(lb_vm.path + '.new')


def test_refused_config_output_is_scrubbed_of_secrets(lb_vm, monkeypatch):
    monkeypatch.setenv('ALERT', 'bad line: password s3cret\n')
    lb_vm.fail.write_text('haproxy\n')
    with pytest.raises(exceptions.LoadBalancerConfigInvalid) as err:
        lb.apply_config(Shell(), NEW, lb_vm.settings, secrets=['s3cret'])
    assert 's3cret' not in str(err.value) and '***' in str(err.value)


def test_failed_reload_puts_previous_config_back(lb_vm, caplog):
    pathlib.Path(lb_vm.path).write_text('old config\n')
    lb_vm.fail.write_text('reload\n')
    with pytest.raises(exceptions.RemoteCommandFailed) as err:
        lb.apply_config(Shell(), NEW, lb_vm.settings)
    assert 'not active' in str(err.value)
    assert pathlib.Path(lb_vm.path).read_text() == 'old config\n'
    assert 'putting the previous configuration back' in caplog.text


def test_failed_first_reload_removes_the_new_file(lb_vm):
    lb_vm.fail.write_text('reload\n')
    with pytest.raises(exceptions.RemoteCommandFailed):
        lb.apply_config(Shell(), NEW, lb_vm.settings)
    assert not os.path.exists(lb_vm.path)


def test_sudo_runs_the_whole_program_as_root(lb_vm):
    settings = dataclasses.replace(lb_vm.settings, sudo=True)
    pathlib.Path(lb_vm.path).write_text('old config\n')
    conn = Shell()
    assert lb.apply_config(conn, NEW, settings) is True
    assert conn.commands[0][:4] == ['sudo', '-n', 'sh', '-c']
    assert lb_vm.logged() == ['sudo -n sh',
                              'haproxy -c -f %s.new' % lb_vm.path,
                              'systemctl reload haproxy']
    assert pathlib.Path(lb_vm.path).read_text() == NEW
    assert list(lb_vm.home.iterdir()) == []  # nothing staged there


SECRET_TEXT = NEW + '# auth_pass Vr:p4ss\n'


def digests(text):
    """The usual hex digests of *text*: none may be on a command line
    (a short secret in a known template is found from any of them)."""
    data = text.encode('utf-8')
    return [hashlib.new(name, data).hexdigest()
            for name in ('md5', 'sha1', 'sha256', 'sha512')]


def test_a_secret_file_is_compared_on_the_host_not_by_a_digest(lb_vm):
    settings = dataclasses.replace(lb_vm.settings, sudo=True, mode=0o600)
    pathlib.Path(lb_vm.path).write_text(SECRET_TEXT)
    os.chmod(lb_vm.path, 0o600)
    before = os.stat(lb_vm.path)
    conn = Shell()
    assert lb.apply_config(conn, SECRET_TEXT, settings) is False
    assert lb_vm.logged() == ['sudo -n sh']
    after = os.stat(lb_vm.path)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino,
                                                 before.st_mtime_ns)
    assert not os.path.exists(lb_vm.path + '.new')
    assert lb.apply_config(conn, SECRET_TEXT + '# more\n', settings) is True
    assert pathlib.Path(lb_vm.path).read_text() == SECRET_TEXT + '# more\n'
    assert os.stat(lb_vm.path).st_mode & 0o777 == 0o600
    assert os.stat(lb_vm.path + '.bak').st_mode & 0o777 == 0o600
    secret = digests(SECRET_TEXT) + digests(SECRET_TEXT + '# more\n')
    words = [w for argv in conn.commands for w in argv[3:]]
    assert len(conn.commands) == 2 and '0600' in words
    assert not [w for w in words for d in secret + ['Vr:p4ss'] if d in w]


def test_a_planted_temporary_file_is_replaced_not_followed(lb_vm, tmp_path):
    # A symlink (or a stale file another user can read) where PATH.new
    # goes: the secret must land in a new file of the owner's only.
    victim = tmp_path / 'victim'
    victim.write_text('untouched\n')
    os.symlink(victim, lb_vm.path + '.new')
    settings = dataclasses.replace(lb_vm.settings, mode=0o600)
    assert lb.apply_config(Shell(), SECRET_TEXT, settings) is True
    assert victim.read_text() == 'untouched\n'
    assert pathlib.Path(lb_vm.path).read_text() == SECRET_TEXT
    assert not os.path.islink(lb_vm.path)
    assert os.stat(lb_vm.path).st_mode & 0o777 == 0o600


# ------------------------------------------------------------ settings --

@pytest.fixture
def conf():
    config = cfg.ConfigOpts()
    kconf.register_opts(config)
    config([], project='kubespray-mgmt-test', default_config_files=[])
    return config


def test_settings_defaults_from_conf(conf):
    settings = lb.ApplySettings.from_conf(conf)
    assert settings == lb.ApplySettings(
        timeout=conf.kubespray_mgmt.ssh_command_timeout)


def test_settings_overrides_from_conf(conf):
    conf.set_override('haproxy_config_path', '/srv/lb/haproxy.cfg',
                      group='kubespray_mgmt')
    conf.set_override('haproxy_reload_command',
                      "sh -c 'kill -USR2 $(cat /run/haproxy.pid)'",
                      group='kubespray_mgmt')
    conf.set_override('haproxy_check_command', '/usr/local/sbin/haproxy -c '
                      '-f', group='kubespray_mgmt')
    settings = lb.ApplySettings.from_conf(conf)
    assert settings.config_path == '/srv/lb/haproxy.cfg'
    assert settings.temp_path == '/srv/lb/haproxy.cfg.new'
    assert settings.backup_path == '/srv/lb/haproxy.cfg.bak'
    assert settings.reload_command == (
        'sh', '-c', 'kill -USR2 $(cat /run/haproxy.pid)')
    assert settings.check_command == ('/usr/local/sbin/haproxy', '-c', '-f')


@pytest.mark.parametrize('policy, user, sudo', [
    ('auto', 'root', False), ('auto', 'ubuntu', True),
    ('always', 'root', True), ('never', 'ubuntu', False)])
def test_settings_sudo_policy(conf, policy, user, sudo):
    conf.set_override('haproxy_sudo', policy, group='kubespray_mgmt')
    assert lb.ApplySettings.from_conf(conf, ssh_username=user).sudo is sudo


def test_empty_reload_command_is_refused(conf):
    conf.set_override('haproxy_reload_command', '  ',
                      group='kubespray_mgmt')
    with pytest.raises(exceptions.MgmtDriverParamInvalid) as err:
        lb.ApplySettings.from_conf(conf)
    assert 'haproxy_reload_command' in str(err.value)


def test_options_are_listed():
    names = {opt.name for _, opts in kconf.list_opts() for opt in opts}
    assert {'haproxy_config_path', 'haproxy_check_command',
            'haproxy_reload_command', 'haproxy_sudo'} <= names


def test_layout_for_a_cluster_node_set():
    class Node:
        def __init__(self, name, address):
            self.name, self.cluster_address = name, address

    class Cluster:
        masters = (Node('master-b', '10.0.0.12'), Node('master-a',
                                                       '10.0.0.11'))
        workers = (Node('worker-a', 'fd00::21'),)

    class LbSpec:
        api_port = 9443
        nodeport_range = (31000, 31999)

    layout = lb.layout_for(LbSpec, Cluster, worker_check_port=10256)
    assert layout.control_plane == (lb.Backend('master-a', '10.0.0.11'),
                                    lb.Backend('master-b', '10.0.0.12'))
    assert layout.workers == (lb.Backend('worker-a', 'fd00::21'),)
    assert (layout.api_port, layout.nodeport_range) == (9443, (31000, 31999))
    assert layout.worker_check_port == 10256


class _Node:
    def __init__(self, name, address):
        self.name, self.cluster_address = name, address


class _Cluster:
    masters = (_Node('master-a', '10.0.0.11'),)
    workers = (_Node('worker-a', '10.0.0.21'),)


class _LbSpec:
    api_port = 8383
    nodeport_range = (30000, 30002)


def test_layout_options_default_to_the_layout_defaults(conf):
    assert lb.layout_for(_LbSpec, _Cluster, **lb.layout_options(conf)) == \
        lb.layout_for(_LbSpec, _Cluster)


def test_layout_options_from_conf(conf):
    for name, value in (('haproxy_bind_addresses', ['192.0.2.7']),
                        ('haproxy_user', ''), ('haproxy_group', 'lb'),
                        ('haproxy_chroot', ''), ('haproxy_maxconn', 300)):
        conf.set_override(name, value, group='kubespray_mgmt')
    text = lb.render_haproxy_config(lb.layout_for(
        _LbSpec, _Cluster, **lb.layout_options(conf)))
    assert bind_lines(text, 'kube_apiserver') == ['bind 192.0.2.7:8383']
    assert bind_lines(text, 'kube_nodeports') == [
        'bind 192.0.2.7:30000-30002']
    assert 'chroot' not in text and '    user ' not in text
    assert '    group lb\n' in text and '    maxconn 300\n' in text
