"""``kubespray-mgmt demo`` on the local site, as the README's first command
runs it (smallest size, to keep the functional run short), with the
``--upgrade`` step in the same run."""

import os
import re
import signal
import subprocess
import sys

import pytest
from mgmt_localsite import demo
from mgmt_localsite import procs
from mgmt_localsite import site

from mgmt_driver.adapters import cli

pytestmark = pytest.mark.skipif(site.unavailable() is not None,
                                reason=str(site.unavailable()))


def _demo_listeners():
    """(address, port) pairs listening on the demo site's addresses.

    Read from /proc/net/tcp, so that a site another test suite runs at
    the same time (CI runs the Tacker tests beside these) does not count.
    """
    wanted = {demo.ANSIBLE, demo.LB, *demo.MASTERS, *demo.WORKERS}
    found = set()
    with open('/proc/net/tcp') as f:
        next(f)
        for line in f:
            local, state = line.split()[1], line.split()[3]
            address, port = local.split(':')
            dotted = '.'.join(str(b) for b in reversed(bytes.fromhex(address)))
            if state == '0A' and dotted in wanted:
                found.add((dotted, int(port, 16)))
    return found


def test_demo_runs_the_whole_lifecycle_and_stops_the_site(
        capsys, tmp_path, monkeypatch):
    # From a directory only the runner may enter, as from root's home.
    private = tmp_path / 'clone'
    private.mkdir(mode=0o700)
    monkeypatch.chdir(private)
    before = _demo_listeners()
    code = cli.main(['demo', '--workers', '1', '--no-tasks', '--upgrade'])
    out = capsys.readouterr().out
    assert code == cli.EXIT_OK, out[-3000:]
    table = out[out.index('\nSummary\n'):]
    rows = {step.title: line for step in demo.plan_steps(
        demo.MASTERS[:1], demo.WORKERS[:3], upgrade=True)
        for line in table.splitlines()
        if line.startswith(step.title + '  ')}
    assert list(rows) == ['instantiate', 'scale out by 2', 'scale in by 1',
                          'heal a worker', demo.UPGRADE_TITLE, 'terminate']
    assert all(re.search(r'\s+ok\s+', line) for line in rows.values())
    # Scale-out of two workers: scale.yml touched exactly those two and
    # the master, where their join reads kube-public/cluster-info.
    assert 'scale.yml (3)' in rows['scale out by 2']
    # The upgrade: one minor release up, the master then both workers,
    # every node checked at the new version.
    installed, target = re.search(
        r'the cluster runs (\S+); the checkout supports (\S+) one minor',
        out).groups()
    old, new = installed.split('.'), target.split('.')
    assert (new[0], int(new[1])) == (old[0], int(old[1]) + 1)
    assert 'run upgrade --kube-version %s)' % target in out
    assert 'upgraded demo to %s: 3 node(s) upgraded' % target in out
    assert 'all at kubelet v%s' % target in out
    # One run for the master, then one per batch of workers (kubespray's
    # default 20 %: one worker each), each also touching the master (the
    # drain is delegated to it, as in kubespray), with a gate after each.
    assert rows[demo.UPGRADE_TITLE].endswith(
        'upgrade-cluster.yml (1), upgrade-cluster.yml (2), '
        'upgrade-cluster.yml (2)')
    assert '(max 1/host)' in rows['instantiate']
    assert 'PLAY [' in out and 'TASK [' not in out
    assert 'The whole lifecycle worked' in out
    assert _demo_listeners() == before


def _sigint_default():
    # A shell's background job starts with SIGINT ignored, and Python
    # then never raises KeyboardInterrupt: as typed at a terminal.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_leaves_no_file_or_process_of_the_site(tmp_path):
    """Issue 41 item 11: Ctrl-C while a playbook runs says the site is
    stopped; then nothing of it is left: its directory in the temporary
    directory (sshd's root, the site, the workspaces, the playbook's
    files) and every process naming it (SSH control masters)."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [repo, os.path.join(repo, 'localsite-dist')]))
    proc = subprocess.Popen(
        [sys.executable, '-m', 'mgmt_driver.adapters.cli', 'demo',
         '--workers', '1', '--no-tasks'], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, cwd=tmp_path, env=env,
        preexec_fn=_sigint_default)
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if 'PLAY [' in line:
            break
    proc.send_signal(signal.SIGINT)
    out = ''.join(seen) + proc.communicate(timeout=300)[0]
    assert proc.returncode == 130, out[-3000:]
    assert 'the local site is stopped' in out
    root = re.search(r'kubespray test double at (/\S+?/kmgmt-sshd-[^/]+)/',
                     out).group(1)
    assert not os.path.exists(root), os.listdir(root)
    assert procs.with_marker(root) == []


def test_demo_refuses_bad_sizes(capsys):
    with pytest.raises(SystemExit):
        cli.main(['demo', '--workers', '0'])
    assert 'must be a whole number from 1 to' in capsys.readouterr().err
