"""Playbook runs that outlive the SSH connection that started them.

A module of its own (not in DESIGN's list; it is the part of "runs
playbooks on the Ansible server" that keeps a run alive): on real clouds
``cluster.yml`` runs for up to an hour, longer than a conductor can be
trusted to keep one SSH session open.  So each run is started on the
Ansible server in a session of its own (``setsid``), writes its output to
a log file in the instance's workspace and its exit status to a file
beside it, and the driver follows the log.  A lost connection is then no
longer a failure: the driver reconnects with backoff and reads on from
the last line it had, until the run's deadline.

Files in the workspace (mode 0600, directory ``logs/`` 0700)::

    run.lock                     flock(1)ed by the running run, and only
                                 by it: the kernel drops the lock when
                                 its process ends, so a lock is never
                                 stale, only its description may be
    run.info                     the last run: id, stem, operation,
                                 playbook, owner (a random name, see
                                 :func:`owner`), started, pid
    logs/<stem>.log              its whole output
    logs/<stem>.rc               its exit status, once it ended
    logs/<stem>.seen             a driver collected that exit status

``<stem>`` is ``<UTC time>-<operation>-<playbook>``, e.g.
``20261123T230501Z-instantiate_end-cluster``.  A run's *id* is a hash of
its operation, its argv and every input file in the workspace, so a hook
run again after its conductor died recognises its own playbook: still
running, it is followed (not started twice); finished successfully and
never collected, it is not run again.  Any other run holding the lock
makes the new one wait (``playbook_lock_wait``) and then refuse.  Older
logs are pruned (``playbook_logs_keep``).

Several workspaces and conductors share one Ansible server account: a
run takes one of ``max_parallel_playbooks_per_server`` slots
(:data:`SLOT_DIR`) before ``ansible-playbook`` starts, and waits in its
log while all are taken, for at most ``playbook_slot_wait`` (and never
past the hook's deadline; :class:`SlotReporter` turns the wait into
progress).  Waiting runs queue: each holds a ticket in
:data:`QUEUE_DIR` named by its place, the order of arrival moved back by
``playbook_slot_priority_lead`` per priority class behind the first
(:func:`priority_class`: heal, then scale-out, then the rest), and only
the first live ticket takes a free slot.  A run holds its slot for at
most ``playbook_slot_hold_max``, whatever the size of the request.

Every byte read back (markers, ``run.info``) is untrusted: lines are
parsed strictly and cut, fields are checked before they are used in a
command.
"""

import dataclasses
import datetime
import hashlib
import math
import os
import re
import secrets
import socket
import time

from mgmt_driver.common import deadline as deadlines
from mgmt_driver.common import exceptions
from mgmt_driver.common import safetext
from mgmt_driver.common import untrusted
from mgmt_driver.remote import programs
from mgmt_driver.remote import ssh

LOG = safetext.logger(__name__)

LOG_DIR = 'logs'
#: The playbook slots of the Ansible server account, under its home:
#: ``slot-1`` .. ``slot-N`` (N = ``max_parallel_playbooks_per_server``),
#: each flock(1)ed by the run that holds it, shared by every workspace
#: and every conductor that logs in as that account.
SLOT_DIR = '.kubespray-mgmt/playbook-slots'
#: The queue of runs waiting for a slot: one ticket per waiter, named
#: ``<place: arrival second + rank, 12 digits>.<nanoseconds>.<pid>``
#: (sorted by name, first served first) and flock(1)ed by its waiter
#: while it waits (a ticket nobody holds is a gone waiter's, deleted by
#: the next waiter that meets it); it holds ``key=value`` lines: arrived,
#: operation, playbook, workspace.
QUEUE_DIR = SLOT_DIR + '/queue'
#: The priority classes of the queue, first served first.
PRIORITY_CLASSES = ('heal', 'scale-out', 'other')
_CAPACITY_OPERATIONS = ('scale_end', 'scale_out', 'instantiate_end',
                        'instantiate')
RUN_INFO = 'run.info'
RUN_LOCK = 'run.lock'

#: Exit statuses of timeout(1) when it stopped the command.
_TIMEOUT_CODES = (124, 137)

#: Bytes of a run's log read back to parse its recap and errors.
TAIL_BYTES = 256 * 1024

# Markers: "KR:<KIND>[:<value>]" lines.
_MARKER = 'KR:'
_INFO_KEYS = ('id', 'stem', 'operation', 'playbook', 'owner', 'started',
              'pid')
# A run's name: <UTC time>-<operation>-<playbook stem> (fullmatch only).
_STEM = re.compile(r'([0-9]{8}T[0-9]{6}Z)-([a-z0-9_]{1,40})-'
                   r'([A-Za-z0-9_.-]{1,60})')
_TOKEN = re.compile(r'[a-z0-9_]{1,40}')
_MAX_VALUE = 200

# The programs (mgmt_driver/remote/scripts/NAME.sh; each enters the workspace
# "$1" only after isolation's guard found no other account able to change
# it or the directories above it).
#: The run lock, peeked at while the workspace is made ready: one command.
ENSURE = 'ensure-workspace'
START = 'run-start'
FOLLOW = 'run-follow'
END = 'run-end'
STOP = 'run-stop'
#: Delete a workspace, first stopping the run that holds its lock.
REMOVE = 'remove-workspace'
SHOW = 'run-show'
#: Every program of this module, which a dry run recognises.
PROGRAMS = (ENSURE, START, FOLLOW, END, STOP, REMOVE, SHOW)


@dataclasses.dataclass(frozen=True)
class RunInfo:
    """What ``run.info`` says of a run (untrusted: checked fields).

    :param stem: ``<time>-<operation>-<playbook>``, or None.
    :param pid: the run's process (session) id on the Ansible server.
    """

    id: str = ''
    stem: str | None = None
    operation: str = '?'
    playbook: str = '?'
    owner: str = '?'
    started: str = '?'
    pid: int | None = None

    @classmethod
    def parse(cls, lines):
        """The info from ``key=value`` lines; malformed values dropped."""
        values = {}
        for line in lines:
            key, sep, value = line.partition('=')
            if sep and key in _INFO_KEYS and key not in values:
                values[key] = ''.join(
                    ch for ch in value[:_MAX_VALUE] if ch.isprintable())
        pid = values.pop('pid', '')
        stem = values.pop('stem', '')
        return cls(pid=untrusted.whole_number(pid, 9),
                   stem=stem if _STEM.fullmatch(stem) else None,
                   **values)

    def describe(self):
        return '%s of %s, started %s by %s (pid %s)' % (
            self.playbook, self.operation, self.started, self.owner,
            self.pid if self.pid is not None else 'unknown')


def priority_class(operation):
    """The index in :data:`PRIORITY_CLASSES` of *operation*'s runs:
    work that restores capacity (a heal, then a scale-out or an
    instantiation) before work that can wait."""
    if operation.startswith('heal'):
        return 0
    return 1 if operation in _CAPACITY_OPERATIONS else 2


def log_path(workspace_path, stem):
    """The log file of run *stem* in the workspace."""
    return '%s/%s/%s.log' % (workspace_path, LOG_DIR, stem)


def _markers(stdout):
    """``[(kind, value)]`` of the marker lines of *stdout*."""
    found = []
    for line in stdout.splitlines():
        if line.startswith(_MARKER):
            kind, _, value = line[len(_MARKER):].partition(':')
            found.append((kind, value.rstrip('\r')))
    return found


def busy_holder(stdout):
    """The :class:`RunInfo` of the run holding the lock, or None, from
    the output of :data:`ENSURE` (``scripts/ensure-workspace.sh``)."""
    found = _markers(stdout)
    if ('BUSY', '') not in found:
        return None
    return RunInfo.parse(v for k, v in found if k == 'INFO')


def wait_while_busy(peek, accept, lock_wait, host, workspace_path,
                    poll, progress=None, sleep=time.sleep,
                    clock=time.monotonic):
    """Call *peek* until no other run holds the cluster's lock.

    :param peek: returns the :class:`RunInfo` of the run holding the
        lock, or None when it is free (it may act when free).
    :param accept: ``(RunInfo)`` -> True when that run is no obstacle
        (e.g. the same operation's).
    :param lock_wait: seconds to wait at most.
    :param poll: seconds between two calls (``playbook_lock_poll``).
    :param progress: called with a line each time it waits.
    :returns: what *peek* returned last.
    :raises ClusterBusy: still held after *lock_wait* seconds.
    """
    began = clock()
    while True:
        holder = peek()
        if holder is None or accept(holder):
            return holder
        log = log_path(workspace_path, holder.stem) if holder.stem \
            else '(unknown)'
        if clock() - began >= lock_wait:
            raise exceptions.ClusterBusy(host=host, holder=holder.describe(),
                                         log=log)
        (progress or LOG.info)('waiting for the run holding the cluster\'s '
                               'lock on %s to end: %s; its log: %s'
                               % (host, holder.describe(), log))
        sleep(poll)


def last_run(conn, workspace_path):
    """The :class:`RunInfo` of the workspace's last run (its ``stem``
    None when there is no workspace or no run)."""
    found = _markers(conn.run(programs.command(SHOW, workspace_path,
                                               '')).stdout)
    return RunInfo.parse(v for k, v in found if k == 'INFO')


def show_log(conn, workspace_path, on_line, stem=None, follow=False,
             timeout=86400):
    """Send the log of the last run (or of run *stem*) to *on_line*.

    :param follow: go on until the run ends, as ``tail -f``.
    :returns: the log's path.
    :raises RunLogNotFound: no workspace, no run, or no such run.
    """
    if stem is not None and not _STEM.fullmatch(stem):
        raise exceptions.MgmtDriverParamInvalid(
            param='run %r (a log name such as 20261123T230501Z-'
                  'scale_end-scale)' % stem)
    found = _markers(conn.run(programs.command(SHOW, workspace_path,
                                               stem or '')).stdout)
    info = RunInfo.parse(v for k, v in found if k == 'INFO')
    stem = stem or info.stem
    if stem is None:
        raise exceptions.RunLogNotFound(
            action='show the playbook log in', path=workspace_path,
            host=conn.host, reason='no workspace there' if ('NOWS', '')
            in found else 'no playbook run recorded yet')
    pid = info.pid if follow and info.stem == stem and info.pid else 0
    result = conn.run(programs.command(FOLLOW, workspace_path, stem, '1',
                                       str(pid)), timeout=timeout, check=False,
                      on_line=on_line, keep_tail=True)
    if result.exit_code == 93:
        raise exceptions.RunLogNotFound(
            action='show the playbook log', path=log_path(
                workspace_path, stem), host=conn.host, reason='no such run')
    return log_path(workspace_path, stem)


def plan_text(command):
    """How a dry run shows *command* if it is one of this module's
    programs (known by :func:`mgmt_driver.remote.programs.name_of`): the start
    as ``(detached, log in WS/logs/) cd ROOT && ARGV`` (ending with the
    playbook), the workspace's removal as ``rm -rf -- WS``, following and
    ending a run as None (not shown); other commands as False."""
    name = programs.name_of(command)
    if name == START:
        ws, root, argv = command[4], command[5], command[15:]
        return '(detached, log in %s/%s/) cd %s && %s' % (
            ws, LOG_DIR, ssh.quote(root), ssh.display_command(argv))
    if name == REMOVE:
        return ('rm -rf -- %s  # after stopping its playbook run and its '
                'SSH masters, if any' % ssh.quote(command[4]))
    if name in PROGRAMS and name != ENSURE:
        return None
    return False


def parse_stem(stem):
    """``(time, operation, playbook)`` of a run's name, or None.

    :param stem: a log's name without ``.log``, such as
        ``20261123T230501Z-scale_start-remove-node`` (time as
        ``2026-11-23T23:05:01Z``); anything else, or an impossible
        date, gives None.
    """
    match = _STEM.fullmatch(stem)
    if not match:
        return None
    try:
        when = datetime.datetime.strptime(match.group(1), '%Y%m%dT%H%M%SZ')
    except ValueError:
        return None
    return (when.strftime('%Y-%m-%dT%H:%M:%SZ'), match.group(2),
            match.group(3))


def owner():
    """An opaque name for who starts a run, for the lock's record.

    Random for each run: the Ansible server may be the tenant's, and
    nothing there needs the conductor's host name or process id (the
    lock is flock(1)'s, a run started again is recognised by its id).
    :meth:`DetachedRuns.run` logs the name on the conductor beside that
    host and process, so an operator who reads it in a "cluster busy"
    message finds the conductor that started the run.
    """
    return 'run-' + secrets.token_hex(6)


def _printable(text):
    return ''.join(ch if ch.isprintable() else '?' for ch in text)


def slot_timed_out(tail):
    """Whether a run's log says it never got a playbook slot."""
    return any(kind == 'SLOTTIMEOUT' for kind, _ in _markers(tail))


class SlotReporter:
    """Turns a run's slot markers into progress lines; passes the rest.

    The run writes ``KR:SLOTWAIT:<limit>`` when it finds every slot of
    the Ansible server taken (then once a minute while it waits) and
    ``KR:SLOT:<slot>:<seconds waited>`` when it got one after waiting.
    Waiting is progress, not failure: it is logged and handed on to
    *on_line* as a sentence.

    :param host: the Ansible server.
    :param on_line: the caller's line callback, or None.
    :param on_wait: called with what the run waits for (a sentence)
        when it starts waiting for a slot, and with None once it has
        one; or None.
    """

    def __init__(self, host, on_line, on_wait=None):
        self.host = host
        self.on_line = on_line
        self.on_wait = on_wait
        self._waiting = False

    def __call__(self, line):
        kind, value = (_markers(line) or [(None, '')])[0]
        if kind == 'SLOTWAIT':
            line = ('waiting for a playbook slot on %s: %s running '
                    '(max_parallel_playbooks_per_server)'
                    % (self.host, exceptions.clip(value, 12)))
            LOG.info('%s', line)
            self._note_wait(line)
        elif kind == 'SLOT':
            slot, _, waited = value.partition(':')
            line = ('got playbook slot %s on %s after %s s' % (
                exceptions.clip(slot, 12), self.host,
                exceptions.clip(waited, 12)))
            LOG.info('%s', line)
            self._note_wait(None)
        if self.on_line is not None:
            self.on_line(line)

    def _note_wait(self, line):
        if self.on_wait is None or self._waiting == (line is not None):
            return
        self._waiting = line is not None
        self.on_wait(None if line is None else
                     'a playbook slot on %s since %s' % (self.host,
                                                         _utc_now()))


def _utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime(
        '%Y-%m-%dT%H:%M:%SZ')


def _token(value, what):
    if not _TOKEN.fullmatch(value):
        raise exceptions.MgmtDriverParamInvalid(
            param='%s %r (lower-case letters, digits and "_")' % (what,
                                                                  value))
    return value


class Interrupted(KeyboardInterrupt):
    """Ctrl-C while following a run: the run itself goes on, detached.

    :param host: the Ansible server.
    :param playbook: the playbook running there.
    :param log: its log file there.
    """

    def __init__(self, host, playbook, log):
        super().__init__(host, playbook, log)
        self.host, self.playbook, self.log = host, playbook, log

    def __str__(self):
        return ('%s goes on on the Ansible server %s (it runs detached); '
                'its log: %s' % (self.playbook, self.host, self.log))


@dataclasses.dataclass
class Outcome:
    """How a detached run ended.

    :param exit_code: its exit status, or None when its process ended
        without one (killed, server restarted).
    :param tail: the end of its log (``TAIL_BYTES`` at most).
    :param log: the log file on the Ansible server.
    :param reused: it had already finished successfully (a hook run
        again after its conductor died): not run again.
    """

    exit_code: int | None
    tail: str
    log: str
    reused: bool = False


@dataclasses.dataclass(frozen=True)
class SlotPolicy:
    """How runs wait for and hold playbook slots (``[kubespray_mgmt]``).

    :param wait: seconds a run waits for a slot (``playbook_slot_wait``).
    :param hold_max: seconds a run may hold one
        (``playbook_slot_hold_max``): its timeout is cut to it.
    :param lead: seconds of head start per priority class
        (``playbook_slot_priority_lead``).
    """

    wait: int = 3600
    hold_max: int = 21600
    lead: int = 3600


@dataclasses.dataclass(frozen=True)
class _Bounds:
    """One run's bounds in seconds: its own *timeout*, its *wait* for
    a slot, what is *left* of the hook, its *rank* in the queue, and the
    setting that bounded the wait."""

    timeout: int
    wait: int
    left: float
    rank: int
    wait_setting: str


class DetachedRuns:
    """Starts and follows playbook runs in one workspace.

    :param conn: an ``ssh.Connection`` to the Ansible server.
    :param workspace_path: the instance's workspace (absolute, checked).
    :param keep_logs: how many run logs to keep.
    :param lock_wait: seconds to wait for another run to end.
    :param lock_poll: seconds between two looks at that run.
    :param sleep: the sleep function (tests).
    :param clock: a monotonic clock (tests).
    :param max_parallel: playbook runs the Ansible server account runs at
        once, for every workspace (0: no limit); see :data:`SLOT_DIR`.
    :param slots: a :class:`SlotPolicy` (default: its defaults).
    :param on_wait: see :class:`SlotReporter`.
    """

    #: Seconds past a run's timeout before the driver stops it itself.
    grace = 15.0
    #: Longest pause between two reconnection attempts.
    max_backoff = 30.0

    def __init__(self, conn, workspace_path, keep_logs=30, lock_wait=0,
                 sleep=time.sleep, clock=time.monotonic, max_parallel=0,
                 slots=None, on_wait=None, lock_poll=5):
        self.conn = conn
        self.on_wait = on_wait
        self.workspace = workspace_path
        self.keep_logs = int(keep_logs)
        self.lock_wait = lock_wait
        self.lock_poll = lock_poll
        self.max_parallel = int(max_parallel)
        self.slots = slots or SlotPolicy()
        #: The hook's deadline (the connection carries it).
        self.deadline = getattr(conn, 'deadline', None) or \
            deadlines.unbounded()
        self._sleep = sleep
        self._clock = clock

    def run(self, root, argv, operation, playbook, timeout, on_line=None):
        """Run *argv* in *root*, detached, and follow it to its end.

        :param operation: the hook or command (``scale_end``): names the
            log and is part of the run's id.
        :param playbook: the playbook, for the log's name and messages.
        :param timeout: seconds; the run is stopped on the Ansible server
            when it takes longer.
        :param on_line: called with each output line as it comes.
        :returns: an :class:`Outcome`.
        :raises ClusterBusy: another run held the lock past
            ``lock_wait``.
        :raises PlaybookTimedOut: the run outlived *timeout*.
        :raises PlaybookSlotTimedOut: it waited *timeout* seconds for a
            playbook slot and never ran.
        :raises UnsafeRemotePath: the slot directory is not safe.
        :raises Interrupted: Ctrl-C while following the run (it goes on).
        """
        began = self._clock()
        bounds = self._bounds(operation, playbook, timeout)
        # The run's own timeout(1) normally stops it first, and its exit
        # status says so; the grace covers a run that outlives even that.
        # A wait for a slot (max_parallel) has a bound of its own.  The
        # hook's deadline caps the whole.
        deadline = began + min(bounds.timeout + self.grace + bounds.wait,
                               bounds.left)
        started = self._start(root, argv, _token(operation, 'operation'),
                              playbook, bounds, deadline)
        if isinstance(started, Outcome):
            return started
        stem, pid = started
        try:
            return self._follow_to_end(stem, pid, began, deadline, playbook,
                                       bounds, on_line)
        except exceptions.HookDeadlineExceeded:
            # A wait of the following found no time left: the run must
            # not go on holding its slot and the cluster's lock.
            self._stop(stem, pid)
            raise
        except KeyboardInterrupt:
            # Only the following stops: the run is detached, so say
            # where it goes on.
            raise Interrupted(self.conn.host, playbook,
                              log_path(self.workspace, stem)) from None

    def _bounds(self, operation, playbook, timeout):
        """The :class:`_Bounds` of one run: its own, cut by the slot
        policy and by what is left of the hook."""
        where = ' on %s' % self.conn.host
        deadline = self.deadline
        wait = 0
        if self.max_parallel:
            timeout = min(timeout, self.slots.hold_max)
            wait = deadline.bound(self.slots.wait,
                                  'a playbook slot' + where)
        return _Bounds(
            timeout=math.ceil(deadline.bound(timeout, playbook + where)),
            wait=math.ceil(wait), left=deadline.remaining(),
            rank=self.slots.lead * priority_class(operation),
            wait_setting='playbook_slot_wait' if wait >= self.slots.wait
            else deadline.setting)

    def _follow_to_end(self, stem, pid, began, deadline, playbook, bounds,
                       on_line):
        lines = 0
        if on_line is not None:  # where to follow it from elsewhere
            on_line('log: %s on %s' % (log_path(self.workspace, stem),
                                       self.conn.host))
        on_line = SlotReporter(self.conn.host, on_line, self.on_wait)
        while True:
            lines, timed_out = self._follow(stem, pid, deadline, on_line,
                                            lines + 1)
            outcome = self._end(stem, pid, deadline)
            if outcome is not None and outcome.exit_code == 124 and \
                    slot_timed_out(outcome.tail):
                raise exceptions.PlaybookSlotTimedOut(
                    playbook=playbook, host=self.conn.host,
                    timeout=bounds.wait, limit=self.max_parallel,
                    setting=bounds.wait_setting)
            if outcome is not None and not (
                    outcome.exit_code in _TIMEOUT_CODES and
                    self._clock() - began >= bounds.timeout - 1):
                return outcome
            if outcome is not None or timed_out or \
                    self._clock() >= deadline:
                self._stop(stem, pid)
                if self._clock() - began >= bounds.left - 1:
                    # Stopped for the hook's deadline rather than its own.
                    raise self.deadline.error('%s on %s' % (
                        playbook, self.conn.host))
                raise exceptions.PlaybookTimedOut(
                    playbook=playbook, host=self.conn.host,
                    timeout=bounds.timeout,
                    log=log_path(self.workspace, stem))

    # Starting.

    def _start(self, root, argv, operation, playbook, bounds, deadline):
        book = re.sub(r'[^A-Za-z0-9_.-]', '_',
                      playbook.rsplit('/', 1)[-1])
        book = book[:-4] if book.endswith('.yml') else book
        key = hashlib.sha256('\0'.join(
            [operation] + list(argv)).encode('utf-8')).hexdigest()[:32]
        who = owner()
        LOG.info('Starting %s on %s as %s (this is %s, pid %d)', playbook,
                 self.conn.host, who, socket.gethostname(), os.getpid())
        command = programs.command(START, self.workspace, root, operation,
                                   book[:60], key, str(bounds.timeout),
                                   who, str(self.keep_logs),
                                   str(self.max_parallel), str(bounds.wait),
                                   str(bounds.rank))
        answers = []

        def attempt():
            found = _markers(self._retrying(
                lambda: self.conn.run(command + list(argv)).stdout,
                deadline, 'start ' + playbook))
            if ('BUSY', '') in found:
                return RunInfo.parse(v for k, v in found if k == 'INFO')
            answers.append(found)
            return None

        wait_while_busy(attempt, lambda holder: False, self.lock_wait,
                        self.conn.host, self.workspace, self.lock_poll,
                        sleep=self._sleep, clock=self._clock)
        found = answers[-1]
        kinds = dict(found)
        info = RunInfo.parse(v for k, v in found if k == 'INFO')
        prev = RunInfo.parse(v for k, v in found if k == 'PREV')
        self._raise_if_no_slots(found)
        if 'MISSING' in kinds:
            raise exceptions.RemoteFileError(
                action='start a detached run in', path=self.workspace,
                host=self.conn.host,
                reason='%s is not installed on the Ansible server '
                       '(coreutils and util-linux are needed)'
                       % kinds['MISSING'][:40])
        if 'DONE' in kinds and prev.stem:
            return self._reuse(prev, playbook)
        if 'ATTACH' in kinds and info.stem and info.pid:
            LOG.warning('%s is already running on %s for the same '
                        'operation and inputs (%s): following it instead '
                        'of starting it again; its log: %s', playbook,
                        self.conn.host, info.describe(),
                        log_path(self.workspace, info.stem))
            return info.stem, info.pid
        return self._started(kinds, prev, playbook)

    def _raise_if_no_slots(self, found):
        """Refuse when the slot directory cannot be used safely."""
        kinds = dict(found)
        if 'NOHOME' in kinds or 'SLOTUNSAFE' in kinds:
            where, _, why = kinds.get('SLOTUNSAFE', '').rpartition(':')
            raise exceptions.UnsafeRemotePath(
                path='~/' + SLOT_DIR, reason='%s on %s: the playbook slots '
                '(max_parallel_playbooks_per_server) need a home directory '
                'only root and this account can write; set the option to '
                '0 to run without them' % (
                    '%s %s' % (exceptions.clip(_printable(where), 200),
                               exceptions.clip(_printable(why), 120))
                    if where else 'HOME is not an absolute path',
                    self.conn.host))

    def _started(self, kinds, prev, playbook):
        stem, _, pid = kinds.get('STARTED', '').partition(':')
        # pid 0 is no process of the run (a signal to -0 is to our own).
        if not (_STEM.fullmatch(stem)
                and (untrusted.whole_number(pid, 9) or 0) > 0):
            raise exceptions.RemoteDataInvalid(
                what='answer to starting %s' % playbook,
                host=self.conn.host,
                problem='it names no valid run and pid (%r)'
                        % kinds.get('STARTED', '')[:80])
        if 'STALE' in kinds:
            LOG.warning('Recovered the lock of an earlier run on %s whose '
                        'process is gone without an exit status (%s); its '
                        'log: %s', self.conn.host, prev.describe(),
                        log_path(self.workspace, prev.stem))
        elif 'PREVRC' in kinds and kinds['PREVRC'] != '0' and prev.stem:
            LOG.info('The previous run on %s (%s) had ended with exit '
                     'status %s', self.conn.host, prev.describe(),
                     kinds['PREVRC'][:8])
        LOG.info('%s started on %s, detached (pid %s); its log: %s',
                 playbook, self.conn.host, pid,
                 log_path(self.workspace, stem))
        return stem, int(pid)

    def _reuse(self, prev, playbook):
        log = log_path(self.workspace, prev.stem)
        LOG.warning('%s already ran to its end on %s with these inputs '
                    'while no driver was following it (%s): not running '
                    'it again; its log: %s', playbook, self.conn.host,
                    prev.describe(), log)
        tail = self.conn.run(['tail', '-c', str(TAIL_BYTES), '--', log],
                             check=False, keep_tail=True).stdout
        return Outcome(0, tail, log, reused=True)

    # Following.

    def _retrying(self, call, deadline, what):
        """*call*, again after a lost connection, until *deadline*."""
        attempt = 0
        while True:
            try:
                return call()
            except exceptions.SSHConnectError as exc:
                attempt += 1
                pause = min(self.max_backoff, 2.0 ** (attempt - 1))
                if self._clock() + pause >= deadline:
                    raise
                LOG.warning('Lost the connection to %s (%s) during "%s"; '
                            'the playbook goes on there. Reconnecting in '
                            '%.0f s (attempt %d)', self.conn.host, exc,
                            what, pause, attempt)
                self.conn.close()
                self._sleep(pause)

    def _follow(self, stem, pid, deadline, on_line, first_line):
        """Stream the log from *first_line* until the run's process ends.

        :returns: ``(lines read in all, whether the deadline came)``.
        """
        seen = [first_line - 1]

        def count(line):
            seen[0] += 1
            if on_line is not None:
                on_line(line)

        def once():
            remaining = deadline - self._clock()
            if remaining <= 0:
                return True
            self.conn.run(programs.command(FOLLOW, self.workspace, stem,
                                           str(seen[0] + 1), str(pid)),
                          timeout=remaining, check=False, on_line=count,
                          keep_tail=True)
            return False

        try:
            return seen[0], self._retrying(once, deadline, 'follow ' + stem)
        except exceptions.RemoteCommandTimedOut:
            return seen[0], True

    def _end(self, stem, pid, deadline):
        """The :class:`Outcome`, or None while the run goes on."""
        stdout = self._retrying(
            lambda: self.conn.run(
                programs.command(END, self.workspace, stem, str(pid),
                                 str(TAIL_BYTES)), keep_tail=True).stdout,
            deadline + 60, 'read the end of ' + stem)
        head, _, tail = stdout.partition('\n%sTAIL\n' % _MARKER)
        kinds = dict(_markers(head))
        log = log_path(self.workspace, stem)
        if 'RC' in kinds:
            code = untrusted.whole_number(kinds['RC'].strip(), 5)
            return Outcome(255 if code is None else code, tail, log)
        if 'GONE' in kinds:
            return Outcome(None, tail, log)
        return None

    def _stop(self, stem, pid):
        LOG.warning('Stopping the playbook run %s on %s (pid %s): past its '
                    'deadline', stem, self.conn.host, pid)
        try:
            with self.deadline.cleanup():
                result = self.conn.run(programs.command(
                    STOP, self.workspace, stem, str(pid)), check=False)
            if 'KR:NOTOURS:' in result.stdout:
                LOG.warning('Did not stop pid %s on %s: it is not the run '
                            '%s any more', pid, self.conn.host, stem)
        except (exceptions.MgmtDriverOtherError,
                exceptions.MgmtDriverRemoteCommandError,
                exceptions.MgmtDriverRemoteCommandTimeOut) as exc:
            LOG.warning('Could not stop %s on %s: %s (its own timeout '
                        'stops it)', stem, self.conn.host, exc)
