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
