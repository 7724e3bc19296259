"""No test of the unit suite asserts on a duration (issue 43 item 2).

A wall-clock ratio or bound flakes on a loaded machine; speed is
measured in ``benchmarks/``, and the linear-time tests count work
(:mod:`tests.unit.work`).  This test keeps the timed checks from coming
back: no clock meant for measuring (``perf_counter``, ``process_time``,
``timeit``), and no assertion on a difference of clock readings.  A
deadline that stops a wait (``assert time.monotonic() < end``) is not a
measure and stays allowed.
"""

import ast
import pathlib
import re

import pytest

UNIT = pathlib.Path(__file__).parent
MEASURING = re.compile(r'perf_counter|process_time|thread_time|\btimeit\b')
CLOCKS = {'monotonic', 'time', 'perf_counter', 'monotonic_ns', 'time_ns'}


def _reads_clock(node):
    return isinstance(node, ast.Call) and (
        getattr(node.func, 'attr', None) in CLOCKS
        or getattr(node.func, 'id', None) in CLOCKS)


def _timed_assertions(tree):
    """Lines of asserts that compare a duration (a clock reading minus a
    time; a certificate's end minus now is a date, not a measure)."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        for part in ast.walk(node.test):
            if isinstance(part, ast.BinOp) and isinstance(part.op, ast.Sub) \
                    and _reads_clock(part.left):
                yield node.lineno


def _sources():
    return sorted(p for p in UNIT.rglob('*.py')
                  if p.name != pathlib.Path(__file__).name)


@pytest.mark.parametrize('path', _sources(), ids=lambda p: p.name)
def test_no_unit_test_measures_time(path):
    text = path.read_text()
    measuring = [n for n, line in enumerate(text.splitlines(), 1)
                 if MEASURING.search(line)]
    assert measuring == [], '%s: a measuring clock' % path.name
    assert list(_timed_assertions(ast.parse(text))) == [], path.name


def test_the_check_finds_both_kinds():
    timed = ('import time\nstart = time.monotonic()\nf()\n'
             'assert time.monotonic() - start < 0.5\n')
    assert list(_timed_assertions(ast.parse(timed))) == [4]
    for allowed in ('assert time.monotonic() < end, "timed out"\n',
                    'assert not_after - time.time() > 364 * DAY\n'):
        assert list(_timed_assertions(ast.parse(allowed))) == []
    assert MEASURING.search('t = time.perf_counter()')
