"""The driver's own record of what it owns for each VNF instance.

Not in the design's layout: a request's ``additionalParams`` and every
file on the Ansible server are in the tenant's hands, so neither can say
which VIM the driver may delete or which host keys it may forget at
terminate.  This module keeps that on the conductor side, one JSON file
per instance in ``[kubespray_mgmt] records_dir`` (with several
conductors, in the state directory they share:
:mod:`mgmt_driver.state.statestore`)::

    {"format": 1, "instance_id": "<id>",
     "hosts": [{"address": "192.0.2.10", "port": 22, "role": "master"}],
     "keys": [{"address": "192.0.2.10", "port": 22,
               "key": "ssh-ed25519 AAAA..."}],
     "vims": {"tacker_vim": {"id": "<VIM id>", "name": "<VIM name>"}},
     "cluster": {...}, "last_operation": {...}}

``hosts`` lists every host the driver connected to or put in the
inventory for the instance (the Ansible server and the LB included);
a request naming a host is enough to list it, so a listed host's key is
not the instance's to forget.  ``keys`` holds the host keys the
instance *owns*: those that one of its own logins recorded in
``known_hosts_file`` (the host had no entry, the policy is
``accept-new``, and the login succeeded).  Terminate, scale-in and heal
forget only owned keys, and only while the file still holds that very
key; never a key recorded before (the operator's pinned entries, another
instance's), and never the key of a host that any record lists as an
Ansible server.  A record written before ``keys`` existed says nothing
about ownership: it is loaded (and kept) with ``legacy`` set; the keys
of its hosts are not owned (only those a later login claims), so they
stay, and terminate warns naming them.  ``vims`` holds, by kind, what it
registered: the Tacker VIM (``tacker_vim``) or, for ``kubespray-mgmt
run``, the kubeconfig file (``kubeconfig``, its path as id).  Files are
mode 0600, replaced atomically, and changed under a lock shared by all
processes (:mod:`sharedfiles`).

``cluster`` (written with each inventory the driver uploads) says how
to reach the cluster without the request: the Ansible server, the
workspace, each role's login (user, port and a *reference* to its key:
a path on this host or the operator's default key; never a password or
a key itself) and the nodes (:mod:`mgmt_driver.state.follow`).
``last_operation`` is the last hook or ``kubespray-mgmt run`` of the
instance and its result (:func:`mgmt_driver.state.statestore.guard`).  Both
are for the operator's commands (``status``/``logs --instance-id``,
``list``); nothing the driver deletes or forgets is taken from them.

When terminate deletes a record, an empty ``<id>.released`` file takes
its place: an instance whose record is *missing* was never seen by this
store (another conductor's disk holds it, :mod:`mgmt_driver.state.statestore`),
while a *released* one owns nothing any more, so terminate or heal run
again finish instead of refusing.  Writing the record again (the
instance is instantiated again) drops the marker.
"""

import contextlib
import dataclasses
import json
import os
import re

from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.common import safetext
from mgmt_driver.common import untrusted
from mgmt_driver.state import sharedfiles

LOG = safetext.logger(__name__)

FORMAT = 1
ROLE_ANSIBLE = 'ansible'
#: Roles of the hosts that belong to one cluster only (model.ROLES).
NODE_ROLES = frozenset(('master', 'worker'))
#: Kinds of registration (keys of ``vims``).
TACKER_VIM = 'tacker_vim'
KUBECONFIG = 'kubeconfig'
_SAFE_ID = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\Z')
#: What :meth:`RecordStore.state` says of an instance.
PRESENT, RELEASED, MISSING = 'present', 'released', 'missing'
RELEASED_SUFFIX = '.released'


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
    vims: dict = dataclasses.field(default_factory=dict)
    #: ``{(address, port): key_line}``: the host keys this instance owns.
    keys: dict = dataclasses.field(default_factory=dict)
    #: Loaded from a record written before ownership was recorded.
    legacy: bool = False
    #: How to reach the cluster (:mod:`mgmt_driver.state.follow`), or None.
    cluster: dict | None = None
    #: ``{operation, result, started, ended, error}`` of the last
    #: operation, or None.
    last_operation: dict | None = None

    def vim_id(self, kind):
        """The id of what the instance registered as *kind*, or None."""
        return (self.vims.get(kind) or {}).get('id')

    def to_json(self):
        doc = {'format': FORMAT, 'instance_id': self.instance_id,
               'hosts': [dataclasses.asdict(h) for h in sorted(self.hosts)],
               'keys': [{'address': a, 'port': p, 'key': k}
                        for (a, p), k in sorted(self.keys.items())],
               'vims': self.vims}
        if self.legacy:
            doc['legacy'] = True
        for key in ('cluster', 'last_operation'):
            if getattr(self, key) is not None:
                doc[key] = getattr(self, key)
        return json.dumps(doc, indent=2, sort_keys=True) + '\n'

    @classmethod
    def from_json(cls, instance_id, text):
        """Parse a record file; :raises ValueError: it is not one."""
        doc = untrusted.load_json(text)
        if not isinstance(doc, dict) or doc.get('format') != FORMAT:
            raise ValueError('not a record of format %d' % FORMAT)
        hosts = [Host(str(h['address']), int(h['port']), str(h['role']))
                 for h in doc.get('hosts') or []]
        vims = {str(kind): {'id': str(v['id']), 'name': v.get('name')}
                for kind, v in (doc.get('vims') or {}).items()}
        keys = {(str(k['address']), int(k['port'])): str(k['key'])
                for k in doc.get('keys') or []}
        legacy = 'keys' not in doc or doc.get('legacy') is True
        return cls(instance_id, hosts, vims, keys, legacy,
                   _mapping(doc, 'cluster'), _mapping(doc, 'last_operation'))


def _mapping(doc, key):
    """``doc[key]`` when it is a mapping (else None: its readers check
    every field again)."""
    value = doc.get(key)
    return value if isinstance(value, dict) else None


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

    def released_path(self, instance_id):
        """The marker left where terminate deleted the record."""
        return self.path(instance_id)[:-len('.json')] + RELEASED_SUFFIX

    def state(self, instance_id):
        """:data:`PRESENT`, :data:`RELEASED` (terminate deleted the
        record) or :data:`MISSING` (this store never had one)."""
        if os.path.exists(self.path(instance_id)):
            return PRESENT
        if os.path.exists(self.released_path(instance_id)):
            return RELEASED
        return MISSING

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

    def save(self, record):
        """Write *record* (call it holding :meth:`locked`); the
        instance is no longer :data:`RELEASED`."""
        sharedfiles.replace(self.path(record.instance_id), record.to_json())
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.released_path(record.instance_id))

    def _update(self, instance_id, change):
        with self.locked():
            record = self.load(instance_id)
            if change(record) is not False:
                self.save(record)
            return record

    def add_hosts(self, instance_id, hosts):
        """Add *hosts* (:class:`Host`) to the record of *instance_id*."""
        def change(record):
            # A set: a hook re-adds every node, and a request may name
            # tens of thousands (a list scan made that quadratic).
            known = set(record.hosts)
            new = [h for h in dict.fromkeys(hosts) if h not in known]
            record.hosts.extend(new)
            return bool(new)
        return self._update(instance_id, change)

    def drop_hosts(self, instance_id, endpoints):
        """Drop the hosts at *endpoints* (``(address, port)``) again,
        and the instance's claims on their keys."""
        def change(record):
            kept = [h for h in record.hosts if h.endpoint not in endpoints]
            dropped = len(kept) != len(record.hosts)
            record.hosts = kept
            for endpoint in endpoints:
                dropped = record.keys.pop(endpoint, None) is not None or \
                    dropped
            return dropped
        return self._update(instance_id, change)

    def claim_key(self, instance_id, address, port, key):
        """Note that a login of *instance_id* recorded *key* for
        *address*:*port* in known_hosts: the instance owns that key.

        :param key: ``<type> <base64>``
        (:func:`mgmt_driver.remote.ssh.key_line`).
        """
        endpoint = (address, int(port))

        def change(record):
            if record.keys.get(endpoint) == key:
                return False
            record.keys[endpoint] = key
        return self._update(instance_id, change)

    def forget_keys(self, instance_id, endpoints, forget_host, drop=False):
        """Forget the keys the instance owns among *endpoints* (their VMs
        are removed or re-created), and its claims on them.

        :param forget_host: ``(address, port, key)`` -> drops *key* of
            the host, if known_hosts still holds it.
        :param drop: drop the hosts from the record too.
        :returns: the endpoints whose keys were forgotten, sorted.
        """
        endpoints = set(endpoints)
        with self.locked():
            record = self.load(instance_id)
            gone = self._forget_owned(record, endpoints, forget_host)
            before = (len(record.hosts), len(record.keys))
            record.keys = {e: k for e, k in record.keys.items()
                           if e not in endpoints}
            if drop:
                record.hosts = [h for h in record.hosts
                                if h.endpoint not in endpoints]
            if (len(record.hosts), len(record.keys)) != before:
                self.save(record)
            return gone

    def _forget_owned(self, record, endpoints, forget_host):
        """Forget the owned keys of *record* at *endpoints*: not those
        of an Ansible server (any record's) or another instance owns."""
        ansible, others = self._protected(record.instance_id)
        gone = []
        for endpoint, key in sorted(record.keys.items()):
            if endpoint not in endpoints or endpoint in ansible or \
                    (endpoint, key) in others:
                continue
            forget_host(endpoint[0], endpoint[1], key)
            gone.append(endpoint)
        return gone

    def _protected(self, instance_id):
        """``(endpoints any record lists as an Ansible server,
        (endpoint, key) pairs other instances own)``."""
        ansible, others = set(), set()
        for record in self._readable_records():
            ansible.update(h.endpoint for h in record.hosts
                           if h.role == ROLE_ANSIBLE)
            if record.instance_id != instance_id:
                others.update(record.keys.items())
        return ansible, others

    def _readable_records(self):
        """Every record here that can be read (a damaged one is
        logged and skipped: another instance's problem must not stop
        this one)."""
        for name in self._record_names():
            try:
                yield self.load(name)
            except exceptions.InstanceRecordInvalid as exc:
                LOG.warning('Ignoring a damaged record: %s', exc)

    def owners(self, endpoints, instance_id):
        """The other instances whose records list a Kubernetes node
        (master or worker) at one of *endpoints*.

        Ansible servers and load balancers may serve several clusters;
        a node belongs to one.

        :param endpoints: ``(address, port)`` pairs.
        :returns: ``{instance id: [endpoints it lists, sorted]}``.
        """
        endpoints = set(endpoints)
        found = {}
        for record in self._readable_records():
            mine = sorted({h.endpoint for h in record.hosts
                           if h.role in NODE_ROLES} & endpoints)
            if mine and record.instance_id != instance_id:
                found[record.instance_id] = mine
        return found

    def set_vim(self, instance_id, kind, vim_id, name):
        """Record that this instance registered *vim_id* as *kind*."""
        def change(record):
            record.vims[kind] = {'id': vim_id, 'name': name}
        return self._update(instance_id, change)

    def clear_vim(self, instance_id, kind):
        """Record that the instance's *kind* registration is gone."""
        def change(record):
            return record.vims.pop(kind, None) is not None
        return self._update(instance_id, change)

    def set_cluster(self, instance_id, cluster):
        """Record how to reach the instance's cluster (a JSON-ready
        dict without secrets, :func:`mgmt_driver.state.follow.describe`);
        written only when it changed."""
        def change(record):
            if record.cluster == cluster:
                return False
            record.cluster = cluster
        return self._update(instance_id, change)

    def set_last_operation(self, instance_id, entry, create=False):
        """Record *entry* as the instance's last operation, if the
        instance has a record (one terminate deleted stays deleted),
        or *create* it."""
        with self.locked():
            if not create and self.state(instance_id) != PRESENT:
                return None
            record = self.load(instance_id)
            record.last_operation = entry
            self.save(record)
            return record

    def set_waiting(self, instance_id, what):
        """Note in the instance's running last operation what it waits
        for (*what*, a sentence), or that it waits no more (None):
        ``kubespray-mgmt list`` shows it.  Nothing for an instance
        without a record or with no operation running."""
        def change(record):
            last = record.last_operation
            if not last or last.get('result') != 'running' or \
                    last.get('waiting') == what:
                return False
            last['waiting'] = what
        with self.locked():
            if self.state(instance_id) != PRESENT:
                return None
        return self._update(instance_id, change)

    def instance_ids(self):
        """The ids of every instance with a record here, sorted."""
        return sorted(self._record_names())

    def _record_names(self):
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        return [n[:-len('.json')] for n in names
                if n.endswith('.json') and _SAFE_ID.match(n[:-5])]

    def release_hosts(self, instance_id, forget_host):
        """Forget the host keys the instance owns and close its record.

        The record is deleted, unless it still names a registration
        (kept, without hosts, for the tool that made it).

        :param forget_host: ``(address, port, key)`` -> drops *key* of
            the host, if known_hosts still holds it.
        :returns: ``(endpoints forgotten, endpoints of the VMs)``.
        """
        with self.locked():
            record = self.load(instance_id)
            endpoints = {h.endpoint for h in record.hosts
                         if h.role != ROLE_ANSIBLE}
            gone = self._forget_owned(record, set(record.keys),
                                      forget_host)
            if record.legacy:
                _warn_legacy(record, sorted(endpoints - set(gone)))
            if not record.vims:
                self.remove(instance_id)
                return gone, endpoints
            LOG.warning('VNF instance %s: keeping its record %s, which '
                        'still names a registration: %s', instance_id,
                        self.path(instance_id), ', '.join(record.vims))
            record.hosts, record.keys = [], {}
            self.save(record)
            return gone, endpoints

    def remove(self, instance_id):
        """Delete the record, leaving the :data:`RELEASED` marker (mode
        0600, empty); absent is fine."""
        sharedfiles.replace(self.released_path(instance_id), '')
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path(instance_id))


#: Hosts a legacy-record warning names (the rest are counted).
_LEGACY_SHOWN = 10


def _warn_legacy(record, kept):
    if not kept:
        return
    shown = ', '.join('%s:%d' % e for e in kept[:_LEGACY_SHOWN])
    more = len(kept) - _LEGACY_SHOWN
    LOG.warning('VNF instance %s: its record was written by a version that '
                'did not note which host keys the instance recorded itself; '
                'the SSH host keys of %d host(s) it lists are kept in '
                'known_hosts_file (%s%s). Where their VMs are gone, remove '
                'them with "ssh-keygen -R <address> -f <known_hosts_file>"',
                record.instance_id, len(kept), shown,
                ' and %d more' % more if more > 0 else '')


def release(store, instance_id, forget_host, kind, unregister):
    """Delete the instance's VIM, forget its hosts' keys, drop its record.

    Only what the record lists is touched, and of the host keys only
    those the instance owns (see the module's docstring): a host a
    request merely named keeps its key, so does any host some record
    lists as an Ansible server (an operator may have pinned its key for
    ``host_key_policy=reject``) and a key another instance owns too.

    :param forget_host: ``(address, port, key)`` -> drops *key* of the
        host, if known_hosts still holds it.
    :param kind: the kind of registration the caller deletes
        (:data:`TACKER_VIM` or :data:`KUBECONFIG`); others are left
        alone, with the record.
    :param unregister: ``(id)`` -> deletes the recorded registration of
        *kind*; if it raises, the record is kept, so running this again
        finishes.
    :returns: the ``(address, port)`` pairs whose keys were forgotten.
    """
    vim_id = store.load(instance_id).vim_id(kind)
    if vim_id:
        unregister(vim_id)
        store.clear_vim(instance_id, kind)
    gone, endpoints = store.release_hosts(instance_id, forget_host)
    LOG.info('Released VNF instance %s: forgot %d host key(s) it owned; '
             'it listed %d host(s)', instance_id, len(gone), len(endpoints))
    return gone
