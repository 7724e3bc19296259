"""A heal behind 20 queued upgrades on one Ansible server's slots, in
seconds.

Issue 40, "Done when": the scenario of
``tests/functional/test_slot_turns.py`` (which counts slot turns and
asserts them), timed.  On a real sshd (127.0.82.1), ``--upgrades``
instances' upgrades share ONE Ansible server account with ``--slots``
playbook slots, each a real ``kubespray.Runner`` in a thread of its own
(as a Tacker conductor's workers run hooks) through the real slot queue;
the playbook is a stand-in (``tests/functional/slot_queue_site.py``).
The first ``--slots`` upgrades take the slots and hold them, the others
queue one after the other, then a heal arrives.  Then the slots are
let go and every later playbook holds its slot ``--hold`` seconds;
printed: when the heal started, the queued upgrades' waits (from that
moment) against their bound (``bound_in_turns`` turns, ``--slots`` at a
time, ``--hold`` s plus the queue's 1 s poll each), with the default
``playbook_slot_priority_lead`` and with 0 (plain order of arrival, the
driver before issue 40) for comparison.  A benchmark: it asserts
nothing.

    python benchmarks/slot_turns.py            # 20 upgrades, 2 slots, 5 s
    python benchmarks/slot_turns.py --quick    # 4 upgrades, 1 s each
"""

import argparse
import math
import os
import pathlib
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from mgmt_localsite import sshd as sshd_site  # noqa: E402

from tests.functional import slot_queue_site  # noqa: E402

#: Where CI runs ``--quick`` (tests/functional/test_benchmarks_quick.py).
QUICK_LANE = 'functional'
ADDRESS = '127.0.82.1'


def scenario(site, args, lead, known_hosts):
    """One run of the scenario: ``{workspace: seconds from the release
    of the slots to its start}`` and the seconds to the last end."""
    queue = slot_queue_site.Queue(site, ADDRESS, args.slots, known_hosts,
                                  lead=lead)
    try:
        slot_queue_site.queue_upgrades_then_heal(queue, args.upgrades)
        queue.hold_file.write_text('%s\n' % args.hold)
        released = queue.clock()
        for gate in queue.gates.iterdir():
            gate.unlink()
        slot_queue_site.wait_for(
            lambda: queue.ended() == args.upgrades + 1, 'every run to end',
            timeout=args.hold * (args.upgrades + 2) * 4 + 120)
    finally:
        queue.close()
    events = queue.timed_events()
    waits = {ws: max(0.0, t - released) for kind, ws, t in events
             if kind == 'start'}
    return waits, max(t for _, _, t in events) - released


def report(args, lead, waits, total):
    """The figures of one run, as text: the heal's wait, and each queued
    upgrade's against its bound (its turns, ``bound_in_turns``, served
    ``--slots`` at a time, ``--hold`` s each plus the queue's 1 s
    poll)."""
    queued = ['ws-u%02d' % (i + 1)
              for i in range(args.slots, args.upgrades)]
    bounds = [math.ceil(slot_queue_site.bound_in_turns(
        ahead, later_higher=1) / args.slots) * (args.hold + 1)
        for ahead in range(len(queued))]
    upgrade_waits = sorted(waits[ws] for ws in queued)
    over = sum(waits[ws] > bound
               for ws, bound in zip(queued, bounds, strict=True))
    return '\n'.join([
        'playbook_slot_priority_lead=%d: the heal started %.1f s after '
        'the slots were let go (playbooks of %.0f s, %d slots); every run '
        'ended in %.1f s' % (lead, waits['ws-heal'], args.hold, args.slots,
                             total),
        '  %d queued upgrades: wait p50 %.1f s, max %.1f s (bound of the '
        'last %.0f s); over their bound: %d' % (
            len(queued), upgrade_waits[len(queued) // 2],
            upgrade_waits[-1], bounds[-1], over)])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--upgrades', type=int, default=20)
    parser.add_argument('--slots', type=int, default=2)
    parser.add_argument('--hold', type=float, default=5.0,
                        help='seconds each playbook holds its slot')
    parser.add_argument('--quick', action='store_true',
                        help='4 upgrades of 1 s: what CI runs')
    args = parser.parse_args(argv)
    if args.quick:
        args.upgrades, args.hold = 4, 1.0
    if not args.slots < args.upgrades <= 60:
        parser.error('--upgrades: more than --slots, at most 60')
    site = sshd_site.Sshd((ADDRESS,)).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            known_hosts = os.path.join(tmp, 'known_hosts')
            for lead in (3600, 0):
                waits, total = scenario(site, args, lead, known_hosts)
                print(report(args, lead, waits, total))
    finally:
        site.cleanup()
    return 0


if __name__ == '__main__':
    sys.exit(main())
