"""The driver's own record of what it owns for each VNF instance.

Not in the design's layout: a request's ``additionalParams`` and every
file on the Ansible server are in the tenant's hands, so neither can say
which VIM the driver may delete or which host keys it may forget at
terminate.  This module keeps that on the conductor host, one JSON file
per instance in ``[kubespray_mgmt] records_dir``::

    {"format": 1, "instance_id": "<id>",
     "hosts": [{"address": "192.0.2.10", "port": 22, "role": "master"}],
     "vim": {"id": "<VIM id or kubeconfig path>", "name": "<name>"}}

``hosts`` lists every host the driver connected to or put in the
inventory for the instance (the Ansible server and the LB included;
terminate forgets the keys of all but the Ansible server);
``vim`` is the VIM (or, outside Tacker, the kubeconfig file) it
registered, or null.  Files are mode 0600, replaced atomically, and
changed under a lock shared by all processes (:mod:`sharedfiles`).
"""

import dataclasses
import json
import os
import re

from oslo_log import log as logging

from mgmt_driver import conf as kconf
from mgmt_driver import exceptions
from mgmt_driver import sharedfiles

LOG = logging.getLogger(__name__)

FORMAT = 1
ROLE_ANSIBLE = 'ansible'
_SAFE_ID = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\Z')


@dataclasses.dataclass(frozen=True, order=True)
class Host:
    """One host of an instance: where the driver reaches it over SSH."""

    address: str
    port: int
    role: str

    @property
    def endpoint(self):
        return self.address, self.port


@dataclasses.dataclass
class InstanceRecord:
    """What the driver owns for one VNF instance."""

    instance_id: str
    hosts: list = dataclasses.field(default_factory=list)
    vim_id: str | None = None
    vim_name: str | None = None

    def to_json(self):
        vim = {'id': self.vim_id, 'name': self.vim_name} \
            if self.vim_id else None
        return json.dumps({
            'format': FORMAT, 'instance_id': self.instance_id,
            'hosts': [dataclasses.asdict(h) for h in sorted(self.hosts)],
            'vim': vim}, indent=2, sort_keys=True) + '\n'

    @classmethod
    def from_json(cls, instance_id, text):
        """Parse a record file; :raises ValueError: it is not one."""
        doc = json.loads(text)
        if not isinstance(doc, dict) or doc.get('format') != FORMAT:
            raise ValueError('not a record of format %d' % FORMAT)
        hosts = [Host(str(h['address']), int(h['port']), str(h['role']))
                 for h in doc.get('hosts') or []]
        vim = doc.get('vim') or {}
        return cls(instance_id, hosts, vim.get('id'), vim.get('name'))


def default_directory(conf=None):
    """``records_dir``, or ``records`` beside ``known_hosts_file``."""
    group = (conf or kconf.CONF).kubespray_mgmt
    if group.records_dir:
        return os.path.expanduser(group.records_dir)
    known_hosts = os.path.expanduser(group.known_hosts_file)
    return os.path.join(os.path.dirname(known_hosts) or '.', 'records')


class RecordStore:
    """The records of every instance, in one local directory.

    :param directory: where ``<instance id>.json`` files live.
    """

    def __init__(self, directory):
        self.directory = directory
        self._lock_path = os.path.join(directory, 'records')

    @classmethod
    def from_conf(cls, conf=None):
        return cls(default_directory(conf))

    def path(self, instance_id):
        """The record file of *instance_id*.

        :raises MgmtDriverParamInvalid: the id is not a safe file name.
        """
        if not isinstance(instance_id, str) or \
                not _SAFE_ID.match(instance_id):
            raise exceptions.MgmtDriverParamInvalid(
                param='VNF instance id %r (not usable as a file name)'
                      % (instance_id,))
        return os.path.join(self.directory, '%s.json' % instance_id)

    def locked(self):
        """Hold the lock of every record (all threads and processes)."""
        return sharedfiles.locked(self._lock_path)

    def load(self, instance_id):
        """The record of *instance_id* (empty when there is none).

        :raises InstanceRecordInvalid: the file cannot be read or parsed.
        """
        path = self.path(instance_id)
        try:
            with open(path, encoding='utf-8') as f:
                return InstanceRecord.from_json(instance_id, f.read())
        except FileNotFoundError:
            return InstanceRecord(instance_id)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise exceptions.InstanceRecordInvalid(
                path=path, instance=instance_id,
                reason=getattr(exc, 'strerror', None) or str(exc))

    def _save(self, record):
        sharedfiles.replace(self.path(record.instance_id), record.to_json())

    def _update(self, instance_id, change):
        with self.locked():
            record = self.load(instance_id)
            if change(record) is not False:
                self._save(record)
            return record

    def add_hosts(self, instance_id, hosts):
        """Add *hosts* (:class:`Host`) to the record of *instance_id*."""
        def change(record):
            new = [h for h in hosts if h not in record.hosts]
            record.hosts.extend(new)
            return bool(new)
        return self._update(instance_id, change)

    def drop_hosts(self, instance_id, endpoints):
        """Drop the hosts at *endpoints* (``(address, port)``) again."""
        def change(record):
            kept = [h for h in record.hosts if h.endpoint not in endpoints]
            dropped = len(kept) != len(record.hosts)
            record.hosts = kept
            return dropped
        return self._update(instance_id, change)

    def set_vim(self, instance_id, vim_id, name):
        """Record that this instance registered VIM *vim_id*."""
        def change(record):
            record.vim_id, record.vim_name = vim_id, name
        return self._update(instance_id, change)

    def clear_vim(self, instance_id):
        """Record that the instance's VIM is gone."""
        def change(record):
            if record.vim_id is None:
                return False
            record.vim_id = record.vim_name = None
        return self._update(instance_id, change)

    def endpoints_of_others(self, instance_id):
        """``(address, port)`` of the hosts other instances record."""
        found = set()
        for name in self._record_names():
            if name != instance_id:
                found.update(h.endpoint for h in self.load(name).hosts)
        return found

    def _record_names(self):
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        return [n[:-len('.json')] for n in names
                if n.endswith('.json') and _SAFE_ID.match(n[:-5])]

    def remove(self, instance_id):
        """Delete the record; absent is fine."""
        try:
            os.unlink(self.path(instance_id))
        except FileNotFoundError:
            pass


def release(store, instance_id, forget_host, unregister):
    """Delete the instance's VIM, forget its hosts' keys, drop its record.

    Only what the record lists is touched.  The Ansible server's key is
    kept: it is not a VM of the instance and goes on serving others (an
    operator may have put its key there for ``host_key_policy=reject``).
    Keys of hosts that another instance's record lists are kept too:
    they may be that instance's VMs now (a reused floating IP).

    :param forget_host: ``(address, port)`` -> drops the host's key.
    :param unregister: ``(vim id)`` -> deletes the recorded VIM; if it
        raises, the record is kept, so running this again finishes.
    :returns: the ``(address, port)`` pairs whose keys were forgotten.
    """
    record = store.load(instance_id)
    if record.vim_id:
        unregister(record.vim_id)
        store.clear_vim(instance_id)
    with store.locked():
        record = store.load(instance_id)
        endpoints = {h.endpoint for h in record.hosts
                     if h.role != ROLE_ANSIBLE}
        gone = sorted(endpoints - store.endpoints_of_others(instance_id))
        for address, port in gone:
            forget_host(address, port)
        store.remove(instance_id)
    LOG.info('Released VNF instance %s: forgot %d of %d host key(s) (the '
             'others are listed by other instances)', instance_id,
             len(gone), len(endpoints))
    return gone
