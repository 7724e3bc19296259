"""The package's layers: each imports only the layers below it.

``python -m pytest tests/unit/test_layers.py`` prints the layer graph
(which layer imports which, and how many imports make each edge).  The
layers and their rules are written in ``doc/source/contributor/layers.rst``;
this test is what keeps the tree and that page true.
"""

import ast
import collections
import importlib
import pathlib
import warnings

import pytest

import mgmt_driver

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / 'mgmt_driver'

#: The layers, bottom first: a module may import its own layer and those
#: before it in this list, never one after it.
LAYERS = ('common', 'model', 'state', 'remote', 'session', 'operations',
          'adapters')
#: Modules at the package's root: the Tacker shim, an adapter that must
#: keep its path and its bytes, and the package itself.
ROOT_MODULES = {'mgmt_driver': 'common', 'mgmt_driver.kubespray_mgmt':
                'adapters'}
#: Folders of files the driver ships rather than imports: the scripts a
#: VNF package carries (``csar build`` copies them) are adapters too.
SHIPPED = {'templates': 'adapters'}


def _modules():
    found = {}
    for path in sorted(PACKAGE.rglob('*.py')):
        parts = path.relative_to(ROOT).with_suffix('').parts
        if parts[-1] == '__init__':
            parts = parts[:-1]
        found['.'.join(parts)] = path
    return found


def _layer(module):
    if module in ROOT_MODULES:
        return ROOT_MODULES[module]
    parts = module.split('.')
    if len(parts) > 2 and parts[1] in SHIPPED:
        return SHIPPED[parts[1]]
    return parts[1] if len(parts) >= 2 and parts[1] in LAYERS else None


def _imports(path, modules):
    """The package's modules that *path* imports (at any depth of the
    file: a function's import counts too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and \
                node.module.split('.')[0] == 'mgmt_driver':
            for alias in node.names:
                name = '%s.%s' % (node.module, alias.name)
                if name in modules:
                    found.add(name)
                elif node.module == 'mgmt_driver' and \
                        alias.name in mgmt_driver.MOVED:
                    found.add(mgmt_driver.MOVED[alias.name][0])
                else:
                    found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
    return found


@pytest.fixture(scope='module')
def graph():
    modules = _modules()
    return {name: _imports(path, modules) - {name}
            for name, path in modules.items()}


def _layer_edges(graph):
    edges = collections.Counter()
    for name, deps in graph.items():
        for dep in deps:
            if _layer(name) != _layer(dep):
                edges[_layer(name), _layer(dep)] += 1
    return edges


def test_print_the_layer_graph(graph, capsys):
    edges = _layer_edges(graph)
    lines = ['', 'layer graph (top first; "-> layer (imports)"):']
    for layer in reversed(LAYERS):
        count = sum(1 for m in graph if _layer(m) == layer)
        below = ['%s (%d)' % (dep, n) for (src, dep), n in
                 sorted(edges.items(), key=lambda e: LAYERS.index(e[0][1]))
                 if src == layer]
        lines.append('  %-10s %2d modules -> %s'
                     % (layer, count, ', '.join(below) or 'nothing'))
    with capsys.disabled():
        print('\n'.join(lines))
    assert set(_layer(m) for m in graph) == set(LAYERS)


def test_every_module_is_in_a_layer(graph):
    assert [m for m in graph if _layer(m) is None] == []


def test_no_layer_imports_a_layer_above_it(graph):
    upward = sorted('%s imports %s' % (name, dep)
                    for name, deps in graph.items() for dep in deps
                    if LAYERS.index(_layer(dep)) > LAYERS.index(_layer(name)))
    assert upward == []


def test_the_checker_sees_an_upward_import():
    # The rule itself can fail: a model module that imported a session
    # module would be reported.
    fake = {'mgmt_driver.model.x': {'mgmt_driver.session.driver'},
            'mgmt_driver.session.driver': set()}
    assert [(n, d) for n, deps in fake.items() for d in deps
            if LAYERS.index(_layer(d)) > LAYERS.index(_layer(n))] == [
        ('mgmt_driver.model.x', 'mgmt_driver.session.driver')]


def _cycle(graph):
    """One import cycle of *graph* as a list of nodes, or None."""
    state = {}

    def visit(name, stack):
        state[name] = 'open'
        stack.append(name)
        for dep in sorted(graph.get(name, ())):
            if state.get(dep) == 'open':
                return stack[stack.index(dep):] + [dep]
            if dep not in state:
                found = visit(dep, stack)
                if found:
                    return found
        state[name] = 'done'
        stack.pop()
        return None

    for name in sorted(graph):
        if name not in state:
            found = visit(name, [])
            if found:
                return found
    return None


def test_no_cycle_between_layers(graph):
    layers = collections.defaultdict(set)
    for (src, dep) in _layer_edges(graph):
        layers[src].add(dep)
    assert _cycle(layers) is None


def test_no_cycle_between_modules(graph):
    assert _cycle(graph) is None
    assert _cycle({'a': {'b'}, 'b': {'c'}, 'c': {'a'}}) == \
        ['a', 'b', 'c', 'a']


def test_the_runtime_never_imports_the_test_site():
    users = sorted(str(path.relative_to(ROOT)) for path in
                   PACKAGE.rglob('*.py') for node in
                   ast.walk(ast.parse(path.read_text()))
                   if isinstance(node, (ast.Import, ast.ImportFrom)) and
                   any((getattr(node, 'module', None) or a.name)
                       .startswith('mgmt_localsite') for a in node.names))
    assert users == []


def test_only_the_shim_names_the_old_paths():
    old = sorted('%s: %s' % (path.relative_to(ROOT), alias.name)
                 for path in PACKAGE.rglob('*.py')
                 for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.ImportFrom) and
                 node.module == 'mgmt_driver' for alias in node.names
                 if alias.name != 'DRIVER_NAME')
    assert old == ['mgmt_driver/adapters/csar.py: kubespray_mgmt',
                   'mgmt_driver/kubespray_mgmt.py: driver',
                   'mgmt_driver/kubespray_mgmt.py: tacker_compat']


@pytest.mark.parametrize('name', sorted(mgmt_driver.MOVED))
def test_an_old_path_still_imports_its_module(name, monkeypatch):
    path, deprecated = mgmt_driver.MOVED[name]
    monkeypatch.delitem(vars(mgmt_driver), name, raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        module = getattr(mgmt_driver, name)
    assert module is importlib.import_module(path)
    said = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert len(said) == (1 if deprecated else 0)
    if deprecated:
        assert path in str(said[0].message)


def test_an_unknown_name_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match='no attribute'):
        mgmt_driver.no_such_module  # noqa: B018
