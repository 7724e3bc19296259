"""One YAML loader for text the driver does not trust.

Not in the design's layout: every YAML the driver parses comes from
someone else (request files of the command line, documents read back
from the Ansible server), and ``yaml.safe_load`` is not safe enough for
that.  It expands aliases (a few hundred bytes of ``&a``/``*a`` become
gigabytes), recurses once per nesting level (deep input ends in a
``RecursionError``), converts a sexagesimal number such as ``1:0:0:...``
in quadratic time and lets ``int()`` raise ``ValueError`` on a long
digit string.  :func:`load` refuses all of these and keys given twice,
and raises only ``yaml.YAMLError`` (:class:`Refused` for our refusals),
whose :func:`describe` gives line, column and problem, never the text.
"""

import yaml

#: Deepest nesting accepted.  A fixed structural limit, not an option:
#: our inventories nest 6 levels and kubespray's vars files a few more.
MAX_DEPTH = 32
#: Longest text parsed, in characters.  Fixed: PyYAML parses about
#: 50-500 KB/s in pure Python, so this bounds a parse to seconds, and an
#: inventory of 5,000 nodes (Kubernetes' own limit) is about 1.5 MB.
MAX_CHARS = 2 * 1024 * 1024
#: Longest plain scalar converted to a number; longer ones are refused
#: (YAML 1.1 sexagesimal numbers convert in quadratic time).
MAX_NUMBER_CHARS = 100


def _short(value, limit=40):
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + '...'


class Refused(yaml.MarkedYAMLError):
    """The document uses something :func:`load` does not accept."""

    def __init__(self, problem, mark=None):
        super().__init__(problem=problem, problem_mark=mark)


class _Checks:
    """SafeLoader's composer and constructor without aliases, anchors,
    deep nesting or duplicate keys (mixed into a loader class)."""

    _depth = 0

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            raise Refused('aliases (*name) are not accepted',
                          event.start_mark)
        if getattr(event, 'anchor', None) is not None:
            raise Refused('anchors (&name) are not accepted',
                          event.start_mark)
        if self._depth >= MAX_DEPTH:
            raise Refused('nested deeper than %d levels' % MAX_DEPTH,
                          event.start_mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:
                continue  # unhashable: SafeLoader reports it below
            if duplicate:
                raise Refused('duplicate key %s' % _short(key),
                              key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def _short_number(self, node):
        if len(node.value) > MAX_NUMBER_CHARS:
            raise Refused('a number longer than %d characters'
                          % MAX_NUMBER_CHARS, node.start_mark)

    def construct_yaml_int(self, node):
        self._short_number(node)
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node):
        self._short_number(node)
        return super().construct_yaml_float(node)

    def scalar(self, event):
        """The value of one ``yaml.ScalarEvent``, resolved and converted
        as :func:`load` does (for :mod:`untrusted`, which builds from
        events)."""
        tag = event.tag
        if tag is None or tag == '!':
            tag = self.resolve(yaml.ScalarNode, event.value, event.implicit)
        node = yaml.ScalarNode(tag, event.value, event.start_mark,
                               event.end_mark, event.style)
        make = self.yaml_constructors.get(tag) or \
            self.yaml_constructors[None]
        return make(self, node)

    def construct_unsafe(self, node):
        """Ansible's ``!unsafe`` string, which our own dumper writes."""
        return self.construct_scalar(node)


class _Loader(_Checks, yaml.SafeLoader):
    """The checks over PyYAML's pure-Python scanner and parser."""


_LOADERS = [_Loader]
if getattr(yaml, 'CSafeLoader', None) is not None:
    class _CLoader(_Checks, yaml.composer.Composer, yaml.cyaml.CParser,
                   yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
        """The checks over libyaml's scanner and parser, which read a
        5,000-node ``hosts.yaml`` (1.1 MB) several times faster (issue
        40): Python's :class:`yaml.composer.Composer` before the C one,
        so that :meth:`_Checks.compose_node` sees every event."""

        def __init__(self, stream):
            yaml.cyaml.CParser.__init__(self, stream)
            yaml.composer.Composer.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)

    _LOADERS.insert(0, _CLoader)

for _class in _LOADERS:
    _class.add_constructor('tag:yaml.org,2002:int', _Checks.construct_yaml_int)
    _class.add_constructor('tag:yaml.org,2002:float',
                           _Checks.construct_yaml_float)
    _class.add_constructor('!unsafe', _Checks.construct_unsafe)
#: The loader :func:`load` uses: libyaml's when PyYAML has it.
LOADER = _LOADERS[0]


def scalar_loader():
    """A loader whose ``scalar(event)`` converts one scalar event."""
    return _Loader('')


def short(value, limit=40):
    """``repr(value)`` cut to *limit* characters (a key in a message)."""
    return _short(value, limit)


def load(text):
    """Parse one YAML (or JSON) document from untrusted *text*.

    :returns: the data (dicts, lists, scalars).
    :raises yaml.YAMLError: a syntax error, or :class:`Refused`.
    """
    if len(text) > MAX_CHARS:
        raise Refused('longer than %d characters' % MAX_CHARS)
    try:
        return yaml.load(text, Loader=LOADER)
    except (ValueError, OverflowError, RecursionError) as exc:
        # A scalar that matched a type but does not convert, e.g. a
        # date such as 2024-13-45 (ValueError).
        raise Refused('a value cannot be converted (%s)'
                      % type(exc).__name__)


def describe(exc):
    """``' at line L, column C: problem'`` of *exc*, never the text.

    :param exc: a ``yaml.YAMLError``; without a position the result is
        ``': problem'``.
    """
    mark = getattr(exc, 'problem_mark', None)
    where = ' at line %d, column %d' % (mark.line + 1, mark.column + 1) \
        if mark else ''
    return '%s: %s' % (where, getattr(exc, 'problem', None) or
                       'syntax error')
