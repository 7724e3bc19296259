# kubespray TEST DOUBLE (localsite-dist/mgmt_localsite/README.rst).
"""Callback that logs each playbook run of the double, for tests.

One callback keeps both logs of ``<checkout>/.double/``, one JSON line
per run in each; what the run started from (the playbook, ansible's
arguments) and how it ended (failed and unreachable hosts) is read once
for both:

``runs.jsonl``, always: the playbook, the --limit, whether --become was
given, the extra-vars files (inline extra vars are not logged: they may
hold secrets), the hosts the run connected to (directly or through
delegate_to), the hosts that were unreachable or failed, and the wall
time.

``invocations.jsonl``, only on a site that asked for it
(``Site.record_invocations()`` creates ``.double/record-invocations``),
so that tests/functional/test_conformance.py can replay the run with the
real kubespray release.  A line holds what the run was given and which
hosts each play targeted:

* ``argv`` (ansible-playbook's own arguments: paths, flags, --limit),
  ``cwd`` and the ``ANSIBLE_*`` variables that change how the
  inventory is read (:data:`ENV_KEPT`; of the others only the names);
* ``inventories``: ``{path: text}`` of every ``-i`` file (the driver's
  ``hosts.yaml`` holds no credential; ``host_vars/`` beside it, which
  does, is not read);
* ``extra_vars``: ``[[source, vars]]`` for each ``-e`` in order
  (``@file`` sources by path, inline ones as ``"inline"``), with every
  value that looks like a credential replaced (:func:`redact`);
* ``cached_hosts``: hosts whose cached facts were valid when the run
  started (what kubespray's ``--limit`` check reads);
* ``plays``: ``[{name, pattern, hosts}]`` in order, ``hosts`` being the
  hosts the play's pattern matched within ``--limit`` (what
  ``--list-hosts`` prints; every batch of a ``serial`` play together).

Nothing is written into the inventory's directory or the run's output.
"""

import json
import os
import re
import sys
import time

from ansible import context
from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: kube_double_runs
    type: aggregate
    short_description: Logs each run of the kubespray test double
    description:
      - Appends one JSON line per playbook run to .double/runs.jsonl in
        the checkout (the hosts it touched), and one to
        .double/invocations.jsonl (what it was given) when
        .double/record-invocations exists.
    author: kubespray-mgmt tests
"""

#: Actions that run on the controller and open no connection.
CONTROLLER_ACTIONS = frozenset((
    'assert', 'fail', 'debug', 'set_fact', 'group_by', 'add_host', 'pause',
    'meta', 'include_tasks', 'import_tasks', 'include_role',
    'import_role', 'include_vars', 'set_stats', 'validate_argument_spec',
    'noop'))
#: Environment variables recorded with their value (paths and switches
#: that change what a run reads); other ANSIBLE_* only by name.
ENV_KEPT = ('ANSIBLE_INVENTORY_ENABLED', 'ANSIBLE_INVENTORY_UNPARSED_FAILED',
            'ANSIBLE_CACHE_PLUGIN', 'ANSIBLE_CACHE_PLUGIN_CONNECTION')
#: A key whose value is replaced whatever it is.
_SECRET_KEY = re.compile(r'pass|secret|token|credential|private_key', re.I)
#: userinfo of a URL (proxy URLs may carry a password).
_URL_USERINFO = re.compile(r'(?<=://)[^/@\s]*@')
REDACTED = '<redacted>'


def redact(value, key=''):
    """*value* with credentials replaced by :data:`REDACTED`: any value
    under a key that names a secret, and the userinfo of URLs."""
    if _SECRET_KEY.search(str(key)):
        return REDACTED
    if isinstance(value, dict):
        return {k: redact(v, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return _URL_USERINFO.sub(REDACTED + '@', value)
    return value


def _checkout():
    return os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))


def _plain(value):
    """*value* as JSON-able builtins (Ansible wraps strings)."""
    return json.loads(json.dumps(value, default=str))


class CallbackModule(CallbackBase):

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'kube_double_runs'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._directory = os.path.join(_checkout(), '.double')
        self._record_invocations = os.path.exists(
            os.path.join(self._directory, 'record-invocations'))
        self._run = {}
        self._touched = set()
        self._names = {}
        self._started = time.time()
        self._invocation = None
        self._plays = {}

    def v2_playbook_on_start(self, playbook):
        args = context.CLIARGS
        path = os.path.relpath(os.path.abspath(playbook._file_name),
                               _checkout())
        self._run = {
            'playbook': path,
            'limit': args.get('subset'),
            'become': bool(args.get('become')),
            'become_user': args.get('become_user'),
            'extra_vars_files': [e[1:] for e in args.get('extra_vars', ())
                                 if e.startswith('@')],
            'inventory': list(args.get('inventory') or ()),
        }
        self._started = time.time()
        if self._record_invocations:
            self._invocation = _invocation(path, args, playbook._loader)

    def v2_playbook_on_play_start(self, play):
        # Callbacks see a delegated task's address, not its inventory
        # name (ansible-core 2.19 strips it), so keep a way back.
        # Every host: a task may be delegated to one outside --limit.
        variables = play.get_variable_manager()
        inventory = variables._inventory
        for host in inventory.get_hosts('all', ignore_limits=True,
                                        ignore_restrictions=True):
            address = host.vars.get('ansible_host', host.name)
            self._names.setdefault(address, set()).add(host.name)
        if self._invocation is not None:
            self._record_play(play, variables, inventory)

    def _record_play(self, play, variables, inventory):
        if self._invocation['cached_hosts'] is None:
            self._invocation['cached_hosts'] = _cached(variables, inventory)
        # Once per batch of a serial play, the inventory restricted to
        # the batch: ignore the restriction, keep --limit.
        key = play._uuid
        if key not in self._plays:
            entry = {'name': play.get_name(),
                     'pattern': _plain(play.hosts),
                     'hosts': [h.name for h in inventory.get_hosts(
                         play.hosts, ignore_restrictions=True)]}
            self._plays[key] = entry
            self._invocation['plays'].append(entry)

    def _touch(self, result):
        action = result._task.action.rsplit('.', 1)[-1]
        if action in CONTROLLER_ACTIONS:
            return
        delegated = result._result.get('_ansible_delegated_vars') or {}
        if not delegated:
            self._touched.add(result._host.get_name())
            return
        host = delegated.get('ansible_delegated_host')
        if not host:
            address = delegated.get('ansible_host')
            names = self._names.get(address, ())
            host = next(iter(names)) if len(names) == 1 else address
        self._touched.add(host)

    def v2_runner_on_ok(self, result):
        self._touch(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._touch(result)

    def v2_runner_on_unreachable(self, result):
        self._touch(result)

    def v2_playbook_on_stats(self, stats):
        ended = {'unreachable': sorted(h for h, n in stats.dark.items() if n),
                 'failed': sorted(h for h, n in stats.failures.items() if n)}
        record = dict(self._run, touched=sorted(self._touched),
                      processed=sorted(stats.processed),
                      seconds=round(time.time() - self._started, 3),
                      **ended)
        record['ok'] = not (record['unreachable'] or record['failed'])
        os.makedirs(self._directory, exist_ok=True)
        self._append('runs.jsonl', record)
        if self._invocation is not None:
            self._append('invocations.jsonl', dict(self._invocation, **ended))

    def _append(self, name, record):
        with open(os.path.join(self._directory, name), 'a') as f:
            f.write(json.dumps(record, sort_keys=True) + '\n')


def _invocation(playbook, args, loader):
    """The start of a run's ``invocations.jsonl`` line (its plays and
    how it ended are added as it runs)."""
    return {
        'playbook': playbook,
        'argv': list(sys.argv[1:]),
        'cwd': os.getcwd(),
        'env': {k: os.environ[k] for k in ENV_KEPT if k in os.environ},
        'env_names': sorted(k for k in os.environ
                            if k.startswith('ANSIBLE_')),
        'limit': args.get('subset'),
        'tags': list(args.get('tags') or ()),
        'skip_tags': list(args.get('skip_tags') or ()),
        'inventories': {p: _read(p) for p in args.get('inventory') or ()
                        if os.path.isfile(p)},
        'extra_vars': [_extra_vars(loader, e)
                       for e in args.get('extra_vars') or ()],
        'cached_hosts': None,
        'plays': [],
    }


def _read(path):
    with open(path, errors='replace') as f:
        return f.read()


def _extra_vars(loader, source):
    if source.startswith('@'):
        return [source, redact(_plain(loader.load_from_file(source[1:])))]
    return ['inline', REDACTED]


def _cached(variables, inventory):
    """Hosts whose cached facts kubespray's --limit check accepts."""
    cache = variables._fact_cache
    cached = []
    for host in inventory.get_hosts('all', ignore_limits=True,
                                    ignore_restrictions=True):
        try:
            facts = cache.get(host.name) or {}
        except Exception:  # an unreadable entry counts as missing
            facts = {}
        if 'ansible_default_ipv4' in facts or \
                'ansible_default_ipv6' in facts:
            cached.append(host.name)
    return sorted(cached)
