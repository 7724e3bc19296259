"""mgmt_driver.operations.etcdsnapshots with the recording SSH fake.

Names, listings and pruning are pure; a snapshot is saved on the first
master that can (kubespray's etcdctl.sh, no key on the command line),
copied to the workspace with mode 0600 and deleted from the master; a
heal of a master or an upgrade that cannot have one changes nothing;
a PATCH's tag takes one snapshot once.
"""

import base64
import json

import pytest
from oslo_config import cfg

from mgmt_driver.adapters import lcm_requests
from mgmt_driver.adapters import status
from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.model import nodes as nodes_mod
from mgmt_driver.model import params
from mgmt_driver.operations import etcdsnapshots as snaps
from mgmt_driver.operations import lcm
from mgmt_driver.operations import upgrade
from mgmt_driver.session import driver
from mgmt_driver.state import kubeversion
from tests.fakes import FakeConnection
from tests.fakes import FakePool
from tests.unit.test_driver import ANSIBLE
from tests.unit.test_driver import LAYOUT
from tests.unit.test_driver import _instantiate_params
from tests.unit.test_upgrade import _patch
from tests.unit.test_upgrade import _upgrade_harness

WORKSPACE = '/home/ubuntu/kubespray/inventory/mycluster/inst-1'
SNAPSHOTS = WORKSPACE + '/etcd-snapshots'
MASTERS = ['192.168.10.11', '192.168.10.12', '192.168.10.13']
SAVE = 'kubespray-mgmt-script: etcd-snapshot-save'
LISTING = 'kubespray-mgmt-script: etcd-snapshots'


@pytest.fixture
def conf():
    conf = cfg.ConfigOpts()
    kconf.register_opts(conf)
    conf([])
    conf.set_override('kubectl_sudo', 'never', group=kconf.GROUP)
    return conf


def _spec():
    extra = _instantiate_params(workers=1)
    nodes = extra['k8s_cluster_installation_param']['nodes']
    nodes[1:1] = [{'role': 'master', 'ssh_ip': address,
                   'nic_ip': address.replace('192.168', '10.10')}
                  for address in MASTERS[1:]]
    return params.parse_params(extra)


def _context(conf, pool=None):
    spec = _spec()
    pool = pool or FakePool()
    pool.connection(ANSIBLE).script(r'KS:MISSING', stdout=LAYOUT)
    drv = driver.ClusterDriver(spec, 'inst-1', pool, conf)
    return drv, nodes_mod.nodes_from_spec(spec), pool


def _names(*times, reason='heal'):
    return ['etcd-20261126T%sZ-%s.db' % (t, reason) for t in times]


# --------------------------------------------------------------- pure --

def test_names_round_trip_and_bad_reasons_are_refused():
    import datetime
    when = datetime.datetime(2026, 11, 26, 12, 0, 5)
    name = snaps.snapshot_name(when, 'upgrade')
    assert name == 'etcd-20261126T120005Z-upgrade.db'
    assert snaps.parse_name(name) == ('20261126T120005Z', 'upgrade')
    for bad in ('', 'Upgrade', '-x', 'a/b', 'a' * 33, 7, None, 'x y'):
        with pytest.raises(exceptions.ParamsInvalid,
                           match='metadata.etcd_snapshot: must be'):
            snaps.check_reason(bad, 'metadata.etcd_snapshot')


def test_a_listing_keeps_only_snapshot_lines_oldest_first():
    text = '\n'.join([
        '30 etcd-20261126T120002Z-heal.db',
        '10 etcd-20261126T120001Z-upgrade.db',
        '99 ../etc/passwd', 'x etcd-20261126T120003Z-heal.db',
        '5 etcd-20261126T120004Z-heal.db extra', '',
        '7 etcd-2026-heal.db', '\x1b[31m1 etcd-20261126T120009Z-a.db'])
    assert snaps.parse_listing(text) == [
        {'name': 'etcd-20261126T120001Z-upgrade.db', 'bytes': 10,
         'time': '20261126T120001Z', 'reason': 'upgrade', 'partial': False},
        {'name': 'etcd-20261126T120002Z-heal.db', 'bytes': 30,
         'time': '20261126T120002Z', 'reason': 'heal', 'partial': False}]


def test_partial_copies_are_listed_and_always_pruned():
    # A copy whose temporary file could not be removed (issue 39): seen
    # by status, pruned whatever keep says, not counted in the size.
    text = '\n'.join(['10 etcd-20261126T120001Z-upgrade.db',
                      '900 .etcd-20261126T120002Z-heal.db.0a1b2c3d.tmp',
                      '5 .etcd-20261126T120003Z-heal.db.x.tmp'])
    listed = snaps.parse_listing(text)
    assert [(s['name'], s['partial']) for s in listed] == [
        ('etcd-20261126T120001Z-upgrade.db', False),
        ('.etcd-20261126T120002Z-heal.db.0a1b2c3d.tmp', True)]
    assert snaps.to_prune(listed, 3, 100) == [
        '.etcd-20261126T120002Z-heal.db.0a1b2c3d.tmp']


@pytest.mark.parametrize('sizes, keep, cap, doomed', [
    ([1, 1, 1, 1], 3, 100, [0]),         # by count: the oldest goes
    ([1, 1, 1, 1], 1, 100, [2, 1, 0]),
    ([50, 30, 40, 20], 3, 60, [1, 0]),   # by size: 20 + 40 fit, 30 not
    ([10, 500], 3, 100, [0]),            # the newest stays even alone
    ([], 3, 100, []),
])
def test_pruning_keeps_the_newest_within_count_and_size(sizes, keep, cap,
                                                        doomed):
    listed = [{'name': n, 'bytes': b} for n, b in zip(
        _names(*['12000%d' % i for i in range(len(sizes))]), sizes,
        strict=True)]
    assert snaps.to_prune(listed, keep, cap) == [listed[i]['name']
                                                 for i in doomed]


def test_the_saved_path_must_be_the_scripts_private_directory():
    good = '/tmp/kubespray-mgmt-etcd.Ab12Cd34/snapshot.db'
    assert snaps.parse_saved('noise\nKS:SNAPSHOT:%s\n' % good, 'h') == good
    for bad in ('/etc/kubernetes/admin.conf',
                '/tmp/kubespray-mgmt-etcd.Ab12Cd34/../../etc/shadow',
                '/tmp/kubespray-mgmt-etcd.Ab12Cd34/snapshot.db; rm -rf /'):
        with pytest.raises(exceptions.RemoteDataInvalid, match='KS:SNAP'):
            snaps.parse_saved('KS:SNAPSHOT:%s\n' % bad, 'h')


# ------------------------------------------------------------ remote --

def test_a_snapshot_is_copied_off_the_master_and_old_ones_pruned(conf):
    conf.set_override('etcd_snapshot_keep', 2, group=kconf.GROUP)
    conf.set_override('kubectl_sudo', 'always', group=kconf.GROUP)
    drv, cluster, pool = _context(conf)
    ansible = pool.connection(ANSIBLE)
    ansible.script(LISTING, stdout=''.join(
        '9 %s\n' % n for n in _names('100000', '110000', '120000')))
    taken = snaps.take(drv, cluster, 'manual')
    master = pool.connection(MASTERS[0])
    save = [c for c in master.commands if SAVE in c]
    assert len(save) == 1 and save[0].startswith('sudo -n sh -c ')
    assert save[0].endswith(" sh /usr/local/bin/etcdctl.sh ubuntu /tmp")
    path = SNAPSHOTS + '/' + taken['name']
    assert taken['path'] == path and snaps.parse_name(taken['name'])[1] == \
        'manual'
    assert ('copy_to', FakeConnection.SNAPSHOT_PATH, ANSIBLE, path) in \
        master.calls
    assert ansible.modes[path] == 0o600
    assert ansible.files[path] == 'etcd snapshot of ' + MASTERS[0]
    assert master.commands[-1] == (
        'rm -rf -- /tmp/kubespray-mgmt-etcd.FAKE0001')
    assert ansible.commands[0] == 'install -d -m 700 -- ' + SNAPSHOTS
    assert ansible.commands[-1] == 'rm -f -- %s/%s' % (
        SNAPSHOTS, _names('100000')[0])
    assert not [c for c in ansible.commands + master.commands
                if 'key' in c or '.pem' in c]


def test_a_master_that_cannot_is_skipped_and_none_raises(conf):
    drv, cluster, pool = _context(conf)
    pool.connection(MASTERS[0]).script(SAVE, stderr='Error: context '
                                       'deadline exceeded', exit_code=1)
    taken = snaps.take(drv, cluster, 'manual')
    assert taken['host'] == MASTERS[1]
    assert not [c for c in pool.connection(MASTERS[2]).commands
                if SAVE in c]
    for address in MASTERS[1:]:
        pool.connection(address).script(SAVE, exit_code=1, first=True)
    with pytest.raises(exceptions.MgmtDriverOtherError) as raised:
        snaps.take(drv, cluster, 'manual')
    message = str(raised.value)
    assert message.count('snapshot save on') == 3
    assert 'context deadline exceeded' in message


def test_a_snapshot_past_the_size_cap_is_not_kept(conf):
    conf.set_override('etcd_snapshot_max_total_mb', 1, group=kconf.GROUP)
    drv, cluster, pool = _context(conf)
    master = pool.connection(MASTERS[0])
    path = '/tmp/kubespray-mgmt-etcd.BIG00001/snapshot.db'
    master.script(SAVE, stdout='KS:SNAPSHOT:%s\n' % path, times=1)
    master.files[path] = 'x' * (1024 * 1024 + 1)
    taken = snaps.take(drv, cluster, 'manual')  # the next master's
    assert [c for c in master.commands if c.startswith('rm -rf')] == [
        'rm -rf -- /tmp/kubespray-mgmt-etcd.BIG00001']
    # The cap refused the first master's: the one kept is the next's.
    assert taken['host'] == MASTERS[1]
    kept = [p for p in pool.connection(ANSIBLE).files
            if p.startswith(SNAPSHOTS)]
    assert kept == [taken['path']]
    assert pool.connection(ANSIBLE).files[kept[0]] == \
        'etcd snapshot of ' + MASTERS[1]


def test_a_master_heal_without_a_snapshot_changes_nothing(conf):
    drv, cluster, pool = _context(conf)
    for address in MASTERS:
        pool.connection(address).script(SAVE, exit_code=1,
                                        stderr='no etcd here')
    with pytest.raises(exceptions.MgmtDriverOtherError,
                       match='the heal was not started, nothing was '
                             'changed:.*no etcd here'):
        lcm.heal_begin(drv, cluster, [cluster.masters[1].name])
    everything = [c for conn in pool.connections.values()
                  for c in conn.commands]
    # (the claim's one command asks ansible-playbook --version: no run)
    assert not [c for c in everything if 'ansible-playbook -i' in c or
                'kubectl' in c or SAVE not in c and 'install -d' not in c
                and 'etcd-snapshots' not in c and 'KS:MISSING' not in c
                and 'KR:' not in c and 'mkdir' not in c]
    # The healed master itself is never asked.
    assert not [c for c in pool.connection(MASTERS[1]).commands
                if SAVE in c]


def _kubectl_down(pool):
    """kubectl fails on every master: the heal stops at its first step
    after the snapshot (reconciling the node list)."""
    for address in MASTERS:
        pool.connection(address).script('kubectl', exit_code=1,
                                        stderr='connection refused')


def test_a_master_heal_takes_one_first_unless_told_not_to(conf):
    pool = FakePool()
    _kubectl_down(pool)
    drv, cluster, pool = _context(conf, pool)
    with pytest.raises(exceptions.NoReachableHost):
        lcm.heal_begin(drv, cluster, [cluster.masters[1].name])
    ansible = pool.connection(ANSIBLE)
    assert [p for p in ansible.files if p.endswith('-heal.db')]
    assert not [c for c in ansible.commands if 'ansible-playbook -i' in c]

    conf.set_override('etcd_snapshot_before_risky', False, group=kconf.GROUP)
    pool = FakePool()
    _kubectl_down(pool)
    drv, cluster, pool = _context(conf, pool)
    progress = []
    drv._progress = progress.append
    with pytest.raises(exceptions.NoReachableHost):
        lcm.heal_begin(drv, cluster, [cluster.masters[1].name])
    assert not [c for conn in pool.connections.values()
                for c in conn.commands if SAVE in c]
    assert any('etcd_snapshot_before_risky is false' in p for p in progress)


def test_a_master_heal_told_so_takes_none(conf):
    """A rolling replacement's later control-plane nodes: the snapshot
    was taken before its first one."""
    pool = FakePool()
    _kubectl_down(pool)
    drv, cluster, pool = _context(conf, pool)
    with pytest.raises(exceptions.NoReachableHost):
        lcm.heal_begin(drv, cluster, [cluster.masters[1].name],
                       snapshot=False)
    assert not [c for conn in pool.connections.values()
                for c in conn.commands if SAVE in c]


def test_a_worker_heal_takes_none(conf):
    pool = FakePool()
    _kubectl_down(pool)
    drv, cluster, pool = _context(conf, pool)
    with pytest.raises(exceptions.NoReachableHost):
        lcm.heal_begin(drv, cluster, [cluster.workers[0].name])
    assert not [c for conn in pool.connections.values()
                for c in conn.commands if SAVE in c]


def test_a_patch_tag_takes_one_snapshot_once(conf):
    drv, cluster, pool = _context(conf)
    ansible = pool.connection(ANSIBLE)
    record = WORKSPACE + '/' + snaps.REQUEST_RECORD

    def saves():
        return len([c for conn in pool.connections.values()
                    for c in conn.commands if SAVE in c])
    lcm.modify(drv, cluster, snapshot='before-maintenance')
    assert saves() == 1 and ansible.files[record] == 'before-maintenance\n'
    assert any(p.endswith('-before-maintenance.db') for p in ansible.files)
    lcm.modify(drv, cluster, snapshot='before-maintenance')
    assert saves() == 1
    lcm.modify(drv, cluster, snapshot='second')
    assert saves() == 2
    ansible.files[record] = '$(reboot)\n'
    with pytest.raises(exceptions.RemoteDataInvalid,
                       match='not a snapshot tag'):
        lcm.modify(drv, cluster, snapshot='third')


def test_a_failed_tagged_snapshot_is_taken_by_the_same_patch_again(conf):
    # The tag is recorded once its snapshot is kept, not before: the
    # same PATCH, sent again, tries again.
    drv, cluster, pool = _context(conf)
    record = WORKSPACE + '/' + snaps.REQUEST_RECORD
    for address in MASTERS:
        pool.connection(address).script(SAVE, exit_code=1, times=1,
                                        first=True)
    with pytest.raises(exceptions.MgmtDriverOtherError):
        lcm.modify(drv, cluster, snapshot='before-maintenance')
    assert record not in pool.connection(ANSIBLE).files
    lcm.modify(drv, cluster, snapshot='before-maintenance')
    assert pool.connection(ANSIBLE).files[record] == 'before-maintenance\n'
    assert any(p.endswith('-before-maintenance.db')
               for p in pool.connection(ANSIBLE).files)


def test_the_metadata_key_is_checked_and_described():
    wanted = upgrade.check_metadata({'etcd_snapshot': 'pre-1'},
                                    'vnf_metadata')
    assert wanted.etcd_snapshot == 'pre-1' and not wanted.empty
    with pytest.raises(exceptions.ParamsInvalid,
                       match='vnf_metadata.etcd_snapshot: must be'):
        upgrade.check_metadata({'etcd_snapshot': 'Pre 1'}, 'vnf_metadata')
    checked = lcm_requests.check({'metadata': {'etcd_snapshot': 'pre-1'}},
                                 lcm_requests.MODIFY)
    assert 'takes the etcd snapshot pre-1 (once)' in lcm_requests.describe(
        checked)


def test_the_cli_runs_snapshot_as_an_operation():
    assert 'snapshot' in lcm.COMMANDS


def test_status_lists_the_snapshots_newest_first(conf):
    pool = FakePool()
    ansible = pool.connection(ANSIBLE)
    ansible.script(LISTING, stdout='7 %s\n8 %s\n' % tuple(
        _names('100000', '110000')))
    reader = status.StatusReader(_spec(), 'inst-1', pool, conf)
    section = reader._etcd_snapshots()
    assert section['ok'] and section['directory'] == SNAPSHOTS
    assert [s['bytes'] for s in section['items']] == [8, 7]
    text = status._format_etcd_snapshots(section)
    assert text.splitlines()[0] == 'etcd snapshots (%s:%s)' % (
        ANSIBLE, SNAPSHOTS)
    # The time in the form of the rest of status, not the name's.
    assert '2026-11-26T11:00:00Z  heal    8      ' + _names('110000')[0] \
        in text
    assert json.loads(json.dumps(section)) == section
    ansible.script(LISTING, exit_code=1, stderr='Permission denied',
                   first=True)
    failed = reader._etcd_snapshots()
    assert not failed['ok'] and 'Permission denied' in failed['error']


def test_an_upgrade_without_a_snapshot_changes_nothing(conf):
    conf.set_override('haproxy_sudo', 'never', group=kconf.GROUP)
    h = _upgrade_harness(conf)
    h.master.script(SAVE, exit_code=1, stderr='etcdserver: no leader',
                    first=True)
    with pytest.raises(exceptions.MgmtDriverOtherError,
                       match='the upgrade was not started.*no leader'):
        _patch(h, {'kube_version': 'v1.34.3'})
    assert h.playbooks() == []
    assert kubeversion.RECORD_FILE not in h.workspace_files()
    assert h.lb.calls == []


def test_an_upgrade_takes_one_before_its_first_change(conf):
    conf.set_override('haproxy_sudo', 'never', group=kconf.GROUP)
    h = _upgrade_harness(conf)
    _patch(h, {'kube_version': 'v1.34.3'})
    names = [n for n in h.workspace_files() if n.startswith(
        snaps.SNAPSHOT_DIR + '/')]
    assert len(names) == 1 and names[0].endswith('-upgrade.db')
    commands = h.ansible.commands
    made = commands.index('install -d -m 700 -- ' + SNAPSHOTS)
    assert made < min(i for i, c in enumerate(commands)
                      if 'ansible-playbook -i' in c)
    # Every node at the target: nothing to do, no snapshot either.
    h = _upgrade_harness(conf, version='v1.34.3')
    _patch(h, {'kube_version': 'v1.34.3'})
    assert not [c for c in h.master.commands if SAVE in c]


def test_a_v2_patch_tag_takes_a_snapshot(conf, tmp_path):
    from tests.unit import test_v2
    for name, value in (('haproxy_sudo', 'never'),
                        ('records_dir', str(tmp_path / 'records')),
                        ('kubeconfig_dir', str(tmp_path / 'kubeconfigs'))):
        conf.set_override(name, value, group=kconf.GROUP)
    h = test_v2.Harness(conf)
    h.instantiate()
    assert not [p for p in h.ansible.files if '/etcd-snapshots/' in p]
    test_v2._modify_call(h, {'etcd_snapshot': 'v2-tag'}).run()
    [kept] = [p for p in h.ansible.files if '/etcd-snapshots/' in p]
    assert kept.endswith('-v2-tag.db') and h.ansible.modes[kept] == 0o600


# ------------------------------- issue 41 item 14: kept, and said so --

PINNED = WORKSPACE + '/' + snaps.PINNED_RECORD


def test_routine_snapshots_keep_the_one_of_an_unfinished_upgrade(conf):
    conf.set_override('etcd_snapshot_keep', 2, group=kconf.GROUP)
    drv, cluster, pool = _context(conf)
    ansible = pool.connection(ANSIBLE)
    before = _names('090000', reason='upgrade')[0]
    ansible.files[PINNED] = 'upgrade %s\n' % before
    ansible.script(LISTING, stdout=''.join('9 %s\n' % n for n in [
        before] + _names('100000', '110000', '120000', reason='manual')))
    summary = str(lcm.COMMANDS['snapshot'](drv, cluster, [], 'c'))
    deleted = _names('100000', reason='manual')
    assert ansible.commands[-1] == 'rm -f -- ' + ' '.join(
        SNAPSHOTS + '/' + n for n in deleted)
    assert summary.endswith('; deleted the older ' + ', '.join(deleted))


def test_a_risky_operation_pins_its_snapshot_until_it_finishes(conf):
    drv, cluster, pool = _context(conf)
    taken = snaps.before_risky(drv, cluster, 'upgrade')
    ansible = pool.connection(ANSIBLE)
    assert snaps.parse_pinned(ansible.files[PINNED]) == [
        (taken['name'], 'upgrade')]
    snaps.finished(drv, 'heal')
    assert snaps.parse_pinned(ansible.files[PINNED]) == [
        (taken['name'], 'upgrade')]
    snaps.finished(drv, 'upgrade')
    assert snaps.parse_pinned(ansible.files[PINNED]) == []


def test_the_claim_reads_the_pins_ahead_and_a_written_one_again(conf):
    """The pinned snapshots (every heal's end reads them) come with the
    claim's one command, not a transfer of their own; once written in
    the hook they are read from the server again."""
    assert snaps.PINNED_RECORD in driver._OPENED_RECORDS
    drv, cluster, pool = _context(conf)
    ansible = pool.connection(ANSIBLE)
    text = 'upgrade %s\n' % _names('090000')[0]
    ansible.files[PINNED] = text
    ansible.script(r'^program:open-workspace ', first=True, stdout=(
        LAYOUT + 'KO:FILE:%s:%d:%s\n' % (
            snaps.PINNED_RECORD, len(text),
            base64.b64encode(text.encode()).decode())))
    drv.claim()
    snaps.finished(drv, 'heal')  # another operation's pin: kept
    assert ('read_file', PINNED) not in ansible.calls
    snaps.finished(drv, 'upgrade')
    assert ('read_file', PINNED) in ansible.calls
    assert snaps.parse_pinned(ansible.files[PINNED]) == []


def test_a_finished_upgrade_leaves_no_pin(conf):
    conf.set_override('haproxy_sudo', 'never', group=kconf.GROUP)
    h = _upgrade_harness(conf)
    _patch(h, {'kube_version': 'v1.34.3'})
    assert snaps.parse_pinned(
        h.ansible.files.get(WORKSPACE + '/' + snaps.PINNED_RECORD)) == []


def test_a_bad_pin_record_is_refused_without_its_text():
    with pytest.raises(ValueError) as caught:
        snaps.parse_pinned('upgrade /etc/passwd\n')
    assert 'passwd' not in str(caught.value)


def test_a_whole_vnf_heal_keeps_the_snapshots(conf):
    drv, cluster, pool = _context(conf)
    ansible = pool.connection(ANSIBLE)
    names = _names('100000', '110000')
    listed = ''.join('9 %s\n' % n for n in names)
    ansible.script(LISTING, stdout=listed, times=1)
    assert snaps.set_aside(drv) == names
    aside = WORKSPACE + snaps.ASIDE_SUFFIX
    assert ansible.commands[-1] == 'mv -f -- %s %s/' % (' '.join(
        SNAPSHOTS + '/' + n for n in names), aside)
    ansible.script(LISTING, stdout=listed, times=1, first=True)
    assert snaps.bring_back(drv) == names
    assert ansible.commands[-2:] == ['mv -f -- %s %s/' % (' '.join(
        aside + '/' + n for n in names), SNAPSHOTS), 'rm -rf -- ' + aside]
