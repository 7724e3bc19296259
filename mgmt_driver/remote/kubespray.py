"""Runs kubespray's playbooks on the Ansible server over one SSH connection.

* :class:`Workspace`: the per-VNF-instance directory on the Ansible server
  that holds the inventory, the extra-vars files and credentials (0700
  directory, 0600 files, written atomically).
* :func:`detect_layout`: what the kubespray checkout looks like (where
  ``facts.yml`` is, whether ``remove-node.yml`` knows
  ``skip_confirmation``), in one remote command; checkouts older than
  v2.16 are refused.
* :class:`Runner`: ``ansible-playbook`` with the checkout as working
  directory, ``-i <inventory file>``, ``-e @<file>`` only (``-e k=v``
  turns booleans into strings), ``--become``, forks and a timeout that
  grows with the node count.  Each run is detached on the Ansible server
  (:mod:`mgmt_driver.remote.detached`: it survives a lost connection, one run
  per cluster at a time, its whole log kept there); progress lines go to
  the log, PLAY RECAP is parsed, and a failure raises
  :class:`~mgmt_driver.common.exceptions.PlaybookFailed` naming the failed
  hosts and the log.  No PTY is ever requested and no prompt is answered:
  confirmations are switched off through vars files.

Inputs are plain values (paths, host names, rendered documents), so the
module does not depend on the request model.
"""

import base64
import binascii
import dataclasses
import io
import posixpath
import re
import tarfile
import time

import yaml

from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.common import safetext
from mgmt_driver.common import untrusted
from mgmt_driver.remote import detached
from mgmt_driver.remote import inventory
from mgmt_driver.remote import isolation
from mgmt_driver.remote import programs
from mgmt_driver.remote import ssh

LOG = safetext.logger(__name__)

#: Oldest kubespray release this driver supports.
MIN_VERSION = (2, 16)

#: The vars file :meth:`Runner.remove_nodes` writes into the workspace.
REMOVE_VARS_FILE = 'remove-node-vars.yaml'
#: Groups added to the ``--limit`` of ``remove-node.yml`` besides the
#: removed nodes (see :meth:`Runner.remove_nodes`); ``localhost`` keeps
#: kubespray's own check that ``node`` is set (v2.28+), which a limit
#: without it would skip.  Checked with ``--list-hosts`` on v2.31.0.
REMOVAL_GROUPS = ('kube_control_plane', 'etcd', 'localhost')
#: The vars file :meth:`Runner.reset` writes into the workspace.
RESET_VARS_FILE = 'reset-vars.yaml'
#: The vars file :meth:`Runner.upgrade` writes into the workspace.
UPGRADE_VARS_FILE = 'upgrade-vars.yaml'

# Kubernetes node names are DNS subdomains; an inventory name must also be
# a plain Ansible host pattern (no ',', ':', '!', '&', '*' or '~' that
# would widen --limit or remove-node's ``node`` to other hosts).
_HOST_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$')
# Patterns that are valid names but would match every host.
_WIDE_PATTERNS = frozenset({'all', 'localhost', 'ungrouped'})


# The programs this module runs (mgmt_driver/remote/scripts/NAME.sh).
#: Unpacks a document set into the workspace (Workspace.replace).
REPLACE = 'replace-workspace'
#: What a checkout is (detect_layout): one marker line per finding.
DETECT = 'detect-layout'
#: Begins a hook (Workspace.open): ENSURE, DETECT and the record files
#: in one command.
OPEN = 'open-workspace'
#: The Kubernetes versions a checkout supports (supported_kube_versions).
SUPPORTED = 'supported-kube-versions'


def _tar(documents):
    """A tar stream of ``{relative path: (text or bytes, mode)}``, with
    an entry (mode 0700) for every directory, each dated now (tar keeps
    the date: TarInfo's default made every workspace file 1970's)."""
    buffer = io.BytesIO()
    now = int(time.time())
    with tarfile.open(fileobj=buffer, mode='w') as archive:
        directories = sorted({parent for name in documents
                              for parent in _parents(name)})
        for directory in directories:
            info = tarfile.TarInfo(directory)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o700, now
            archive.addfile(info)
        for name, (body, mode) in documents.items():
            data = body.encode('utf-8') if isinstance(body, str) else body
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, now
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


#: A record :meth:`Workspace.open` did not read (read it on its own).
NOT_READ = object()


@dataclasses.dataclass(frozen=True)
class Opened:
    """What :meth:`Workspace.open` found.

    :param holder: the ``detached.RunInfo`` of the playbook run holding
        the cluster's lock, or None.
    :param layout_output: the output to give :func:`parse_layout`.
    :param records: ``{name: text, or None when the file is missing}``
        of the records read; one left out was not (see
        :data:`NOT_READ`).
    """

    holder: object
    layout_output: str
    records: dict


def _opened_records(stdout, names, limit):
    """``{name: text or None}`` from the ``KO:`` lines of *stdout*: only
    the *names* asked for, and only a whole file of at most *limit*
    bytes (anything else is read again the ordinary way)."""
    found = {}
    for line in stdout.splitlines():
        if line.startswith('KO:MISSING:') and line[11:] in names:
            found[line[11:]] = None
        elif line.startswith('KO:FILE:'):
            name, _, rest = line[8:].partition(':')
            body = _whole_file(rest, limit)
            if name in names and body is not None:
                # As ssh.Connection.read_file decodes.
                found[name] = body.decode('utf-8', 'replace')
    return found


def _whole_file(rest, limit):
    """The bytes of ``<size>:<base64>`` when they are a whole file of
    at most *limit* bytes, else None."""
    size, _, data = rest.partition(':')
    size = untrusted.whole_number(size.strip(), 20)
    if size is None or len(data) > (limit + 3) // 3 * 4:
        return None
    try:
        body = base64.b64decode(data.encode('ascii'), validate=True)
    except (binascii.Error, UnicodeError):
        return None
    return body if len(body) == size <= limit else None


def _parents(name):
    """The parent directories of *name* (``a/b/c`` -> ``a``, ``a/b``)."""
    parts = name.split('/')[:-1]
    return ['/'.join(parts[:i]) for i in range(1, len(parts) + 1)]


def _unsafe(path, reason):
    return exceptions.UnsafeRemotePath(path=path, reason=reason)


def _check_workspace_path(path):
    """The normalised absolute *path*, or UnsafeRemotePath."""
    if not isinstance(path, str) or not path.strip():
        raise _unsafe(path, 'it is empty')
    if any(ch in path for ch in '\0\n\r'):
        raise _unsafe(path, 'it contains a control character')
    if not path.startswith('/'):
        raise _unsafe(path, 'it is not absolute')
    parts = [p for p in path.split('/') if p]
    if '..' in parts or '.' in parts:
        raise _unsafe(path, 'it contains "." or ".." components')
    if len(parts) < 2:
        raise _unsafe(path, 'it has fewer than 2 components (the driver '
                            'deletes this directory on terminate)')
    return '/' + '/'.join(parts)


def _check_relative(name):
    """The normalised relative *name* of a workspace file."""
    if not isinstance(name, str) or not name.strip():
        raise _unsafe(name, 'a workspace file name is empty')
    if any(ch in name for ch in '\0\n\r'):
        raise _unsafe(name, 'it contains a control character')
    if name.startswith('/'):
        raise _unsafe(name, 'a workspace file name must be relative')
    parts = [p for p in name.split('/') if p]
    if not parts or '..' in parts or '.' in parts:
        raise _unsafe(name, 'it contains "." or ".." components')
    return '/'.join(parts)


#: remove-node.yml's drain of a node whose VM is gone: its kubelet cannot
#: confirm that a pod terminated, so kubectl drain (kubespray's
#: ``--grace-period 300 --timeout 360s``) would wait its whole timeout
#: for every pod it evicted, and fail (which allow_ungraceful_removal
#: ignores).  A grace period of 0 deletes the pods at once (a forced
#: deletion, as for any pod of a dead node); the timeout bounds the wait
#: for evictions a PodDisruptionBudget refuses.
DEAD_NODE_DRAIN = {'drain_grace_period': 0, 'drain_timeout': '60s'}


#: A line of ``remove-workspace``: a master that did not close.
_MASTER_LEFT = 'KR:MASTER:LEFT:'


class Workspace:
    """The directory of one VNF instance on the Ansible server.

    :param conn: an ``ssh.Connection`` to the Ansible server.
    :param path: absolute directory (``transferring_inventory_path``);
        at least two components, no ``..``.
    :raises UnsafeRemotePath: *path* is not safe to create and delete.
    """

    def __init__(self, conn, path):
        self.conn = conn
        self.path = _check_workspace_path(path)
        self._made_dirs = set()
        # {relative name: (body, mode)} of the files this object wrote
        # (upload_changed skips a file whose text is there already).
        self._sent = {}

    def __repr__(self):
        return '<Workspace %s:%s>' % (self.conn.host, self.path)

    def file(self, name):
        """The absolute path of workspace file *name* (relative).

        :raises UnsafeRemotePath: *name* is absolute or has ``..``.
        """
        return posixpath.join(self.path, _check_relative(name))

    def ensure(self):
        """Create the directory (mode 0700) or reuse it: one command.

        A directory that already exists is kept with its files, so a
        retried instantiate converges instead of failing.  The same
        command peeks at the run lock (:mod:`mgmt_driver.remote.detached`).

        :returns: the ``detached.RunInfo`` of the playbook run holding
            the cluster's lock, or None.
        """
        # chmod as well: a directory that already existed may be wider.
        result = self.conn.run(programs.command(detached.ENSURE, self.path),
                               check=False)
        self._raise_if_failed(result)
        LOG.debug('Workspace %s ready on %s', self.path, self.conn.host)
        return detached.busy_holder(result.stdout)

    def open(self, kubespray_root, ansible_playbook, records, limit):
        """:meth:`ensure`, :func:`detect_layout` and reading the record
        files *records*: one command (a hook's reads of the Ansible
        server, batched).

        :param kubespray_root: the checkout, as for :func:`detect_layout`.
        :param ansible_playbook: the command whose ``--version`` to ask,
            or None.
        :param records: relative names of workspace files to read.
        :param limit: the most bytes of a file to take (a larger one is
            left for :meth:`read_record` to read, and refuse, itself).
        :returns: an :class:`Opened`.
        :raises UnsafeRemotePath: the workspace's path is refused.
        """
        names = [_check_relative(name) for name in records]
        result = self.conn.run(programs.command(
            OPEN, self.path, kubespray_root, str(int(limit)),
            ansible_playbook or '', *names), check=False)
        self._raise_if_failed(result)
        LOG.debug('Workspace %s ready on %s', self.path, self.conn.host)
        return Opened(holder=detached.busy_holder(result.stdout),
                      layout_output=result.stdout,
                      records=_opened_records(result.stdout, names, limit))

    def _raise_if_failed(self, result):
        refused = isolation.refusal(result, self.path)
        if refused is not None:
            raise refused
        if result.failed:
            raise exceptions.RemoteCommandFailed(result)

    def read_record(self, name, parse, text=NOT_READ):
        """A record file of the workspace, parsed by *parse* (which
        gets None for a missing file and raises ValueError for what it
        refuses).

        :param text: the file's text (None: missing) when it was read
            already (:meth:`open`); by default it is read now.
        :raises RemoteDataInvalid: *parse* refused the file (its message
            names the file and the problem, which names no value).
        """
        path = self.file(name)
        if text is NOT_READ:
            text = self.conn.read_file(path, missing_ok=True)
        try:
            return parse(text)
        except ValueError as exc:
            raise exceptions.RemoteDataInvalid(
                host=self.conn.host, what=path, problem=str(exc))

    def upload(self, documents, mode=0o600):
        """Write each document atomically into the workspace.

        :param documents: ``{relative path: text}``; subdirectories such
            as ``host_vars/`` are created (mode 0700) with one command.
        :param mode: permission bits of every file (default 0600: the
            documents may hold credentials).
        :returns: the absolute paths written, in the given order.
        :raises UnsafeRemotePath: a name is absolute or has ``..``.
        """
        targets = [(self.file(name), text)
                   for name, text in documents.items()]
        self._make_dirs(posixpath.dirname(path) for path, _ in targets)
        for path, text in targets:
            self.conn.write_file(path, text, mode=mode)
        self._sent.update((name, (text, mode)) for name, text in
                          documents.items())
        return [path for path, _ in targets]

    def upload_changed(self, documents, mode=0o600):
        """:meth:`upload` of the *documents* this object has not written
        with the same text and mode already (by :meth:`upload` or in
        :meth:`replace`'s set), so a file that rode in the inventory's
        transfer costs no second one.

        :returns: the absolute paths of all *documents*, in order.
        :raises UnsafeRemotePath: a name is absolute or has ``..``.
        """
        changed = {name: text for name, text in documents.items()
                   if self._sent.get(name) != (text, mode)}
        if changed:
            self.upload(changed, mode=mode)
        return [self.file(name) for name in documents]

    def replace(self, documents, gone=(), exit_timeout=5):
        """Write a whole document set: one transfer, one command.

        The set travels as a tar stream on the command's standard input
        and is unpacked into a fresh 0700 directory inside the workspace
        (never on a command line); then each top-level file is renamed
        into place (atomic), and each top-level directory replaces its
        old copy as a whole (two renames), so files of the old set that
        the new one lacks, such as a removed node's ``host_vars``, are
        gone.  The cost is the same for 3 nodes or 300.

        The same command then tells the SSH master connections Ansible
        kept for the workspace (``ControlPersist``, in
        :func:`isolation.control_path_dir`) to the hosts *gone* to exit:
        a removed node's would live on until ControlPersist ends.  One
        that does not close is a warning naming its socket.  A master's
        socket is known by its name
        (:func:`isolation.control_socket_name`): a master's process
        title names its socket, not its host.

        :param documents: ``{relative path: (text or bytes, mode)}``;
            directories get mode 0700.
        :param gone: ``(ansible_host, ansible_port, ansible_user)`` of
            each host the inventory no longer has.
        :param exit_timeout: seconds one master may take to close
            (``ssh_master_exit_timeout``).
        :returns: the absolute paths written.
        :raises UnsafeRemotePath: a name is absolute or has ``..``.
        """
        names = {_check_relative(name): body
                 for name, body in documents.items()}
        closing = [isolation.control_path_dir(self.path),
                   str(int(exit_timeout)), *sorted(
                       isolation.control_socket_name(*host)
                       for host in gone)] if gone else []
        # Whatever happens, what was known written may be gone now.
        self._sent.clear()
        result = self.conn.run(
            programs.command(REPLACE, self.path, *closing),
            stdin=_tar(names), check=False)
        self._raise_if_failed(result)
        self._sent.update(names)
        if gone:
            self._warn_masters_left(result.stdout)
        LOG.debug('Wrote %d file(s) into %s on %s', len(names), self.path,
                  self.conn.host)
        return [posixpath.join(self.path, name) for name in names]

    def _make_dirs(self, directories):
        missing = set()
        for directory in directories:
            while directory != self.path and directory not in missing:
                missing.add(directory)
                directory = posixpath.dirname(directory)
        missing -= self._made_dirs
        if missing:
            # Each level is listed, parents first, so every one of them
            # gets mode 0700, not only the deepest.
            self.conn.run(['mkdir', '-p', '-m', '0700', '--']
                          + sorted(missing))
            self._made_dirs |= missing

    def remove(self, exit_timeout=5):
        """Stop the playbook run holding the lock, if any, close the SSH
        master connections Ansible kept for the workspace
        (``ControlPersist``, in :func:`isolation.control_path_dir`) and
        delete the workspace and everything in it: one command.

        Deleting a workspace that is already gone succeeds.  A master
        that does not close is a warning naming the host.

        :param exit_timeout: seconds one master may take to close
            (``ssh_master_exit_timeout``).
        """
        result = self.conn.run(programs.command(
            detached.REMOVE, self.path,
            isolation.control_path_dir(self.path), str(int(exit_timeout))),
            check=False)
        self._raise_if_failed(result)
        self._warn_masters_left(result.stdout)
        if 'KR:STOPPED:' in result.stdout:
            LOG.warning('Stopped the playbook run still running in %s on '
                        '%s', self.path, self.conn.host)
        elif 'KR:NOTOURS:' in result.stdout:
            LOG.warning('Did not stop the process run.info names in %s on '
                        '%s: it is not that playbook run (its pid is '
                        'stale, or /proc is missing)', self.path,
                        self.conn.host)
        self._made_dirs.clear()
        self._sent.clear()
        LOG.info('Removed workspace %s on %s', self.path, self.conn.host)

    def _warn_masters_left(self, stdout):
        left = [line[len(_MASTER_LEFT):] for line in stdout.splitlines()
                if line.startswith(_MASTER_LEFT)]
        if left:
            LOG.warning('%d SSH master connection(s) Ansible kept for %s '
                        'did not close on the Ansible server %s (control '
                        'socket %s): they end by ControlPersist', len(left),
                        self.path, self.conn.host,
                        exceptions.clip(', '.join(left), 200))


# ------------------------------------------------------------- layout --

@dataclasses.dataclass(frozen=True)
class Layout:
    """What :func:`detect_layout` found in a kubespray checkout.

    :param facts_playbook: ``facts.yml`` (v2.21 and older) or
        ``playbooks/facts.yml`` (v2.22 and newer).
    :param has_skip_confirmation: ``remove-node.yml`` honours
        ``skip_confirmation`` (v2.17 and newer); older ones need
        ``delete_nodes_confirmation: "yes"``.
    :param version: ``git describe --tags`` of the checkout, else the
        ``version:`` of its ``galaxy.yml``, else None.  Checked against
        a request's ``kubespray.version`` (:func:`check_version`); the
        decisions above come from the files themselves.
    :param ansible_range: ``(minimal, maximal)`` Ansible versions the
        checkout's first play accepts (``ansible_version.yml``:
        minimal <= version < maximal), or None where it has no such file.
    :param ansible: the version of the server's ``ansible-playbook``
        (``2.18.19``), or None when it was not asked or did not answer.
        :func:`check_ansible` compares the two.
    """

    facts_playbook: str
    has_skip_confirmation: bool
    version: str | None = None
    ansible_range: tuple[str, str] | None = None
    ansible: str | None = None


_REQUIRED_PLAYBOOKS = ('cluster.yml', 'scale.yml', 'remove-node.yml')


def detect_layout(conn, kubespray_root, ansible_playbook=None):
    """Inspect the kubespray checkout at *kubespray_root*: one command.

    :param conn: an ``ssh.Connection`` to the Ansible server.
    :param kubespray_root: absolute path of the checkout.
    :param ansible_playbook: the command whose ``--version`` to ask, in
        the checkout (as the playbooks run), or None not to ask.
    :returns: a :class:`Layout`.
    :raises KubesprayCheckoutUnsupported: the directory is missing, a
        playbook is missing, or the checkout predates v2.16 (legacy
        group names such as ``kube-master``).
    """
    result = conn.run(programs.command(DETECT, kubespray_root)
                      + ([ansible_playbook] if ansible_playbook else []))
    return parse_layout(result.stdout, conn.host, kubespray_root)


def parse_layout(stdout, host, kubespray_root):
    """The :class:`Layout` in the output of :data:`DETECT` (or of
    :data:`OPEN`) run on *host*, as :func:`detect_layout` returns it.

    :raises KubesprayCheckoutUnsupported: as :func:`detect_layout`.
    """
    found = _markers(stdout)
    layout = _layout_from(found, _refuser(host, kubespray_root))
    LOG.info('kubespray checkout %s on %s: version %s, facts playbook %s, '
             'skip_confirmation %s', kubespray_root, host,
             layout.version or 'unknown', layout.facts_playbook,
             'supported' if layout.has_skip_confirmation else 'unknown')
    return layout


#: Longest version string kept from ``git describe`` or galaxy.yml.
_MAX_VERSION_CHARS = 64


def _markers(stdout):
    found = {'files': set(), 'flags': set(), 'git': None, 'galaxy': None,
             'ansible': None, 'minimal_ansible_version': None,
             'maximal_ansible_version': None}
    for line in stdout.splitlines():
        if not line.startswith('KS:'):
            continue
        kind, _, value = line.strip()[3:].partition(':')
        if kind == 'FILE':
            found['files'].add(value)
        elif kind in ('GIT', 'GALAXY', 'ANSIBLE'):
            # Cut: it goes into log records and messages, and the
            # checkout (or the server) may be hostile.
            found[kind.lower()] = found[kind.lower()] or \
                safetext.escape(value.strip()[:_MAX_VERSION_CHARS])
        elif kind in ('minimal_ansible_version', 'maximal_ansible_version'):
            found[kind] = _plain_version(value)
        else:
            found['flags'].add(kind)
    return found


# The first line of ``ansible-playbook --version``: ``ansible-playbook
# [core 2.18.19]`` (ansible-core), ``ansible-playbook 2.9.27`` (older).
_ANSIBLE_BANNER = re.compile(r'ansible-playbook(?: \[core | )(\d{1,4}(?:\.'
                             r'\d{1,6}){1,2})')


def _ansible_version(line):
    """The version in *line* when it is ansible-playbook's banner, else
    None: another command (a wrapper, ``true``) says nothing."""
    match = _ANSIBLE_BANNER.match(line or '')
    return match.group(1) if match else None


def _plain_version(text):
    """``2.18.0`` from ``2.18.0``, ``"2.18.0"`` or ``ansible-playbook
    [core 2.18.19]``; None for text that holds no version."""
    match = re.search(r'(?<![\d.])(\d{1,4}(?:\.\d{1,6}){1,2})(?![\d.])',
                      text[:_MAX_VERSION_CHARS])
    return match.group(1) if match else None


def _refuser(host, root):
    def refuse(reason):
        return exceptions.KubesprayCheckoutUnsupported(
            root=root, host=host, reason=reason)
    return refuse


def _layout_from(found, refuse):
    if 'MISSING' in found['flags']:
        raise refuse('the directory does not exist or is not accessible')
    version = found['git'] or found['galaxy']
    too_old = ('it predates kubespray v%d.%d, the oldest supported '
               'release' % MIN_VERSION)
    if 'LEGACY_GROUPS' in found['flags']:
        raise refuse(too_old + ' (its sample inventory uses the legacy '
                               'group kube-master)')
    parsed = _version_tuple(version)
    if parsed is not None and parsed < MIN_VERSION:
        raise refuse('%s (version %s)' % (too_old, version))
    missing = [p for p in _REQUIRED_PLAYBOOKS if p not in found['files']]
    if missing:
        raise refuse('playbook(s) %s not found; is this a kubespray '
                     'checkout of v2.16 or newer?' % ', '.join(missing))
    bounds = (found['minimal_ansible_version'],
              found['maximal_ansible_version'])
    return Layout(facts_playbook=_facts_playbook(found['files'], refuse),
                  has_skip_confirmation='SKIP_CONFIRMATION'
                  in found['flags'],
                  version=version,
                  ansible_range=bounds if all(bounds) else None,
                  ansible=_ansible_version(found['ansible']))


def _facts_playbook(files, refuse):
    # v2.22 moved the playbooks; the root facts.yml is gone since then.
    for candidate in ('playbooks/facts.yml', 'facts.yml'):
        if candidate in files:
            return candidate
    raise refuse('neither facts.yml nor playbooks/facts.yml exists')


def check_version(layout, wanted, host, root):
    """Refuse a checkout whose version is not the one a request asks for.

    :param layout: the checkout's :class:`Layout`.
    :param wanted: ``kubespray.version`` of the request (``2.27`` or
        ``2.27.0``: the parts given must match), or None for any.
    :raises KubesprayCheckoutUnsupported: another or an unknown version.
    """
    if wanted is None:
        return
    have = _version_parts(layout.version)
    want = _version_parts(wanted)
    if have is None or have[:len(want)] != want:
        raise exceptions.KubesprayCheckoutUnsupported(
            root=root, host=host,
            reason='the request asks for kubespray %s (kubespray.version) '
                   'but the checkout is %s' % (
                       wanted, layout.version or 'of unknown version (no '
                       'git tag, no galaxy.yml)'))


def check_ansible(layout, host, root, command):
    """Refuse an Ansible the checkout's first play would refuse, before
    any change: kubespray stops at its first play otherwise, after the
    operation has started.

    Nothing is refused when the checkout names no range or the server's
    version is unknown (the playbook's own check then decides).

    :param layout: the checkout's :class:`Layout`.
    :param command: the ``ansible-playbook`` command, for the message.
    :raises KubesprayCheckoutUnsupported: the version is outside the range.
    """
    if layout.ansible_range is None or layout.ansible is None:
        return
    low, high = layout.ansible_range
    have = _version_parts(layout.ansible)
    if _version_parts(low) <= have < _version_parts(high):
        return
    raise exceptions.KubesprayCheckoutUnsupported(
        root=root, host=host,
        reason='its first play accepts Ansible %s <= version < %s '
               '(ansible_version.yml) but %s there is %s; install an '
               'ansible-core in that range on the Ansible server or point '
               '[kubespray_mgmt] ansible_playbook_command at one' % (
                   low, high, command, layout.ansible))


def _version_parts(version):
    match = re.match(r'v?(\d+)\.(\d+)(?:\.(\d+))?', version or '')
    if not match:
        return None
    return tuple(int(part) for part in match.groups() if part is not None)


def _version_tuple(version):
    match = re.match(r'^v?(\d+)\.(\d+)', version or '')
    return (int(match.group(1)), int(match.group(2))) if match else None


# Where checkouts list the Kubernetes versions they support (the keys
# of kubelet_checksums), newest layout first: v2.28+, v2.24-v2.27,
# v2.23, v2.16-v2.22 (checked on those tags).
_CHECKSUM_FILES = (
    'roles/kubespray_defaults/vars/main/checksums.yml',
    'roles/kubespray-defaults/defaults/main/checksums.yml',
    'roles/download/defaults/main/checksums.yml',
    'roles/download/defaults/main.yml')
def supported_kube_versions(conn, kubespray_root):
    """The Kubernetes versions the checkout supports: one command.

    :returns: the version strings its ``kubelet_checksums`` list for
        amd64 (as written there, ``1.35.4`` or ``v1.26.5``); empty when
        no checksum file was found.
    """
    result = conn.run(programs.command(SUPPORTED, kubespray_root,
                                       *_CHECKSUM_FILES))
    return [line[len('KS:KUBE:'):] for line in result.stdout.splitlines()
            if line.startswith('KS:KUBE:')]


# ------------------------------------------------------------- recap --

# Longest counter Ansible could print; longer digit runs are not a recap
# (and int() of a huge digit string is slow, then refused).
_MAX_COUNT_DIGITS = 18
_ERROR_LINE = re.compile(r'^(fatal|failed): \[|^ERROR!|^\[ERROR\]|'
                         r'UNREACHABLE!')


def _counter(field):
    """``(name, n)`` of one ``name=n`` field of a recap line, or None."""
    name, sep, value = field.partition('=')
    if not (sep and name.isascii() and name.replace('_', '').isalnum()
            and value.isascii() and value.isdigit()
            and len(value) <= _MAX_COUNT_DIGITS):
        return None
    return name, int(value)


def recap_entry(line):
    """``(host, {counter: n})`` of one PLAY RECAP line, or None.

    A split, not a regular expression: playbook output comes from a
    host we do not trust, and the pattern used before backtracked
    exponentially (minutes on a 90-byte line such as
    ``h : a=1111=1111=...!``).  Linear in the line's length.
    """
    fields = line.split()
    if len(fields) < 3 or fields[1] != ':':
        return None
    counters = [_counter(field) for field in fields[2:]]
    if None in counters:
        return None
    return fields[0], dict(counters)


def parse_recap(output):
    """The PLAY RECAP of an ``ansible-playbook`` output.

    :param output: the playbook's standard output.
    :returns: ``{host: {'ok': n, 'changed': n, 'unreachable': n,
        'failed': n, ...}}`` with every counter Ansible printed; empty
        when the output has no recap (the run stopped before it).
    """
    lines = output.splitlines()
    starts = [i for i, line in enumerate(lines)
              if line.startswith('PLAY RECAP')]
    recap = {}
    for line in lines[starts[-1] + 1:] if starts else ():
        entry = recap_entry(line)
        if entry:
            recap[entry[0]] = entry[1]
    return recap


def _error_lines(result, keep=5, width=300):
    lines = [line.strip() for line in
             (result.stdout + '\n' + result.stderr).splitlines()
             if _ERROR_LINE.search(line.strip())]
    return [exceptions.clip(line, width) for line in lines[-keep:]]


def _output_tail(result, lines=15):
    # The recap is reported on its own; the lines before it say why, and
    # what follows it is stderr (a detached run's log has both).
    # Lines are cut: the output comes from a host we do not trust.
    before, _, after = result.stdout.partition('\nPLAY RECAP')
    kept = [line for line in before.splitlines() if line.strip()][-lines:]
    after = after.splitlines()[1:]
    kept += [line for line in after + result.stderr.splitlines()
             if line.strip() and not recap_entry(line)][-5:]
    return '\n'.join(exceptions.clip(line) for line in kept)


#: The longest playbook output line copied into the driver's log.
LOGGED_LINE_WIDTH = 500


def _run_line(playbook, host, argv, timeout):
    """The progress line that starts a run: the playbook, its limit
    (the nodes it touches) and where it runs."""
    limit = next((word for word in argv if word.startswith('--limit=')),
                 None)
    return 'running %s on %s: %s (timeout %d s)' % (
        playbook, host, limit or 'every host of the inventory', timeout)


class _Progress:
    """Feeds each output line to a callback and the useful ones to LOG."""

    def __init__(self, host, playbook, callback=None):
        self.host = host
        self.playbook = playbook
        self.callback = callback
        self.in_recap = False

    def __call__(self, line):
        if self.callback is not None:
            self.callback(line)
        if line.startswith(('PLAY [', 'TASK [', 'PLAY RECAP')):
            self.in_recap = line.startswith('PLAY RECAP')
            # Task names and recap lines come from the Ansible server:
            # the conductor log gets them clipped and escaped.
            LOG.info('%s on %s: %s', self.playbook, self.host,
                     exceptions.clip(line.rstrip('* '), LOGGED_LINE_WIDTH))
        elif self.in_recap and recap_entry(line):
            LOG.info('%s on %s: %s', self.playbook, self.host,
                     exceptions.clip(line.strip(), LOGGED_LINE_WIDTH))
        elif line.strip():
            # e.g. profile_tasks' summary: in the output, not the log.
            self.in_recap = False


# ------------------------------------------------------------- runner --

@dataclasses.dataclass(frozen=True)
class PlaybookSettings:
    """Forks, timeouts and the ansible-playbook command.

    :param timeout_base: fixed part of a playbook's timeout (s).
    :param timeout_per_node: seconds added per targeted node.
    :param forks: ``--forks``.
    :param ansible_playbook: the command on the Ansible server (a path
        into a virtualenv works).
    :param keep_logs: run logs kept in the workspace.
    :param lock_wait: seconds to wait for another run of the cluster.
    :param lock_poll: seconds between two looks at that run.
    :param max_parallel: playbook runs at once on the Ansible server
        account (0: no limit).
    :param slots: a ``detached.SlotPolicy``: how runs wait for and hold
        those slots.
    """

    timeout_base: int = 1800
    timeout_per_node: int = 600
    forks: int = 10
    ansible_playbook: str = 'ansible-playbook'
    keep_logs: int = 30
    lock_wait: int = 0
    lock_poll: int = 5
    max_parallel: int = 0
    slots: detached.SlotPolicy = detached.SlotPolicy()

    @classmethod
    def from_conf(cls, conf=None, forks=None, ansible_playbook=None):
        """Settings from ``[kubespray_mgmt]``; arguments override.

        :param forks: a request's ``kubespray.forks``, or None.
        :param ansible_playbook: a command path overriding the option
            ``ansible_playbook_command``, or None.
        """
        group = (conf or kconf.CONF).kubespray_mgmt
        return cls(timeout_base=group.playbook_timeout_base,
                   timeout_per_node=group.playbook_timeout_per_node,
                   forks=forks or group.ansible_forks,
                   ansible_playbook=ansible_playbook or
                   group.ansible_playbook_command,
                   keep_logs=group.playbook_logs_keep,
                   lock_wait=group.playbook_lock_wait,
                   lock_poll=group.playbook_lock_poll,
                   max_parallel=group.max_parallel_playbooks_per_server,
                   slots=detached.SlotPolicy(
                       wait=group.playbook_slot_wait,
                       hold_max=group.playbook_slot_hold_max,
                       lead=group.playbook_slot_priority_lead))

    def timeout_for(self, node_count):
        """``timeout_base + timeout_per_node * node_count`` seconds."""
        return self.timeout_base + self.timeout_per_node * max(
            0, int(node_count))


@dataclasses.dataclass(frozen=True)
class PlaybookRun:
    """A finished, successful playbook run.

    :param playbook: the playbook, relative to the checkout.
    :param recap: see :func:`parse_recap`.
    :param result: the ``CommandResult``.
    :param seconds: wall time of the ``ansible-playbook`` command.
    :param log: its whole log on the Ansible server.
    """

    playbook: str
    recap: dict
    result: object = dataclasses.field(repr=False)
    seconds: float = 0.0
    log: str | None = None


#: Environment of every run: plain lines, written as they come.  Each
#: run adds its workspace's own
#: (:func:`mgmt_driver.remote.isolation.playbook_env`).
PLAYBOOK_ENV = {'ANSIBLE_NOCOLOR': '1', 'PYTHONUNBUFFERED': '1'}


def run_entry(host, playbook, limit, outcome, seconds):
    """One run as ``run --output json`` lists it: ``host``, ``playbook``,
    ``limit`` (names, or None), ``log`` and ``exit_code`` (None when the
    run did not end while followed), ``seconds``, ``reused``."""
    return {'host': host, 'playbook': playbook,
            'limit': _host_names(limit, 'limit') if limit else None,
            'log': outcome.log if outcome else None,
            'exit_code': outcome.exit_code if outcome else None,
            'seconds': round(seconds, 1),
            'reused': bool(outcome and outcome.reused)}


def _removal_names(names):
    """*names* checked for ``remove-node.yml``: host names, none a
    pattern that matches every host."""
    names = _host_names(names, 'node')
    wide = _WIDE_PATTERNS.intersection(names)
    if wide:
        raise exceptions.MgmtDriverParamInvalid(
            param='node name %r (it would match every host)'
                  % sorted(wide)[0])
    return names


def _host_names(names, what):
    """*names* as a list without duplicates, each a plain host name."""
    if isinstance(names, str):
        names = [names]
    unique = list(dict.fromkeys(names))
    for name in unique:
        if not isinstance(name, str) or not _HOST_NAME.match(name):
            raise exceptions.MgmtDriverParamInvalid(
                param='%s name %r (letters, digits, ".", "_" and "-" '
                      'only)' % (what, name))
    return unique


class Runner:
    """Runs kubespray playbooks for one VNF instance.

    :param conn: an ``ssh.Connection`` to the Ansible server.
    :param kubespray_root: absolute path of the checkout (the working
        directory of every run).
    :param layout: the checkout's :class:`Layout`.
    :param workspace: the instance's :class:`Workspace`.
    :param inventory: inventory file, relative to the workspace.
    :param extra_vars_files: vars files relative to the workspace,
        passed as ``-e @file`` to every run, in this order.
    :param settings: :class:`PlaybookSettings` (default: from conf).
    :param on_progress: called with every output line, or None.
    :param operation: what runs the playbooks (a hook or command name:
        lower-case letters, digits, ``_``); names their logs.
    """

    def __init__(self, conn, kubespray_root, layout, workspace,
                 inventory='hosts.yaml',
                 extra_vars_files=('cluster-vars.yaml',), settings=None,
                 on_progress=None, operation='operation'):
        self.conn = conn
        self.root = kubespray_root
        self.layout = layout
        self.workspace = workspace
        self.inventory = workspace.file(inventory)
        self.extra_vars_files = [workspace.file(f)
                                 for f in extra_vars_files]
        self.settings = settings or PlaybookSettings.from_conf()
        self.on_progress = on_progress
        self.operation = operation
        #: Called with what a run waits for, or None when it waits no
        #: more (``detached.SlotReporter``); or None.
        self.on_wait = None
        #: Every finished run, failed ones included (``(playbook,
        #: seconds)``), so callers can tell playbook time from their own.
        self.timings = []
        #: Every run as a JSON-ready dict (:func:`run_entry`), failed
        #: ones included: what ``kubespray-mgmt run --output json`` lists.
        self.runs = []

    def timeout_for(self, node_count):
        """The timeout of a playbook that targets *node_count* nodes."""
        return self.settings.timeout_for(node_count)

    def argv(self, playbook, inventory_path, extra_vars_files=(),
             limit=None, forks=None, become=True):
        """The ``ansible-playbook`` argv (run from the checkout).

        :param limit: host names for ``--limit``, or None.
        """
        argv = [self.settings.ansible_playbook, '-i', inventory_path]
        for path in extra_vars_files:
            argv += ['-e', '@' + path]
        if become:
            argv += ['--become', '--become-user=root']
        argv += ['--forks', str(forks or self.settings.forks)]
        if limit:
            argv.append('--limit=' + ','.join(_host_names(limit, 'limit')))
        return argv + [playbook]

    def run_playbook(self, playbook, inventory_path, extra_vars_files=(),
                     limit=None, forks=None, timeout=None, become=True):
        """Run *playbook*, detached, and return its :class:`PlaybookRun`.

        The run outlives a lost connection (see
        :mod:`mgmt_driver.remote.detached`): its output is followed as it comes
        and its whole log stays on the Ansible server.

        :param playbook: path relative to the checkout.
        :param inventory_path: absolute inventory file path.
        :param extra_vars_files: absolute vars file paths (``-e @``).
        :param limit: host names for ``--limit``, or None for all.
        :param forks: ``--forks`` (default: the settings').
        :param timeout: seconds (default: ``timeout_for(0)``).
        :param become: add ``--become --become-user=root``.
        :raises PlaybookFailed: ansible-playbook exited non-zero.
        :raises PlaybookVanished: its process ended without an exit status.
        :raises PlaybookTimedOut: the run took longer than *timeout*; it
            was stopped on the Ansible server too.
        :raises ClusterBusy: another run holds the cluster's lock.
        :raises UnsafeRemotePath: another account could change the
            workspace or a directory above it.
        """
        env = dict(PLAYBOOK_ENV,
                   **isolation.playbook_env(self.workspace.path))
        argv = ['env'] + ['%s=%s' % item for item in env.items()] \
            + self.argv(playbook, inventory_path, extra_vars_files, limit,
                        forks, become)
        timeout = timeout or self.timeout_for(0)
        self._announce(playbook, argv, timeout)
        outcome, seconds = self._run_detached(playbook, argv, timeout, limit)
        return self._checked(playbook, argv, outcome, seconds)

    def _announce(self, playbook, argv, timeout):
        LOG.info('Running %s on %s (timeout %d s)', playbook,
                 self.conn.host, timeout)
        if self.on_progress is not None:
            self.on_progress(_run_line(playbook, self.conn.host, argv,
                                       timeout))

    def _run_detached(self, playbook, argv, timeout, limit):
        """``(outcome, seconds)`` of the detached run, which
        :attr:`timings` and :attr:`runs` record whatever happens."""
        runs = detached.DetachedRuns(
            self.conn, self.workspace.path, self.settings.keep_logs,
            self.settings.lock_wait,
            max_parallel=self.settings.max_parallel,
            slots=self.settings.slots, on_wait=self.on_wait,
            lock_poll=self.settings.lock_poll)
        started = time.monotonic()
        outcome = None
        try:
            outcome = runs.run(self.root, argv, self.operation, playbook,
                               timeout, _Progress(self.conn.host, playbook,
                                                  self.on_progress))
        except exceptions.RemoteCommandFailed as exc:
            # The workspace's guard refused (mgmt_driver.remote.isolation):
            # say so in a sentence, not with the whole remote program.
            refused = isolation.refusal(exc.result, self.workspace.path)
            if refused is None:
                raise
            raise refused from None
        finally:
            seconds = time.monotonic() - started
            self.timings.append((playbook, seconds))
            self.runs.append(run_entry(self.conn.host, playbook, limit,
                                       outcome, seconds))
        return outcome, seconds

    def _checked(self, playbook, argv, outcome, seconds):
        """The :class:`PlaybookRun` of a run that succeeded.

        :raises PlaybookVanished: it ended without an exit status.
        :raises PlaybookFailed: it exited non-zero.
        """
        result = ssh.CommandResult(self.conn.host, ssh.display_command(argv),
                                   outcome.tail, '',
                                   -1 if outcome.exit_code is None
                                   else outcome.exit_code)
        recap = parse_recap(result.stdout)
        if outcome.exit_code is None:
            raise exceptions.PlaybookVanished(
                playbook=playbook, host=self.conn.host, log=outcome.log,
                tail=_output_tail(result) or '(no output)')
        if result.failed:
            raise exceptions.PlaybookFailed(
                playbook, result, recap, _error_lines(result),
                _output_tail(result), log=outcome.log)
        LOG.info('%s finished on %s for %d host(s); its log: %s', playbook,
                 self.conn.host, len(recap), outcome.log)
        return PlaybookRun(playbook, recap, result, seconds, outcome.log)

    def _run(self, playbook, node_count, limit=None, vars_files=()):
        return self.run_playbook(
            playbook, self.inventory,
            self.extra_vars_files + list(vars_files), limit=limit,
            timeout=self.timeout_for(node_count))

    def cluster(self, node_count, limit=None):
        """``cluster.yml``: instantiate, or add control-plane nodes.

        :param node_count: nodes in the inventory (scales the timeout).
        :param limit: host names or groups for ``--limit``, or None.
        """
        return self._run('cluster.yml', node_count, limit)

    def facts(self, node_count, limit=None):
        """The layout's facts playbook: fills Ansible's fact cache, which
        ``--limit`` runs read for the hosts they leave out.

        :param limit: host names for ``--limit``, or None for all hosts.
        """
        return self._run(self.layout.facts_playbook, node_count, limit)

    def scale(self, new_nodes):
        """``scale.yml --limit=<new_nodes>``: join new workers only.

        :returns: the :class:`PlaybookRun`, or None when *new_nodes* is
            empty (a run without ``--limit`` would touch every node).
        """
        names = _host_names(new_nodes, 'node')
        if not names:
            LOG.info('No new node to add with scale.yml')
            return None
        return self._run('scale.yml', len(names), limit=names)

    def remove_nodes(self, names, reachable=True, extra_vars=None):
        """``remove-node.yml`` for *names*, never prompting.

        Limited to *names* and :data:`REMOVAL_GROUPS`, the hosts removal
        delegates to (drain and ``kubectl delete node`` on the first
        control-plane node, ``etcdctl member remove`` on the first etcd
        host; kubespray v2.16-v2.21 also run a play on
        ``kube_control_plane[0]``): without the limit every release
        bootstraps and gathers facts on every cluster host.

        Writes ``remove-node-vars.yaml`` (0600) into the workspace with
        ``node``, ``skip_confirmation: true`` (plus
        ``delete_nodes_confirmation: "yes"`` for checkouts without
        skip_confirmation) and, when the nodes cannot be reached,
        ``reset_nodes: false`` and ``allow_ungraceful_removal: true``,
        and :data:`DEAD_NODE_DRAIN` unless *extra_vars* sets them.

        :param names: inventory (= Kubernetes node) names.
        :param reachable: False when the nodes' VMs are gone or down.
        :param extra_vars: more vars for the same file (e.g.
            ``drain_timeout``), or None.
        :returns: the :class:`PlaybookRun`, or None for no names.
        """
        names = _removal_names(names)
        if not names:
            LOG.info('No node to remove with remove-node.yml')
            return None
        path = self._write_vars(REMOVE_VARS_FILE,
                                self._remove_vars(names, reachable,
                                                  extra_vars))
        return self._run('remove-node.yml', len(names),
                         limit=names + list(REMOVAL_GROUPS),
                         vars_files=[path])

    def removal_vars(self, names, reachable=True, extra_vars=None):
        """The ``remove-node-vars.yaml`` :meth:`remove_nodes` writes for
        the same arguments, as a :meth:`Workspace.replace` document: sent
        in the inventory's transfer, it costs :meth:`remove_nodes` no
        second one (:meth:`Workspace.upload_changed`).

        :returns: ``{name: (text, 0600)}``, empty for no names.
        :raises MgmtDriverParamInvalid: as :meth:`remove_nodes`.
        """
        names = _removal_names(names)
        if not names:
            return {}
        return {REMOVE_VARS_FILE: (self._vars_text(
            REMOVE_VARS_FILE, self._remove_vars(names, reachable,
                                                extra_vars)), 0o600)}

    def _remove_vars(self, names, reachable, extra_vars):
        values = dict(extra_vars or {})
        values.update(node=','.join(names), skip_confirmation=True)
        if not self.layout.has_skip_confirmation:
            values['delete_nodes_confirmation'] = 'yes'
        if not reachable:
            values.update(reset_nodes=False, allow_ungraceful_removal=True)
            for key, value in DEAD_NODE_DRAIN.items():
                values.setdefault(key, value)
        return values

    def reset(self, node_count):
        """``reset.yml``: wipe Kubernetes from every inventory host.

        ``reset_confirmation: "yes"`` satisfies both the prompt variable
        of v2.16-v2.22 (compared with "yes") and the flag of v2.23+
        (``| bool``); ``skip_confirmation: true`` skips v2.23+'s pause.
        """
        path = self._write_vars(RESET_VARS_FILE, {
            'reset_confirmation': 'yes', 'skip_confirmation': True})
        return self._run('reset.yml', node_count, vars_files=[path])

    def upgrade(self, names, serial=None):
        """``upgrade-cluster.yml --limit=<names>``: upgrade those nodes.

        ``kube_version`` comes from the cluster vars; kubespray upgrades
        the control-plane nodes of the limit one at a time and the
        workers in batches of ``serial`` (its default: 20 %).  The hosts
        the limit leaves out need cached facts.

        :param names: inventory (= Kubernetes node) names.
        :param serial: the batch size (``3`` or ``'25%'``), or None.
        :returns: the :class:`PlaybookRun`, or None for no names.
        """
        names = _host_names(names, 'node')
        if not names:
            LOG.info('No node to upgrade with upgrade-cluster.yml')
            return None
        values = {} if serial is None else {'serial': serial}
        path = self._write_vars(UPGRADE_VARS_FILE, values)
        return self._run('upgrade-cluster.yml', len(names), limit=names,
                         vars_files=[path])

    def _write_vars(self, name, values):
        return self.workspace.upload_changed(
            {name: self._vars_text(name, values)})[0]

    @staticmethod
    def _vars_text(name, values):
        text = yaml.safe_dump(values, default_flow_style=False,
                              sort_keys=False)
        return inventory.check_inert(name, text)
