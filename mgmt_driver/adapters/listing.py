"""``kubespray-mgmt list``: the instances this driver owns, one line each.

Not in the design's layout: the operator's view of every cluster the
driver built from this host (or from every conductor sharing the state
store, :mod:`mgmt_driver.state.statestore`), read from the records alone
(:mod:`mgmt_driver.state.records`): no host is contacted, so it answers at
once whatever state the clusters are in.  Each instance shows its id,
the VIM or kubeconfig it registered, its Ansible server, its node counts
(from the ``cluster`` entry the last inventory wrote; a record written
before that counts the hosts it lists) and its last operation with the
result (:func:`mgmt_driver.state.statestore.recorded`).
"""

from mgmt_driver.common import exceptions
from mgmt_driver.common import safetext
from mgmt_driver.model import core
from mgmt_driver.state import follow
from mgmt_driver.state import records as records_mod

#: Text columns, in order.
HEADER = ('INSTANCE', 'VIM', 'ANSIBLE SERVER', 'MASTERS', 'WORKERS', 'LBS',
          'LAST OPERATION', 'RESULT')
#: Characters of a value shown in a text column.
_WIDTH = 60


def entries(store):
    """One JSON-ready dict per record of *store*, sorted by id.

    Keys: ``instance_id``, ``vims`` (``[{kind, id, name}]``),
    ``ansible_server`` (``address:port`` or None), ``masters``,
    ``workers``, ``gateways`` (counts), ``workspace``,
    ``last_operation`` (``{operation, result, started, ended, error,
    host}``, with ``waiting`` while a running operation waits for a
    playbook slot, or None), ``error`` (why the record cannot be read, or
    None) and ``reason`` (that error's cause alone, as the text shows it).
    """
    return [_entry(store, instance_id)
            for instance_id in store.instance_ids()]


def _entry(store, instance_id):
    try:
        record = store.load(instance_id)
    except exceptions.InstanceRecordInvalid as exc:
        return dict(_blank(instance_id), error=str(exc),
                    reason=str(exc.fields.get('reason') or '?'))
    cluster = record.cluster or {}
    if cluster:
        counts = follow.node_counts(cluster)
    else:
        counts = dict.fromkeys(core.ROLES, 0)
        for host in record.hosts:
            if host.role in counts:
                counts[host.role] += 1
    return dict(_blank(instance_id),
                vims=[{'kind': kind, 'id': vim.get('id'),
                       'name': vim.get('name')}
                      for kind, vim in sorted(record.vims.items())],
                ansible_server=_ansible_server(record, cluster),
                masters=counts[core.ROLE_MASTER],
                workers=counts[core.ROLE_WORKER],
                gateways=counts[core.ROLE_EXTERNAL_LB],
                workspace=cluster.get('workspace'),
                last_operation=record.last_operation)


def _blank(instance_id):
    return {'instance_id': instance_id, 'vims': [], 'ansible_server': None,
            'masters': 0, 'workers': 0, 'gateways': 0, 'workspace': None,
            'last_operation': None, 'error': None, 'reason': None}


def _ansible_server(record, cluster):
    ansible = cluster.get('ansible')
    if isinstance(ansible, dict) and ansible.get('address'):
        return '%s:%s' % (ansible['address'], ansible.get('port'))
    servers = sorted('%s:%d' % h.endpoint for h in record.hosts
                     if h.role == records_mod.ROLE_ANSIBLE)
    return servers[0] if servers else None


def format_text(found):
    """*found* (:func:`entries`) as a table, one line per instance."""
    rows = [_row(entry) for entry in found]
    widths = [max(len(row[i]) for row in [HEADER] + rows)
              for i in range(len(HEADER))]
    return ''.join('  '.join(value.ljust(width) for value, width in
                             zip(row, widths, strict=True)).rstrip() + '\n'
                   for row in [HEADER] + rows)


def _row(entry):
    if entry['error']:
        return (_clip(entry['instance_id']), '-', '-', '-', '-', '-', '-',
                'unreadable record: ' + _clip(entry.get('reason') or '?'))
    last = entry['last_operation'] or {}
    vims = ','.join(_vim_text(v) for v in entry['vims']) or '-'
    cells = (entry['ansible_server'] or '-', str(entry['masters']),
             str(entry['workers']), str(entry['gateways']),
             last.get('operation') or '-')
    return (_clip(entry['instance_id']), _clip_start(vims)) + tuple(
        _clip(value) for value in cells) + (
        exceptions.clip(_result(last), 2 * _WIDTH + 40),)


def _vim_text(vim):
    """A Tacker VIM by its name, a kubeconfig file by its path."""
    if vim['kind'] == records_mod.TACKER_VIM:
        return vim['name'] or vim['id'] or '?'
    return vim['id'] or '?'


def _result(last):
    if not last:
        return '-'
    result = str(last.get('result') or '?')
    when = last.get('ended') or last.get('started')
    text = '%s %s' % (result, when) if when else result
    if last.get('waiting') and result == 'running':
        text += ', waiting for %s' % last['waiting']
    return text


def _clip(value):
    return exceptions.clip(str(value), _WIDTH)


def _clip_start(value):
    """*value* escaped, its end kept (a kubeconfig's file name, not the
    middle of its path, tells it from the others)."""
    shown = safetext.escape(str(value)[-4 * _WIDTH:])
    return shown if len(shown) <= _WIDTH else '...' + shown[3 - _WIDTH:]
