"""A kept local site and the doctor, as an operator types the commands
(issue 31, features 4 and 5), on 127.0.52.x: ``site up`` returns and
prints the commands to try, they work (status, logs, doctor), doctor
finds a misspelt option and a load balancer without sudo, a second
``site up`` is refused, and ``site down`` stops every process by PID
and removes the files.  One site for the module."""

import json
import os
import shlex
import subprocess
import sys

import pytest
import yaml
from mgmt_localsite import kept
from mgmt_localsite import procs
from mgmt_localsite import site as site_mod

from tests import docs

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
LOOPBACK = '127.0.52'
ANSIBLE, LB = LOOPBACK + '.210', LOOPBACK + '.211'

pytestmark = pytest.mark.skipif(site_mod.unavailable() is not None,
                                reason=str(site_mod.unavailable()))


def _cli(argv, timeout=300, config=None):
    """``kubespray-mgmt ARGV`` in a process of its own (*config*: the
    config file it reads without ``--config-file``)."""
    # The checkout's site too, not an installed one.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [REPO, os.path.join(REPO, 'localsite-dist')]))
    env.pop('KUBESPRAY_MGMT_CONFIG_FILES', None)
    if config:
        env['KUBESPRAY_MGMT_CONFIG_FILES'] = str(config)
    return subprocess.run([sys.executable, '-m', 'mgmt_driver.adapters.cli']
                          + argv,
                          capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=REPO)


def _printed(text):
    """The commands ``site up`` printed, as argv lists (without the
    program name), by their subcommand."""
    found = {}
    for line in text.splitlines():
        words = shlex.split(line.split('#')[0])
        if words[:1] == ['kubespray-mgmt']:
            verb = next(w for w in words[1:] if not w.startswith('-') and
                        not w.endswith('.conf'))
            found[verb] = words[1:]
    return found


@pytest.fixture(scope='module')
def up(tmp_path_factory):
    directory = tmp_path_factory.mktemp('kept') / 'site'
    # Through a pipe: the command must end although the daemons it left
    # run on (they must not hold its standard output open).
    result = _cli(['site', 'up', '--dir', str(directory), '--loopback',
                   LOOPBACK, '--workers', '1'])
    try:
        assert result.returncode == 0, result.stdout + result.stderr
        yield directory, _printed(result.stdout), result.stdout
    finally:
        if (directory / kept.STATE_FILE).exists():
            kept.down(directory, out=open(os.devnull, 'w'))


def test_site_up_prints_commands_that_work(up):
    directory, printed, out = up
    assert {'status', 'logs', 'run', 'doctor', 'site'} <= set(printed), out
    assert ('The site took %s (Ansible server), %s (load balancer), '
            '%s.221 (masters) and %s.231 (workers).' % (
                ANSIBLE, LB, LOOPBACK, LOOPBACK)) in out.splitlines(), out
    assert 'instantiate' not in out.splitlines()[-1]
    status = _cli(printed['status'])
    assert status.returncode == 0, status.stdout + status.stderr
    assert 'worker-127-0-52-231' in status.stdout
    logs = _cli(printed['logs'])
    assert logs.returncode == 0, logs.stderr
    assert 'PLAY RECAP' in logs.stdout


def test_doctor_on_the_kept_site_finds_nothing(up):
    _, printed, _ = up
    result = _cli(printed['doctor'])
    assert result.returncode == 0, result.stdout
    lines = result.stdout.splitlines()
    assert any(line.startswith('ok: %s: logged in as ' % ANSIBLE) and
               'flock, setsid, timeout, sha256sum' in line for line in lines)
    assert any(line.startswith('ok: %s: ansible-playbook ' % ANSIBLE) and
               'in the range the checkout accepts' in line for line in lines)
    assert lines[-1] == '0 problem(s), 0 warning(s)'


def test_doctor_finds_a_typo_here_and_no_sudo_on_the_lb(up):
    directory, printed, _ = up
    config = directory.parent / 'typo.conf'
    config.write_text((directory / kept.CONFIG_FILE).read_text() +
                      'host_key_polcy = reject\n'
                      'haproxy_sudo = always\n')
    argv = list(printed['doctor'])
    argv[argv.index('--config-file') + 1] = str(config)
    result = _cli(argv + ['--output', 'json'])
    report = json.loads(result.stdout)
    assert result.returncode == report['exit_code'] == 3  # here and remote
    problems = {(f['where'], f['text'].split(': ', 1)[-1])
                for f in report['findings'] if f['level'] == 'problem'}
    assert ('local', '[kubespray_mgmt] host_key_polcy: no such option (did '
                     'you mean host_key_policy?); it is ignored') in problems
    assert [w for w, _ in problems if w != 'local'] == [LB]


def test_upgrade_and_renew_certs_pass_their_gates(up):
    """The gates ask /readyz through the LB after each master, and
    renew-certs on the master's own 6443 (issue 41 item 3): the kept
    site serves both, so both commands finish."""
    directory, printed, _ = up
    config = directory.parent / 'short.conf'
    config.write_text((directory / kept.CONFIG_FILE).read_text() +
                      'cert_renew_timeout = 10\n')
    argv = list(printed['run'])
    argv[argv.index('--config-file') + 1] = str(config)
    at = argv.index('scale-in')
    del argv[at + 1:at + 3]  # --nodes NAME
    argv[at] = 'renew-certs'
    renew = _cli(argv)
    assert renew.returncode == 0, renew.stdout + renew.stderr
    assert 'the API answers through the load balancer' in renew.stdout
    argv[at:at + 1] = ['upgrade', '--kube-version', '1.34.7']
    upgrade = _cli(argv, timeout=600)
    assert upgrade.returncode == 0, upgrade.stdout + upgrade.stderr
    assert 'upgraded demo to 1.34.7: 2 node(s) upgraded' in upgrade.stdout


def test_the_guide_s_site_commands_run_on_the_kept_site(up, tmp_path):
    """Every command of a ``site`` block of the docs, in their order,
    with the substitution rule of ``contributor/testing`` ("Commands in
    the docs"), exits as the docs say (issue 41: the guide says nothing
    a command contradicts).  The guide ends with ``run terminate``."""
    directory = up[0]
    site = {'config': directory / kept.CONFIG_FILE,
            'params': directory / kept.PARAMS_FILE,
            'topology': directory / kept.TOPOLOGY_FILE, 'scratch': tmp_path}
    nodes = docs.sample_nodes(yaml.safe_load(site['topology'].read_text()))
    commands = docs.site_commands()
    assert commands[-1][1].startswith('kubespray-mgmt run terminate')
    failed = []
    for page, command in commands:
        for argv, code in docs.site_argv(command, site, nodes):
            result = _cli(argv, timeout=600, config=site['config'])
            if result.returncode != code:
                failed.append('%s: %s: exit %d, not %d:\n%s%s' % (
                    page, shlex.join(argv), result.returncode, code,
                    result.stdout[-2000:], result.stderr[-2000:]))
    assert failed == []


def test_a_second_site_up_is_refused_and_site_down_stops_everything(up):
    directory, printed, _ = up
    again = _cli(['site', 'up', '--dir', str(directory), '--loopback',
                  LOOPBACK])
    assert again.returncode == 1
    assert 'a site is up in %s already' % directory in again.stderr
    beside = directory.parent / 'beside'
    other = _cli(['site', 'up', '--dir', str(beside), '--loopback',
                  LOOPBACK])
    assert other.returncode == 1, other.stdout + other.stderr
    assert ('--loopback %s: the site in %s is up on these addresses' % (
        LOOPBACK, directory)) in other.stderr
    assert not beside.exists()
    state = json.loads((directory / kept.STATE_FILE).read_text())
    pids = [e['pid'] for e in state['sshd']] + [
        state[name]['pid'] for name in ('haproxy', 'greeters')]
    down = _cli(printed['site'])
    assert down.returncode == 0, down.stdout + down.stderr
    assert 'stopped HAProxy (PID %d)' % state['haproxy']['pid'] in down.stdout
    assert 'stopped the API servers and NodePorts (PID %d)' % (
        state['greeters']['pid']) in down.stdout
    assert not directory.exists()
    assert not any(os.path.exists(path) for path in state['remove'])
    assert not [pid for pid in pids if not procs.gone(pid)]
    gone = _cli(printed['site'])
    assert gone.returncode == 1 and 'no site is up in' in gone.stderr
