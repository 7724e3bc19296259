"""The one reader of JSON and YAML documents the driver does not trust.

Not in the design's layout.  What the driver parses comes from someone
else: answers of a master's kubectl, kubeadm and etcdctl, records read
back from the Ansible server's workspace, the operator's request files.
Their size is bounded where they are read (``max_command_output``,
:data:`safeyaml.MAX_CHARS`), but what a parser *builds* from them is
not: 16 MiB of ``[{},{},...]`` are 5.6 million dicts, about 800 MB of
conductor memory, and a YAML node costs a hundred times its text.  So
every document is measured before it is built:

* :func:`load_json` scans the text once (strings skipped by one regular
  expression that needs no backtracking) and counts the entries it
  would build (every ``[``, ``{`` and ``,`` outside strings) and how
  deep they nest; only then ``json.loads`` builds it;
* :func:`load_yaml` counts libyaml's events (nodes) and their depth,
  then :mod:`safeyaml` builds it (no aliases, anchors or duplicate
  keys).

A document may hold :data:`MIN_ENTRIES` entries plus one for every
:data:`TEXT_PER_ENTRY` characters of its text: a legitimate document
(kubectl prints indented JSON, about one entry per 25 characters; our
records are indented too) passes, a hostile one builds at most a few
times its own size (``benchmarks/hostile_readers.py`` measures it).
The two documents the driver writes and reads back itself
(``hosts.yaml`` and the labels record) are denser than that, so their
readers pass :data:`RECORD_TEXT_PER_ENTRY` (see there).
Refusals are :class:`Refused` (a ``ValueError``), whose message names
the bound that was hit and never a byte of the text; every caller
wraps it into its own error naming the host or file it read.

A unit test (``tests/unit/test_untrusted.py``) fails when a module of
the package calls ``json.loads`` or a YAML loader anywhere else.
"""

import json
import re

import yaml

from mgmt_driver.common import safeyaml

#: Deepest nesting accepted (a Pod nests about 10 levels, our
#: inventories 6).  Fixed structural limits, not options: what they
#: protect (the conductor's memory and stack) is not a policy.
MAX_DEPTH = 64
#: Entries any document may hold, whatever its length.
MIN_ENTRIES = 5000
#: Characters of text per entry allowed beyond :data:`MIN_ENTRIES`.
TEXT_PER_ENTRY = 16
#: The same for a YAML record the driver writes itself and reads back
#: (``hosts.yaml``, the labels record): the densest it writes is a node
#: label of one-character name and value, ``      a: b`` (11 characters
#: with the newline, 2 nodes: 5.5 per node; every other line it writes
#: is longer per node, ``{}`` and ``[]`` included), and such a record
#: may be as long as :data:`safeyaml.MAX_CHARS`, which the driver checks
#: before writing.  A hostile record of that density builds at most
#: about 17.4 times its text (one-key mappings of two-character values,
#: ``benchmarks/hostile_readers.py``), and its text is at most 2 MiB:
#: 35 MiB at worst, less than a 16 MiB JSON answer at
#: :data:`TEXT_PER_ENTRY` may build.
RECORD_TEXT_PER_ENTRY = 5
#: A JSON string (skipped) or one structural character (counted).  The
#: possessive quantifiers never backtrack: time linear, memory constant.
_JSON_TOKEN = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"|([\[\]{},])')
_OPEN = frozenset('[{')
_CLOSE = frozenset(']}')


class Refused(ValueError):
    """A document is not parsed; the message says why, never its text."""


def whole_number(text, digits):
    """*text* as a whole number when it is 1 to *digits* ASCII decimal
    digits, else None.

    ``str.isdigit()`` alone lets through what ``int()`` then refuses with
    a ValueError (``'²'``; more than 4,300 digits), which would end a
    hook with a traceback instead of an error naming the host or field.
    """
    if isinstance(text, str) and 0 < len(text) <= digits and \
            text.isascii() and text.isdigit():
        return int(text)
    return None


def entry_budget(text, per_entry=TEXT_PER_ENTRY):
    """Entries a document of *text* may hold (see the module's doc):
    :data:`MIN_ENTRIES` plus one per *per_entry* characters."""
    return MIN_ENTRIES + len(text) // per_entry


def load_record(text):
    """:func:`load_json` of a record the driver wrote and reads back
    from a host (a workspace file), for a parser that raises
    ``ValueError`` naming no value.

    :raises ValueError: ``not JSON (why)``.
    """
    try:
        return load_json(text)
    except Refused as exc:
        raise ValueError('not JSON (%s)' % exc) from None


def load_json(text):
    """Parse one JSON document of untrusted *text*, bounded in what it
    builds.

    :param text: the document (``str``).
    :returns: the data (dicts, lists, scalars).
    :raises Refused: not JSON, nested deeper than :data:`MAX_DEPTH`, or
        more entries than :func:`entry_budget`; the message gives the
        bound or JSON's line and column, never the text.
    """
    _measure_json(text, entry_budget(text))
    try:
        return json.loads(text)
    except RecursionError:  # not reached after the scan; kept as a net
        raise Refused('nested deeper than %d levels' % MAX_DEPTH) from None
    except ValueError as exc:
        where = ' at line %d, column %d' % (exc.lineno, exc.colno) \
            if isinstance(exc, json.JSONDecodeError) else ''
        raise Refused('no valid JSON%s' % where) from None


def _measure_json(text, budget):
    """Refuse *text* past *budget* entries or :data:`MAX_DEPTH`."""
    depth = entries = 0
    for match in _JSON_TOKEN.finditer(text):
        char = match.group(1)
        if char is None:
            continue  # a string: skipped whole
        if char in _CLOSE:
            depth -= 1
            continue
        entries += 1
        if entries > budget:
            raise Refused('more than %d entries (lists, objects and '
                          'their items) for %d characters'
                          % (budget, len(text)))
        if char in _OPEN:
            depth += 1
            if depth > MAX_DEPTH:
                raise Refused('nested deeper than %d levels' % MAX_DEPTH)


def load_yaml(text, per_entry=TEXT_PER_ENTRY):
    """Parse one YAML (or JSON) document of untrusted *text*, bounded
    in what it builds.

    The objects are built straight from libyaml's events, counted as
    they come: no node tree (a node costs about a hundred times its
    text) and no Python scanner (a few hundred KB/s).  Scalars are
    resolved and converted by :mod:`safeyaml`'s loader, so a document
    means what it meant to it.

    :param text: the document (``str``).
    :param per_entry: characters of text per node allowed beyond
        :data:`MIN_ENTRIES` (:data:`RECORD_TEXT_PER_ENTRY` for the
        records the driver writes itself).
    :returns: the data (dicts, lists, scalars).
    :raises yaml.YAMLError: a syntax error, or :class:`safeyaml.Refused`
        (too long, more nodes than :func:`entry_budget`, nested deeper
        than :data:`safeyaml.MAX_DEPTH`, aliases, anchors, tags on a
        list or mapping, merge keys, keys given twice, several
        documents); :func:`safeyaml.describe` gives line, column and
        problem, never the text.
    """
    _check_length(text)
    return _build_from_events(text, entry_budget(text, per_entry))


def _check_length(text):
    """Refused before any parsing when *text* is too long."""
    if len(text) > safeyaml.MAX_CHARS:
        raise safeyaml.Refused('longer than %d characters'
                               % safeyaml.MAX_CHARS)


def _build_from_events(text, budget):
    """The data of the YAML document *text*, built from the parser's
    events within *budget* nodes (see :func:`load_yaml`)."""
    parser = _EventParser(text)
    try:
        return _YamlBuilder(budget, len(text)).build(parser)
    except (ValueError, OverflowError) as exc:
        # A scalar that matched a type but does not convert, e.g. a
        # date such as 2024-13-45 (ValueError).
        raise safeyaml.Refused('a value cannot be converted (%s)'
                               % type(exc).__name__) from None
    finally:
        parser.dispose()


#: libyaml's parser when PyYAML has it (about 30 times faster than
#: PyYAML's own); only its events are used.
_EventParser = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)
_COLLECTION_TAGS = {
    yaml.SequenceStartEvent: (None, '!', 'tag:yaml.org,2002:seq'),
    yaml.MappingStartEvent: (None, '!', 'tag:yaml.org,2002:map')}


_END_EVENTS = (yaml.SequenceEndEvent, yaml.MappingEndEvent)
_OPENED = object()  # a list or mapping was opened (not a value yet)
_NO_KEY = object()  # a mapping waits for a key


class _YamlBuilder:
    """Lists, dicts and scalars of one document, built from events."""

    def __init__(self, budget, length):
        self.budget = budget
        self.length = length
        self.nodes = 0
        self.scalars = safeyaml.scalar_loader()
        self.stack = []  # [container, its pending key or _NO_KEY]

    def build(self, parser):
        """The one document of *parser* (None for an empty stream)."""
        parser.get_event()  # StreamStart
        if parser.check_event(yaml.StreamEndEvent):
            return None
        parser.get_event()  # DocumentStart
        value = self._value(parser)
        parser.get_event()  # DocumentEnd
        if not parser.check_event(yaml.StreamEndEvent):
            raise safeyaml.Refused('more than one document',
                                   parser.peek_event().start_mark)
        return value

    def _value(self, parser):
        """Read the events of one node (the document's); its value."""
        while True:
            event = parser.get_event()
            if isinstance(event, _END_EVENTS):
                value = self.stack.pop()[0]
            else:
                value = self._start(event)
                if value is _OPENED:
                    continue
            if not self.stack:
                return value
            self._add(value, event.start_mark)

    def _start(self, event):
        """A scalar's value, or :data:`_OPENED` for a list or mapping."""
        self._count(event)
        if isinstance(event, yaml.ScalarEvent):
            return self.scalars.scalar(event)
        if event.tag not in _COLLECTION_TAGS[type(event)]:
            raise safeyaml.Refused('tags on a list or mapping are not '
                                   'accepted', event.start_mark)
        if len(self.stack) >= safeyaml.MAX_DEPTH:
            raise safeyaml.Refused('nested deeper than %d levels'
                                   % safeyaml.MAX_DEPTH, event.start_mark)
        self.stack.append([[] if isinstance(event, yaml.SequenceStartEvent)
                           else {}, _NO_KEY])
        return _OPENED

    def _count(self, event):
        if isinstance(event, yaml.AliasEvent):
            raise safeyaml.Refused('aliases (*name) are not accepted',
                                   event.start_mark)
        if event.anchor is not None:
            raise safeyaml.Refused('anchors (&name) are not accepted',
                                   event.start_mark)
        self.nodes += 1
        if self.nodes > self.budget:
            raise safeyaml.Refused('more than %d nodes for %d characters'
                                   % (self.budget, self.length),
                                   event.start_mark)

    def _add(self, value, mark):
        """Put *value* into the innermost open list or mapping."""
        top = self.stack[-1]
        if isinstance(top[0], list):
            top[0].append(value)
        elif top[1] is not _NO_KEY:
            top[0][top[1]] = value
            top[1] = _NO_KEY
        else:
            top[1] = self._key(top[0], value, mark)

    @staticmethod
    def _key(mapping, key, mark):
        try:
            duplicate = key in mapping
        except TypeError:
            raise safeyaml.Refused('a key is a list or mapping', mark) \
                from None
        if duplicate:
            raise safeyaml.Refused('duplicate key %s' % safeyaml.short(key),
                                   mark)
        return key
