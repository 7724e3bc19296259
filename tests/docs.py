"""Where the tests find the documentation's pages and sections."""

import pathlib

ROOT = pathlib.Path(__file__).parents[1]
SOURCE = ROOT / 'doc' / 'source'


def page(name):
    """The text of the page *name* of the Sphinx tree (``admin/cli``)."""
    return (SOURCE / ('%s.rst' % name)).read_text()


def section(name, title, underline='-'):
    """The text of section *title* of page *name*, up to two blank lines.

    :raises IndexError: when the page has no such section.
    """
    marker = '\n%s\n%s\n' % (title, underline * len(title))
    return page(name).split(marker, 1)[1].split('\n\n\n', 1)[0]
