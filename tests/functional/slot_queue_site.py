"""Playbook runs of many instances on one Ansible server's slots.

The harness of ``test_slot_turns.py`` and of the benchmarks
``benchmarks/slot_turns.py`` and ``benchmarks/conductor_memory.py``
(issue 40, "Done when"): the real slot queue (``run-start``'s slots and
tickets, ``detached.priority_class``) behind real
``kubespray.Runner``\\ s, each on its own SSH connection to a real sshd
and in a thread of its own, as a Tacker conductor's workers run hooks;
no cluster.  The stand-in ``ansible-playbook`` writes ``start <ws>``
and ``end <ws>`` lines (with the time) to one events file and, between
them, sleeps the seconds in ``<base>/hold`` (when it exists) and then
waits while ``<base>/gates/<ws>`` exists, so a test hands out slot
turns one by one.
"""

import pathlib
import re
import threading
import time
import uuid

from mgmt_driver.remote import detached
from mgmt_driver.remote import kubespray
from mgmt_driver.remote import ssh

LAYOUT = kubespray.Layout('playbooks/facts.yml', True, 'v2.31.0')

#: The stand-in playbook; waits 600 s at most for its gate.
STAND_IN = '''#!/bin/sh
ws=$(printf '%%s\\n' "$*" | sed -n 's|.*/\\(ws-[0-9a-z]*\\)/.*|\\1|p' |
  head -n 1)
echo "start $ws $(date +%%s.%%N)" >> %(events)s
echo "PLAY [stand-in] ***"
echo "TASK [stand-in : hold the slot] ***"
[ -f %(hold)s ] && sleep "$(cat %(hold)s)"
n=0
while [ -e %(gates)s/"$ws" ] && [ $n -lt 6000 ]; do
  sleep 0.1; n=$((n + 1))
done
echo "end $ws $(date +%%s.%%N)" >> %(events)s
echo "ok: [node-1]"
echo "PLAY RECAP ***"
echo "node-1 : ok=1 changed=0 unreachable=0 failed=0 skipped=0"
'''

_EVENT = re.compile(r'(start|end) (ws-[0-9a-z]+) ([0-9]+[.][0-9]+)')


def waiting_line(address, slots):
    """The progress line of a run that found every slot taken."""
    return ('waiting for a playbook slot on %s: %d running '
            '(max_parallel_playbooks_per_server)' % (address, slots))


class Queue:
    """One Ansible server account, its stand-in playbook and the runs.

    :param site: a started ``mgmt_localsite.sshd.Sshd`` (or the same
        fields: ``user``, ``client_key``, ``port``, ``scratch``).
    :param address: the sshd's loopback address.
    :param slots: ``max_parallel_playbooks_per_server`` (0: no limit).
    :param known_hosts: the driver's known_hosts file.
    :param lead: ``playbook_slot_priority_lead`` (seconds).
    """

    def __init__(self, site, address, slots, known_hosts, lead=3600):
        self.lead = lead
        self.site = site
        self.address = address
        self.slots = slots
        self.known_hosts = known_hosts
        self.base = pathlib.Path(site.scratch) / ('q-' + uuid.uuid4().hex[:8])
        self.base.mkdir()
        self.base.chmod(0o1777)  # sticky, as /tmp: a safe workspace parent
        self.gates = self.base / 'gates'
        self.gates.mkdir()
        self.events_file = self.base / 'events'
        self.hold_file = self.base / 'hold'
        self.tool = self.base / 'ansible-playbook'
        self.tool.write_text(STAND_IN % {
            'events': ssh.quote(str(self.events_file)),
            'hold': ssh.quote(str(self.hold_file)),
            'gates': ssh.quote(str(self.gates))})
        self.tool.chmod(0o755)
        self.root = self.base / 'kubespray'
        self.root.mkdir()
        self.root.chmod(0o777)
        self.connections = []
        self.threads = {}
        self.outcomes = {}
        self.lines = {}
        self.arrived = {}

    def runner(self, name, operation):
        """A ``kubespray.Runner`` of workspace *name* on its own
        connection, its progress lines kept in ``lines[name]``."""
        settings = ssh.SSHSettings(connect_timeout=10, connect_retries=0,
                                   command_timeout=60,
                                   known_hosts_file=self.known_hosts)
        conn = ssh.Connection(self.address, ssh.Credentials(
            self.site.user, key_file=self.site.client_key), self.site.port,
            settings)
        self.connections.append(conn)
        self.lines[name] = []
        return kubespray.Runner(
            conn, str(self.root), LAYOUT,
            kubespray.Workspace(conn, str(self.base / name)),
            settings=kubespray.PlaybookSettings(
                timeout_base=1200, timeout_per_node=0,
                ansible_playbook=str(self.tool), max_parallel=self.slots,
                slots=detached.SlotPolicy(lead=self.lead)),
            operation=operation, on_progress=self.lines[name].append)

    def submit(self, name, operation, gated=True, executor=None):
        """Start run *name* (``ws-...``) of *operation* in a thread (or
        on *executor*); with *gated*, it holds its slot until
        :meth:`release`."""
        if gated:
            (self.gates / name).touch()
        runner = self.runner(name, operation)
        self.arrived[name] = self.ended()

        def run():
            try:
                self.outcomes[name] = runner.cluster(1)
            except Exception as exc:  # noqa: BLE001 - the caller checks
                self.outcomes[name] = exc
        if executor is not None:
            self.threads[name] = executor.submit(run)
            return
        thread = threading.Thread(target=run, daemon=True, name=name)
        thread.start()
        self.threads[name] = thread

    @staticmethod
    def clock():
        """The clock of the events' times (the epoch, as ``date``)."""
        return time.time()

    def release(self, name):
        """Let run *name*'s playbook end (it gives its slot back)."""
        (self.gates / name).unlink(missing_ok=True)

    def events(self):
        """``[(kind, workspace)]``: every start and end, in order."""
        return [(kind, ws) for kind, ws, _ in self.timed_events()]

    def timed_events(self):
        """``[(kind, workspace, epoch seconds)]``, in order."""
        if not self.events_file.exists():
            return []
        return [(m[1], m[2], float(m[3])) for m in map(
            _EVENT.fullmatch, self.events_file.read_text().splitlines())
            if m]

    def started(self):
        """The workspaces whose playbook started, in order."""
        return [ws for kind, ws in self.events() if kind == 'start']

    def ended(self):
        """How many playbooks ended (slot turns given back) so far."""
        return sum(1 for kind, _ in self.events() if kind == 'end')

    def running(self):
        """The workspaces whose playbook runs now, oldest first."""
        ended = {ws for kind, ws in self.events() if kind == 'end'}
        return [ws for ws in self.started() if ws not in ended]

    def is_waiting(self, name):
        """Whether run *name* reported that it waits for a slot."""
        return waiting_line(self.address, self.slots) in self.lines[name]

    def turns(self):
        """``{workspace: slot turns it waited}``: the slots given back
        (playbooks ended) between its arrival and its start, counting
        the one it took."""
        out, ends = {}, 0
        for kind, ws in self.events():
            if kind == 'end':
                ends += 1
            else:
                out[ws] = ends - self.arrived.get(ws, 0)
        return out

    def peak_running(self):
        """The most playbooks that ran at once."""
        now = peak = 0
        for kind, _ in self.events():
            now += 1 if kind == 'start' else -1
            peak = max(peak, now)
        return peak

    def close(self):
        """Open every gate, wait for the runs, close the connections."""
        for gate in self.gates.iterdir():
            gate.unlink(missing_ok=True)
        for thread in self.threads.values():
            if isinstance(thread, threading.Thread):
                thread.join(120)
        for conn in self.connections:
            conn.close()


def wait_for(predicate, what, timeout=120):
    """Poll *predicate* until true; AssertionError naming *what* after
    *timeout* seconds (a hang guard, not a timed assertion)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, 'timed out waiting for ' + what
        time.sleep(0.05)


def bound_in_turns(ahead, later_higher):
    """The slot turns (slots given back) a queued run waits at most: one
    for each run queued ahead of it when it arrived (*ahead*), one for
    each run of a higher priority class (``detached.priority_class``)
    that arrived while it waited (*later_higher*; counted while they
    arrive less than ``playbook_slot_priority_lead`` seconds per class
    after it, later ones queue behind it), and the turn it takes."""
    return ahead + later_higher + 1


def queue_upgrades_then_heal(queue, upgrades):
    """Fill the slots and queue *upgrades* runs in all, then a heal.

    The first ``queue.slots`` upgrades take the slots; each other one
    is submitted once the one before it waits (so the order of arrival
    is known); then ``ws-heal`` (operation ``heal_end``) arrives.
    :returns: the upgrades' workspace names, in order of arrival.
    """
    names = ['ws-u%02d' % (i + 1) for i in range(upgrades)]
    for i, name in enumerate(names):
        queue.submit(name, 'upgrade')
        if i < queue.slots:
            wait_for(lambda n=i + 1: len(queue.started()) == n,
                     name + ' to take a slot')
        else:
            wait_for(lambda n=name: queue.is_waiting(n), name + ' to wait')
    queue.submit('ws-heal', 'heal_end')
    wait_for(lambda: queue.is_waiting('ws-heal'), 'the heal to wait')
    return names


def hand_out_turns(queue, total):
    """Release the oldest running playbook, one slot turn at a time,
    until *total* playbooks started and every one ended."""
    while True:
        running = queue.running()
        if not running:
            break
        before = len(queue.started())
        queue.release(running[0])
        wait_for(lambda w=running[0]: w not in queue.running(),
                 running[0] + ' to end')
        if before < total:
            wait_for(lambda b=before: len(queue.started()) > b,
                     'the next run to take the slot')
