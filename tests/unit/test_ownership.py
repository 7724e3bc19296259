"""The driver acts only on what it owns, and terminate always finishes.

LcmHooks and the CLI's operations with the recording SSH fake, a fake
VIM registry and the real local record (mgmt_driver.state.records).
"""

import logging
import os

import pytest
import yaml

from mgmt_driver.adapters import cli
from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.model import nodes
from mgmt_driver.model import params
from mgmt_driver.operations import membership
from mgmt_driver.remote import ssh
from mgmt_driver.session import driver
from mgmt_driver.state import records
from mgmt_driver.state import registry
from tests.fakes import FakePool
from tests.unit import test_driver
from tests.unit.test_cli_run import PARAMS
from tests.unit.test_cli_run import TOPOLOGY
from tests.unit.test_driver import ANSIBLE
from tests.unit.test_driver import LB
from tests.unit.test_driver import Harness
from tests.unit.test_driver import _instantiate_params
from tests.unit.test_driver import _request

conf = test_driver.conf  # the same fixture
WORKSPACE = '/home/ubuntu/kubespray/inventory/mycluster/inst-1'
VIM = 'kubernetes_vim_simple'
NODES = {('192.168.10.11', 22), ('192.168.10.21', 22), ('192.168.10.22', 22),
         (LB, 22)}
#: The VMs the driver itself logs in to at instantiate (the workers only
#: Ansible does): the keys the instance owns.
LOGGED_IN = {('192.168.10.11', 22), (LB, 22)}


def _store(conf):
    return records.RecordStore.from_conf(conf)


def _instantiated(conf):
    h = Harness(conf)
    extra = _instantiate_params()
    h.hooks.instantiate_end(None, h.instance(extra), _request(extra), None,
                            None)
    return h, extra


def _terminate(h, extra):
    h.hooks.terminate_end(None, h.instance(extra), None, None, None)


def test_instantiate_records_hosts_and_vim(conf):
    h, _ = _instantiated(conf)
    record = _store(conf).load('inst-1')
    assert {h.endpoint for h in record.hosts} == NODES | {(ANSIBLE, 22)}
    assert {h.role for h in record.hosts} == {
        'ansible', 'master', 'worker', 'external_lb'}
    assert record.vims == {records.TACKER_VIM: {'id': 'vim-' + VIM,
                                                'name': VIM}}
    # Its own logins recorded these keys; the Ansible server's is never
    # claimed.
    assert set(record.keys) == LOGGED_IN


def test_a_vim_name_taken_by_another_vim_is_refused_before_remote_work(
        conf):
    h = Harness(conf)
    other = registry.ClusterAccess(VIM, 'https://10.9.9.9:8383', 't', 'c')
    h.registry.current[VIM] = other
    extra = _instantiate_params()
    with pytest.raises(exceptions.MgmtDriverParamInvalid) as info:
        h.hooks.instantiate_end(None, h.instance(extra), _request(extra),
                                None, None)
    assert '%s.vim_name' % core.ROOT in str(info.value)
    assert all(not c.calls for c in h.pool.connections.values())
    # Tacker's rollback, then a terminate: the other VIM stays.
    _terminate(h, extra)
    _terminate(h, extra)
    assert h.registry.current == {VIM: other}
    assert h.registry.calls == []


def test_a_retried_instantiate_reuses_its_own_vim(conf):
    h, extra = _instantiated(conf)
    h.hooks.instantiate_end(None, h.instance(extra), _request(extra), None,
                            None)
    assert h.registry.calls == [('register', VIM)] * 2
    assert _store(conf).load('inst-1').vim_id(records.TACKER_VIM) == \
        'vim-' + VIM


def test_terminate_forgets_the_recorded_hosts_not_the_servers_list(conf):
    h, extra = _instantiated(conf)
    # A hostile Ansible server lists other hosts in the inventory.
    h.ansible.files[WORKSPACE + '/hosts.yaml'] = yaml.safe_dump(
        {'all': {'hosts': {'x': {'ansible_host': '10.99.0.1'}}}})
    before = len(h.ansible.calls)
    _terminate(h, extra)
    assert set(h.pool.forgotten) == LOGGED_IN
    assert (LB, 22) in h.pool.forgotten
    assert [c[0] for c in h.ansible.calls[before:]] == ['run']
    assert h.registry.current == {}
    assert not os.path.exists(_store(conf).path('inst-1'))


def test_a_host_another_instance_only_names_does_not_keep_its_key(conf):
    # Issue 27 item 3: tenant B names this instance's LB and master.
    h, extra = _instantiated(conf)
    _store(conf).add_hosts('inst-2', [
        records.Host(ANSIBLE, 22, 'ansible'),
        records.Host('192.168.10.11', 22, 'worker'),
        records.Host(LB, 22, 'external_lb')])
    _terminate(h, extra)
    assert set(h.pool.forgotten) == LOGGED_IN
    assert not set(h.pool.known) & LOGGED_IN


def test_terminate_of_an_instance_naming_others_hosts_forgets_none(conf):
    # Issue 27 item 3: B names C's LB and the Ansible server as workers;
    # their keys were recorded before (by C, by the operator).
    h, extra = _instantiated(conf)
    pinned = dict(h.pool.known)
    store = _store(conf)
    store.add_hosts('inst-2', [records.Host(ANSIBLE, 22, 'ansible'),
                               records.Host(LB, 22, 'worker'),
                               records.Host(ANSIBLE, 22, 'worker')])
    drv = driver.ClusterDriver(params.parse_params(extra), 'inst-2',
                               h.pool, conf)
    drv.terminate(records.TACKER_VIM, lambda vim_id: None)
    assert h.pool.forgotten == []
    assert h.pool.known == pinned


def test_the_ansible_servers_key_is_never_forgotten(conf):
    # Even when this instance's own login recorded it as a "worker".
    store = _store(conf)
    store.add_hosts('inst-1', [records.Host(ANSIBLE, 22, 'ansible'),
                               records.Host(ANSIBLE, 22, 'worker')])
    store.claim_key('inst-1', ANSIBLE, 22, 'ssh-ed25519 AAAA')
    pool = FakePool()
    records.release(store, 'inst-1', pool.forget_host, records.TACKER_VIM,
                    lambda vim_id: None)
    assert pool.forgotten == []


def test_a_legacy_record_forgets_no_key_and_warns(conf, caplog):
    store = _store(conf)
    os.makedirs(store.directory, exist_ok=True)
    with open(store.path('inst-1'), 'w') as f:
        f.write('{"format": 1, "instance_id": "inst-1", "vims": {}, '
                '"hosts": [{"address": "%s", "port": 22, '
                '"role": "external_lb"}]}' % LB)
    pool = FakePool()
    caplog.set_level(logging.WARNING, logger='mgmt_driver.state.records')
    records.release(store, 'inst-1', pool.forget_host, records.TACKER_VIM,
                    lambda vim_id: None)
    assert pool.forgotten == []
    [warning] = [r.getMessage() for r in caplog.records]
    assert '%s:22' % LB in warning and 'ssh-keygen -R' in warning
    assert not os.path.exists(store.path('inst-1'))


def _broken(error):
    def run(*args, **kwargs):
        raise error
    return run


@pytest.mark.parametrize('error', [
    exceptions.SSHConnectError(host=ANSIBLE, port=22, attempts=3,
                               reason='Connection refused'),
    exceptions.SSHAuthError(user='u', host=ANSIBLE, port=22,
                            reason='refused'),
    exceptions.HostKeyChanged(host=ANSIBLE, port=22, fingerprint='a',
                              expected='b', known_hosts='k', entry=ANSIBLE),
    exceptions.RemoteCommandFailed(ssh.CommandResult(
        ANSIBLE, 'rm', '', 'rm: Permission denied', 1)),
    ValueError('garbage'),
])
def test_terminate_finishes_when_the_ansible_server_fails(conf, caplog,
                                                          error):
    h, extra = _instantiated(conf)
    h.ansible.run = _broken(error)
    caplog.set_level(logging.WARNING, logger='mgmt_driver.session.driver')
    _terminate(h, extra)
    [warning] = [r.getMessage() for r in caplog.records
                 if r.levelno == logging.WARNING]
    assert WORKSPACE in warning and ANSIBLE in warning
    assert set(h.pool.forgotten) == LOGGED_IN
    assert h.registry.current == {}
    assert not os.path.exists(_store(conf).path('inst-1'))
    _terminate(h, extra)  # and again: nothing left, still fine
    assert h.registry.calls.count(('unregister', VIM)) == 1


def test_terminate_warning_is_a_progress_line(conf):
    spec = params.parse_params(_instantiate_params())
    pool, lines = FakePool(), []
    pool.connection(ANSIBLE).run = _broken(ValueError('garbage'))
    drv = driver.ClusterDriver(spec, 'inst-1', pool, conf,
                               progress=lines.append)
    drv.terminate(records.TACKER_VIM, lambda vim_id: None)
    assert any(line.startswith('warning: could not remove the workspace %s '
                               'on the Ansible server %s' % (WORKSPACE,
                                                             ANSIBLE))
               for line in lines)


def test_rollback_of_refused_params_deletes_only_an_owned_vim(conf):
    h = Harness(conf)
    instance = h.instance({})
    default = registry.default_vim_name('inst-1')
    h.registry.current[default] = 'not ours'
    _terminate(h, {})
    assert h.registry.current == {default: 'not ours'}
    _store(conf).set_vim('inst-1', records.TACKER_VIM, 'vim-' + default,
                         default)
    _store(conf).add_hosts('inst-1', [records.Host(LB, 22, 'external_lb')])
    _store(conf).claim_key('inst-1', LB, 22, 'ssh-ed25519 AAAA')
    h.hooks.terminate_end(None, instance, None, None, None)
    assert h.registry.current == {}
    assert h.pool.forgotten == [(LB, 22)]
    assert all(not c.calls for c in h.pool.connections.values())


def test_scale_in_drops_the_removed_worker_from_the_record(conf):
    h, extra = _instantiated(conf)
    spec = params.parse_params(extra)
    cluster = nodes.nodes_from_spec(spec)
    drv = driver.ClusterDriver(spec, 'inst-1', h.pool, conf)
    membership.remove_workers(drv, cluster, ['worker-10-10-0-22'])
    endpoints = {h.endpoint for h in _store(conf).load('inst-1').hosts}
    assert ('192.168.10.22', 22) not in endpoints
    assert ('192.168.10.21', 22) in endpoints


# ----------------------------------------------------------------- CLI --

def _cli_driver(conf, tmp_path):
    conf.set_override('kubeconfig_dir', str(tmp_path / 'kc'),
                      group='kubespray_mgmt')
    h = Harness(conf)
    spec = params.parse_params(_instantiate_params())
    cluster = nodes.nodes_from_spec(spec)
    return h, driver.ClusterDriver(spec, 'inst-1', h.pool, conf), cluster


def test_cli_refuses_another_clusters_kubeconfig_and_leaves_it(conf,
                                                               tmp_path):
    h, drv, cluster = _cli_driver(conf, tmp_path)
    (tmp_path / 'kc').mkdir()
    other = tmp_path / 'kc' / ('%s.kubeconfig' % VIM)
    other.write_text('other cluster')
    with pytest.raises(exceptions.VimNameInUse):
        cli.OPERATIONS['instantiate'](drv, cluster, [], VIM)
    assert all(not c.calls for c in h.pool.connections.values())
    cli.OPERATIONS['terminate'](drv, cluster, [], VIM)
    assert other.read_text() == 'other cluster'


def test_cli_terminate_removes_its_kubeconfig_and_finishes(conf, tmp_path):
    h, drv, cluster = _cli_driver(conf, tmp_path)
    cli.OPERATIONS['instantiate'](drv, cluster, [], VIM)
    path = tmp_path / 'kc' / ('%s.kubeconfig' % VIM)
    assert path.exists()
    h.ansible.run = _broken(ValueError('garbage'))
    cli.OPERATIONS['terminate'](drv, cluster, [], VIM)
    assert not path.exists()
    assert set(h.pool.forgotten) == LOGGED_IN
    cli.OPERATIONS['terminate'](drv, cluster, [], VIM)


def test_cli_dry_run_terminate_writes_and_deletes_nothing(tmp_path,
                                                          capsys):
    store = records.RecordStore.from_conf()
    kubeconfig = tmp_path / 'mine.kubeconfig'
    kubeconfig.write_text('mine')
    store.add_hosts('kubespray-mgmt', [records.Host(LB, 22, 'external_lb')])
    store.claim_key('kubespray-mgmt', LB, 22, 'ssh-ed25519 AAAA')
    store.set_vim('kubespray-mgmt', records.KUBECONFIG, str(kubeconfig),
                  'mine')
    before = open(store.path('kubespray-mgmt')).read()
    assert cli.main(['run', 'terminate', '--dry-run', '--params', PARAMS,
                     '--topology', TOPOLOGY]) == cli.EXIT_OK
    assert 'forget the SSH host key of %s:22' % LB in capsys.readouterr().out
    assert open(store.path('kubespray-mgmt')).read() == before
    assert kubeconfig.read_text() == 'mine'
