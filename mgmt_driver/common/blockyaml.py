"""A fast writer of the plain, regular YAML documents the driver renders
in bulk: the ``hosts.yaml`` of a large cluster and its labels record
(issue 40 item 5).  The other documents hold passwords (``Unsafe``),
paths or free text: PyYAML writes them, as before.

Not in the design's layout.  PyYAML spends most of a 5,000-node
``hosts.yaml`` in its Python representer and serializer (every scalar
a node, resolved by regular expressions), whichever emitter writes it.
These documents hold only mappings, lists of scalars and short tokens
(node names, addresses, ports, labels, taints), which PyYAML writes in
one way: :func:`dump` writes exactly that, and gives up (None) on
anything else, so that the caller writes the document with PyYAML.

What it accepts, and writes as PyYAML does (``default_flow_style=
False``, the keys in the order given, two spaces of indentation, with
or without ``allow_unicode`` and at any ``width``: no accepted text
has a space or a character beyond ASCII to fold or escape):

* a non-empty mapping at the top;
* mapping keys that are tokens (below), shorter than 123 characters
  (PyYAML writes a key as ``? key`` when it and its tag, ``!!str``,
  reach 128);
* values: mappings (``{}`` when empty), lists of scalars (``[]`` when
  empty; a list in a mapping is not indented), and scalars: ``None``,
  ``True``/``False``, ``int``, the empty string (a value: ``''``) and
  tokens: a letter or digit, then letters, digits and ``_./=:-``, not
  ending in ``:``.  A token is written plain when PyYAML would read it
  back as a string, else in single quotes (``'010'``, ``'1:20'``,
  ``'true'``, ``'null'``), as PyYAML does;
* no mapping or list twice (PyYAML would write an anchor and alias).

Anything else (a ``str`` subclass such as ``Unsafe``, floats, nested
lists, spaces, quotes...) returns None.  A property-based test
(``tests/unit/test_blockyaml.py``) checks that whatever :func:`dump`
writes is byte for byte what ``yaml.dump`` writes.
"""

import re

import yaml

#: The strings written plain (and resolved, below, as strings).
_PLAIN = re.compile(r'[A-Za-z0-9][A-Za-z0-9_./=:-]*')
#: PyYAML writes a key of this many characters or more as ``? key``
#: (its check adds the five of the tag, ``!!str``, and stops at 128).
_LONG_KEY = 123
_STR_TAG = 'tag:yaml.org,2002:str'
_RESOLVER = yaml.resolver.Resolver()
#: How scalars other than strings are written.
_CONSTANTS = {None: 'null', True: 'true', False: 'false'}


class _NotPlain(Exception):
    """Something :func:`dump` does not write; PyYAML must."""


def dump(data):
    """The YAML text of *data*, as ``yaml.dump(data,
    default_flow_style=False, sort_keys=False)`` writes it, or None when
    *data* holds anything but what the module's doc lists.

    :param data: the document (a mapping).
    :returns: the text, or None.
    """
    if type(data) is not dict or not data:
        return None
    writer = _Writer()
    try:
        writer.mapping(data, '')
    except _NotPlain:
        return None
    return ''.join(writer.lines)


class _Writer:
    """The lines of one document, and what it has checked so far."""

    def __init__(self):
        self.lines = []
        self.seen = set()  # ids of the mappings and lists written
        self.written = {}  # string: how it is written (None: not here)

    def mapping(self, data, indent):
        """Write the items of the non-empty mapping *data*."""
        lines = self.lines
        for key, value in data.items():
            if type(key) is not str or not key or len(key) >= _LONG_KEY:
                raise _NotPlain()  # "? key" (empty and long keys)
            head = indent + self.string(key) + ':'
            kind = type(value)
            if kind is dict or kind is list:
                self.once(value)
                if not value:
                    lines.append(head + (' {}\n' if kind is dict
                                         else ' []\n'))
                elif kind is dict:
                    lines.append(head + '\n')
                    self.mapping(value, indent + '  ')
                else:
                    lines.append(head + '\n')
                    lines.extend('%s- %s\n' % (indent, self.scalar(item))
                                 for item in value)
            else:
                lines.append('%s %s\n' % (head, self.scalar(value)))

    def once(self, container):
        """Refuse a mapping or list met before (PyYAML: an alias)."""
        if id(container) in self.seen:
            raise _NotPlain()
        self.seen.add(id(container))

    def scalar(self, value):
        """The text of a scalar *value*."""
        kind = type(value)
        if kind is str:
            return self.string(value)
        if kind is int:
            return str(value)
        if kind is bool or value is None:
            return _CONSTANTS[value]
        raise _NotPlain()

    def string(self, text):
        """*text* as PyYAML writes it: plain or in single quotes."""
        written = self.written.get(text, False)
        if written is False:
            written = self.written[text] = _written(text)
        if written is None:
            raise _NotPlain()
        return written


def _written(text):
    """How PyYAML writes the string *text*, or None if not a token."""
    if not text:
        return "''"  # a key never gets here
    if _PLAIN.fullmatch(text) is None or text.endswith(':'):
        return None
    if _RESOLVER.resolve(yaml.ScalarNode, text, (True, False)) == _STR_TAG:
        return text
    return "'%s'" % text  # it would read back as a number, bool, null...
