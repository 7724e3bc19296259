"""The kit every request check uses: collect problems, raise them once.

A :class:`Section` reads one mapping of a request: it reports unknown
keys (with the nearest known one), reads typed values and nested
sections.  Each problem goes to a :class:`Problems` as ``<field path>:
<problem>``, and :meth:`Problems.raise_if_any` raises them all at once,
sorted by path: :class:`~mgmt_driver.common.exceptions.ParamsNotFound` when
every problem is a missing field,
:class:`~mgmt_driver.common.exceptions.ParamsInvalid` otherwise.  :func:`show`
is the short repr of a value that is not secret.  :func:`check_bounds`
and :func:`templated_keys` walk a whole request tree without recursion.

Used by :mod:`~mgmt_driver.model.params` (the instantiation's request),
:mod:`~mgmt_driver.model.merging` (a scale or heal request's overrides),
:mod:`~mgmt_driver.model.labels` (label and taint grammar, records),
:mod:`~mgmt_driver.operations.upgrade` and
:mod:`~mgmt_driver.adapters.lcm_requests` (a PATCH's metadata) and
:mod:`~mgmt_driver.remote.trust` (the operator's policy).
"""

import contextlib
import dataclasses
import difflib
import re

from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions

#: Deepest nesting of k8s_cluster_installation_param.  A fixed structural
#: limit: the format nests 4 levels, and kubespray variables rarely more
#: than 5; deeper input would only make the recursive checks, copies and
#: YAML rendering below recurse without end.
MAX_REQUEST_DEPTH = 24
#: How messages name the types :meth:`Section.value` checks.
TYPE_NAMES = {str: 'a string', int: 'an integer', bool: 'a boolean',
              dict: 'a mapping', list: 'a list'}

#: What starts every Jinja2 delimiter ("{{", "{%", "{#"): a mapping key
#: from a request may not hold it (see :func:`templated_keys`).
TEMPLATE_MARK = '{'
#: Mapping keys holding :data:`TEMPLATE_MARK` reported one by one, at most.
MAX_KEY_PROBLEMS = 10
_TEMPLATED_KEY = ('mapping key contains "%s": Ansible would evaluate it as '
                  'a Jinja2 template on the Ansible server; keys may not '
                  'contain it (values may)' % TEMPLATE_MARK)
#: What no text value of a request may hold (newline, tab, ...).
CONTROL_RE = re.compile(r'[\x00-\x1f\x7f]')
#: A DNS-1123 label: a node's, a node pool's, a Kubernetes object's
#: name, and each part of a label prefix.
DNS_LABEL_RE = re.compile(r'[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?')

#: A node name kubectl commands accept from the driver.
NODE_NAME = re.compile(r'^[A-Za-z0-9]([-A-Za-z0-9_.]{0,251}[A-Za-z0-9])?$')


def is_dns_label(value):
    """Whether *value* is a string and a DNS-1123 label
    (:data:`DNS_LABEL_RE`)."""
    return isinstance(value, str) and DNS_LABEL_RE.fullmatch(value) is not None


@dataclasses.dataclass(frozen=True)
class Problem:
    """One problem of an input: its field *path* and what is wrong
    (never a secret value); *missing* for a field that is absent."""

    path: str
    text: str
    missing: bool = False

    def __str__(self):
        return '%s: %s' % (self.path, self.text)


class Problems:
    """Collects every problem of one input, then raises them together."""

    def __init__(self):
        self.items = []

    def __len__(self):
        return len(self.items)

    def missing(self, path, text='missing'):
        self.items.append(Problem(path, text, missing=True))

    def invalid(self, path, text):
        self.items.append(Problem(path, text))

    def absorb(self, exc):
        """Keep the problems of *exc*, a ``ParamsInvalid`` or
        ``ParamsNotFound`` that another check raised."""
        missing = isinstance(exc, exceptions.ParamsNotFound)
        for message in exc.problems:
            path, _, text = message.partition(': ')
            self.items.append(Problem(path, text, missing=missing))

    @contextlib.contextmanager
    def gathered(self):
        """Run a check that raises its problems, and keep them here
        instead: ``with problems.gathered(): value = check(...)``."""
        try:
            yield
        except (exceptions.ParamsInvalid, exceptions.ParamsNotFound) as exc:
            self.absorb(exc)

    def raise_if_any(self):
        """Raise one exception listing every problem, if there is any.

        :raises ParamsNotFound: when every problem is a missing field.
        :raises ParamsInvalid: when at least one is not.
        """
        if not self.items:
            return
        # Sorted by path: the same input always gives the same message.
        messages = [str(item) for item in sorted(
            self.items, key=lambda item: item.path)]
        if all(item.missing for item in self.items):
            raise exceptions.ParamsNotFound(messages)
        raise exceptions.ParamsInvalid(messages)


def show(value, limit=60):
    """A short repr of a non-secret value for an error message."""
    try:
        text = repr(value)
    except ValueError:  # an int too long to convert to decimal
        return '(an integer of about %d digits)' % int(
            value.bit_length() * 0.30103)
    return text if len(text) <= limit else text[:limit - 4] + '...' + text[-1]


def key_text(key):
    """A mapping key as it appears in a field path (never a value)."""
    return show(key)[1:-1] if isinstance(key, str) else show(key)


def type_name(value):
    return type(value).__name__ if value is not None else 'null'


class Section:
    """One mapping of the request: reports unknown keys, reads typed values.

    :param keys: the keys this section accepts (others are reported,
        with the nearest known key as a suggestion).
    """

    def __init__(self, problems, path, data, keys):
        self.problems = problems
        self.path = path
        self.data = data
        for key in data:
            if key not in keys:
                self._unknown(key, keys)

    def _unknown(self, key, keys):
        text = 'unknown key'
        if not isinstance(key, str):
            self.problems.invalid(self.path, 'keys must be strings, not %s'
                                  % type_name(key))
            return
        near = difflib.get_close_matches(key, keys, n=1, cutoff=0.6)
        if near:
            text += ' (did you mean %r?)' % near[0]
        else:
            text += ' (known keys: %s)' % ', '.join(sorted(keys))
        self.problems.invalid(self.at(key_text(key)), text)

    def at(self, key):
        return '%s.%s' % (self.path, key)

    def given(self, key):
        """True when *key* holds something other than null or ''."""
        return self.data.get(key) not in (None, '')

    def value(self, key, kind, required=False, secret=False):
        """The value of *key* if it has type *kind*, else None.

        Absent, null and '' count as not given.  *secret* keeps the value
        out of every message (types are never echoed anyway).
        """
        if not self.given(key):
            if required:
                self.problems.missing(self.at(key))
            return None
        value = self.data[key]
        problem = _value_problem(value, kind, secret)
        if problem:
            self.problems.invalid(self.at(key), problem)
            return None
        return value

    def section(self, key, section_keys, required=False):
        """A nested :class:`Section`, or None when absent or not a dict."""
        data = self.value(key, dict, required=required)
        if data is None:
            return None
        return Section(self.problems, self.at(key), data, section_keys)


def _value_problem(value, kind, secret):
    """What is wrong with *value*, wanted of type *kind*, or None; only
    its type is named (and a hint unless *secret*)."""
    if kind is int and isinstance(value, bool) or not isinstance(
            value, kind):
        hint = ' (quote it)' if kind is str and not secret and \
            isinstance(value, (int, float)) else ''
        return 'must be %s, not %s%s' % (
            TYPE_NAMES[kind], type_name(value), hint)
    if kind is str and CONTROL_RE.search(value):
        return 'must not contain control characters (newline, tab, ...)'
    return None


def templated_keys(value, path):
    """Where *value* has a mapping key holding :data:`TEMPLATE_MARK`.

    Ansible evaluates a mapping key that a playbook templates (kubespray
    loops over ``dict2items`` of variables and templates ``item.key``),
    so a key is never data the way an ``!unsafe`` value is.  Walks
    without recursion, each value once (linear time); stops collecting
    after :data:`MAX_KEY_PROBLEMS`.

    :param path: the field path of *value*.
    :returns: ``(paths, count)``: the field paths of the first mappings
        found with such a key, each followed by the key's position
        (``#1`` is the first key, so the key itself is never shown), and
        how many such keys there are in all.
    """
    found, count, stack = [], 0, [(value, (None, path))]
    while stack:
        item, trail = stack.pop()
        count += _push_children(item, trail, stack, found)
    return found, count


def _push_children(item, trail, stack, found):
    """One step of :func:`templated_keys`: pushes the children of a list
    or mapping *item* on *stack*, except those under a templated key, and
    returns how many such keys it has (noted in *found* while room)."""
    if isinstance(item, list):
        stack.extend((child, (trail, index))
                     for index, child in enumerate(item))
        return 0
    if not isinstance(item, dict):
        return 0
    count = 0
    for position, (key, child) in enumerate(item.items(), 1):
        if isinstance(key, str) and TEMPLATE_MARK in key:
            count += 1
            if len(found) < MAX_KEY_PROBLEMS:
                found.append('%s (key #%d)' % (_trail_path(trail),
                                               position))
        else:
            stack.append((child, (trail, key)))
    return count


def report_templated_keys(problems, value, path):
    """Report each key of *value* that :func:`templated_keys` finds.

    :returns: True when there is none.
    """
    found, count = templated_keys(value, path)
    for where in found:
        problems.invalid(where, _TEMPLATED_KEY)
    if count > len(found):
        problems.invalid(path, '%d more mapping keys contain "%s"' % (
            count - len(found), TEMPLATE_MARK))
    return not count


def _size_of(value):
    """Approximate bytes of one value, its children not included."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, int):
        return 8 + value.bit_length() // 8
    return 8


def _children(value):
    """``(key, child)`` pairs of a mapping or list; keys count as text."""
    if isinstance(value, dict):
        return value.items()
    if isinstance(value, list):
        return enumerate(value)
    return ()


def _trail_path(trail):
    """The field path of a ``(parent trail, key)`` chain."""
    keys = []
    while trail is not None:
        trail, key = trail
        keys.append(key)
    path = keys.pop()
    for key in reversed(keys):
        path += '[%d]' % key if isinstance(key, int) and not isinstance(
            key, bool) else '.%s' % key_text(key)
    return path


def check_bounds(problems, path, data, max_size=None):
    """Report a request tree nested too deep or too large; no recursion.

    Stops at the first excess, so a hostile request costs no more work
    than *max_size* allows, and nothing later recurses without end.

    :param path: the field path of *data*.
    :param max_size: approximate bytes allowed (default: the option
        ``max_request_size``).
    :returns: True when *data* is within the bounds.
    """
    limit = max_size or kconf.CONF.kubespray_mgmt.max_request_size
    size, stack = 0, [(data, 1, (None, path))]
    while stack:
        value, depth, trail = stack.pop()
        size += _size_of(value)
        if _over_bounds(problems, path, trail, depth, size, limit):
            return False
        for key, child in _children(value):
            size += _size_of(key) if isinstance(value, dict) else 0
            stack.append((child, depth + 1, (trail, key)))
    return True


def _over_bounds(problems, path, trail, depth, size, limit):
    """Whether a value at *depth* (under *trail*), after *size* bytes
    read, breaks a bound (then reported)."""
    if depth > MAX_REQUEST_DEPTH:
        problems.invalid(_trail_path(trail), 'nested deeper than %d '
                         'levels' % MAX_REQUEST_DEPTH)
        return True
    if size > limit:
        problems.invalid(path, 'larger than %d bytes (option '
                         '[kubespray_mgmt] max_request_size)' % limit)
        return True
    return False
