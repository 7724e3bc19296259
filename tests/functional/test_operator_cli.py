"""The operator's rough edges, on the local site (127.0.46.x): one
cluster, one scenario, as an operator types the commands.

Instantiate with an LB install script and a proxy with credentials (the
script gets them on its standard input over the real sshd, its command
line does not); status shows taints and a cordoned node; ``status |
head`` and ``logs | head`` end quietly; a run that meets another run's
lock exits 4; after terminate, status says the cluster is gone.
"""

import fcntl
import json
import os
import subprocess
import sys

import pytest
import yaml
from mgmt_localsite import lab as lab_mod
from mgmt_localsite import site as site_mod
from oslo_config import cfg

from mgmt_driver.adapters import cli
from mgmt_driver.model import core

ANSIBLE = '127.0.46.1'
LB = '127.0.46.2'
MASTERS = ['127.0.46.10']
WORKERS = ['127.0.46.20', '127.0.46.21']
W1, W2 = (site_mod.name_of(core.ROLE_WORKER, a) for a in WORKERS)
INSTANCE = 'operator'
REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PROXY = 'http://proxyuser:pr0xy-s3cret@proxy.invalid:3128'

pytestmark = pytest.mark.skipif(site_mod.unavailable() is not None,
                                reason=str(site_mod.unavailable()))

# The LB install script of the package: records what it was given (its
# standard input, the flag, its ancestors' command lines), installs
# nothing.
STUB_SCRIPT = '''#!/bin/sh
out="$HOME/%(out)s"
{
  echo "flag=${KUBESPRAY_MGMT_PROXY_ON_STDIN:-}"
  sed 's/^/stdin:/'
  p=$$
  for i in 1 2 3 4 5; do
    [ -r "/proc/$p/cmdline" ] || break
    printf 'argv:'; tr '\\0' ' ' < "/proc/$p/cmdline"; echo
    p=$(cut -d' ' -f4 "/proc/$p/stat")
  done
} > "$out"
'''


@pytest.fixture(scope='module')
def site(tmp_path_factory):
    """The started lab, a config file, parameters, topology, package."""
    tmp = tmp_path_factory.mktemp('operator')
    try:
        lab = lab_mod.Lab(ANSIBLE, LB, MASTERS, WORKERS,
                          backends=False).start()
    except lab_mod.LabError as exc:
        pytest.skip(str(exc))
    try:
        yield _inputs(lab, tmp)
    finally:
        lab.stop()
        cfg.CONF([], project='kubespray-mgmt', default_config_files=[])


def _inputs(lab, tmp):
    options = dict(site_mod.driver_options(
        lab.site, lab.haproxy, tmp / 'known_hosts',
        key_dirs=[lab.sshd.key_dir]),
        kubeconfig_dir=str(tmp / 'kubeconfigs'))
    config = tmp / 'kubespray-mgmt.conf'
    config.write_text(site_mod.config_file_text(options))
    seen = 'lb-script-seen.txt'  # in the LB user's site home
    package = tmp / 'package'
    (package / 'Scripts').mkdir(parents=True)
    (package / 'Scripts' / 'install_external_lb.sh').write_text(
        STUB_SCRIPT % {'out': seen})
    request = lab.additional_params
    root = request[core.ROOT]
    root['external_lb_param']['script_path'] = 'Scripts/install_external_lb.sh'
    root['proxy'] = {'http_proxy': PROXY, 'no_proxy': '.corp.invalid'}
    root['kubespray'] = {'reset_on_terminate': False}  # one playbook less
    params_file = tmp / 'params.json'
    params_file.write_text(json.dumps(request))
    topology = tmp / 'topology.yaml'
    topology.write_text(yaml.safe_dump(lab.topology(MASTERS, WORKERS)))
    return lab, {'config': str(config), 'params': str(params_file),
                 'topology': str(topology), 'package': str(package),
                 'seen': lab.sshd.home() / seen}


def _main(capsys, inputs, *argv):
    code = cli.main(['--config-file', inputs['config'], *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _run(capsys, inputs, operation, *extra):
    return _main(capsys, inputs, 'run', operation, '--params',
                 inputs['params'], '--topology', inputs['topology'],
                 '--instance-id', INSTANCE, *extra)


def _status(capsys, inputs, *extra):
    return _main(capsys, inputs, 'status', '--params', inputs['params'],
                 '--topology', inputs['topology'], '--instance-id',
                 INSTANCE, *extra)


def _with_stdout_closed(inputs, *argv):
    """The command in a process whose standard output nobody reads (the
    pipe is closed before it writes): ``... | head`` at its worst."""
    proc = subprocess.Popen(
        [sys.executable, '-m', 'mgmt_driver.adapters.cli', '--config-file',
         inputs['config'], *argv], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=REPO))
    proc.stdout.close()
    err = proc.stderr.read().decode()
    return proc.wait(timeout=300), err


def test_an_operator_session(site, capsys):
    lab, inputs = site
    code, out, err = _run(capsys, inputs, 'instantiate', '--package-dir',
                          inputs['package'])
    assert code == cli.EXIT_OK, (out + err)[-3000:]
    _the_lb_script_got_the_proxy_on_its_input(inputs['seen'].read_text())

    _a_forgotten_instance_id_is_refused(lab, capsys, inputs)
    _status_shows_taints_and_cordoned_nodes(lab, capsys, inputs)
    _a_closed_standard_output_ends_quietly(inputs)
    _a_busy_lock_exits_4(lab, capsys, inputs)

    code, out, err = _run(capsys, inputs, 'terminate')
    assert code == cli.EXIT_OK, (out + err)[-3000:]
    _status_after_terminate_says_the_cluster_is_gone(capsys, inputs)


def _the_lb_script_got_the_proxy_on_its_input(seen):
    lines = seen.splitlines()
    assert 'flag=1' in lines
    stdin = dict(line[len('stdin:'):].split('=', 1)
                 for line in lines if line.startswith('stdin:'))
    assert stdin['http_proxy'] == PROXY
    assert stdin['no_proxy'].startswith('.corp.invalid,localhost,')
    argv = [line for line in lines if line.startswith('argv:')]
    assert any('.kubespray-mgmt-install-lb.sh' in line for line in argv)
    assert not any('s3cret' in line for line in argv), argv


def _a_forgotten_instance_id_is_refused(lab, capsys, inputs):
    """The default --instance-id on this cluster's nodes: scale-out and
    terminate change nothing and name the owner (issue 41: they "added
    0 worker(s)" and reset every node)."""
    runs = len(lab.site.runs())
    for operation in ('scale-out', 'terminate'):
        code, out, err = _main(capsys, inputs, 'run', operation,
                               '--params', inputs['params'], '--topology',
                               inputs['topology'])
        assert code == cli.EXIT_BAD_INPUT, (out + err)[-3000:]
        assert "belong to instance '%s'" % INSTANCE in err
        assert '--instance-id %s' % INSTANCE in err
    assert len(lab.site.runs()) == runs
    assert not os.path.exists(lab.workspace('kubespray-mgmt'))


def _status_shows_taints_and_cordoned_nodes(lab, capsys, inputs):
    code, out, err = _run(capsys, inputs, 'relabel', '--nodes', W1,
                          '--taints', 'gpu=yes:NoSchedule')
    assert code == cli.EXIT_OK, (out + err)[-3000:]
    drv, _ = lab.driver(lab.spec(), INSTANCE)
    with drv.pool:
        drv.kubectl_client(lab.cluster(lab.spec(), MASTERS,
                                       WORKERS)).cordon(W2)
    code, out, err = _status(capsys, inputs)
    # 3: the site runs no API server behind HAProxy (a backend is down).
    assert code == cli.EXIT_DIFFERENCES, (out + err)[-3000:]
    rows = {line.split()[0]: line.split() for line in out.splitlines()
            if line.startswith('  worker-')}
    assert rows[W1][2] == 'True' and rows[W1][-1] == 'gpu=yes:NoSchedule'
    assert rows[W2][2] == 'True,cordoned'


def _a_closed_standard_output_ends_quietly(inputs):
    common = ('--params', inputs['params'], '--instance-id', INSTANCE)
    code, err = _with_stdout_closed(inputs, 'status', '--topology',
                                    inputs['topology'], *common)
    assert (code, err) == (cli.EXIT_BROKEN_PIPE, '')
    # The log streams over SSH as it is printed: the closed output is
    # not the connection's failure.
    code, err = _with_stdout_closed(inputs, 'logs', *common)
    assert (code, err) == (cli.EXIT_BROKEN_PIPE, '')


def _a_busy_lock_exits_4(lab, capsys, inputs):
    """Another run holds the workspace's lock (as a playbook still
    running would): the command changes nothing and exits 4."""
    runs = len(lab.site.runs())
    lock = lab.workspace(INSTANCE) / 'run.lock'
    with open(lock, 'a') as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        code, out, err = _run(capsys, inputs, 'scale-in', '--nodes', W2)
    assert code == cli.EXIT_BUSY, (out + err)[-3000:]
    assert "holds this cluster's lock" in err
    assert len(lab.site.runs()) == runs and W2 in lab.site.nodes()


def _status_after_terminate_says_the_cluster_is_gone(capsys, inputs):
    code, out, err = _status(capsys, inputs)
    assert code == cli.EXIT_REMOTE_FAILURE
    assert 'host_key_policy' not in out + err, out + err
    assert err.splitlines()[-1].startswith(
        "kubespray-mgmt: no cluster: instance '%s' has no record" % INSTANCE)
    assert 'it was terminated' in err and out == ''
