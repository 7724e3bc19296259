"""Several conductors: the store's identity, the refusal of an operation
whose instance this store does not hold, and the per-instance lock
(mgmt_driver.state.statestore)."""

import logging
import os
import socket
import subprocess
import sys
import threading
import types

import pytest

from mgmt_driver.adapters import v2
from mgmt_driver.common import exceptions
from mgmt_driver.state import records
from mgmt_driver.state import statestore
from tests.unit import test_driver as td
from tests.unit import test_v2
from tests.unit.test_driver import conf  # noqa: F401 (fixture)


def _shared(conf, root, store_id='store-1', marker=True):  # noqa: F811
    """Point every state location of *conf* into *root*."""
    for name, value in (('known_hosts_file', str(root / 'known_hosts')),
                        ('kubeconfig_dir', str(root / 'clusters')),
                        ('state_store_id', store_id)):
        conf.set_override(name, value, group='kubespray_mgmt')
    root.mkdir(exist_ok=True)
    if marker:
        (root / statestore.MARKER).write_text('store-1\n')
    return records.RecordStore.from_conf(conf)


# --- identity -----------------------------------------------------------

def test_no_store_id_is_one_conductor_and_checks_nothing(conf):  # noqa: F811
    assert statestore.identity_problems(conf) == []
    statestore.check_identity(conf)


def test_the_shared_store_is_found_from_every_location(conf,  # noqa: F811
                                                       tmp_path):
    _shared(conf, tmp_path / 'state')
    assert statestore.identity_problems(conf) == []


def test_an_unmounted_store_refuses_naming_directory_and_option(
        conf, tmp_path):  # noqa: F811
    _shared(conf, tmp_path / 'state', marker=False)
    with pytest.raises(exceptions.StateStoreUnusable) as info:
        statestore.check_identity(conf)
    text = str(info.value)
    assert '[kubespray_mgmt] records_dir: %s is in no directory holding ' \
        '%s' % (tmp_path / 'state' / 'records', statestore.MARKER) in text
    assert '[kubespray_mgmt] kubeconfig_dir' in text
    assert 'nothing was changed' in text


def test_another_store_refuses_naming_both_ids(conf, tmp_path):  # noqa: F811
    _shared(conf, tmp_path / 'state', store_id='store-2')
    problems = statestore.identity_problems(conf)
    assert len(problems) == 3
    assert "belongs to the store 'store-1'" in problems[0]
    assert "[kubespray_mgmt] state_store_id 'store-2'" in problems[0]


@pytest.mark.parametrize('found, wanted', [('prod-10', 'prod-1'),
                                           ('prod-1', 'prod-10'),
                                           ('prod-1 ', 'prod-1x')])
def test_a_store_id_is_compared_whole(conf, tmp_path, found,  # noqa: F811
                                      wanted):
    _shared(conf, tmp_path / 'state', store_id=wanted)
    (tmp_path / 'state' / statestore.MARKER).write_text(found + '\n')
    assert len(statestore.identity_problems(conf)) == 3


def test_a_location_outside_the_store_is_named_alone(conf,  # noqa: F811
                                                     tmp_path):
    _shared(conf, tmp_path / 'state')
    conf.set_override('kubeconfig_dir', str(tmp_path / 'local'),
                      group='kubespray_mgmt')
    [problem] = statestore.identity_problems(conf)
    assert problem.startswith('[kubespray_mgmt] kubeconfig_dir: %s ' % (
        tmp_path / 'local'))


# --- records: missing, present, released --------------------------------

def test_a_released_record_leaves_a_marker_and_writing_drops_it(
        conf, tmp_path):  # noqa: F811
    store = records.RecordStore(str(tmp_path))
    assert store.state('i1') == records.MISSING
    store.add_hosts('i1', [records.Host('192.0.2.1', 22, 'master')])
    assert store.state('i1') == records.PRESENT
    records.release(store, 'i1', lambda *a: None, records.TACKER_VIM,
                    lambda vim_id: None)
    assert store.state('i1') == records.RELEASED
    assert oct(os.stat(store.released_path('i1')).st_mode & 0o777) == \
        '0o600'
    assert store.load('i1').hosts == []
    store.add_hosts('i1', [records.Host('192.0.2.1', 22, 'master')])
    assert store.state('i1') == records.PRESENT
    assert not os.path.exists(store.released_path('i1'))


def test_require_record_names_the_option_and_logs_the_path(
        tmp_path, caplog):
    """The tenant sees the error (issue 39 item 8): the conductor's
    path goes to its log only."""
    caplog.set_level(logging.INFO)
    store = records.RecordStore(str(tmp_path))
    with pytest.raises(exceptions.InstanceStateMissing) as info:
        statestore.require_record(store, 'i1', 'terminate_end')
    text = str(info.value)
    assert 'terminate_end of VNF instance i1 needs' in text
    assert 'does not have its record (see the conductor' in text
    assert 'Point [kubespray_mgmt] records_dir at' in text
    assert str(tmp_path) not in text
    assert 'its record not found at %s' % store.path('i1') in caplog.text
    store.remove('i1')  # released: nothing is owned any more
    statestore.require_record(store, 'i1', 'terminate_end')


# --- the v1 hooks --------------------------------------------------------

def _other_conductor(conf):  # noqa: F811
    """A harness whose instance inst-1 was instantiated elsewhere: this
    conductor's store does not hold its record."""
    h = td.Harness(conf)
    records.RecordStore.from_conf(conf).remove('inst-1')
    os.unlink(records.RecordStore.from_conf(conf).released_path('inst-1'))
    return h


def _untouched(h):
    assert h.registry.calls == []
    assert all(not c.calls for c in h.pool.connections.values())


@pytest.mark.parametrize('hook, request_fields', [
    ('terminate_start', {}), ('terminate_end', {}),
    ('scale_end', {'type': 'SCALE_OUT'}),
    ('scale_start', {'type': 'SCALE_IN'}),
    ('heal_start', {'vnfc_instance_id': []}),
    ('heal_end', {'vnfc_instance_id': []})])
def test_a_hook_without_the_record_refuses_before_any_change(
        conf, hook, request_fields):  # noqa: F811
    h = _other_conductor(conf)
    extra = td._instantiate_params()
    h.registry.current['kubernetes_vim_simple'] = 'A registered it'
    with pytest.raises(exceptions.InstanceStateMissing) as info:
        getattr(h.hooks, hook)(None, h.instance(extra),
                               td._request({}, **request_fields), None,
                               None)
    assert '%s of VNF instance inst-1' % hook in str(info.value)
    _untouched(h)
    assert list(h.registry.current) == ['kubernetes_vim_simple']


def test_an_upgrade_without_the_record_refuses(conf):  # noqa: F811
    h = _other_conductor(conf)
    instance = h.instance(td._instantiate_params())
    instance.vnf_metadata = {'kube_version': '1.34.3'}
    with pytest.raises(exceptions.InstanceStateMissing):
        h.hooks.modify_information_end(None, instance, None, None, None)
    _untouched(h)


def test_a_rollback_and_a_new_instantiate_need_no_record(conf):  # noqa: F811
    h = _other_conductor(conf)
    extra = td._instantiate_params()
    # Tacker's rollback of an instantiate: no request.
    h.hooks.terminate_end(None, h.instance(extra), None, None, None)
    h.hooks.instantiate_end(None, h.instance(extra), td._request(extra),
                            None, None)
    assert h.playbooks() == ['cluster.yml']


def test_terminate_then_terminate_again_finishes(conf):  # noqa: F811
    h = td.Harness(conf)
    extra = td._instantiate_params()
    h.hooks.instantiate_end(None, h.instance(extra), td._request(extra),
                            None, None)
    for _ in range(2):
        h.hooks.terminate_end(None, h.instance(extra), td._request({}),
                              None, None)
    assert h.registry.calls == [('register', 'kubernetes_vim_simple'),
                                ('unregister', 'kubernetes_vim_simple')]


def test_a_hook_on_another_store_refuses_before_any_file(conf,  # noqa: F811
                                                         tmp_path):
    h = td.Harness(conf)
    store = _shared(conf, tmp_path / 'state', marker=False)
    extra = td._instantiate_params()
    with pytest.raises(exceptions.StateStoreUnusable):
        h.hooks.instantiate_end(None, h.instance(extra), td._request(extra),
                                None, None)
    _untouched(h)
    assert not os.path.exists(store.directory)


# --- the lock -------------------------------------------------------------

def _hold_in_thread(store, instance_id, operation='heal_end'):
    """Hold the lock in another thread until the returned event is set."""
    held, release = threading.Event(), threading.Event()

    def run():
        with statestore.instance_lock(store, instance_id, operation):
            held.set()
            release.wait(10)
    thread = threading.Thread(target=run)
    thread.start()
    assert held.wait(10)
    return release, thread


def test_a_second_operation_is_refused_naming_the_holder(
        tmp_path, caplog):
    """The tenant sees the holder's operation and since when; the
    conductor's host name and pid go to its log only (issue 39 item
    8)."""
    caplog.set_level(logging.INFO)
    store = records.RecordStore(str(tmp_path))
    release, thread = _hold_in_thread(store, 'i1')
    try:
        with pytest.raises(exceptions.InstanceBusy) as info:
            with statestore.instance_lock(store, 'i1', 'scale_end'):
                pass
        text = str(info.value)
        assert 'holds its state lock (operation heal_end since 20' in text
        assert 'so scale_end changed nothing after waiting 0 s' in text
        for detail in (socket.gethostname(), 'pid %d' % os.getpid()):
            assert detail not in text
            assert detail in caplog.text
        # Another instance is not held up.
        with statestore.instance_lock(store, 'i2', 'scale_end'):
            pass
    finally:
        release.set()
        thread.join()


def test_a_waiting_operation_gets_the_lock_once_released(tmp_path):
    store = records.RecordStore(str(tmp_path))
    release, thread = _hold_in_thread(store, 'i1')
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        release.set()
        thread.join()
    with statestore.instance_lock(store, 'i1', 'scale_end', wait=30,
                                  sleep=sleep):
        pass
    assert slept == [statestore._POLL]


def test_a_hook_waits_state_lock_wait_for_the_lock(conf, tmp_path,  # noqa: F811,E501
                                                  monkeypatch):
    conf.set_override('state_lock_wait', 7, group='kubespray_mgmt')
    store = records.RecordStore(str(tmp_path))
    now = [0.0]
    monkeypatch.setattr(statestore, 'time', types.SimpleNamespace(
        monotonic=lambda: now[0],
        sleep=lambda seconds: now.__setitem__(0, now[0] + seconds)))
    release, thread = _hold_in_thread(store, 'i1')
    try:
        with pytest.raises(exceptions.InstanceBusy):
            with statestore.guard(conf, store, types.SimpleNamespace(
                    id='i1'), 'scale_end', None):
                pass
    finally:
        release.set()
        thread.join()
    assert now[0] == 7


def test_the_lock_is_reentrant_in_one_thread(tmp_path):
    store = records.RecordStore(str(tmp_path))
    with statestore.instance_lock(store, 'i1', 'heal_end'):
        with statestore.instance_lock(store, 'i1', 'heal_end'):
            pass
        assert 'i1' in statestore._held()
    assert 'i1' not in statestore._held()


_HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, b'operation heal_end on host conductor-a, pid 1\\n')
print('held', flush=True)
sys.stdin.read()
"""


def test_another_process_holding_it_refuses_a_hook(conf):  # noqa: F811
    """As a conductor on another host does, through a shared file."""
    h = td.Harness(conf)
    path = statestore.lock_path(records.RecordStore.from_conf(conf), 'inst-1')
    os.makedirs(os.path.dirname(path), exist_ok=True)
    holder = subprocess.Popen([sys.executable, '-c', _HOLDER, path],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b'held\n'
        extra = td._instantiate_params()
        with pytest.raises(exceptions.InstanceBusy) as info:
            h.hooks.scale_end(None, h.instance(extra),
                              td._request({}, type='SCALE_OUT'), None, None)
        assert '(another operation)' in str(info.value)
        assert 'conductor-a' not in str(info.value)
        _untouched(h)
    finally:
        holder.communicate(b'', timeout=10)
    h.hooks.terminate_start(None, h.instance(td._instantiate_params()),
                            None, None, None)


# --- v2 ---------------------------------------------------------------------

def test_v2_terminate_without_kept_params_refuses(conf):  # noqa: F811
    h = test_v2.Harness(conf)
    for operation in ('terminate_start', 'terminate_end'):
        with pytest.raises(exceptions.InstanceStateMissing) as info:
            h.run(operation, {'terminationType': 'FORCEFUL'})
        assert 'the instantiate parameters kept for Tacker v2 (see the' \
            in str(info.value)
        assert h.store.path(h.vnf.id) not in str(info.value)
    assert h.ansible.commands == []


def test_v2_terminate_again_after_release_finishes(conf):  # noqa: F811
    h = test_v2.Harness(conf)
    h.instantiate()
    for _ in range(2):
        h.run('terminate_start', {'terminationType': 'FORCEFUL'})
        h.run('terminate_end', {'terminationType': 'FORCEFUL'})
    assert h.store.load(h.vnf.id) is None
    assert records.RecordStore.from_conf(conf).state(h.vnf.id) == \
        records.RELEASED


def test_v2_script_call_holds_the_lock(conf):  # noqa: F811
    h = test_v2.Harness(conf)
    h.instantiate()
    store = records.RecordStore.from_conf(conf)
    release, thread = _hold_in_thread(store, h.vnf.id, 'heal_end')
    try:
        with pytest.raises(exceptions.InstanceBusy):
            h.run('scale_end', {'type': 'SCALE_OUT'})
    finally:
        release.set()
        thread.join()
    assert v2.SpecStore.from_conf(conf).load(h.vnf.id) is not None


# --- kubespray-mgmt state check ---------------------------------------------

def _state_check(tmp_path, capsys, store_id='prod-1'):
    from mgmt_driver.adapters import cli
    state = tmp_path / 'state'
    config = tmp_path / 'tacker.conf'
    config.write_text('[kubespray_mgmt]\nknown_hosts_file = %s\n'
                      'kubeconfig_dir = %s\nstate_store_id = %s\n' % (
                          state / 'known_hosts', state / 'clusters',
                          store_id))
    code = cli.main(['--config-file', str(config), 'state', 'check'])
    return code, capsys.readouterr().out.splitlines()


def test_state_check_reports_an_unmounted_store(tmp_path, capsys):
    (tmp_path / 'state').mkdir()  # an empty mount point
    code, out = _state_check(tmp_path, capsys)
    assert code == 1
    assert out[0] == (
        'problem: local: [kubespray_mgmt] records_dir: %s is in no '
        'directory holding %s (the shared state directory is not mounted '
        'on this host, or the option points elsewhere)' % (
            tmp_path / 'state' / 'records', statestore.MARKER))
    assert not (tmp_path / 'state' / 'records').exists()


def test_state_check_accepts_the_shared_store_and_names_open_files(
        tmp_path, capsys):
    state = tmp_path / 'state'
    (state / 'records' / 'v2').mkdir(parents=True)
    state.chmod(0o700)
    (state / statestore.MARKER).write_text('prod-1\n')
    code, out = _state_check(tmp_path, capsys)
    assert code == 0, out
    assert "ok: local: every state location is in the store 'prod-1'" in out
    assert any(line.startswith('ok: local: locks in ') for line in out)
    kept = state / 'records' / 'v2' / 'i1.json'
    kept.write_text('{}')
    kept.chmod(0o644)
    code, out = _state_check(tmp_path, capsys)
    assert code == 1
    assert 'problem: local: [kubespray_mgmt] records_dir: %s is readable ' \
        'or writable by other accounts (want 0600)' % kept in out


def test_state_check_without_an_id_only_notes_it(tmp_path, capsys):
    code, out = _state_check(tmp_path, capsys, store_id='')
    assert code == 0
    assert out[0].startswith('note: local: [kubespray_mgmt] state_store_id '
                             'is unset')


def test_a_directory_other_accounts_can_list_is_not_called_private(
        tmp_path, capsys):
    """Issue 41, item 15: a 0755 directory was "private and writable"."""
    state = tmp_path / 'state'
    (state / 'records').mkdir(parents=True)
    (state / statestore.MARKER).write_text('prod-1\n')
    (state / 'records').chmod(0o755)
    code, out = _state_check(tmp_path, capsys)
    records = [line for line in out if '] records_dir: %s ' % (
        state / 'records') in line]
    assert records == [
        'note: local: [kubespray_mgmt] records_dir: %s is writable by this '
        'account only, but other accounts can list it (mode 0755: they see '
        'which instances it holds); chmod 700 it' % (state / 'records')]
    (state / 'records').chmod(0o700)
    code, out = _state_check(tmp_path, capsys)
    assert 'ok: local: [kubespray_mgmt] records_dir: %s is private and ' \
        'writable' % (state / 'records') in out
