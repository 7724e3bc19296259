"""kubespray-mgmt run: SSH connection retries are shown as they happen."""

import json
import pathlib
import socket

from mgmt_driver.adapters import cli

SAMPLES = pathlib.Path(__file__).parents[2] / 'samples'


def _closed_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def _inputs(tmp_path):
    doc = json.loads((SAMPLES / 'instantiate_simple.json').read_text())
    ansible = doc['additionalParams']['k8s_cluster_installation_param'][
        'ansible']
    ansible.update(ip_address='127.0.0.1', port=_closed_port())
    params = tmp_path / 'params.json'
    params.write_text(json.dumps(doc))
    config = tmp_path / 'kubespray-mgmt.conf'
    config.write_text(
        '[kubespray_mgmt]\nssh_connect_retries = 2\n'
        'ssh_retry_initial_delay = 0\nssh_retry_max_delay = 0\n'
        'known_hosts_file = %s\nkubeconfig_dir = %s\n' % (
            tmp_path / 'known_hosts', tmp_path / 'kubeconfigs'))
    return str(params), str(config)


def test_each_failed_attempt_is_printed_with_the_next_delay(tmp_path,
                                                            capsys):
    params, config = _inputs(tmp_path)
    code = cli.main(['--config-file', config, 'run', 'instantiate',
                     '--params', params, '--topology',
                     str(SAMPLES / 'topology_simple.yaml')])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_REMOTE_FAILURE
    retries = [line for line in out.splitlines() if 'warning: SSH' in line]
    assert len(retries) == 2, out
    assert retries[0].startswith('[')  # timed like every progress line
    assert 'attempt 1 of 3 failed' in retries[0]
    assert 'attempt 2 of 3 failed' in retries[1]
    assert retries[1].endswith('next try in 0.0 s')
    assert 'after 3 attempt(s)' in err and 'Traceback' not in err
