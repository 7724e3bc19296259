"""The fake kubectl's ``get --raw=/readyz [--server=URL]``: what the
upgrade's gates ask through the load balancer
(mgmt_driver.operations.gates)."""

import json
import pathlib
import socket
import subprocess
import sys
import threading

import pytest
from mgmt_localsite import clusterstate as cs

KUBECTL = pathlib.Path(cs.__file__).parent / 'bin' / 'kubectl'


@pytest.fixture
def state_dir(tmp_path):
    state = cs.init_cluster(cs.empty_state(), 'c', 'v1.33.5', 'CA')
    (tmp_path / cs.STATE_FILE).write_text(json.dumps(state))
    return tmp_path


def kubectl(state_dir, *args):
    return subprocess.run(
        [sys.executable, str(KUBECTL), *args], capture_output=True,
        text=True, timeout=30,
        env={'KUBE_DOUBLE_STATE_DIR': str(state_dir), 'PATH': '/usr/bin'})


def serve(greet):
    """A listener on 127.0.55.250 that greets (a backend behind HAProxy)
    or closes at once (a frontend with no backend up)."""
    sock = socket.socket()
    sock.bind(('127.0.55.250', 0))
    sock.listen(4)

    def accept():
        conn, _ = sock.accept()
        with conn:
            if greet:
                conn.sendall(b'master:6443\n')
    threading.Thread(target=accept, daemon=True).start()
    return sock


def test_readyz_answers_ok_from_a_running_cluster(state_dir):
    result = kubectl(state_dir, 'get', '--raw=/readyz')
    assert (result.returncode, result.stdout) == (0, 'ok\n')


def test_readyz_through_a_server_that_answers(state_dir):
    with serve(True) as sock:
        result = kubectl(state_dir, '--server=https://127.0.55.250:%d'
                         % sock.getsockname()[1], 'get', '--raw=/readyz')
    assert (result.returncode, result.stdout) == (0, 'ok\n')


def test_readyz_through_a_frontend_without_backend_fails(state_dir):
    with serve(False) as sock:
        result = kubectl(state_dir, '--server=https://127.0.55.250:%d'
                         % sock.getsockname()[1], 'get', '--raw=/readyz')
    assert result.returncode == 1
    assert result.stderr == 'Unable to connect to the server: EOF\n'


def test_readyz_through_nothing_listening_is_refused(state_dir):
    sock = socket.socket()
    sock.bind(('127.0.55.250', 0))
    port = sock.getsockname()[1]
    sock.close()
    result = kubectl(state_dir, '--server=https://127.0.55.250:%d' % port,
                     'get', '--raw=/readyz')
    assert result.returncode == 1
    assert result.stderr.startswith(
        'The connection to the server 127.0.55.250:%d was refused' % port)


def test_raw_takes_no_resource(state_dir):
    result = kubectl(state_dir, 'get', 'nodes', '--raw=/readyz')
    assert result.returncode == 1 and 'may not be passed' in result.stderr
