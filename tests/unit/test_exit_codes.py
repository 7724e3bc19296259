"""kubespray-mgmt's exit codes (README.rst, "Exit codes"): one table
(``cli.CODES_BY_ERROR``); usage errors and refusals that changed nothing
exit 1, as bad input; 2 is for remote failures (issue 41, item 4)."""

import inspect
import pathlib

import pytest

from mgmt_driver.adapters import cli
from mgmt_driver.common import exceptions

SAMPLES = pathlib.Path(__file__).parents[2] / 'samples'
PARAMS = str(SAMPLES / 'instantiate_simple.json')
TOPOLOGY = str(SAMPLES / 'topology_simple.yaml')

#: Refused before any change, for a reason fixed on this host.
REFUSALS = (exceptions.StateStoreUnusable, exceptions.InstanceStateMissing,
            exceptions.EveryMasterHealed, exceptions.RunLogNotFound)


def _driver_errors():
    """Every exception class the driver raises."""
    return [kind for _, kind in inspect.getmembers(exceptions,
                                                   inspect.isclass)
            if issubclass(kind, Exception) and kind.__module__ ==
            exceptions.__name__ and kind is not exceptions.Refusal]


def _expected(kind):
    """The README's table, by what the error means."""
    if kind in (exceptions.ClusterBusy, exceptions.InstanceBusy):
        return cli.EXIT_BUSY
    if issubclass(kind, (exceptions.Refusal,
                         exceptions.MgmtDriverParamInvalid,
                         exceptions.MgmtDriverNotFound)):
        return cli.EXIT_BAD_INPUT
    return cli.EXIT_REMOTE_FAILURE


@pytest.mark.parametrize('kind', _driver_errors(),
                         ids=lambda kind: kind.__name__)
def test_every_driver_error_has_the_code_of_the_table(kind):
    error = kind.__new__(kind)  # the code depends on the class alone
    assert cli.exit_code(error) == _expected(kind)


@pytest.mark.parametrize('kind', REFUSALS, ids=lambda kind: kind.__name__)
def test_every_refusal_that_changed_nothing_exits_1(kind):
    assert issubclass(kind, exceptions.Refusal)
    assert cli.exit_code(kind.__new__(kind)) == cli.EXIT_BAD_INPUT


def test_a_refusal_raised_by_a_command_exits_1(monkeypatch, capsys):
    def refuse(args):
        raise exceptions.StateStoreUnusable(reason='not mounted')
    monkeypatch.setattr(cli, '_list', refuse)
    assert cli.main(['list']) == cli.EXIT_BAD_INPUT
    assert 'not mounted' in capsys.readouterr().err


@pytest.mark.parametrize('argv', [
    ['no-such-command'], ['status', '--no-such-option'],
    ['run', 'scale-sideways'], ['demo', '--workers', 'many'],
    ['list', '-o', 'yaml']])
def test_a_usage_error_exits_1(capsys, argv):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith('usage: kubespray-mgmt') and 'error: ' in err


def test_healing_every_master_exits_1(capsys):
    code = cli.main(['run', 'heal', '--dry-run', '--nodes',
                     'master-10-10-0-11', '--params', PARAMS, '--topology',
                     TOPOLOGY])
    assert code == cli.EXIT_BAD_INPUT
    assert 'run heal without --nodes' in capsys.readouterr().err
