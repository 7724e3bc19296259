"""kubespray-mgmt run: where the LB install script comes from."""

import json
import pathlib

from mgmt_driver.adapters import cli
from mgmt_driver.adapters import csar

REPO = pathlib.Path(__file__).parents[2]
PARAMS = str(REPO / 'samples' / 'instantiate_simple.json')
TOPOLOGY = str(REPO / 'samples' / 'topology_simple.yaml')
SOURCE = str(REPO / 'vnf_packages' / 'kubespray_simple')
INSTALL = '$ sudo -n env '


def _instantiate(capsys, *extra, params=PARAMS):
    code = cli.main(['run', 'instantiate', '--dry-run', '--params', params,
                     '--topology', TOPOLOGY, *extra])
    out = capsys.readouterr()
    assert 'Traceback' not in out.err
    return code, out.out, out.err


def _install_lines(out):
    return [line for line in out.splitlines()
            if line.startswith(INSTALL) and 'install-lb' in line]


def test_a_package_source_runs_the_script_csar_build_adds(capsys):
    code, out, err = _instantiate(capsys, '--package-dir', SOURCE)
    assert code == cli.EXIT_OK, err
    assert len(_install_lines(out)) == 1


def test_without_package_dir_the_shipped_script_is_in_the_plan(capsys):
    code, out, err = _instantiate(capsys)
    assert code == cli.EXIT_OK, err
    assert len(_install_lines(out)) == 1
    # A script is no secret: the plan shows it (its first lines).
    first = csar.lb_script_path().read_text().splitlines()[0]
    assert '> write .kubespray-mgmt-install-lb.sh (mode 0700)\n    %s\n' \
        % first in out


def test_another_script_without_package_dir_is_refused(tmp_path, capsys):
    doc = json.loads(pathlib.Path(PARAMS).read_text())
    doc['additionalParams']['k8s_cluster_installation_param'][
        'external_lb_param']['script_path'] = 'Scripts/my_lb.sh'
    path = tmp_path / 'params.json'
    path.write_text(json.dumps(doc))
    code, out, err = _instantiate(capsys, params=str(path))
    assert code == cli.EXIT_BAD_INPUT
    assert err.startswith('kubespray-mgmt: --package-dir: missing: ')
    assert 'Scripts/my_lb.sh' in err and len(err.splitlines()) == 1


def test_an_extracted_csar_without_the_script_is_not_patched(tmp_path):
    definitions = tmp_path / 'Definitions'
    definitions.mkdir()
    (definitions / csar.SOL001_FILES[0]).write_text('{}')
    assert csar.packaged_file(tmp_path, csar.LB_SCRIPT_ARTIFACT) == \
        tmp_path / csar.LB_SCRIPT_ARTIFACT


def test_a_file_of_the_package_itself_wins(tmp_path):
    script = tmp_path / csar.LB_SCRIPT_ARTIFACT
    script.parent.mkdir()
    script.write_text('echo mine\n')
    assert csar.packaged_file(tmp_path, csar.LB_SCRIPT_ARTIFACT) == script
    assert csar.packaged_file(None, 'Scripts/other.sh') is None
