"""What a hostile document costs each reader, before and after issue 39.

For each shape of hostile document (``[{},{},...]`` and friends, the
densest a parser builds from), at the byte cap of its reader (16 MiB,
``max_command_output``, for kubectl's JSON; 2 MiB, ``safeyaml.MAX_CHARS``,
for YAML read back), measures peak traced memory (``tracemalloc``: what
Python allocated, the text itself excluded) and CPU time of:

* before: ``json.loads`` then the old depth check that pushed every
  child at once (``kubectl.load_json`` until issue 39), and
  ``safeyaml.load`` (PyYAML's node tree);
* after: ``untrusted.load_json`` and ``untrusted.load_yaml``; "record"
  rows are ``load_yaml`` with the denser budget of the records the
  driver writes itself (``untrusted.RECORD_TEXT_PER_ENTRY``: the
  readers of ``hosts.yaml`` and the labels record).

``--quick`` uses 256 KiB and 32 KiB (CI runs it: seconds).  No network;
asserts nothing.

    python benchmarks/hostile_readers.py [--quick]
"""

import argparse
import json
import pathlib
import sys
import time
import tracemalloc

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from mgmt_driver.common import safeyaml  # noqa: E402
from mgmt_driver.common import untrusted  # noqa: E402

#: tests/unit/test_benchmarks_quick.py runs --quick in the unit lane.
QUICK_LANE = 'unit'
MIB = 1024 * 1024


def json_before(text):
    """``kubectl.load_json`` before issue 39."""
    data = json.loads(text)  # the old reader, measured
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else \
            value if isinstance(value, list) else ()
        stack.extend((child, depth + 1) for child in children)
    return data


def _hostile(unit, length):
    return '[' + ','.join([unit] * (length // (len(unit) + 1))) + ']'


def _filled(unit, length, per_entry=untrusted.TEXT_PER_ENTRY, per=None):
    """As dense as the budget allows, padded to *length* (*per*: the
    entries of one *unit*; JSON's count by default)."""
    per = per or sum(unit.count(c) for c in '[{,') + 1
    count = (untrusted.entry_budget('x' * length, per_entry) - 2) // per
    body = '[' + ','.join([unit] * count) + ']'
    return body + ' ' * max(0, length - len(body))


def measure(read, text):
    """``(peak bytes, CPU seconds, outcome)`` of ``read(text)``."""
    tracemalloc.start()
    start = time.process_time()
    try:
        read(text)
        outcome = 'built'
    except Exception as exc:  # noqa: BLE001 -- a refusal is an outcome
        outcome = 'refused (%s)' % type(exc).__name__
    seconds = time.process_time() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak, seconds, outcome


def cases(json_size, yaml_size):
    for unit in ('{}', '[]', '{"a":0}', '"ab"'):
        text = _hostile(unit, json_size)
        yield 'JSON %s' % unit, 'before', json_before, text
        yield 'JSON %s' % unit, 'after', untrusted.load_json, text
        yield 'JSON %s (most built)' % unit, 'after', untrusted.load_json, \
            _filled(unit, json_size)
    for unit in ('{}', 'a'):
        text = _hostile(unit, yaml_size)
        yield 'YAML %s' % unit, 'before', safeyaml.load, text
        yield 'YAML %s' % unit, 'after', untrusted.load_yaml, text
        yield 'YAML %s (most built)' % unit, 'after', untrusted.load_yaml, \
            _filled(unit, yaml_size)
    for unit, nodes in (('{}', 1), ('ab', 1), ('{a: ab}', 3)):
        yield 'YAML %s (record, most)' % unit, 'after', _record, \
            _filled(unit, yaml_size, untrusted.RECORD_TEXT_PER_ENTRY, nodes)


def _record(text):
    """``load_yaml`` as the readers of the driver's own records call it."""
    return untrusted.load_yaml(
        text, per_entry=untrusted.RECORD_TEXT_PER_ENTRY)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true')
    args = parser.parse_args(argv)
    json_size, yaml_size = (MIB // 4, MIB // 32) if args.quick \
        else (16 * MIB, 2 * MIB)
    print('%-26s %-6s %9s %9s %8s  %s' % ('document', 'reader', 'text MiB',
                                          'peak MiB', 'CPU s', 'outcome'))
    for name, when, read, text in cases(json_size, yaml_size):
        peak, seconds, outcome = measure(read, text)
        print('%-26s %-6s %9.2f %9.1f %8.2f  %s (%.1fx)' % (
            name, when, len(text) / MIB, peak / MIB, seconds, outcome,
            peak / len(text)))


if __name__ == '__main__':
    main()
