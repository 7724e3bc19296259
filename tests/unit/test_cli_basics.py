"""kubespray-mgmt: --help, --version, no command."""

import pytest

from mgmt_driver import cli


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
