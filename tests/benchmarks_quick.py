"""Running the benchmarks of ``benchmarks/`` in quick mode, for the unit
and functional tests that keep them from rotting (issue 38 item 3).

Each benchmark names the lane whose tests run its ``--quick``
(``QUICK_LANE = 'unit'``: no site needed; ``'functional'``: the local
site, sshd, HAProxy, ...); :func:`lanes` reads it without importing
the benchmark.
"""

import ast
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / 'benchmarks'
LANES = ('unit', 'functional')
#: Files of ``benchmarks/`` that are not benchmarks.
DOCUMENTS = ('README.rst',)


def _lane(tree):
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(
                node.value, ast.Constant) and any(
                getattr(t, 'id', None) == 'QUICK_LANE'
                for t in node.targets):
            return node.value.value
    return None


def lanes():
    """``{file name: its QUICK_LANE (None if it has none)}`` of every
    benchmark script."""
    return {path.name: _lane(ast.parse(path.read_text(encoding='utf-8')))
            for path in sorted(BENCHMARKS.glob('*.py'))}


def in_lane(lane):
    """The benchmark scripts whose ``--quick`` the *lane* runs."""
    return sorted(name for name, found in lanes().items() if found == lane)


def run_quick(name, timeout):
    """Run ``benchmarks/<name> --quick`` from the repository root.

    :returns: its standard output.
    :raises AssertionError: it failed, timed out or printed no figure.
    """
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    try:
        result = subprocess.run(
            [sys.executable, str(BENCHMARKS / name), '--quick'], cwd=ROOT,
            env=env, capture_output=True, text=True, timeout=timeout,
            check=False)
    except subprocess.TimeoutExpired:
        raise AssertionError('%s --quick ran past %d s' % (name, timeout))
    assert result.returncode == 0, '%s --quick exited %d:\n%s' % (
        name, result.returncode, result.stderr[-3000:])
    # Figures: at least one number on a line of output.
    assert re.search(r'\d', result.stdout), '%s --quick printed no ' \
        'figures:\n%s' % (name, result.stdout[-2000:])
    return result.stdout
