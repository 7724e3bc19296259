"""The errors this package raises.

Every class derives from one of Tacker's MgmtDriver exceptions (or its
stand-in, see :mod:`mgmt_driver.tacker_compat`), so Tacker stores the
message on the failed LCM operation, and fills its own message template
from keyword arguments.  Tacker's ``MgmtDriverRemoteCommandError`` drops
its detail; :class:`RemoteCommandFailed` keeps host, command and output
tail in the message.  No message ever contains a password, key or token.
"""

from mgmt_driver import tacker_compat

MgmtDriverOtherError = tacker_compat.MgmtDriverOtherError
MgmtDriverParamInvalid = tacker_compat.MgmtDriverParamInvalid
MgmtDriverNotFound = tacker_compat.MgmtDriverNotFound
MgmtDriverRemoteCommandError = tacker_compat.MgmtDriverRemoteCommandError
MgmtDriverRemoteCommandTimeOut = tacker_compat.MgmtDriverRemoteCommandTimeOut


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
