"""What one real ``kubespray-mgmt run`` did, as one JSON document.

Not in the design's layout: the machine-readable result of a run that
changed a cluster (a dry run's plan is :mod:`mgmt_driver.remote.plan`'s).  The
nodes added and removed are the difference between the instance's
recorded node set (:mod:`mgmt_driver.state.follow`) before and after the run,
so they say what the driver now takes the cluster to be, whatever the
operation; the playbooks are the context's runs
(:attr:`mgmt_driver.session.driver.ClusterDriver.playbook_runs`: playbook,
``--limit``, log path on the Ansible server, exit status); the warnings
are those the driver logged meanwhile (escaped, clipped).

The document's keys (``samples/README.rst``, "Run results"):
``operation``, ``instance_id``, ``dry_run`` (false), ``result``
(``succeeded`` or ``failed``), ``summary`` (the line the text output
ends with, or None), ``error`` (None, or the message), ``nodes``
(``{added, removed, named}``), ``playbooks`` and ``warnings``.

A dry run's document (:func:`planned`) says what the run would do, with
keys of its own so that nothing reads a plan as a result:
``operation``, ``instance_id``, ``dry_run`` (true), ``summary`` (in the
conditional), ``nodes`` (``{would_add, would_remove, named}``: what the
operation plans to add to and remove from the cluster) and ``steps``
(:func:`mgmt_driver.remote.plan.plan_records`).
"""

import contextlib
import logging

from mgmt_driver.common import exceptions
from mgmt_driver.common import safetext
from mgmt_driver.remote import plan

#: Warnings kept in a report (the rest are counted in the last one).
MAX_WARNINGS = 100


class _Collector(logging.Handler):
    """Keeps the driver's warnings, each escaped and clipped."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []
        self.dropped = 0

    def emit(self, record):
        if len(self.messages) >= MAX_WARNINGS:
            self.dropped += 1
            return
        try:
            text = record.getMessage()
        except Exception:  # a bad format must not end the run
            text = str(record.msg)
        self.messages.append(safetext.clip(text, 1000))


class RunReport:
    """Collects what a run does; :meth:`document` words it.

    :param store: the ``records.RecordStore`` the run writes.
    :param instance_id: the instance.
    :param operation: the command's operation (``scale-out``).
    :param names: the node names the command was given.
    """

    def __init__(self, store, instance_id, operation, names):
        self.store = store
        self.instance_id = instance_id
        self.operation = operation
        self.names = list(names)
        self.before = self._recorded_nodes()
        self._collector = _Collector()

    def _recorded_nodes(self):
        try:
            cluster = self.store.load(self.instance_id).cluster or {}
        except exceptions.InstanceRecordInvalid:
            return set()
        return {node['name'] for node in cluster.get('nodes') or []
                if isinstance(node, dict) and
                isinstance(node.get('name'), str)}

    @contextlib.contextmanager
    def collecting(self):
        """While the run goes: keep the driver's warnings."""
        logger = logging.getLogger('mgmt_driver')
        logger.addHandler(self._collector)
        try:
            yield self
        finally:
            logger.removeHandler(self._collector)

    def document(self, playbooks, summary=None, error=None):
        """The JSON-ready result.

        :param playbooks: the context's ``playbook_runs``.
        :param summary: the operation's summary line, when it succeeded.
        :param error: the exception that ended it, or None.
        """
        after = self._recorded_nodes()
        warnings = list(self._collector.messages)
        if self._collector.dropped:
            warnings.append('... and %d more warning(s)'
                            % self._collector.dropped)
        return {'operation': self.operation,
                'instance_id': self.instance_id, 'dry_run': False,
                'result': _result(error), 'summary': summary,
                'error': None if error is None else _error_text(error),
                'nodes': {'added': sorted(after - self.before),
                          'removed': sorted(self.before - after),
                          'named': self.names},
                'playbooks': list(playbooks), 'warnings': warnings}


def _result(error):
    if error is None:
        return 'succeeded'
    return 'interrupted' if isinstance(error, KeyboardInterrupt) \
        else 'failed'


def _error_text(error):
    """The message of *error*; Ctrl-C's says what was done, if known."""
    if isinstance(error, KeyboardInterrupt):
        return 'interrupted' + ('; %s' % error if str(error) else '')
    return exceptions.plain_message(error)


def planned(operation, instance_id, names, summary, steps):
    """The JSON-ready plan of a dry run (no result, no playbook run).

    :param operation: the command's operation (``scale-out``).
    :param instance_id: the instance.
    :param names: the node names the command was given.
    :param summary: the operation's
    :class:`mgmt_driver.common.outcomes.Summary`,
        in the conditional.
    :param steps: the dry run's ``plan.Step`` list.
    """
    return {'operation': operation, 'instance_id': instance_id,
            'dry_run': True, 'summary': summary,
            'nodes': {'would_add': sorted(summary.added),
                      'would_remove': sorted(summary.removed),
                      'named': list(names)},
            'steps': plan.plan_records(steps)}
