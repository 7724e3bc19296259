"""Build and check the CSAR VNF packages that Tacker onboards.

A package source (``vnf_packages/<name>/``) holds everything written by
us: ``TOSCA-Metadata/TOSCA.meta`` without hash entries, ``Definitions/``
without the ETSI SOL001 type files, ``BaseHOT/`` and ``UserData/``.
:func:`build` adds what must come from elsewhere:

- ``Scripts/kubespray_mgmt.py``: a byte-for-byte copy of the *installed*
  shim module.  Tacker refuses every LCM operation of a package whose copy
  differs from the file that defines the driver class it loaded
  (``MgmtDriverHashMatchFailure``);
- ``Scripts/install_external_lb.sh`` from ``mgmt_driver/templates/``;
- for a package whose VNFD names the Tacker v2 script's artifact
  (:data:`mgmt_driver.adapters.v2.ARTIFACT`), ``Scripts/kubespray_mgmt_v2.py``,
  a copy of the installed :func:`mgmt_driver.adapters.v2.script_path`, and
  ``Scripts/kubespray_coordinate_v2.py``, the coordinate-VNF script of a
  rolling update (:func:`mgmt_driver.adapters.v2.coordinate_script_path`);
- the two SOL001 v2.6.1 files, from a directory or from an installed
  ``tacker`` package, which ships them with its unit-test data;
- a SHA-256 entry in TOSCA.meta for every file under ``Scripts/`` and
  ``UserData/`` (the code Tacker runs), in the block format that Tacker's
  ``csar_utils`` validates at upload.

The zip is reproducible: sorted entries, fixed timestamps and modes, so
the same inputs give the same bytes.  :func:`check` verifies a built
package the way Tacker will use it and returns one line per problem.
"""

import collections
import hashlib
import importlib.util
import inspect
import io
import logging as std_logging
import os
import pathlib
import re
import stat
import sys
import tempfile
import zipfile

import yaml

from mgmt_driver import DRIVER_NAME
from mgmt_driver import kubespray_mgmt
from mgmt_driver.adapters import v2
from mgmt_driver.common import exceptions
from mgmt_driver.common import safetext
from mgmt_driver.common import version
from mgmt_driver.state import localfiles

LOG = safetext.logger(__name__)

TOSCA_META = 'TOSCA-Metadata/TOSCA.meta'
DRIVER_ARTIFACT = 'Scripts/kubespray_mgmt.py'
LB_SCRIPT_ARTIFACT = 'Scripts/install_external_lb.sh'
SOL001_FILES = ('etsi_nfv_sol001_common_types.yaml',
                'etsi_nfv_sol001_vnfd_types.yaml')
# Where the tacker wheel keeps its copies, relative to the package dir.
TACKER_SOL001_DIR = ('tests', 'unit', 'vnfm', 'infra_drivers', 'openstack',
                     'data', 'etsi_nfv')
#: Where a user gets the SOL001 files, for messages.
SOL001_ORIGIN = (
    'pass --sol001-dir DIR, a directory holding them (ETSI publishes them '
    'with NFV-SOL001 v2.6.1: https://forge.etsi.org/rep/nfv/SOL001, tag '
    'v2.6.1), or install tacker, whose package ships a copy')
# Directories whose files Tacker executes: each gets a TOSCA.meta hash.
HASHED_DIRS = ('Scripts/', 'UserData/')
CONTENT_TYPES = {'.py': 'text/x-python', '.sh': 'application/x-shellscript'}
# Hash algorithms Tacker's csar_utils accepts in TOSCA.meta.
HASH_ALGORITHMS = {'sha-224': hashlib.sha224, 'sha-256': hashlib.sha256,
                   'sha-384': hashlib.sha384, 'sha-512': hashlib.sha512}

PYTHON_ARTIFACT = 'tosca.artifacts.Implementation.Python'

ZIP_DATE_TIME = (1980, 1, 1, 0, 0, 0)  # the earliest a zip can record
ZIP_FILE_MODE = 0o100644  # regular file, rw-r--r--
ZIP_CREATE_SYSTEM = 3  # Unix: so that the mode bits are honoured

Built = collections.namedtuple('Built', 'path names sha256')


def driver_module_path():
    """Return the file that defines the installed driver class.

    It is the file Tacker hashes (``inspect.getfile`` of the loaded
    class), so the CSAR must carry exactly this one.
    """
    return pathlib.Path(inspect.getfile(kubespray_mgmt.KubesprayMgmtDriver))


def lb_script_path():
    """Return the path of the load balancer install script we ship."""
    return (pathlib.Path(__file__).resolve().parent.parent / 'templates'
            / 'install_external_lb.sh')


def packaged_file(package_dir, name):
    """Local file a CSAR built from *package_dir* holds as *name*.

    *package_dir* may be an extracted CSAR or a package source, which
    lacks what :func:`build` adds: the LB script then comes from
    :func:`lb_script_path`, as it does without any *package_dir*.

    :param package_dir: a package directory, or None.
    :param name: the archive name, e.g. ``Scripts/install_external_lb.sh``.
    :returns: a :class:`pathlib.Path`, or None when no file is known.
    """
    shipped = lb_script_path() if name == LB_SCRIPT_ARTIFACT else None
    if package_dir is None:
        return shipped
    path = pathlib.Path(package_dir) / name
    if path.is_file() or shipped is None or not _is_source(package_dir):
        return path  # a missing file is reported by whoever reads it
    return shipped


def _is_source(package_dir):
    """A package source: no SOL001 file, which :func:`build` adds."""
    return not (pathlib.Path(package_dir) / 'Definitions' /
                SOL001_FILES[0]).is_file()


def tacker_hash(path):
    """SHA-256 of *path* computed as Tacker's ``VnfLcmDriver`` does.

    Tacker reads the file in text mode (locale encoding, universal
    newlines) and hashes it re-encoded as UTF-8, so CRLF and LF copies of
    the same file hash alike; we must not "improve" on that.

    :param path: file to hash.
    :returns: the hex digest.
    """
    # No encoding argument: Tacker uses the locale's default too.
    with open(path) as f:
        return hashlib.sha256(f.read().encode('utf-8')).hexdigest()


def find_sol001_dir(sol001_dir=None):
    """Return the directory holding both SOL001 definition files.

    :param sol001_dir: a directory given by the user; when None, the copy
        inside an installed ``tacker`` package is used.
    :raises exceptions.CsarError: when neither has both files.
    """
    if sol001_dir is not None:
        directory = pathlib.Path(sol001_dir)
        missing = [n for n in SOL001_FILES if not (directory / n).is_file()]
        if missing:
            raise exceptions.CsarError(
                reason='%s has no %s' % (directory, ', '.join(missing)))
        return directory
    directory = _tacker_sol001_dir()
    if directory is None:
        raise exceptions.CsarError(
            reason='the ETSI SOL001 v2.6.1 files (%s) were not found: %s'
                   % (', '.join(SOL001_FILES), SOL001_ORIGIN))
    return directory


def _tacker_sol001_dir():
    # find_spec locates the package without importing it (importing tacker
    # takes a while and warns).
    spec = importlib.util.find_spec('tacker')
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        directory = pathlib.Path(location).joinpath(*TACKER_SOL001_DIR)
        if all((directory / n).is_file() for n in SOL001_FILES):
            return directory
    return None


def _source_files(src_dir):
    """Read the package source: ``{archive name: bytes}``.

    A package is what tenants may download from Tacker, so only files
    meant for a package go in: regular files of the source, and links to
    a regular file inside the source or inside another package source
    beside it (a directory holding ``TOSCA-Metadata/TOSCA.meta``; the HA
    packages share the simple one's ``UserData/`` that way).  Any other
    link (to ``tacker.conf``, a key, a directory), and any other kind of
    file (FIFO, device), is refused by name before anything is read.

    :raises exceptions.CsarError: naming the first such file.
    """
    src_dir = src_dir.resolve()
    roots = _package_roots(src_dir)
    paths = []
    for path in sorted(src_dir.rglob('*')):
        relative = path.relative_to(src_dir)
        if not _ignored(relative) and _packaged(path, relative, roots):
            paths.append((relative.as_posix(), path))
    return {name: path.read_bytes() for name, path in paths}


def _packaged(path, relative, roots):
    """Whether *path* of the source goes into the package: a regular file
    or a link :func:`_check_link` accepts does, a directory does not.

    :raises exceptions.CsarError: for any other link or kind of file.
    """
    mode = path.lstat().st_mode
    if stat.S_ISLNK(mode):
        _check_link(path, relative, roots)
        return True
    if stat.S_ISDIR(mode):
        return False
    if not stat.S_ISREG(mode):
        raise exceptions.CsarError(
            reason='%s in the package source is not a regular file'
                   % relative.as_posix())
    return True


def _package_roots(src_dir):
    """The source and the package sources beside it (resolved)."""
    roots = {src_dir}
    for sibling in src_dir.parent.iterdir():
        if (sibling / TOSCA_META).is_file():
            roots.add(sibling.resolve())
    return roots


def _check_link(path, relative, roots):
    """Refuse the link *path* unless it leads to a regular file in one of
    *roots*, not a hidden or ignored one there."""
    try:
        target = path.resolve()
    except (OSError, RuntimeError):  # a loop of links
        target = None
    root = next((p for p in target.parents if p in roots), None) \
        if target else None
    if root is None or not target.is_file() or \
            _ignored(target.relative_to(root)):
        raise exceptions.CsarError(
            reason='%s in the package source is a symbolic link to a file '
                   'outside it and outside the package sources beside it '
                   '(or not to a regular file); copy the file in instead'
                   % relative.as_posix())


def _ignored(relative):
    # Hidden files, editor backups and bytecode never go into a package.
    return any(part.startswith('.') or part == '__pycache__'
               for part in relative.parts) or \
        relative.name.endswith(('.pyc', '~'))


def _meta_header(meta_text):
    """Keep the blocks of TOSCA.meta that are not artifact entries."""
    blocks = [b for b in re.split(r'\n\s*\n', meta_text.strip()) if b.strip()]
    header = [b for b in blocks
              if not re.search(r'^(Name|Source|Hash):', b, re.MULTILINE)]
    return '\n\n'.join(b.strip() for b in header)


def render_tosca_meta(meta_text, files):
    """Return TOSCA.meta: the source's header plus one hash block per file.

    :param meta_text: the source TOSCA.meta (its artifact blocks, if any,
        are dropped and rebuilt).
    :param files: ``{archive name: bytes}`` of the whole package.
    :raises exceptions.CsarError: when the header has no
        ``Entry-Definitions``.
    """
    header = _meta_header(meta_text)
    if not re.search(r'^Entry-Definitions:\s*\S', header, re.MULTILINE):
        raise exceptions.CsarError(
            reason='%s has no Entry-Definitions line' % TOSCA_META)
    blocks = [header]
    for name in sorted(files):
        if name.startswith(HASHED_DIRS):
            blocks.append(_artifact_block(name, files[name]))
    return '\n\n'.join(blocks) + '\n'


def _artifact_block(name, data):
    content_type = CONTENT_TYPES.get(os.path.splitext(name)[1],
                                     'application/octet-stream')
    return ('Name: %s\nContent-Type: %s\nAlgorithm: SHA-256\nHash: %s'
            % (name, content_type, hashlib.sha256(data).hexdigest()))


def package_files(src_dir, sol001_dir=None, lb_script=None):
    """Return ``{archive name: bytes}`` of the package built from *src_dir*.

    :param src_dir: package source directory.
    :param sol001_dir: see :func:`find_sol001_dir`.
    :param lb_script: load balancer script; default :func:`lb_script_path`.
    :raises exceptions.CsarError: for a missing input.
    """
    src_dir = pathlib.Path(src_dir)
    lb_script = _checked_inputs(src_dir, lb_script)
    sol001 = find_sol001_dir(sol001_dir)

    files = _source_files(src_dir)
    files[DRIVER_ARTIFACT] = driver_module_path().read_bytes()
    files[LB_SCRIPT_ARTIFACT] = lb_script.read_bytes()
    if _names_v2_script(files):
        _add_v2_scripts(files)
    for name in SOL001_FILES:
        files['Definitions/' + name] = (sol001 / name).read_bytes()
    meta_text = stamp_created_by(files[TOSCA_META].decode('utf-8'))
    files[TOSCA_META] = render_tosca_meta(meta_text, files).encode('utf-8')
    return files


def _checked_inputs(src_dir, lb_script):
    """The load balancer script's path, once *src_dir* is known to be a
    package source and the script to exist (else CsarError)."""
    if not (src_dir / TOSCA_META).is_file():
        raise exceptions.CsarError(
            reason='%s is not a package source: it has no %s'
                   % (src_dir, TOSCA_META))
    lb_script = pathlib.Path(lb_script or lb_script_path())
    if not lb_script.is_file():
        raise exceptions.CsarError(
            reason='the load balancer script %s does not exist; the package '
                   'needs it as %s' % (lb_script, LB_SCRIPT_ARTIFACT))
    return lb_script


def _add_v2_scripts(files):
    """The v2 entry script and its coordinator, for a package naming it."""
    files[v2.SCRIPT] = pathlib.Path(v2.script_path()).read_bytes()
    files[v2.COORDINATE_SCRIPT] = pathlib.Path(
        v2.coordinate_script_path()).read_bytes()


#: What ``Created-By`` of a built package ends with.
_BUILT_BY = ' (built by kubespray-mgmt %s)'


def stamp_created_by(meta_text, version_text=None):
    """*meta_text* whose ``Created-By`` (a free text line of the first
    block, added if missing) also names the driver version that built
    the package, so that an operator can tell which code a CSAR
    onboarded in Tacker came from (``kubespray-mgmt --version``).

    :param version_text: default: :func:`version.version_text`.
    """
    stamp = _BUILT_BY % (version_text or version.version_text())
    line = re.compile(r'^(Created-By:[^\n]*?)(?: \(built by kubespray-mgmt '
                      r'[^\n]*\))?[ \t]*$', re.MULTILINE)
    if line.search(meta_text):
        return line.sub(lambda m: m.group(1) + stamp, meta_text, count=1)
    return re.sub(r'^(Entry-Definitions:[^\n]*)$',
                  lambda m: 'Created-By: mgmt_driver' + stamp + '\n' +
                  m.group(1), meta_text, count=1, flags=re.MULTILINE)


def _names_v2_script(files):
    marker = v2.ARTIFACT.encode()
    return any(name.startswith('Definitions/') and marker in data
               for name, data in files.items())


def zip_bytes(files):
    """Return a reproducible zip of ``{archive name: bytes}``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, 'w') as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=ZIP_DATE_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = ZIP_CREATE_SYSTEM
            info.external_attr = ZIP_FILE_MODE << 16
            archive.writestr(info, files[name], compresslevel=9)
    return buffer.getvalue()


def build(src_dir, out_path, sol001_dir=None, lb_script=None):
    """Build the CSAR of *src_dir* into *out_path* (replaced atomically).

    :param src_dir: package source directory.
    :param out_path: the zip to write.
    :param sol001_dir: see :func:`find_sol001_dir`.
    :param lb_script: see :func:`package_files`.
    :returns: :class:`Built` (path, archive names, SHA-256 of the zip).
    :raises exceptions.CsarError: for a missing input, or an output
        path that is a directory or in a directory that does not exist
        (none is created).
    """
    out_path = pathlib.Path(out_path)
    _check_output(out_path, pathlib.Path(src_dir))
    files = package_files(src_dir, sol001_dir, lb_script)
    data = zip_bytes(files)
    _write_output(out_path, data)
    digest = hashlib.sha256(data).hexdigest()
    LOG.info('Built %s (%d files, sha256 %s)', out_path, len(files), digest)
    return Built(out_path, sorted(files), digest)


def _check_output(out_path, src_dir):
    """Refuse an output path before any work: a directory (``-o .``), or
    one whose directory is missing (a typo must not create a tree)."""
    if out_path.is_dir():
        raise exceptions.CsarError(
            reason='the output %s is a directory: give the path of the zip '
                   'file to write, such as %s' % (
                       out_path, out_path / (src_dir.name + '.zip')))
    if not out_path.absolute().parent.is_dir():
        raise exceptions.CsarError(
            reason='the output %s: directory %s does not exist (create it '
                   'first)' % (out_path, out_path.parent))


def _write_output(out_path, data):
    """Write the zip, or a CsarError naming the path and the reason."""
    try:
        _write_atomically(out_path, data)
    except OSError as exc:
        raise exceptions.CsarError(reason='cannot write %s: %s' % (
            out_path, exc.strerror or exc)) from None


def _write_atomically(path, data):
    # A half-written zip must never be left where a user would upload it.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix='.' + path.name)
    try:
        with os.fdopen(fd, 'wb') as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


# ---------------------------------------------------------------- check


def check(path, sol001_dir=None):
    """Check a package (zip or directory) as Tacker will use it.

    A package source is built in a temporary directory first, as
    :func:`build` would build it.

    :param path: a CSAR zip, an extracted package or a package source.
    :param sol001_dir: for a source: see :func:`find_sol001_dir`.
    :returns: a list of problems, one line each; empty when it is sound.
    """
    path = pathlib.Path(path)
    if not path.exists():
        return ['no such file or directory']
    if path.is_dir() and _unbuilt_source(path):
        return _check_source(path, sol001_dir)
    if path.is_dir():
        return _check_dir(path, zip_path=None)
    if not zipfile.is_zipfile(path):
        return ['%s is neither a directory nor a zip file' % path]
    return _check_zip(path)


def _check_zip(path):
    """:func:`check` of a CSAR zip: extracted in a temporary directory
    unless an entry would land outside it."""
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(path) as archive:
            unsafe = [n for n in archive.namelist() if _unsafe_name(n)]
            if unsafe:
                return ['zip entry %s points outside the package' % n
                        for n in unsafe]
            archive.extractall(tmp)
        return _check_dir(pathlib.Path(tmp), zip_path=path)


def _unbuilt_source(path):
    return (path / TOSCA_META).is_file() and _is_source(path) and \
        not (path / DRIVER_ARTIFACT).is_file()


def _check_source(src_dir, sol001_dir):
    try:
        files = package_files(src_dir, sol001_dir)
    except exceptions.CsarError as exc:
        return ['a package source, not a built CSAR; checking it means '
                'building it first, and %s' % exc]
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in files.items():
            target = pathlib.Path(tmp, name)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        return _check_dir(pathlib.Path(tmp), zip_path=None)


def _unsafe_name(name):
    return name.startswith('/') or '..' in pathlib.PurePosixPath(name).parts


def _check_dir(root, zip_path):
    # tosca-parser resolves a relative template path against its own
    # idea of a base (an AttributeError deep inside it): never give it one.
    root = root.absolute()
    meta, problems = _read_meta(root)
    if meta is None:
        return problems
    problems += _check_meta_hashes(root, meta)
    missing = _check_sol001_present(root)
    if missing:
        # tosca-parser fails on every template without the SOL001 types,
        # with its own internals (KeyError ...): say what is missing only.
        return problems + missing
    problems += _parse_top(root, meta, zip_path)
    flavours = _flavour_files(root)
    if not flavours:
        problems.append('Definitions/ has no deployment flavour (no file '
                        'with substitution_mappings.properties.flavour_id)')
    for flavour_id, (name, tpl) in sorted(flavours.items()):
        problems += _check_flavour(root, flavour_id, name, tpl)
    return problems


# TOSCA.meta


def _read_meta(root):
    meta_path = root / TOSCA_META
    if not meta_path.is_file():
        return None, ['%s is missing' % TOSCA_META]
    text = meta_path.read_text(encoding='utf-8')
    blocks = [b for b in re.split(r'\n\s*\n', text.strip()) if b.strip()]
    try:
        parsed = [yaml.safe_load(b) for b in blocks]
    except yaml.YAMLError as exc:
        return None, ['%s is not valid: %s' % (TOSCA_META, _one_line(exc))]
    if not parsed or not all(isinstance(p, dict) for p in parsed):
        return None, ['%s is not a list of "Key: value" blocks' % TOSCA_META]
    entry = parsed[0].get('Entry-Definitions')
    if not entry:
        return None, ['%s has no Entry-Definitions' % TOSCA_META]
    if not (root / entry).is_file():
        return None, ['%s: Entry-Definitions %s does not exist'
                      % (TOSCA_META, entry)]
    artifacts = [p for p in parsed[1:] if 'Name' in p or 'Source' in p]
    return {'entry': entry, 'artifacts': artifacts}, []


def _check_meta_hashes(root, meta):
    problems = []
    listed = set()
    for block in meta['artifacts']:
        name = block.get('Name') or block.get('Source')
        listed.add(name)
        problems += _check_meta_entry(root, name, block)
    for name in _hashed_files(root):
        if name not in listed:
            problems.append('%s has no hash entry for %s' % (TOSCA_META, name))
    return problems


def _check_meta_entry(root, name, block):
    algorithm = str(block.get('Algorithm', '')).lower()
    expected = str(block.get('Hash', ''))
    if algorithm not in HASH_ALGORITHMS or not expected:
        return ['%s entry %s needs Algorithm (one of %s) and Hash'
                % (TOSCA_META, name, ', '.join(sorted(HASH_ALGORITHMS)))]
    path = root / name
    if _unsafe_name(name) or not path.is_file():
        return ['%s lists %s, which is not in the package'
                % (TOSCA_META, name)]
    # Tacker's upload check hashes the bytes as stored in the zip.
    actual = HASH_ALGORITHMS[algorithm](path.read_bytes()).hexdigest()
    if actual != expected:
        return ['%s: hash of %s does not match the file (listed %s, actual '
                '%s)' % (TOSCA_META, name, expected, actual)]
    return []


def _hashed_files(root):
    names = []
    for directory in HASHED_DIRS:
        base = root / directory
        if base.is_dir():
            names += [p.relative_to(root).as_posix()
                      for p in sorted(base.rglob('*'))
                      if p.is_file() and not _ignored(p.relative_to(root))]
    return names


def _check_sol001_present(root):
    missing = [name for name in SOL001_FILES
               if not (root / 'Definitions' / name).is_file()]
    if not missing:
        return []
    return ['Definitions/%s is missing (csar build adds it): the ETSI '
            'NFV-SOL001 v2.6.1 type definitions, without which no template '
            'can be parsed' % name for name in missing]


# TOSCA parsing


def _tosca_problems(**kwargs):
    """Run tosca-parser; return its complaints, one line each."""
    # Imported here: the other kubespray-mgmt commands do not need it.
    from toscaparser import tosca_template
    from toscaparser.common import exception as tosca_exception

    # tosca-parser logs every collected error as well; we report them.
    tosca_log = std_logging.getLogger('tosca')
    level = tosca_log.level
    tosca_log.setLevel(std_logging.CRITICAL)
    try:
        tosca_template.ToscaTemplate(**kwargs)
    except tosca_exception.ValidationError:
        report = tosca_exception.ExceptionCollector.getExceptionsReport(
            full=False)
        return [_one_line(entry) for entry in report] or ['invalid template']
    except Exception as exc:  # the parser raises assorted types
        return ['%s: %s' % (type(exc).__name__, _one_line(exc))]
    finally:
        tosca_log.setLevel(level)
    return []


def _parse_top(root, meta, zip_path):
    if zip_path is not None:
        # As Tacker's csar_utils.load_csar_data: the zip itself.
        source, kwargs = zip_path.name, {'path': str(zip_path)}
    else:
        source, kwargs = meta['entry'], {'path': str(root / meta['entry'])}
    return ['tosca-parser (%s): %s' % (source, problem)
            for problem in _tosca_problems(a_file=True, **kwargs)]


def _flavour_files(root):
    """``{flavour_id: (archive name, template dict)}`` of Definitions/."""
    flavours = {}
    for path in sorted((root / 'Definitions').glob('*.y*ml')):
        try:
            tpl = yaml.safe_load(path.read_text(encoding='utf-8'))
        except yaml.YAMLError:
            continue  # reported by the tosca-parser run on the package
        flavour_id = _dig(tpl, 'topology_template', 'substitution_mappings',
                          'properties', 'flavour_id')
        if isinstance(flavour_id, str):
            flavours[flavour_id] = (path.relative_to(root).as_posix(), tpl)
    return flavours


def _dig(data, *keys):
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _check_flavour(root, flavour_id, name, tpl):
    prefix = 'flavour %s (%s): ' % (flavour_id, name)
    topology = tpl['topology_template']
    problems = []
    # Tacker's v1 driver pops substitution_mappings.requirements and its
    # CSAR loader iterates topology_template.inputs: both must exist.
    if 'requirements' not in topology['substitution_mappings']:
        problems.append('substitution_mappings has no requirements (Tacker '
                        'removes them and fails when they are absent)')
    if not isinstance(topology.get('inputs'), dict):
        problems.append('topology_template has no inputs (Tacker\'s CSAR '
                        'loader needs the mapping)')
    vnf = _dig(topology, 'node_templates', 'VNF')
    if not isinstance(vnf, dict):
        problems.append('no node template named VNF (Tacker reads the LCM '
                        'interface from node_templates.VNF only)')
    else:
        problems += _check_interface(root, vnf)
    problems += _parse_flavour(root, name, tpl)
    return [prefix + p for p in problems]


def _check_interface(root, vnf):
    artifacts = vnf.get('artifacts') or {}
    hooks = _dig(vnf, 'interfaces', 'Vnflcm') or {}
    problems = []
    for hook, operation in sorted(hooks.items()):
        implementation = _implementation(operation)
        if implementation is None:
            continue
        if implementation not in artifacts:
            problems.append('Vnflcm.%s names artifact %s, which VNF does not '
                            'define' % (hook, implementation))
    for key, artifact in sorted(artifacts.items()):
        problems += _check_artifact(root, key, artifact)
    if hooks and DRIVER_NAME not in artifacts and \
            v2.ARTIFACT not in artifacts:
        problems.append('VNF has no artifact %s (Tacker v1) or %s (v2)'
                        % (DRIVER_NAME, v2.ARTIFACT))
    return problems


def _implementation(operation):
    if not isinstance(operation, dict):
        return None
    implementation = operation.get('implementation')
    if isinstance(implementation, dict):
        return implementation.get('primary')
    return implementation


def _check_artifact(root, key, artifact):
    relative = artifact.get('file') if isinstance(artifact, dict) else None
    if not relative:
        return ['artifact %s has no file' % key]
    if key == v2.ARTIFACT:
        return _check_v2_artifact(root, key, artifact, relative)
    # Tacker v1 resolves artifact files against the package root.
    path = root / relative
    if _unsafe_name(relative) or not path.is_file():
        return ['artifact %s: file %s is not in the package (paths are '
                'relative to the package root)' % (key, relative)]
    if key != DRIVER_NAME:
        return []
    installed = driver_module_path()
    if tacker_hash(path) != tacker_hash(installed):
        return ['artifact %s: %s differs from the installed driver %s; '
                'Tacker would refuse every LCM operation '
                '(MgmtDriverHashMatchFailure): rebuild the package'
                % (key, relative, installed)]
    return []


def _check_v2_artifact(root, key, artifact, relative):
    # Tacker v2 runs it from Definitions/ (vnflcm_driver_v2), and only
    # as a Python artifact.
    if artifact.get('type') != PYTHON_ARTIFACT:
        return ['artifact %s: type must be %s (Tacker v2 refuses others)'
                % (key, PYTHON_ARTIFACT)]
    path = root / 'Definitions' / relative
    inside = os.path.normpath(os.path.join('Definitions', relative))
    if inside.startswith('..') or not path.is_file():
        return ['artifact %s: file %s is not in the package (Tacker v2 '
                'resolves it against Definitions/: ../%s)'
                % (key, relative, v2.SCRIPT)]
    if path.read_bytes() != pathlib.Path(v2.script_path()).read_bytes():
        return ['artifact %s: %s differs from the installed %s: rebuild '
                'the package' % (key, relative, v2.script_path())]
    return _check_coordinate_script(root)


def _check_coordinate_script(root):
    # Tacker v2's rolling update runs it from the package root
    # (additionalParams lcm-operation-coordinate-new-vnf / -old-vnf).
    path = root / v2.COORDINATE_SCRIPT
    installed = pathlib.Path(v2.coordinate_script_path())
    if not path.is_file():
        return ['%s is not in the package (a rolling update names it as '
                'its coordinate-VNF script): rebuild the package'
                % v2.COORDINATE_SCRIPT]
    if path.read_bytes() != installed.read_bytes():
        return ['%s differs from the installed %s: rebuild the package'
                % (v2.COORDINATE_SCRIPT, installed)]
    return []


def _parse_flavour(root, name, tpl):
    # As Tacker's v1 driver: imports made absolute against the file's
    # directory, substitution requirements removed, parsed as a dict.
    directory = (root / name).parent
    flavour = dict(tpl)
    flavour['imports'] = [str(directory / i) for i in tpl.get('imports', [])]
    topology = dict(tpl['topology_template'])
    mappings = dict(topology['substitution_mappings'])
    mappings.pop('requirements', None)
    topology['substitution_mappings'] = mappings
    flavour['topology_template'] = topology
    return ['tosca-parser: ' + p for p in _tosca_problems(
        a_file=False, yaml_dict_tpl=flavour, parsed_params={})]


def _one_line(value):
    return ' '.join(str(value).split())


# ------------------------------------------------------- command line

# The exit codes of mgmt_driver.adapters.cli (which imports this module).
_EXIT_OK = 0
_EXIT_PROBLEMS = 1


def add_commands(subparsers):
    """Register ``csar build`` and ``csar check`` with the CLI parser.

    :param subparsers: the ``kubespray-mgmt`` subparsers object.
    """
    group = subparsers.add_parser(
        'csar', help='build and check the CSAR VNF packages')
    group.set_defaults(func=lambda args: _usage(group))
    actions = group.add_subparsers(dest='csar_action', metavar='ACTION')
    _add_build_command(actions)
    _add_check_command(actions)


def _add_build_command(actions):
    """``csar build SRC_DIR -o OUT.zip``."""
    build_cmd = actions.add_parser(
        'build', help='build a CSAR zip from a package source directory')
    build_cmd.add_argument('src_dir', metavar='SRC_DIR',
                           help='package source, e.g. '
                                'vnf_packages/kubespray_simple')
    build_cmd.add_argument('-o', '--output', '--output-file',
                           dest='output', required=True,
                           type=localfiles.output_path, metavar='OUT.zip',
                           help='the zip to write')
    _add_sol001_dir(build_cmd)
    build_cmd.set_defaults(func=_build_command)


def _add_check_command(actions):
    """``csar check PATH``."""
    check_cmd = actions.add_parser(
        'check', help='check a CSAR (zip or extracted directory), or a '
                      'package source as csar build would build it')
    check_cmd.add_argument('path', metavar='PATH')
    _add_sol001_dir(check_cmd, ' (for a package source)')
    check_cmd.set_defaults(func=_check_command)


def _add_sol001_dir(command, note=''):
    command.add_argument(
        '--sol001-dir', metavar='DIR',
        help='directory with the ETSI NFV-SOL001 v2.6.1 files %s%s '
             '(default: the copy in an installed tacker package; ETSI '
             'publishes them at https://forge.etsi.org/rep/nfv/SOL001, tag '
             'v2.6.1)' % (' and '.join(SOL001_FILES), note))


def _usage(parser):
    parser.print_help(sys.stderr)
    return _EXIT_PROBLEMS


def _build_command(args):
    built = build(args.src_dir, args.output, sol001_dir=args.sol001_dir)
    safetext.say('%s  %s (%d files)' % (built.sha256, built.path,
                                        len(built.names)))
    return _EXIT_OK


#: The longest problem line ``csar check`` prints: a TOSCA.meta entry or
#: a file name of a tenant's package can be as long as the package.
SHOWN_PROBLEM_WIDTH = 2000


def _check_command(args):
    """Print each problem as one escaped line: the names in them come
    from the package (TOSCA.meta entries, file names), which a tenant
    wrote, and may hold newlines or terminal escape sequences."""
    problems = check(args.path, sol001_dir=args.sol001_dir)
    for problem in problems:
        safetext.say('%s: %s' % (safetext.clip(args.path), safetext.clip(
            problem, SHOWN_PROBLEM_WIDTH)), file=sys.stderr)
    if problems:
        return _EXIT_PROBLEMS
    safetext.say('%s: OK' % args.path)
    return _EXIT_OK
