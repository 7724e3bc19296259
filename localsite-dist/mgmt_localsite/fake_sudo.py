"""``bin/kube-sudo``: sudo as the kubespray test double's hosts have it.

Every host of the local site is one machine and its SSH user has no real
sudo, so the double's become plugin
(``kubespray/plugins/become/kube_double.py``, Ansible's ``sudo`` plugin
with this program as ``become_exe``) runs this instead.  It answers as
sudo does, so that Ansible's own password handling runs (prompt, the
password written to the command's standard input, "Missing sudo
password", "Incorrect sudo password"), then runs the command as the login
user, unchanged:

* a host whose address is not in ``<state>/sudo.json`` has NOPASSWD: the
  command runs at once, whatever the options;
* a host listed there asks a password: with ``-n`` it fails as sudo
  does (``sudo: a password is required``); else it writes the ``-p``
  prompt to stderr, reads one line from stdin byte by byte (what follows
  is the command's input: Ansible pipelines modules that way) and runs
  the command if the line is that host's password, or fails with
  ``Sorry, try again.``

The host is the address the SSH session came in on (``SSH_CONNECTION``);
without one (a local run) nothing is asked.  ``sudo.json`` maps an
address to the SHA-256 of its password (:func:`require_password` writes
it; tests call it through ``Site.require_sudo_password``): no password
is stored, and none is ever on a command line.

Options read: ``-n``, ``-p PROMPT``, ``-u USER`` and the switches
``-H``, ``-S``, ``-E``, ``-k``; ``--`` ends them.
"""

import hashlib
import json
import os
import sys

#: The file, in the state directory, of the hosts that ask a password.
SUDO_FILE = 'sudo.json'
MISSING = 'sudo: a password is required\n'
WRONG = 'Sorry, try again.\n'
_SWITCHES = frozenset('HSEk')
#: Longest password line read (sudo's own limit is about this).
MAX_LINE = 1024


def digest(password):
    """The SHA-256 (hex) ``sudo.json`` keeps of *password*."""
    return hashlib.sha256(password.encode('utf-8')).hexdigest()


def state_dir():
    """``<site>/state``: this program is ``<site>/bin/kube-sudo`` (the
    playbooks' ``KUBE_DOUBLE_STATE_DIR`` is set inside the command, not
    around sudo)."""
    return os.environ.get('KUBE_SUDO_STATE_DIR') or os.path.join(
        os.path.dirname(os.path.dirname(os.path.realpath(sys.argv[0]))),
        'state')


def require_password(directory, address, password):
    """Make the host at *address* ask *password* (None: ask none)."""
    path = os.path.join(directory, SUDO_FILE)
    table = _table(directory)
    if password is None:
        table.pop(address, None)
    else:
        table[address] = digest(password)
    temp = path + '.tmp'
    with open(temp, 'w') as f:
        json.dump(table, f, sort_keys=True)
    os.replace(temp, path)


def _table(directory):
    try:
        with open(os.path.join(directory, SUDO_FILE)) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def parse(argv):
    """``(options, command)`` of a sudo command line.

    :raises ValueError: an option sudo would not take here, or no
        command.
    """
    options, rest = {'n': False, 'p': '', 'u': 'root'}, list(argv)
    while rest and rest[0].startswith('-'):
        flag = rest.pop(0)
        if flag == '--':
            break
        for i, letter in enumerate(flag[1:], 1):
            if letter in ('p', 'u'):
                value = flag[i + 1:] or (rest.pop(0) if rest else None)
                if value is None:
                    raise ValueError('option -%s needs a value' % letter)
                options[letter] = value
                break
            if letter == 'n':
                options['n'] = True
            elif letter not in _SWITCHES:
                raise ValueError('unknown option -%s' % letter)
    if not rest:
        raise ValueError('no command')
    return options, rest


def _read_line(fd):
    """One line from *fd*, byte by byte: what follows stays unread."""
    data = b''
    while len(data) < MAX_LINE:
        byte = os.read(fd, 1)
        if byte in (b'', b'\n'):
            break
        data += byte
    return data.rstrip(b'\r').decode('utf-8', 'replace')


def check(expected, options, stdin_fd=0, stderr=None):
    """Whether the command may run; writes sudo's prompt and errors.

    :param expected: the host's password digest, or None (NOPASSWD).
    :returns: True to run the command.
    """
    stderr = stderr or sys.stderr
    if expected is None:
        return True
    if options['n']:
        stderr.write(MISSING)
        return False
    stderr.write(options['p'])
    stderr.flush()
    if digest(_read_line(stdin_fd)) == expected:
        return True
    stderr.write('\n' + WRONG)
    return False


def host_address(environ):
    """The address the SSH session came in on, or None."""
    fields = environ.get('SSH_CONNECTION', '').split()
    return fields[2] if len(fields) == 4 else None


def main(argv=None):
    try:
        options, command = parse(sys.argv[1:] if argv is None else argv)
    except ValueError as exc:
        sys.stderr.write('sudo: %s\n' % exc)
        return 1
    expected = _table(state_dir()).get(host_address(os.environ))
    if not check(expected, options):
        return 1
    sys.stderr.flush()
    os.execvp(command[0], command)
    return 1  # not reached
