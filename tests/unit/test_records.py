"""mgmt_driver.state.records: the driver's own record of each VNF instance."""

import json
import multiprocessing
import os
import stat

import pytest
from oslo_config import cfg

from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.state import records

MASTER = records.Host('192.0.2.10', 22, 'master')
LB = records.Host('192.0.2.40', 2222, 'external_lb')
ANSIBLE = records.Host('192.0.2.1', 22, records.ROLE_ANSIBLE)


@pytest.fixture
def store(tmp_path):
    return records.RecordStore(str(tmp_path / 'records'))


@pytest.mark.parametrize('instance_id', [
    '', '.hidden', '../x', 'a/b', 'a\nb', 'x' * 200, None, '-rf'])
def test_unsafe_instance_ids_are_refused(store, instance_id):
    with pytest.raises(exceptions.MgmtDriverParamInvalid):
        store.path(instance_id)


def _owned(store, instance_id, *hosts):
    """Record *hosts* and claim a key of each, as the driver's logins
    do."""
    store.add_hosts(instance_id, hosts)
    for host in hosts:
        store.claim_key(instance_id, host.address, host.port, key(host))


def key(host):
    return 'ssh-ed25519 KEY-%s-%d' % host.endpoint


def test_record_file_format_and_mode(store):
    store.add_hosts('i-1', [LB, MASTER])
    store.add_hosts('i-1', [MASTER, ANSIBLE])
    store.claim_key('i-1', MASTER.address, MASTER.port, 'ssh-ed25519 AAAA')
    store.set_vim('i-1', records.TACKER_VIM, 'vim-7', 'kubernetes_vim_i-1')
    path = store.path('i-1')
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    doc = json.loads(open(path).read())
    assert doc == {
        'format': 1, 'instance_id': 'i-1',
        'hosts': [{'address': '192.0.2.1', 'port': 22, 'role': 'ansible'},
                  {'address': '192.0.2.10', 'port': 22, 'role': 'master'},
                  {'address': '192.0.2.40', 'port': 2222,
                   'role': 'external_lb'}],
        'keys': [{'address': '192.0.2.10', 'port': 22,
                  'key': 'ssh-ed25519 AAAA'}],
        'vims': {'tacker_vim': {'id': 'vim-7',
                                'name': 'kubernetes_vim_i-1'}}}
    assert not [n for n in os.listdir(store.directory) if '.tmp' in n]


def test_load_of_an_absent_record_is_empty(store):
    record = store.load('i-1')
    assert (record.hosts, record.vims) == ([], {})
    assert not os.path.exists(store.directory)


def test_drop_hosts_and_clear_vim(store):
    store.add_hosts('i-1', [MASTER, LB])
    store.set_vim('i-1', records.TACKER_VIM, 'vim-7', 'k')
    store.set_vim('i-1', records.KUBECONFIG, '/kc/k.kubeconfig', 'k')
    store.drop_hosts('i-1', {LB.endpoint})
    store.clear_vim('i-1', records.TACKER_VIM)
    record = store.load('i-1')
    assert record.hosts == [MASTER]
    assert record.vim_id(records.TACKER_VIM) is None
    assert record.vim_id(records.KUBECONFIG) == '/kc/k.kubeconfig'


@pytest.mark.parametrize('text', ['{', '[]', '{"format": 2}',
                                  '{"format": 1, "hosts": [{"port": 1}]}'])
def test_a_damaged_record_is_an_error_naming_the_file(store, text):
    os.makedirs(store.directory)
    with open(store.path('i-1'), 'w') as f:
        f.write(text)
    with pytest.raises(exceptions.InstanceRecordInvalid,
                       match=store.path('i-1')):
        store.load('i-1')


def test_default_directory_is_beside_known_hosts(tmp_path):
    conf = cfg.ConfigOpts()
    kconf.register_opts(conf)
    conf([])
    conf.set_override('known_hosts_file', str(tmp_path / 'kh' / 'hosts'),
                      group=kconf.GROUP)
    assert records.default_directory(conf) == str(tmp_path / 'kh' /
                                                  'records')
    conf.set_override('records_dir', str(tmp_path / 'r'), group=kconf.GROUP)
    assert records.RecordStore.from_conf(conf).directory == str(
        tmp_path / 'r')


class Calls:
    def __init__(self, fail=None):
        self.forgotten, self.unregistered, self.keys = [], [], []
        self.fail = fail

    def forget(self, address, port, key):
        self.forgotten.append((address, port))
        self.keys.append(key)

    def unregister(self, vim_id):
        if self.fail:
            raise self.fail
        self.unregistered.append(vim_id)


def test_release_deletes_the_vim_forgets_keys_and_the_record(store):
    _owned(store, 'i-1', MASTER, LB, ANSIBLE)
    store.set_vim('i-1', records.TACKER_VIM, 'vim-7', 'k')
    calls = Calls()
    gone = records.release(store, 'i-1', calls.forget, records.TACKER_VIM,
                           calls.unregister)
    assert calls.unregistered == ['vim-7']
    assert sorted(calls.forgotten) == sorted(gone) == sorted(
        [MASTER.endpoint, LB.endpoint])
    # Exactly the keys claimed: another key of the host stays.
    assert sorted(calls.keys) == sorted([key(MASTER), key(LB)])
    assert not os.path.exists(store.path('i-1'))
    again = Calls()
    assert records.release(store, 'i-1', again.forget, records.TACKER_VIM,
                           again.unregister) == []
    assert (again.forgotten, again.unregistered) == ([], [])


def test_release_forgets_only_owned_keys(store):
    _owned(store, 'i-1', MASTER)
    store.add_hosts('i-1', [LB])  # listed, never logged in to
    # Another instance names both; that keeps nothing of i-1's.
    store.add_hosts('i-2', [records.Host('192.0.2.10', 22, 'worker'),
                            records.Host(LB.address, LB.port, 'worker')])
    calls = Calls()
    assert records.release(store, 'i-1', calls.forget, records.TACKER_VIM,
                           calls.unregister) == [MASTER.endpoint]
    assert [h.endpoint for h in store.load('i-2').hosts] == [
        MASTER.endpoint, LB.endpoint]


def test_release_keeps_keys_of_ansible_servers_and_others_claims(store):
    worker = records.Host(ANSIBLE.address, ANSIBLE.port, 'worker')
    _owned(store, 'i-1', worker, MASTER, LB)
    store.add_hosts('i-2', [ANSIBLE])
    store.claim_key('i-2', LB.address, LB.port, key(LB))
    calls = Calls()
    assert records.release(store, 'i-1', calls.forget, records.TACKER_VIM,
                           calls.unregister) == [MASTER.endpoint]


def test_forget_keys_drops_claims_and_optionally_hosts(store):
    _owned(store, 'i-1', MASTER, LB)
    calls = Calls()
    assert store.forget_keys('i-1', {LB.endpoint}, calls.forget) == [
        LB.endpoint]
    record = store.load('i-1')
    assert (set(record.keys), len(record.hosts)) == ({MASTER.endpoint}, 2)
    assert store.forget_keys('i-1', {LB.endpoint, MASTER.endpoint},
                             calls.forget, drop=True) == [MASTER.endpoint]
    record = store.load('i-1')
    assert (record.keys, record.hosts) == ({}, [])


def test_a_legacy_record_stays_legacy_and_owns_only_new_claims(store):
    os.makedirs(store.directory)
    with open(store.path('i-1'), 'w') as f:
        json.dump({'format': 1, 'instance_id': 'i-1', 'vims': {},
                   'hosts': [{'address': '192.0.2.10', 'port': 22,
                              'role': 'master'}]}, f)
    store.add_hosts('i-1', [LB])
    store.claim_key('i-1', LB.address, LB.port, key(LB))
    record = store.load('i-1')
    assert record.legacy and json.load(open(store.path('i-1')))['legacy']
    calls = Calls()
    assert records.release(store, 'i-1', calls.forget, records.TACKER_VIM,
                           calls.unregister) == [LB.endpoint]


def test_release_keeps_the_record_when_the_vim_cannot_be_deleted(store):
    store.add_hosts('i-1', [MASTER])
    store.set_vim('i-1', records.TACKER_VIM, 'vim-7', 'k')
    calls = Calls(fail=exceptions.MgmtDriverOtherError(error_message='db'))
    with pytest.raises(exceptions.MgmtDriverOtherError):
        records.release(store, 'i-1', calls.forget, records.TACKER_VIM,
                        calls.unregister)
    assert calls.forgotten == []
    assert store.load('i-1').vim_id(records.TACKER_VIM) == 'vim-7'


def _add_many(directory, index):
    store = records.RecordStore(directory)
    for i in range(10):
        store.add_hosts('i-1', [records.Host('10.%d.0.%d' % (index, i), 22,
                                             'worker')])


def test_processes_adding_hosts_keep_every_one(store):
    context = multiprocessing.get_context('fork')
    workers = [context.Process(target=_add_many,
                               args=(store.directory, i)) for i in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [w.exitcode for w in workers] == [0] * 4
    assert len(store.load('i-1').hosts) == 40


def test_release_keeps_what_another_tool_registered(store):
    _owned(store, 'i-1', MASTER)
    store.set_vim('i-1', records.TACKER_VIM, 'vim-7', 'k')
    store.set_vim('i-1', records.KUBECONFIG, '/kc/k.kubeconfig', 'k')
    calls = Calls()
    records.release(store, 'i-1', calls.forget, records.KUBECONFIG,
                    calls.unregister)
    assert calls.unregistered == ['/kc/k.kubeconfig']
    assert calls.forgotten == [MASTER.endpoint]
    record = store.load('i-1')
    assert (record.hosts, record.vim_id(records.TACKER_VIM)) == ([], 'vim-7')


def test_a_damaged_record_of_another_instance_does_not_stop_release(store):
    _owned(store, 'i-1', MASTER)
    with open(store.path('i-2'), 'w') as f:
        f.write('{')
    calls = Calls()
    assert records.release(store, 'i-1', calls.forget, records.TACKER_VIM,
                           calls.unregister) == [MASTER.endpoint]
