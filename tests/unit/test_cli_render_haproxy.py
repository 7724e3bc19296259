"""kubespray-mgmt render haproxy."""

import json
import pathlib

from oslo_config import cfg

from mgmt_driver.adapters import cli
from mgmt_driver.remote import loadbalancer as lb

SAMPLES = pathlib.Path(__file__).parents[2] / 'samples'
HA_PARAMS = str(SAMPLES / 'instantiate_ha.json')
HA_TOPOLOGY = str(SAMPLES / 'topology_ha.yaml')


def render(*extra):
    return cli.main(['render', 'haproxy', '--params', HA_PARAMS,
                     '--topology', HA_TOPOLOGY, *extra])


def test_renders_the_ha_sample(tmp_path, capsys):
    out = tmp_path / 'haproxy.cfg'
    assert render('-o', str(out)) == cli.EXIT_OK
    expected = lb.render(
        [('master-10-10-0-%d' % i, '10.10.0.%d' % i) for i in (11, 12, 13)],
        [('worker-10-10-0-%d' % i, '10.10.0.%d' % i) for i in (21, 22)])
    assert out.read_text() == expected
    assert out.stat().st_mode & 0o777 == 0o644
    assert 'NodePorts 30000-32767 to 2 worker(s)' in capsys.readouterr().out
    assert [p.name for p in tmp_path.iterdir()] == ['haproxy.cfg']


def test_standard_output_and_worker_check(capsys):
    assert render('-o', '-', '--worker-check-port', '10256') == cli.EXIT_OK
    text = capsys.readouterr().out
    assert 'server worker-10-10-0-21 10.10.0.21 check port 10256' in text
    assert text.startswith('# HAProxy configuration')


def test_request_ports_reach_the_config(tmp_path):
    request = json.loads(pathlib.Path(HA_PARAMS).read_text())
    params = request.get('additionalParams', request)
    lb_param = params['k8s_cluster_installation_param']['external_lb_param']
    lb_param.update(api_port=9443, nodeport_range='31000-31100')
    changed = tmp_path / 'params.json'
    changed.write_text(json.dumps(request))
    out = tmp_path / 'haproxy.cfg'
    assert cli.main(['render', 'haproxy', '--params', str(changed),
                     '--topology', HA_TOPOLOGY, '-o', str(out)]) == 0
    text = out.read_text()
    assert '\n    bind 0.0.0.0:9443\n' in text
    assert '\n    bind 0.0.0.0:31000-31100\n' in text


def test_bad_layout_is_bad_input_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / 'haproxy.cfg'
    assert render('-o', str(out), '--worker-check-port',
                  '70000') == cli.EXIT_BAD_INPUT
    assert 'worker_check_port: 70000' in capsys.readouterr().err
    assert not out.exists()


def test_bad_params_is_bad_input(tmp_path, capsys):
    params = tmp_path / 'params.json'
    params.write_text('{"k8s_cluster_installation_param": {}}')
    out = tmp_path / 'haproxy.cfg'
    assert cli.main(['render', 'haproxy', '--params', str(params),
                     '--topology', HA_TOPOLOGY, '-o', str(out)]) == 1
    assert capsys.readouterr().err
    assert not out.exists()


def test_unwritable_output_is_reported(tmp_path, capsys):
    out = tmp_path / 'missing-dir' / 'haproxy.cfg'
    assert render('-o', str(out)) == cli.EXIT_REMOTE_FAILURE
    assert 'cannot write' in capsys.readouterr().err


def test_config_file_options_reach_the_config(tmp_path):
    config = tmp_path / 'k.conf'
    config.write_text('[kubespray_mgmt]\nhaproxy_bind_addresses = '
                      '192.0.2.5\nhaproxy_chroot =\nhaproxy_maxconn = 500\n')
    out = tmp_path / 'haproxy.cfg'
    try:
        assert cli.main(['--config-file', str(config), 'render', 'haproxy',
                         '--params', HA_PARAMS, '--topology', HA_TOPOLOGY,
                         '-o', str(out)]) == cli.EXIT_OK
    finally:  # the command loaded the file into the global CONF
        cfg.CONF([], project='kubespray-mgmt', default_config_files=[])
    text = out.read_text()
    assert '\n    bind 192.0.2.5:8383\n' in text
    assert 'chroot' not in text and '\n    maxconn 500\n' in text
