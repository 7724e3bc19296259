"""kubespray-mgmt: --help, --version, no command."""

import sys

import pytest

from mgmt_driver.adapters import cli


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(['--version'])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith('kubespray-mgmt ')


def test_help_lists_options(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(['--help'])
    assert info.value.code == 0
    assert '--config-file' in capsys.readouterr().out


def test_no_command_prints_help_and_fails(capsys):
    assert cli.main([]) == cli.EXIT_BAD_INPUT
    assert 'usage: kubespray-mgmt' in capsys.readouterr().err


SAMPLE = str(__import__('pathlib').Path(__file__).parents[2] / 'samples' /
             'instantiate_simple.json')


def _check_with_config(tmp_path, capsys, text):
    config = tmp_path / 'kubespray-mgmt.conf'
    if text is not None:
        config.write_text(text)
    code = cli.main(['--config-file', str(config), 'params', 'check',
                     SAMPLE])
    captured = capsys.readouterr()
    assert 'Traceback' not in captured.err
    return code, captured.err.splitlines()


def test_a_missing_config_file_is_one_line(tmp_path, capsys):
    code, lines = _check_with_config(tmp_path, capsys, None)
    assert code == cli.EXIT_BAD_INPUT
    assert lines == ['kubespray-mgmt: --config-file %s: no such file'
                     % (tmp_path / 'kubespray-mgmt.conf')]


def test_an_unparsable_config_file_is_one_line(tmp_path, capsys):
    code, lines = _check_with_config(tmp_path, capsys, 'timeout = 1\n')
    assert code == cli.EXIT_BAD_INPUT
    assert len(lines) == 1 and 'cannot parse it' in lines[0]


def test_bad_option_values_are_reported_up_front(tmp_path, capsys):
    code, lines = _check_with_config(tmp_path, capsys, (
        '[kubespray_mgmt]\nhost_key_policy = bogus\n'
        'ssh_connect_timeout = 0\n'
        'default_key_ansible_servers = 10.0.0.0/8,nothost\n'))
    assert code == cli.EXIT_BAD_INPUT
    assert sorted(line.split(':')[1].strip() for line in lines) == [
        '[kubespray_mgmt] default_key_ansible_servers',
        '[kubespray_mgmt] host_key_policy',
        '[kubespray_mgmt] ssh_connect_timeout']
    assert all(line.startswith('kubespray-mgmt: ') for line in lines)


@pytest.mark.parametrize('group, usage', [
    ('params', 'usage: kubespray-mgmt params'),
    ('render', 'usage: kubespray-mgmt render'),
    ('csar', 'usage: kubespray-mgmt csar')])
def test_a_group_without_subcommand_prints_its_own_help(capsys, group,
                                                        usage):
    assert cli.main([group]) == cli.EXIT_BAD_INPUT
    assert capsys.readouterr().err.startswith(usage)


@pytest.fixture
def root_logger():
    import logging
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield root
    for handler in root.handlers[:]:
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)


@pytest.mark.parametrize('argv', [
    ['--debug', 'params', 'check', SAMPLE],
    ['params', 'check', SAMPLE, '--debug'],
    ['params', 'check', '--debug', SAMPLE]])
def test_debug_anywhere_logs_debug_to_stderr(capsys, root_logger, argv):
    import logging
    assert cli.main(argv) == cli.EXIT_OK
    logging.getLogger('mgmt_driver.probe').debug('probe %s', 'line')
    err = capsys.readouterr().err
    assert 'DEBUG mgmt_driver.probe: probe line' in err


def test_demo_help_gives_the_workers_range(capsys):
    from mgmt_localsite import demo
    assert cli.DEMO_MAX_WORKERS == demo.MAX_WORKERS
    with pytest.raises(SystemExit):
        cli.main(['demo', '--help'])
    out = ' '.join(capsys.readouterr().out.split())
    assert '--workers N workers to instantiate, 1 to %d;' % \
        demo.MAX_WORKERS in out


@pytest.mark.parametrize('argv, command', [
    (['demo', '--workers', '2'], 'demo'),
    (['demo', '--keep'], 'site up'),
    (['site', 'up'], 'site up'),
    (['site', 'down'], 'site down')])
def test_the_site_commands_without_the_site_say_how_to_install_it(
        monkeypatch, capsys, argv, command):
    # A conductor's environment: the driver without its test site.
    monkeypatch.setitem(sys.modules, 'mgmt_localsite', None)
    assert cli.main(argv) == cli.EXIT_BAD_INPUT
    assert capsys.readouterr().err == cli.SITE_MISSING % command + '\n'
