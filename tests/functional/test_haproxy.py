"""The rendered configuration in a real HAProxy, on loopback.

Control-plane backends listen on 127.0.0.11-13, workers on 127.0.0.21-24
(each on every test NodePort), HAProxy on 127.0.0.2.  All ports are free
ports picked at run time; the NodePort range is three ports wide.
"""

import pathlib

import pytest
from mgmt_localsite import haproxy as site

from mgmt_driver.adapters import cli
from mgmt_driver.common import exceptions
from mgmt_driver.remote import loadbalancer as lb

LB = '127.0.0.2'
CONTROL_PLANE = [('cp-1', '127.0.0.11'), ('cp-2', '127.0.0.12'),
                 ('cp-3', '127.0.0.13')]
WORKERS = [('worker-1', '127.0.0.21'), ('worker-2', '127.0.0.22'),
           ('worker-3', '127.0.0.23')]
SPARE_WORKER = ('worker-4', '127.0.0.24')
CP_NAMES = {name for name, _ in CONTROL_PLANE}
WORKER_NAMES = {name for name, _ in WORKERS}
DEADLINE = 15.0

pytestmark = pytest.mark.skipif(site.available() is not None,
                                reason=str(site.available()))


@pytest.fixture(scope='module')
def ports():
    """Free ports: API server on the CP nodes, API frontend, NodePorts."""
    workers = [a for _, a in WORKERS + [SPARE_WORKER]]
    # free on ::1 too, for the test that also listens there
    lb_addresses = [LB, '::1'] if site.ipv6_loopback() else [LB]
    return {
        'apiserver': site.free_ports(1, [a for _, a in CONTROL_PLANE])[0],
        'api': site.free_ports(1, lb_addresses)[0],
        'nodeports': site.free_ports(3, lb_addresses + workers),
    }


@pytest.fixture(scope='module')
def backends(ports):
    group = site.Backends()
    try:
        for name, address in CONTROL_PLANE:
            group.add(name, address, [ports['apiserver']])
        for name, address in WORKERS + [SPARE_WORKER]:
            group.add(name, address, ports['nodeports'])
        yield group
    finally:
        group.stop()


@pytest.fixture
def haproxy(tmp_path):
    procs = site.HAProxyProcesses(str(tmp_path))
    try:
        yield procs
    finally:
        procs.stop_all()


def make_layout(ports, workers=WORKERS, **options):
    """The layout the tests render: health checks on, no user/chroot
    (tests may run unprivileged), a small maxconn for small fd limits."""
    nodeports = ports['nodeports']
    values = dict(api_port=ports['api'], apiserver_port=ports['apiserver'],
                  nodeport_range=(nodeports[0], nodeports[-1]),
                  bind_addresses=[LB], worker_check_port=nodeports[0],
                  user=None, group=None, chroot=None, maxconn=500)
    values.update(options)
    return lb.LbLayout(control_plane=CONTROL_PLANE, workers=workers,
                       **values)




def write_config(tmp_path, layout, name='haproxy.cfg'):
    path = tmp_path / name
    path.write_text(lb.render_haproxy_config(layout))
    return path


def start(haproxy, config, ports, *extra):
    proc = haproxy.start(config, *extra)
    wait_serving(haproxy, LB, ports['api'])
    return proc


def wait_serving(haproxy, address, port):
    try:
        site.wait_for(lambda: site.reachable(address, port), DEADLINE,
                      what='HAProxy serving on %s:%s' % (address, port))
    except TimeoutError as exc:
        raise AssertionError('%s\n%s' % (exc, haproxy.logs()))


def names_through(port, count):
    """Which backends *count* new connections to *port* reached."""
    return [site.ask(LB, port) for _ in range(count)]


# ------------------------------------------------------- haproxy -c --

MASTERS_3 = [('m-%d' % i, '10.0.0.%d' % i) for i in (1, 2, 3)]
WORKERS_100 = [('w-%03d' % i, '10.0.%d.%d' % (1 + i // 250, 1 + i % 250))
               for i in range(100)]


@pytest.mark.parametrize('control_plane, workers, options', [
    (MASTERS_3[:1], WORKERS_100[:2], {}),
    (MASTERS_3, WORKERS_100, {}),
    (MASTERS_3, [], {}),
    ([('m-1', 'fd00::1')], [('w-1', 'fd00::21'), ('w-2', '10.0.0.22')], {}),
    (MASTERS_3, WORKERS_100[:3], dict(bind_addresses=['::'])),
    (MASTERS_3, WORKERS_100[:3],
     dict(bind_addresses=['192.0.2.1', 'fd00::5'])),
    (MASTERS_3, WORKERS_100[:3], dict(nodeport_range=(31000, 31010),
                                      api_port=443, apiserver_port=16443)),
    (MASTERS_3, WORKERS_100[:3], dict(nodeport_range=(30080, 30080))),
    (MASTERS_3, WORKERS_100[:3], dict(worker_check_port=10256)),
    (MASTERS_3, WORKERS_100[:3], dict(user=None, group=None, chroot=None)),
])
def test_haproxy_accepts_rendered_configs(tmp_path, control_plane, workers,
                                          options):
    path = tmp_path / 'haproxy.cfg'
    path.write_text(lb.render(control_plane, workers, **options))
    result = site.check_config(path)
    assert result.returncode == 0, result.stderr
    assert 'Configuration file is valid' in result.stdout
    assert '[WARNING]' not in result.stderr, result.stderr


# --------------------------------------------------------- traffic --

def test_api_port_reaches_only_control_plane(tmp_path, ports, backends,
                                             haproxy):
    start(haproxy, write_config(tmp_path, make_layout(ports)), ports)
    seen = names_through(ports['api'], 12)
    assert {name for name, _ in seen} == CP_NAMES
    assert {port for _, port in seen} == {ports['apiserver']}


def test_nodeports_reach_only_workers_on_the_same_port(tmp_path, ports,
                                                       backends, haproxy):
    start(haproxy, write_config(tmp_path, make_layout(ports)), ports)
    for nodeport in ports['nodeports']:
        seen = names_through(nodeport, 9)
        assert {name for name, _ in seen} == WORKER_NAMES
        assert {port for _, port in seen} == {nodeport}


def test_graceful_reload_drops_worker_keeps_connections(tmp_path, ports,
                                                        backends, haproxy):
    nodeport = ports['nodeports'][1]
    old = start(haproxy, write_config(tmp_path, make_layout(ports)), ports)
    # an established connection to the worker about to be removed
    kept = site.wait_for(
        lambda: _session_to('worker-3', nodeport), DEADLINE,
        what='a connection to worker-3')
    try:
        config = write_config(tmp_path,
                              make_layout(ports, workers=WORKERS[:2]))
        assert site.check_config(config).returncode == 0
        new = haproxy.start(config, '-sf', str(old.pid))
        # the old process stops listening once the new one has bound
        site.wait_for(lambda: site.listening_sockets(old.pid) == 0,
                      DEADLINE, what='the old HAProxy to stop listening')
        assert new.poll() is None and old.poll() is None
        for port in ports['nodeports']:
            seen = {name for name, _ in names_through(port, 8)}
            assert seen == {'worker-1', 'worker-2'}
        assert kept.echo('still here') == 'still here'
        assert kept.name == 'worker-3'
    finally:
        kept.close()
    # the old process leaves once its last connection is gone
    site.wait_for(lambda: old.poll() is not None, DEADLINE,
                  what='the old HAProxy to exit')
    assert old.returncode == 0, haproxy.logs()
    assert {n for n, _ in names_through(ports['api'], 6)} == CP_NAMES


def _session_to(name, port):
    session = site.Session(LB, port)
    if session.name == name:
        return session
    session.close()
    return None


def test_broken_config_is_refused_and_haproxy_keeps_serving(
        tmp_path, ports, backends, haproxy):
    config = write_config(tmp_path, make_layout(ports))
    proc = start(haproxy, config, ports)
    good = config.read_text()
    broken = good.replace('balance roundrobin',
                          'balance roundrobin\n    no-such-keyword', 1)
    result = site.check_config(_write(tmp_path / 'broken.cfg', broken))
    assert result.returncode != 0
    assert "unknown keyword 'no-such-keyword'" in result.stderr
    # through apply_config: refused, file untouched, no reload attempted
    conn = site.LocalConnection()
    settings = lb.ApplySettings(
        config_path=str(config), check_command=(site.HAPROXY, '-c', '-f'),
        reload_command=('kill', '-USR2', str(proc.pid)))
    with pytest.raises(exceptions.LoadBalancerConfigInvalid) as err:
        lb.apply_config(conn, broken, settings)
    assert "unknown keyword 'no-such-keyword'" in str(err.value)
    assert config.read_text() == good
    assert not (tmp_path / 'haproxy.cfg.new').exists()
    # one command, which stopped at the check: no backup, swap or reload
    assert len(conn.commands) == 1
    assert not (tmp_path / 'haproxy.cfg.bak').exists()
    assert proc.poll() is None
    assert {n for n, _ in names_through(ports['api'], 6)} == CP_NAMES


def _write(path, text):
    path.write_text(text)
    return path


def test_apply_config_swaps_and_reloads_master_worker(tmp_path, ports,
                                                      backends, haproxy):
    """apply_config end to end, reloading as systemd does (USR2)."""
    config = write_config(tmp_path, make_layout(ports))
    old_text = config.read_text()
    master = start(haproxy, config, ports, '-W')
    nodeport = ports['nodeports'][0]
    kept = site.Session(LB, nodeport)
    conn = site.LocalConnection()
    settings = lb.ApplySettings(
        config_path=str(config), check_command=(site.HAPROXY, '-c', '-f'),
        reload_command=('kill', '-USR2', str(master.pid)))
    try:
        grown = make_layout(ports, workers=WORKERS + [SPARE_WORKER])
        assert lb.apply_config(conn, lb.render_haproxy_config(grown),
                               settings) is True
        site.wait_for(lambda: site.reachable(LB, nodeport) == (
            'worker-4', nodeport), DEADLINE, what='worker-4 served')
        assert config.read_text() == lb.render_haproxy_config(grown)
        assert (tmp_path / 'haproxy.cfg.bak').read_text() == old_text
        assert not (tmp_path / 'haproxy.cfg.new').exists()
        assert kept.echo('across USR2') == 'across USR2'
        assert len(conn.commands) == 1  # compare, stage, check, swap, reload
        # same text again: one command that compares, nothing changed
        backup = (tmp_path / 'haproxy.cfg.bak').stat().st_mtime_ns
        assert lb.apply_config(conn, lb.render_haproxy_config(grown),
                               settings) is False
        assert len(conn.commands) == 2
        assert (tmp_path / 'haproxy.cfg.bak').stat().st_mtime_ns == backup
        assert not (tmp_path / 'haproxy.cfg.new').exists()
        assert master.poll() is None
    finally:
        kept.close()


@pytest.mark.skipif(not site.ipv6_loopback(),
                    reason='optional: no IPv6 loopback')
def test_ipv6_backends_with_and_without_port(tmp_path, haproxy):
    """IPv6 servers: the API one with a port, NodePort ones without."""
    nodeports = site.free_ports(2, [LB, '::1'])
    api_port = site.free_ports(1, [LB])[0]
    apiserver = site.free_ports(1, ['::1'])[0]
    group = site.Backends()
    try:
        group.add('cp-v6', '::1', [apiserver])
        group.add('worker-v6', '::1', nodeports)
        layout = lb.LbLayout(
            control_plane=[('cp-v6', '::1')],
            workers=[('worker-v6', '::1')], api_port=api_port,
            apiserver_port=apiserver, bind_addresses=[LB],
            nodeport_range=(nodeports[0], nodeports[1]),
            worker_check_port=nodeports[0], user=None, group=None,
            chroot=None, maxconn=500)
        haproxy.start(write_config(tmp_path, layout))
        wait_serving(haproxy, LB, api_port)
        assert site.ask(LB, api_port) == ('cp-v6', apiserver)
        for port in nodeports:
            assert site.ask(LB, port) == ('worker-v6', port)
    finally:
        group.stop()


@pytest.mark.skipif(not site.ipv6_loopback(),
                    reason='optional: no IPv6 loopback')
def test_ipv6_and_ipv4_binds(tmp_path, ports, backends, haproxy):
    """Listening on an IPv6 address next to an IPv4 one."""
    layout = make_layout(ports, bind_addresses=[LB, '::1'])
    haproxy.start(write_config(tmp_path, layout))
    wait_serving(haproxy, '::1', ports['api'])
    for address in (LB, '::1'):
        assert {site.ask(address, ports['api'])[0]
                for _ in range(6)} == CP_NAMES
        for port in ports['nodeports']:
            seen = {site.ask(address, port) for _ in range(6)}
            assert seen == {(name, port) for name in WORKER_NAMES}


def test_cli_render_of_the_ha_sample_passes_the_check(tmp_path):
    samples = pathlib.Path(__file__).parents[2] / 'samples'
    out = tmp_path / 'haproxy.cfg'
    assert cli.main(['render', 'haproxy',
                     '--params', str(samples / 'instantiate_ha.json'),
                     '--topology', str(samples / 'topology_ha.yaml'),
                     '-o', str(out)]) == cli.EXIT_OK
    result = site.check_config(out)
    assert result.returncode == 0, result.stderr
    assert '[WARNING]' not in result.stderr, result.stderr
