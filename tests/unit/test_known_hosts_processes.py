"""ssh.KnownHosts shared by several processes (tacker-conductor workers)."""

import multiprocessing
import os
import stat

import paramiko

from mgmt_driver.remote import ssh

PROCESSES = 6
ENTRIES = 15


def _add_entries(path, index, start):
    key = paramiko.ECDSAKey.generate()
    known_hosts = ssh.KnownHosts(path, 'accept-new')
    start.wait()
    for entry in range(ENTRIES):
        known_hosts.verify('10.%d.0.%d' % (index, entry), 22, key)


def test_six_processes_keep_every_entry(tmp_path):
    path = str(tmp_path / 'known_hosts')
    context = multiprocessing.get_context('fork')
    start = context.Event()
    workers = [context.Process(target=_add_entries, args=(path, i, start))
               for i in range(PROCESSES)]
    for worker in workers:
        worker.start()
    start.set()
    for worker in workers:
        worker.join(60)
    assert [w.exitcode for w in workers] == [0] * PROCESSES
    kept = paramiko.HostKeys(path)
    assert len(kept) == PROCESSES * ENTRIES
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert not [n for n in os.listdir(tmp_path) if n.endswith('.tmp')]


def test_forget_rereads_the_file_under_the_lock(tmp_path):
    path = str(tmp_path / 'known_hosts')
    key = paramiko.ECDSAKey.generate()
    first = ssh.KnownHosts(path)
    first.verify('10.0.0.1', 22, key)
    # Another process adds an entry after this object last read the file.
    ssh.KnownHosts(path).verify('10.0.0.2', 22, key)
    assert first.forget('10.0.0.1')
    assert list(paramiko.HostKeys(path).keys()) == ['10.0.0.2']
