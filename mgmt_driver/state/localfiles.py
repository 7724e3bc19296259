"""Local files of the ``kubespray-mgmt`` command: read inputs, write outputs.

Not in the design's layout: the command needs to read JSON/YAML input
files without echoing their content (a parse error must not print the
line holding a password) and to write a rendered directory all or nothing.
That is local I/O, so it stays out of the pure rendering modules and out
of ``cli.py``, which only wires commands together.
"""

import argparse
import os
import pathlib
import shutil
import sys
import tempfile

import yaml

from mgmt_driver.common import exceptions
from mgmt_driver.common import safeyaml
from mgmt_driver.common import untrusted

#: Words of ``-o/--output`` that name a format (README.rst, "Output"):
#: a command that writes files refuses them as its path.
FORMAT_WORDS = frozenset(('json', 'text', 'yaml', 'wide', 'name'))


def output_path(text):
    """The ``-o/--output PATH`` (alias ``--output-file``) of a command
    that writes files (``render``, ``csar build``): a path as before,
    but not a format word, which elsewhere means the report's format.

    :raises argparse.ArgumentTypeError: *text* is a format word.
    """
    if text in FORMAT_WORDS:
        raise argparse.ArgumentTypeError(
            '%r is an output format, and this command writes files: give '
            'the path to write (./%s for a file called %s)' % (
                text, text, text))
    return text


def load_document(path, what):
    """Read a JSON or YAML file (JSON is YAML).

    :param path: the file, or ``-`` for standard input.
    :param what: what it is, for messages (``'PARAMS'``, ``'TOPOLOGY'``).
    :returns: the parsed document.
    :raises ParamsNotFound: the file cannot be read.
    :raises ParamsInvalid: it is not valid YAML/JSON, or uses aliases,
        deep nesting or a key twice (see :mod:`safeyaml`); the message
        gives the line and column, never the text (it may be a secret).
    """
    text = _read_text(path, what)
    if not text.strip():
        # Not "must be a mapping, not null": the file (or a pipe that
        # gave nothing) is what is wrong.
        raise exceptions.ParamsNotFound(['%s %s: empty%s' % (
            what, 'standard input' if path == '-' else 'file %s' % path,
            ' (nothing was piped in?)' if path == '-' else '')])
    try:
        return untrusted.load_yaml(text)
    except yaml.YAMLError as exc:
        raise exceptions.ParamsInvalid(['%s file %s: not valid YAML or JSON'
                                        '%s' % (what, path,
                                                safeyaml.describe(exc))])


def _read_text(path, what):
    # One character more than the parser takes, so that it reports the
    # size instead of parsing a cut document.
    try:
        if path == '-':
            return _read_stdin(safeyaml.MAX_CHARS + 1)
        with open(path, encoding='utf-8') as stream:
            return stream.read(safeyaml.MAX_CHARS + 1)
    except (OSError, UnicodeDecodeError) as exc:
        raise exceptions.ParamsNotFound(['%s file %s: cannot read it (%s)' % (
            what, path, getattr(exc, 'strerror', None) or 'not UTF-8')])


def _read_stdin(chars):
    data = sys.stdin.buffer.read(4 * chars)  # UTF-8: at most 4 bytes each
    # Past the cap the parser refuses the size: a cut character is moot.
    cut = len(data) == 4 * chars
    return data.decode('utf-8', 'ignore' if cut else 'strict')


def _write_file(path, content, mode):
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, 'w', encoding='utf-8') as stream:
        os.fchmod(stream.fileno(), mode)  # the umask must not widen it
        stream.write(content)


def _check_replaceable(directory, files):
    if not directory.is_dir():
        raise exceptions.ParamsInvalid(['%s exists and is not a directory'
                                        % directory])
    ours = {pathlib.PurePosixPath(rel).parts[0] for rel in files}
    foreign = sorted(entry.name for entry in directory.iterdir()
                     if entry.name not in ours)
    if foreign:
        raise exceptions.ParamsInvalid([
            '%s holds files this command did not write (%s); choose a new '
            'or empty directory' % (directory, ', '.join(foreign[:5]))])


def _swap_in(new, directory):
    if not directory.exists():
        os.rename(new, directory)
        return
    old = pathlib.Path(tempfile.mkdtemp(prefix='.%s.old-' % directory.name,
                                        dir=directory.parent))
    os.rename(directory, old / 'previous')
    try:
        os.rename(new, directory)
    except OSError:
        os.rename(old / 'previous', directory)
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)


def write_tree(directory, files):
    """Replace *directory* with exactly *files*, all or nothing.

    Every file is written into a new directory next to *directory* first;
    only when all are written does it take *directory*'s place.  On any
    error *directory* is left as it was.  An existing *directory* may only
    hold names that *files* writes (it is replaced whole, so a file of a
    removed node does not survive).

    :param directory: the target directory.
    :param files: ``{relative path: object with .content and .mode}``.
    :raises ParamsInvalid: *directory* holds other files.
    :raises MgmtDriverOtherError: a file could not be written.
    """
    directory = pathlib.Path(directory).absolute()
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        if directory.exists():
            _check_replaceable(directory, files)
        new = pathlib.Path(tempfile.mkdtemp(
            prefix='.%s.new-' % directory.name, dir=directory.parent))
    except OSError as exc:
        raise exceptions.MgmtDriverOtherError(
            error_message='cannot write %s: %s' % (directory, exc.strerror))
    try:
        for rel in sorted(files):
            _write_file(new / rel, files[rel].content, files[rel].mode)
        _swap_in(new, directory)
    except OSError as exc:
        raise exceptions.MgmtDriverOtherError(
            error_message='cannot write %s: %s' % (directory, exc.strerror))
    finally:
        shutil.rmtree(new, ignore_errors=True)
