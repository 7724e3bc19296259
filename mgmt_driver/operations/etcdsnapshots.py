"""etcd snapshots kept off the masters, in the instance's workspace.

Not in the design's layout: a day-2 capability gets its own module
(STYLE).  kubespray v2.31.0 backs etcd up only on the etcd hosts
themselves (``roles/etcd/handlers/backup.yml``: ``etcdctl snapshot
save`` into ``etcd_backup_prefix``, ``/var/backups``, when etcd
restarts), so a lost control plane loses its backups with it.  Here a
snapshot is taken the same way on the first control-plane node that
can (kubespray's ``etcdctl.sh`` wrapper, which passes the client
certificate and key by path: no secret is on a command line), streamed
to ``<workspace>/etcd-snapshots/`` on the Ansible server (directory
0700, files 0600), and deleted from the master; the newest
``etcd_snapshot_keep`` are kept within ``etcd_snapshot_max_total_mb``.

:func:`before_risky` is the one call an operation that can lose the
control plane (an upgrade, the heal of a control-plane node) makes
before its first change: a failed snapshot stops it there, unless
``etcd_snapshot_before_risky`` is false.  :func:`take` is the on-demand
snapshot, :func:`listing` what ``status`` shows.  Restoring is an etcd
disaster recovery, documented in README.rst ("etcd snapshots").

Names are ``etcd-<UTC time>-<reason>.db``; the listing of the Ansible
server is remote data, parsed line by line with a strict pattern.
"""

import dataclasses
import datetime
import posixpath
import re

from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.remote import plan
from mgmt_driver.remote import programs

#: The workspace directory of the snapshots.
SNAPSHOT_DIR = 'etcd-snapshots'
#: The programs (``mgmt_driver/remote/scripts/``) that list the snapshots on
#: the Ansible server and save one on a master.
LIST_PROGRAM = 'etcd-snapshots'
SAVE_PROGRAM = 'etcd-snapshot-save'
#: Permission bits of the directory and of each snapshot.
DIR_MODE = 0o700
FILE_MODE = 0o600
#: What the save script prints before the snapshot's path.
_SAVED = 'KS:SNAPSHOT:'
_SAVED_PATH = re.compile(r'/[A-Za-z0-9._/-]{1,4000}/kubespray-mgmt-etcd\.'
                         r'[A-Za-z0-9]{6,16}/snapshot\.db')
_REASON = re.compile(r'[a-z0-9][a-z0-9-]{0,31}')
_NAME = re.compile(r'etcd-([0-9]{8}T[0-9]{6}Z)-(' + _REASON.pattern +
                   r')\.db')
_LINE = re.compile(r'([0-9]{1,15}) (\S{1,80})')
#: A partial copy ``ssh.Connection.copy_to`` could not remove.
_PARTIAL = re.compile(r'\.(etcd-[^/]{1,60}\.db)\.[0-9a-f]{8}\.tmp')
#: Snapshots listed at most (the listing is remote data).
MAX_LISTED = 10000

#: What one master's failed attempt may raise: the next one is tried.
_ATTEMPT_ERRORS = (exceptions.MgmtDriverOtherError,
                   exceptions.MgmtDriverRemoteCommandError,
                   exceptions.MgmtDriverRemoteCommandTimeOut)


@dataclasses.dataclass(frozen=True)
class Settings:
    """The ``etcd_snapshot_*`` options (:mod:`mgmt_driver.common.conf`)."""

    before_risky: bool = True
    keep: int = 3
    max_bytes: int = 8192 * 1024 * 1024
    timeout: int = 600
    tmp_dir: str = '/tmp'
    etcdctl: str = '/usr/local/bin/etcdctl.sh'
    sudo: str = 'auto'

    @classmethod
    def from_conf(cls, conf=None):
        group = (conf or kconf.CONF).kubespray_mgmt
        return cls(group.etcd_snapshot_before_risky, group.etcd_snapshot_keep,
                   group.etcd_snapshot_max_total_mb * 1024 * 1024,
                   group.etcd_snapshot_timeout, group.etcd_snapshot_tmp_dir,
                   group.etcdctl_command, group.kubectl_sudo)


# ------------------------------------------------------------ pure --

def check_reason(text, field):
    """A snapshot's reason (part of its name): lower case letters,
    digits and ``-``, 32 at most.

    :raises ParamsInvalid: naming *field*.
    """
    if not isinstance(text, str) or not _REASON.fullmatch(text):
        raise exceptions.ParamsInvalid([
            '%s: must be 1 to 32 lower case letters, digits or "-" '
            '(starting with a letter or digit), not %s' % (
                field, repr(text)[:40])])
    return text


def snapshot_name(when, reason):
    """``etcd-<YYYYmmddTHHMMSSZ>-<reason>.db`` for *when* (UTC)."""
    return 'etcd-%s-%s.db' % (when.strftime('%Y%m%dT%H%M%SZ'), reason)


def parse_name(name):
    """``(time, reason)`` of a snapshot file name, or None."""
    match = _NAME.fullmatch(name)
    return match and (match.group(1), match.group(2))


def parse_listing(text):
    """The snapshots of ``etcd-snapshots.sh``'s output, oldest first:
    ``[{name, time, reason, bytes, partial}]``; other lines are skipped.

    A partial copy (a transfer failed and its temporary file could not
    be removed) is listed with ``partial`` true, so that it is seen and
    pruned; it sorts by the snapshot it was to become.
    """
    found = []
    for line in text.splitlines()[-MAX_LISTED:]:
        match = _LINE.fullmatch(line)
        partial = match and _PARTIAL.fullmatch(match.group(2))
        parsed = match and parse_name(partial.group(1) if partial
                                      else match.group(2))
        if parsed:
            found.append({'name': match.group(2), 'time': parsed[0],
                          'reason': parsed[1], 'partial': bool(partial),
                          'bytes': int(match.group(1))})
    return sorted(found, key=lambda s: s['name'].lstrip('.'))


def to_prune(snapshots, keep, max_bytes):
    """Names of the snapshots to delete: every partial copy, and all
    but the newest *keep* whose sizes add up to *max_bytes* at most (the
    newest is kept even alone past it: it was accepted when it was
    copied).

    :param snapshots: as :func:`parse_listing` returns them.
    """
    kept, total = 0, 0
    doomed = []
    for snapshot in reversed(snapshots):
        if snapshot.get('partial'):
            doomed.append(snapshot['name'])
            continue
        total += snapshot['bytes']
        if kept and (kept >= keep or total > max_bytes):
            doomed.append(snapshot['name'])
        else:
            kept += 1
    return doomed


def parse_saved(text, host):
    """The path the save script printed.

    :raises RemoteDataInvalid: no such line.
    """
    for line in text.splitlines():
        if line.startswith(_SAVED) and _SAVED_PATH.fullmatch(
                line[len(_SAVED):]):
            return line[len(_SAVED):]
    raise exceptions.RemoteDataInvalid(
        host=host, what='etcd snapshot script output',
        problem='no "%s<path>" line' % _SAVED)


# ---------------------------------------------------------- remote --

def directory_of(workspace_path):
    """Where an instance's snapshots are on the Ansible server."""
    return posixpath.join(workspace_path, SNAPSHOT_DIR)


def listing(conn, directory):
    """The snapshots in *directory* on the Ansible server, oldest first
    (reads only)."""
    result = conn.run(programs.command(LIST_PROGRAM, directory))
    return parse_listing(result.stdout)


def prepare(conn, directory):
    """Make *directory* (in the existing workspace), mode 0700 even if
    it was there."""
    conn.run(['install', '-d', '-m', '%o' % DIR_MODE, '--', directory])


def take(drv, cluster, reason, exclude=(), pin=False):
    """Take an etcd snapshot on the first control-plane node of
    *cluster* that can, keep it in the workspace and prune the old ones.

    :param drv: the operation's
    :class:`mgmt_driver.session.driver.ClusterDriver`.
    :param reason: the name's last part (:func:`check_reason`).
    :param exclude: names of masters not to ask (a healed one).
    :param pin: keep it from pruning until :func:`finished` (the
        snapshot before a risky operation's first change).
    :returns: ``{name, path, directory, bytes, host, pruned}`` of the snapshot
        kept (a dry run: ``name``, ``path`` and ``bytes`` None, as the
        name is the time the snapshot is taken).
    :raises MgmtDriverOtherError: no master could take one; says why,
        for each.
    """
    check_reason(reason, 'reason')
    settings = Settings.from_conf(drv.conf)
    workspace = drv.workspace()
    directory = directory_of(workspace.path)
    prepare(workspace.conn, directory)
    name = snapshot_name(datetime.datetime.now(datetime.timezone.utc),
                         reason)
    failures = []
    for node in [n for n in cluster.masters if n.name not in set(exclude)]:
        try:
            kept = _take_on(drv, node, settings, workspace.conn,
                            posixpath.join(directory, name))
        except _ATTEMPT_ERRORS as exc:
            reason_text = exceptions.plain_message(exc)
            drv.warn('no etcd snapshot from %s: %s', node.name, reason_text)
            failures.append('%s: %s' % (node.name, reason_text))
            continue
        if pin and kept['name']:
            _pin(drv, reason, kept['name'])
        kept['pruned'] = _prune(drv, workspace.conn, directory, settings)
        return kept
    raise exceptions.MgmtDriverOtherError(
        error_message='no etcd snapshot could be taken: %s' % (
            '; '.join(failures) or 'no control-plane node to ask'))


def _take_on(drv, node, settings, target, path):
    conn = drv.connection(node)
    username = drv.spec.master.login.username
    sudo = ['sudo', '-n'] if kconf.use_sudo(settings.sudo, username) else []
    result = conn.run(sudo + programs.command(
        SAVE_PROGRAM, settings.etcdctl, username, settings.tmp_dir),
        timeout=settings.timeout, check=False)
    if result.failed:
        raise exceptions.MgmtDriverOtherError(
            error_message='%s snapshot save on %s failed (exit code %d): %s'
                          % (settings.etcdctl, conn.host, result.exit_code,
                             result.tail(5) or '(no output)'))
    directory = posixpath.dirname(path)
    if isinstance(drv.pool, plan.PlanPool):
        drv.step('(dry run) a new snapshot would be copied to %s:%s',
                 target.host, directory)
        return {'name': None, 'path': None, 'directory': directory,
                'bytes': None, 'host': conn.host}
    saved = parse_saved(result.stdout, conn.host)
    try:
        size = conn.copy_to(saved, target, path, FILE_MODE,
                            settings.max_bytes)
    except exceptions.RemoteFileTooLarge:
        raise exceptions.MgmtDriverOtherError(
            error_message='the etcd snapshot on %s is larger than '
                          'etcd_snapshot_max_total_mb (%d MiB): not kept'
                          % (conn.host, settings.max_bytes // 1024 // 1024)
        ) from None
    finally:
        conn.run(['rm', '-rf', '--', posixpath.dirname(saved)], check=False)
    drv.step('etcd snapshot %s (%d bytes, from %s) kept on %s',
             posixpath.basename(path), size, node.name, target.host)
    return {'name': posixpath.basename(path), 'path': path,
            'directory': directory, 'bytes': size, 'host': conn.host}


def _prune(drv, conn, directory, settings):
    """Delete what :func:`to_prune` names, but the pinned snapshots,
    and say which.  :returns: the names deleted."""
    pinned = dict(drv.read_record(PINNED_RECORD, parse_pinned))
    snapshots = listing(conn, directory)
    held = [s['name'] for s in snapshots if s['name'] in pinned]
    if held:
        drv.step('keeping etcd snapshot(s) %s: taken before an unfinished '
                 '%s (kept until it finishes)', ', '.join(held),
                 ', '.join(sorted({pinned[n] for n in held})))
    doomed = to_prune([s for s in snapshots if s['name'] not in pinned],
                      settings.keep, settings.max_bytes)
    if doomed:
        drv.step('deleting older etcd snapshot(s) (etcd_snapshot_keep = '
                 '%d, etcd_snapshot_max_total_mb): %s', settings.keep,
                 ', '.join(doomed))
        conn.run(['rm', '-f', '--'] + [posixpath.join(directory, n)
                                       for n in doomed])
    return doomed


#: The workspace record of the snapshots taken before a risky
#: operation's first change while it is unfinished: ``<operation>
#: <name>`` a line.  Pruning keeps them until :func:`finished`.
PINNED_RECORD = 'etcd-snapshots-pinned.txt'
#: Pinned snapshots remembered at most.
MAX_PINNED = 16


def parse_pinned(text):
    """``[(name, operation)]`` of :data:`PINNED_RECORD` ([] when absent).

    :raises ValueError: a line is not ``<operation> <snapshot name>``
        (the message names no value).
    """
    found = []
    for line in (text or '').splitlines()[:MAX_PINNED]:
        words = line.split()
        if len(words) != 2 or not _REASON.fullmatch(words[0]) or \
                not parse_name(words[1]):
            raise ValueError('not "<operation> <snapshot name>" lines')
        found.append((words[1], words[0]))
    return found


def _write_pinned(drv, pinned):
    drv.write_record(PINNED_RECORD, ''.join(
        '%s %s\n' % (operation, name) for name, operation in pinned))


def _pin(drv, operation, name):
    pinned = drv.read_record(PINNED_RECORD, parse_pinned)
    _write_pinned(drv, (pinned + [(name, operation)])[-MAX_PINNED:])


def finished(drv, operation):
    """*operation* (``upgrade``, ``heal``) finished: its snapshots are
    pruned as any other from now on."""
    pinned = drv.read_record(PINNED_RECORD, parse_pinned)
    if any(op == operation for _, op in pinned):
        _write_pinned(drv, [(n, op) for n, op in pinned if op != operation])


#: Where a whole-VNF heal keeps the snapshots while the workspace is
#: deleted and made again: beside it, ``<workspace>`` + this.
ASIDE_SUFFIX = '.etcd-snapshots'


def _move(conn, source, names, target):
    conn.run(['install', '-d', '-m', '%o' % DIR_MODE, '--', target])
    conn.run(['mv', '-f', '--'] + [posixpath.join(source, n)
                                   for n in names] + [target + '/'])


def set_aside(drv):
    """Before the workspace is deleted for a whole-VNF heal: move its
    snapshots beside it (:data:`ASIDE_SUFFIX`), for :func:`bring_back`.

    :returns: the names moved.
    """
    workspace = drv.workspace()
    directory = directory_of(workspace.path)
    names = [s['name'] for s in listing(workspace.conn, directory)
             if not s['partial']]
    if names:
        aside = workspace.path + ASIDE_SUFFIX
        _move(workspace.conn, directory, names, aside)
        drv.step('kept %d etcd snapshot(s) out of the workspace while it is '
                 'made again: %s:%s', len(names), workspace.conn.host, aside)
    return names


def bring_back(drv):
    """After a whole-VNF heal made the workspace again: move back what
    :func:`set_aside` kept.

    :returns: the names moved back.
    """
    workspace = drv.workspace()
    aside = workspace.path + ASIDE_SUFFIX
    names = [s['name'] for s in listing(workspace.conn, aside)
             if not s['partial']]
    if names:
        _move(workspace.conn, aside, names, directory_of(workspace.path))
        workspace.conn.run(['rm', '-rf', '--', aside])
        drv.step('etcd snapshot(s) back in the workspace: %s',
                 ', '.join(names))
    return names


#: The workspace record of the last on-demand snapshot asked through
#: Tacker's metadata (:data:`METADATA_KEY`): its tag.
REQUEST_RECORD = 'etcd-snapshot-request.txt'
#: The metadata key of a PATCH that asks for a snapshot: a tag
#: (:func:`check_reason`), which ends the snapshot's name.
METADATA_KEY = 'etcd_snapshot'


def parse_request_record(text):
    """The tag of :data:`REQUEST_RECORD`, or None when it is absent.

    :raises ValueError: not one tag (the message names no value).
    """
    if text is None:
        return None
    tag = text.strip()
    if not _REASON.fullmatch(tag):
        raise ValueError('not a snapshot tag')
    return tag


def requested(drv, cluster, tag):
    """The snapshot a PATCH's metadata asks for with *tag*, once: Tacker
    keeps the metadata, so every later PATCH carries the same tag, and
    only a new tag takes a new snapshot.

    :returns: what :func:`take` returns, or None (*tag* was done).
    """
    check_reason(tag, METADATA_KEY)
    if drv.read_record(REQUEST_RECORD, parse_request_record) == tag:
        drv.step('etcd snapshot %s: already taken', tag)
        return None
    taken = take(drv, cluster, tag)
    drv.workspace().upload({REQUEST_RECORD: tag + '\n'})
    return taken


def before_risky(drv, cluster, operation, exclude=()):
    """The snapshot an operation that can lose the control plane takes
    before its first change, unless ``etcd_snapshot_before_risky`` is
    false (then a warning says there is none).  Pruning keeps it until
    the operation calls :func:`finished`.

    :param operation: names the snapshot and the messages (``upgrade``,
        ``heal``).
    :returns: what :func:`take` returns, or None.
    :raises MgmtDriverOtherError: no snapshot could be taken; the
        operation changed nothing.
    """
    if not Settings.from_conf(drv.conf).before_risky:
        drv.warn('no etcd snapshot before the %s: '
                 'etcd_snapshot_before_risky is false', operation)
        return None
    try:
        return take(drv, cluster, operation, exclude, pin=True)
    except _ATTEMPT_ERRORS as exc:
        raise exceptions.MgmtDriverOtherError(
            error_message='the %s was not started, nothing was changed: '
                          '%s (etcd_snapshot_before_risky = false goes '
                          'on without one)' % (
                              operation, exceptions.plain_message(exc))
        ) from None
