"""tests/conftest.py: under CI, environment skips fail the run."""

import configparser
import fnmatch
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

pytest_plugins = ['pytester']

REPO = pathlib.Path(__file__).resolve().parents[2]
CONFTEST = REPO / 'tests' / 'conftest.py'

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


REAL_PARTS = '''
import pytest

def test_archive():
    pytest.skip('optional: kubespray-2.31.0.tar.gz is not beside the clone')

def test_zsh():
    pytest.skip('optional: no zsh on this host')
'''


def test_an_optional_skip_of_a_real_part_fails_under_ci(suite, monkeypatch):
    suite.makepyfile(test_parts=REAL_PARTS)
    result = suite.runpytest('-p', 'no:cacheprovider', 'test_parts.py')
    result.assert_outcomes(skipped=2)
    monkeypatch.setenv('CI', 'true')
    result = suite.runpytest('-p', 'no:cacheprovider', 'test_parts.py')
    result.assert_outcomes(failed=2)


def test_a_module_level_skip_fails_under_ci(suite, monkeypatch):
    suite.makepyfile(test_module=MODULE_SKIP)
    monkeypatch.setenv('CI', 'true')
    result = suite.runpytest('-p', 'no:cacheprovider', 'test_module.py')
    assert result.ret != 0
    result.stdout.fnmatch_lines(['*skipped under CI*no_such_module_kmgmt*'])


# ------------------------------------------------ from CI to the tests --
# The hook above only acts when CI reaches the test process: .ci/run sets
# it, tox must pass it on to every environment that runs pytest.

MISSING_TOOL = '''
import shutil
import pytest

def test_needs_a_tool():
    if shutil.which('kmgmt-no-such-tool') is None:
        pytest.skip('kmgmt-no-such-tool not found (apt-get install it)')
'''


def _tox_pass_env():
    """``{environment: [pass_env patterns]}`` of tox.ini's environments
    that run pytest (their own, else inherited from ``[testenv]``)."""
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(REPO / 'tox.ini')
    base = tox['testenv'].get('passenv', '')
    found = {}
    for name in tox.sections():
        section = tox[name]
        if name.startswith('testenv') and \
                'pytest' in section.get('commands', ''):
            text = section.get('passenv', base).replace(
                '{[testenv]passenv}', base)
            found[name] = text.replace(',', ' ').split()
    return found


def test_tox_passes_ci_to_every_environment_that_runs_pytest():
    found = _tox_pass_env()
    assert {'testenv', 'testenv:functional', 'testenv:tacker'} <= set(found)
    assert [name for name, patterns in found.items()
            if not any(fnmatch.fnmatchcase('CI', p) for p in patterns)] == []


def test_a_missing_tool_fails_pytest_run_as_tox_runs_it(tmp_path):
    """A pytest process given only what tox.ini passes on (and PATH, which
    tox sets), from a CI shell: the skip for a missing tool fails it."""
    shutil.copy(CONFTEST, tmp_path / 'conftest.py')
    (tmp_path / 'test_tool.py').write_text(MISSING_TOOL)
    patterns = _tox_pass_env()['testenv']
    ci_shell = dict(os.environ, CI='true')
    env = {key: value for key, value in ci_shell.items()
           if any(fnmatch.fnmatchcase(key, p) for p in patterns)}
    env['PATH'] = os.environ.get('PATH', '/usr/bin:/bin')
    command = [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider',
               str(tmp_path)]
    strict = subprocess.run(command, env=env, cwd=tmp_path, text=True,
                            capture_output=True, timeout=120)
    assert strict.returncode != 0, strict.stdout
    assert 'skipped under CI' in strict.stdout
    assert 'kmgmt-no-such-tool not found' in strict.stdout
    env.pop('CI')
    lenient = subprocess.run(command, env=env, cwd=tmp_path, text=True,
                             capture_output=True, timeout=120)
    assert lenient.returncode == 0, lenient.stdout


@pytest.mark.parametrize('given, seen', [(None, 'true'), ('1', '1')])
def test_ci_run_makes_the_run_strict(tmp_path, given, seen):
    """.ci/run exports CI=true unless the CI system set CI already."""
    (tmp_path / '.ci').mkdir()
    (tmp_path / 'tools').mkdir()
    shutil.copy(REPO / '.ci' / 'run', tmp_path / '.ci' / 'run')
    stub = tmp_path / 'tools' / 'run-tests'
    stub.write_text('#!/bin/sh\necho "CI=${CI-unset}"\n')
    stub.chmod(0o755)
    env = {'PATH': os.environ.get('PATH', '/usr/bin:/bin')}
    if given is not None:
        env['CI'] = given
    result = subprocess.run(['bash', str(tmp_path / '.ci' / 'run')],
                            env=env, text=True, capture_output=True,
                            timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == 'CI=' + seen
