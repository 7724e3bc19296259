"""How long the API and a NodePort are unreachable when a gateway fails.

Runs as root with the real ``haproxy`` and ``keepalived`` in network
namespaces it creates (``localsite-dist/mgmt_localsite/gateways.py``: two
gateways on a bridge, TEST-NET-1 addresses only, configured by
:func:`mgmt_driver.remote.keepalived.update_gateways`).  Per run:

* ``haproxy``: the MASTER gateway's HAProxy is stopped (SIGTERM); the
  clock runs until both the API port and a NodePort answer through the
  VIP again (keepalived's track script fails twice, 1 s apart, and the
  gateway sends a priority-0 advert, so the BACKUP takes over at once);
* ``gateway``: after the failed gateway is rebuilt and has joined as
  BACKUP, the MASTER gateway is lost whole (SIGKILL of its processes, its
  namespace deleted); the clock runs until both answer through the VIP
  (the BACKUP waits keepalived's master-down interval: 3 adverts of 1 s
  plus a skew).

Clients poll every 50 ms with a 1 s connect timeout.

Usage: python benchmarks/gateway_failover.py [--runs N]
"""

import argparse
import os
import pathlib
import statistics
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from mgmt_localsite import gateways  # noqa: E402
from mgmt_localsite import haproxy as site  # noqa: E402

#: Where CI runs ``--quick`` (tests/functional/test_benchmarks_quick.py).
QUICK_LANE = 'functional'

GATEWAYS = {'gw-1': '192.0.2.11', 'gw-2': '192.0.2.12'}


def _master(lab):
    site.wait_for(lambda: len(lab.holders()) == 1, 30, interval=0.1,
                  what='one gateway to hold the VIP')
    return lab.holders()[0]


def run_once(workdir, index):
    """``(haproxy seconds, gateway seconds)`` of one fresh lab."""
    lab = gateways.GatewayLab(workdir, 'bf%d' % index)
    try:
        lab.start()
        for name, address in GATEWAYS.items():
            lab.add_gateway(name, address)
        lab.configure()
        master = _master(lab)
        start = time.monotonic()
        lab.stop_haproxy(master)
        haproxy = lab.seconds_until_served(start)
        lab.destroy(master)
        lab.add_gateway(master, GATEWAYS[master])
        lab.configure()
        time.sleep(4)  # the rebuilt gateway settles as BACKUP
        start = time.monotonic()
        lab.destroy(_master(lab))
        return haproxy, lab.seconds_until_served(start)
    finally:
        lab.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--runs', type=int, default=5)
    parser.add_argument('--quick', action='store_true',
                        help='seconds, tiny sizes: what CI runs (no '
                             'figure is checked)')
    args = parser.parse_args()
    if args.quick:
        args.runs = 1
    reason = gateways.available()
    if reason:
        sys.exit('cannot run: %s' % reason)
    results = []
    with tempfile.TemporaryDirectory(prefix='kmgmt-failover-') as workdir:
        for index in range(args.runs):
            run_dir = os.path.join(workdir, str(index))
            os.mkdir(run_dir, 0o700)
            results.append(run_once(run_dir, index))
            print('run %d: haproxy stopped %.2f s, gateway lost %.2f s'
                  % ((index + 1,) + results[-1]), flush=True)
    for column, what in enumerate(('HAProxy stopped on the master',
                                   'master gateway lost')):
        values = [r[column] for r in results]
        print('%-30s median %.2f s (min %.2f, max %.2f, %d runs)' % (
            what, statistics.median(values), min(values), max(values),
            len(values)))


if __name__ == '__main__':
    main()
