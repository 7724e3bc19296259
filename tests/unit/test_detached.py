"""mgmt_driver.remote.detached: what it reads back from the Ansible server
(untrusted), its waiting, and how a dry run shows its commands."""

import logging
import re

import pytest
from oslo_config import cfg

from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.remote import detached
from mgmt_driver.remote import kubespray
from mgmt_driver.remote import programs
from mgmt_driver.remote import ssh
from tests.fakes import FakeConnection

WS = '/srv/ws/vnf-1'
STEM = '20261123T230501Z-scale_end-scale'


def test_run_info_keeps_checked_fields_only():
    info = detached.RunInfo.parse([
        'id=abc', 'stem=' + STEM, 'operation=scale_end', 'pid=4242',
        'owner=conductor-1:77', 'started=2026-11-23T23:05:01Z',
        'stem=20990101T000000Z-other-x', 'junk', 'pid2=1'])
    assert info == detached.RunInfo(
        id='abc', stem=STEM, operation='scale_end', playbook='?',
        owner='conductor-1:77', started='2026-11-23T23:05:01Z', pid=4242)
    assert info.describe() == ('? of scale_end, started '
                               '2026-11-23T23:05:01Z by conductor-1:77 '
                               '(pid 4242)')


@pytest.mark.parametrize('line', [
    'stem=../../etc/passwd', 'stem=20261123T230501Z-x-$(reboot)',
    'stem=' + STEM + '\x1b[31m', 'pid=-1', 'pid=12345678901', 'pid=1 2'])
def test_run_info_drops_what_could_reach_a_command(line):
    info = detached.RunInfo.parse([line])
    assert info.stem is None and info.pid is None


def test_run_info_values_are_cut_and_printable():
    info = detached.RunInfo.parse(['owner=' + 'a\x07' * 500])
    assert info.owner == 'a' * 100


def test_busy_holder_only_when_the_lock_is_held():
    assert detached.busy_holder('') is None
    assert detached.busy_holder('KR:INFO:operation=x\n') is None
    holder = detached.busy_holder('KR:BUSY\nKR:INFO:operation=heal_end\n'
                                  'KR:INFO:stem=%s\n' % STEM)
    assert (holder.operation, holder.stem) == ('heal_end', STEM)


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_wait_while_busy_refuses_after_lock_wait():
    clock, peeks = Clock(), []
    holder = detached.RunInfo(operation='scale_end', stem=STEM, pid=9)

    def peek():
        peeks.append(clock.now)
        return holder

    with pytest.raises(exceptions.ClusterBusy) as info:
        detached.wait_while_busy(peek, lambda h: False, 12, 'ansible', WS,
                                 5, sleep=clock.sleep, clock=clock)
    assert peeks == [0.0, 5.0, 10.0, 15.0]
    assert '%s/logs/%s.log' % (WS, STEM) in str(info.value)
    assert 'scale_end' in str(info.value)


def test_wait_while_busy_returns_when_free_or_accepted():
    clock = Clock()
    answers = [detached.RunInfo(operation='a'), None]
    assert detached.wait_while_busy(lambda: answers.pop(0), lambda h: False,
                                    60, 'h', WS, 5, sleep=clock.sleep,
                                    clock=clock) is None
    assert clock.now == 5.0
    same = detached.RunInfo(operation='heal_end')
    assert detached.wait_while_busy(
        lambda: same, lambda h: h.operation == 'heal_end', 0, 'h', WS, 5) \
        is same


class BusyThenStarted:
    """Answers the first two starts with a run holding the lock, then
    starts."""

    host = 'ansible'

    def __init__(self):
        self.answers = ['KR:BUSY\nKR:INFO:operation=heal_end\n'] * 2 + [
            'KR:STARTED:%s:4242\n' % STEM]

    def run(self, command, **kwargs):
        return ssh.CommandResult('ansible', 'start', self.answers.pop(0),
                                 '', 0)


def test_a_start_looks_at_the_lock_every_playbook_lock_poll_seconds():
    """Before: every 5 s, a constant of the class."""
    config = cfg.ConfigOpts()
    kconf.register_opts(config)
    config([], project='kubespray-mgmt-test', default_config_files=[])
    config.set_override('playbook_lock_wait', 60, 'kubespray_mgmt')
    config.set_override('playbook_lock_poll', 2, 'kubespray_mgmt')
    settings = kubespray.PlaybookSettings.from_conf(config)
    clock, slept = Clock(), []

    def sleep(seconds):
        slept.append(seconds)
        clock.sleep(seconds)
    runs = detached.DetachedRuns(BusyThenStarted(), WS,
                                 lock_wait=settings.lock_wait,
                                 lock_poll=settings.lock_poll, sleep=sleep,
                                 clock=clock)
    assert runs._start('/ks', ['ansible-playbook', 'scale.yml'],
                       'scale_end', 'scale.yml',
                       runs._bounds('scale_end', 'scale.yml', 60),
                       1e9) == (STEM, 4242)
    assert slept == [2, 2]


def test_operation_names_are_tokens():
    runs = detached.DetachedRuns(FakeConnection('ansible'), WS)
    with pytest.raises(exceptions.MgmtDriverParamInvalid):
        runs.run('/ks', ['ansible-playbook'], 'scale-out; rm', 'x.yml', 60)


@pytest.mark.parametrize('stem', ['../x', 'latest', STEM + '/..'])
def test_show_log_refuses_odd_run_names_before_connecting(stem):
    conn = FakeConnection('ansible')
    with pytest.raises(exceptions.MgmtDriverParamInvalid):
        detached.show_log(conn, WS, print, stem=stem)
    assert conn.calls == []


def test_show_log_without_any_run():
    conn = FakeConnection('ansible')
    conn.script(r'which run to show', stdout='KR:NORUN\n')
    with pytest.raises(exceptions.RemoteFileError) as info:
        detached.show_log(conn, WS, print)
    assert 'no playbook run recorded yet' in str(info.value)


@pytest.mark.parametrize('answer', [
    'KR:STARTED:../x:1', 'KR:STARTED:%s:' % STEM, 'KR:STARTED:%s:1;2' % STEM,
    'KR:WHATEVER'])
def test_a_start_answer_without_a_valid_run_is_refused(answer):
    runs = detached.DetachedRuns(FakeConnection('ansible'), WS)
    with pytest.raises(exceptions.RemoteDataInvalid):
        runs._started(dict(detached._markers(answer + '\n')),
                      detached.RunInfo(), 'cluster.yml')


def test_the_plan_shows_the_start_and_the_removal_only():
    start = programs.command(detached.START, WS, '/ks', 'op', 'cluster',
                             'key', '60', 'me', '30', '4', '600', '0',
                             'ansible-playbook',
                             '-i', WS + '/hosts.yaml', 'cluster.yml')
    assert detached.plan_text(start) == (
        '(detached, log in %s/logs/) cd /ks && ansible-playbook -i '
        '%s/hosts.yaml cluster.yml' % (WS, WS))
    assert detached.plan_text(programs.command(detached.REMOVE, WS)) == (
        'rm -rf -- %s  # after stopping its playbook run and its SSH '
        'masters, if any' % WS)
    assert detached.plan_text(programs.command(detached.END, WS, STEM,
                                               '1', '9')) is None
    assert detached.plan_text(programs.command(detached.ENSURE, WS)) is False
    assert detached.plan_text(['sh', '-c', 'true']) is False
    assert detached.plan_text(['ls']) is False


class StartRecorder:
    """Answers every start with a started run; keeps the commands."""

    host = 'ansible'

    def __init__(self):
        self.commands = []

    def run(self, command, **kwargs):
        self.commands.append(command)
        return ssh.CommandResult('ansible', 'start',
                                 'KR:STARTED:%s:4242\n' % STEM, '', 0)


def test_the_ansible_server_learns_no_conductor_host_or_pid(caplog,
                                                            monkeypatch):
    """run.info's owner is a random name per run, nothing but the random
    token; the conductor's log (not the Ansible server) maps it to the
    conductor's host and pid.  The token, host and pid are fixed here: a
    real pid's digits turn up in 12 random hex digits now and then."""
    tokens = iter(['0a0b0c0d0e0f', 'f0e0d0c0b0a0'])
    asked = []

    def token_hex(nbytes):
        asked.append(nbytes)
        return next(tokens)

    monkeypatch.setattr(detached.secrets, 'token_hex', token_hex)
    monkeypatch.setattr(detached.socket, 'gethostname',
                        lambda: 'conductor-7')
    monkeypatch.setattr(detached.os, 'getpid', lambda: 4321)
    caplog.set_level(logging.INFO, logger=detached.__name__)
    conn = StartRecorder()
    runs = detached.DetachedRuns(conn, WS)
    for _ in range(2):
        assert runs._start('/ks', ['ansible-playbook', 'scale.yml'],
                           'scale_end', 'scale.yml',
                           runs._bounds('scale_end', 'scale.yml', 60),
                           1e9) == (STEM, 4242)
    owners = [command[10] for command in conn.commands]
    assert owners == ['run-0a0b0c0d0e0f', 'run-f0e0d0c0b0a0']
    assert asked == [6, 6]
    for who in owners:
        assert '%s (this is conductor-7, pid 4321)' % who in caplog.text
    # Nothing else in the command comes from the conductor process.
    first, second = conn.commands
    assert first[:10] + first[11:] == second[:10] + second[11:]
    assert not any('conductor-7' in arg or '4321' in arg
                   for command in conn.commands for arg in command)


def test_an_owner_is_run_and_12_random_hex_digits():
    names = {detached.owner() for _ in range(50)}
    assert len(names) == 50
    assert all(re.fullmatch(r'run-[0-9a-f]{12}', n) for n in names)


def test_last_run_is_the_run_info_or_nothing():
    conn = FakeConnection('ansible')
    conn.script(r'^program:run-show ',
                stdout='KR:INFO:stem=%s\nKR:INFO:pid=7\n' % STEM)
    info = detached.last_run(conn, WS)
    assert (info.stem, info.pid) == (STEM, 7)
    conn = FakeConnection('ansible')
    conn.script(r'^program:run-show ', stdout='KR:NORUN\n')
    assert detached.last_run(conn, WS).stem is None
