"""The local site's masters run real etcd members (localsite/etcd.py).

One site on 127.0.45.0/24 serves one chain, each step on the cluster the
last one left, through the kubespray double's own playbooks: a new
one-member cluster; two masters appended and joined (``etcdctl member
add``, then started with initial cluster state "existing": the cluster
ID does not change); the member list the driver's ``status`` command
reads over SSH; a living master removed (its member leaves, its etcd
stops and its data goes); then one of the two remaining VMs dies, the
cluster loses quorum and refuses writes, and removing the dead master's
member fails with etcd's own refusal, changing nothing.  Before the
removal the driver's wait (:mod:`mgmt_driver.operations.etcdwait`) runs as a
heal runs it: etcd refuses a removal right after a join ("unhealthy cluster").
A second cluster on other addresses shows that wait refuse (a member that stays
is down) and then wait for a member that comes back, after which etcd accepts
the removal at once.
"""

import json
import pathlib
import re
import time
import uuid

import mgmt_localsite as localsite
import pytest
from mgmt_localsite import etcd

from mgmt_driver.common import exceptions
from mgmt_driver.operations import etcdwait
from mgmt_driver.remote import kubectl
from mgmt_driver.remote import ssh
from tests.functional.test_kubespray_double import Cluster
from tests.functional.test_kubespray_double import ok
from tests.functional.test_kubespray_double import serve

HOSTS = {'cp1': '127.0.45.10', 'cp2': '127.0.45.11', 'cp3': '127.0.45.12'}
NAMES = {'cp%d' % i: {'etcd_member_name': 'etcd%d' % i} for i in (1, 2, 3)}
#: The second chain's masters (a cluster of its own).
OTHERS = {'cp1': '127.0.45.20', 'cp2': '127.0.45.21', 'cp3': '127.0.45.22'}
#: The driver's poll delays (its defaults: 1 s doubling to 10 s).
POLL = kubectl.KubectlSettings(poll_initial_delay=0.5, poll_max_delay=2.0)

pytestmark = pytest.mark.skipif(etcd.available() is not None,
                                reason=str(etcd.available()))


@pytest.fixture(scope='module')
def server():
    yield from serve(tuple(HOSTS.values()) + tuple(OTHERS.values()))


@pytest.fixture(scope='module')
def site(server):
    root = pathlib.Path(server.scratch) / ('site-' + uuid.uuid4().hex[:8])
    site = localsite.materialise(root, owner=server.user)
    yield site
    site.stop_etcd()


def members(address):
    """``(cluster ID, {name: (peer URLs, client URLs)})`` as the member
    at *address* lists them."""
    result = etcd.ctl([etcd.client_url(address)], 'member', 'list', '-w',
                      'json')
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    return doc['header']['cluster_id'], {
        m['name']: (m['peerURLs'], m.get('clientURLs', []))
        for m in doc['members']}


def refused(result):
    """etcd refused for want of quorum: at once ("unhealthy cluster"),
    when the proposal timed out, or when the leader stepped down."""
    assert result.returncode != 0
    assert any(reason in result.stderr for reason in (
        'etcdserver: unhealthy cluster', 'etcdserver: request timed out',
        'context deadline exceeded')), result.stderr


def urls(address):
    return ([etcd.peer_url(address)], [etcd.client_url(address)])


def driver_status_command(server, site, address, tmp_path):
    """The driver's etcd status read (``etcdctl_command member list -w
    json`` over SSH to a master), parsed by
    :mod:`mgmt_driver.adapters.status`."""
    settings = ssh.SSHSettings(connect_timeout=5, connect_retries=0,
                               known_hosts_file=str(tmp_path / 'kh'))
    creds = ssh.Credentials(server.user, key_file=server.client_key)
    with ssh.Connection(address, creds, server.port, settings) as conn:
        result = conn.run([str(site.etcdctl), 'member', 'list', '-w',
                           'json'])
    return kubectl.parse_etcd_members(result.stdout, address)


def wait_as_the_driver(server, site, address, leaving, tmp_path,
                       timeout=60, sleep=time.sleep):
    """The driver's wait before a removal (:func:`etcdwait.wait`, as a
    master heal calls it), asking etcd over SSH to the master at
    *address* through the site's ``etcdctl.sh``.

    :returns: ``(seconds waited, progress lines)``.
    """
    lines = []
    with ssh.Connection(address, ssh.Credentials(
            server.user, key_file=server.client_key), server.port,
            ssh.SSHSettings(connect_timeout=5, connect_retries=0,
                            known_hosts_file=str(tmp_path / 'kh'))) as conn:
        waited = etcdwait.wait(
            lambda: etcdwait.read(conn, [str(site.etcdctl)], 20), leaving,
            timeout, POLL, 'heal', progress=lines.append, sleep=sleep)
    return waited, lines


def test_join_removal_quorum_and_status_meet_real_etcd(server, site,
                                                       tmp_path):
    cluster = Cluster(server, site, {'cp1': HOSTS['cp1']}, ['cp1'], [],
                      host_vars=NAMES)
    ok(cluster.play('cluster.yml'))
    cluster_id, listed = members(HOSTS['cp1'])
    assert listed == {'etcd1': urls(HOSTS['cp1'])}
    data = site.etcd_dir / HOSTS['cp1'] / 'data'
    assert (data / 'member').is_dir()

    # Two masters appended: each is added, then started, one at a time.
    cluster.hosts.update(HOSTS)
    cluster.groups['kube_control_plane'] = ['cp1', 'cp2', 'cp3']
    cluster.groups['etcd'] = ['cp1', 'cp2', 'cp3']
    cluster.write_inventory()
    ok(cluster.play('cluster.yml'))
    same_id, listed = members(HOSTS['cp3'])
    assert same_id == cluster_id
    assert listed == {'etcd%d' % i: urls(HOSTS['cp%d' % i])
                      for i in (1, 2, 3)}
    assert sorted(site.etcd_members()) == ['etcd1', 'etcd2', 'etcd3']

    # What `kubespray-mgmt status` reads, through the site's etcdctl.sh.
    seen = driver_status_command(server, site, HOSTS['cp2'], tmp_path)
    assert {m['name']: (m['peer_urls'], m['client_urls'])
            for m in seen} == listed

    # A living master removed: its member leaves, its etcd stops.  The
    # driver first waits until etcd would accept it (the joins were
    # moments ago: etcd counts a peer connected after 5 s only).
    wait_as_the_driver(server, site, HOSTS['cp1'], {'cp3': HOSTS['cp3']},
                       tmp_path)
    ok(cluster.play('remove-node.yml', extra={
        'node': 'cp3', 'skip_confirmation': True}))
    assert sorted(members(HOSTS['cp1'])[1]) == ['etcd1', 'etcd2']
    assert etcd.running_pid(str(site.etcd_dir), HOSTS['cp3']) is None
    assert not (site.etcd_dir / HOSTS['cp3'] / 'data').exists()

    # cp2's VM dies: one member of two is left, no quorum.  Writes are
    # refused, and so is the removal kubespray's remove-node runs
    # (kubespray would not even start: two etcd hosts are an even count).
    etcd.kill_at(HOSTS['cp2'])
    cp1 = [etcd.client_url(HOSTS['cp1'])]
    put = etcd.ctl(cp1, 'put', 'k', 'v')
    refused(put)
    local = etcd.ctl(cp1, 'get', 'k', '--consistency=s')
    assert local.returncode == 0 and local.stdout == ''
    cp2 = [m for m in json.loads(etcd.ctl(cp1, 'member', 'list', '-w',
                                          'json').stdout)['members']
           if m['name'] == 'etcd2']
    removal = etcd.ctl(cp1, 'member', 'remove', '%x' % cp2[0]['ID'])
    refused(removal)
    assert sorted(members(HOSTS['cp1'])[1]) == ['etcd1', 'etcd2']


def three_members(etcd_dir, hosts):
    """A new one-member cluster and two members joined at once, as the
    double's etcd role does them (a fresh 3-master instantiate, or a
    heal's join): *hosts* ``{'cp1'..'cp3': address}``."""
    etcd.start_new(etcd_dir, 'etcd1', hosts['cp1'],
                   [('etcd1', etcd.peer_url(hosts['cp1']))])
    for i in (2, 3):
        etcd.join(etcd_dir, 'etcd%d' % i, hosts['cp%d' % i],
                  [etcd.client_url(hosts['cp1'])])


def test_the_wait_before_a_removal_refuses_then_waits_for_a_member(
        server, site, tmp_path):
    etcd_dir = str(site.etcd_dir)
    three_members(etcd_dir, OTHERS)
    leaving = {'cp3': OTHERS['cp3']}
    cp1 = [etcd.client_url(OTHERS['cp1'])]

    # cp2's etcd is down: removing cp3 would leave one member of two
    # running.  The wait refuses within its bound, naming the member, and
    # nothing was removed.
    etcd.kill_at(OTHERS['cp2'])
    with pytest.raises(exceptions.EtcdNotReady) as raised:
        wait_as_the_driver(server, site, OTHERS['cp1'], leaving, tmp_path,
                           timeout=3)
    message = str(raised.value)
    assert 'etcd2 not healthy' in message
    assert re.search(r'after \d+ s \(etcd_member_wait = 3\)', message)
    assert sorted(members(OTHERS['cp1'])[1]) == ['etcd1', 'etcd2', 'etcd3']

    # cp2's etcd comes back while the driver waits (at its first sleep):
    # the wait sees it healthy, holds for etcd's 5 s, and etcd then
    # accepts the removal kubespray's remove-etcd-node asks the first
    # etcd host for, at once.
    restarted = []

    def sleep(seconds):
        if not restarted:
            restarted.append(etcd.join(etcd_dir, 'etcd2', OTHERS['cp2'],
                                       cp1))
        time.sleep(seconds)
    waited, lines = wait_as_the_driver(server, site, OTHERS['cp1'], leaving,
                                       tmp_path, sleep=sleep)
    assert restarted == ['etcd member etcd2 restarted']
    assert 'etcd2 not healthy' in lines[0]
    assert any('healthy for' in line and 'of the 5 s' in line
               for line in lines[1:])
    cp3 = [m for m in json.loads(etcd.ctl(cp1, 'member', 'list', '-w',
                                          'json').stdout)['members']
           if m['name'] == 'etcd3']
    removal = etcd.ctl(cp1, 'member', 'remove', '%x' % cp3[0]['ID'])
    assert removal.returncode == 0, removal.stderr
    assert sorted(members(OTHERS['cp1'])[1]) == ['etcd1', 'etcd2']
