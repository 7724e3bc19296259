"""The errors this package raises.

Every class derives from one of Tacker's MgmtDriver exceptions (or its
stand-in, see :mod:`mgmt_driver.common.tacker_compat`), so Tacker stores the
message on the failed LCM operation, and fills its own message template
from keyword arguments.  Tacker's ``MgmtDriverRemoteCommandError`` drops
its detail; :class:`RemoteCommandFailed` keeps host, command and output
tail in the message.  No message ever contains a password, key or token.

Every text that fills a message is escaped and bounded on the way in
(:class:`_Bounded`, with :mod:`mgmt_driver.common.safetext`): a message may
quote a hostile host's output, never carry its control sequences or
its megabytes.
"""

import re

from mgmt_driver.common import safetext
from mgmt_driver.common import tacker_compat

#: The most characters one keyword argument of a message keeps: a last
#: bound for any text a message quotes; what quotes remote output bounds
#: it much tighter itself (:func:`clip`, :func:`clip_list`).
FIELD_WIDTH = 32000

clip = safetext.clip
clip_list = safetext.clip_list


def _bounded(value, width=FIELD_WIDTH):
    """*value* escaped (newlines kept: a tail is lines) and, when
    longer than *width*, cut to its start and end."""
    if not isinstance(value, str):
        return value
    if len(value) <= width:
        value = safetext.escape(value, keep='\n')
        if len(value) <= width:
            return value
    head = safetext.escape(value[:width // 4], keep='\n')[:width // 4]
    tail = safetext.escape(value[width // 4 - width:], keep='\n')
    return head + ' [...] ' + tail[width // 4 - width:]



#: What Ansible's become plugins report when sudo wants another password
#: ("Missing sudo password", "Incorrect sudo password").
_BECOME_FAILURE = re.compile(r'\b(Missing|Incorrect) [\w.-]{1,40} password\b')
BECOME_HINT = ('sudo on the hosts asks a password Ansible was not given, or '
               'not this one: set become_password (default: the login '
               'password) in master_node / worker_node, and '
               'passwordless_sudo: true only for NOPASSWD users')


def become_hint(lines):
    """:data:`BECOME_HINT` when the error *lines* of a playbook say sudo wanted
    a password, else ''."""
    return BECOME_HINT if any(_BECOME_FAILURE.search(line) for line in lines) \
        else ''


class _Bounded:
    """Mixin of every exception of this package: each text that fills
    the message template is escaped and bounded (:func:`_bounded`), so
    no message Tacker stores or logs carries a remote host's ESC
    sequences or megabytes, whichever code raised it."""

    def __init__(self, message=None, **kwargs):
        kwargs = {key: _bounded(value) for key, value in kwargs.items()}
        #: The bounded fields (:func:`plain_message` words them again).
        self.fields = dict(kwargs)
        if message:
            kwargs['message'] = _bounded(message)
        super().__init__(**kwargs)


def is_driver_error(exc):
    """True for an exception of this package: its message was written
    for whoever asked for the operation (bounded, escaped, no secret,
    no path of the conductor host the request did not name)."""
    return isinstance(exc, _Bounded)


def plain_message(exc):
    """The message of *exc* for someone who runs the driver without
    Tacker (``kubespray-mgmt``).

    Tacker's own templates frame a bare field for Tacker's users ("The
    X in the additionalParams is invalid.", "An error occurred in
    MgmtDriver: X."); a command-line user gave no additionalParams and
    called no MgmtDriver.  Exceptions with their own template keep it.
    """
    fields = getattr(exc, 'fields', None) or {}
    template = getattr(type(exc), 'message', None)
    for base, field, wording in _TACKER_TEMPLATES:
        if template == base.message and set(fields) == {field}:
            return wording % fields[field]
    return str(exc)


class MgmtDriverOtherError(_Bounded, tacker_compat.MgmtDriverOtherError):
    """Tacker's ``MgmtDriverOtherError``, its fields bounded."""


class MgmtDriverParamInvalid(_Bounded,
                             tacker_compat.MgmtDriverParamInvalid):
    """Tacker's ``MgmtDriverParamInvalid``, its fields bounded."""


class MgmtDriverNotFound(_Bounded, tacker_compat.MgmtDriverNotFound):
    """Tacker's ``MgmtDriverNotFound``, its fields bounded."""


class MgmtDriverRemoteCommandError(
        _Bounded, tacker_compat.MgmtDriverRemoteCommandError):
    """Tacker's ``MgmtDriverRemoteCommandError``, its fields bounded."""


class MgmtDriverRemoteCommandTimeOut(
        _Bounded, tacker_compat.MgmtDriverRemoteCommandTimeOut):
    """Tacker's ``MgmtDriverRemoteCommandTimeOut``, its fields bounded."""


#: Tacker's templates that only frame one field, and the wording of
#: :func:`plain_message` instead.
_TACKER_TEMPLATES = (
    (tacker_compat.MgmtDriverOtherError, 'error_message', '%s'),
    (tacker_compat.MgmtDriverParamInvalid, 'param', 'invalid %s'),
    (tacker_compat.MgmtDriverNotFound, 'param', 'not found: %s'))


class SSHConnectError(MgmtDriverOtherError):
    """The host could not be reached over SSH, retries included."""

    message = ('SSH connection to %(host)s:%(port)s failed after '
               '%(attempts)s attempt(s): %(reason)s')


class SSHAuthError(MgmtDriverOtherError):
    """The host refused our credentials."""

    message = ('SSH authentication as %(user)s to %(host)s:%(port)s '
               'failed: %(reason)s')


class HostKeyUnknown(MgmtDriverOtherError):
    """The ``reject`` policy met a host key it does not know."""

    message = ('Unknown SSH host key %(fingerprint)s for %(host)s:%(port)s; '
               'host_key_policy is "reject". Verify the key and add it to '
               '%(known_hosts)s (for example with "ssh-keyscan -p %(port)s '
               '%(host)s"), or set [kubespray_mgmt] host_key_policy = '
               'accept-new')


class HostKeyNotRecorded(HostKeyUnknown):
    """A read-only command (``status``, ``logs``) met a host key the
    driver has not recorded: it records none itself, whatever
    ``host_key_policy`` says."""

    message = ('Unknown SSH host key %(fingerprint)s for %(host)s:%(port)s: '
               'status and logs record no host key and trust only those in '
               '%(known_hosts)s, which the driver records while it builds '
               'or changes the cluster and forgets when it terminates it. '
               'If the VM is not the cluster\'s (terminated, or built from '
               'another host), there is nothing to read; else verify the '
               'key and add it (ssh-keyscan -p %(port)s %(host)s)')


class HostKeyChanged(MgmtDriverOtherError):
    """The host presented a key other than the one recorded for it."""

    message = ('SSH host key of %(host)s:%(port)s has CHANGED (now '
               '%(fingerprint)s, recorded %(expected)s in %(known_hosts)s). '
               'This can be a man-in-the-middle attack. If the VM was '
               're-created, remove the old entry with '
               '"ssh-keygen -R \'%(entry)s\' -f %(known_hosts)s" and retry')


class RemoteCommandFailed(MgmtDriverRemoteCommandError):
    """A remote command exited non-zero; carries its :class:`CommandResult`.

    :param result: the ``CommandResult`` of the failed command.
    :param tail_lines: how many output lines the message keeps.
    """

    message = ('Command "%(command)s" on %(host)s failed with exit code '
               '%(exit_code)s: %(tail)s')

    def __init__(self, result, tail_lines=20):
        self.result = result
        super().__init__(command=result.command, host=result.host,
                         exit_code=result.exit_code,
                         tail=result.tail(tail_lines) or '(no output)')


class DrainBlocked(RemoteCommandFailed):
    """``kubectl drain`` failed because PodDisruptionBudgets refused
    the evictions (HTTP 429) until its timeout; names the budgets.

    :param node: the node drained.
    :param budgets: the budgets, as one clipped text.
    """

    message = ('Draining node %(node)s failed: PodDisruptionBudget '
               '%(budgets)s allows no disruption, so its pods cannot be '
               'evicted (make the budget allow one, e.g. scale the '
               'workload up, then run the operation again). Command '
               '"%(command)s" on %(host)s exited %(exit_code)s: %(tail)s')

    def __init__(self, result, node, budgets):
        self.result = result
        super(RemoteCommandFailed, self).__init__(
            command=result.command, host=result.host,
            exit_code=result.exit_code, node=node, budgets=budgets,
            tail=result.tail(8) or '(no output)')


class RemoteCommandTimedOut(MgmtDriverRemoteCommandTimeOut):
    """A remote command ran past its timeout; carries the partial result."""

    message = ('Command "%(command)s" on %(host)s timed out after '
               '%(timeout)s s: %(tail)s')

    def __init__(self, result, timeout):
        self.result = result
        self.timeout = timeout
        super().__init__(command=result.command, host=result.host,
                         timeout=timeout,
                         tail=result.tail(20) or '(no output)')


class RemoteFileError(MgmtDriverOtherError):
    """A file transfer to or from a host failed."""

    message = '%(action)s %(path)s on %(host)s failed: %(reason)s'


class CsarError(MgmtDriverParamInvalid):
    """A CSAR cannot be built from its source (see :mod:`csar`)."""

    message = 'CSAR build failed: %(reason)s'


def with_advice(exc, advice):
    """*exc* with *advice* (what the operator should do next) appended
    to its message, which Tacker records as the operation's error.

    :returns: *exc*, to be raised.
    """
    if advice:
        exc.msg = '%s %s' % (str(exc).rstrip(), advice)
        exc.args = (exc.msg,)
    return exc


class _ParamsProblems:
    """Mixin: every problem of one request, reported together.

    :param problems: ``'<field path>: <problem>'`` strings; never a
        secret value.  Kept as ``.problems``; the message lists the first
        :attr:`SHOWN` (a hostile request can have a problem per key).
    """

    message = '%(count)s problem(s) in the input: %(problems)s'
    SHOWN = 50

    def __init__(self, problems):
        self.problems = list(problems)
        shown = self.problems[:self.SHOWN]
        if len(self.problems) > self.SHOWN:
            shown.append('and %d more' % (len(self.problems) - self.SHOWN))
        super().__init__(count=len(self.problems),
                         problems='; '.join(shown))


class ParamsInvalid(_ParamsProblems, MgmtDriverParamInvalid):
    """At least one field is invalid (some may also be missing)."""


class ParamsNotFound(_ParamsProblems, MgmtDriverNotFound):
    """Every problem is a missing field."""


class LoadBalancerLayoutInvalid(MgmtDriverParamInvalid):
    """The node set or ports cannot make a valid HAProxy configuration."""

    message = 'Invalid load balancer layout: %(reason)s'


class LoadBalancerConfigInvalid(MgmtDriverOtherError):
    """``haproxy -c`` (or ``keepalived -t``) refused a new configuration;
    nothing was applied.

    :param result: the ``CommandResult`` of the check command.
    :param path: where the refused file was checked.
    :param program: the program whose configuration it is.
    """

    message = ('%(program)s refused the new configuration on %(host)s '
               '(checked as %(path)s); the running configuration is '
               'unchanged: %(detail)s')

    def __init__(self, result, path, program='HAProxy'):
        self.result = result
        self.path = path
        super().__init__(host=result.host, path=path, program=program,
                         detail=_haproxy_detail(result))


def _haproxy_detail(result, lines=20):
    """HAProxy's own complaint: its output without the [NOTICE] banner."""
    text = result.stderr + '\n' + result.stdout
    kept = [clip(line) for line in text.splitlines()
            if line.strip() and not line.startswith('[NOTICE]')]
    return '\n'.join(kept[-lines:]) or result.tail(lines) or '(no output)'


class GatewaysFailed(MgmtDriverOtherError):
    """Configuring some gateways of a VRRP group failed.

    :param failures: ``{gateway name: exception}``.
    :param total: how many gateways were configured.
    """

    message = ('%(count)s of %(total)s gateway(s) could not be configured '
               '(the others were): %(errors)s')

    def __init__(self, failures, total):
        self.failures = failures
        super().__init__(count=len(failures), total=total, errors='; '.join(
            '%s: %s' % (name, clip(str(exc)))
            for name, exc in sorted(failures.items())))


#: Host names a playbook error lists (its recap may name thousands).
SHOWN_HOSTS = 50


def _hint(text):
    return ' (%s)' % text if text else ''


class PlaybookFailed(MgmtDriverRemoteCommandError):
    """``ansible-playbook`` exited non-zero on the Ansible server.

    :param playbook: the playbook, relative to the kubespray checkout.
    :param result: the ``CommandResult`` of the run.
    :param recap: ``{host: {'ok': n, 'failed': n, ...}}`` from PLAY RECAP.
    :param errors: the ``fatal:``/``ERROR!`` lines of the output.
    :param tail: the last lines of the output.
    """

    message = ('ansible-playbook %(playbook)s on %(host)s failed with exit '
               'code %(exit_code)s; failed hosts: %(failed)s; unreachable '
               'hosts: %(unreachable)s; errors: %(errors)s%(hint)s; output '
               'tail: %(tail)s%(log_text)s')

    def __init__(self, playbook, result, recap, errors, tail, log=None):
        self.playbook = playbook
        self.result = result
        self.recap = recap
        self.log = log
        self.failed_hosts = sorted(
            h for h, c in recap.items() if c.get('failed'))
        self.unreachable_hosts = sorted(
            h for h, c in recap.items() if c.get('unreachable'))
        super().__init__(
            playbook=playbook, host=result.host, exit_code=result.exit_code,
            failed=clip_list(self.failed_hosts, SHOWN_HOSTS) or 'none',
            unreachable=clip_list(self.unreachable_hosts,
                                  SHOWN_HOSTS) or 'none',
            errors=' | '.join(errors) or 'none', tail=tail or '(no output)',
            hint=_hint(become_hint(errors)),
            log_text='; its whole log on %s: %s' % (result.host, log)
            if log else '')


class PlaybookVanished(MgmtDriverRemoteCommandError):
    """A detached playbook run ended without an exit status (its process
    was killed, or the Ansible server restarted)."""

    message = ('ansible-playbook %(playbook)s on %(host)s ended without an '
               'exit status (its process was killed or the server '
               'restarted); run the operation again; its log: %(log)s; '
               'output tail: %(tail)s')


class PlaybookTimedOut(MgmtDriverRemoteCommandTimeOut):
    """A detached playbook run outlived its timeout and was stopped."""

    message = ('ansible-playbook %(playbook)s on %(host)s ran longer than '
               'its timeout of %(timeout)s s and was stopped there; its '
               'log: %(log)s')


class PlaybookSlotTimedOut(MgmtDriverRemoteCommandTimeOut):
    """A detached run waited for a playbook slot of the Ansible server
    for as long as its bound, and never ran."""

    message = ('ansible-playbook %(playbook)s did not start on %(host)s: '
               'it waited %(timeout)s s (%(setting)s) for one of the '
               '%(limit)s playbook slots of the server '
               '(max_parallel_playbooks_per_server), taken by other runs or '
               'promised to runs queued before it; nothing was changed, '
               'run the operation again later or raise the limit')


class HookDeadlineExceeded(MgmtDriverRemoteCommandTimeOut):
    """The hook used up its wall-clock bound (``hook_deadline``) while
    it waited; it stopped there, its locks and slots released."""

    message = ('%(operation)s stopped after its bound of %(seconds)s s '
               '(option %(setting)s) while waiting on %(what)s; every lock '
               'and playbook slot it held is released; run the operation '
               'again')


class SharedFileBusy(MgmtDriverOtherError):
    """Another process held the lock of a shared local file (records,
    known hosts) past ``shared_file_lock_wait``."""

    message = ('%(path)s stayed locked by another process for %(wait)s s '
               '(shared_file_lock_wait); nothing was changed, run the '
               'operation again')


class ClusterBusy(MgmtDriverOtherError):
    """Another playbook run holds the cluster's lock on the Ansible
    server."""

    message = ('Another playbook run holds this cluster\'s lock on the '
               'Ansible server %(host)s: %(holder)s; its log: %(log)s. '
               'Wait for it to end (kubespray-mgmt logs --follow shows '
               'it) and run the operation again')


class KubesprayCheckoutUnsupported(MgmtDriverOtherError):
    """The kubespray checkout is missing, incomplete or too old."""

    message = ('The kubespray checkout %(root)s on %(host)s cannot be used: '
               '%(reason)s')


class FactsUnavailable(MgmtDriverOtherError):
    """Unreachable hosts have no valid entry in Ansible's fact cache.

    kubespray's ``--limit`` runs need the cached facts of every host they
    leave out, and facts cannot be gathered from a host that is down.
    """

    message = ('Cannot run a limited kubespray playbook: %(hosts)s '
               'unreachable and without valid cached facts on the Ansible '
               'server %(host)s (kubespray needs them for every host a '
               '--limit run leaves out). Bring the node(s) back, or heal '
               'or scale them in first, or declare them absent '
               '(additionalParams absent_nodes, kubespray-mgmt --absent), '
               'then retry.')


class UpgradeGateClosed(MgmtDriverOtherError):
    """An upgrade's preflight, or its check between two steps, found the
    cluster unfit to go on (:mod:`mgmt_driver.operations.gates`).

    :param stage: ``preflight (nothing was changed)`` or the step after
        which it stopped.
    :param problems: every problem found, as one clipped text.
    :param advice: what to do next.
    """

    message = ('Upgrade stopped at %(stage)s: %(problems)s. %(advice)s')


class EtcdNotReady(MgmtDriverOtherError):
    """etcd would refuse removing a member (too few members that stay
    are started and connected long enough), and did not get ready
    within the wait (:mod:`mgmt_driver.operations.etcdwait`).

    :param problems: the members not ready, as one clipped text.
    :param changed: what the operation had changed before (a sentence).
    """

    message = ('The %(operation)s stopped before removing the etcd '
               'member(s) of %(nodes)s: etcd was not ready after '
               '%(waited)s s (%(option)s = %(limit)s): %(problems)s. '
               '%(changed)s etcd refuses a member removal unless the members '
               'that stay are started and have been connected for '
               '%(interval)s s; make them healthy (or raise %(option)s) and '
               'run the same %(operation)s again.')


class UnsafeRemotePath(MgmtDriverParamInvalid):
    """A remote path the driver would create, write or delete is unsafe."""

    message = 'Refusing the remote path "%(path)s": %(reason)s'


class WaitTimedOut(MgmtDriverRemoteCommandTimeOut):
    """A polled state was not reached before its deadline."""

    message = ('Gave up after %(timeout)s s waiting on %(host)s for '
               '%(what)s: %(detail)s')


class NoReachableHost(MgmtDriverOtherError):
    """None of the candidate hosts could run a command."""

    message = 'No host could run %(what)s; tried %(tried)s'


class VimNameInUse(MgmtDriverParamInvalid):
    """The VIM name belongs to a VIM this VNF instance did not register."""

    message = ('The %(param)s in the additionalParams is invalid: a VIM '
               'named %(name)s already exists and was not registered by '
               'this VNF instance; choose another vim_name')


class InstanceRecordInvalid(MgmtDriverOtherError):
    """The driver's local record of a VNF instance cannot be used."""

    message = ('The driver\'s record %(path)s of VNF instance %(instance)s '
               'cannot be used: %(reason)s. Check it, or move it away if '
               'this instance owns nothing')


class Refusal:
    """Mixin: refused before anything changed, for a reason the operator
    fixes here (an option, a state directory, a name): to Tacker the
    error its base class says; ``kubespray-mgmt`` exits 1, as for bad
    input (``cli.CODES_BY_ERROR``)."""


class StateStoreUnusable(Refusal, MgmtDriverOtherError):
    """This conductor's state store is not the shared one
    (:mod:`mgmt_driver.state.statestore`)."""

    message = ('The driver\'s state store on this conductor is not the one '
               'shared by every tacker-conductor, so nothing was changed: '
               '%(reason)s. Mount the shared state directory here (or fix '
               'the options), check with "kubespray-mgmt state check", and '
               'run the operation again')


class InstanceStateMissing(Refusal, MgmtDriverOtherError):
    """An operation needs state of the instance this store does not
    have (:mod:`mgmt_driver.state.statestore`)."""

    message = ('%(operation)s of VNF instance %(instance)s needs what its '
               'instantiate recorded, and this conductor does not have '
               '%(missing)s, so nothing was changed (going on would leave '
               'a VIM, host keys or half a cluster behind). Point '
               '%(option)s at the state directory shared by every '
               'tacker-conductor ("kubespray-mgmt state check" tells) and '
               'run the operation again')


class InstanceBusy(MgmtDriverOtherError):
    """Another operation of the instance holds its state lock."""

    message = ('Another operation of VNF instance %(instance)s holds its '
               'state lock (%(holder)s), so %(operation)s changed nothing '
               'after waiting %(wait)s s ([kubespray_mgmt] '
               'state_lock_wait). Run it again once that one has ended')


class EveryMasterHealed(Refusal, MgmtDriverOtherError):
    """A heal named every control-plane node (refused before any step)."""

    message = ('cannot heal every control-plane node at once; heal the '
               'whole VNF instead (Tacker: a heal request without '
               'vnfcInstanceId; kubespray-mgmt: run heal without --nodes)')


class RunLogNotFound(Refusal, RemoteFileError):
    """The playbook log asked for does not exist (no workspace, no run,
    or no run of that name): nothing to show."""


class RemoteOutputTooLarge(MgmtDriverRemoteCommandError):
    """A remote command printed more than the driver keeps; it was stopped.

    :param host: the host it ran on.
    :param command: its shell form (shortened).
    :param stream: ``stdout`` or ``stderr``.
    :param limit: the cap in bytes.
    """

    message = ('Command "%(command)s" on %(host)s printed more than '
               '%(limit)s bytes on %(stream)s and was stopped (limit: '
               '[kubespray_mgmt] max_command_output)')


class RemoteFileTooLarge(MgmtDriverOtherError):
    """A file read back from a host is larger than the driver accepts."""

    message = ('%(path)s on %(host)s is larger than %(limit)s bytes and '
               'was not read (limit: [kubespray_mgmt] max_remote_file_size)')


class RemoteDataInvalid(MgmtDriverOtherError):
    """What a host sent back is not what the driver expects.

    :param host: the host that sent it.
    :param what: what it is (``kubectl get nodes output``, a file path).
    :param problem: what is wrong; never the data itself in bulk, and
        never a token.
    """

    message = 'Invalid %(what)s from %(host)s: %(problem)s'


class TemplatedText(MgmtDriverOtherError):
    """A rendered Ansible document holds text Ansible would evaluate as a
    Jinja2 template (a mapping key with "{", or a string with "{" not
    tagged ``!unsafe``); it is never uploaded.

    :param document: the document's name in the inventory directory.
    :param what: which kind of text (never the text itself).
    :param path: where in the document.
    """

    message = ('Refusing to upload %(document)s: %(what)s at %(path)s holds '
               '"{", which Ansible would evaluate as a Jinja2 template on '
               'the Ansible server')
