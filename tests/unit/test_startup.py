"""What a process of the driver imports before it does anything.

Tacker v2 starts a Python process for each hook of each LCM operation
(``Scripts/kubespray_mgmt_v2.py``), and every ``kubespray-mgmt`` command
is one: what their entry modules import, each of them pays in CPU and
latency, also when the hook has nothing to do.  The libraries below are
imported only by the code that uses them (an SSH connection, a rendered
load-balancer configuration); this test fails if one of them is imported
eagerly again.  A fresh interpreter: this process has imported them all.
"""

import configparser
import json
import pathlib
import pickle
import subprocess
import sys

import paramiko
import pytest

from mgmt_driver.adapters import v2
from mgmt_driver.remote import ssh

#: Imported on first use only: paramiko (with invoke) and tenacity by
#: :mod:`mgmt_driver.remote.ssh`'s connection, jinja2 by the renders of
#: :mod:`mgmt_driver.remote.loadbalancer` and ``keepalived``.
DEFERRED = ('paramiko', 'invoke', 'tenacity', 'jinja2')

#: Imported only by Tacker's own process: Tacker itself, and oslo.log,
#: whose logger adapter the driver's modules take where it is loaded
#: (:func:`mgmt_driver.common.safetext.logger`).
TACKERS = ('tacker', 'oslo_log.log')

#: The modules each kind of process starts from.
ENTRIES = ('mgmt_driver.adapters.v2', 'mgmt_driver.adapters.cli',
           'mgmt_driver.adapters.cli_entry', 'mgmt_driver.kubespray_mgmt')

_PROBE = '''
import importlib, json, sys
module = importlib.import_module(sys.argv[1])
eval(sys.argv[2])
print(json.dumps(sorted(name for name in sys.argv[3:] if name in sys.modules)))
'''


def _imported(entry, names, then='None'):
    """Which of *names* a fresh interpreter has imported after
    importing *entry* and evaluating *then* (``module`` is the entry)."""
    out = subprocess.run([sys.executable, '-c', _PROBE, entry, then, *names],
                         capture_output=True, text=True, check=True,
                         timeout=120)
    return json.loads(out.stdout)


_SCRIPT_PROBE = '''
import json, os, runpy, sys
try:
    runpy.run_path(sys.argv[1], run_name='__main__')
except SystemExit as exit:
    status = exit.code
os.write(2, json.dumps([status] + sorted(
    name for name in sys.argv[2:] if name in sys.modules)).encode())
'''


def script_run(script, names, call):
    """Run the v2 script *script* as Tacker does, its input the pickled
    *call*.

    :returns: its exit status and which of *names* it imported, and the
        unpickled output (None when it wrote none).
    """
    out = subprocess.run([sys.executable, '-c', _SCRIPT_PROBE, script,
                          *names], input=pickle.dumps(call),
                         capture_output=True, check=True, timeout=120)
    return json.loads(out.stderr.decode().splitlines()[-1]), \
        (pickle.loads(out.stdout) if out.stdout else None)


_COMMAND_PROBE = '''
import importlib, json, os, sys
module, _, function = sys.argv[1].partition(':')
try:
    status = getattr(importlib.import_module(module), function)(
        json.loads(sys.argv[2]))
except SystemExit as exit:
    status = exit.code
os.write(2, json.dumps([status] + sorted(
    name for name in sys.argv[3:] if name in sys.modules)).encode())
'''


def console_script(name='kubespray-mgmt'):
    """The ``module:function`` setup.cfg installs as command *name*."""
    config = configparser.ConfigParser()
    config.read(pathlib.Path(__file__).resolve().parents[2] / 'setup.cfg')
    scripts = config['entry_points']['console_scripts'].strip()
    return dict(line.replace(' ', '').split('=')
                for line in scripts.splitlines())[name]


def command_run(argv, names):
    """Run the ``kubespray-mgmt`` command with *argv* as its console
    script does, in a fresh interpreter.

    :returns: its exit status and which of *names* it imported.
    """
    out = subprocess.run([sys.executable, '-c', _COMMAND_PROBE,
                          console_script(), json.dumps(argv), *names],
                         capture_output=True, check=True, timeout=120)
    return json.loads(out.stderr.decode().splitlines()[-1])


def test_the_command_imports_none_of_them():
    # No command word: the usage, exit status 1 (bad input).
    assert command_run([], DEFERRED + TACKERS) == [1]


def test_a_v2_hook_with_nothing_to_do_imports_none_of_them():
    imported, output = script_run(
        v2.script_path(), DEFERRED + TACKERS,
        {'operation': 'instantiate_start', 'vnf_instance': {'id': 'i-1'},
         'request': {}})
    assert imported == [0] and output == {}


@pytest.mark.parametrize('entry', ENTRIES)
def test_entry_does_not_import_what_only_some_operations_use(entry):
    assert _imported(entry, DEFERRED + TACKERS) == []


def test_a_module_s_logger_is_oslo_log_s_where_oslo_log_is_loaded():
    """In Tacker's process (oslo.log loaded first) a driver module logs
    through oslo.log's adapter; elsewhere through the standard logger;
    either way its arguments are bounded."""
    probe = ('import json, logging, sys\n'
             'if sys.argv[1] == "oslo": import oslo_log.log\n'
             'from mgmt_driver.remote import detached\n'
             'from mgmt_driver.common import safetext\n'
             'plain = logging.getLogger(detached.__name__)\n'
             'print(json.dumps([type(detached.LOG).__name__,'
             ' getattr(detached.LOG, "logger", detached.LOG) is plain,'
             ' any(isinstance(f, safetext.BoundedArgs)'
             ' for f in plain.filters)]))\n')
    seen = {}
    for kind in ('oslo', 'plain'):
        out = subprocess.run([sys.executable, '-c', probe, kind],
                             capture_output=True, text=True, check=True,
                             timeout=120)
        seen[kind] = json.loads(out.stdout)
    assert seen == {'oslo': ['KeywordArgumentAdapter', True, True],
                    'plain': ['Logger', True, True]}


def test_the_first_use_imports_the_deferred_module():
    # What a connection does first (ssh.Connection._open_transport).
    assert 'paramiko' in _imported('mgmt_driver.remote.ssh', DEFERRED,
                                   'module.paramiko.Transport')
    assert _imported('mgmt_driver.remote.loadbalancer', DEFERRED,
                     'module._template()') == ['jinja2']


def test_ssh_names_paramikos_own_classes():
    assert ssh.paramiko.SSHException is paramiko.SSHException
    assert ssh._sftp_errors()[-2:] == (paramiko.SSHException,
                                       paramiko.SFTPError)
