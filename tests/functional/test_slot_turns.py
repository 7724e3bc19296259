"""With 20 upgrades queued, a heal waits at most one slot turn (issue 40).

20 instances' upgrades on ONE Ansible server account with 2 playbook
slots (``max_parallel_playbooks_per_server = 2``), each a real
``kubespray.Runner`` in a thread of its own on its own SSH connection to
a real sshd, through the real slot queue (``run-start``); the playbook
is a stand-in that holds its slot until the test releases it
(``slot_queue_site``).  2 upgrades run, 18 wait, then a heal arrives.
The test hands out slot turns one at a time (releasing the oldest
running playbook) and counts turns, never seconds:

* the heal gets the first slot given back: it waits ONE turn;
* every upgrade still runs, in order of arrival: the k-th upgrade to
  queue (k = 1..18) waits k + 1 turns, the bound
  ``slot_queue_site.bound_in_turns`` states (the runs queued ahead of
  it, plus the heal that came later with a higher class); the last
  waits 19 turns, and no run fails or is refused;
* never more than 2 playbooks at once.

The sshd gives the account a home of its own (every test sshd does:
``mgmt_localsite.sshd``), so the slots and the queue are this test's
alone although every test sshd logs in as one account.

Addresses: 127.0.81.1 only.
"""

import pytest

from mgmt_driver.remote import kubespray
from tests.functional import slot_queue_site
from tests.functional import sshd_fixture

ADDRESS = '127.0.81.1'
SLOTS = 2
UPGRADES = 20


@pytest.fixture(scope='module')
def sshd():
    yield from sshd_fixture.serve((ADDRESS,))


def test_a_heal_behind_20_queued_upgrades_waits_one_turn_none_starves(
        sshd, tmp_path):
    queue = slot_queue_site.Queue(sshd, ADDRESS, SLOTS,
                                  str(tmp_path / 'known_hosts'))
    try:
        upgrades = slot_queue_site.queue_upgrades_then_heal(queue, UPGRADES)
        assert queue.started() == upgrades[:SLOTS]
        slot_queue_site.hand_out_turns(queue, UPGRADES + 1)
    finally:
        queue.close()
    failed = {name: outcome for name, outcome in queue.outcomes.items()
              if not isinstance(outcome, kubespray.PlaybookRun)}
    assert not failed
    assert len(queue.outcomes) == UPGRADES + 1
    turns = queue.turns()
    assert turns['ws-heal'] == 1, queue.started()
    assert slot_queue_site.bound_in_turns(0, later_higher=0) == 1
    queued = upgrades[SLOTS:]
    for ahead, name in enumerate(queued):
        bound = slot_queue_site.bound_in_turns(ahead, later_higher=1)
        assert turns[name] <= bound, (name, turns[name], bound)
    assert queue.started() == upgrades[:SLOTS] + ['ws-heal'] + queued
    assert max(turns.values()) == UPGRADES - SLOTS + 1
    assert queue.peak_running() == SLOTS
