"""kubespray-mgmt csar check/build: a package source, a missing path, and
where the SOL001 files come from."""

from mgmt_driver.adapters import cli
from mgmt_driver.adapters import csar
from tests import packages

SOURCE = packages.PACKAGES_DIR / 'kubespray_simple'


def _no_tacker(monkeypatch):
    monkeypatch.setattr(csar, '_tacker_sol001_dir', lambda: None)


def test_a_source_is_checked_as_csar_build_would_build_it():
    assert csar.check(SOURCE, sol001_dir=packages.sol001_dir()) == []


def test_a_source_without_sol001_files_is_one_plain_line(monkeypatch,
                                                         capsys):
    _no_tacker(monkeypatch)
    assert cli.main(['csar', 'check', str(SOURCE)]) == cli.EXIT_BAD_INPUT
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith('%s: a package source, not a built CSAR; ' % SOURCE)
    assert '--sol001-dir' in line and 'forge.etsi.org' in line
    assert 'Error' not in line  # no KeyError, AttributeError


def test_a_missing_path_is_no_such_file(tmp_path, capsys):
    missing = str(tmp_path / 'missing.zip')
    assert cli.main(['csar', 'check', missing]) == cli.EXIT_BAD_INPUT
    assert capsys.readouterr().err == \
        '%s: no such file or directory\n' % missing


def test_build_without_sol001_files_says_where_they_come_from(
        monkeypatch, tmp_path, capsys):
    _no_tacker(monkeypatch)
    code = cli.main(['csar', 'build', str(SOURCE), '-o',
                     str(tmp_path / 'out.zip')])
    assert code == cli.EXIT_BAD_INPUT
    (line,) = capsys.readouterr().err.splitlines()
    assert 'pass --sol001-dir DIR' in line
    assert 'NFV-SOL001 v2.6.1: https://forge.etsi.org/rep/nfv/SOL001' in line
    assert 'install tacker' in line


def test_a_directory_without_tosca_meta_says_so(tmp_path):
    assert csar.check(tmp_path) == ['TOSCA-Metadata/TOSCA.meta is missing']
