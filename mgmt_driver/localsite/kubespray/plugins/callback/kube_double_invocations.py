# kubespray TEST DOUBLE (mgmt_driver/localsite/README.rst).
"""Records each ansible-playbook invocation, for the conformance tests.

Only on a site that asked for it (``Site.record_invocations()`` creates
``<checkout>/.double/record-invocations``): one JSON line per run is
appended to ``<checkout>/.double/invocations.jsonl``, so that
tests/functional/test_conformance.py can replay the run with the real
kubespray release.  A line holds what the run was given and which hosts
each play targeted:

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

from ansible import context
from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: kube_double_invocations
    type: aggregate
    short_description: Records each run's invocation (kubespray test double)
    description:
      - Appends one JSON line per playbook run to .double/invocations.jsonl
        in the checkout when .double/record-invocations exists.
    author: kubespray-mgmt tests
"""

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
    CALLBACK_NAME = 'kube_double_invocations'
    # Loaded from callback_plugins without being listed in ansible.cfg;
    # it writes nothing unless the site asked for it.
    CALLBACK_NEEDS_ENABLED = False

    def __init__(self):
        super().__init__()
        directory = os.path.join(_checkout(), '.double')
        self._log = os.path.join(directory, 'invocations.jsonl')
        self._on = os.path.exists(os.path.join(directory,
                                               'record-invocations'))
        self._record = None
        self._plays = {}

    def v2_playbook_on_start(self, playbook):
        if not self._on:
            return
        args = context.CLIARGS
        path = os.path.abspath(playbook._file_name)
        self._record = {
            'playbook': os.path.relpath(path, _checkout()),
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
            'extra_vars': [_extra_vars(playbook._loader, e)
                           for e in args.get('extra_vars') or ()],
            'cached_hosts': None,
            'plays': [],
        }

    def v2_playbook_on_play_start(self, play):
        if self._record is None:
            return
        variables = play.get_variable_manager()
        inventory = variables._inventory
        if self._record['cached_hosts'] is None:
            self._record['cached_hosts'] = _cached(variables, inventory)
        # Once per batch of a serial play, the inventory restricted to
        # the batch: ignore the restriction, keep --limit.
        key = play._uuid
        if key not in self._plays:
            entry = {'name': play.get_name(),
                     'pattern': _plain(play.hosts),
                     'hosts': [h.name for h in inventory.get_hosts(
                         play.hosts, ignore_restrictions=True)]}
            self._plays[key] = entry
            self._record['plays'].append(entry)

    def v2_playbook_on_stats(self, stats):
        if self._record is None:
            return
        self._record['failed'] = sorted(
            h for h, n in stats.failures.items() if n)
        self._record['unreachable'] = sorted(
            h for h, n in stats.dark.items() if n)
        with open(self._log, 'a') as f:
            f.write(json.dumps(self._record, sort_keys=True) + '\n')


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
