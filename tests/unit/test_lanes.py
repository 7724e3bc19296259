"""tools/lanes.py: the two test lanes of tools/run-tests, balanced from
measured durations, and the report of a run's slowest tests."""

import importlib.util
import io
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location('lanes',
                                               ROOT / 'tools' / 'lanes.py')
lanes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lanes)


def test_the_longest_files_go_first_each_to_the_lane_that_ends_sooner():
    measured = {'tox:tacker': 100, 'tox:conformance': 50,
                'tox:pep8,py3,docs': 0,
                'a.py': 300, 'b.py': 200, 'c.py': 120, 'd.py': 10}
    names = ['a.py', 'b.py', 'c.py', 'd.py']
    texts = {n: "HOST = '127.0.%d.1'" % i for i, n in enumerate(names)}
    lane_a, lane_b, a, b = lanes.split(names, measured, texts.get)
    # B starts with tacker and conformance (150 s): a.py goes to A, b.py
    # to B (150 < 300), c.py to A (300 < 350), d.py to B (350 < 420).
    assert lane_a == ['a.py', 'c.py'] and lane_b == ['b.py', 'd.py']
    assert (a, b) == (420, 360)
    assert sorted(lane_a + lane_b) == ['a.py', 'b.py', 'c.py', 'd.py']


def test_files_naming_one_address_share_a_lane():
    # Two files starting servers on 127.0.5.10 must never run at once;
    # the fixture's shared sshd addresses bind nobody apart.
    texts = {'a.py': "A = '127.0.5.10'; S = '127.0.0.2'",
             'b.py': "B = '127.0.5.10'", 'c.py': "C = '127.0.0.2'",
             'd.py': "D = '127.0.9.1'"}
    assert lanes.groups(sorted(texts), texts.get) == [
        ['a.py', 'b.py'], ['c.py'], ['d.py']]
    lane_a, lane_b, _, _ = lanes.split(sorted(texts), {'a.py': 500},
                                       texts.get)
    assert {'a.py', 'b.py'} <= set(lane_a) or {'a.py', 'b.py'} <= set(lane_b)


def test_a_computed_address_shares_its_block_but_127_0_0():
    # test_concurrency computed '127.0.7.%d' while test_conductor named
    # 127.0.7.10: one /24, one lane.  127.0.0.x is shared out by host.
    texts = {'a.py': "X = '127.0.7.%d' % 10", 'b.py': "Y = '127.0.7.10'",
             'c.py': 'Z: 127.0.8.x', 'd.py': "W = '127.0.8.1'",
             'e.py': "V = '127.0.0.%d' % 20", 'f.py': "U = '127.0.0.21'"}
    assert lanes.groups(sorted(texts), texts.get) == [
        ['a.py', 'b.py'], ['c.py', 'd.py'], ['e.py'], ['f.py']]


def test_a_file_sharing_addresses_with_lane_b_runs_in_lane_b():
    # Lane B runs the integration files anyway, beside lane A: a
    # functional file on their addresses must not run in lane A.
    texts = {'big.py': "A = '127.0.41.200'", 'small.py': "B = '127.0.9.1'",
             'integration.py': "C = '127.0.41.%d' % 1"}
    lane_a, lane_b, a, b = lanes.split(
        ['big.py', 'small.py'], {'big.py': 900, 'small.py': 10},
        texts.get, pinned=['integration.py'])
    assert (lane_a, lane_b) == (['small.py'], ['big.py'])
    assert (a, b) == (lanes.DEFAULT + 10, 2 * lanes.DEFAULT + 900)


def test_the_integration_files_are_pinned_to_lane_b():
    pinned = lanes.lane_b_files()
    assert 'tests/integration/test_conductor.py' in pinned
    assert 'tests/functional/test_conformance.py' in pinned


def test_a_file_never_measured_counts_the_default():
    _, lane_b, a, b = lanes.split(['new.py'], {}, lambda name: '')
    assert b == 2 * lanes.DEFAULT + (lanes.DEFAULT if lane_b else 0)
    assert a == lanes.DEFAULT + (0 if lane_b else lanes.DEFAULT)


def test_lane_a_starts_with_lint_unit_tests_and_docs():
    # Lane A runs pep8, py3 and docs before its functional files, while
    # lane B runs tacker and conformance: 400 s against 150 s, so the
    # 200 s file goes to B.
    measured = {'tox:pep8,py3,docs': 400, 'tox:tacker': 100,
                'tox:conformance': 50, 'a.py': 200}
    lane_a, lane_b, a, b = lanes.split(['a.py'], measured,
                                       lambda name: '')
    assert (lane_a, lane_b, a, b) == ([], ['a.py'], 400, 350)


def test_a_tox_run_s_wall_time_is_stored_over_its_tests_time(
        tmp_path, monkeypatch):
    # py3's tests took 5 s, but the run of pep8, py3 and docs 140 s;
    # tacker has no wall time: its tests' time stands in.
    (tmp_path / 'py3.xml').write_text(_junit('tests.unit.test_x', 5.0))
    (tmp_path / 'tacker.xml').write_text(
        _junit('tests.integration.test_y', 30.0))
    (tmp_path / 'pep8,py3,docs.seconds').write_text('140\n')
    durations = tmp_path / 'durations.json'
    monkeypatch.setattr(lanes, 'DURATIONS', durations)
    monkeypatch.setattr(lanes, 'ROOT', tmp_path)
    lanes.report(tmp_path, write=True, out=io.StringIO())
    stored = json.loads(durations.read_text())
    assert stored == {'tox:pep8,py3,docs': 140.0, 'tox:tacker': 30.0}


def _junit(classname, seconds):
    return ('<testsuites><testsuite><testcase classname="%s" name="t" '
            'time="%s"/></testsuite></testsuites>' % (classname, seconds))


def test_every_functional_file_is_in_one_lane_but_conformance():
    files = lanes.functional_files()
    lane_a, lane_b, _, _ = lanes.split(files, lanes._measured())
    assert sorted(lane_a + lane_b) == files
    assert 'tests/functional/test_conformance.py' not in files
    assert 'tests/functional/test_real_etcd.py' in files


JUNIT = '''<?xml version="1.0"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.functional.test_x" name="test_slow" time="42.5"/>
<testcase classname="tests.functional.test_x" name="test_fast" time="0.5"/>
<testcase classname="tests.functional.test_y" name="test_mid" time="7"/>
</testsuite></testsuites>
'''


def test_the_report_lists_the_slowest_and_writes_durations(tmp_path,
                                                           monkeypatch):
    (tmp_path / 'functional.xml').write_text(JUNIT)
    (tmp_path / 'tacker.xml').write_text(JUNIT.replace(
        'tests.functional.test_x', 'tests.integration.test_z'))
    store = tmp_path / 'durations.json'
    monkeypatch.setattr(lanes, 'DURATIONS', store)
    monkeypatch.setattr(lanes, 'ROOT', tmp_path)
    out = io.StringIO()
    lanes.report(tmp_path, write=True, out=out)
    text = out.getvalue()
    assert text.index('test_x::test_slow') < text.index('test_y::test_mid')
    assert '42.5 s' in text
    assert 'tacker 50 s' in text
    written = __import__('json').loads(store.read_text())
    assert written == {'tests/functional/test_x.py': 43.0,
                       'tests/functional/test_y.py': 14.0,
                       'tox:tacker': 50.0}
