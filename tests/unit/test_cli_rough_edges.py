"""More rough edges of the command line (issue 41, low items): one
format per kind of line, and one JSON object whatever the outcome."""

from mgmt_driver.adapters import cli
from tests.unit.test_cli_interrupted_run import _run_with


def test_a_run_prints_each_warning_once(monkeypatch, tmp_path, package,
                                        capsys):
    """Before: once from the log handler (``warning: [inst-1] ...``),
    once from the driver's progress line (``WARNING: ...``)."""
    def operation(drv, cluster, names, name, **extra):
        drv.warn('the one warning')
        return 'done'
    assert _run_with(monkeypatch, tmp_path, package, operation) == \
        cli.EXIT_OK
    out, err = capsys.readouterr()
    shown = [line for line in (out + err).splitlines()
             if 'the one warning' in line]
    assert len(shown) == 1
    assert shown[0].endswith('] warning: the one warning')


def _json_of(out):
    """The one JSON object standard output holds."""
    import json
    return json.loads(out)


def test_ctrl_c_of_a_run_with_json_prints_its_object(monkeypatch, tmp_path,
                                                     package, capsys):
    """Before: nothing on standard output."""
    def operation(drv, cluster, names, name, **extra):
        drv.step('joining %s', 'worker-10-10-0-22')
        raise KeyboardInterrupt
    code = _run_with(monkeypatch, tmp_path, package, operation, '-o', 'json')
    assert code == cli.EXIT_INTERRUPTED
    report = _json_of(capsys.readouterr().out)
    assert report['result'] == 'interrupted'
    assert report['error'].startswith('interrupted; 1 step(s) were done')


def test_ctrl_c_of_another_command_with_json_prints_an_object(
        monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, '_list', interrupted)
    assert cli.main(['list', '-o', 'json']) == cli.EXIT_INTERRUPTED
    assert _json_of(capsys.readouterr().out) == {
        'result': 'interrupted', 'error': 'interrupted',
        'exit_code': cli.EXIT_INTERRUPTED}


def test_doctor_with_a_bad_config_value_prints_findings(tmp_path, capsys):
    """Before: the config's problem on stderr, no JSON object."""
    config = tmp_path / 'k.conf'
    config.write_text('[kubespray_mgmt]\nssh_connect_timeout = -5\n')
    code = cli.main(['doctor', '--config-file', str(config), '-o', 'json'])
    report = _json_of(capsys.readouterr().out)
    assert code == report['exit_code'] == 1
    assert report['findings'][0]['level'] == 'problem'
    assert 'ssh_connect_timeout' in report['findings'][0]['text']
    assert report['findings'][-1]['level'] == 'note'


def test_state_check_prints_findings_as_doctor_does(tmp_path, capsys):
    """Before: ``problem: TEXT`` (doctor: ``problem: local: TEXT``), and
    ``-o json`` was a usage error."""
    config = tmp_path / 'k.conf'
    config.write_text('[kubespray_mgmt]\nrecords_dir = %s\n'
                      'state_store_id = prod-1\n' % (tmp_path / 'records'))
    code = cli.main(['--config-file', str(config), 'state', 'check'])
    lines = capsys.readouterr().out.splitlines()
    cli.main(['--config-file', str(config), 'doctor'])
    doctors = capsys.readouterr().out.splitlines()
    assert code == 1 and lines[0].startswith('problem: local: ')
    assert lines[0] in doctors
    assert lines[-1] == '%d problem(s), 0 warning(s)' % sum(
        line.startswith('problem: ') for line in lines)
    code = cli.main(['--config-file', str(config), 'state', 'check',
                     '-o', 'json'])
    report = _json_of(capsys.readouterr().out)
    assert code == report['exit_code'] == 1
    assert report['findings'][0] == {
        'level': 'problem', 'where': 'local',
        'text': lines[0][len('problem: local: '):]}


def test_status_shows_every_time_in_one_form():
    """Issue 41, low item: a snapshot's ``20261126T110000Z`` beside a
    run's ``2026-11-26T11:00:00Z``, kubeadm's dates as kubeadm wrote
    them."""
    import json

    from mgmt_driver.common import utctime
    from mgmt_driver.operations import certificates
    found = certificates.parse_expiration(json.dumps({'certificates': [
        {'name': 'apiserver', 'residualTime': 86400,
         'expirationDate': '2027-09-22T12:00:00.5+02:00'}]}), '10.10.0.11')
    assert found[0].expires == '2027-09-22T10:00:00Z'
    assert utctime.iso_utc('20261126T110000Z') == '2026-11-26T11:00:00Z'
    assert utctime.iso_utc('not a time') == 'not a time'


def test_params_check_says_what_it_merged_and_how_it_logs_in(capsys):
    """Issue 41, low item: ``masters ubuntu:22`` read like an OS version,
    and an instantiation (nothing to merge) said ``"merged": true``."""
    import pathlib
    sample = str(pathlib.Path(__file__).parents[2] / 'samples' /
                 'instantiate_ha.json')
    assert cli.main(['params', 'check', '-o', 'json', sample]) == \
        cli.EXIT_OK
    report = _json_of(capsys.readouterr().out)
    assert report['merged'] is False
    assert report['summary'].startswith(
        'valid: masters as ubuntu (SSH port 22) by password')
    assert 'ubuntu:22' not in report['summary']


class _KeysForgotten:
    """Every VM's host key forgotten, as terminate leaves them; the
    Ansible server's workspace (and its inventory) left behind."""

    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def connection(self, host, *args):
        from mgmt_driver.common import exceptions
        raise exceptions.HostKeyNotRecorded(
            fingerprint='SHA256:x', host=host, port=22,
            known_hosts='known_hosts')


def test_status_after_terminate_gives_no_host_key_advice(monkeypatch,
                                                         capsys):
    """Before: a section per VM, each advising ssh-keyscan."""
    from mgmt_driver.state import records
    from tests.unit.test_cli_low_items import PARAMS
    from tests.unit.test_cli_low_items import TOPOLOGY
    cli._load_config([])
    store = records.RecordStore.from_conf()
    store.save(records.InstanceRecord('gone'))
    store.remove('gone')
    monkeypatch.setattr(cli.ssh, 'ConnectionPool', _KeysForgotten)
    code = cli.main(['status', '--params', PARAMS, '--topology', TOPOLOGY,
                     '--instance-id', 'gone'])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_REMOTE_FAILURE and out == '', out + err
    assert 'ssh-keyscan' not in err and 'it was terminated' in err


def test_list_says_why_a_record_is_unreadable_and_keeps_a_paths_end():
    """Issue 41, low item: "unreadable record" alone, and a kubeconfig's
    path cut in its middle, losing the file name."""
    from mgmt_driver.adapters import listing
    from mgmt_driver.state import records
    path = '/var/lib/kubespray-mgmt/' + 'deep/' * 20 + 'prod-eu.kubeconfig'
    good = dict(listing._blank('i-1'), vims=[
        {'kind': records.KUBECONFIG, 'id': path, 'name': None}])
    bad = dict(listing._blank('i-2'), error='The record ... cannot be used',
               reason='Expecting value: line 1 column 2 (char 1)')
    lines = listing.format_text([good, bad]).splitlines()
    assert lines[2].endswith('unreadable record: Expecting value: line 1 '
                             'column 2 (char 1)')
    vim = lines[1].split()[1]
    assert vim.endswith('/deep/prod-eu.kubeconfig') and len(vim) <= 60
