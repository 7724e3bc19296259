"""The local site's etcd members: command lines, data dirs, PID files.

Pure parts only (no etcd is started here; tests/functional/
test_real_etcd.py runs real members).
"""

import json
import os
import signal
import subprocess
import sys

import pytest
from mgmt_localsite import etcd

ADDRESS = '127.0.45.10'
CLUSTER = [('m1', 'http://127.0.45.10:2380'), ('m2', 'http://127.0.45.11:2380')]


def test_server_argv_listens_only_on_the_members_address(tmp_path):
    argv = etcd.server_argv('m1', ADDRESS, str(tmp_path / 'data'), CLUSTER,
                            'new', 'tok')
    assert argv[0] == etcd.binary('etcd')
    flags = dict(zip(argv[1::2], argv[2::2], strict=True))
    assert flags == {
        '--name': 'm1', '--data-dir': str(tmp_path / 'data'),
        '--listen-client-urls': 'http://127.0.45.10:2379',
        '--advertise-client-urls': 'http://127.0.45.10:2379',
        '--listen-peer-urls': 'http://127.0.45.10:2380',
        '--initial-advertise-peer-urls': 'http://127.0.45.10:2380',
        '--initial-cluster': 'm1=http://127.0.45.10:2380,'
                             'm2=http://127.0.45.11:2380',
        '--initial-cluster-state': 'new', '--initial-cluster-token': 'tok',
        '--heartbeat-interval': str(etcd.HEARTBEAT_MS),
        '--election-timeout': str(etcd.ELECTION_MS),
        '--logger': 'zap', '--log-outputs': 'stderr', '--log-level': 'warn'}
    # No default listener (etcd's is localhost:2379, shared by all sites).
    assert 'localhost' not in ' '.join(argv)
    assert '127.0.0.1' not in ' '.join(argv)


def test_server_argv_refuses_an_unknown_state(tmp_path):
    with pytest.raises(ValueError, match='initial cluster state'):
        etcd.server_argv('m1', ADDRESS, str(tmp_path), CLUSTER, 'old', 't')


def test_server_argv_existing():
    argv = etcd.server_argv('m2', '127.0.45.11', '/d', CLUSTER, 'existing',
                            't')
    assert argv[argv.index('--initial-cluster-state') + 1] == 'existing'


def test_member_files_live_under_the_sites_etcd_dir(tmp_path):
    where = etcd.paths(str(tmp_path), ADDRESS)
    base = str(tmp_path / ADDRESS)
    assert where == {'dir': base, 'data': base + '/data',
                     'pid': base + '/etcd.pid', 'log': base + '/etcd.log'}


def test_cluster_token_is_per_site(tmp_path):
    one, two = str(tmp_path / 'a' / 'etcd'), str(tmp_path / 'b' / 'etcd')
    assert etcd.cluster_token(one) == etcd.cluster_token(one)
    assert etcd.cluster_token(one) != etcd.cluster_token(two)


def test_urls():
    assert etcd.client_url(ADDRESS) == 'http://127.0.45.10:2379'
    assert etcd.peer_url('::1') == 'http://[::1]:2380'
    assert etcd.address_of('http://127.0.45.11:2380') == '127.0.45.11'
    assert etcd.address_of('https://[::1]:2380') == '::1'
    for bad in ('127.0.45.11:2380', 'ftp://h:1', 'http://:2380', ''):
        with pytest.raises(etcd.EtcdError, match='not an etcd URL'):
            etcd.address_of(bad)


def test_ctl_argv_names_the_endpoints_and_bounds_the_wait():
    argv = etcd.ctl_argv(['http://a:2379', 'http://b:2379'], 'member',
                         'list', '-w', 'json')
    assert argv == [etcd.binary('etcdctl'),
                    '--endpoints=http://a:2379,http://b:2379',
                    '--dial-timeout=2s', '--command-timeout=5s',
                    'member', 'list', '-w', 'json']


MEMBER_ADD = '''Member 89b7026eb0ab4f23 added to cluster 168ef9524cb35332

ETCD_NAME="m2"
ETCD_INITIAL_CLUSTER="m1=http://127.0.45.10:2380,m2=http://127.0.45.11:2380"
ETCD_INITIAL_ADVERTISE_PEER_URLS="http://127.0.45.11:2380"
ETCD_INITIAL_CLUSTER_STATE="existing"
'''


def test_initial_cluster_from_member_add_output():
    assert etcd.parse_initial_cluster(MEMBER_ADD) == CLUSTER


def test_member_add_output_without_initial_cluster():
    with pytest.raises(etcd.EtcdError, match='no ETCD_INITIAL_CLUSTER'):
        etcd.parse_initial_cluster('Member 1 added\n')


def test_a_pid_file_naming_another_process_is_not_the_member(tmp_path):
    """A recycled PID (here: a sleeping Python) is neither reported as
    the member nor killed by stop; the stale PID file goes."""
    proc = subprocess.Popen([sys.executable, '-c',
                             'import time; time.sleep(60)'])
    try:
        where = etcd.paths(str(tmp_path), ADDRESS)
        os.makedirs(where['data'])
        with open(where['pid'], 'w') as f:
            f.write('%d\n' % proc.pid)
        assert etcd.running_pid(str(tmp_path), ADDRESS) is None
        assert etcd.stop(str(tmp_path), ADDRESS, sig=signal.SIGKILL) is False
        assert proc.poll() is None
        assert not os.path.exists(where['pid'])
        assert os.path.isdir(where['data'])
        etcd.stop(str(tmp_path), ADDRESS, wipe=True)
        assert not os.path.exists(where['data'])
    finally:
        proc.kill()
        proc.wait()


def test_no_members_without_an_etcd_dir(tmp_path):
    missing = str(tmp_path / 'none')
    assert etcd.addresses(missing) == []
    assert etcd.stop_all(missing) == []
    assert etcd.member_names(missing) == []


def _member_dir(etcd_dir, address, content):
    where = etcd.paths(str(etcd_dir), address)
    os.makedirs(os.path.join(where['data'], 'member'), mode=0o700)
    with open(os.path.join(where['data'], 'member', 'wal'), 'w') as f:
        f.write(content)
    return where


def test_copy_tree_keeps_modes_and_owners(tmp_path):
    """A snapshot taken as root keeps the site user's files the site
    user's (etcd refuses a data dir it cannot write)."""
    where = _member_dir(tmp_path / 'etcd', ADDRESS, 'log')
    wal = os.path.join(where['data'], 'member', 'wal')
    os.chmod(wal, 0o600)
    if os.geteuid() == 0:
        os.chown(wal, 65534, 65534)
    etcd.copy_tree(where['dir'], str(tmp_path / 'copy'))
    copy = tmp_path / 'copy' / 'data' / 'member' / 'wal'
    assert copy.read_text() == 'log'
    assert (copy.stat().st_mode, copy.stat().st_uid) == (
        os.stat(wal).st_mode, os.stat(wal).st_uid)
    assert (tmp_path / 'copy' / 'data' / 'member').stat().st_mode & \
        0o777 == 0o700
    with pytest.raises(FileExistsError):
        etcd.copy_tree(where['dir'], str(tmp_path / 'copy'))


def test_restore_puts_back_every_members_data_and_only_theirs(tmp_path):
    """Stopped members (no process: nothing to start again): restore
    replaces each member's directory with the saved one and deletes a
    member the snapshot does not have."""
    etcd_dir = tmp_path / 'etcd'
    _member_dir(etcd_dir, ADDRESS, 'saved')
    etcd.save(str(etcd_dir), str(tmp_path / 'snap'))
    assert json.loads((tmp_path / 'snap' / etcd.SAVED_MEMBERS)
                      .read_text()) == []
    wal = etcd_dir / ADDRESS / 'data' / 'member' / 'wal'
    wal.write_text('changed')
    _member_dir(etcd_dir, '127.0.45.11', 'new')
    etcd.restore(str(etcd_dir), str(tmp_path / 'snap'))
    assert wal.read_text() == 'saved'
    assert etcd.addresses(str(etcd_dir)) == [ADDRESS]


def _fake_member(address):
    """A process /proc shows as the etcd member at *address* (a sleeping
    Python named ``etcd``, with the member's peer flag)."""
    return subprocess.Popen(
        ['etcd', '-c', 'import time; time.sleep(60)',
         '--listen-peer-urls', etcd.peer_url(address)],
        executable=sys.executable)


def test_a_crash_kills_only_the_member_of_this_network_namespace(
        monkeypatch):
    """Another suite run in a namespace of its own serves the same
    addresses: its member there is not this site's VM."""
    address = '127.0.253.77'
    proc = _fake_member(address)
    try:
        here = etcd._netns('self')
        monkeypatch.setattr(etcd, '_netns', lambda pid: here if pid ==
                            'self' else 'net:[another]')
        assert etcd.kill_at(address) == []
        assert proc.poll() is None
        monkeypatch.setattr(etcd, '_netns', lambda pid: here)
        assert etcd.kill_at(address) == [proc.pid]
        assert proc.wait(10) == -signal.SIGKILL
    finally:
        proc.kill()
        proc.wait()
