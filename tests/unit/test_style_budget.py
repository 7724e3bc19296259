"""The package's size budget (issue 38 item 4; STYLE.md, "Our own code
as a model"): a small session, short functions, documented public ones.

A function's length is its lines from ``def`` to its last line,
docstring included, as ``ast`` gives them; the scripts a VNF package
ships (``mgmt_driver/templates/``) are not the package's code.
"""

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / 'mgmt_driver'

#: ``ClusterDriver``, the session, at most this many lines: new steps
#: belong in ``operations``.
MAX_SESSION = 600
#: No function longer than this.
MAX_FUNCTION = 60
#: The 90th percentile of function lengths, at most.
MAX_P90 = 22
#: Public functions with a docstring, at least this share.
MIN_DOCUMENTED = 0.80


def _trees():
    return {path: ast.parse(path.read_text())
            for path in sorted(PACKAGE.rglob('*.py'))
            if 'templates' not in path.relative_to(PACKAGE).parts}


def _functions():
    return [(path, node) for path, tree in _trees().items()
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _length(node):
    return node.end_lineno - node.lineno + 1


def test_the_session_stays_small():
    sessions = [node for tree in _trees().values() for node in ast.walk(tree)
                if isinstance(node, ast.ClassDef) and
                node.name == 'ClusterDriver']
    assert len(sessions) == 1
    assert _length(sessions[0]) <= MAX_SESSION


def test_no_function_is_longer_than_the_limit():
    long = sorted('%s:%d %s (%d lines)' % (path.relative_to(PACKAGE),
                                           node.lineno, node.name,
                                           _length(node))
                  for path, node in _functions()
                  if _length(node) > MAX_FUNCTION)
    assert long == []


def test_nine_functions_in_ten_are_short():
    lengths = sorted(_length(node) for _, node in _functions())
    p90 = lengths[int(len(lengths) * 0.9)]
    assert p90 <= MAX_P90, (
        'p90 %d lines; the longest: %s' % (p90, lengths[-10:]))


def test_public_functions_are_documented():
    public = [node for _, node in _functions()
              if not node.name.startswith('_')]
    documented = sum(1 for node in public if ast.get_docstring(node))
    assert documented / len(public) >= MIN_DOCUMENTED
