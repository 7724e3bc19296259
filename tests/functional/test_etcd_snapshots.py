"""etcd snapshots on the local site's real etcd (Tacker v1's hooks).

One 3-master cluster serves the whole chain: a key is written to etcd;
the heal of a master whose snapshot cannot be taken (no etcdctl there)
changes nothing; the heal of a master takes a snapshot first (kept off
the masters in the workspace, directory 0700 and file 0600) and
completes; a PATCH's ``etcd_snapshot`` tag takes one more, once; the key
is deleted; ``status`` lists the snapshots; the restore README.rst gives
(every member stopped, ``etcdctl snapshot restore`` of the kept file on
each with the whole member list, started again) brings the key back.
"""

import json
import os
import shutil
import subprocess
import tempfile
import types

import pytest
from mgmt_localsite import etcd
from mgmt_localsite import lab as lab_mod
from mgmt_localsite import site as site_mod

from mgmt_driver.adapters import status
from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.operations import etcdsnapshots
from mgmt_driver.remote import ssh
from tests.functional import tacker_fakes
from tests.functional import test_faults
from tests.functional.tacker_fakes import heal_request

ANSIBLE = '127.0.54.1'
LB = '127.0.54.2'
MASTERS = ['127.0.54.10', '127.0.54.11', '127.0.54.12']
WORKERS = ['127.0.54.20']
CONTEXT = types.SimpleNamespace(project_id='etcd-snapshot-project')
KEY = '/registry/configmaps/default/kept-by-the-snapshot'

pytestmark = [
    pytest.mark.skipif(site_mod.unavailable() is not None,
                       reason=str(site_mod.unavailable())),
    pytest.mark.skipif(etcd.available() is not None,
                       reason=str(etcd.available()))]


@pytest.fixture(scope='module')
def chain():
    with test_faults.running(lab_mod.Lab(ANSIBLE, LB, MASTERS,
                                         WORKERS)) as lab:
        vnf, hooks = tacker_fakes.instantiated_on(lab, CONTEXT, MASTERS,
                                                  WORKERS, LB)
        yield types.SimpleNamespace(lab=lab, vnf=vnf, hooks=hooks)


def endpoints():
    return [etcd.client_url(a) for a in MASTERS]


def get(key):
    result = etcd.ctl(endpoints(), 'get', key, '--print-value-only')
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def snapshot_dir(chain):
    return chain.lab.workspace(chain.vnf.id) / etcdsnapshots.SNAPSHOT_DIR


def kept(chain):
    directory = snapshot_dir(chain)
    return sorted(os.listdir(directory)) if directory.exists() else []


def heal_start(chain, address):
    chain.hooks.heal_start(CONTEXT, chain.vnf.instance, heal_request(
        [chain.vnf.vm(address)]), None, None)


def restore(etcd_dir, snapshot):
    """README.rst's restore, on the site: stop every member, restore the
    snapshot into a new data directory of each (its own name and peer
    URL, the whole member list, a new cluster token), swap it in, start
    every member."""
    members = [(m['name'], m['peerURLs'][0]) for m in etcd.member_list(
        etcd.running_endpoints(etcd_dir))]
    initial = ','.join('%s=%s' % m for m in members)
    for _, peer in members:
        etcd.stop(etcd_dir, etcd.address_of(peer))
    for name, peer in members:
        where = etcd.paths(etcd_dir, etcd.address_of(peer))
        restored = where['dir'] + '/restored'
        done = subprocess.run(
            [etcd.binary('etcdctl'), 'snapshot', 'restore', str(snapshot),
             '--name', name, '--initial-cluster', initial,
             '--initial-cluster-token', 'restored-' + etcd.cluster_token(
                 etcd_dir), '--initial-advertise-peer-urls', peer,
             '--data-dir', restored], capture_output=True, text=True,
            env=dict(os.environ, ETCDCTL_API='3'), check=False)
        assert done.returncode == 0, done.stderr
        shutil.rmtree(where['data'])
        os.rename(restored, where['data'])
    for name, peer in members:
        etcd.start(etcd_dir, name, etcd.address_of(peer), members, 'new')
    for _, peer in members:
        etcd.wait_healthy(etcd_dir, etcd.address_of(peer))


def read_status(chain):
    conf = chain.lab.conf
    pool = ssh.ConnectionPool(ssh.SSHSettings.from_conf(conf))
    with pool:
        return status.StatusReader(
            chain.lab.spec(), chain.vnf.id, pool, conf,
            trusted_paths=True).collect(
                chain.lab.cluster(chain.lab.spec(), MASTERS, WORKERS))


@pytest.fixture
def masters_tmp(chain):
    """The masters' temporary directory, this test's own (another lane's
    heal may take a snapshot in /tmp at the same moment); like /tmp, any
    login may write there."""
    directory = tempfile.mkdtemp(prefix='etcd-snapshots-test.')
    os.chmod(directory, 0o1777)
    chain.lab.conf.set_override('etcd_snapshot_tmp_dir', directory,
                                group=kconf.GROUP)
    yield directory
    chain.lab.conf.clear_override('etcd_snapshot_tmp_dir', group=kconf.GROUP)
    shutil.rmtree(directory)


def test_snapshot_before_a_master_heal_restores_a_deleted_key(chain,
                                                              masters_tmp):
    lab = chain.lab
    put = etcd.ctl(endpoints(), 'put', KEY, 'before-the-heal')
    assert put.returncode == 0, put.stderr
    healed = MASTERS[1]

    # 1. No snapshot can be taken (no etcdctl on the masters): the heal
    #    stops before any change.
    runs = len(lab.site.runs())
    etcdctl = lab.conf.kubespray_mgmt.etcdctl_command
    lab.conf.set_override('etcdctl_command', '/nonexistent/etcdctl.sh',
                          group=kconf.GROUP)
    try:
        with pytest.raises(exceptions.MgmtDriverOtherError,
                           match='heal was not started') as refused:
            heal_start(chain, healed)
    finally:
        lab.conf.set_override('etcdctl_command', etcdctl, group=kconf.GROUP)
    # The other two masters were asked, each named with its reason.
    message = str(refused.value)
    assert [site_mod.name_of(core.ROLE_MASTER, a) in message
            for a in MASTERS] == [True, False, True]
    assert message.count('/nonexistent/etcdctl.sh: not found') == 2
    assert lab.runs_since(runs) == []
    assert kept(chain) == []
    assert lab.check(MASTERS, WORKERS) == []

    # 2. The heal takes a snapshot first, kept off the masters.
    heal_start(chain, healed)
    first = kept(chain)
    assert len(first) == 1 and first[0].endswith('-heal.db')
    directory = snapshot_dir(chain)
    assert directory.stat().st_mode & 0o777 == 0o700
    assert (directory / first[0]).stat().st_mode & 0o777 == 0o600
    assert os.listdir(masters_tmp) == []  # deleted from the master
    chain.vnf.recreate_vm(chain.vnf.vm(healed))
    chain.hooks.heal_end(CONTEXT, chain.vnf.instance, heal_request(
        [chain.vnf.vm(healed)]), None, None)
    assert lab.check(MASTERS, WORKERS) == []

    # An on-demand snapshot through Tacker's PATCH, once per tag.
    for _ in range(2):
        chain.vnf.metadata['etcd_snapshot'] = 'after-the-heal'
        chain.hooks.modify_information_end(CONTEXT, chain.vnf.instance,
                                           None, None, None)
    both = kept(chain)
    assert len(both) == 2 and both[0] == first[0]
    assert both[1].endswith('-after-the-heal.db')

    # 3. The object is deleted after the snapshot.
    assert get(KEY) == 'before-the-heal'
    deleted = etcd.ctl(endpoints(), 'del', KEY)
    assert deleted.returncode == 0 and deleted.stdout.strip() == '1'
    assert get(KEY) == ''

    # 4. status lists the snapshots, newest first (JSON and text).
    report = read_status(chain)
    section = report['etcd_snapshots']
    assert section['ok'] and [s['name'] for s in section['items']] == \
        both[::-1]
    assert [s['reason'] for s in section['items']] == [
        'after-the-heal', 'heal']
    assert all(s['bytes'] > 0 for s in section['items'])
    assert json.loads(status.to_json(report))['etcd_snapshots'] == section
    assert both[0] in status.format_text(report)

    # 5. The restore of the snapshot taken before the heal brings the
    #    deleted object back, on every member.
    restore(str(lab.site.etcd_dir), directory / first[0])
    for address in MASTERS:
        back = etcd.ctl([etcd.client_url(address)], 'get', KEY,
                        '--print-value-only')
        assert back.stdout.strip() == 'before-the-heal', back.stderr
    assert sorted(lab.site.etcd_members()) == sorted(
        site_mod.name_of(core.ROLE_MASTER, a) for a in MASTERS)
