"""The kept site's API servers and NodePorts, in a process of their own.

``kubespray-mgmt site up`` ends while its site runs on; nothing of the
site may run inside that command.  Yet the upgrade's gates and
``renew-certs`` ask ``/readyz`` of the masters' API servers (through the
load balancer, and on each master's 6443), which the fake kubectl
answers only when something greets there (:mod:`mgmt_localsite.fake_kubectl`,
``get --raw``).  The demo starts those greeting servers in its own
process (:class:`mgmt_localsite.site.Backends`); ``site up`` starts this
program instead, detached, and ``site down`` stops it by PID::

    python -m mgmt_localsite.greeters --marker SITE_ROOT \\
        --masters 127.0.0.221 --workers 127.0.0.231 --nodeports 30001,30002

``--marker`` is only there to be found in its command line: ``site
down`` checks it before signalling the PID.
"""

import argparse
import signal
import sys
import threading

from mgmt_localsite import procs
from mgmt_localsite import site as site_mod


def _addresses(text):
    return [a for a in text.split(',') if a]


def parse_args(argv):
    """:returns: the parsed command line."""
    parser = argparse.ArgumentParser(prog='mgmt_localsite.greeters')
    parser.add_argument('--marker', required=True)
    parser.add_argument('--site', help='the kept site it serves (named only)')
    parser.add_argument('--masters', type=_addresses, default=[])
    parser.add_argument('--workers', type=_addresses, default=[])
    parser.add_argument('--nodeports', default='',
                        type=lambda t: [int(p) for p in _addresses(t)])
    return parser.parse_args(argv)


def argv(marker, masters, workers, nodeports, site=None):
    """The command line that serves *masters* and *workers* (after the
    Python interpreter); *site*, the kept site's directory, only named
    there, so that another ``site up`` on these addresses can say which
    site holds them (:func:`holder`)."""
    return ['-m', 'mgmt_localsite.greeters', '--marker', str(marker),
            '--masters', ','.join(masters), '--workers', ','.join(workers),
            '--nodeports', ','.join(str(p) for p in nodeports)] + (
                ['--site', str(site)] if site else [])


def holder(addresses):
    """The directory of the kept site whose API servers' stand-in
    serves one of *addresses* (``--site`` of its command line), or None.
    A stand-in in another network namespace holds other addresses of
    the same name (a test run in a namespace of its own beside another
    run); one whose namespace cannot be read counts.
    """
    wanted = set(addresses)
    own = procs.netns('self')
    for pid in procs.parents():
        words = [w for w in procs.cmdline(pid) if w]
        if 'mgmt_localsite.greeters' not in words or '--site' not in words:
            continue
        if procs.netns(pid) not in (None, own):
            continue
        opts = parse_args(words[words.index('mgmt_localsite.greeters') + 1:])
        if wanted & set(opts.masters + opts.workers):
            return opts.site
    return None


def main(args=None):
    """Serve until SIGTERM (or SIGINT); 1 when a port is taken."""
    opts = parse_args(sys.argv[1:] if args is None else args)
    try:
        backends = site_mod.Backends(opts.masters, opts.workers,
                                     opts.nodeports)
    except OSError as exc:
        sys.stderr.write('mgmt_localsite.greeters: %s\n' % exc)
        return 1
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stop.set())
    # Ready: the parent waits for this line before it goes on.
    sys.stdout.write('serving\n')
    sys.stdout.flush()
    while not stop.wait(1.0):
        pass
    backends.stop()
    return 0


if __name__ == '__main__':
    sys.exit(main())
