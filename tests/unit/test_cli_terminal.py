"""What kubespray-mgmt prints from remote hosts reaches the terminal
escaped: log lines, progress lines, error messages and status reports
can show a hostile Ansible server's control sequences, never obey them."""

import importlib
import pathlib

import pytest

from mgmt_driver.adapters import cli
from mgmt_driver.common import exceptions

SAMPLES = pathlib.Path(__file__).parents[2] / 'samples'
PARAMS = str(SAMPLES / 'instantiate_simple.json')

#: A window title, a screen clear, a CSI through its 8-bit form, a
#: right-to-left override hiding text, a backspace, a bell, DEL.
HOSTILE = ('\x1b]0;owned\x07 \x1b[2J \x9b31m \u202eexe.txt \x08\x07 '
           'end\x7f')
FORBIDDEN = ['\x1b', '\x07', '\x9b', '\u202e', '\x08', '\x7f', '\x00']


def _obeyable(text):
    return [c for c in FORBIDDEN if c in text]


@pytest.mark.parametrize('text, shown', [
    ('TASK [kubernetes/node : Join] ***', 'TASK [kubernetes/node : Join] ***'),
    ('\x1b[31mred', '\\x1b[31mred'),
    ('a\u202eb', 'a\\u202eb'),
    ('nul\x00', 'nul\\x00'),
    ('\x9b2J', '\\x9b2J'),
    ('tab\tand\nnewline', 'tab\tand\nnewline'),
    ('Grüße 日本 ✓', 'Grüße 日本 ✓'),
    ('\U000e0041tag', '\\U000e0041tag'),
])
def test_terminal_safe_escapes_only_what_a_terminal_obeys(text, shown):
    assert cli.terminal_safe(text) == shown


def test_terminal_safe_is_linear_on_a_long_hostile_line():
    # 1 MiB of escape characters: escaped in one pass, 4 bytes each.
    assert len(cli.terminal_safe('\x1b' * (1 << 20))) == 4 << 20


class _Pool:
    def __init__(self, settings):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def connection(self, *args):
        return 'conn'


@pytest.fixture
def remote_log(monkeypatch):
    """``logs`` against an Ansible server whose log holds HOSTILE."""
    monkeypatch.setattr(cli.ssh, 'ConnectionPool', _Pool)

    def show_log(conn, workspace, on_line, stem=None, follow=False):
        on_line('PLAY [k8s_cluster] ' + HOSTILE)
        on_line('ok: [w1]')
        return workspace + '/logs/x.log'
    monkeypatch.setattr(cli.detached, 'show_log', show_log)


def test_logs_show_the_remote_log_escaped(capsys, remote_log):
    assert cli.main(['logs', '--params', PARAMS]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert _obeyable(out) == []
    assert '\\x1b]0;owned\\x07' in out and 'ok: [w1]\n' in out


def test_a_remote_error_message_is_shown_escaped(capsys, monkeypatch):
    monkeypatch.setattr(cli.ssh, 'ConnectionPool', _Pool)

    def show_log(*args, **kwargs):
        raise exceptions.RemoteFileError(action='show the playbook log in',
                                         path='/ws', host='10.0.0.5',
                                         reason=HOSTILE)
    monkeypatch.setattr(cli.detached, 'show_log', show_log)
    assert cli.main(['logs', '--params', PARAMS]) == cli.EXIT_REMOTE_FAILURE
    err = capsys.readouterr().err
    assert _obeyable(err) == [] and '\\u202eexe.txt' in err


def test_run_progress_lines_are_escaped(capsys):
    progress = cli._progress_printer()
    progress('  TASK [etcd : Join] ' + HOSTILE)
    out = capsys.readouterr().out
    assert _obeyable(out) == [] and 'TASK [etcd : Join]' in out


def test_driver_warnings_shown_as_progress_are_escaped(capsys):
    progress = cli._progress_printer()
    with cli._warnings_shown(progress, debug=False):
        cli.logging.getLogger('mgmt_driver.remote.ssh').warning(
            'retrying %s: %s', '10.0.0.5', HOSTILE)
    out = capsys.readouterr().out
    assert _obeyable(out) == [] and 'warning: retrying 10.0.0.5' in out


def test_status_text_is_escaped(capsys, monkeypatch):
    monkeypatch.setattr(cli.ssh, 'ConnectionPool', _Pool)

    class Reader:
        def __init__(self, *args, **kwargs):
            pass

        def collect(self, cluster):
            return {'ok': True}
    monkeypatch.setattr(cli.status, 'StatusReader', Reader)
    monkeypatch.setattr(cli.status, 'format_text',
                        lambda report: 'node w1 label=' + HOSTILE + '\n')
    monkeypatch.setattr(cli.status, 'SECTIONS', ())
    monkeypatch.setattr(cli.status, 'read_only_settings', lambda: None)
    assert cli.main(['status', '--params', PARAMS, '--topology',
                     str(SAMPLES / 'topology_simple.yaml')]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert 'node w1 label=' in out and _obeyable(out) == []


# ---------------------------------------------- the driver's warnings --

#: What a master's kubectl prints to retitle the operator's window.
TITLE = '\x1b]0;pwned\x07'


def _leaf_commands():
    """``(argv words, function)`` of every command of the parser."""
    found = []

    def walk(parser, words):
        func = parser._defaults.get('func')
        subs = [a for a in parser._actions
                if isinstance(a, cli.argparse._SubParsersAction)]
        for action in subs:
            for name, sub in action.choices.items():
                walk(sub, words + [name])
        if not subs and func is not None:
            found.append((words, func))
    walk(cli.build_parser(), [])
    return sorted(found, key=lambda item: item[0])


LEAVES = _leaf_commands()


#: The fewest arguments argparse accepts for each command (never read:
#: the command's function is replaced).
ARGV = {
    'completion': ['bash'],
    'csar build': ['src', '-o', 'out.zip'],
    'csar check': ['pkg.zip'],
    'demo': [],
    'doctor': [],
    'list': [],
    'logs': ['--params', PARAMS],
    'params check': [PARAMS],
    'render haproxy': ['--params', PARAMS, '-o', '-'],
    'render inventory': ['--params', PARAMS, '-o', 'dir'],
    'run': ['instantiate', '--params', PARAMS],
    'site down': [],
    'site up': [],
    'state check': [],
    'state heals': [],
    'state resume-heals': [],
    'status': ['--params', PARAMS],
}


def test_every_command_is_tried_for_its_warnings():
    assert {' '.join(words) for words, _ in LEAVES} == set(ARGV)


@pytest.mark.parametrize('words, func', LEAVES,
                         ids=[' '.join(w) for w, _ in LEAVES])
def test_each_command_shows_a_driver_warning_escaped(capsys, monkeypatch,
                                                     words, func):
    """Before: Python's last-resort handler printed it raw (under
    pytest, whose handlers are installed, it was not shown at all)."""
    def noisy(args):
        cli.logging.getLogger('mgmt_driver.remote.kubectl').warning(
            '10.0.0.5 cannot run kubectl: %s', TITLE + 'hidden')
        return cli.EXIT_OK
    module = importlib.import_module(func.__module__)
    monkeypatch.setattr(module, func.__name__, noisy)
    assert cli.main(words + ARGV[' '.join(words)]) == cli.EXIT_OK
    out, err = capsys.readouterr()
    assert _obeyable(out + err) == []
    assert '10.0.0.5 cannot run kubectl: \\x1b]0;pwned\\x07hidden' in \
        out + err
    assert (out + err).count('cannot run kubectl') == 1


class _HostilePool(_Pool):
    """Every host answers; every kubectl fails with a window title."""

    def connection(self, address, *args):
        from tests.fakes import FakeConnection
        conn = FakeConnection(address)
        conn.script(r'kubectl', exit_code=1,
                    stderr=TITLE + 'error: the server is gone\n')
        return conn


def test_status_shows_a_masters_kubectl_stderr_escaped(capsys,
                                                       monkeypatch):
    monkeypatch.setattr(cli.ssh, 'ConnectionPool', _HostilePool)
    code = cli.main(['status', '--params', PARAMS, '--topology',
                     str(SAMPLES / 'topology_simple.yaml')])
    assert code == cli.EXIT_REMOTE_FAILURE
    out, err = capsys.readouterr()
    assert _obeyable(out + err) == []
    assert '10.10.0.11 cannot run sudo: Command "sudo -n kubectl' in err
    assert '\\x1b]0;pwned\\x07error: the server is gone' in err


_LAST_RESORT = """
import logging, sys
from mgmt_driver.adapters import cli
def noisy(args):
    logging.getLogger('mgmt_driver.remote.kubectl').warning('said: %%s', %r)
    return 0
cli._params_check = noisy
sys.exit(cli.main(['params', 'check', %r]))
"""


def test_a_warning_outside_pytest_reaches_stderr_escaped():
    """Without pytest's handlers: Python's last-resort handler printed
    the ESC raw before."""
    import subprocess
    import sys
    done = subprocess.run(
        [sys.executable, '-c', _LAST_RESORT % (TITLE, PARAMS)],
        capture_output=True, text=True, check=False,
        cwd=SAMPLES.parent)
    assert done.returncode == 0, done.stderr
    assert _obeyable(done.stderr) == []
    assert done.stderr == ('kubespray-mgmt: WARNING: said: '
                           '\\x1b]0;pwned\\x07\n')


def test_run_shows_a_driver_warning_once_as_a_progress_line(capsys,
                                                            caplog):
    logger = cli.logging.getLogger('mgmt_driver.remote.ssh')
    with cli._terminal_log(debug=False):
        with cli._warnings_shown(cli._progress_printer(), debug=False):
            logger.warning('retrying: %s', TITLE)
        logger.warning('after the run')
    out, err = capsys.readouterr()
    assert 'warning: retrying: \\x1b]0;pwned\\x07' in out
    assert 'retrying' not in err and _obeyable(out + err) == []
    assert err == 'kubespray-mgmt: WARNING: after the run\n'
    # Still propagated: the conductor-side handlers see every record,
    # its arguments escaped by the module's logger (safetext.logger).
    assert [r.getMessage() for r in caplog.records] == [
        'retrying: ' + cli.safetext.clip(TITLE), 'after the run']
