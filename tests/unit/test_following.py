"""The operator's view (issue 31): the record's ``cluster`` entry and
``last_operation`` (mgmt_driver.state.follow, statestore.recorded), ``list``
(mgmt_driver.adapters.listing), Ctrl-C during a detached run, and the ``-o``
convention of the commands that write files."""

import json
import pathlib
import types

import pytest

from mgmt_driver.adapters import cli
from mgmt_driver.adapters import listing
from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.model import nodes
from mgmt_driver.model import params
from mgmt_driver.remote import detached
from mgmt_driver.remote import ssh
from mgmt_driver.state import follow
from mgmt_driver.state import records
from mgmt_driver.state import statestore

WS = '/srv/inventories/vnf-1'
STEM = '20261123T230501Z-scale_in-remove-node'
KEY = '/etc/tacker/kubespray/id_ed25519'


def _spec(**ansible):
    login = {'username': 'ubuntu', 'ssh_key_file': KEY}
    doc = {'vim_name': 'vim-1', 'master_node': dict(login),
           'worker_node': dict(login, passwordless_sudo=True),
           'external_lb_param': {'ssh_username': 'lbuser', 'ssh_port': 2222},
           'ansible': dict({'ip_address': '10.10.0.50', 'username': 'ans',
                            'password': 's3cret-pw',
                            'kubespray_root_path': '/ks',
                            'transferring_inventory_path': '/srv/inv'},
                           **ansible)}
    return params.parse_params({core.ROOT: doc}, need_cp_names=False,
                               default_key_file='/etc/default-key')


def _cluster(spec):
    return nodes.build_nodes(spec, nodes.load_topology({
        'masters': [{'ssh_ip': '192.0.2.11', 'nic_ip': '10.0.0.11'}],
        'workers': [{'ssh_ip': '192.0.2.21'}, {'ssh_ip': '192.0.2.22'}],
        'external_lb': {'ssh_ip': '192.0.2.30', 'ssh_port': 2200}}))


def _entry(spec):
    return follow.describe(spec, _cluster(spec), WS,
                           lambda login: login.key_file)


def test_the_cluster_entry_holds_no_secret_and_reads_back():
    spec = _spec(password=None, ssh_key_file='/etc/ans-key')
    entry = _entry(spec)
    text = json.dumps(entry)
    assert 's3cret' not in text and entry['workspace'] == WS
    assert entry['logins']['external_lb'] == {
        'username': 'lbuser', 'port': 2222, 'key': follow.DEFAULT_KEY,
        'key_file': None, 'passwordless_sudo': False}
    record = records.InstanceRecord('vnf-1', cluster=entry)
    back, cluster = follow.inputs(record, '/etc/default-key')
    assert back.ansible.ip_address == '10.10.0.50'
    assert back.ansible.transferring_inventory_path == '/srv/inv'
    assert back.ansible.login.key_file == '/etc/ans-key'
    assert back.external_lb.login.default_key
    assert back.external_lb.login.key_file == '/etc/default-key'
    assert back.worker.login.passwordless_sudo
    assert cluster == _cluster(spec)


def test_a_password_login_cannot_be_followed_from_the_record():
    record = records.InstanceRecord('vnf-1', cluster=_entry(_spec()))
    assert record.cluster['ansible']['key'] == follow.PASSWORD
    with pytest.raises(exceptions.ParamsNotFound) as info:
        follow.inputs(record)
    assert 'cluster.ansible: logs in with a password, which the driver ' \
        'never records: give --params' in str(info.value)


def test_a_record_without_a_cluster_says_what_to_give():
    with pytest.raises(exceptions.ParamsNotFound) as info:
        follow.inputs(records.InstanceRecord('vnf-1'))
    assert 'give --params (and --topology) instead' in str(info.value)


def test_a_damaged_node_entry_is_named():
    entry = _entry(_spec(password=None, ssh_key_file='/k'))
    entry['nodes'][1]['name'] = 'worker-1-2-3-4'  # not its address's
    entry['nodes'][2]['ssh_port'] = True
    with pytest.raises(exceptions.ParamsInvalid) as info:
        follow.inputs(records.InstanceRecord('vnf-1', cluster=entry),
                      '/etc/default-key')
    assert info.value.problems == [
        'record of vnf-1: cluster.nodes[1]: not a node entry the driver '
        'writes', 'record of vnf-1: cluster.nodes[2]: not a node entry '
        'the driver writes']


# ------------------------------------------------ records, last operation --

def test_cluster_and_last_operation_survive_a_save(tmp_path):
    store = records.RecordStore(str(tmp_path))
    entry = _entry(_spec())
    store.set_cluster('vnf-1', entry)
    store.set_last_operation('vnf-1', {'operation': 'scale_end',
                                       'result': 'succeeded'})
    store.add_hosts('vnf-1', [records.Host('10.0.0.1', 22, 'master')])
    back = store.load('vnf-1')
    assert back.cluster == entry
    assert back.last_operation['operation'] == 'scale_end'


def test_recorded_notes_each_result(tmp_path):
    store = records.RecordStore(str(tmp_path))
    store.save(records.InstanceRecord('vnf-1'))
    seen = []
    with statestore.recorded(store, 'vnf-1', 'scale_end'):
        seen.append(store.load('vnf-1').last_operation['result'])
    seen.append(store.load('vnf-1').last_operation['result'])
    with pytest.raises(exceptions.MgmtDriverOtherError):
        with statestore.recorded(store, 'vnf-1', 'heal_end'):
            raise exceptions.MgmtDriverOtherError(error_message='x' * 900)
    failed = store.load('vnf-1').last_operation
    with pytest.raises(KeyboardInterrupt):
        with statestore.recorded(store, 'vnf-1', 'run scale-in'):
            raise KeyboardInterrupt
    assert seen == ['running', 'succeeded']
    assert failed['result'] == 'failed' and failed['ended']
    assert len(failed['error']) < 400 and failed['operation'] == 'heal_end'
    assert store.load('vnf-1').last_operation['result'] == 'interrupted'


def test_recorded_writes_no_record_terminate_closed(tmp_path):
    store = records.RecordStore(str(tmp_path))
    with statestore.recorded(store, 'gone', 'terminate_end'):
        store.save(records.InstanceRecord('gone'))
        store.remove('gone')
    assert store.state('gone') == records.RELEASED
    with statestore.recorded(store, 'never', 'scale_end'):
        pass
    assert store.state('never') == records.MISSING
    # Instantiate makes the record: the list shows it running at once.
    with statestore.recorded(store, 'new', 'instantiate_end'):
        assert store.load('new').last_operation['result'] == 'running'


# ------------------------------------------------------------------ list --

def _list(capsys, tmp_path, *argv):
    config = tmp_path / 'kubespray-mgmt.conf'
    config.write_text('[kubespray_mgmt]\nrecords_dir = %s\n'
                      % (tmp_path / 'records'))
    code = cli.main(['--config-file', str(config), 'list', *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_list_shows_each_instance(tmp_path, capsys):
    store = records.RecordStore(str(tmp_path / 'records'))
    store.set_cluster('vnf-1', _entry(_spec()))
    store.set_vim('vnf-1', records.TACKER_VIM, 'vim-uuid', 'vim-1')
    store.set_last_operation('vnf-1', {
        'operation': 'scale_end', 'result': 'failed',
        'started': '2026-11-26T10:00:00+00:00',
        'ended': '2026-11-26T10:40:00+00:00', 'error': 'boom'})
    # A record of an older version: counts from its hosts.
    store.add_hosts('old', [records.Host('10.0.0.9', 22, 'ansible'),
                            records.Host('10.0.0.1', 22, 'master')])
    code, out, err = _list(capsys, tmp_path)
    assert code == cli.EXIT_OK, err
    assert out.splitlines()[1].split() == [
        'old', '-', '10.0.0.9:22', '1', '0', '0', '-', '-']
    assert out.splitlines()[2].split() == [
        'vnf-1', 'vim-1', '10.10.0.50:22', '1', '2', '1', 'scale_end',
        'failed', '2026-11-26T10:40:00+00:00']
    code, out, err = _list(capsys, tmp_path, '-o', 'json')
    found = json.loads(out)['instances']
    assert [e['instance_id'] for e in found] == ['old', 'vnf-1']
    assert found[1]['vims'] == [{'kind': 'tacker_vim', 'id': 'vim-uuid',
                                 'name': 'vim-1'}]
    assert found[1]['workspace'] == WS and found[1]['error'] is None


def test_list_names_a_damaged_record_and_exits_2(tmp_path, capsys):
    (tmp_path / 'records').mkdir()
    (tmp_path / 'records' / 'bad.json').write_text('{')
    code, out, err = _list(capsys, tmp_path)
    assert code == cli.EXIT_REMOTE_FAILURE
    # Its cause too (issue 41, low item).
    assert out.splitlines()[1].endswith(
        '  unreadable record: no valid JSON at line 1, column 2')


def test_status_without_params_or_record_says_where_it_looked(tmp_path,
                                                              capsys):
    config = tmp_path / 'tacker.conf'
    config.write_text('[kubespray_mgmt]\nrecords_dir = %s\n' % tmp_path)
    code = cli.main(['--config-file', str(config), 'status',
                     '--instance-id', 'vnf-9'])
    err = capsys.readouterr().err
    assert code == cli.EXIT_BAD_INPUT
    assert err == (
        'kubespray-mgmt: --instance-id vnf-9: no record of it in %s '
        '([kubespray_mgmt] records_dir of the config files given: to '
        'follow an operation of Tacker, run this on a conductor host as '
        'its user with --config-file and the conductor\'s config; else '
        'give --params)\n' % tmp_path)


# ---------------------------------------------------------------- Ctrl-C --

class _Interrupting:
    """The Ansible server: starts the run, then Ctrl-C comes while the
    driver follows it."""

    host = '10.10.0.50'

    def run(self, command, **kwargs):
        if 'KR:STARTED' in command[2] or 'start a detached' in command[2]:
            return ssh.CommandResult(self.host, 'start',
                                     'KR:STARTED:%s:4242\n' % STEM, '', 0)
        raise KeyboardInterrupt


def test_ctrl_c_while_following_says_where_the_run_goes_on(capsys):
    """Before: "kubespray-mgmt: interrupted" alone, though the playbook
    goes on, detached, on the Ansible server."""
    runs = detached.DetachedRuns(_Interrupting(), WS)

    def follow_a_run(args):
        runs.run('/ks', ['ansible-playbook', 'remove-node.yml'], 'scale_in',
                 'remove-node.yml', 600)
    code = cli._call(types.SimpleNamespace(func=follow_a_run))
    assert code == cli.EXIT_INTERRUPTED
    assert capsys.readouterr().err == (
        'kubespray-mgmt: interrupted; remove-node.yml goes on on the '
        'Ansible server 10.10.0.50 (it runs detached); its log: '
        '%s/logs/%s.log. Run the same command again to follow and finish '
        'it\n' % (WS, STEM))


# ------------------------------------------------------- -o convention --

@pytest.mark.parametrize('argv', [
    ['render', 'haproxy', '--params', 'p.json', '-o', 'json'],
    ['render', 'inventory', '--params', 'p.json', '--output', 'yaml'],
    ['csar', 'build', 'src', '-o', 'text']])
def test_a_format_word_is_not_a_path_to_write(capsys, argv):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == cli.EXIT_BAD_INPUT
    assert 'is an output format, and this command writes files: give ' \
        'the path to write (./' in capsys.readouterr().err


def test_output_file_is_the_path_of_render(tmp_path, capsys):
    target = tmp_path / 'haproxy.cfg'
    samples = cli.os.path.join(cli.os.path.dirname(cli.__file__), '..', '..',
                               'samples')
    code = cli.main(['render', 'haproxy', '--params',
                     cli.os.path.join(samples, 'instantiate_simple.json'),
                     '--topology',
                     cli.os.path.join(samples, 'topology_simple.yaml'),
                     '--output-file', str(target)])
    assert code == cli.EXIT_OK, capsys.readouterr().err
    assert 'backend kube_apiserver' in target.read_text()


# ------------------------------------------------------------ run report --

def test_the_run_report_diffs_the_recorded_nodes_and_keeps_warnings(
        tmp_path):
    from mgmt_driver.adapters import runreport
    store = records.RecordStore(str(tmp_path))
    spec = _spec()
    store.set_cluster('vnf-1', _entry(spec))
    report = runreport.RunReport(store, 'vnf-1', 'scale-in',
                                 ['worker-192-0-2-22'])
    with report.collecting():
        logger = cli.logging.getLogger('mgmt_driver.session.driver')
        for i in range(runreport.MAX_WARNINGS + 2):
            logger.warning('warning %d: \x1b]0;title\x07', i)
        store.set_cluster('vnf-1', follow.describe(
            spec, _cluster(spec).remove('worker-192-0-2-22'), WS,
            lambda login: None))
    document = report.document([{'playbook': 'remove-node.yml'}],
                               'removed worker-192-0-2-22')
    assert document['nodes'] == {'added': [],
                                 'removed': ['worker-192-0-2-22'],
                                 'named': ['worker-192-0-2-22']}
    assert document['warnings'][0] == 'warning 0: \\x1b]0;title\\x07'
    assert document['warnings'][-1] == '... and 2 more warning(s)'
    assert document['result'] == 'succeeded' and document['error'] is None


def test_list_cells_are_clipped_and_escaped():
    # A record's fields were written from remote and request data.
    entry = {'instance_id': 'i-1', 'error': None,
             'vims': [{'kind': records.TACKER_VIM, 'id': 'v',
                       'name': 'vim\x1b[31m' + 'x' * 500}],
             'ansible_server': '10.0.0.1\nforged line', 'masters': 1,
             'workers': 2, 'gateways': 0,
             'last_operation': {'operation': 'heal\x07', 'result': 'ok'}}
    lines = listing.format_text([entry]).splitlines()
    assert len(lines) == 2
    assert all(ch.isprintable() for ch in lines[1])
    assert max(len(cell) for cell in lines[1].split()) <= 60 + len(
        ' [...] ')
    assert '10.0.0.1\\x0aforged' in lines[1]


def test_list_warns_when_the_store_is_not_the_shared_one(tmp_path, capsys):
    """Issue 41, low item: a conductor whose shared state directory is not
    mounted listed its own empty directory as if no cluster existed."""
    config = tmp_path / 'kubespray-mgmt.conf'
    config.write_text('[kubespray_mgmt]\nrecords_dir = %s\n'
                      'state_store_id = prod-1\n' % (tmp_path / 'records'))
    argv = ['--config-file', str(config), 'list']
    assert cli.main(argv) == cli.EXIT_OK
    err = capsys.readouterr().err
    assert err.startswith('kubespray-mgmt: warning: not the shared state '
                          'store, this list may miss instances: '
                          '[kubespray_mgmt] records_dir: ')
    assert statestore.MARKER in err
    assert cli.main(argv + ['-o', 'json']) == cli.EXIT_OK
    shown = json.loads(capsys.readouterr().out)
    assert len(shown['not_shared']) == 1
    assert 'records_dir' in shown['not_shared'][0]
    # Mounted: the marker names the configured store, no warning.
    (tmp_path / statestore.MARKER).write_text('prod-1\n')
    assert cli.main(argv + ['-o', 'json']) == cli.EXIT_OK
    out = capsys.readouterr()
    assert json.loads(out.out)['not_shared'] == [] and 'warning' not in out.err


# ------------------------------------------------------- logs --follow --

_PARAMS = str(pathlib.Path(__file__).parents[2] / 'samples'
              / 'instantiate_simple.json')
_RUNS = ['20261126T100000Z-scale_end-facts',
         '20261126T100500Z-scale_end-remove-node',
         '20261126T101000Z-scale_end-scale']


class _Operation:
    """An operation on the Ansible server and in the record: each sleep of
    ``logs --follow`` moves it on by one event of *events*."""

    def __init__(self, store, events):
        self.store, self.events = store, list(events)
        self.current, self.now, self.sleeps = 0, 0.0, 0
        self._note('running')

    def _note(self, result):
        self.store.set_last_operation('vnf-1', {
            'operation': 'scale_end', 'result': result,
            'started': '2026-11-26T10:00:00+00:00', 'ended': None,
            'error': None}, create=True)

    def sleep(self, seconds):
        self.sleeps += 1
        self.now += seconds
        if self.events:
            event = self.events.pop(0)
            if event == 'next run':
                self.current += 1
            elif event == 'last run, ended':
                self.current += 1
                self._note('succeeded')

    def show_log(self, conn, workspace, on_line, stem=None, follow=False):
        assert stem is None and follow
        on_line('log of ' + _RUNS[self.current])
        return '%s/logs/%s.log' % (workspace, _RUNS[self.current])

    def last_run(self, conn, workspace):
        return detached.RunInfo(stem=_RUNS[self.current])


def _follow(monkeypatch, tmp_path, capsys, events, extra=''):
    config = tmp_path / 'kubespray-mgmt.conf'
    config.write_text('[kubespray_mgmt]\nrecords_dir = %s\n%s'
                      % (tmp_path / 'records', extra))
    operation = _Operation(records.RecordStore(str(tmp_path / 'records')),
                           events)
    monkeypatch.setattr(cli.ssh.ConnectionPool, 'connection',
                        lambda self, *args, **kwargs: 'conn')
    monkeypatch.setattr(cli.detached, 'show_log', operation.show_log)
    monkeypatch.setattr(cli.detached, 'last_run', operation.last_run,
                        raising=False)
    monkeypatch.setattr(cli, 'time', types.SimpleNamespace(
        sleep=operation.sleep, monotonic=lambda: operation.now))
    code = cli.main(['--config-file', str(config), 'logs', '--params',
                     _PARAMS, '--instance-id', 'vnf-1', '--follow'])
    out = capsys.readouterr()
    return code, out.out, out.err, operation


def test_logs_follow_goes_on_with_the_operations_next_runs(
        monkeypatch, tmp_path, capsys):
    """Issue 41, low item: ``logs --follow`` stopped after the first
    playbook of a scale-in (facts, remove-node, scale).  The last run
    starts and ends between two looks: it is still shown."""
    code, out, err, operation = _follow(
        monkeypatch, tmp_path, capsys, ['next run', 'last run, ended'])
    assert code == cli.EXIT_OK
    assert out.splitlines() == ['log of ' + run for run in _RUNS]
    assert '# scale_end goes on: next run %s' % _RUNS[2] in err
    assert '/logs/%s.log on ' % _RUNS[2] in err.splitlines()[-1]
    assert operation.sleeps == 2


def test_logs_follow_stops_when_no_next_run_comes(monkeypatch, tmp_path,
                                                  capsys):
    """A record left running (its conductor died) is followed for at most
    logs_follow_next_wait seconds after the last run ended."""
    code, out, err, operation = _follow(
        monkeypatch, tmp_path, capsys, [],
        'logs_follow_poll = 5\nlogs_follow_next_wait = 10\n')
    assert code == cli.EXIT_OK
    assert out.splitlines() == ['log of ' + _RUNS[0]]
    assert 'started no playbook for 10 s (logs_follow_next_wait)' in err
    assert operation.sleeps == 2


def test_logs_follow_reads_the_record_once_a_look(monkeypatch, tmp_path,
                                                  capsys):
    """One read of the record before the first look, then one after each
    wait: three looks (two waits, then logs_follow_next_wait is over)
    read it three times, not once more on the first look (the fourth
    read is the fake operation's own, noting it runs)."""
    reads = []
    load = records.RecordStore.load
    monkeypatch.setattr(records.RecordStore, 'load', lambda self, *a, **k: (
        reads.append(a), load(self, *a, **k))[1])
    code, _, _, operation = _follow(
        monkeypatch, tmp_path, capsys, [],
        'logs_follow_poll = 5\nlogs_follow_next_wait = 10\n')
    assert code == cli.EXIT_OK and operation.sleeps == 2
    assert len(reads) == 4
