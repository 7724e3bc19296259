"""Following what Tacker runs, listing clusters, machine-readable runs and
Ctrl-C, on the local site (127.0.51.x), as an operator types them.

One cluster, one scenario: Tacker's instantiate_end hook builds it (its
cluster.yml held until the operator has seen it); meanwhile the
operator, with only the conductor's config file and the VNF instance
id, follows the playbook
(``logs --follow --instance-id``) and lists the clusters; then reads
``status --instance-id`` without parameters or topology; presses Ctrl-C
during a scale-in's playbook and runs the same command again with
``-o json``; scales out with ``-o json``.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import types

import pytest
from mgmt_localsite import lab as lab_mod
from mgmt_localsite import site as site_mod
from oslo_config import cfg

from mgmt_driver.adapters import cli
from mgmt_driver.model import core
from mgmt_driver.state import records
from tests.functional import tacker_fakes

ANSIBLE = '127.0.51.1'
LB = '127.0.51.2'
MASTERS = ['127.0.51.10']
WORKERS = ['127.0.51.20', '127.0.51.21']
W2 = site_mod.name_of(core.ROLE_WORKER, WORKERS[1])
CONTEXT = types.SimpleNamespace(project_id='following')
REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

pytestmark = pytest.mark.skipif(site_mod.unavailable() is not None,
                                reason=str(site_mod.unavailable()))


@pytest.fixture(scope='module')
def site(tmp_path_factory):
    """The lab, Tacker's hooks on it, and the conductor's config file
    (what the operator finds on the conductor host)."""
    tmp = tmp_path_factory.mktemp('following')
    try:
        lab = lab_mod.Lab(ANSIBLE, LB, MASTERS, WORKERS,
                          backends=False).start()
    except lab_mod.LabError as exc:
        pytest.skip(str(exc))
    try:
        vnf, vims, hooks = tacker_fakes.vnf_on_lab(lab, MASTERS, WORKERS, LB)
        options = dict(site_mod.driver_options(
            lab.site, lab.haproxy, lab.root / 'known_hosts',
            key_dirs=[lab.sshd.key_dir]),
            kubeconfig_dir=str(lab.root / 'kubeconfigs'))
        config = tmp / 'tacker.conf'  # the lab's own options, as a file
        config.write_text(site_mod.config_file_text(options))
        params_file = tmp / 'params.json'
        params_file.write_text(json.dumps(lab.additional_params))
        topology = tmp / 'topology.json'
        topology.write_text(json.dumps(lab.topology(MASTERS, WORKERS)))
        yield types.SimpleNamespace(
            lab=lab, vnf=vnf, vims=vims, hooks=hooks, config=str(config),
            params=str(params_file), topology=str(topology))
    finally:
        lab.stop()
        cfg.CONF([], project='kubespray-mgmt', default_config_files=[])


def _command(site, *argv):
    """``kubespray-mgmt --config-file CONF ARGV...`` as a process."""
    return [sys.executable, '-m', 'mgmt_driver.adapters.cli', '--config-file',
            site.config, *argv]


def _env():
    return dict(os.environ, PYTHONPATH=REPO)


def _with_sigint(start):
    """``start()`` with SIGINT handled in this process, so that the
    program it starts gets SIGINT's default action (a handler is reset
    at exec; an ignored signal stays ignored), whatever this process
    inherited."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return start()
    finally:
        signal.signal(signal.SIGINT, previous)


def _main(capsys, site, *argv):
    code = cli.main(['--config-file', site.config, *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _wait_for(predicate, what, timeout=120):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, 'timed out: ' + what
        time.sleep(0.1)


def test_an_operator_follows_lists_and_runs(site, capsys):
    _follow_a_tacker_instantiate(site)
    _status_from_the_record_alone(site, capsys)
    _list_shows_the_cluster(site, capsys)
    _ctrl_c_says_where_the_playbook_goes_on(site, capsys)
    _scale_out_output_json(site, capsys)


def _follow_a_tacker_instantiate(site):
    """While Tacker's hook runs cluster.yml, the operator follows it and
    sees it in the list, with the config file and the instance id only.

    cluster.yml is held (not slowed down by a guessed time: under load
    the operator's commands could start after it ended) until ``list``
    has answered and ``logs --follow`` has shown its first line."""
    site_files = site.lab.site
    release = site_files.hold('cluster.yml')
    request = tacker_fakes.instantiate_request(site.vnf.additional_params)
    failed = []

    def hook():
        try:
            site.hooks.instantiate_end(CONTEXT, site.vnf.instance, request,
                                       None, None)
        except Exception as exc:  # reported below, in the test's thread
            failed.append(exc)
    thread = threading.Thread(target=hook)
    thread.start()
    try:
        _wait_for(lambda: site_files.held('cluster.yml'),
                  'cluster.yml to start')
        listed = subprocess.run(_command(site, 'list'), env=_env(),
                                capture_output=True, text=True, timeout=120)
        follow = subprocess.Popen(
            _command(site, 'logs', '--follow', '--instance-id',
                     site.vnf.id), env=_env(), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        try:
            # A line (Ansible's log starts with an empty one), not the
            # end of the output: following the held run.
            first = follow.stdout.readline()
            release()
            out, err = follow.communicate(timeout=300)
        finally:
            if follow.poll() is None:
                follow.kill()
                follow.wait()
    finally:
        release()
        thread.join(timeout=600)
    assert not failed, failed
    assert listed.returncode == 0, listed.stderr
    row = next(line.split() for line in listed.stdout.splitlines()
               if line.startswith(site.vnf.id))
    assert row[-3:-1] == ['instantiate_end', 'running'], row
    assert follow.returncode == 0, err
    # Followed from the held run's first lines to the end of cluster.yml.
    assert first, err
    assert 'PLAY RECAP' in out, out[-2000:]
    assert '-instantiate_end-cluster.log on %s' % ANSIBLE in err


def _status_from_the_record_alone(site, capsys):
    code, out, err = _main(capsys, site, 'status', '--instance-id',
                           site.vnf.id)
    # 3: the site runs no API server behind HAProxy (a backend is down).
    assert code == cli.EXIT_DIFFERENCES, (out + err)[-3000:]
    names = {line.split()[0] for line in out.splitlines()
             if line.startswith(('  master-', '  worker-'))}
    assert names == {site_mod.name_of(core.ROLE_MASTER, a)
                     for a in MASTERS} | {
        site_mod.name_of(core.ROLE_WORKER, a) for a in WORKERS}
    assert '-instantiate_end-cluster.log' in out  # its playbook runs
    # No secret in the record: key references only.
    store = records.RecordStore(str(site.lab.root / 'records'))
    text = open(store.path(site.vnf.id)).read()
    assert 'PRIVATE KEY' not in text and '"key": "file"' in text


def _list_shows_the_cluster(site, capsys):
    code, out, err = _main(capsys, site, 'list', '-o', 'json')
    assert code == cli.EXIT_OK, err
    entry = next(e for e in json.loads(out)['instances']
                 if e['instance_id'] == site.vnf.id)
    assert (entry['masters'], entry['workers'], entry['gateways']) == \
        (1, 2, 1)
    assert entry['ansible_server'].startswith(ANSIBLE + ':')
    assert entry['vims'][0]['kind'] == records.TACKER_VIM
    assert entry['last_operation']['operation'] == 'instantiate_end'
    assert entry['last_operation']['result'] == 'succeeded'
    code, out, err = _main(capsys, site, 'list')
    assert code == cli.EXIT_OK and out.startswith('INSTANCE  ')


def _run(capsys, site, *argv):
    return _main(capsys, site, 'run', *argv, '--params', site.params,
                 '--topology', site.topology, '--instance-id', site.vnf.id)


def _scale_out_output_json(site, capsys):
    code, out, err = _run(capsys, site, 'scale-out', '--nodes', W2, '-o',
                          'json')
    assert code == cli.EXIT_OK, (out + err)[-3000:]
    report = json.loads(out)  # progress went to standard error
    assert report['result'] == 'succeeded' and report['dry_run'] is False
    assert report['nodes'] == {'added': [W2], 'removed': [],
                               'named': [W2]}
    joined = [p for p in report['playbooks'] if p['playbook'] == 'scale.yml']
    assert [p['limit'] for p in joined] == [[W2]]
    assert joined[0]['exit_code'] == 0
    assert os.path.isfile(joined[0]['log'])  # the site's server is here
    assert W2 in site.lab.site.nodes()


def _ctrl_c_says_where_the_playbook_goes_on(site, capsys):
    """Ctrl-C while remove-node.yml runs: exit 130 naming the host and
    the log; the playbook goes on, and the same command finishes it.

    remove-node.yml is held until the command has answered Ctrl-C (a
    pause of a guessed length could end first under load).  The command
    gets Ctrl-C as from an operator's terminal (:func:`_with_sigint`):
    a suite started in the background by a shell without job control
    ignores SIGINT, and so did the command (it went on to the end and
    exited 0; held, it never ended)."""
    site_files = site.lab.site
    release = site_files.hold('remove-node.yml')
    argv = ('run', 'scale-in', '--nodes', W2, '--params', site.params,
            '--topology', site.topology, '--instance-id', site.vnf.id)
    proc = _with_sigint(lambda: subprocess.Popen(
        _command(site, *argv), env=_env(), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True))
    try:
        _wait_for(lambda: site_files.held('remove-node.yml'),
                  'remove-node.yml to start')
        proc.send_signal(signal.SIGINT)
        err = proc.communicate(timeout=60)[1]
    finally:
        release()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == cli.EXIT_INTERRUPTED, err
    line = err.strip().splitlines()[-1]
    assert line.startswith('kubespray-mgmt: interrupted; remove-node.yml '
                           'goes on on the Ansible server %s' % ANSIBLE)
    log = line.split('its log: ', 1)[1].split('. Run the same', 1)[0]
    assert log.endswith('-scale_in-remove-node.log'), line
    assert line.endswith('Run the same command again to follow and '
                         'finish it')
    _wait_for(lambda: os.path.isfile(log[:-len('.log')] + '.rc'),
              'the detached remove-node.yml to end')
    code, out, err = _main(capsys, site, *argv, '-o', 'json')
    assert code == cli.EXIT_OK, (out + err)[-3000:]
    assert W2 not in site.lab.site.nodes()
    report = json.loads(out)
    assert report['nodes']['removed'] == [W2], report
    # The detached run had removed it: nothing left to run again.
    assert open(log[:-len('.log')] + '.rc').read().strip() == '0'
    assert report['playbooks'] == [] and report['result'] == 'succeeded'
    store = records.RecordStore(str(site.lab.root / 'records'))
    assert store.load(site.vnf.id).last_operation['result'] == 'succeeded'
