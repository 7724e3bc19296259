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
``:class: example`` (shown, not run), ``:class: run`` (every line is
run here, by ``kubespray-mgmt``'s own ``main``, from the repository's
root, and must exit 0) or ``:class: site`` (run in order on the kept
site by ``tests/functional/test_kept_site.py``; here each is checked to
be a ``kubespray-mgmt`` command the substitution rule can map).  An
``example`` block holds only commands a test cannot run: another
program than ``kubespray-mgmt`` (``openstack``, ``sudo``...), a
synopsis (``|``, ``...``, a word in capitals for a value), ``site`` or
``demo`` (they start a site of their own: the kept site's fixture and
``test_demo.py`` run them), or a ``# example: WHY`` comment after it or
as the block's first line.  Other literal blocks (output, config files,
JSON) are ``.. code-block:: text`` and must not start with a command.
The only plain ``::`` blocks are the README's two quick-start commands,
which CI runs (``.ci/run`` is ``tools/run-tests``; ``tools/demo`` runs
``kubespray-mgmt demo``, which ``tests/functional/test_demo.py`` runs).
"""

import contextlib
import io
import pathlib
import re
import shlex
import subprocess

import docutils.core
import pytest
from docutils import nodes
from docutils.parsers import rst
from docutils.parsers.rst import directives
from docutils.parsers.rst import roles

from tests import docs

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


#: The classes of a command block: shown only, run here, run on the site.
KINDS = ('example', 'run', 'site')

RULE = 'mark it site or run, or say why: # example: WHY'

#: What makes a ``kubespray-mgmt`` line a synopsis, not a command: an
#: alternative, an ellipsis, or a value in capitals (``--params P``).
SYNOPSIS = re.compile(r'\||\.\.\.|(?:^| )[A-Z][A-Z0-9_.%]*(?= |\]|$)')

#: Subcommands that start a site of their own (run by the kept site's
#: fixture and tests/functional/test_demo.py, never inside it).
OWN_SITE = ('site', 'demo')


class _AnyNode(dict):
    def __missing__(self, name):
        return name


#: A site for the substitution of lines that are only read here.
_NO_SITE = {'config': 'c.conf', 'params': 'p.json', 'topology': 't.yaml',
            'scratch': 'scratch'}


def _runnable_examples(block):
    """The commands of an ``example`` block a test could run: a
    ``kubespray-mgmt`` line that starts no site of its own, gives no
    ``# example:`` reason, and is no synopsis once the kept site's
    substitution (``tests/docs.site_argv``) has filled in its values."""
    found, lines = [], block.strip().splitlines()
    if lines and lines[0].startswith('# example:'):
        return found  # the reason of the whole block
    for command in docs._commands(lines):
        words, _, comment = command.partition(' #')
        argv = words.split()
        verb = next((w for w in argv[1:] if not w.startswith('-') and
                     not w.endswith('.conf')), '')
        if argv[:1] != ['kubespray-mgmt'] or verb in OWN_SITE or \
                'example:' in comment or SYNOPSIS.search(words.replace(
                    '[', ' ').replace(']', ' ')) and SYNOPSIS.search(
                    ' '.join(docs.site_argv(words, _NO_SITE,
                                            _AnyNode())[0][0])):
            continue
        found.append(command)
    return found


def _misplaced(name, text=None):
    """The first line of every literal block of *name* that breaks the
    convention."""
    found = []
    for classes, block in _blocks(name, text):
        if not classes:
            ok = name == 'README.rst' and block in QUICK_START
        elif 'shell' in classes:
            ok = len(set(classes) & set(KINDS)) == 1
            if ok and 'example' in classes:
                found += ['%s (not run, and no reason: %s)' % (c, RULE)
                          for c in _runnable_examples(block)]
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
            '   sudo -u tacker kubespray-mgmt list\n\n.. code-block:: text\n\n'
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


# --- the kept site's commands (``:class: site``) --------------------------

#: The kept site's topology as tests/functional/test_kept_site.py has it.
_KEPT = {'masters': [{'ssh_ip': '127.0.52.221'}],
         'workers': [{'ssh_ip': '127.0.52.231'}],
         'external_lb': {'ssh_ip': '127.0.52.211'}}


@pytest.mark.parametrize('text, found', [
    ('.. code-block:: shell\n   :class: example\n\n'
     '   kubespray-mgmt status --params p.json --instance-id ID\n',
     ['kubespray-mgmt status --params p.json --instance-id ID']),
    ('.. code-block:: shell\n   :class: example\n\n'
     '   kubespray-mgmt run heal --nodes worker-10-10-0-21 \\\n'
     '       --params params.json\n',
     ['kubespray-mgmt run heal --nodes worker-10-10-0-21 --params '
      'params.json']),
    ('.. code-block:: shell\n   :class: example\n\n'
     '   kubespray-mgmt status --params p.json  # example: needs a VIM\n',
     []),
    ('.. code-block:: shell\n   :class: example\n\n'
     '   # example: needs Tacker\n   kubespray-mgmt list\n', []),
    ('.. code-block:: shell\n   :class: example\n\n'
     '   kubespray-mgmt run OPERATION --params P\n'
     '   kubespray-mgmt render inventory|haproxy --params p.json\n'
     '   kubespray-mgmt site up --workers 2\n'
     '   sudo -u tacker kubespray-mgmt list\n'
     '   openstack vnflcm show <VNF_ID>\n', [])])
def test_an_example_a_test_could_run_is_found(text, found):
    assert _misplaced(SOURCE + 'x.rst', text) == [
        '%s (not run, and no reason: %s)' % (c, RULE) for c in found]


def test_a_block_of_two_kinds_is_found():
    text = ('.. code-block:: shell\n   :class: site example\n\n'
            '   kubespray-mgmt list\n')
    assert _misplaced(SOURCE + 'x.rst', text) == ['kubespray-mgmt list']


@pytest.mark.parametrize('name', _documentation())
def test_the_functional_tests_read_the_blocks_as_docutils_does(name):
    """tests/docs.py reads the shell blocks without docutils (the
    functional environment has none)."""
    text = (ROOT / name).read_text()
    # docutils follows ``.. include::``, tests/docs.py does not: the
    # included files (outside the tree) hold no site block.
    kinds = KINDS if '.. include::' not in text else ('site',)
    ours = [(sorted(set(c) & set(kinds)), commands)
            for c, commands in docs.shell_blocks(text) if set(c) & set(kinds)]
    theirs = [(sorted(set(c) & set(kinds)),
               docs._commands(block.splitlines()))
              for c, block in _blocks(name)
              if 'shell' in c and set(c) & set(kinds)]
    assert ours == theirs


def test_every_site_command_maps_onto_the_kept_site():
    site = {'config': 'c', 'params': 'p', 'topology': 't', 'scratch': 's'}
    nodes = docs.sample_nodes(_KEPT)
    commands = docs.site_commands()
    assert len(commands) >= 20
    for _, command in commands:
        for argv, _ in docs.site_argv(command, site, nodes):
            assert not any(w in ('ID', 'P', 'T') or w.startswith(
                ('worker-10-', 'master-10-', '[')) for w in argv), argv
    # The site's last command ends it (tests/functional/test_kept_site).
    assert commands[-1][1].startswith('kubespray-mgmt run terminate')


def test_the_substitution_rule():
    site = {'config': '/s/c.conf', 'params': '/s/p.json',
            'topology': '/s/t.yaml', 'scratch': '/x'}
    nodes = docs.sample_nodes(_KEPT)
    assert docs.site_argv(
        'kubespray-mgmt --config-file /etc/tacker/tacker.conf run heal '
        '--nodes worker-10-10-0-21 --params a.json --topology b.yaml '
        '--instance-id ID [--dry-run]  # exit 3', site, nodes) == [
        (['--config-file', '/s/c.conf', 'run', 'heal', '--nodes',
          'worker-127-0-52-231', '--params', '/s/p.json', '--topology',
          '/s/t.yaml', '--instance-id', 'demo', '--dry-run'], 3),
        (['--config-file', '/s/c.conf', 'run', 'heal', '--nodes',
          'worker-127-0-52-231', '--params', '/s/p.json', '--topology',
          '/s/t.yaml', '--instance-id', 'demo'], 3)]
    assert docs.site_argv('kubespray-mgmt render inventory --output-file '
                          '/tmp/inventory -o json', site, nodes) == [
        (['render', 'inventory', '--output-file', '/x/inventory', '-o',
          'json'], 0)]
    with pytest.raises(ValueError, match='worker-10-10-0-22'):
        docs.site_argv('kubespray-mgmt run heal --nodes worker-10-10-0-22',
                       site, nodes)
