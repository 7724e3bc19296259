"""What an SSH connection and a remote command cost, on a real sshd.

Starts the test suite's sshd on 127.0.0.2 (loopback only), then times
``--connections`` fresh connections (TCP, key exchange, host key check,
public-key login, one command) and ``--commands`` commands on one reused
connection.  A benchmark, not a test: it asserts nothing.

    python benchmarks/ssh_costs.py --connections 20 --commands 200
"""

import argparse
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from mgmt_localsite import sshd as sshd_site  # noqa: E402

from mgmt_driver.remote import ssh  # noqa: E402

#: Where CI runs ``--quick`` (tests/functional/test_benchmarks_quick.py).
QUICK_LANE = 'functional'


def percentile(values, percent):
    """The *percent* (an integer, 0..100) percentile of *values*, nearest
    rank: the smallest value with at least that share of *values* at or
    below it (the rank in integers), so the median (50) is never above
    the p90.  The one rule of the benchmarks (``fleet.py`` takes it
    from here)."""
    ordered = sorted(values)
    return ordered[max(1, -(-len(ordered) * percent // 100)) - 1]


def _ms(values):
    return 'median %.1f ms, p90 %.1f ms (nearest rank)' % (
        percentile(values, 50) * 1000, percentile(values, 90) * 1000)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--connections', type=int, default=20)
    parser.add_argument('--commands', type=int, default=200)
    parser.add_argument('--quick', action='store_true',
                        help='seconds, tiny sizes: what CI runs (no '
                             'figure is checked)')
    args = parser.parse_args()
    if args.quick:
        args.connections, args.commands = 2, 5
    site = sshd_site.Sshd(addresses=('127.0.0.2',)).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            settings = ssh.SSHSettings(known_hosts_file=tmp + '/kh')
            creds = ssh.Credentials(site.user, key_file=site.client_key)
            connect = []
            for _ in range(args.connections):
                start = time.perf_counter()
                with ssh.Connection('127.0.0.2', creds, site.port,
                                    settings) as conn:
                    conn.run(['true'])
                connect.append(time.perf_counter() - start)
            stats = ssh.Stats()
            with ssh.Connection('127.0.0.2', creds, site.port, settings,
                                stats=stats) as conn:
                conn.run(['true'])
                commands = []
                for _ in range(args.commands):
                    start = time.perf_counter()
                    conn.run(['true'])
                    commands.append(time.perf_counter() - start)
    finally:
        site.cleanup()
    print('new connection + login + 1 command: %s (%d runs)'
          % (_ms(connect), len(connect)))
    print('command on a reused connection:    %s (%d runs, %d connection)'
          % (_ms(commands), len(commands), stats.total('connections')))


if __name__ == '__main__':
    main()
