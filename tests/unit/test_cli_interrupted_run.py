"""A ``run`` the operator interrupts, or whose standard output closes
(issue 41 items 12 and 13): Ctrl-C after the first change says what
was done and that the same command finishes it; a reader gone
(``run ... | head``) mutes the progress lines, never the operation."""

import pytest

from mgmt_driver.adapters import cli
from mgmt_driver.remote import ssh
from tests.unit import test_operations as ops


def _run_with(monkeypatch, tmp_path, package, operation, *more):
    """``run scale-out`` doing *operation* (a fake of the operation
    function) on the recording fake, *more* options added."""
    ops._home(monkeypatch, tmp_path, 'home')
    # No config file: the record is where the command will look for it,
    # whatever config an earlier test loaded.
    ops.kconf.register_opts(ops.cfg.CONF)
    ops.cfg.CONF([], project='kubespray-mgmt', default_config_files=[])
    ops._instantiated()
    pool = ops._scripted(ops.ALL, ops.ALL)
    monkeypatch.setattr(ssh, 'ConnectionPool', lambda *a, **k: pool)
    monkeypatch.setitem(cli.OPERATIONS, 'scale-out', operation)
    return cli.main(['run', 'scale-out', '--params', ops.PARAMS,
                     '--topology', ops.TOPOLOGY, '--instance-id',
                     ops.INSTANCE, '--package-dir', package] + list(more))


def _steps_then(error):
    def operation(drv, cluster, names, name, **extra):
        drv.step('joining %s', 'worker-10-10-0-22')
        drv.warn('a warning is no step')
        raise error
    return operation


def test_ctrl_c_after_a_step_says_what_was_done(monkeypatch, tmp_path,
                                                package, capsys):
    """Before: "kubespray-mgmt: interrupted" alone."""
    code = _run_with(monkeypatch, tmp_path, package,
                     _steps_then(KeyboardInterrupt()))
    err = capsys.readouterr().err
    assert code == cli.EXIT_INTERRUPTED
    assert err.endswith(
        'kubespray-mgmt: interrupted; 1 step(s) were done or begun, the '
        'last: "joining worker-10-10-0-22"; what they changed stays '
        'changed. Run the same command again to finish the operation\n')


def test_ctrl_c_before_any_step_says_only_interrupted(
        monkeypatch, tmp_path, package, capsys):
    def operation(drv, cluster, names, name, **extra):
        raise KeyboardInterrupt
    code = _run_with(monkeypatch, tmp_path, package, operation)
    assert code == cli.EXIT_INTERRUPTED
    assert capsys.readouterr().err.endswith(
        'kubespray-mgmt: interrupted\n')


class _ClosedPipe:
    """A standard output whose reader went away."""

    def write(self, text):
        raise BrokenPipeError(32, 'Broken pipe')

    def flush(self):
        raise BrokenPipeError(32, 'Broken pipe')

    def fileno(self):
        raise ValueError('no file')


def test_a_closed_standard_output_lets_the_operation_finish(
        monkeypatch, tmp_path, package):
    """Before: the first progress line raised BrokenPipeError out of the
    operation, which stopped half-way."""
    done = []

    def operation(drv, cluster, names, name, **extra):
        for step in ('draining', 'joining', 'updating HAProxy'):
            drv.step(step)
            done.append(step)
        return 'joined'
    monkeypatch.setattr(cli.sys, 'stdout', _ClosedPipe())
    code = _run_with(monkeypatch, tmp_path, package, operation)
    assert code == cli.EXIT_BROKEN_PIPE
    assert done == ['draining', 'joining', 'updating HAProxy']


@pytest.mark.parametrize('line, last', [
    ('warning: retrying', None), ('WARNING: x', None), ('joining', 'joining')])
def test_warnings_are_no_step_of_the_message(line, last):
    printer = cli._ProgressPrinter(_ClosedPipe())
    printer(line)
    assert (printer.last, printer.muted) == (last, True)
