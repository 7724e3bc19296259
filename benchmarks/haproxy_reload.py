"""How long from a re-rendered HAProxy config to a new backend being served.

Runs on loopback only, with the real ``haproxy`` and the test site of
``localsite-dist/mgmt_localsite/haproxy.py``: three workers behind HAProxy,
then a fourth worker is added to the layout and the configuration reloaded. The
clock starts just before the reload and stops when a new connection through a
NodePort is first answered by the new worker (connections are opened back to
back, round robin over four workers).

Two reload styles are timed:

* ``sf``: ``haproxy -sf <old pid>`` started by hand (render, write, start);
* ``apply``: :func:`mgmt_driver.remote.loadbalancer.apply_config` with a local
  connection (render, read, write ``.new``, ``haproxy -c``, backup, rename)
  reloading a master-worker HAProxy with ``kill -USR2``, which is what
  ``systemctl reload haproxy`` does on Debian and Ubuntu.

Usage: python benchmarks/haproxy_reload.py [--runs N]
"""

import argparse
import pathlib
import statistics
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from mgmt_localsite import haproxy as site  # noqa: E402

from mgmt_driver.remote import loadbalancer as lb  # noqa: E402

#: Where CI runs ``--quick`` (tests/functional/test_benchmarks_quick.py).
QUICK_LANE = 'functional'

LB = '127.0.0.2'
CONTROL_PLANE = [('cp-1', '127.0.0.11')]
WORKERS = [('worker-%d' % i, '127.0.0.%d' % (20 + i)) for i in (1, 2, 3)]
NEW_WORKER = ('worker-4', '127.0.0.24')


def layout(ports, workers):
    return lb.LbLayout(
        control_plane=CONTROL_PLANE, workers=workers,
        api_port=ports['api'], apiserver_port=ports['apiserver'],
        nodeport_range=(ports['nodeports'][0], ports['nodeports'][-1]),
        bind_addresses=[LB], worker_check_port=ports['nodeports'][0],
        user=None, group=None, chroot=None, maxconn=500)


def first_hit(port, name, timeout=30.0):
    """Seconds of polling until a connection reaches backend *name*."""
    site.wait_for(lambda: (site.reachable(LB, port) or ('',))[0] == name,
                  timeout, interval=0, what='%s served' % name)


def run_once(style, ports, workdir):
    config = pathlib.Path(workdir) / 'haproxy.cfg'
    config.write_text(lb.render_haproxy_config(layout(ports, WORKERS)))
    procs = site.HAProxyProcesses(workdir)
    nodeport = ports['nodeports'][1]
    try:
        extra = ('-W',) if style == 'apply' else ()
        old = procs.start(config, *extra)
        site.wait_for(lambda: site.reachable(LB, nodeport), 15,
                      what='HAProxy serving')
        started = time.monotonic()
        rendered = lb.render_haproxy_config(
            layout(ports, WORKERS + [NEW_WORKER]))
        if style == 'apply':
            settings = lb.ApplySettings(
                config_path=str(config),
                check_command=(site.HAPROXY, '-c', '-f'),
                reload_command=('kill', '-USR2', str(old.pid)))
            lb.apply_config(site.LocalConnection(), rendered, settings)
        else:
            config.write_text(rendered)
            procs.start(config, '-sf', str(old.pid))
        reloaded = time.monotonic()
        first_hit(nodeport, NEW_WORKER[0])
        served = time.monotonic()
        return reloaded - started, served - started
    finally:
        procs.stop_all()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--runs', type=int, default=10)
    parser.add_argument('--quick', action='store_true',
                        help='seconds, tiny sizes: what CI runs (no '
                             'figure is checked)')
    args = parser.parse_args()
    if args.quick:
        args.runs = 1
    reason = site.available()
    if reason:
        sys.exit(reason)
    ports = {
        'apiserver': site.free_ports(1, ['127.0.0.11'])[0],
        'api': site.free_ports(1, [LB])[0],
        'nodeports': site.free_ports(
            3, [LB] + [a for _, a in WORKERS + [NEW_WORKER]]),
    }
    backends = site.Backends()
    try:
        backends.add(*CONTROL_PLANE[0], [ports['apiserver']])
        for name, address in WORKERS + [NEW_WORKER]:
            backends.add(name, address, ports['nodeports'])
        for style in ('sf', 'apply'):
            report(style, [run_once(style, ports, tempfile.mkdtemp(
                prefix='kmgmt-haproxy-bench-')) for _ in range(args.runs)])
    finally:
        backends.stop()


def report(style, samples):
    for index, label in ((0, 'reload step'), (1, 'until new worker served')):
        values = sorted(s[index] * 1000 for s in samples)
        print('%-5s %-24s runs=%d median=%.1f ms min=%.1f ms max=%.1f ms'
              % (style, label, len(values), statistics.median(values),
                 values[0], values[-1]))


if __name__ == '__main__':
    main()
