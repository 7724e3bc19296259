"""What the local site knows of this machine's processes, from /proc.

The site stops what it started by PID, and tests find the sessions of
one test sshd or check that a process is gone; they all read /proc the
same way, here.
"""

import os


def cmdline(pid):
    """The argv of process *pid*, or [] when it is gone."""
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            return f.read().decode(errors='replace').split('\0')
    except OSError:
        return []


def _stat_fields(pid):
    """The fields of ``/proc/<pid>/stat`` after the command name."""
    with open('/proc/%s/stat' % pid) as f:
        return f.read().rsplit(')', 1)[1].split()


def state(pid):
    """The state letter of process *pid* (``Z``: a zombie), or None when
    it is gone."""
    try:
        return _stat_fields(pid)[0]
    except (OSError, IndexError):
        return None


def gone(pid):
    """Whether *pid* no longer runs (no such process, or a zombie)."""
    return state(pid) in (None, 'Z')


def netns(pid):
    """The network namespace of process *pid* (``'self'`` too), as
    ``/proc/<pid>/ns/net`` names it (``net:[INODE]``), or None when it
    cannot be read."""
    try:
        return os.readlink('/proc/%s/ns/net' % pid)
    except OSError:
        return None


def parents():
    """``{pid: parent pid}`` of every process."""
    found = {}
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            found[int(entry)] = int(_stat_fields(entry)[1])
        except (OSError, ValueError, IndexError):
            continue
    return found


def descendants(roots):
    """Every process below the processes *roots*."""
    children = {}
    for pid, parent in parents().items():
        children.setdefault(parent, []).append(pid)
    found, todo = [], list(roots)
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def with_marker(marker, exclude=()):
    """Every process whose command line names *marker* (a path of the
    site: an SSH control master, ``ssh: <ControlPath> [mux]``, which
    left its session and so is no descendant of sshd), but *exclude*
    and this process."""
    skip = set(exclude) | {os.getpid()}
    return [pid for pid in parents() if pid not in skip and
            marker in '\0'.join(cmdline(pid))]
