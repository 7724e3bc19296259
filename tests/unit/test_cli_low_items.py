"""Small rough edges of the command line (issue 41, low items): each
message names what is wrong."""

import io
import pathlib

from mgmt_driver.adapters import cli

SAMPLES = pathlib.Path(__file__).parents[2] / 'samples'
PARAMS = str(SAMPLES / 'instantiate_simple.json')
TOPOLOGY = str(SAMPLES / 'topology_simple.yaml')


def test_a_config_file_that_is_a_directory_is_said_so(tmp_path, capsys):
    assert cli.main(['--config-file', str(tmp_path), 'list']) == \
        cli.EXIT_BAD_INPUT
    assert capsys.readouterr().err == (
        'kubespray-mgmt: --config-file %s: a directory, not a file\n'
        % tmp_path)


def test_a_package_dir_that_does_not_exist_is_refused(tmp_path, capsys):
    missing = tmp_path / 'nonexistent'
    code = cli.main(['run', 'instantiate', '--dry-run', '--params', PARAMS,
                     '--topology', TOPOLOGY, '--package-dir', str(missing)])
    assert code == cli.EXIT_BAD_INPUT
    assert 'kubespray-mgmt: --package-dir %s: no such directory' % missing \
        in capsys.readouterr().err


def test_empty_params_on_standard_input_say_so(monkeypatch, capsys):
    monkeypatch.setattr('sys.stdin', io.TextIOWrapper(io.BytesIO(b'\n')))
    assert cli.main(['params', 'check', '-']) == cli.EXIT_BAD_INPUT
    assert capsys.readouterr().err == (
        'kubespray-mgmt: PARAMS standard input: empty (nothing was piped '
        'in?)\n')


def test_status_of_a_terminated_instance_says_it_was_terminated(capsys):
    from oslo_config import cfg

    from mgmt_driver.common import conf as kconf
    from mgmt_driver.state import records
    kconf.register_opts(cfg.CONF)
    cfg.CONF([], project='kubespray-mgmt', default_config_files=[])
    store = records.RecordStore.from_conf()
    store.save(records.InstanceRecord('gone'))
    store.remove('gone')
    assert cli.main(['status', '--instance-id', 'gone']) == \
        cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith('kubespray-mgmt: --instance-id gone: it was '
                          'terminated: its record in ')
    assert 'no record of it' not in err


def test_logs_takes_a_run_as_status_names_it(monkeypatch, capsys):
    """status lists log file names (NAME.log); logs --run refused them."""
    from mgmt_driver.remote import detached
    asked = []

    def show_log(conn, workspace, on_line, stem=None, follow=False):
        asked.append(stem)
        return workspace + '/logs/' + stem + '.log'
    monkeypatch.setattr(detached, 'show_log', show_log)
    monkeypatch.setattr(cli.ssh.ConnectionPool, 'connection',
                        lambda self, *args, **kwargs: None)
    name = '20261123T230501Z-scale_end-scale'
    assert cli.main(['logs', '--params', PARAMS, '--run',
                     name + '.log']) == cli.EXIT_OK
    assert asked == [name]
    assert capsys.readouterr().err.count('.log') == 1


def test_config_file_may_follow_the_subcommand(tmp_path, capsys):
    """As --debug may: "list --config-file F" was a usage error."""
    config = tmp_path / 'k.conf'
    config.write_text('[kubespray_mgmt]\nrecords_dir = %s\n'
                      % (tmp_path / 'records'))
    for argv in (['list', '-o', 'json', '--config-file', str(config)],
                 ['list', '--config-file=%s' % config, '-o', 'json']):
        assert cli.main(argv) == cli.EXIT_OK
        assert '"records_dir": "%s"' % (tmp_path / 'records') in \
            capsys.readouterr().out
