"""Every benchmark runs in CI in quick mode (issue 38 item 3): nothing
rots unseen.  The ones that need no site run here; every file of
``benchmarks/`` must name its lane, so a new one cannot be forgotten
(tests/functional/test_benchmarks_quick.py runs the other lane).
"""

import pytest

from tests import benchmarks_quick as quick


def test_every_benchmark_names_a_lane_and_has_a_quick_mode():
    files = {p.name for p in quick.BENCHMARKS.iterdir() if p.is_file()}
    scripts = quick.lanes()
    assert files - set(scripts) <= set(quick.DOCUMENTS), (
        'benchmarks/ holds files that are neither benchmarks nor '
        'documents: %s' % sorted(files - set(scripts)))
    no_lane = sorted(n for n, lane in scripts.items()
                     if lane not in quick.LANES)
    assert not no_lane, 'no QUICK_LANE in %s of %s' % (no_lane, quick.LANES)
    no_quick = sorted(n for n in scripts if "'--quick'" not in (
        quick.BENCHMARKS / n).read_text(encoding='utf-8'))
    assert not no_quick, 'no --quick option: %s' % no_quick


def test_every_benchmark_is_described_in_the_readme():
    readme = (quick.BENCHMARKS / 'README.rst').read_text(encoding='utf-8')
    missing = sorted(n for n in quick.lanes() if n not in readme)
    assert not missing, 'benchmarks/README.rst says nothing of %s' % missing


@pytest.mark.parametrize('name', quick.in_lane('unit'))
def test_quick_mode_runs_and_prints_figures(name):
    quick.run_quick(name, timeout=120)
