#!/usr/bin/env python3
"""The two test lanes of tools/run-tests, balanced from measured durations.

tools/run-tests runs every test in two lanes side by side: lane A is
``tox -e pep8,py3,docs`` (lint, unit tests, documentation), then ``tox -e
functional`` over the files not given to lane B; lane B is ``tox -e
tacker``, ``tox -e conformance``, then ``tox -e functional-b`` over its
files.  Which file goes where is decided here, from the seconds
each took in a measured run (``tests/durations.json``), longest first,
each to the lane that would end sooner (a file never measured counts
``DEFAULT`` seconds).  Files that start servers on the same loopback
addresses run in one lane; a functional file that shares addresses with
what lane B runs anyway (the integration tests, the conformance layer)
goes to lane B.  Nobody keeps a list by hand.

    tools/lanes.py split                 lane B's functional files
    tools/lanes.py report DIR [--write]  the 20 slowest tests and each
                                         lane's time, from the JUnit files
                                         of DIR; --write stores the
                                         measured durations

Standard library only: it runs before any virtualenv exists.
"""

import argparse
import collections
import json
import pathlib
import re
import sys
import xml.etree.ElementTree as ET

ROOT = pathlib.Path(__file__).resolve().parents[1]
DURATIONS = ROOT / 'tests' / 'durations.json'
FUNCTIONAL = ROOT / 'tests' / 'functional'
#: Run by each lane before its functional files, whole tox environments
#: (their wall time, from the ``NAME.seconds`` files tools/run-tests
#: writes beside the JUnit reports).
LANE_A_ENVS = ('tox:pep8,py3,docs',)
LANE_B_ENVS = ('tox:tacker', 'tox:conformance')
#: Seconds assumed for a test file no run has measured yet.
DEFAULT = 60.0
#: What ``report`` lists.
SLOWEST = 20
#: Loopback addresses every session serves from its own sshd on a port
#: of its own (tests/functional/conftest.py): shared by any files.
SHARED_ADDRESSES = frozenset({'127.0.0.1', '127.0.0.2', '127.0.0.3'})
_ADDRESS = re.compile(r'\b127\.\d{1,3}\.\d{1,3}\.\d{1,3}\b')
#: A /24 but 127.0.0.0/24 (shared out host by host), named by an
#: address in it, a computed one (``'127.0.7.%d' % i``) or ``127.0.7.x``:
#: two files in one such block run in one lane.
_BLOCK = re.compile(r'\b(127\.\d{1,3}\.\d{1,3})\.(?:\d{1,3}\b|%|x\b)')
#: What lane B runs whatever the split (tox -e tacker, -e conformance).
LANE_B_FILES = ('tests/integration/*.py',
                'tests/functional/test_conformance.py')


def _measured():
    try:
        return json.loads(DURATIONS.read_text())
    except FileNotFoundError:
        return {}


def functional_files():
    """Every functional test file but the conformance layer (its own tox
    environment, in lane B)."""
    return sorted(str(p.relative_to(ROOT)) for p in
                  FUNCTIONAL.glob('test_*.py')
                  if p.name != 'test_conformance.py')


def lane_b_files():
    """The files of :data:`LANE_B_FILES`."""
    return sorted({str(p.relative_to(ROOT)) for pattern in LANE_B_FILES
                   for p in ROOT.glob(pattern)})


def _addresses(text):
    """The loopback addresses and /24 blocks *text* names (but
    :data:`SHARED_ADDRESSES` and 127.0.0.0/24 as a block)."""
    blocks = {b + '.x' for b in _BLOCK.findall(text) if b != '127.0.0'}
    return (set(_ADDRESS.findall(text)) - SHARED_ADDRESSES) | blocks


def groups(files, read=lambda name: (ROOT / name).read_text()):
    """*files* in groups that must run in one lane: two files that name
    the same loopback address (but :data:`SHARED_ADDRESSES`), or
    addresses of one /24 but 127.0.0.0/24, would start servers on them
    at once in two lanes."""
    owner = {}
    parent = {name: name for name in files}

    def root(name):
        while parent[name] != name:
            name = parent[name]
        return name

    for name in files:
        for address in _addresses(read(name)):
            if address in owner:
                parent[root(name)] = root(owner[address])
            else:
                owner[address] = name
    together = collections.defaultdict(list)
    for name in files:
        together[root(name)].append(name)
    return sorted(sorted(group) for group in together.values())


def split(files, measured, read=None, pinned=None):
    """``(lane_a, lane_b, seconds_a, seconds_b)``: *files* shared out in
    :func:`groups`, longest first, each to the lane that would end
    sooner; a group with a file of *pinned* (what lane B runs anyway,
    :func:`lane_b_files` unless *read* reads other files; never listed)
    goes to lane B."""
    if pinned is None:
        pinned = () if read else lane_b_files()
    pinned = set(pinned) - set(files)
    lanes = {'a': [], 'b': []}
    seconds = {lane: sum(measured.get(env, DEFAULT) for env in envs)
               for lane, envs in (('a', LANE_A_ENVS), ('b', LANE_B_ENVS))}
    units = groups(list(files) + sorted(pinned), read) if read else \
        groups(list(files) + sorted(pinned))

    def cost(group):
        return sum(measured.get(name, DEFAULT) for name in group)

    def place(lane, group):
        group = [name for name in group if name not in pinned]
        lanes[lane].extend(group)
        seconds[lane] += cost(group)

    for group in units:
        if pinned & set(group):
            place('b', group)
    for group in sorted((g for g in units if not pinned & set(g)),
                        key=lambda g: (-cost(g), g)):
        place(min(seconds, key=lambda key: (seconds[key], key)), group)
    return sorted(lanes['a']), sorted(lanes['b']), seconds['a'], seconds['b']


def _cases(directory):
    """``(file, test, seconds, suite)`` of every test case of the JUnit
    files in *directory* (one file per tox environment)."""
    for path in sorted(pathlib.Path(directory).glob('*.xml')):
        for case in ET.parse(path).getroot().iter('testcase'):
            module = case.get('classname', '').split('.')
            name = '/'.join(module[:3]) if module[0] == 'tests' else ''
            yield (name + '.py' if name else path.stem,
                   '%s::%s' % (case.get('classname'), case.get('name')),
                   float(case.get('time') or 0), path.stem)


def _environments(directory, per_suite):
    """The seconds of each of :data:`LANE_A_ENVS` and :data:`LANE_B_ENVS`
    a run measured: its wall time (``DIR/NAME.seconds``) or, without
    one, the time in its tests."""
    measured = {}
    for env in LANE_A_ENVS + LANE_B_ENVS:
        name = env.split(':')[1]
        wall = pathlib.Path(directory) / (name + '.seconds')
        if wall.is_file():
            measured[env] = round(float(wall.read_text()), 1)
        elif name in per_suite:
            measured[env] = round(per_suite[name], 1)
    return measured


def report(directory, write=False, out=sys.stdout):
    cases = list(_cases(directory))
    per_file = collections.Counter()
    per_suite = collections.Counter()
    for name, _, seconds, suite in cases:
        per_file[name] += seconds
        per_suite[suite] += seconds
    print('%d slowest tests:' % SLOWEST, file=out)
    for _, test, seconds, _ in sorted(cases, key=lambda c: -c[2])[:SLOWEST]:
        print('  %7.1f s  %s' % (seconds, test), file=out)
    print('time in tests, per tox environment: %s' % ', '.join(
        '%s %.0f s' % (suite, s) for suite, s in sorted(per_suite.items())),
        file=out)
    if write:
        measured = {name: round(s, 1) for name, s in per_file.items()
                    if name.startswith('tests/functional/')}
        measured.update(_environments(directory, per_suite))
        DURATIONS.write_text(json.dumps(measured, indent=1, sort_keys=True)
                             + '\n')
        print('wrote %s' % DURATIONS.relative_to(ROOT), file=out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    sub = parser.add_subparsers(dest='command', required=True)
    sub.add_parser('split', help="print lane B's functional files")
    rep = sub.add_parser('report', help='the slowest tests of a run')
    rep.add_argument('directory')
    rep.add_argument('--write', action='store_true',
                     help='store the measured durations')
    args = parser.parse_args(argv)
    if args.command == 'split':
        lane_a, lane_b, a, b = split(functional_files(), _measured())
        print('lanes: A pep8, py3, docs and %d files, about %.0f s; '
              'B tacker, conformance and %d files, about %.0f s'
              % (len(lane_a), a, len(lane_b), b),
              file=sys.stderr)
        for name in lane_b:
            print(name)
    else:
        report(args.directory, args.write)
    return 0


if __name__ == '__main__':
    sys.exit(main())
