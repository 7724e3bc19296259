"""The kubespray double claims the release the real archive holds.

``../shared/kubespray/kubespray-<version>.tar.gz`` is the real release
the double imitates (``galaxy.yml`` names it).  These tests read the
facts the driver and the tests depend on straight from that archive
(nothing is extracted or copied) and compare them with the double: the
Kubernetes versions its checksums list, the default and minimum version,
and the ansible-core range its first play accepts.  A double more
lenient than its release hides real failures; one that drifts fails
here.
"""

import os
import pathlib
import tarfile

import mgmt_localsite as localsite
import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
DOUBLE = localsite.CHECKOUT_SOURCE
ARCHIVE_DIR = pathlib.Path(os.environ.get(
    'KMGMT_KUBESPRAY_DIR', REPO.parent / 'shared' / 'kubespray'))


def _double(*parts):
    return yaml.safe_load(DOUBLE.joinpath(*parts).read_text())


def _claimed_version():
    return str(_double('galaxy.yml')['version'])


@pytest.fixture(scope='module')
def real():
    """``read(path)``: a file of the real release, parsed as YAML."""
    path = ARCHIVE_DIR / ('kubespray-%s.tar.gz' % _claimed_version())
    if not path.is_file():
        pytest.skip('the real kubespray release is not at %s' % path)
    archive = tarfile.open(path)
    top = archive.getmembers()[0].name.split('/')[0]

    def read(relative):
        member = archive.extractfile('%s/%s' % (top, relative))
        return yaml.safe_load(member.read())
    yield read
    archive.close()


def _versions(checksums):
    return {arch: [str(v) for v in listed]
            for arch, listed in checksums['kubelet_checksums'].items()}


def test_the_double_claims_the_archived_release(real):
    assert str(real('galaxy.yml')['version']) == _claimed_version()


def test_the_double_lists_the_releases_kubelet_versions(real):
    path = 'roles/kubespray_defaults/vars/main/checksums.yml'
    ours = _versions(_double(*path.split('/')))
    theirs = _versions(real(path))
    # Every architecture the double lists, in the real order (newest
    # first: kubespray's default and minimum are the first and last key).
    assert ours and set(ours) <= set(theirs)
    for arch, listed in ours.items():
        assert listed == theirs[arch], arch


def test_the_default_version_is_supported_and_the_minimum_is_the_releases(
        real):
    path = 'roles/kubespray_defaults/defaults/main/main.yml'
    ours, theirs = _double(*path.split('/')), real(path)
    supported = _versions(_double(
        'roles', 'kubespray_defaults', 'vars', 'main', 'checksums.yml'))
    assert str(ours['kube_version']) in supported['amd64']
    assert ours['kube_version_min_required'] == \
        theirs['kube_version_min_required']


def test_the_first_play_accepts_the_releases_ansible_range(real):
    def bounds(plays):
        found = [play['vars'] for play in plays
                 if 'minimal_ansible_version' in play.get('vars', {})]
        assert len(found) == 1
        return (str(found[0]['minimal_ansible_version']),
                str(found[0]['maximal_ansible_version']))
    path = 'playbooks/ansible_version.yml'
    assert bounds(_double(*path.split('/'))) == bounds(real(path))
    boilerplate = _double('playbooks', 'boilerplate.yml')
    assert boilerplate[0] == {'name': 'Check ansible version',
                              'import_playbook': 'ansible_version.yml'}


def test_the_test_requirements_pin_that_ansible_range(real):
    low, high = (str(v) for v in real('playbooks/ansible_version.yml')[0][
        'vars'].values())
    wanted = 'ansible-core>=%s,<%s' % ('.'.join(low.split('.')[:2]),
                                       '.'.join(high.split('.')[:2]))
    requirements = (REPO / 'test-requirements.txt').read_text().split('\n')
    assert any(line.startswith(wanted + ' ') for line in requirements)
    assert wanted in (REPO / 'setup.cfg').read_text()
