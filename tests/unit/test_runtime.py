"""What keeps a hook from blocking an eventlet hub (mgmt_driver.common.runtime,
sharedfiles' lock, ssh's close).  The whole-hook proof under a real
eventlet-patched process is tests/integration/test_conductor_runtimes."""

import fcntl
import subprocess
import sys
import threading
import types

from mgmt_driver.common import runtime
from mgmt_driver.remote import detached
from mgmt_driver.remote import ssh
from mgmt_driver.session import driver
from mgmt_driver.state import sharedfiles

_HOLDER = '''
import fcntl, sys, time
with open(sys.argv[1], 'a') as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    print('held', flush=True)
    sys.stdin.readline()
'''


def test_a_lock_held_by_another_process_is_waited_for_in_sleeps(
        tmp_path, monkeypatch):
    """A blocking flock would wait inside C, where eventlet cannot switch
    green threads: the wait must be sleeps (eventlet's, once patched)."""
    path = str(tmp_path / 'known_hosts')
    holder = subprocess.Popen([sys.executable, '-c', _HOLDER, path + '.lock'],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == 'held'
        sleeps = []

        def sleep(seconds):
            sleeps.append(seconds)
            if len(sleeps) == 5:
                holder.stdin.write('go\n')  # the other process lets go
                holder.stdin.flush()
                holder.wait()  # no timeout: Popen.wait(t) sleeps too
            assert len(sleeps) < 1000, 'the lock was never released'
        monkeypatch.setattr(sharedfiles.time, 'sleep', sleep)
        with sharedfiles.locked(path):
            with open(path + '.lock', 'a') as other:
                try:
                    fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    held = False
                except BlockingIOError:
                    held = True
    finally:
        holder.kill()
        holder.wait()
    assert held
    assert len(sleeps) >= 5
    assert max(sleeps) <= sharedfiles.MAX_LOCK_PAUSE
    assert sleeps[:3] == sorted(sleeps[:3])  # backs off


class FakeTransport:
    """A paramiko transport whose reader thread ends after close."""

    def __init__(self):
        self.calls = []
        self.alive = True

    def close(self):
        self.calls.append('close')

    def is_alive(self):
        return self.alive

    def join(self, timeout=None):
        self.calls.append('join')
        self.alive = False


def test_closing_a_connection_waits_for_its_reader_thread():
    """Under eventlet a green reader left on the closed descriptor made
    the next reader of a recycled descriptor fail; with threads it could
    read someone else's data."""
    conn = ssh.Connection('h', ssh.Credentials('u', password='p'),
                          settings=ssh.SSHSettings())
    transport = FakeTransport()
    conn._transport_obj = transport
    conn.close()
    assert transport.calls == ['close', 'join']
    assert conn._transport_obj is None
    conn.close()  # nothing left to close
    assert transport.calls == ['close', 'join']


def test_a_reader_that_already_ended_is_not_joined():
    transport = FakeTransport()
    transport.alive = False
    ssh._close_transport(transport)
    assert transport.calls == ['close']


def test_offload_calls_directly_without_eventlet(monkeypatch):
    monkeypatch.delitem(sys.modules, 'eventlet', raising=False)
    assert runtime.green() is False
    here = threading.get_ident()
    assert runtime.offload(lambda x: (x, threading.get_ident()), 7) == (
        7, here)


def test_offload_uses_a_native_thread_under_eventlet(monkeypatch):
    executed = []
    tpool = types.ModuleType('eventlet.tpool')
    tpool.execute = lambda function, *args: executed.append(args) or \
        function(*args)
    eventlet = types.ModuleType('eventlet')
    eventlet.patcher = types.SimpleNamespace(
        is_monkey_patched=lambda name: name == 'thread')
    eventlet.tpool = tpool
    monkeypatch.setitem(sys.modules, 'eventlet', eventlet)
    monkeypatch.setitem(sys.modules, 'eventlet.tpool', tpool)
    assert runtime.green() is True
    assert runtime.offload(lambda a, b: a + b, 2, 3) == 5
    assert executed == [(2, 3)]


def test_an_unpatched_eventlet_is_not_green(monkeypatch):
    eventlet = types.ModuleType('eventlet')
    eventlet.patcher = types.SimpleNamespace(
        is_monkey_patched=lambda name: False)
    monkeypatch.setitem(sys.modules, 'eventlet', eventlet)
    assert runtime.green() is False


def test_slot_sentences_reach_the_operation_progress():
    """kubespray-mgmt run shows a run waiting for a slot."""
    seen = []
    reporter = detached.SlotReporter('ansible', seen.append)
    reporter('KR:SLOTWAIT:4')
    reporter('KR:SLOT:1:30')
    assert len(seen) == 2
    assert all(line.startswith(driver._PROGRESS_LINES) for line in seen)
