"""The shell programs the driver runs on remote hosts, kept as files.

Each program is ``mgmt_driver/remote/scripts/NAME.sh``: a plain POSIX sh file
that shellcheck lints (``tox -e pep8``).  :func:`program` gives what is
sent (``sh -c PROGRAM sh ARG...``): the file without its comments and
blank lines, after one marker line ``# kubespray-mgmt-script: NAME``.
The dry run and the test fakes recognise a program by that name
(:func:`name_of`), never by its text, so editing a comment or a line of
a script changes nothing for them.

Every program says in its file whether it changes the host it runs on,
with one line ``# kubespray-mgmt-effect: changes`` or
``# kubespray-mgmt-effect: reads`` (:func:`changes_host`): the dry run's
"What would change" lists a program by that line, so a new program must
choose, and the choice stays beside the code that makes it true.

Shell functions that several programs share are files too,
``scripts/lib/NAME.sh``, and a program takes one with the line
``. lib/NAME.sh``: :func:`program` puts the function's text in that
line's place, so what is sent stands alone (shellcheck, told by
``scripts/.shellcheckrc`` where to look, reads the same file).
"""

import functools
import pathlib
import re

#: Where the programs are, one ``NAME.sh`` each.
SCRIPT_DIR = pathlib.Path(__file__).resolve().parent / 'scripts'
#: The first line of every program as it is sent.
MARKER = '# kubespray-mgmt-script: '

#: The line of a program's file that says what it does to a host.
EFFECT = '# kubespray-mgmt-effect: '
#: The two effects a program may declare.
CHANGES, READS = 'changes', 'reads'

_NAME = re.compile(r'[a-z0-9][a-z0-9_-]{0,63}')
_MARKED = re.compile(re.escape(MARKER) + r'(' + _NAME.pattern + r')\n')
#: A program's line that takes a shared function from ``scripts/lib/``.
_INCLUDE = re.compile(r'\. lib/(' + _NAME.pattern + r')\.sh')


def _strip(text):
    """*text* without comment lines and blank lines, each ``. lib/NAME.sh``
    line replaced by that file (stripped likewise; no nesting)."""
    lines = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith('#'):
            continue
        included = _INCLUDE.fullmatch(line.strip())
        if included:
            lines.append(_strip_plain(
                (SCRIPT_DIR / 'lib' / (included.group(1) + '.sh'))
                .read_text()))
        else:
            lines.append(line)
    return '\n'.join(lines)


def _strip_plain(text):
    return '\n'.join(line for line in text.splitlines()
                     if line.strip() and not line.lstrip().startswith('#'))


@functools.cache
def program(name):
    """The program ``scripts/<name>.sh`` as it is sent to a host.

    :raises ValueError: *name* is not a program name (lower case letters,
        digits, ``-`` and ``_``).
    :raises FileNotFoundError: there is no such program.
    """
    if not _NAME.fullmatch(name):
        raise ValueError('not a remote program name: %r' % (name,))
    text = (SCRIPT_DIR / (name + '.sh')).read_text()
    return MARKER + name + '\n' + _strip(text) + '\n'


@functools.cache
def changes_host(name):
    """Whether program *name* changes the host it runs on, as its file
    declares with one :data:`EFFECT` line (``changes`` or ``reads``).

    :raises ValueError: *name* is not a program name, or its file does
        not declare one effect (no line, two lines, another word).
    :raises FileNotFoundError: there is no such program.
    """
    if not _NAME.fullmatch(name):
        raise ValueError('not a remote program name: %r' % (name,))
    text = (SCRIPT_DIR / (name + '.sh')).read_text()
    found = [line[len(EFFECT):].strip() for line in text.splitlines()
             if line.startswith(EFFECT)]
    if len(found) != 1 or found[0] not in (CHANGES, READS):
        raise ValueError('scripts/%s.sh must declare its effect in one line '
                         '"%s%s" or "%s%s"' % (name, EFFECT, CHANGES,
                                               EFFECT, READS))
    return found[0] == CHANGES


def command(name, *args):
    """The argv that runs program *name* with *args* as ``$1``...:
    ``['sh', '-c', program(name), 'sh', *args]``."""
    return ['sh', '-c', program(name), 'sh', *args]


def args_of(command):
    """The words *command* (an argv) gives its program as ``$1``...:
    those after the program's own word and its ``$0``, wherever that
    word is (a ``sudo -n`` before ``sh -c`` moves it); None when no word
    of *command* is a program."""
    for index, word in enumerate(command):
        if isinstance(word, str) and _MARKED.match(word):
            return list(command[index + 2:])
    return None


def name_of(command):
    """The name of the program *command* runs, or None.

    :param command: a command string or an argv list (the program is
        one of its words, e.g. ``['sh', '-c', PROGRAM, 'sh', ...]``).
    """
    words = [command] if isinstance(command, str) else command
    for word in words:
        if isinstance(word, str):
            found = _MARKED.match(word)
            if found:
                return found.group(1)
    return None
