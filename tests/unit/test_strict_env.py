"""tests/conftest.py: under CI, environment skips fail the run."""

import pathlib

import pytest

pytest_plugins = ['pytester']

CONFTEST = pathlib.Path(__file__).parents[1] / 'conftest.py'

TESTS = '''
import pytest

def test_needs_sshd():
    pytest.skip('sshd not found (apt-get install openssh-server)')

def test_optional():
    pytest.skip('optional: no IPv6 loopback')

@pytest.mark.xfail(reason='known')
def test_known():
    assert False

def test_passes():
    pass
'''

MODULE_SKIP = '''
import pytest
pytest.importorskip('no_such_module_kmgmt')

def test_never_runs():
    pass
'''


@pytest.fixture
def suite(pytester, monkeypatch):
    monkeypatch.delenv('CI', raising=False)
    monkeypatch.delenv('KMGMT_STRICT_ENV', raising=False)
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(test_env=TESTS)
    return pytester


def test_skips_stay_skips_outside_ci(suite):
    result = suite.runpytest('-p', 'no:cacheprovider')
    result.assert_outcomes(passed=1, skipped=2, xfailed=1)


@pytest.mark.parametrize('var', ['CI', 'KMGMT_STRICT_ENV'])
def test_an_environment_skip_fails_under_ci(suite, monkeypatch, var):
    monkeypatch.setenv(var, 'true')
    result = suite.runpytest('-p', 'no:cacheprovider')
    result.assert_outcomes(passed=1, failed=1, skipped=1, xfailed=1)
    result.stdout.fnmatch_lines(['*skipped under CI*sshd not found*'])


def test_a_module_level_skip_fails_under_ci(suite, monkeypatch):
    suite.makepyfile(test_module=MODULE_SKIP)
    monkeypatch.setenv('CI', 'true')
    result = suite.runpytest('-p', 'no:cacheprovider', 'test_module.py')
    assert result.ret != 0
    result.stdout.fnmatch_lines(['*skipped under CI*no_such_module_kmgmt*'])
