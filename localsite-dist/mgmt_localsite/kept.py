"""``kubespray-mgmt site up`` / ``site down`` (and ``demo --keep``): a
local demo site that stays up after the command ends.

:func:`up` starts a :class:`~mgmt_localsite.lab.Lab` (real sshd,
HAProxy, the kubespray test double, no greeting servers: nothing runs
inside this process), instantiates a cluster on it with the driver, and
writes into a directory of its own what ``status``, ``logs``, ``run``
and ``doctor`` need by hand: ``params.json``, ``topology.yaml`` and
``kubespray-mgmt.conf`` (its known_hosts, records and kubeconfigs are in
the site), plus ``site.json``: every process it left running, by PID,
with what identifies it.  It prints the commands to use.

:func:`down` stops exactly those processes (each checked to still be
the one started: its command line names the site's files), the etcd
members the double started, the SSH sessions below sshd, removes the
site's files and, when ``up`` created the test account ``kmgmt-test``
and none of its processes is left, the account.  It is safe to run
again.
"""

import contextlib
import ipaddress
import json
import os
import pathlib
import pwd
import shlex
import shutil
import signal
import subprocess
import sys
import time

import yaml

from mgmt_driver.common import exceptions
from mgmt_driver.operations import lcm
from mgmt_localsite import etcd
from mgmt_localsite import greeters
from mgmt_localsite import lab as lab_mod
from mgmt_localsite import procs
from mgmt_localsite import site as site_mod
from mgmt_localsite import sshd as sshd_mod

STATE_FILE = 'site.json'
PARAMS_FILE = 'params.json'
TOPOLOGY_FILE = 'topology.yaml'
CONFIG_FILE = 'kubespray-mgmt.conf'
INSTANCE_ID = 'demo'
#: Where ``site up`` keeps its files unless told.
DEFAULT_DIR = '~/.kubespray-mgmt/demo-site'
#: The demo's own loopback addresses (``kubespray-mgmt demo``): prefix.
DEFAULT_LOOPBACK = '127.0.0'
MAX_WORKERS = 22


#: What a failed instantiate raises.
_DRIVER_ERRORS = (exceptions.MgmtDriverOtherError,
                  exceptions.MgmtDriverRemoteCommandError,
                  exceptions.MgmtDriverRemoteCommandTimeOut,
                  exceptions.MgmtDriverParamInvalid,
                  exceptions.MgmtDriverNotFound)


class SiteError(Exception):
    """The kept site cannot go up or down; the message says why."""


def addresses(prefix, masters, workers):
    """``(ansible, lb, masters, workers)`` on *prefix* (``127.0.0``), as
    the demo lays them out: .210, .211, .221-.223, .231-.254.

    :raises SiteError: *prefix* is not three numbers of 127.0.0.0/8.
    """
    try:
        base = ipaddress.ip_address(prefix + '.0')
    except ValueError:
        base = None
    if base is None or not base.is_loopback or prefix.count('.') != 2:
        raise SiteError('--loopback: %r is not the first three numbers of '
                        'a 127.x.y.0/24 address' % prefix)
    at = ['%s.%d' % (prefix, n) for n in range(256)]
    return (at[210], at[211], at[221:221 + masters],
            at[231:231 + workers])


def up(directory, masters=1, workers=2, loopback=DEFAULT_LOOPBACK,
       out=None):
    """Start a site, instantiate a cluster on it, keep it: see the
    module.  :returns: 0, or 2 when the instantiate failed (the site is
    then taken down again).

    :raises SiteError: a site is already up in *directory*, or the
        site cannot start here.
    """
    out = out or sys.stdout
    directory = pathlib.Path(os.path.expanduser(directory)).absolute()
    if (directory / STATE_FILE).exists():
        raise SiteError('a site is up in %s already: take it down first '
                        '(kubespray-mgmt site down --dir %s)'
                        % (directory, shlex.quote(str(directory))))
    ansible, lb, master_ips, worker_ips = addresses(loopback, masters,
                                                    workers)
    _refuse_a_second_site(loopback, directory, master_ips + worker_ips)
    account_existed = sshd_mod._user_exists(sshd_mod.TEST_USER)
    lab = lab_mod.Lab(ansible, lb, master_ips, worker_ips, backends=False)
    try:
        with _detached_output():
            lab.start()
    except (lab_mod.LabError, RuntimeError) as exc:
        raise SiteError('the local site cannot start: %s' % exc) from None
    greeter = None
    try:
        greeter = _start_greeters(lab, directory)
        lab.conf = site_mod.make_conf(lab.site, lab.haproxy,
                                      **_state_options(lab))
        _instantiate(lab, master_ips, worker_ips, out)
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        _write_inputs(lab, directory, master_ips, worker_ips)
        _write_state(lab, directory, greeter,
                     created_account=not account_existed)
    except _DRIVER_ERRORS as exc:
        _stop_greeters(greeter)
        lab.stop()
        out.write('kubespray-mgmt site up: instantiate failed, the site is '
                  'stopped: %s\n' % exc)
        return 2
    except BaseException:  # Ctrl-C too: nothing is left running
        _stop_greeters(greeter)
        lab.stop()
        raise
    out.write(instructions(directory, (ansible, lb, master_ips,
                                       worker_ips)))
    return 0


def _refuse_a_second_site(loopback, directory, taken):
    """A second site on the addresses of a running one would start
    beside it (its own ports), and each would answer for the other's
    nodes.

    :raises SiteError: a kept site serves one of *taken*; names it.
    """
    other = greeters.holder(taken)
    if other is not None:
        raise SiteError(
            '--loopback %s: the site in %s is up on these addresses; take '
            'it down first (kubespray-mgmt site down --dir %s) or give '
            'another --loopback; %s is left as it was' % (
                loopback, other, shlex.quote(other), directory))


def _start_greeters(lab, directory):
    """Start the masters' API servers and the workers' NodePorts
    (:mod:`mgmt_localsite.greeters`), detached: the upgrade's gates and
    ``renew-certs`` ask them for ``/readyz``.  Its command line names
    the site's *directory* (:func:`_refuse_a_second_site`).

    :returns: the process, serving.
    :raises SiteError: a port is taken (the message names it).
    """
    proc = subprocess.Popen(
        [sys.executable] + greeters.argv(lab.root, lab.masters, lab.workers,
                                         lab.nodeports, site=directory),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, start_new_session=True,
        env=dict(os.environ, PYTHONPATH=_import_path()))
    ready = proc.stdout.readline()
    proc.stdout.close()
    if ready != b'serving\n':
        error = proc.stderr.read(2000).decode(errors='replace').strip()
        proc.wait()
        raise SiteError('the local site cannot start: %s' % (
            error or 'its API servers did not start'))
    proc.stderr.close()
    return proc


def _import_path():
    """Where this process found the site and the driver, for a child."""
    return os.pathsep.join(str(pathlib.Path(m.__file__).parents[i])
                           for m, i in ((greeters, 1), (exceptions, 2)))


def _stop_greeters(proc):
    if proc is not None:
        _signal_until_gone(proc.pid)


def _instantiate(lab, masters, workers, out):
    started = time.monotonic()

    def progress(line):
        out.write('[%7.1fs] %s\n' % (time.monotonic() - started, line))
        out.flush()
    spec = lab.spec()
    drv, _ = lab.driver(spec, INSTANCE_ID, progress, 'instantiate')
    progress('the local site is up; instantiating a cluster on it')
    with drv.pool:
        progress(lcm.COMMANDS['instantiate'](
            drv, lab.cluster(spec, masters, workers), [], INSTANCE_ID))


@contextlib.contextmanager
def _detached_output():
    """Standard output and error on /dev/null while the site's daemons
    start: they inherit them, and would keep a pipe the command writes
    to (``site up | tee``) open long after the command ended."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved + [devnull]:
            os.close(fd)


def _state_options(lab):
    """The driver's state (known_hosts, records, kubeconfigs) in a
    private directory of the site, as a conductor keeps it (``doctor``
    checks that)."""
    state = lab.root / 'driver-state'
    state.mkdir(mode=0o700, exist_ok=True)
    return {'known_hosts': state / 'known_hosts',
            'key_dirs': [lab.sshd.key_dir],
            'kubeconfig_dir': str(state / 'kubeconfigs'),
            # The masters' API servers are greeting servers
            # (mgmt_localsite.greeters), not the health HAProxy's stats
            # would report: status reads no health here.
            'haproxy_stats_socket': ''}


def _options(lab):
    """The ``[kubespray_mgmt]`` values of the site, as ``lab.conf``."""
    options = _state_options(lab)
    known_hosts, key_dirs = options.pop('known_hosts'), \
        options.pop('key_dirs')
    return dict(site_mod.driver_options(lab.site, lab.haproxy, known_hosts,
                                        key_dirs), **options)


def _write_inputs(lab, directory, masters, workers):
    (directory / PARAMS_FILE).write_text(
        json.dumps(lab.additional_params, indent=2) + '\n')
    (directory / TOPOLOGY_FILE).write_text(
        yaml.safe_dump(lab.topology(masters, workers), sort_keys=False))
    (directory / CONFIG_FILE).write_text(
        site_mod.config_file_text(_options(lab)))


def _write_state(lab, directory, greeter, created_account):
    state = {
        'greeters': {'pid': greeter.pid, 'marker': str(lab.root)},
        'sshd': [{'pid': p.pid, 'marker': lab.sshd.root}
                 for p in lab.sshd._procs],
        'haproxy': {'pid': lab.haproxy.proc.pid,
                    'marker': str(lab.haproxy.config)},
        'etcd_dir': str(lab.site.etcd_dir),
        'remove': [lab.sshd.root],
        'account': sshd_mod.TEST_USER if created_account and
        lab.sshd.is_root else None,
    }
    (directory / STATE_FILE).write_text(json.dumps(state, indent=2) + '\n')


def commands(directory):
    """The commands an operator types against the kept site."""
    d = shlex.quote(str(directory))
    base = 'kubespray-mgmt --config-file %s/%s' % (d, CONFIG_FILE)
    inputs = '--params %s/%s --topology %s/%s --instance-id %s' % (
        d, PARAMS_FILE, d, TOPOLOGY_FILE, INSTANCE_ID)
    return {
        'status': '%s status %s' % (base, inputs),
        'logs': '%s logs --params %s/%s --instance-id %s --follow' % (
            base, d, PARAMS_FILE, INSTANCE_ID),
        'run': '%s run scale-in --nodes NAME %s' % (base, inputs),
        'doctor': '%s doctor --params %s/%s --topology %s/%s' % (
            base, d, PARAMS_FILE, d, TOPOLOGY_FILE),
        'down': 'kubespray-mgmt site down --dir %s' % d,
    }


def instructions(directory, taken=None):
    """What ``up`` prints at the end: with *taken*, ``(ansible, lb,
    masters, workers)``, the addresses the site took first."""
    c = commands(directory)
    said = [''] + (['The site took %s (Ansible server), %s (load balancer), '
                    '%s (masters) and %s (workers).' % (
                        taken[0], taken[1], ', '.join(taken[2]),
                        ', '.join(taken[3]) or 'none')] if taken else [])
    return '\n'.join(said + [
        'The local site stays up (its files: %s). Try:' % directory,
        '  ' + c['status'],
        '  ' + c['logs'],
        '  ' + c['run'] + '   # or scale-out, heal, upgrade, terminate',
        '  ' + c['doctor'],
        'Take it down (every process it left, by PID; its files):',
        '  ' + c['down'],
        '']) + '\n'


# ------------------------------------------------------------- down --

def down(directory, out=None):
    """Stop what ``up`` left in *directory* and remove it.

    :returns: the lines said (also written to *out*).
    :raises SiteError: no site was kept there.
    """
    out = out or sys.stdout
    directory = pathlib.Path(os.path.expanduser(directory)).absolute()
    try:
        state = json.loads((directory / STATE_FILE).read_text())
    except FileNotFoundError:
        raise SiteError('no site is up in %s (no %s)' % (
            directory, STATE_FILE)) from None
    said = ['stopped etcd on %s' % a for a in etcd.stop_all(
        state['etcd_dir'])] if os.path.isdir(state['etcd_dir']) else []
    said += _stop_haproxy(state['haproxy'])
    said += _stop_greeters_of(state.get('greeters'))
    said += _stop_sshd(state['sshd'])
    for path in state['remove']:
        shutil.rmtree(path, ignore_errors=True)
    said += _remove_account(state.get('account'))
    for name in (STATE_FILE, PARAMS_FILE, TOPOLOGY_FILE, CONFIG_FILE):
        (directory / name).unlink(missing_ok=True)
    _rmdir_if_empty(directory)
    said.append('the site is down; %s removed' % directory)
    for line in said:
        out.write(line + '\n')
    return said


def _ours(pid, marker):
    """Whether *pid* still runs the program started with *marker* in
    its command line (a PID may have been reused since)."""
    return marker in '\0'.join(procs.cmdline(pid))


def _stop_haproxy(entry):
    pid = entry['pid']
    if not _ours(pid, entry['marker']):
        return []
    _signal_until_gone(pid, group=True)
    return ['stopped HAProxy (PID %d)' % pid]


def _stop_greeters_of(entry):
    """Stop the API servers' stand-in (a site kept before it had one
    has no entry)."""
    if not entry or not _ours(entry['pid'], entry['marker']):
        return []
    _signal_until_gone(entry['pid'])
    return ['stopped the API servers and NodePorts (PID %d)' % entry['pid']]


def _stop_sshd(entries):
    pids = [e['pid'] for e in entries if _ours(e['pid'], e['marker'])]
    sessions = procs.descendants(pids)
    for pid in pids:
        _signal_until_gone(pid)
    # SSH control masters left their sessions: found by the site's path.
    sessions += [pid for pid in procs.with_marker(entries[0]['marker'])
                 if pid not in sessions] if entries else []
    for pid in sessions:
        _kill(pid, signal.SIGKILL)
    return ['stopped sshd (PID %s) and %d session process(es)' % (
        ', '.join(str(p) for p in pids), len(sessions))] if pids else []


def _kill(pid, sig, group=False):
    try:
        (os.killpg if group else os.kill)(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _signal_until_gone(pid, group=False, timeout=10.0):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not _kill(pid, sig, group):
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:  # our own child (in-process use) must be reaped
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    return
            except ChildProcessError:
                pass
            if procs.gone(pid):
                return
            time.sleep(0.05)


def _remove_account(account):
    """Remove the test account ``up`` created, unless it still runs
    something (another site, a test)."""
    if not account:
        return []
    try:
        uid = pwd.getpwnam(account).pw_uid
    except KeyError:
        return []
    busy = [p for p in os.listdir('/proc') if p.isdigit() and
            _owner(p) == uid]
    if busy:
        return ['kept the account %s: %d process(es) of it still run' % (
            account, len(busy))]
    removed = subprocess.run(['userdel', '-r', account], capture_output=True,
                             text=True, check=False)
    shutil.rmtree(os.path.dirname(sshd_mod.PASSWORD_FILE),
                  ignore_errors=True)
    if removed.returncode not in (0, 12):  # 12: its home was gone
        return ['could not remove the account %s: %s' % (
            account, removed.stderr.strip()[:200])]
    return ['removed the account %s (created by site up)' % account]


def _owner(pid):
    try:
        return os.stat('/proc/' + pid).st_uid
    except OSError:
        return None


def _rmdir_if_empty(directory):
    try:
        directory.rmdir()
    except OSError:
        pass
