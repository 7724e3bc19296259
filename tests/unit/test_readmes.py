"""The READMEs say what the tools and the samples really are."""

import pathlib
import re

from tests import docs

REPO = pathlib.Path(__file__).parents[2]
README = (REPO / 'README.rst').read_text()


def _quick_start():
    return README.split('Quick start\n', 1)[1].split('\nFeatures\n')[0]


def test_quick_start_has_exactly_the_two_setup_commands():
    commands = re.findall(r'::\n\n +(\S.*)\n', _quick_start())
    assert commands == ['tools/demo', 'tools/run-tests']


def test_every_host_package_is_named():
    """In the first step: ``tools/demo`` runs ``tools/host-packages``
    (issue 41: the step named only some, and the second step said the
    rest were its own)."""
    script = (REPO / 'tools' / 'host-packages').read_text()
    packages = re.search(r'packages=\(([^)]*)\)', script).group(1).split()
    packages += re.findall(r'packages\+=\(([^)]*)\)', script)
    assert 'tools/host-packages' in (REPO / 'tools' / 'demo').read_text()
    first = _quick_start().split('tools/run-tests')[0]
    for package in packages:
        assert '``%s``' % package in first, package


def test_the_sol001_files_and_their_variable_are_explained():
    text = ' '.join(docs.section('contributor/testing',
                                 'The ETSI SOL001 type files').split())
    assert 'KMGMT_SOL001_DIR' in text
    assert 'https://forge.etsi.org/rep/nfv/SOL001' in text


def test_samples_readme_describes_every_sample():
    text = (REPO / 'samples' / 'README.rst').read_text()
    for sample in sorted((REPO / 'samples').glob('*.json')):
        assert '``%s``' % sample.name in text, sample.name


def test_the_readme_links_only_to_pages_that_exist():
    links = re.findall(r'<(doc/source/[^>]+)>`__', README)
    assert links and all((REPO / link).is_file() for link in links), links


def test_the_readme_is_a_front_page():
    assert len(README.splitlines()) <= 300
