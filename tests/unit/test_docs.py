"""Every reStructuredText file of the repository is valid for docutils.

GitHub and PyPI render these files with docutils, not Sphinx: a Sphinx
role (``:mod:``), a broken table or a bad title underline shows as an
error block, or the whole file as raw text.
"""

import io
import pathlib
import subprocess

import docutils.core
import pytest

ROOT = pathlib.Path(__file__).parents[2]


def _tracked_rst():
    listed = subprocess.run(['git', 'ls-files', '*.rst'], cwd=ROOT,
                            capture_output=True, text=True, check=False)
    names = listed.stdout.split() if listed.returncode == 0 else [
        str(p.relative_to(ROOT)) for p in ROOT.rglob('*.rst')
        if '.tox' not in p.parts]
    return sorted(names)


def _problems(text, name):
    stream = io.StringIO()
    docutils.core.publish_doctree(text, source_path=name, settings_overrides={
        'warning_stream': stream, 'report_level': 2, 'halt_level': 5})
    return stream.getvalue()


@pytest.mark.parametrize('name', _tracked_rst())
def test_the_file_is_valid_restructuredtext(name):
    assert _problems((ROOT / name).read_text(), name) == ''


def test_a_sphinx_role_is_reported():
    assert 'Unknown interpreted text role "mod"' in _problems(
        'See :mod:`mgmt_driver.state.follow`.\n', 'x.rst')
