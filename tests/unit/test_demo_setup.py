"""``tools/demo`` says each setup step and skips the ones already done
(issue 41: it was silent for its whole install and reinstalled every
run).  It runs in a copy of the repository's layout with stub
``dpkg-query``, ``apt-get``, ``python3``, ``pip`` and ``kubespray-mgmt``
first on the PATH, which record their calls."""

import os
import pathlib
import shutil
import subprocess

REPO = pathlib.Path(__file__).parents[2]

# Every stub appends its name and arguments to $CALLS.
STUB = '#!/bin/sh\necho "%s $*" >> "$CALLS"\n'
DPKG_QUERY = STUB % 'dpkg-query' + 'echo "install ok installed"\n'
# python3 -m venv DIR makes DIR/bin with stub python, pip, kubespray-mgmt.
PYTHON3 = STUB % 'python3' + '''
[ "$1" = -m ] || exit 0
mkdir -p "$3/bin"
for tool in python pip kubespray-mgmt; do
    printf '#!/bin/sh\\necho "%s $*" >> "$CALLS"\\n' "$tool" > "$3/bin/$tool"
    chmod +x "$3/bin/$tool"
done
'''


def _tree(tmp_path):
    """A copy of the layout tools/demo reads, with stubs on a bin dir."""
    root = tmp_path / 'repo'
    (root / 'tools').mkdir(parents=True)
    for tool in ('demo', 'host-packages'):
        shutil.copy(REPO / 'tools' / tool, root / 'tools' / tool)
    for name in ('setup.py', 'setup.cfg', 'requirements.txt',
                 'mgmt_driver/__init__.py', 'localsite-dist/setup.py'):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text('# %s\n' % name)
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    stubs = {'dpkg-query': DPKG_QUERY, 'python3': PYTHON3,
             'apt-get': STUB % 'apt-get', 'sudo': STUB % 'sudo'}
    for name, text in stubs.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return root, bin_dir


def _run(root, bin_dir, calls):
    calls.write_text('')
    env = dict(os.environ, CALLS=str(calls),
               PATH='%s:%s' % (bin_dir, os.environ['PATH']))
    done = subprocess.run([str(root / 'tools' / 'demo'), '--masters', '1'],
                          env=env, capture_output=True, text=True,
                          timeout=60, check=True)
    return done.stdout, calls.read_text().splitlines()


def _installs(calls):
    return [c for c in calls
            if c.startswith(('pip ', 'apt-get ', 'python3 -m venv'))]


def test_second_run_installs_nothing_and_says_so(tmp_path):
    root, bin_dir = _tree(tmp_path)
    calls = tmp_path / 'calls'
    out, first = _run(root, bin_dir, calls)
    assert 'creating the virtualenv .venv-demo' in out
    assert 'pip install' in out
    assert [c.split()[0] for c in _installs(first)] == ['python3', 'pip']
    out, second = _run(root, bin_dir, calls)
    assert _installs(second) == []
    assert 'host-packages: nothing to install' in out
    assert 'virtualenv .venv-demo already there' in out
    assert 'already installed in .venv-demo' in out
    assert second[-1] == 'kubespray-mgmt demo --masters 1'


def test_a_changed_module_is_installed_again(tmp_path):
    """The install is not editable: a changed source must reach the venv."""
    root, bin_dir = _tree(tmp_path)
    calls = tmp_path / 'calls'
    _run(root, bin_dir, calls)
    (root / 'mgmt_driver' / '__init__.py').write_text('# changed\n')
    out, again = _run(root, bin_dir, calls)
    assert [c.split()[0] for c in _installs(again)] == ['pip']
    assert 'pip install' in out
