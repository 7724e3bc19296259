"""tox -e genconfig: its commands, run in order, write the sample."""

import configparser
import pathlib
import shlex
import subprocess
import sys

from oslo_config import generator

REPO = pathlib.Path(__file__).parents[2]


def _genconfig_commands():
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(REPO / 'tox.ini')
    text = tox['testenv:genconfig']['commands']
    return [shlex.split(line) for line in text.splitlines() if line.strip()]


def _run(argv):
    if argv[0] == 'oslo-config-generator':
        generator.main(argv[1:])
    elif argv[0] == 'python':
        subprocess.run([sys.executable] + argv[1:], check=True)
    else:
        raise AssertionError('unexpected command %s' % argv[0])


def test_genconfig_writes_the_sample_in_a_fresh_checkout(tmp_path,
                                                         monkeypatch):
    monkeypatch.chdir(tmp_path)  # no etc/ there, as in a fresh clone
    for argv in _genconfig_commands():
        _run(argv)
    sample = (tmp_path / 'etc' / 'kubespray-mgmt.conf.sample').read_text()
    assert '[kubespray_mgmt]' in sample
    assert '#ssh_connect_retries = ' in sample
