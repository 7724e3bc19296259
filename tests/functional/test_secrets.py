"""No password, passphrase, proxy credential, key or token leaks (issue 8).

The whole lifecycle runs through ``mgmt_driver.adapters.v1.LcmHooks`` as
Tacker calls it (instantiate_end, scale_end out, scale_start in,
heal_start/heal_end of a worker, terminate_start/terminate_end), and one
step through ``kubespray-mgmt run``, against the local site
(:mod:`mgmt_localsite`), with distinctive secrets:

* the node SSH password.  The site's test user really has one (as root):
  the workers and the LB log in with it (paramiko for the driver,
  Ansible's askpass for the workers).  The masters and the Ansible server
  log in with a key and also carry a password that never matches, as an
  operator who gives both would;
* the workers' sudo password (``worker_node.become_password``): the
  site's sudo asks it on the workers (``Site.require_sudo_password``),
  so every ``--become`` task there gets it from Ansible at sudo's prompt
  (issue 30);
* proxy URLs with ``user:password@`` (kubespray's proxy variables; the
  double never uses a proxy, and nothing listens on 127.0.5.250);
* the passphrase of an encrypted key.  No request field or option takes
  one (``model.Login`` has none), so it goes through the ``ssh`` layer
  only: a connection with ``Credentials.key_passphrase``;
* the private key the driver copies to the Ansible server;
* the Kubernetes token the fake kubectl issues (read back from the VIM
  registry fake; checked against the LB's kubeconfig);
* a registry password in a kubespray extra var
  (``containerd_registry_auth``, which the double ignores): params.py
  counts extra vars among the secrets it never echoes.

A scale-in fails once (injected) and is logged as Tacker logs a hook's
error, a password is refused once, and ``kubespray-mgmt run instantiate``
runs with ``--dry-run`` and for real, so the error paths and the plan
printout are searched too.

While the lifecycle runs, the test records every log record at DEBUG of
every logger, the command's stdout and stderr, the command line and
environment of every process on the machine (polled every 20 ms, with
/dev/shm), every file of the site after each step, of the driver's local
directories, and those new in /tmp, /var/tmp, ~/.ansible,
~/.kubespray-mgmt, ~/.kube and ~/.ssh.  A secret may be in a file of
mode 0600 and nowhere else.  A canary planted in each channel
(a 0644 file, a log record, a process, CLI output) proves the search
sees it.

The node password is shared by every test process of the machine
(sshd.PASSWORD_FILE), so it counts only in this run's processes and
files; the other secrets are new for each run and count anywhere.
"""

import base64
import contextlib
import dataclasses
import io
import json
import logging
import os
import pathlib
import re
import secrets
import stat
import subprocess
import threading
import time
import types

import pytest
import yaml
from mgmt_localsite import lab as lab_mod
from mgmt_localsite import site as site_mod
from oslo_config import cfg
from oslo_log import formatters
from oslo_log import log as oslo_logging

from mgmt_driver.adapters import cli
from mgmt_driver.adapters import v1
from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.remote import inventory
from mgmt_driver.remote import ssh
from mgmt_driver.state import registry
from tests.functional import tacker_fakes
from tests.functional.tacker_fakes import heal_request
from tests.functional.tacker_fakes import instantiate_request
from tests.functional.tacker_fakes import scale_request

ANSIBLE = '127.0.5.1'
LB = '127.0.5.2'
MASTERS = ['127.0.5.10']
WORKERS = ['127.0.5.20', '127.0.5.21', '127.0.5.22']
#: Nothing listens there: the double never uses the proxy.
PROXY = '127.0.5.250'
CONTEXT = types.SimpleNamespace(project_id='secrets-project')
#: A secret in kubespray.extra_vars (they once reached a 0644 file and
#: the dry-run plan).
EXTRA_VAR = 'registry password (kubespray extra var)'
#: Secrets that end up in 0644 files and in the CLI's output on purpose:
#: the self-check's canary.
KNOWN_LEAKS = ('canary',)
TACKER_LOG = oslo_logging.getLogger('tacker.vnflcm.vnflcm_driver')
POLL_INTERVAL = 0.02
#: Bigger files are not read (none of the driver's is near this).
MAX_FILE = 4 * 1024 * 1024
SECRET_MODE = 0o600

pytestmark = pytest.mark.skipif(site_mod.unavailable() is not None,
                                reason=str(site_mod.unavailable()))


# ------------------------------------------------------------ secrets --

@dataclasses.dataclass(frozen=True)
class Secret:
    """One secret and the forms it may take in text.

    :param shared: other test processes of the machine hold it too.
    """

    name: str
    forms: tuple
    shared: bool = False


class Secrets:
    """The run's secrets and one search over bytes for all of them."""

    def __init__(self):
        self.items = []
        self._pattern = None

    def add(self, name, *forms, shared=False):
        self.items.append(Secret(name, tuple(f.encode() for f in forms),
                                 shared))
        self._pattern = None

    def __getitem__(self, name):
        return next(s for s in self.items if s.name == name)

    def value(self, name):
        """The secret *name* as given (its first form)."""
        return self[name].forms[0].decode()

    def find(self, data):
        """The :class:`Secret` objects found in *data* (str or bytes)."""
        if isinstance(data, str):
            data = data.encode('utf-8', 'replace')
        if self._pattern is None:
            by_form = {form: s for s in self.items for form in s.forms}
            self._pattern = (re.compile(b'|'.join(
                re.escape(f) for f in sorted(by_form, key=len,
                                             reverse=True))), by_form)
        pattern, by_form = self._pattern
        found = {by_form[m.group(0)].name: by_form[m.group(0)]
                 for m in pattern.finditer(data)}
        return list(found.values())


def _tag(prefix):
    return '%s-%s' % (prefix, secrets.token_hex(10))


def _key_material(path):
    """A line of a private key file that no other key has: the last full
    line of its base64 body, the private part (the first line is the
    same in every key)."""
    return pathlib.Path(path).read_text().splitlines()[-3]


def _b64(text):
    return base64.b64encode(text.encode()).decode()


# --------------------------------------------------------------- logs --

class RecordingHandler(logging.Handler):
    """Every record as a text formatter and oslo.log's JSON one render
    it (the JSON one shows the arguments too)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.text = logging.Formatter(
            '%(levelname)s %(name)s %(message)s')
        self.json = formatters.JSONFormatter()
        self.records = []

    def emit(self, record):
        rendered = [self.text.format(record)]
        try:
            rendered.append(self.json.format(record))
        except Exception:  # a record JSON cannot show is shown as text
            rendered.append(repr(record.args))
        self.records.append('\n'.join(rendered))


@contextlib.contextmanager
def all_logs_at_debug(handler):
    """*handler* on the root logger (and on loggers that do not
    propagate), every logger at DEBUG; everything put back afterwards."""
    root = logging.getLogger()
    loggers = [root] + [lg for lg in logging.root.manager.loggerDict.values()
                        if isinstance(lg, logging.Logger)]
    saved = [(lg, lg.level, lg.disabled) for lg in loggers]
    detached = [lg for lg in loggers if not lg.propagate]
    disabled = logging.root.manager.disable
    logging.disable(logging.NOTSET)
    for lg in loggers:
        lg.setLevel(logging.DEBUG)
        lg.disabled = False
    for lg in [root] + detached:
        lg.addHandler(handler)
    try:
        yield handler
    finally:
        for lg in [root] + detached:
            lg.removeHandler(handler)
        for lg, level, was_disabled in saved:
            lg.setLevel(level)
            lg.disabled = was_disabled
        logging.disable(disabled)


# ---------------------------------------------------------- processes --

@dataclasses.dataclass
class Process:
    pid: int
    cmdline: bytes
    environ: bytes
    mine: bool | None  # None: it was gone before its parents were read


def _read(path):
    try:
        with open(path, 'rb') as f:
            return f.read()
    except OSError:
        return None


def _parent(pid):
    data = _read('/proc/%d/stat' % pid)
    if not data:
        return None
    return int(data.rsplit(b')', 1)[1].split()[1])


def _session(pid):
    data = _read('/proc/%d/stat' % pid)
    if not data:
        return None
    return int(data.rsplit(b')', 1)[1].split()[3])


def _descends_from(pid, ancestor):
    for _ in range(64):
        if pid == ancestor:
            return True
        if pid is None:
            return None
        if pid <= 1:
            return False
        pid = _parent(pid)
    return False


class Watch(threading.Thread):
    """Polls every process's command line and environment, and the
    files of /dev/shm, until :meth:`stop`.

    Each distinct (pid, command line) is kept once, with its environment
    and whether it is this test's: it descends from this test process
    (sshd, its sessions, kubectl and HAProxy do), or it runs in a session
    whose leader's command line names *marker* (a playbook run detached
    on the Ansible server is reparented away from the sshd session that
    started it; its session leader names the run's workspace).
    """

    def __init__(self, files, marker, interval=POLL_INTERVAL):
        super().__init__(name='secrets-watch', daemon=True)
        self.files = files
        self.marker = os.fsencode(marker)
        self.interval = interval
        self.me = os.getpid()
        self.processes = {}
        self.polls = 0
        self.reads = 0
        self._done = threading.Event()

    def run(self):
        while not self._done.is_set():
            self.poll()
            self._done.wait(self.interval)

    def stop(self):
        self._done.set()
        self.join(10)
        self.poll()

    def poll(self):
        self.polls += 1
        for name in os.listdir('/proc'):
            if name.isdigit():
                self._process(int(name))
        self.files.scan_tree('shm', '/dev/shm')

    def _process(self, pid):
        cmdline = _read('/proc/%d/cmdline' % pid)
        if cmdline is None:
            return
        self.reads += 1
        key = (pid, cmdline)
        if key not in self.processes:
            environ = _read('/proc/%d/environ' % pid) or b''
            self.processes[key] = Process(pid, cmdline, environ,
                                          self._mine(pid))

    def _mine(self, pid):
        mine = _descends_from(pid, self.me)
        if mine:
            return True
        session = _session(pid)
        leader = _read('/proc/%d/cmdline' % session) if session else None
        if leader is not None and self.marker in leader:
            return True
        return mine


# -------------------------------------------------------------- files --

@dataclasses.dataclass(frozen=True)
class FileHit:
    where: str
    path: str
    mode: int
    secret: Secret

    def __str__(self):
        return '%s %s (mode %04o): %s' % (self.where, self.path, self.mode,
                                          self.secret.name)


class Files:
    """Every version of every file seen, by place (``remote``,
    ``local``, ``tmp``, ``home``, ``shm``); contents kept once."""

    def __init__(self):
        self.seen = {}   # (where, path) -> {(mode, content)}
        self._lock = threading.Lock()

    def scan_tree(self, where, root, since=None, skip=()):
        for directory, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs
                       if os.path.join(directory, d) not in skip]
            for name in names:
                self.scan_file(where, os.path.join(directory, name), since)

    def scan_file(self, where, path, since=None):
        try:
            st = os.lstat(path)
        except OSError:
            return
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE or (
                since is not None and st.st_ctime < since):
            return
        data = _read(path)
        if data is None:
            return
        with self._lock:
            self.seen.setdefault((where, path), set()).add(
                (stat.S_IMODE(st.st_mode), data))

    def count(self, where):
        return sum(1 for w, _ in self.seen if w == where)

    def hits(self, secrets_):
        found = set()
        with self._lock:
            items = list(self.seen.items())
        for (where, path), versions in items:
            for mode, data in versions:
                found.update(FileHit(where, path, mode, s)
                             for s in secrets_.find(data))
        return sorted(found, key=str)


# ------------------------------------------------------------ the run --

def _with_secrets(additional, sshd, found):
    """The site's parameters, with the run's passwords and proxy."""
    root = additional[core.ROOT]
    # Masters and the Ansible server: a key, and a password that never
    # matches (the key is tried first, and Ansible uses the key).
    root['master_node']['password'] = found.value('master password')
    root['ansible']['password'] = found.value('ansible password')
    # Workers and the LB: the real password only.
    for section, key in (('worker_node', 'password'),
                         ('external_lb_param', 'ssh_password')):
        del root[section]['ssh_key_file']
        root[section][key] = sshd.password
    # The workers' sudo asks another password (Run.require_sudo), which
    # Ansible hands to sudo at its prompt on every --become task.
    root['worker_node']['become_password'] = found.value(
        'worker sudo password')
    root['kubespray']['extra_vars'] = {'containerd_registry_auth': [{
        'registry': '127.0.5.251:5000', 'username': 'puller',
        'password': found.value(EXTRA_VAR)}]}
    root['proxy'] = {
        'http_proxy': 'http://%s@%s:3128' % (
            found.value('http_proxy credentials'), PROXY),
        'https_proxy': 'http://%s@%s:3129' % (
            found.value('https_proxy credentials'), PROXY),
        'no_proxy': 'registry.invalid'}
    return additional


class Run:
    """The lifecycle on one local site, with everything it recorded."""

    def __init__(self, lab, local_dir, inputs_dir):
        self.lab = lab
        self.sshd = lab.sshd
        self.local_dir = local_dir
        self.inputs_dir = inputs_dir
        self.secrets = Secrets()
        self.canary = _tag('canary')
        self.secrets.add('canary', self.canary)
        self._add_login_secrets()
        self.files = Files()
        self.handler = RecordingHandler()
        self.watch = Watch(self.files, str(lab.site.root))
        self.cli_output = ''
        self.tmp_canary = None
        self.started = None
        self.seconds = {}
        additional = _with_secrets(lab.additional_params, self.sshd,
                                   self.secrets)
        for address in WORKERS:
            lab.site.require_sudo_password(
                address, self.secrets.value('worker sudo password'))
        self.vnf = tacker_fakes.TackerVnf(additional, MASTERS[:1],
                                          WORKERS[:2], LB)
        self.registry = tacker_fakes.FakeRegistry()
        conf = lab.conf
        self.hooks = v1.LcmHooks(
            conf, pool_factory=lambda: ssh.ConnectionPool(
                ssh.SSHSettings.from_conf(conf)),
            heat_factory=lambda context, instance, request: self.vnf.heat,
            vim_registry=self.registry, package_dir_of=lambda c, i: None)

    def _add_login_secrets(self):
        add = self.secrets.add
        add('node SSH password', self.sshd.password, shared=True)
        add('master password', _tag('master-pw'))
        add('worker sudo password', _tag('sudo-pw'))
        add('ansible password', _tag('ansible-pw'))
        for key in ('http_proxy', 'https_proxy'):
            user, password = _tag(key[:5] + 'user'), _tag(key + '-pw')
            # The URL's user:password, and as a Basic header would carry it.
            add('%s credentials' % key, '%s:%s' % (user, password),
                password, _b64('%s:%s' % (user, password)))
        add(EXTRA_VAR, _tag('registry-pw'))
        add('key passphrase', self.sshd.passphrase)
        add('private key', _key_material(self.sshd.client_key))
        add('encrypted private key', _key_material(self.sshd.encrypted_key))

    # Steps.

    def call(self, hook, request, **kwargs):
        started = time.monotonic()
        getattr(self.hooks, hook)(CONTEXT, self.vnf.instance, request, None,
                                  None, **kwargs)
        self.seconds[hook] = self.seconds.get(hook, 0) + (
            time.monotonic() - started)
        self.scan_site()

    def call_failing(self, hook, request, **kwargs):
        """A hook that fails, logged with its traceback as Tacker does."""
        with pytest.raises(exceptions.MgmtDriverRemoteCommandError) as info:
            getattr(self.hooks, hook)(CONTEXT, self.vnf.instance, request,
                                      None, None, **kwargs)
        TACKER_LOG.error('Mgmt driver %s failed: %s', hook, info.value,
                         exc_info=(info.type, info.value, info.tb))
        self.scan_site()
        return info.value

    def refused_password(self):
        """A VM whose password changed: the login is refused."""
        pool = ssh.ConnectionPool(ssh.SSHSettings.from_conf(self.lab.conf))
        creds = ssh.Credentials(
            self.sshd.user, password=self.secrets.value('master password'))
        with pool:
            assert not pool.reachable(WORKERS[0], creds, self.sshd.port)

    def check(self, masters, workers):
        problems = self.lab.check(masters, workers)
        assert not problems, problems

    def scan_site(self):
        """The whole site (it is every VM), and the local files."""
        self.files.scan_tree('remote', self.sshd.root)
        self.files.scan_tree('local', str(self.local_dir))

    def lifecycle(self):
        vnf = self.vnf
        masters, workers = MASTERS[:1], WORKERS[:2]
        self.call('instantiate_end',
                  instantiate_request(vnf.additional_params))
        self.check(masters, workers)
        self._add_token()
        self.passphrase_login()
        self.process_canary()

        new = vnf.add_vm(core.ROLE_WORKER, WORKERS[2])
        self.call('scale_end', scale_request('SCALE_OUT'),
                  scale_out_id_list=[new.stack_id])
        workers = WORKERS[:3]
        self.check(masters, workers)

        gone = vnf.vm(WORKERS[1])
        self.lab.site.inject_failure('remove-node.yml', host=gone.name)
        error = self.call_failing('scale_start', scale_request('SCALE_IN'),
                                  scale_name_list=[gone.member],
                                  scale_out_id_list=[gone.stack_id])
        assert 'injected failure' in str(error)
        self.refused_password()
        self.call('scale_start', scale_request('SCALE_IN'),
                  scale_name_list=[gone.member],
                  scale_out_id_list=[gone.stack_id])
        vnf.remove_vm(gone)
        workers = [WORKERS[0], WORKERS[2]]
        self.check(masters, workers)

        sick = vnf.vm(WORKERS[0])
        self.call('heal_start', heal_request([sick], 'secrets'))
        vnf.recreate_vm(sick)
        self.call('heal_end', heal_request([sick], 'secrets'))
        self.check(masters, workers)

        self.cli_instantiate(masters, workers)
        self.check(masters, workers)

        self.call('terminate_start', None)
        self.call('terminate_end', None)
        assert self.lab.site.state() is None
        assert not self.lab.workspace(vnf.id).exists()
        assert self.registry.current == {}

    def _add_token(self):
        access = self.registry.current[registry.default_vim_name(
            self.vnf.id)]
        token = access.token
        assert token.count('.') == 2
        kubeconfig = yaml.safe_load(
            (self.sshd.home() / '.kube' / 'config').read_text())
        assert kubeconfig['users'][0]['user']['token'] == token
        # The random parts (the header is the same in every token), and a
        # slice of the base64 form kubectl prints in a Secret.
        self.secrets.add('Kubernetes token', *token.split('.')[1:],
                         _b64(token)[40:120])

    def passphrase_login(self):
        """The encrypted key, with its passphrase, through ``ssh``."""
        settings = ssh.SSHSettings.from_conf(self.lab.conf)
        creds = ssh.Credentials(self.sshd.user,
                                key_file=self.sshd.encrypted_key,
                                key_passphrase=self.sshd.passphrase)
        with ssh.Connection(LB, creds, self.sshd.port, settings) as conn:
            assert conn.run(['id', '-un']).stdout.strip() == self.sshd.user

    def process_canary(self):
        """A process whose argv and environment hold the canary."""
        subprocess.run(['sh', '-c', 'sleep 1', 'selfcheck', self.canary],
                       env={'PATH': os.environ['PATH'],
                            'KMGMT_SELFCHECK': self.canary}, check=True)

    def cli_instantiate(self, masters, workers):
        """``kubespray-mgmt run instantiate`` again, on the same
        workspace: it converges, and writes a kubeconfig locally."""
        lab = self.lab
        options = dict(site_mod.driver_options(
            lab.site, lab.haproxy, self.local_dir / 'known_hosts'),
            kubeconfig_dir=str(self.local_dir / 'kubeconfigs'))
        files = {'kubespray-mgmt.conf': site_mod.config_file_text(options),
                 'params.json': json.dumps(self.vnf.additional_params),
                 'topology.yaml': yaml.safe_dump(
                     lab.topology(masters, workers))}
        paths = {name: str(self.inputs_dir / name) for name in files}
        for name, text in files.items():
            pathlib.Path(paths[name]).write_text(text)
            # The operator's params hold passwords.
            os.chmod(paths[name], SECRET_MODE)
        argv = ['--config-file', paths['kubespray-mgmt.conf'],
                'run', 'instantiate', '--params', paths['params.json'],
                '--topology', paths['topology.yaml'],
                '--instance-id', self.vnf.id]
        started = time.monotonic()
        code, out = self.cli(argv + ['--dry-run'], canary=True)
        assert code == cli.EXIT_OK and 'dry run, nothing done' in out, out
        code, out = self.cli(argv)
        self.seconds['kubespray-mgmt run'] = time.monotonic() - started
        assert code == cli.EXIT_OK, self.cli_output
        assert 'kubeconfig: %s' % (self.local_dir / 'kubeconfigs' / (
            '%s.kubeconfig' % self.vnf.id)) in out
        self.scan_site()

    def cli(self, argv, canary=False):
        """``kubespray-mgmt`` with its stdout and stderr recorded.

        :returns: ``(exit code, stdout)``.
        """
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), \
                    contextlib.redirect_stderr(err):
                if canary:
                    print('selfcheck %s' % self.canary, file=err)
                code = cli.main(argv)
        finally:
            # The command loads its options into the global CONF.
            cfg.CONF([], project='kubespray-mgmt', default_config_files=[])
            self.cli_output += out.getvalue() + err.getvalue()
        return code, out.getvalue()

    # Canaries in the other channels.

    def plant_canaries(self):
        public = pathlib.Path(self.sshd.root) / 'selfcheck-public.txt'
        public.write_text(self.canary)
        public.chmod(0o644)
        private = pathlib.Path(self.sshd.root) / 'selfcheck-private.txt'
        private.write_text(self.canary)
        private.chmod(SECRET_MODE)
        self.tmp_canary = pathlib.Path('/tmp/kmgmt-secrets-selfcheck-%s'
                                       % secrets.token_hex(4))
        self.tmp_canary.write_text(self.canary)
        self.tmp_canary.chmod(0o644)
        oslo_logging.getLogger('mgmt_driver.selfcheck').debug(
            'selfcheck %s', self.canary)

    # Everything else the run may have written.

    def scan_new_files(self):
        """Files changed since the start in /tmp (but the site, the
        local directory and this test's input files, scanned as such),
        /var/tmp, ~/.ansible, ~/.kubespray-mgmt, ~/.kube and ~/.ssh."""
        skip = {self.sshd.root, str(self.local_dir), str(self.inputs_dir)}
        self.files.scan_tree('tmp', '/tmp', since=self.started, skip=skip)
        self.files.scan_tree('tmp', '/var/tmp', since=self.started)
        home = os.path.expanduser('~')
        for name in ('.ansible', '.kubespray-mgmt', '.kube', '.ssh'):
            self.files.scan_tree('home', os.path.join(home, name),
                                 since=self.started)

    def record(self):
        """Run the lifecycle with every channel recorded."""
        self.started = time.time()
        with all_logs_at_debug(self.handler):
            self.watch.start()
            try:
                self.plant_canaries()
                self.scan_site()
                self.lifecycle()
            finally:
                self.watch.stop()
        self.scan_new_files()

    def cleanup(self):
        if self.tmp_canary is not None:
            self.tmp_canary.unlink(missing_ok=True)

    # Findings.

    def log_hits(self):
        return [(s, text) for text in self.handler.records
                for s in self.secrets.find(text)]

    def cli_hits(self):
        return self.secrets.find(self.cli_output)

    def process_hits(self):
        """``(secret, process, 'cmdline' or 'environ')``, counting the
        shared password only in this run's processes."""
        hits = []
        for proc in self.watch.processes.values():
            for what in ('cmdline', 'environ'):
                for s in self.secrets.find(getattr(proc, what)):
                    if not s.shared or proc.mine is not False:
                        hits.append((s, proc, what))
        return hits

    def mine(self, path):
        return any(path.startswith(str(root) + os.sep) for root in (
            self.sshd.root, self.local_dir))

    def file_hits(self):
        return self.files.hits(self.secrets)

    def violations(self):
        """Hits in files other than mode 0600 (the shared password only
        in this run's files and in /dev/shm)."""
        return [h for h in self.file_hits() if h.mode != SECRET_MODE and (
            not h.secret.shared or h.where == 'shm' or self.mine(h.path))]

    def _file_lines(self):
        """File hits, those of /dev/shm (Ansible's askpass) counted."""
        lines, shm = [], {}
        for h in self.file_hits():
            if h.where == 'shm':
                key = (h.mode, h.secret.name)
                shm[key] = shm.get(key, 0) + 1
            else:
                lines.append('  %s' % h)
        return lines + ['  shm: %d file(s) in /dev/shm (mode %04o): %s'
                        % (n, mode, name)
                        for (mode, name), n in sorted(shm.items())]

    def report(self):
        procs = self.watch.processes.values()
        lines = [
            'secrets: %d (%d forms): %s' % (
                len(self.secrets.items) - 1,
                sum(len(s.forms) for s in self.secrets.items[1:]),
                ', '.join(s.name for s in self.secrets.items[1:])),
            'step seconds: %s' % ', '.join(
                '%s %.1f' % kv for kv in self.seconds.items()),
            'log records scanned: %d' % len(self.handler.records),
            'CLI output scanned: %d bytes' % len(
                self.cli_output.encode()),
            'process snapshots: %d, process entries read: %d, distinct '
            '(pid, argv): %d (%d of this run, %d with environ)' % (
                self.watch.polls, self.watch.reads, len(procs),
                sum(1 for p in procs if p.mine), sum(
                    1 for p in procs if p.environ)),
            'files scanned: remote %d, local %d, /tmp (new) %d, home %d, '
            '/dev/shm %d' % tuple(self.files.count(w) for w in (
                'remote', 'local', 'tmp', 'home', 'shm')),
            'log hits: %s' % sorted({s.name for s, _ in self.log_hits()}),
            'CLI hits: %s' % [s.name for s in self.cli_hits()],
            'process hits: %s' % sorted({
                '%s in %s of pid %d' % (s.name, what, p.pid)
                for s, p, what in self.process_hits()}),
            'file hits:'] + self._file_lines()
        return '\n'.join(lines)


@pytest.fixture(scope='module')
def run(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip('the SSH password logins need sshd running as root')
    local_dir = tmp_path_factory.mktemp('driver-local')
    inputs_dir = tmp_path_factory.mktemp('inputs')
    try:
        lab = lab_mod.Lab(ANSIBLE, LB, MASTERS, WORKERS, nodeports=1,
                          backends=False,
                          options={'known_hosts_file': str(
                              local_dir / 'known_hosts')})
        lab.start()
    except lab_mod.LabError as exc:
        pytest.skip(str(exc))
    recorded = None
    try:
        recorded = Run(lab, local_dir, inputs_dir)
        started = time.monotonic()
        recorded.record()
        print('\n--- secrets: lifecycle recorded in %.1f s\n%s' % (
            time.monotonic() - started, recorded.report()))
        yield recorded
    finally:
        if recorded is not None:
            recorded.cleanup()
        lab.stop()


# -------------------------------------------------------------- tests --

def test_canaries_are_found_in_every_channel(run):
    """The search is able to fail: the canary is seen everywhere it was
    planted, and only its 0644 files are violations."""
    canary = run.secrets['canary']
    assert any(s is canary for s, _ in run.log_hits())
    assert canary in run.cli_hits()
    seen = {what for s, proc, what in run.process_hits()
            if s is canary and proc.mine}
    assert seen == {'cmdline', 'environ'}
    root = pathlib.Path(run.sshd.root)
    public = {str(root / 'selfcheck-public.txt'), str(run.tmp_canary)}
    private = str(root / 'selfcheck-private.txt')
    assert private in {h.path for h in run.file_hits() if h.secret is canary}
    assert {h.path for h in run.violations() if h.secret is canary} == public


def test_secrets_reach_the_files_that_need_them(run):
    """Each secret the driver must write is found, in a 0600 file: the
    search works on the real documents."""
    workspace = str(run.lab.workspace(run.vnf.id))
    kubeconfig = str(run.local_dir / 'kubeconfigs' / (
        '%s.kubeconfig' % run.vnf.id))
    expected = {
        (workspace + '/host_vars/%s.yaml' % site_mod.name_of(
            core.ROLE_WORKER, WORKERS[0]), 'node SSH password'),
        (workspace + '/host_vars/%s.yaml' % site_mod.name_of(
            core.ROLE_WORKER, WORKERS[0]), 'worker sudo password'),
        (workspace + '/' + inventory.SECRET_VARS_FILE,
         'http_proxy credentials'),
        (workspace + '/' + inventory.SECRET_VARS_FILE,
         'https_proxy credentials'),
        (workspace + '/keys/ssh-key-master', 'private key'),
        (str(run.sshd.home() / '.kube' / 'config'), 'Kubernetes token'),
        (kubeconfig, 'Kubernetes token'),
    }
    found = {(h.path, h.secret.name): h.mode for h in run.file_hits()}
    missing = expected - set(found)
    assert not missing, missing
    assert {found[key] for key in expected} == {SECRET_MODE}


def test_no_secret_in_log_records(run):
    """Every logger at DEBUG: the driver's commands, paramiko's
    protocol, the failed hook's traceback."""
    texts = run.handler.records
    assert any(t.startswith('DEBUG mgmt_driver.remote.ssh Running on')
               for t in texts)
    assert any(t.startswith('DEBUG paramiko.') for t in texts)
    assert any('Traceback' in t and 'injected failure' in t for t in texts)
    leaks = sorted({'%s: %s' % (s.name, text[:300])
                    for s, text in run.log_hits() if s.name != 'canary'})
    assert not leaks, leaks


def test_no_secret_in_cli_output(run):
    """Nor in the plan ``--dry-run`` prints (but the known leak)."""
    assert 'TASK [' in run.cli_output and '== %s' % ANSIBLE in run.cli_output
    leaks = [s.name for s in run.cli_hits() if s.name not in KNOWN_LEAKS]
    assert not leaks, leaks


def test_no_secret_on_process_command_lines(run):
    """Nor in any process's environment.  The polls were fast enough to
    see Ansible's short-lived ssh commands that log in by password."""
    mine = [p for p in run.watch.processes.values() if p.mine]
    assert any(b'ansible-playbook' in p.cmdline for p in mine)
    # A password login: ansible-core 2.19 hands the password over through
    # SSH_ASKPASS and shared memory, 2.18 (kubespray v2.31.0's) through
    # sshpass and a pipe.
    assert any(b'_ANSIBLE_SSH_ASKPASS_SHM' in p.environ or
               p.cmdline.startswith(b'sshpass\0') for p in mine)
    leaks = sorted({'%s in the %s of %r' % (
        s.name, what, proc.cmdline.replace(b'\0', b' ')[:200])
        for s, proc, what in run.process_hits() if s.name != 'canary'})
    assert not leaks, leaks


def test_secrets_only_in_files_of_mode_0600(run):
    """Locally and on every VM of the site, whatever wrote the file."""
    assert run.files.count('remote') and run.files.count('local')
    leaks = [str(h) for h in run.violations()
             if h.secret.name not in KNOWN_LEAKS]
    assert not leaks, leaks
