"""Text from remote hosts and tenant packages, made safe to show.

Messages and printed lines quote what a master's kubectl printed, what
an Ansible server's playbook logged, what a tenant's VNF package names:
any of them may be hostile.  A hostile text is bounded (a host can
print megabytes, a tenant can choose a hundred masters) and escaped
(an ESC sequence can retitle the operator's terminal, hide lines or
forge log lines) before it reaches an exception message, a log record
or a terminal.  Every such path goes through this module:

* :func:`escape`: every character a terminal or a log reader could
  obey written as ``\\x1b``, ``\\u202e``...;
* :func:`clip`: one bounded, escaped line (both ends of a long one);
* :func:`clip_lines`: the last lines of an output, each clipped;
* :func:`clip_list`: the first items of a list, each clipped, and how
  many more there were;
* :func:`for_terminal` and :func:`say`: the one printer of the
  ``kubespray-mgmt`` command (newlines and tabs stay);
* :class:`EscapingHandler`: a logging handler that shows each record
  through a printer, never raw.

Each function costs time linear in what it keeps, at most in its input.
"""

import logging
import sys

#: The default width of one clipped line, in characters.
LINE_WIDTH = 1000


def escape(text, keep=''):
    """*text* with every non-printable character but those in *keep*
    written as a Python escape (``\\x1b``, ``\\u202e``, ``\\U000e0041``).

    Printable text (letters of any script included) is returned as it
    is; the result is always printable but for *keep*.
    """
    if text.isprintable():
        return text
    return ''.join(c if c.isprintable() or c in keep else _escaped(c)
                   for c in text)


def _escaped(char):
    code = ord(char)
    if code < 0x100:
        return '\\x%02x' % code
    return '\\u%04x' % code if code < 0x10000 else '\\U%08x' % code


def clip(text, width=LINE_WIDTH):
    """*text* as one escaped line of at most *width* characters plus
    ``' [...] '``: its start and its end when longer.

    Newlines are escaped too (a quoted remote value stays one line).
    Both ends are kept because Ansible puts the reason (``"msg"``) at
    the end of a long ``fatal:`` line.  Only the kept ends are read.
    """
    text = str(text)
    if len(text) <= width:
        shown = escape(text)
        if len(shown) <= width:
            return shown
    head = _fit(text, width // 4)
    tail = _fit(reversed(text), width - width // 4)
    return ''.join(head) + ' [...] ' + ''.join(reversed(tail))


def _fit(chars, budget):
    """The escaped pieces of *chars*, in their order, as long as they
    fit in *budget* characters."""
    pieces = []
    for char in chars:
        piece = char if char.isprintable() else _escaped(char)
        budget -= len(piece)
        if budget < 0:
            break
        pieces.append(piece)
    return pieces


def clip_lines(text, lines=20, width=LINE_WIDTH):
    """The last *lines* lines of *text*, each :func:`clip`-ped, joined
    by newlines ('' for no text)."""
    return '\n'.join(clip(line, width)
                     for line in text.rstrip('\n').splitlines()[-lines:])


def clip_list(items, count=20, width=200, separator=', '):
    """The first *count* of *items*, each :func:`clip`-ped to *width*,
    joined by *separator*, then ``... and N more`` when there were more.

    :param items: a sequence (its length is counted, its items past
        *count* are never read).
    """
    shown = [clip(item, width) for item in items[:count]]
    if len(items) > count:
        shown.append('... and %d more' % (len(items) - count))
    return separator.join(shown)


def for_terminal(text):
    """*text* with every character a terminal could obey escaped; tabs
    and newlines stay (a terminal shows them, it obeys nothing)."""
    return escape(text, keep='\n\t')


def say(text, file=None):
    """Print *text* (from anywhere, remote hosts and packages included)
    as :func:`for_terminal` shows it; standard output by default."""
    print(for_terminal(text), file=file or sys.stdout, flush=True)


class EscapingHandler(logging.Handler):
    """Shows each log record through *show* after :func:`for_terminal`:
    a record quoting a remote host's output shows its escape sequences,
    never obeys them (Python's last-resort handler prints them raw).

    :param show: called with each formatted, escaped record.
    :param level: the lowest level shown.
    :param fmt: a :class:`logging.Formatter` format.
    """

    def __init__(self, show, level=logging.WARNING, fmt='%(message)s'):
        super().__init__(level)
        self.show = show
        self.setFormatter(logging.Formatter(fmt))

    def emit(self, record):
        try:
            self.show(for_terminal(self.format(record)))
        except Exception:  # as logging.StreamHandler does
            self.handleError(record)


class BoundedArgs(logging.Filter):
    """Every argument of a log record but numbers, as one escaped line
    of at most :data:`LINE_WIDTH` characters (:func:`clip`): remote
    text (a checkout's version, a probe's doubts, an error a host
    printed) reaches the conductor's log bounded and without terminal
    escapes, whichever call logs it."""

    def filter(self, record):
        if isinstance(record.args, tuple):
            record.args = tuple(_bounded(arg) for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {key: _bounded(value)
                           for key, value in record.args.items()}
        return True


def _bounded(value):
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return clip(str(value))


def logger(name):
    """The logger of module *name*, its records' arguments bounded by
    :class:`BoundedArgs`: the one way a module of the package gets its
    logger (``tests/unit/test_remote_text.py`` checks it).

    oslo.log's (as its ``getLogger`` gives it) in a process that uses
    oslo.log (Tacker's conductor imported it before any driver module);
    elsewhere (a v2 script process, ``kubespray-mgmt``, which configure
    the standard :mod:`logging`) the standard logger itself: the same
    records, without importing oslo.log and what it pulls in (about a
    tenth of a v2 script's start-up).
    """
    plain = logging.getLogger(name)
    if not any(isinstance(f, BoundedArgs) for f in plain.filters):
        plain.addFilter(BoundedArgs())
    oslo_logging = sys.modules.get('oslo_log.log')
    return plain if oslo_logging is None else oslo_logging.getLogger(name)
