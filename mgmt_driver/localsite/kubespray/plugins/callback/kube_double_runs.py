# kubespray TEST DOUBLE (mgmt_driver/localsite/README.rst).
"""Callback that logs each playbook run of the double, for tests.

One JSON line per run is appended to ``<checkout>/.double/runs.jsonl``:
the playbook, the --limit, whether --become was given, the extra-vars
files (inline extra vars are not logged: they may hold secrets), the
hosts the run connected to (directly or through delegate_to), the hosts
that were unreachable or failed, and the wall time.
"""

import json
import os
import time

from ansible import context
from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: kube_double_runs
    type: aggregate
    short_description: Logs the hosts each run touched (kubespray test double)
    description:
      - Appends one JSON line per playbook run to .double/runs.jsonl in
        the checkout.
    author: kubespray-mgmt tests
"""

#: Actions that run on the controller and open no connection.
CONTROLLER_ACTIONS = frozenset((
    'assert', 'fail', 'debug', 'set_fact', 'group_by', 'add_host', 'pause',
    'meta', 'include_tasks', 'import_tasks', 'include_role',
    'import_role', 'include_vars', 'set_stats', 'validate_argument_spec',
    'noop'))


def _checkout():
    return os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))


class CallbackModule(CallbackBase):

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'kube_double_runs'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._record = {}
        self._touched = set()
        self._names = {}
        self._started = time.time()

    def v2_playbook_on_start(self, playbook):
        args = context.CLIARGS
        path = os.path.abspath(playbook._file_name)
        self._record = {
            'playbook': os.path.relpath(path, _checkout()),
            'limit': args.get('subset'),
            'become': bool(args.get('become')),
            'become_user': args.get('become_user'),
            'extra_vars_files': [e[1:] for e in args.get('extra_vars', ())
                                 if e.startswith('@')],
            'inventory': list(args.get('inventory') or ()),
        }
        self._started = time.time()

    def v2_playbook_on_play_start(self, play):
        # Callbacks see a delegated task's address, not its inventory
        # name (ansible-core 2.19 strips it), so keep a way back.
        # Every host: a task may be delegated to one outside --limit.
        inventory = play.get_variable_manager()._inventory
        for host in inventory.get_hosts('all', ignore_limits=True,
                                        ignore_restrictions=True):
            address = host.vars.get('ansible_host', host.name)
            self._names.setdefault(address, set()).add(host.name)

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
        record = dict(
            self._record, touched=sorted(self._touched),
            unreachable=sorted(h for h, n in stats.dark.items() if n),
            failed=sorted(h for h, n in stats.failures.items() if n),
            processed=sorted(stats.processed),
            seconds=round(time.time() - self._started, 3))
        record['ok'] = not (record['unreachable'] or record['failed'])
        directory = os.path.join(_checkout(), '.double')
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, 'runs.jsonl'), 'a') as f:
            f.write(json.dumps(record, sort_keys=True) + '\n')
