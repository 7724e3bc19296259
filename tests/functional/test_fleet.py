"""A fleet on one conductor and one Ansible server account: a bad day's
burst, CI-sized (issue 40 item 1; ``benchmarks/fleet.py`` is the large
one and prints the figures).

Two instances (one master, three workers each) on one Ansible server
account, driven through Tacker v1's hooks by one conductor of 64
threads (:mod:`tests.functional.fleet_site`).  A rack loss makes 30 %
of all workers NotReady, one automatic heal request per instance it
hits; then a scale-out, an upgrade, a relabel, a certificate renewal
and a ``status`` probe arrive, 7 operations within 5 seconds: the
smallest burst with a heal on more than one instance and every kind
of operation, so that each check below has something to catch.  Then:

* every operation ended, done or refused with a driver error that says
  why, within its bound (:func:`fleet_site.bound`: the driver's own
  deadlines; a liveness bound, not a speed target);
* no instance starved: each operation waited at most the bounds of the
  operations of its instance that arrived before it;
* every instance converged (the nodes Tacker knows, all Ready, one
  kubelet version, the LB serving exactly them);
* after terminate nothing is left: VIMs, records, workspaces, held
  instance locks or playbook slots, processes below the site's sshd,
  and the SSH masters Ansible kept open (the last test counts them).

Addresses: 127.0.70.0/24 (no other test uses it).
"""

import pytest
from mgmt_localsite import site as site_mod

from tests.functional import fleet_site

BLOCK = 70
#: Two instances: each rule spans instances (one heal each; no instance
#: starves another); 2 heals and one operation of each other kind.
INSTANCES = 2
OPERATIONS = 7
WINDOW = 5.0
#: How long the whole burst may take before the test gives up (a hang).
TIMEOUT = 1800

pytestmark = pytest.mark.skipif(site_mod.unavailable() is not None,
                                reason=str(site_mod.unavailable()))


@pytest.fixture(scope='module')
def day():
    fleet = fleet_site.Fleet(BLOCK, INSTANCES, spares=1)
    try:
        with fleet:
            yield fleet_site.bad_day(fleet, OPERATIONS, WINDOW, TIMEOUT,
                                     sample_period=(
                                         fleet_site.Sampler.TEST_PERIOD))
    finally:
        fleet_site.remove(fleet)


def test_the_burst_is_a_bad_day(day):
    """The burst is what the test claims: a heal per instance the rack
    loss hit, 30 % of all workers, and every other kind."""
    lost = sum(len(a) for a in day.lost.values())
    assert lost == round(INSTANCES * fleet_site.WORKERS *
                         fleet_site.RACK_SHARE)
    kinds = [op.kind for op in day.ops]
    assert kinds.count('heal') == len(day.lost)
    assert set(kinds) == set(fleet_site.KINDS)
    assert len(day.ops) == OPERATIONS


def test_every_operation_ends_done_or_refused_within_its_bound(day):
    assert day.all_ended
    assert fleet_site.unbounded(day) == []
    for op in day.ops:
        if op.kind == 'status':
            assert op.args['failed_sections'] == [], op.args


def test_no_instance_starves(day):
    assert fleet_site.starved(day.ops) == []


def test_every_instance_converges(day):
    assert day.divergence == []
    heals = [op for op in day.ops if op.kind == 'heal']
    assert heals and all(op.outcome == 'done' for op in heals), [
        op.error for op in heals]


def test_nothing_leaks(day):
    assert day.terminate_problems == []
    assert day.leaks == []


def test_terminate_closes_the_ansible_ssh_masters(day):
    """Removing the workspace closes the SSH master connections Ansible
    kept for it (``ssh -O exit`` on each control socket)."""
    assert day.masters_left == 0
