"""What running a playbook detached costs against running it in the SSH
session, on a real sshd.

Starts the test suite's sshd on 127.0.0.2 (loopback only) and runs a
stand-in ``ansible-playbook`` (it prints a play and a recap and exits)
``--runs`` times each way: in the session, as the driver did before
(one command: ``cd <root> && exec ansible-playbook ...``), and detached
through ``kubespray.Runner`` (start, follow the log, read its end: three
commands, plus the lock, the inputs' hash and the log files).  A
benchmark, not a test: it asserts nothing.

    python benchmarks/detached_runs.py --runs 30
"""

import argparse
import os
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from mgmt_localsite import sshd as sshd_site  # noqa: E402
from ssh_costs import _ms  # noqa: E402

from mgmt_driver.remote import kubespray  # noqa: E402
from mgmt_driver.remote import ssh  # noqa: E402

#: Where CI runs ``--quick`` (tests/functional/test_benchmarks_quick.py).
QUICK_LANE = 'functional'

STAND_IN = '''#!/bin/sh
echo "PLAY [stand-in] ***"
echo "TASK [stand-in : step] ***"
echo "ok: [node-1]"
echo "PLAY RECAP ***"
echo "node-1 : ok=1 changed=0 unreachable=0 failed=0"
'''
LAYOUT = kubespray.Layout('playbooks/facts.yml', True, 'v2.31.0')


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--runs', type=int, default=30)
    parser.add_argument('--quick', action='store_true',
                        help='seconds, tiny sizes: what CI runs (no '
                             'figure is checked)')
    args = parser.parse_args()
    if args.quick:
        args.runs = 2
    site = sshd_site.Sshd(addresses=('127.0.0.2',)).start()
    try:
        base = pathlib.Path(site.scratch) / 'bench-detached'
        base.mkdir()
        base.chmod(0o1777)  # sticky: the workspace's parent
        tool = base / 'ansible-playbook'
        tool.write_text(STAND_IN)
        tool.chmod(0o755)
        root = str(base)
        with tempfile.TemporaryDirectory() as tmp:
            settings = ssh.SSHSettings(known_hosts_file=tmp + '/kh')
            creds = ssh.Credentials(site.user, key_file=site.client_key)
            stats = ssh.Stats()
            with ssh.Connection('127.0.0.2', creds, site.port, settings,
                                stats=stats) as conn:
                workspace = kubespray.Workspace(conn, os.path.join(
                    root, 'ws'))
                workspace.ensure()
                runner = kubespray.Runner(
                    conn, root, LAYOUT, workspace,
                    settings=kubespray.PlaybookSettings(
                        ansible_playbook=str(tool), keep_logs=5),
                    operation='benchmark')
                argv = runner.argv('scale.yml', workspace.file('hosts.yaml'))
                in_session, detached = [], []
                before = stats.total('commands')
                for _ in range(args.runs):
                    start = time.perf_counter()
                    conn.run(['sh', '-c', 'cd -- "$1" && shift && exec '
                              '"$@"', 'sh', root] + argv,
                             env=kubespray.PLAYBOOK_ENV, keep_tail=True)
                    in_session.append(time.perf_counter() - start)
                session_commands = stats.total('commands') - before
                before = stats.total('commands')
                for number in range(args.runs):
                    # Another operation each time: two runs of the same
                    # operation and playbook within one second wait a
                    # second for a log name of their own.
                    runner.operation = 'benchmark_%d' % number
                    start = time.perf_counter()
                    runner.scale(['node-1'])
                    detached.append(time.perf_counter() - start)
                detached_commands = stats.total('commands') - before
    finally:
        site.cleanup()
    print('in the SSH session: %s, %.1f commands per run'
          % (_ms(in_session), session_commands / args.runs))
    print('detached:           %s, %.1f commands per run'
          % (_ms(detached), detached_commands / args.runs))


if __name__ == '__main__':
    main()
