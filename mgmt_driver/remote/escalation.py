"""Root on a VM for the driver's own commands: sudo with a password.

The driver runs a few commands as root on the control-plane nodes
(kubectl, etcdctl: ``[kubespray_mgmt] kubectl_sudo``) and on the load
balancers (HAProxy's and keepalived's files, the install script:
``haproxy_sudo``), each as ``sudo -n COMMAND`` (no password).  When the
login of that VM has a sudo password (``model.Login.sudo_password``:
``become_password``, or the login password unless ``passwordless_sudo``),
:func:`wrap` turns ``sudo -n COMMAND`` into ``scripts/sudo-password.sh``
with the password as the first line of standard input, so that sudo gets
it whether or not it asks (NOPASSWD users are unaffected) and the
password is never on a command line.
:class:`mgmt_driver.remote.ssh.Connection` applies it to every argv that starts
with ``sudo -n``.
"""


from mgmt_driver.remote import programs

#: What the callers write in front of a command run as root.
SUDO = ('sudo', '-n')
#: The program (``scripts/sudo-password.sh``) as it is sent.
SCRIPT = programs.program('sudo-password')


def wrap(command, stdin, password):
    """*command* and *stdin* as they run on a host whose sudo may ask
    *password*.

    :param command: an argv list (other commands are left alone: a shell
        string is the caller's own).
    :param stdin: the command's input (str, bytes or None).
    :param password: the sudo password, or None (nothing to change).
    :returns: ``(command, stdin)``.
    """
    if not password or not isinstance(command, (list, tuple)) or \
            tuple(command[:2]) != SUDO:
        return command, stdin
    line = password.encode('utf-8') + b'\n'
    if isinstance(stdin, str):
        stdin = stdin.encode('utf-8')
    return (['sh', '-c', SCRIPT, 'sudo'] + list(command[2:]),
            line + (stdin or b''))
