"""Every reStructuredText file of the repository is valid, and every
command the documentation shows is run by a test or marked an example.

GitHub and PyPI render the files outside ``doc/source/`` with docutils,
not Sphinx: a Sphinx role (``:mod:``), a broken table or a bad title
underline shows as an error block, or the whole file as raw text.  The
Sphinx tree in ``doc/source/`` is built by ``tox -e docs`` with warnings
as errors; here it is parsed by docutils with the few Sphinx roles and
directives it uses stubbed, so that a broken table or title fails the
unit tests already.

Commands (``contributor/testing``, "Commands in the docs"): a literal
block that shows commands is a ``.. code-block:: shell`` with
``:class: example`` (shown, not run) or ``:class: run`` (every line is
run here, by ``kubespray-mgmt``'s own ``main``, from the repository's
root, and must exit 0).  Other literal blocks (output, config files,
JSON) are ``.. code-block:: text`` and must not start with a command.
The only plain ``::`` blocks are the README's two quick-start commands,
which CI runs (``.ci/run`` is ``tools/run-tests``; ``tools/demo`` runs
``kubespray-mgmt demo``, which ``tests/functional/test_demo.py`` runs).
"""

import contextlib
import io
import pathlib
import shlex
import subprocess

import docutils.core
import pytest
from docutils import nodes
from docutils.parsers import rst
from docutils.parsers.rst import directives
from docutils.parsers.rst import roles

ROOT = pathlib.Path(__file__).parents[2]
SOURCE = 'doc/source/'

#: The quick start's two commands, the only plain literal blocks.
QUICK_START = ('tools/demo', 'tools/run-tests')

#: First words that make a literal block a command (and ``tools/...``,
#: an absolute path).
COMMANDS = ('kubespray-mgmt', 'sudo', 'openstack', 'pip', 'install', 'echo',
            'tox', 'python', 'userdel', 'etcdutl', 'source', 'systemctl',
            'mv', 'chown', 'scp', 'cd', 'ansible-playbook', 'kubectl')


def _tracked_rst():
    listed = subprocess.run(['git', 'ls-files', '*.rst'], cwd=ROOT,
                            capture_output=True, text=True, check=False)
    names = listed.stdout.split() if listed.returncode == 0 else [
        str(p.relative_to(ROOT)) for p in ROOT.rglob('*.rst')
        if '.tox' not in p.parts]
    return sorted(names)


class _SphinxOnly(rst.Directive):
    """A Sphinx directive, accepted as is (tox -e docs checks it)."""

    has_content = True
    optional_arguments = 1
    final_argument_whitespace = True
    option_spec = None

    def run(self):
        return []


def _sphinx_role(name, rawtext, text, lineno, inliner, options=None,
                 content=None):
    return [nodes.literal(rawtext, text)], []


@contextlib.contextmanager
def _sphinx_stubs():
    """The tree's Sphinx roles and directives, for one parse only (so
    that they stay unknown in the files GitHub renders)."""
    saved = dict(directives._directives), dict(roles._roles)
    try:
        for name in ('toctree', 'show-options', 'cli-reference',
                     'literalinclude'):
            directives.register_directive(name, _SphinxOnly)
        for name in ('doc', 'ref', 'download'):
            roles.register_local_role(name, _sphinx_role)
        yield
    finally:
        directives._directives.clear()
        directives._directives.update(saved[0])
        roles._roles.clear()
        roles._roles.update(saved[1])


def _doctree(text, name):
    stream = io.StringIO()
    stubs = (_sphinx_stubs() if name.startswith(SOURCE)
             else contextlib.nullcontext())
    with stubs:
        tree = docutils.core.publish_doctree(
            text, source_path=str(ROOT / name), settings_overrides={
                'warning_stream': stream, 'report_level': 2,
                'halt_level': 5})
    return tree, stream.getvalue()


def _problems(text, name):
    return _doctree(text, name)[1]


@pytest.mark.parametrize('name', _tracked_rst())
def test_the_file_is_valid_restructuredtext(name):
    assert _problems((ROOT / name).read_text(), name) == ''


def test_a_sphinx_role_is_reported():
    assert 'Unknown interpreted text role "mod"' in _problems(
        'See :mod:`mgmt_driver.state.follow`.\n', 'x.rst')


def test_a_sphinx_role_is_reported_in_the_sphinx_tree_too():
    """Only the roles the tree uses are stubbed."""
    assert 'Unknown interpreted text role "mod"' in _problems(
        'See :mod:`mgmt_driver.state.follow`.\n', SOURCE + 'x.rst')


# --- commands shown in the docs -------------------------------------------

def _blocks(name, text=None):
    text = (ROOT / name).read_text() if text is None else text
    tree, _ = _doctree(text, name)
    return [(block['classes'], block.astext())
            for block in tree.findall(nodes.literal_block)]


def _is_command(text):
    lines = [line.strip() for line in text.splitlines()]
    first = next((line for line in lines
                  if line and not line.startswith('#')), '')
    word = first.split()[0] if first else ''
    return word in COMMANDS or word.startswith(('tools/', '/'))


def _misplaced(name, text=None):
    """The first line of every literal block of *name* that breaks the
    convention."""
    found = []
    for classes, block in _blocks(name, text):
        if not classes:
            ok = name == 'README.rst' and block in QUICK_START
        elif 'shell' in classes:
            ok = ('example' in classes) != ('run' in classes)
        else:
            ok = not _is_command(block)
        if not ok:
            found.append(block.splitlines()[0])
    return found


def _documentation():
    """The README and the pages of the Sphinx tree, with the files they
    include."""
    return [name for name in _tracked_rst() if name in (
        'README.rst', 'samples/README.rst',
        'localsite-dist/mgmt_localsite/README.rst') or name.startswith(SOURCE)]


@pytest.mark.parametrize('name', _documentation())
def test_every_command_is_run_or_marked_as_an_example(name):
    assert _misplaced(name) == []


@pytest.mark.parametrize('text', [
    'Run::\n\n    kubespray-mgmt list\n',
    '.. code-block:: shell\n\n   kubespray-mgmt list\n',
    ('.. code-block:: shell\n   :class: run example\n\n'
     '   kubespray-mgmt list\n'),
    '.. code-block:: text\n\n   sudo -u tacker kubespray-mgmt list\n',
    'Not in the README::\n\n    tools/demo\n'])
def test_an_unmarked_command_is_found(text):
    assert _misplaced(SOURCE + 'x.rst', text) == [text.split('\n')[-2].strip()]


def test_a_marked_example_and_output_pass():
    text = ('.. code-block:: shell\n   :class: example\n\n'
            '   kubespray-mgmt list\n\n.. code-block:: text\n\n'
            '   INSTANCE  VIM\n')
    assert _misplaced(SOURCE + 'x.rst', text) == []


def _run_blocks():
    commands = []
    for name in _documentation():
        for classes, text in _blocks(name):
            if 'run' in classes:
                commands += [(name, line) for line in text.splitlines()
                             if line.strip()]
    return commands


@pytest.mark.parametrize('name, command', _run_blocks())
def test_each_command_marked_run_succeeds(name, command, monkeypatch,
                                          capsys):
    from mgmt_driver.adapters import cli
    argv = shlex.split(command)
    assert argv[0] == 'kubespray-mgmt', (name, command)
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv('KUBESPRAY_MGMT_CONFIG_FILES', raising=False)
    code = cli.main(argv[1:])
    assert code == 0, (name, command, capsys.readouterr())


def test_some_command_is_marked_run():
    assert len(_run_blocks()) >= 5
