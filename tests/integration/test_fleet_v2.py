"""A fleet on two conductors sharing one state store and one Ansible
server account: Tacker v1's threads and Tacker v2's script processes
(issue 40 item 1), a bad day's burst, CI-sized.

Four instances (one master, three workers each) on one Ansible server
account (:mod:`tests.functional.fleet_site`): two driven through Tacker
v1's hooks by one conductor of 64 threads, two by Tacker v2's conductor,
which runs the packaged v2 script in a new process for every hook
(:class:`tests.integration.fleet_v2.ProcessConductor`; the script reads
the VMs from a fake Heat through Tacker 16's own v2 ``HeatClient``).
A rack loss makes 30 % of all workers NotReady, one automatic heal
request per instance (so on both conductors); then scale-outs, upgrades,
relabels, certificate renewals and ``status`` probes, 12 operations
within 20 seconds.  Then, as ``tests/functional/test_fleet.py`` checks
for one conductor:

* every operation ended, done or refused with a driver error that says
  why, within its bound (:func:`fleet_site.bound`);
* no instance starved, on either conductor: the playbook slots of the
  shared account served both (each operation waited at most the bounds
  of the operations of its instance that arrived before it);
* every instance converged; after terminate nothing is left (VIMs and
  the v2 kubeconfigs, records and the v2 kept parameters, workspaces,
  held locks or slots, processes below the site's sshd);
* the ``ansible-playbook`` runs on the Ansible server were counted (by
  the fleet's workspace path: detached runs are no descendants of sshd).

Addresses: 127.0.77.0/24 (no other test uses it; Heat on 127.0.77.251).
"""

import pytest

pytest.importorskip('tacker')

from mgmt_localsite import site as site_mod  # noqa: E402

from tests.functional import fleet_site  # noqa: E402
from tests.integration import fleet_v2  # noqa: E402

BLOCK = 77
INSTANCES = 4
OPERATIONS = 12
WINDOW = 20.0
#: How long the whole burst may take before the test gives up (a hang).
TIMEOUT = 1800

pytestmark = pytest.mark.skipif(site_mod.unavailable() is not None,
                                reason=str(site_mod.unavailable()))


@pytest.fixture(scope='module')
def fleet():
    fleet = fleet_site.Fleet(BLOCK, INSTANCES, spares=1)
    try:
        with fleet:
            day, conductors, v2fleet = fleet_v2.mixed_day(
                fleet, fleet.instances[INSTANCES // 2:], OPERATIONS, WINDOW,
                TIMEOUT, fleet_site.Sampler.TEST_PERIOD)
            v2fleet.report = _report(day, v2fleet)
            print(v2fleet.report)
            yield fleet, day, conductors, v2fleet
    finally:
        fleet_site.remove(fleet)


def _report(day, v2fleet):
    """The figures worth a look when the test is run with ``-s``."""
    outcomes = {}
    for op in day.ops:
        outcomes[op.outcome] = outcomes.get(op.outcome, 0) + 1
    return ('burst %.0f s, outcomes %s; peaks: %d ansible-playbook runs, '
            '%d SSH sessions to the Ansible server, %d v2 script processes '
            'at once, %d script calls' % (
                day.burst_s, outcomes, day.peak['playbooks'],
                day.peak['ansible_ssh'], v2fleet.peak_scripts,
                len(v2fleet.calls)))


def test_the_v2_instances_ran_as_script_processes(fleet):
    """The hooks of the v2 instances were script processes (those of
    instantiate, heal and terminate succeeded), the v1 instances' none."""
    _, day, conductors, v2fleet = fleet
    v2 = set(conductors.v2_instances)
    assert {inst for inst, _, _ in v2fleet.calls} == v2
    assert [(name, status) for _, name, status in v2fleet.calls
            if name.split('_')[0] in ('instantiate', 'heal', 'terminate')
            and status != 0] == []
    for inst in v2:
        ran = [name for i, name, _ in v2fleet.calls if i is inst]
        assert ran[0] == 'instantiate_end'
        assert ran[-2:] == ['terminate_start', 'terminate_end']
        assert {'heal_start', 'heal_end'} <= set(ran), ran


def test_the_burst_reaches_both_conductors(fleet):
    _, day, conductors, _ = fleet
    lost = sum(len(a) for a in day.lost.values())
    assert lost == round(INSTANCES * fleet_site.WORKERS *
                         fleet_site.RACK_SHARE)
    assert len(day.ops) == OPERATIONS
    assert set(op.kind for op in day.ops) == set(fleet_site.KINDS)
    for conductor in (conductors.threaded, conductors.processes):
        mine = [op for op in day.ops if conductors.of(op) is conductor]
        assert 'heal' in {op.kind for op in mine}
        assert {op.instance for op in conductor.ops} == {
            op.instance for op in conductor.ops if op.kind == 'instantiate'}


def test_every_operation_ends_done_or_refused_within_its_bound(fleet):
    _, day, _, _ = fleet
    assert day.all_ended
    assert fleet_site.unbounded(day) == []


def test_no_instance_starves_on_either_conductor(fleet):
    _, day, _, _ = fleet
    assert len({op.instance for op in day.ops}) == INSTANCES
    assert fleet_site.starved(day.ops) == []


def test_every_instance_converges(fleet):
    _, day, _, _ = fleet
    assert day.divergence == []
    heals = [op for op in day.ops if op.kind == 'heal']
    assert heals and all(op.outcome == 'done' for op in heals), [
        op.error for op in heals]


def test_nothing_leaks(fleet):
    site, day, conductors, _ = fleet
    assert day.terminate_problems == []
    assert day.leaks == []
    assert fleet_v2.v2_leaks(site, conductors.v2_instances) == []


def test_playbook_runs_on_the_ansible_server_are_counted(fleet):
    _, day, _, _ = fleet
    assert day.peak['playbooks'] >= 1
