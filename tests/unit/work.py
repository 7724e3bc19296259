"""Work counted, not timed: the measure of the linear-time tests.

Speed is measured in ``benchmarks/``, never in a test: a wall-clock
ratio flakes on a loaded machine (seen at load 10).  These helpers count
the work a call does instead, which no load changes: every Python
bytecode instruction run (``sys.settrace`` with opcode events) and every
call into C (``sys.setprofile``).  Work done inside one C call (a
``list`` scan by ``in``, a regular expression) is invisible to that
count; inputs made of :class:`Key` strings make the comparisons and
hashes of such scans run Python code, which is counted.
"""

import sys

#: The input grows from *base* to ``GROWTH * base``.
GROWTH = 8
#: :func:`growth` of a linear call is 7, of ``n log n`` about 8 to 9,
#: of a quadratic one up to 21: the bound sits between.
MAX_GROWTH = 12


class Key(str):
    """A string whose comparisons and hashes the count sees.

    A quadratic scan of a list of keys (``key in seen``) runs in C, out
    of sight of the count; with keys of this type each comparison calls
    :meth:`__eq__` here, which is Python code.
    """

    __slots__ = ()

    def __eq__(self, other):
        return str.__eq__(self, other)

    def __ne__(self, other):
        return str.__ne__(self, other)

    def __hash__(self):
        return str.__hash__(self)


def count(func, arg):
    """The work of ``func(arg)``: bytecode instructions and C calls.

    :param func: the call to measure.
    :param arg: its one argument.
    :returns: the number of events counted; the same on every run.
    """
    events = 0

    def local(frame, event, _arg):
        nonlocal events
        events += 1
        return local

    def trace(frame, event, _arg):
        nonlocal events
        frame.f_trace_opcodes = True
        events += 1
        return local

    def profile(frame, event, _arg):
        nonlocal events
        if event == 'c_call':
            events += 1

    before = sys.gettrace(), sys.getprofile()
    sys.setprofile(profile)
    sys.settrace(trace)
    try:
        func(arg)
    finally:
        sys.settrace(before[0])
        sys.setprofile(before[1])
    return events


def growth(func, make, base):
    """The work added by growing the input 8-fold, per the work added
    by doubling it.

    Differences cancel the fixed cost of a call, so a small input shows
    the shape: ``(W(8n) - W(n)) / (W(2n) - W(n))`` is 7 for linear
    work, 21 for quadratic work.

    :param func: the call to measure, given ``make(size)``.
    :param make: builds an input of a size.
    :param base: the smallest size.
    :returns: the ratio, to compare with :data:`MAX_GROWTH`.
    """
    func(make(base))  # Caches warmed, outside the count.
    small, double, large = (count(func, make(size))
                            for size in (base, 2 * base, GROWTH * base))
    return (large - small) / max(double - small, 1)
