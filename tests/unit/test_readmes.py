"""The READMEs say what the tools and the samples really are."""

import pathlib
import re

REPO = pathlib.Path(__file__).parents[2]
README = (REPO / 'README.rst').read_text()


def _quick_start():
    return README.split('Quick start\n', 1)[1].split('\nConfiguration\n')[0]


def test_quick_start_has_exactly_the_two_setup_commands():
    commands = re.findall(r'::\n\n +(\S.*)\n', _quick_start())
    assert commands == ['tools/demo', 'tools/run-tests']


def test_every_host_package_is_named():
    script = (REPO / 'tools' / 'host-packages').read_text()
    packages = re.search(r'packages=\(([^)]*)\)', script).group(1).split()
    for package in packages:
        assert '``%s``' % package in _quick_start(), package


def test_the_sol001_files_and_their_variable_are_explained():
    text = ' '.join(_quick_start().split())
    assert 'KMGMT_SOL001_DIR' in text
    assert 'https://forge.etsi.org/rep/nfv/SOL001' in text


def test_samples_readme_describes_every_sample():
    text = (REPO / 'samples' / 'README.rst').read_text()
    for sample in sorted((REPO / 'samples').glob('*.json')):
        assert '``%s``' % sample.name in text, sample.name
