"""kubespray-mgmt csar build / check on the real package sources.

Both packages are built once per module from ``vnf_packages/`` with the
SOL001 files from ``../shared/etsi-sol001-2.6.1``; each failure test
changes one thing in a copy and expects its own message.
"""

import hashlib
import io
import os
import re
import threading
import zipfile

import pytest
import yaml

from mgmt_driver.adapters import cli
from mgmt_driver.adapters import csar
from mgmt_driver.common import exceptions
from tests import packages

NAMES = sorted(packages.FLAVOURS)


@pytest.fixture(scope='module')
def built(tmp_path_factory):
    """``{package name: zip path}`` built through the CLI."""
    sol001 = packages.sol001_dir()
    tmp = tmp_path_factory.mktemp('csar')
    lb = packages.lb_script(tmp)
    result = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(csar, 'lb_script_path', lambda: lb)
        for name in NAMES:
            out = tmp / (name + '.zip')
            rc = cli.main(['csar', 'build', str(packages.PACKAGES_DIR / name),
                           '-o', str(out), '--sol001-dir', str(sol001)])
            assert rc == cli.EXIT_OK
            result[name] = out
    return result


@pytest.fixture
def lb(tmp_path, monkeypatch):
    script = packages.lb_script(tmp_path)
    monkeypatch.setattr(csar, 'lb_script_path', lambda: script)
    return script


@pytest.fixture
def extracted(built, tmp_path):
    """A fresh extracted copy of the simple package, to tamper with."""
    return packages.extract(built['kubespray_simple'], tmp_path / 'pkg')


def _meta_blocks(text):
    return [yaml.safe_load(b) for b in re.split(r'\n\s*\n', text.strip())]


# ------------------------------------------------------------ build


@pytest.mark.parametrize('name', NAMES)
def test_built_package_passes_check(built, name, capsys):
    capsys.readouterr()
    assert cli.main(['csar', 'check', str(built[name])]) == cli.EXIT_OK
    out = capsys.readouterr()
    assert out.out.strip() == '%s: OK' % built[name]
    assert out.err == ''


@pytest.mark.parametrize('name', NAMES)
def test_extracted_package_passes_check(built, name, tmp_path):
    assert csar.check(packages.extract(built[name], tmp_path)) == []


@pytest.mark.parametrize('name', NAMES)
def test_package_holds_installed_shim_and_sol001_files(built, name):
    with zipfile.ZipFile(built[name]) as archive:
        names = set(archive.namelist())
        shim = archive.read(csar.DRIVER_ARTIFACT)
        sol001 = {n: archive.read('Definitions/' + n)
                  for n in csar.SOL001_FILES}
    assert shim == csar.driver_module_path().read_bytes()
    for file_name, data in sol001.items():
        assert data == (packages.sol001_dir() / file_name).read_bytes()
    assert csar.LB_SCRIPT_ARTIFACT in names
    assert 'UserData/k8s_userdata.py' in names
    # Sources only: nothing the build did not mean to add.
    assert not any('__pycache__' in n or n.endswith('.pyc') for n in names)


@pytest.mark.parametrize('name', NAMES)
def test_tosca_meta_lists_every_script_with_its_sha256(built, name):
    with zipfile.ZipFile(built[name]) as archive:
        blocks = _meta_blocks(archive.read(csar.TOSCA_META).decode())
        hashed = sorted(n for n in archive.namelist()
                        if n.startswith(csar.HASHED_DIRS))
        digests = {n: hashlib.sha256(archive.read(n)).hexdigest()
                   for n in hashed}
    header, entries = blocks[0], blocks[1:]
    assert header['Entry-Definitions'].startswith('Definitions/')
    assert header['TOSCA-Meta-File-Version'] == 1.0
    assert [e['Name'] for e in entries] == hashed
    for entry in entries:
        assert entry['Algorithm'] == 'SHA-256'
        assert entry['Hash'] == digests[entry['Name']]
    types = {e['Name']: e['Content-Type'] for e in entries}
    assert types[csar.DRIVER_ARTIFACT] == 'text/x-python'
    assert types[csar.LB_SCRIPT_ARTIFACT] == 'application/x-shellscript'


def test_build_is_reproducible(tmp_path, lb):
    sol001 = packages.sol001_dir()
    src = packages.copy_tree(packages.PACKAGES_DIR / 'kubespray_simple',
                             tmp_path / 'src')
    first = csar.build(src, tmp_path / 'a.zip', sol001_dir=sol001)
    # Timestamps of the sources must not leak into the zip.
    for path in src.rglob('*'):
        os.utime(path, (1_000_000_000, 1_000_000_000))
    second = csar.build(src, tmp_path / 'b.zip', sol001_dir=sol001)
    data = first.path.read_bytes()
    assert data == second.path.read_bytes()
    assert first.sha256 == hashlib.sha256(data).hexdigest()
    with zipfile.ZipFile(first.path) as archive:
        infos = archive.infolist()
    assert [i.filename for i in infos] == sorted(i.filename for i in infos)
    assert {i.date_time for i in infos} == {csar.ZIP_DATE_TIME}
    assert {i.external_attr >> 16 for i in infos} == {csar.ZIP_FILE_MODE}


def test_build_ignores_bytecode_and_hidden_files(tmp_path, lb):
    src = packages.copy_tree(packages.PACKAGES_DIR / 'kubespray_simple',
                             tmp_path / 'src')
    (src / 'UserData' / '__pycache__').mkdir(exist_ok=True)
    (src / 'UserData' / '__pycache__' / 'k8s_userdata.cpython-311.pyc'
     ).write_bytes(b'\0')
    (src / 'Definitions' / '.kubespray_simple_df.yaml.swp').write_bytes(b'x')
    built = csar.build(src, tmp_path / 'out.zip',
                       sol001_dir=packages.sol001_dir())
    assert not [n for n in built.names if 'pycache' in n or '.swp' in n]


def test_build_replaces_stale_hash_entries(tmp_path, lb):
    src = packages.copy_tree(packages.PACKAGES_DIR / 'kubespray_simple',
                             tmp_path / 'src')
    meta = src / csar.TOSCA_META
    meta.write_text(meta.read_text() + '\nName: Scripts/gone.sh\n'
                    'Content-Type: application/x-shellscript\n'
                    'Algorithm: SHA-256\nHash: %s\n' % ('0' * 64))
    built = csar.build(src, tmp_path / 'out.zip',
                       sol001_dir=packages.sol001_dir())
    with zipfile.ZipFile(built.path) as archive:
        text = archive.read(csar.TOSCA_META).decode()
    assert 'Scripts/gone.sh' not in text
    assert csar.check(built.path) == []


def test_build_writes_nothing_when_an_input_is_missing(tmp_path, capsys,
                                                       monkeypatch):
    monkeypatch.setattr(csar, 'lb_script_path',
                        lambda: tmp_path / 'no-such-script.sh')
    out = tmp_path / 'out.zip'
    rc = cli.main(['csar', 'build',
                   str(packages.PACKAGES_DIR / 'kubespray_simple'),
                   '-o', str(out), '--sol001-dir', str(tmp_path)])
    assert rc == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert 'load balancer script' in err
    assert 'no-such-script.sh' in err
    assert not out.exists()


def test_build_without_sol001_files_says_where_to_get_them(tmp_path, lb,
                                                           monkeypatch):
    monkeypatch.setattr(csar, '_tacker_sol001_dir', lambda: None)
    with pytest.raises(exceptions.CsarError) as info:
        csar.build(packages.PACKAGES_DIR / 'kubespray_simple',
                   tmp_path / 'out.zip')
    assert '--sol001-dir' in str(info.value)
    assert 'install tacker' in str(info.value)


def test_build_with_incomplete_sol001_dir(tmp_path, lb):
    (tmp_path / csar.SOL001_FILES[0]).write_text('x')
    with pytest.raises(exceptions.CsarError) as info:
        csar.build(packages.PACKAGES_DIR / 'kubespray_simple',
                   tmp_path / 'out.zip', sol001_dir=tmp_path)
    assert csar.SOL001_FILES[1] in str(info.value)
    assert csar.SOL001_FILES[0] not in str(info.value)


def test_sol001_files_come_from_an_installed_tacker(tmp_path, monkeypatch):
    data_dir = tmp_path.joinpath('tacker', *csar.TACKER_SOL001_DIR)
    data_dir.mkdir(parents=True)
    for name in csar.SOL001_FILES:
        (data_dir / name).write_text(name)

    class Spec:
        submodule_search_locations = [str(tmp_path / 'tacker')]

    real_find_spec = csar.importlib.util.find_spec
    monkeypatch.setattr(
        csar.importlib.util, 'find_spec',
        lambda name, *a: Spec if name == 'tacker' else real_find_spec(
            name, *a))
    assert csar.find_sol001_dir() == data_dir


def test_build_refuses_a_directory_that_is_not_a_package(tmp_path, lb):
    with pytest.raises(exceptions.CsarError) as info:
        csar.build(tmp_path, tmp_path / 'out.zip',
                   sol001_dir=packages.sol001_dir())
    assert csar.TOSCA_META in str(info.value)


def test_render_tosca_meta_needs_entry_definitions():
    with pytest.raises(exceptions.CsarError) as info:
        csar.render_tosca_meta('TOSCA-Meta-File-Version: 1.0\n', {})
    assert 'Entry-Definitions' in str(info.value)


def test_tacker_hash_ignores_line_endings(tmp_path):
    lf, crlf = tmp_path / 'lf.py', tmp_path / 'crlf.py'
    lf.write_bytes(b'a = 1\nb = 2\n')
    crlf.write_bytes(b'a = 1\r\nb = 2\r\n')
    assert csar.tacker_hash(lf) == csar.tacker_hash(crlf)
    expected = hashlib.sha256(b'a = 1\nb = 2\n').hexdigest()
    assert csar.tacker_hash(lf) == expected


# ------------------------------------------------------------ check failures


def test_tampered_artifact(extracted):
    shim = extracted / csar.DRIVER_ARTIFACT
    shim.write_bytes(shim.read_bytes() + b'# changed\n')
    problems = csar.check(extracted)
    assert len(problems) == 2
    assert problems[0].startswith(
        'TOSCA-Metadata/TOSCA.meta: hash of Scripts/kubespray_mgmt.py does '
        'not match the file')
    assert 'differs from the installed driver' in problems[1]
    assert 'MgmtDriverHashMatchFailure' in problems[1]


def test_stale_driver_copy_with_consistent_meta(extracted, tmp_path):
    """A package built by another version: TOSCA.meta right, driver not."""
    shim = extracted / csar.DRIVER_ARTIFACT
    shim.write_bytes(shim.read_bytes() + b'# older release\n')
    meta = extracted / csar.TOSCA_META
    files = {p.relative_to(extracted).as_posix(): p.read_bytes()
             for p in extracted.rglob('*') if p.is_file()}
    meta.write_text(csar.render_tosca_meta(meta.read_text(), files))
    problems = csar.check(extracted)
    assert len(problems) == 1
    assert problems[0].startswith(
        'flavour simple (Definitions/kubespray_simple_df.yaml): artifact '
        'mgmt-drivers-kubespray: Scripts/kubespray_mgmt.py differs from the '
        'installed driver')


def test_wrong_hash(extracted):
    meta = extracted / csar.TOSCA_META
    text = meta.read_text()
    wrong = 'f' * 64
    text = re.sub(r'(Name: Scripts/install_external_lb.sh\n'
                  r'Content-Type: .*\nAlgorithm: SHA-256\nHash: )\w+',
                  r'\g<1>' + wrong, text)
    meta.write_text(text)
    problems = csar.check(extracted)
    assert len(problems) == 1
    assert problems[0].startswith(
        'TOSCA-Metadata/TOSCA.meta: hash of Scripts/install_external_lb.sh '
        'does not match the file (listed %s, actual ' % wrong)


def test_interface_names_a_missing_artifact(extracted):
    df = extracted / 'Definitions' / 'kubespray_simple_df.yaml'
    text = df.read_text()
    text = text.replace('          scale_end:\n'
                        '            implementation: mgmt-drivers-kubespray',
                        '          scale_end:\n'
                        '            implementation: no-such-driver')
    df.write_text(text)
    problems = csar.check(extracted)
    assert problems == [
        'flavour simple (Definitions/kubespray_simple_df.yaml): '
        'Vnflcm.scale_end names artifact no-such-driver, which VNF does not '
        'define']


def test_artifact_file_missing_from_package(extracted):
    (extracted / csar.DRIVER_ARTIFACT).unlink()
    problems = csar.check(extracted)
    assert ('TOSCA-Metadata/TOSCA.meta lists Scripts/kubespray_mgmt.py, '
            'which is not in the package') in problems
    assert ('flavour simple (Definitions/kubespray_simple_df.yaml): '
            'artifact mgmt-drivers-kubespray: file Scripts/kubespray_mgmt.py '
            'is not in the package (paths are relative to the package root)'
            ) in problems


def test_artifact_path_relative_to_definitions_is_refused(extracted):
    # The v2 API's convention (../Scripts/...) does not work with v1.
    df = extracted / 'Definitions' / 'kubespray_simple_df.yaml'
    df.write_text(df.read_text().replace('file: Scripts/kubespray_mgmt.py',
                                         'file: ../Scripts/kubespray_mgmt.py'))
    problems = csar.check(extracted)
    assert len(problems) == 1
    assert 'file ../Scripts/kubespray_mgmt.py is not in the package' in \
        problems[0]


def test_vnf_node_template_must_be_named_vnf(extracted):
    df = extracted / 'Definitions' / 'kubespray_simple_df.yaml'
    df.write_text(df.read_text().replace('\n    VNF:\n', '\n    KubeVNF:\n'))
    problems = csar.check(extracted)
    assert ('flavour simple (Definitions/kubespray_simple_df.yaml): no node '
            'template named VNF (Tacker reads the LCM interface from '
            'node_templates.VNF only)') in problems


def test_requirement_occurrences_are_needed(extracted):
    """tosca-parser >= 2.13 refuses requirements without occurrences."""
    types = extracted / 'Definitions' / 'kubespray_simple_types.yaml'
    types.write_text(re.sub(r'\n *occurrences: .*', '', types.read_text()))
    problems = csar.check(extracted)
    assert problems
    assert all('tosca-parser' in p for p in problems)
    assert any('"virtual_link_external_master" in template "VNF" has a wrong '
               'number of occurrences' in p for p in problems)


def test_substitution_requirements_are_needed(extracted):
    df = extracted / 'Definitions' / 'kubespray_simple_df.yaml'
    data = yaml.safe_load(df.read_text())
    del data['topology_template']['substitution_mappings']['requirements']
    df.write_text(yaml.safe_dump(data))
    problems = csar.check(extracted)
    assert any('substitution_mappings has no requirements' in p
               for p in problems)


def test_unlisted_script(extracted):
    (extracted / 'Scripts' / 'extra.sh').write_text('echo\n')
    assert csar.check(extracted) == [
        'TOSCA-Metadata/TOSCA.meta has no hash entry for Scripts/extra.sh']


def test_missing_sol001_file(extracted):
    (extracted / 'Definitions' / csar.SOL001_FILES[0]).unlink()
    problems = csar.check(extracted)
    assert problems == [
        'Definitions/%s is missing (csar build adds it): the ETSI NFV-SOL001 '
        'v2.6.1 type definitions, without which no template can be parsed'
        % csar.SOL001_FILES[0]]  # no parser internals (KeyError ...)


def test_missing_tosca_meta(extracted):
    (extracted / csar.TOSCA_META).unlink()
    assert csar.check(extracted) == ['TOSCA-Metadata/TOSCA.meta is missing']


def test_not_a_zip(tmp_path):
    path = tmp_path / 'x.zip'
    path.write_text('not a zip')
    assert csar.check(path) == ['%s is neither a directory nor a zip file'
                                % path]


def test_zip_entry_outside_the_package(tmp_path):
    path = tmp_path / 'evil.zip'
    with zipfile.ZipFile(path, 'w') as archive:
        archive.writestr('../evil.txt', 'x')
    assert csar.check(path) == [
        'zip entry ../evil.txt points outside the package']


def test_check_command_prints_one_line_per_problem(extracted, tmp_path,
                                                   capsys):
    shim = extracted / csar.DRIVER_ARTIFACT
    shim.write_bytes(shim.read_bytes() + b'# changed\n')
    tampered = packages.zip_dir(extracted, tmp_path / 'tampered.zip')
    capsys.readouterr()
    assert cli.main(['csar', 'check', str(tampered)]) == cli.EXIT_BAD_INPUT
    out = capsys.readouterr()
    lines = out.err.splitlines()
    assert len(lines) == 2
    assert all(line.startswith(str(tampered) + ': ') for line in lines)
    assert out.out == ''


def test_zip_bytes_round_trip():
    data = csar.zip_bytes({'b.txt': b'2', 'a/a.txt': b'1'})
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.namelist() == ['a/a.txt', 'b.txt']
        assert archive.read('a/a.txt') == b'1'


# ------------------------------------------------- links in a source --
# A CSAR is downloadable by tenants: a link in a package source must not
# pack a file of the operator's (tacker.conf, a key) into it.

SECRET = 'password = operator-secret\n'


@pytest.fixture
def sources(tmp_path):
    """``(src, beside)``: a package source and a second one beside it,
    plus a non-package directory and an operator file near them."""
    top = tmp_path / 'sources'
    src = packages.copy_tree(packages.PACKAGES_DIR / 'kubespray_simple',
                             top / 'src')
    beside = packages.copy_tree(packages.PACKAGES_DIR / 'kubespray_simple',
                                top / 'beside')
    (beside / '.git').mkdir()
    (beside / '.git' / 'config').write_text(SECRET)
    (top / 'notes').mkdir()
    (top / 'notes' / 'tacker.conf').write_text(SECRET)
    (tmp_path / 'tacker.conf').write_text(SECRET)
    return src, beside


@pytest.mark.parametrize('target', [
    '../../../tacker.conf',            # an operator file above the sources
    '../../notes/tacker.conf',         # a directory beside, not a package
    '../../beside/.git/config',        # a hidden file of a package beside
    '../../notes',                     # a directory
    '../no-such-file',                 # dangling
    'conf.py',                         # a loop: the link to itself
])
def test_build_refuses_a_link_out_of_the_package_sources(
        sources, tmp_path, lb, capsys, target):
    src, _ = sources
    (src / 'UserData' / 'conf.py').symlink_to(target)
    out = tmp_path / 'out.zip'
    rc = cli.main(['csar', 'build', str(src), '-o', str(out),
                   '--sol001-dir', str(packages.sol001_dir())])
    err = capsys.readouterr().err
    assert rc == cli.EXIT_BAD_INPUT, err
    assert 'UserData/conf.py in the package source is a symbolic link' in err
    assert 'operator-secret' not in err
    assert not out.exists()


def test_build_refuses_a_fifo_without_blocking(sources, tmp_path, lb):
    src, _ = sources
    os.mkfifo(src / 'UserData' / 'pipe')
    sol001, errors = packages.sol001_dir(), []

    def build():
        try:
            csar.build(src, tmp_path / 'out.zip', sol001_dir=sol001)
        except exceptions.CsarError as exc:
            errors.append(str(exc))

    worker = threading.Thread(target=build, daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), 'csar build blocked on a FIFO'
    assert errors and 'UserData/pipe in the package source is not a ' \
        'regular file' in errors[0]


def test_build_packs_a_link_inside_or_into_a_package_beside(sources,
                                                            tmp_path, lb):
    src, beside = sources
    (beside / 'UserData' / 'shared.py').write_text('# shared\n')
    (src / 'UserData' / 'shared.py').symlink_to(
        '../../beside/UserData/shared.py')
    (src / 'UserData' / 'again.py').symlink_to('shared.py')
    built = csar.build(src, tmp_path / 'out.zip',
                       sol001_dir=packages.sol001_dir())
    with zipfile.ZipFile(built.path) as archive:
        assert archive.read('UserData/shared.py') == b'# shared\n'
        assert archive.read('UserData/again.py') == b'# shared\n'


#: A window title, a hidden line (SGR 8) and a forged "OK" line.
HOSTILE_NAME = '\x1b]0;pwned\x07\x1b[8mhidden\npkg.zip: OK'


def _shown_problems(capsys, path):
    assert cli.main(['csar', 'check', str(path)]) == cli.EXIT_BAD_INPUT
    out, err = capsys.readouterr()
    assert out == ''
    return err


def test_check_shows_a_hostile_file_name_escaped(extracted, capsys):
    (extracted / 'Scripts' / HOSTILE_NAME.replace('\n', '_')).write_text(
        'echo\n')
    (extracted / 'Scripts' / 'x\nforged: OK').write_text('echo\n')
    err = _shown_problems(capsys, extracted)
    assert '\x1b' not in err and '\x07' not in err
    lines = err.splitlines()
    assert len(lines) == 2 and all(
        line.startswith(str(extracted) + ': ') for line in lines)
    assert 'Scripts/\\x1b]0;pwned\\x07\\x1b[8mhidden_pkg.zip: OK' in err
    assert 'Scripts/x\\x0aforged: OK' in err


def test_check_shows_a_hostile_tosca_meta_entry_escaped(extracted, capsys):
    meta = extracted / csar.TOSCA_META
    meta.write_text(meta.read_text() + '\nName: "%s"\n' % (
        HOSTILE_NAME.replace('\x1b', '\\e').replace('\x07', '\\a')
        .replace('\n', '\\n') + 'A' * 100000))
    err = _shown_problems(capsys, extracted)
    assert '\x1b' not in err and '\x07' not in err
    assert len(err.splitlines()) == 1
    assert len(err) < csar.SHOWN_PROBLEM_WIDTH + len(str(extracted)) + 20
    assert 'entry \\x1b]0;pwned\\x07\\x1b[8mhidden\\x0apkg.zip: OK' in err


# --- the version that built a package (issue 31, feature 6) -----------------

@pytest.mark.parametrize('name', NAMES)
def test_a_built_package_names_the_version_that_built_it(built, name):
    from mgmt_driver.common import version
    with zipfile.ZipFile(built[name]) as archive:
        meta = archive.read(csar.TOSCA_META).decode()
    assert ('Created-By: mgmt_driver developers (built by kubespray-mgmt '
            '%s)\n' % version.version_text()) in meta


def test_the_stamp_replaces_an_older_one_and_fills_a_missing_line():
    meta = ('TOSCA-Meta-File-Version: 1.0\nCreated-By: ACME (built by '
            'kubespray-mgmt 0.1)\nEntry-Definitions: a.yaml\n')
    assert csar.stamp_created_by(meta, '0.2') == meta.replace('0.1', '0.2')
    assert csar.stamp_created_by(
        'TOSCA-Meta-File-Version: 1.0\nEntry-Definitions: a.yaml\n',
        '0.2') == ('TOSCA-Meta-File-Version: 1.0\nCreated-By: mgmt_driver '
                   '(built by kubespray-mgmt 0.2)\nEntry-Definitions: '
                   'a.yaml\n')
