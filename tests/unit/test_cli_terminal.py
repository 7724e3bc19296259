"""What kubespray-mgmt prints from remote hosts reaches the terminal
escaped: log lines, progress lines, error messages and status reports
can show a hostile Ansible server's control sequences, never obey them."""

import pathlib

import pytest

from mgmt_driver import cli
from mgmt_driver import exceptions

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
        cli.logging.getLogger('mgmt_driver.ssh').warning(
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
