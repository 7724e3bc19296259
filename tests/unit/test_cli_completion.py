"""kubespray-mgmt completion bash: the script, loaded in a real bash."""

import contextlib
import io
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from mgmt_driver.adapters import cli

BASH = shutil.which('bash')


@pytest.fixture(scope='module')
def script(tmp_path_factory):
    """The generated completion script, in a file."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(['completion', 'bash']) == cli.EXIT_OK
    path = tmp_path_factory.mktemp('completion') / 'kubespray-mgmt.bash'
    path.write_text(out.getvalue())
    return path


def complete(script, line, cwd=None):
    """What bash offers for the last word of *line* (may be empty)."""
    words = line.split(' ')
    program = '''
source %(script)s
function=$(complete -p kubespray-mgmt | sed -n 's/.*-F \\([^ ]*\\).*/\\1/p')
[ -n "$function" ] || { echo "no completion function" >&2; exit 3; }
COMP_WORDS=(%(words)s)
COMP_CWORD=%(cword)d
COMP_LINE=%(line)s
COMP_POINT=${#COMP_LINE}
"$function" kubespray-mgmt %(current)s %(previous)s
printf '%%s\\n' "${COMPREPLY[@]}"
''' % {'script': shlex.quote(str(script)),
       'words': ' '.join(shlex.quote(w) for w in words),
       'cword': len(words) - 1, 'line': shlex.quote(line),
       'current': shlex.quote(words[-1]),
       'previous': shlex.quote(words[-2])}
    result = subprocess.run([BASH, '--norc', '--noprofile', '-c', program],
                            capture_output=True, text=True, timeout=60,
                            cwd=cwd)
    assert result.returncode == 0, result.stderr
    return [w.strip() for w in result.stdout.splitlines() if w.strip()]


pytestmark = pytest.mark.skipif(BASH is None,
                                reason='optional: no bash on this host')


def test_the_script_registers_a_function(script):
    text = script.read_text()
    assert re.search(r'complete .*-F \S+ kubespray-mgmt', text)


def test_commands_complete(script):
    assert complete(script, 'kubespray-mgmt st') == ['state', 'status']
    offered = complete(script, 'kubespray-mgmt ')
    for command in ('params', 'render', 'run', 'status', 'csar', 'demo',
                    'completion'):
        assert command in offered


def test_options_of_a_subcommand_complete(script):
    offered = complete(script, 'kubespray-mgmt status --')
    for option in ('--params', '--topology', '--instance-id', '--output'):
        assert option in offered
    assert '--dry-run' not in offered  # a run option
    assert complete(script, 'kubespray-mgmt status --output ') == [
        'text', 'json']
    assert 'scale-out' in complete(script, 'kubespray-mgmt run sc')


def test_paths_complete_as_files_or_directories(script, tmp_path):
    (tmp_path / 'params.json').write_text('{}')
    (tmp_path / 'package').mkdir()
    # Files, and directories to walk into.
    assert sorted(complete(script, 'kubespray-mgmt status --params p',
                           tmp_path)) == ['package', 'params.json']
    assert complete(script, 'kubespray-mgmt run heal --package-dir p',
                    tmp_path) == ['package']
    assert 'params.json' in complete(
        script, 'kubespray-mgmt --config-file p', tmp_path)
    assert complete(script, 'kubespray-mgmt status --instance-id p',
                    tmp_path) == []


def test_without_shtab_a_clear_error(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, 'shtab', None)
    assert cli.main(['completion', 'bash']) == cli.EXIT_BAD_INPUT
    assert 'needs the shtab package' in capsys.readouterr().err


# --- zsh (issue 31, feature 6) ----------------------------------------------

ZSH = shutil.which('zsh')


def _zsh(program):
    """Run *program* in a real zsh with compinit loaded."""
    result = subprocess.run(
        [ZSH, '-f', '-c', 'autoload -Uz compinit && compinit -u -D\n' +
         program], capture_output=True, text=True, timeout=60)
    return result


@pytest.mark.skipif(ZSH is None, reason='optional: no zsh on this host '
                                        '(tools/host-packages installs it)')
def test_zsh_completion_offers_every_command_and_option(tmp_path):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(['completion', 'zsh']) == cli.EXIT_OK
    path = tmp_path / '_kubespray-mgmt'
    path.write_text(out.getvalue())
    assert out.getvalue().startswith('#compdef kubespray-mgmt\n')
    assert _zsh('zsh -n %s' % shlex.quote(str(path))).returncode == 0
    # Stand in for _describe (it draws the menu): print what it is given.
    result = _zsh('source %s 2>/dev/null\n'
                  '_describe() { print -rl -- "${(@P)2}" }\n'
                  '_shtab_kubespray_mgmt_commands\n'
                  'print -rl -- "${_shtab_kubespray_mgmt_run_options[@]}"'
                  % shlex.quote(str(path)))
    offered = {line.split(':', 1)[0] for line in result.stdout.splitlines()}
    assert {'doctor', 'run', 'status', 'logs', 'demo', 'completion'} \
        <= offered, result.stderr
    assert any(line.startswith('--dry-run[')
               for line in result.stdout.splitlines())
