"""The real kubespray release, run beside the test double (conformance).

``../shared/kubespray/kubespray-2.31.0.tar.gz`` (beside the clone; the
environment variable ``KMGMT_KUBESPRAY_ARCHIVE`` names another path) is
kubespray's own v2.31.0 source archive.  :class:`Release` extracts it
into a temporary directory and runs its ``ansible-playbook`` from a
virtualenv of its own with the archive's ``requirements.txt``
(``ansible==11.13.0``: ansible-core 2.18 and the collections kubespray
needs), built once and kept under ``.tox/`` (or
``KMGMT_KUBESPRAY_VENV``) for the next runs.

:class:`Replay` turns one invocation the double recorded
(``invocations.jsonl``, from
``localsite-dist/mgmt_localsite/kubespray/plugins/callback/kube_double_runs.py``)
into the same ``ansible-playbook`` arguments for the real release: the
same playbook, ``--limit``, flags and inventory text, the same ``-e``
files in the same order, and a fact cache holding the hosts whose facts
the double's run found cached.
Every host is reached through :data:`NOWHERE_PLUGIN`, a connection that
fails as unreachable before anything is sent: only what kubespray does
on the controller (asserts, ``fail``, ``pause``, ``group_by``) runs,
and a run ends at the first task that needs a host.

:func:`compare_plays` says where the double's plays and the real ones
target different hosts; :func:`guard_problems` where a real guard
refused.  Nothing from the archive is kept in the project: facts read
from it (play and task names) are named here.
"""

import ast
import concurrent.futures
import fcntl
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile

import yaml

VERSION = '2.31.0'
ARCHIVE_NAME = 'kubespray-%s.tar.gz' % VERSION
#: sha256 of the unmodified archive of kubespray's tag v2.31.0.
ARCHIVE_SHA256 = ('10b40d17931465762b8dd2a9dbdfdad674e39a014e596ec05225704'
                  'ad17fc6f3')
REPO = pathlib.Path(__file__).resolve().parents[2]
#: ansible-core series the release's first play accepts.
ANSIBLE_CORE = (2, 18)

# ------------------------------------------------------------ the map --
# The name of kubespray's play that joins workers (scale.yml).
_WORKER_PLAY = ('Target only workers to get kubelet installed and checking '
                'in on any new nodes')
#: How the double's plays map to the real release's, for plays whose
#: name the real playbook does not have: ``{(playbook, double play):
#: (relation, [real plays])}``.  Every other double play maps to the
#: real plays of the same name.  Relation ``same``: each real play
#: targets exactly the double play's hosts; ``within``: the double's
#: hosts are some of each real play's (the double splits a real play).
PLAY_MAP = {
    # kubespray joins workers with kubeadm inside this play, on
    # k8s_cluster; the double joins them in a play of their own.
    ('cluster.yml', 'Join the worker nodes'):
        ('within', ['Invoke kubeadm and install a CNI']),
    # The double's preinstall (the --limit fact-cache check) runs in a
    # play of its own; kubespray's runs in the first worker play.
    ('scale.yml', 'Prepare nodes'): ('same', [_WORKER_PLAY + '(engine)']),
    # One double play for kubespray's three worker plays.
    ('scale.yml', _WORKER_PLAY): ('same', [
        '%s(%s)' % (_WORKER_PLAY, part)
        for part in ('engine', 'node', 'network')]),
}

#: Guards the full replay must have run without a failure, per
#: playbook (every playbook runs boilerplate's two plays first).
GUARD_PLAYS = {
    'remove-node.yml': ['Validate nodes for removal', 'Check Ansible version',
                        'Inventory setup and validation',
                        'Confirm node removal'],
}
BOILERPLATE_PLAYS = ['Check Ansible version',
                     'Inventory setup and validation']

#: Guards past the first play that needs a host, run in a play of their
#: own with the same hosts pattern (:meth:`Replay.harness`):
#: ``{playbook: [(file of the release, play or None, task names)]}``.
RESET_GUARD = ('playbooks/reset.yml', 'Reset cluster',
               ['Reset Confirmation', 'Check confirmation'])
FACT_CACHE_TASK = ("Stop if any host not in '--limit' does not have a "
                   "fact cache")
#: The first play that runs kubernetes/preinstall (whose settings check
#: starts with the fact-cache task), per playbook.
PREINSTALL_PLAY = {
    'cluster.yml': ('playbooks/cluster.yml', 'Prepare for etcd install'),
    'scale.yml': ('playbooks/scale.yml', 'Target only workers to get '
                  'kubelet installed and checking in on any new '
                  'nodes(engine)'),
    'upgrade-cluster.yml': ('playbooks/upgrade_cluster.yml',
                            'Prepare nodes for upgrade'),
}
PREINSTALL_CHECKS = ('roles/kubernetes/preinstall/tasks/'
                     '0040-verify-settings.yml')

NOWHERE_PLUGIN = '''\
"""Conformance replay: a connection that reaches no host."""
from ansible.errors import AnsibleConnectionFailure
from ansible.plugins.connection import ConnectionBase

DOCUMENTATION = """
    name: kmgmt_nowhere
    short_description: fails every use as unreachable
    description: [The conformance replay connects to no host.]
    author: kubespray-mgmt tests
"""


class Connection(ConnectionBase):
    transport = 'kmgmt_nowhere'
    has_pipelining = True

    def _nowhere(self, *args, **kwargs):
        raise AnsibleConnectionFailure('conformance replay: no host')

    _connect = exec_command = put_file = fetch_file = _nowhere

    def close(self):
        self._connected = False
'''


class ReleaseUnavailable(Exception):
    """The archive is missing here; the message says where it was
    looked for."""


def archive_path():
    explicit = os.environ.get('KMGMT_KUBESPRAY_ARCHIVE')
    if explicit:
        return pathlib.Path(explicit)
    return REPO.parent / 'shared' / 'kubespray' / ARCHIVE_NAME


def venv_path():
    explicit = os.environ.get('KMGMT_KUBESPRAY_VENV')
    if explicit:
        return pathlib.Path(explicit)
    return REPO / '.tox' / ('kubespray-%s-ansible' % VERSION)


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            digest.update(block)
    return digest.hexdigest()


class Release:
    """The extracted release and its own ``ansible-playbook``.

    :param workdir: an empty directory for the extracted tree.
    """

    def __init__(self, workdir):
        archive = archive_path()
        if not archive.is_file():
            raise ReleaseUnavailable(
                'the real kubespray archive is not at %s (CI keeps it in '
                '../shared/kubespray/ beside the clone)' % archive)
        if _sha256(archive) != ARCHIVE_SHA256:
            raise AssertionError('%s is not kubespray v%s\'s archive '
                                 '(sha256 differs)' % (archive, VERSION))
        with tarfile.open(archive) as tar:
            tar.extractall(workdir, filter='data')
        self.root = pathlib.Path(workdir) / ('kubespray-%s' % VERSION)
        self.venv = ensure_venv(self.root / 'requirements.txt', venv_path())
        self.ansible_playbook = self.venv / 'bin' / 'ansible-playbook'

    def read_yaml(self, relative):
        return yaml.safe_load((self.root / relative).read_text())


def ensure_venv(requirements, target):
    """A virtualenv at *target* with *requirements* installed, made once:
    a ``.complete`` file holds the requirements' and Python's digest,
    and a lock keeps two sessions from building it together.

    :returns: *target*.
    """
    text = pathlib.Path(requirements).read_text()
    key = hashlib.sha256(('%s\n%s' % (sys.version, text)).encode()).hexdigest()
    target = pathlib.Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    marker = target / '.complete'
    with open(str(target) + '.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists() and marker.read_text() == key:
            return target
        shutil.rmtree(target, ignore_errors=True)
        subprocess.run([sys.executable, '-m', 'venv', str(target)],
                       check=True)
        pip = subprocess.run([str(target / 'bin' / 'pip'), 'install', '-q',
                              '--disable-pip-version-check', '-r',
                              str(requirements)], capture_output=True,
                             text=True)
        if pip.returncode:
            raise AssertionError('pip could not install kubespray\'s '
                                 'requirements into %s: %s' % (
                                     target, pip.stderr[-2000:]))
        marker.write_text(key)
    return target


# -------------------------------------------------------------- parse --

_PLAY_LINE = re.compile(r'^  play #(\d+) \((.*)\): (.*?)\tTAGS: \[.*\]$')
_HOSTS_LINE = re.compile(r'^    hosts \((\d+)\):$')


def parse_list_hosts(text):
    """``ansible-playbook --list-hosts`` output as ``[{name, pattern,
    hosts}]`` in play order."""
    plays, current = [], None
    for line in text.splitlines():
        match = _PLAY_LINE.match(line)
        if match:
            current = {'name': match.group(3), 'pattern': match.group(2),
                       'hosts': []}
            plays.append(current)
        elif current is not None and line.startswith('    pattern: '):
            current['pattern'] = ast.literal_eval(line.split(': ', 1)[1])
        elif current is not None and line.startswith('      ') and \
                line.strip():
            current['hosts'].append(line.strip())
    return plays


def _playbook_of(playbook):
    """The root playbook name the double recorded (``remove_node.yml``
    and ``remove-node.yml`` are the same playbook)."""
    return playbook.replace('remove_node.yml', 'remove-node.yml').replace(
        'upgrade_cluster.yml', 'upgrade-cluster.yml')


def compare_plays(playbook, double_plays, real_plays):
    """Where the hosts of the double's plays and the real ones differ.

    Each double play maps to real plays (:data:`PLAY_MAP`, else the same
    name); each must exist, target the hosts the relation requires, and
    come in the real order.  The hosts of the whole run, every play
    together, must be the same on both sides.

    :returns: problems, empty when they agree.
    """
    playbook = _playbook_of(playbook)
    problems, last = [], -1
    by_name = {}
    for index, play in enumerate(real_plays):
        by_name.setdefault(play['name'], []).append(index)
    for play in double_plays:
        relation, names = PLAY_MAP.get((playbook, play['name']),
                                       ('same', [play['name']]))
        mine = set(play['hosts'])
        indexes = [i for name in names for i in by_name.get(name, [])]
        if not indexes:
            problems.append('double play %r has no real play %s' % (
                play['name'], names))
            continue
        for i in indexes:
            real = set(real_plays[i]['hosts'])
            if (mine != real) if relation == 'same' else not mine <= real:
                problems.append(
                    'play %r: the double targets %s, the real play %r '
                    'targets %s' % (play['name'], sorted(mine),
                                    real_plays[i]['name'], sorted(real)))
        if min(indexes) < last:
            problems.append('play %r comes before real play #%d, which an '
                            'earlier double play maps to' % (
                                play['name'], last + 1))
        last = max(last, min(indexes))
    mine = {h for play in double_plays for h in play['hosts']}
    real = {h for play in real_plays for h in play['hosts']}
    if mine != real:
        problems.append('the whole run: the double targets %s, the real '
                        'release %s' % (sorted(mine), sorted(real)))
    return problems


def parse_json_run(text):
    """The ``ansible.posix.json`` callback's document in *text*."""
    start = text.find('{')
    if start < 0:
        raise AssertionError('no JSON output: %s' % text[-2000:])
    return json.loads(text[start:])


def task_results(doc):
    """``[(play, task, host, state)]``; state ``ok``, ``skipped``,
    ``failed`` or ``unreachable``."""
    rows = []
    for play in doc.get('plays', []):
        for task in play.get('tasks', []):
            for host, result in task.get('hosts', {}).items():
                state = ('unreachable' if result.get('unreachable') else
                         'failed' if result.get('failed') else
                         'skipped' if result.get('skipped') else 'ok')
                rows.append((play['play']['name'], task['task']['name'],
                             host, state, result.get('msg')))
    return rows


def guard_problems(rows, plays=(), tasks=(), evaluated=()):
    """Where the real run refused or did not get as far as it should.

    :param rows: :func:`task_results`.
    :param plays: plays that must have run a task (ok or skipped).
    :param tasks: tasks that must have run (ok or skipped).
    :param evaluated: tasks that must have run and not been skipped.
    :returns: problems; a failed task is one, its message included.
    """
    problems = ['%s / %s failed on %s: %s' % (p, t, h, str(m)[:400])
                for p, t, h, state, m in rows if state == 'failed']
    seen_plays = {p for p, t, h, s, m in rows}
    seen_tasks = {t for p, t, h, s, m in rows}
    ran = {t for p, t, h, s, m in rows if s == 'ok'}
    problems += ['play %r did not run' % p for p in plays
                 if p not in seen_plays]
    problems += ['task %r did not run' % t for t in tasks
                 if t not in seen_tasks]
    problems += ['task %r was skipped' % t for t in evaluated
                 if t in seen_tasks and t not in ran]
    problems += ['task %r did not run' % t for t in evaluated
                 if t not in seen_tasks]
    return problems


# ------------------------------------------------------------- replay --

class _Unsafe(str):
    """A string written ``!unsafe``, as the driver writes any with "{"."""


def _unsafe_representer(dumper, data):
    return dumper.represent_scalar('!unsafe', str(data))


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Unsafe, _unsafe_representer)


def _inert(value):
    if isinstance(value, dict):
        return {k: _inert(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_inert(v) for v in value]
    if isinstance(value, str) and '{' in value:
        return _Unsafe(value)
    return value


class Replay:
    """One recorded invocation, ready to run with the real release.

    :param release: the :class:`Release`.
    :param invocation: one record of the double's invocation log.
    :param directory: an empty directory for the replay's files.
    """

    def __init__(self, release, invocation, directory):
        self.release = release
        self.invocation = invocation
        self.dir = pathlib.Path(directory)
        self.playbook = invocation['argv'][-1]
        self.facts = self.dir / 'facts'
        plugins = self.dir / 'connection_plugins'
        for path in (self.facts, plugins, self.dir / 'tmp'):
            path.mkdir(parents=True)
        (plugins / 'kmgmt_nowhere.py').write_text(NOWHERE_PLUGIN)
        self.argv = self._argv()
        self._seed_fact_cache()

    def _argv(self):
        """The recorded argv with the inventory and vars files replaced
        by copies here, and the nowhere connection last."""
        record = self.invocation
        inventories = {os.path.normpath(os.path.join(record['cwd'], p)): text
                       for p, text in record['inventories'].items()}
        sources = list(record['extra_vars'])
        argv, tokens = [], iter(record['argv'])
        for token in tokens:
            option, value = token, None
            if token.startswith('--') and '=' in token:
                option, value = token.split('=', 1)
            if option in ('-i', '--inventory', '--inventory-file'):
                value = next(tokens) if value is None else value
                text = inventories[os.path.normpath(
                    os.path.join(record['cwd'], value))]
                argv += ['-i', self._write('inventory-%d/%s' % (
                    len(argv), os.path.basename(value)), text)]
            elif option in ('-e', '--extra-vars'):
                if value is None:
                    next(tokens)
                source, values = sources.pop(0)
                if source == 'inline':
                    raise AssertionError('inline -e in %s: the driver '
                                         'passes vars files only' %
                                         record['argv'])
                argv += ['-e', '@' + self._write(
                    'vars-%d/%s' % (len(argv), os.path.basename(source)),
                    yaml.dump(_inert(values), Dumper=_Dumper))]
            else:
                argv.append(token)
        playbook = argv.pop()
        return argv + ['-e', '@' + self._write(
            'nowhere.yml', 'ansible_connection: kmgmt_nowhere\n'), playbook]

    def _write(self, relative, text):
        path = self.dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return str(path)

    def _seed_fact_cache(self):
        """A cache entry for each host the double's run found cached,
        with the fact kubespray's --limit check reads."""
        for host in self.invocation.get('cached_hosts') or ():
            (self.facts / host).write_text(json.dumps({
                'ansible_default_ipv4': {'address': '127.0.47.1'}}))

    def env(self, json_output=False):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith('ANSIBLE_')}
        env.update(self.invocation.get('env') or {})
        env.update({
            'PATH': '%s:%s' % (self.release.venv / 'bin', env.get('PATH')),
            'ANSIBLE_CONNECTION_PLUGINS': str(self.dir / 'connection_plugins'),
            'ANSIBLE_CACHE_PLUGIN': 'jsonfile',
            'ANSIBLE_CACHE_PLUGIN_CONNECTION': str(self.facts),
            'ANSIBLE_LOCAL_TEMP': str(self.dir / 'tmp'),
            'ANSIBLE_SSH_CONTROL_PATH_DIR': str(self.dir / 'tmp'),
            'ANSIBLE_NOCOLOR': '1', 'ANSIBLE_RETRY_FILES_ENABLED': 'false'})
        if json_output:
            env.update({'ANSIBLE_STDOUT_CALLBACK': 'ansible.posix.json',
                        # kubespray's profile_tasks would print between
                        # the JSON lines.
                        'ANSIBLE_CALLBACKS_ENABLED': ''})
        return env

    def run(self, extra=(), playbook=None, json_output=False, timeout=300):
        argv = [str(self.release.ansible_playbook)] + self.argv[:-1] + \
            list(extra) + [playbook or self.argv[-1]]
        return subprocess.run(argv, cwd=self.release.root,
                              env=self.env(json_output),
                              stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=timeout)

    def list_hosts(self):
        """The real plays and their hosts (``--list-hosts``)."""
        result = self.run(['--list-hosts'])
        if result.returncode != 0:
            raise AssertionError('real %s --list-hosts failed (%d): %s' % (
                self.playbook, result.returncode,
                (result.stdout + result.stderr)[-3000:]))
        return parse_list_hosts(result.stdout)

    def guards(self):
        """Run the real playbook until it needs a host: the problems of
        its controller-side guards (:func:`guard_problems`)."""
        result = self.run(json_output=True)
        rows = task_results(parse_json_run(result.stdout))
        plays = GUARD_PLAYS.get(_playbook_of(self.playbook),
                                BOILERPLATE_PLAYS)
        problems = guard_problems(rows, plays=plays)
        if result.returncode not in (0, 4):  # 4: a host unreachable
            problems.append('exit status %d: %s' % (
                result.returncode, result.stderr[-1500:]))
        return problems + self._harness_problems()

    def _harness_problems(self):
        playbook = _playbook_of(self.playbook)
        guards = []
        if playbook == 'reset.yml':
            guards.append((RESET_GUARD, {}))
        if playbook in PREINSTALL_PLAY and self.invocation.get('limit'):
            source, play = PREINSTALL_PLAY[playbook]
            guards.append(((source, play, [FACT_CACHE_TASK]),
                           {'evaluated': [FACT_CACHE_TASK]}))
        problems = []
        for (source, play, names), expect in guards:
            path = self.harness(source, play, names)
            result = self.run(playbook=path, json_output=True)
            rows = task_results(parse_json_run(result.stdout))
            problems += ['%s: %s' % (play, p) for p in guard_problems(
                rows, tasks=names, **expect)]
            if result.returncode != 0:
                problems.append('%s guards: exit status %d: %s' % (
                    play, result.returncode, result.stderr[-1500:]))
        return problems

    def harness(self, source, play_name, task_names):
        """A playbook, in the release's tree, of one play: the real play
        *play_name*'s hosts and vars, kubespray's defaults, and the real
        tasks named *task_names* (from the play, or from the preinstall
        settings check).

        :returns: its path.
        """
        plays = self.release.read_yaml(source)
        play = next(p for p in plays if p.get('name') == play_name)
        pool = play.get('pre_tasks', []) + play.get('tasks', []) + \
            self.release.read_yaml(PREINSTALL_CHECKS)
        tasks = [next(t for t in pool if t.get('name') == name)
                 for name in task_names]
        harness = [{'name': '%s (its guards only)' % play_name,
                    'hosts': play['hosts'], 'gather_facts': False,
                    'vars': play.get('vars', {}),
                    'roles': ['kubespray_defaults'], 'tasks': tasks}]
        path = self.release.root / ('kmgmt-guards-%s.yml' % self.dir.name)
        path.write_text(yaml.safe_dump(harness, sort_keys=False))
        return str(path)


def replay_all(release, invocations, directory, workers=2):
    """Replay every invocation: ``[(invocation, real plays,
    guard problems)]``, in order, *workers* at a time."""
    def one(item):
        index, invocation = item
        replay = Replay(release, invocation,
                        pathlib.Path(directory) / ('%02d' % index))
        return invocation, replay.list_hosts(), replay.guards()
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return list(pool.map(one, enumerate(invocations)))
