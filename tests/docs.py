"""Where the tests find the documentation's pages and sections."""

import os
import pathlib
import re
import shlex

import yaml

ROOT = pathlib.Path(__file__).parents[1]
SOURCE = ROOT / 'doc' / 'source'


def page(name):
    """The text of the page *name* of the Sphinx tree (``admin/cli``)."""
    return (SOURCE / ('%s.rst' % name)).read_text()


def section(name, title, underline='-'):
    """The text of section *title* of page *name*, up to two blank lines.

    :raises IndexError: when the page has no such section.
    """
    marker = '\n%s\n%s\n' % (title, underline * len(title))
    return page(name).split(marker, 1)[1].split('\n\n\n', 1)[0]


# --- the command blocks the kept site runs (``:class: site``) -------------

#: The instance the kept site instantiates (mgmt_localsite.kept).
SITE_INSTANCE = 'demo'


def shell_blocks(text):
    """``(classes, commands)`` of every ``.. code-block:: shell`` of
    *text*, in order: *classes* the words of its ``:class:``, *commands*
    its lines joined at a trailing backslash, without comment lines.
    (A reader of its own, so that the functional tests need no
    docutils; ``tests/unit/test_docs.py`` checks it against docutils.)"""
    found, lines = [], text.splitlines()
    for at, line in enumerate(lines):
        if line.strip() != '.. code-block:: shell':
            continue
        indent = len(line) - len(line.lstrip())
        classes, body, n = [], [], at + 1
        while n < len(lines) and lines[n].strip().startswith(':'):
            if lines[n].strip().startswith(':class:'):
                classes = lines[n].split(':class:', 1)[1].split()
            n += 1
        for rest in lines[n:]:
            if rest.strip() and len(rest) - len(rest.lstrip()) <= indent:
                break
            body.append(rest)
        found.append((classes, _commands(body)))
    return found


def _commands(body):
    joined, current = [], ''
    for line in body:
        part = line.strip()
        if not part or (part.startswith('#') and not current):
            continue
        current += part[:-1].rstrip() + ' ' if part.endswith('\\') else part
        if not part.endswith('\\'):
            joined.append(current)
            current = ''
    return joined


def site_commands():
    """``(page, command)`` of every ``site`` block of the Sphinx tree,
    pages in name order, commands in page order: the order the kept
    site runs them (``contributor/testing``, "Commands in the docs")."""
    found = []
    for path in sorted(SOURCE.rglob('*.rst')):
        name = str(path.relative_to(SOURCE))
        for classes, commands in shell_blocks(path.read_text()):
            if 'site' in classes:
                found += [(name, command) for command in commands]
    return found


def site_argv(command, site, nodes):
    """The runs of one ``site`` command on the kept site: a list of
    ``(argv without the program name, expected exit code)``.

    The substitution rule (``contributor/testing``): a trailing ``#``
    comment is dropped, ``# exit N`` in it is the exit code expected
    (else 0); a line with optional ``[...]`` parts runs with all of them,
    then with none; the value of ``--config-file``, ``--params`` and
    ``--topology`` becomes the site's file, of ``--instance-id`` the
    site's instance, of ``--output-file`` (``-o`` a path) a file of that
    name in *site*'s scratch directory, and a node name of the samples'
    topology in ``--nodes`` the site's node at its place (*nodes*).

    :param site: ``{'config', 'params', 'topology', 'scratch'}`` paths.
    :raises ValueError: the line is not a ``kubespray-mgmt`` command,
        or names a node *nodes* does not map.
    """
    words, _, comment = command.partition(' #')
    code = re.search(r'exit (\d+)', comment)
    expected = int(code.group(1)) if code else 0
    optional = re.findall(r'\[([^][]*)\]', words)
    variants = [re.sub(r'\[([^][]*)\]', r'\1', words)]
    if optional:
        variants.append(re.sub(r'\s*\[[^][]*\]', '', words))
    return [(_substituted(shlex.split(v), site, nodes), expected)
            for v in variants]


_SITE_FILES = {'--config-file': 'config', '--params': 'params',
               '--topology': 'topology'}


def _substituted(argv, site, nodes):
    if argv[:1] != ['kubespray-mgmt']:
        raise ValueError('not a kubespray-mgmt command: %s' % argv)
    out = list(argv[1:])
    for at in range(len(out) - 1):
        option, value = out[at], out[at + 1]
        if option in _SITE_FILES:
            out[at + 1] = str(site[_SITE_FILES[option]])
        elif option == '--instance-id':
            out[at + 1] = SITE_INSTANCE
        elif option == '--output-file' or (option == '-o' and
                                           value not in ('json', 'text')):
            out[at + 1] = os.path.join(str(site['scratch']),
                                       os.path.basename(value))
        elif option == '--nodes':
            out[at + 1] = ','.join(_node(n, nodes) for n in value.split(','))
    return out


def _node(name, nodes):
    try:
        return nodes[name]
    except KeyError:
        raise ValueError('node %s: not in the samples\' topology the site '
                         'maps (%s)' % (name, ', '.join(nodes))) from None


def sample_nodes(site_topology):
    """The samples' node names (``samples/topology_simple.yaml``) mapped
    to the site's (*site_topology*, a parsed topology), by role and
    place."""
    sample = yaml.safe_load((ROOT / 'samples' / 'topology_simple.yaml')
                            .read_text())
    mapped = {}
    for role, prefix in (('masters', 'master'), ('workers', 'worker')):
        for ours, theirs in zip(sample[role], site_topology[role],
                                strict=False):
            mapped['%s-%s' % (prefix, ours['ssh_ip'].replace('.', '-'))] = \
                '%s-%s' % (prefix, theirs['ssh_ip'].replace('.', '-'))
    return mapped
