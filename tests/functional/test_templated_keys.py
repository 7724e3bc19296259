"""Issue 27 item 1 on the local site: a templated key never runs.

kubespray's ``dynamic_groups`` role, which every playbook runs first,
loops over ``group_mappings | dict2items`` and templates ``item.key``.
An extra var ``group_mappings`` whose key is ``{{ lookup('pipe', CMD) }}``
therefore ran CMD on the Ansible server, ``!unsafe`` values or not.

* :func:`test_the_old_rendering_runs_a_templated_key` proves the attack
  is real: the inventory rendered as before the fix (no guard, the extra
  var not validated) is given to the real ``ansible-playbook`` with the
  test double's ``dynamic_groups`` role and, when the archive is beside
  the clone, kubespray v2.31.0's own; the marker file appears.  The
  current rendering refuses the same document.
* :func:`test_a_templated_key_is_refused_before_any_connection` sends the
  request through Tacker's ``instantiate_end`` on the local site (real
  sshd on 127.0.30.x, real ansible-playbook on the double): it is refused
  naming the field, no SSH connection is asked for, no marker appears.
  Before the fix the hook ran the playbook and the marker appeared.
"""

import dataclasses
import os
import pathlib
import subprocess
import tarfile
import types

import pytest
from mgmt_localsite import lab as lab_mod
from mgmt_localsite import site as site_mod

from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.model import nodes
from mgmt_driver.model import params
from mgmt_driver.remote import inventory
from mgmt_driver.remote import ssh
from tests.functional import tacker_fakes
from tests.unit import params_data

ROOT = core.ROOT
ANSIBLE = '127.0.30.1'
LB = '127.0.30.2'
MASTERS = ['127.0.30.10']
WORKERS = ['127.0.30.20']
CONTEXT = types.SimpleNamespace(project_id='templated-keys')
DOUBLE_ROLES = pathlib.Path(site_mod.__file__).parent / 'kubespray' / 'roles'
KUBESPRAY = 'kubespray-2.31.0'
ARCHIVE = pathlib.Path(__file__).resolve().parents[3] / 'shared' / \
    'kubespray' / (KUBESPRAY + '.tar.gz')
PLAY = ('- hosts: all\n  gather_facts: false\n'
        '  roles: [dynamic_groups]\n')

pytestmark = pytest.mark.skipif(site_mod.unavailable() is not None,
                                reason=str(site_mod.unavailable()))


def _hostile(marker):
    """``group_mappings`` as kubespray's, with one key that runs a
    command (it prints a valid group name, so the play goes on)."""
    key = "{{ lookup('pipe', 'touch %s; echo owned') }}" % marker
    return {key: ['kube_node'], 'k8s_cluster': ['kube_node',
                                                'kube_control_plane']}


# --------------------------------------------- the attack is real (proof)

def _old_rendering(spec, cluster, monkeypatch):
    """The files as rendered before the fix: no key validation (extra
    vars set as they came) and no final guard."""
    monkeypatch.setattr(inventory, 'check_inert', lambda name, text: text)
    return inventory.render_files(spec, cluster)


def _roles(source, tmp_path):
    if source == 'double':
        return DOUBLE_ROLES
    if not ARCHIVE.is_file():
        pytest.skip('optional: %s is not beside the clone' % ARCHIVE.name)
    with tarfile.open(ARCHIVE) as archive:
        members = [m for m in archive.getmembers() if m.name.startswith(
            KUBESPRAY + '/roles/dynamic_groups/') and m.isfile()]
        archive.extractall(tmp_path / 'real', members=members,
                           filter='data')
    return tmp_path / 'real' / KUBESPRAY / 'roles'


@pytest.mark.parametrize('source', ['double', 'kubespray-v2.31.0'])
def test_the_old_rendering_runs_a_templated_key(source, tmp_path,
                                                monkeypatch):
    marker = tmp_path / 'MARKER'
    spec = params.parse_params(params_of(
        {'kube_version': 'v1.31.0'}), need_cp_names=False)
    spec = dataclasses.replace(spec, kubespray=dataclasses.replace(
        spec.kubespray, extra_vars=types.MappingProxyType(
            {'group_mappings': _hostile(marker)})))
    cluster = nodes.build_nodes(spec, [
        core.NodeAddress('master', MASTERS[0], MASTERS[0]),
        core.NodeAddress('worker', WORKERS[0], WORKERS[0]),
        core.NodeAddress('external_lb', LB, LB)])
    with pytest.raises(exceptions.TemplatedText) as info:
        inventory.render_files(spec, cluster)
    assert 'cluster-vars.yaml: mapping key #2 at group_mappings' in str(
        info.value)
    directory = tmp_path / 'inventory'
    directory.mkdir()
    for name, rendered in _old_rendering(spec, cluster, monkeypatch).items():
        (directory / name).parent.mkdir(exist_ok=True)
        (directory / name).write_text(rendered.content)
    (tmp_path / 'play.yml').write_text(PLAY)
    env = dict(os.environ, ANSIBLE_ROLES_PATH=str(_roles(source, tmp_path)),
               ANSIBLE_HOST_KEY_CHECKING='False')
    result = subprocess.run(
        [site_mod.ANSIBLE_PLAYBOOK, '-i', str(directory / 'hosts.yaml'),
         '-e', '@%s' % (directory / 'cluster-vars.yaml'),
         str(tmp_path / 'play.yml')], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=300, check=False)
    # group_by runs on the controller: no host is contacted.
    assert marker.exists(), result.stdout[-2000:] + result.stderr[-2000:]


# ------------------------------------------------------- on the local site

def params_of(extra_vars, base=None):
    """A request (the site's when *base* is given) with *extra_vars*."""
    if base is None:
        base = params_data.minimal()
    request = {ROOT: dict(base[ROOT])}
    request[ROOT]['kubespray'] = dict(request[ROOT].get('kubespray') or {},
                                      extra_vars=extra_vars)
    return request


@pytest.fixture(scope='module')
def lab():
    site = lab_mod.Lab(ANSIBLE, LB, MASTERS, WORKERS, nodeports=1,
                       backends=False)
    try:
        site.start()
    except lab_mod.LabError as exc:
        pytest.skip(str(exc))
    try:
        yield site
    finally:
        site.stop()


@pytest.mark.parametrize('extra_vars', [
    lambda marker: {'group_mappings': _hostile(marker)},
    lambda marker: {'custom': {'a': [{'b': _hostile(marker)}]}},
], ids=['group_mappings', 'nested'])
def test_a_templated_key_is_refused_before_any_connection(lab, tmp_path,
                                                          extra_vars):
    marker = tmp_path / 'MARKER'
    asked = []

    def pool():
        asked.append(1)
        return ssh.ConnectionPool(ssh.SSHSettings.from_conf(lab.conf))
    # The operator denies nothing: the refusal is the request check's.
    lab.conf.set_override('extra_vars_denied', [], group='kubespray_mgmt')
    vnf, _, hooks = tacker_fakes.vnf_on_lab(lab, MASTERS, WORKERS, LB,
                                            pool_factory=pool)
    request = params_of(extra_vars(marker), base=lab.additional_params)
    refusal = None
    try:
        hooks.instantiate_end(
            CONTEXT, vnf.instance,
            tacker_fakes.instantiate_request(request), None, None)
    except exceptions.ParamsInvalid as exc:
        refusal = exc
    finally:
        lab.conf.clear_override('extra_vars_denied', group='kubespray_mgmt')
        if asked:  # it ran (before the fix): leave no cluster behind
            vnf.additional_params = request
            hooks.terminate_end(CONTEXT, vnf.instance, None, None, None)
    assert not marker.exists(), 'the key ran on the Ansible server'
    assert asked == [], 'an SSH connection was asked for'
    assert refusal is not None
    problems = refusal.problems
    assert len(problems) == 1
    assert problems[0].startswith(ROOT + '.kubespray.extra_vars.')
    assert '(key #1): mapping key contains "{"' in problems[0]
    assert 'lookup' not in problems[0] and str(marker) not in problems[0]
    assert not lab.workspace(vnf.instance.id).exists()
