"""The hooks in both conductor runtimes of Tacker (issue 28).

* Tacker <= 15 monkey-patches its conductor with eventlet: a hook that
  blocks without yielding stops every other green thread, the AMQP
  heartbeat included.  :func:`test_an_eventlet_conductor_is_never_stalled`
  runs instantiate and a scale-out in a process patched by Tacker's own
  ``tacker.cmd.eventlet`` (:mod:`tests.integration.green_conductor`),
  while another process holds the driver's ``known_hosts`` lock for a
  while (another conductor worker of the host), and a green heartbeat
  measures the longest time it was kept from running.
* Tacker 16 runs hooks of several instances at once on threads of one
  process: :func:`test_two_instances_at_once_on_threads_do_not_cross`
  runs two clusters' hooks at the same time and checks that each
  converges and that records, ``known_hosts`` and log lines stay each
  instance's own.

Addresses: 127.0.41.0/24 only.
"""

import json
import logging
import os
import pathlib
import subprocess
import sys
import threading
import types

import pytest

pytest.importorskip('tacker')
pytest.importorskip('eventlet')

from mgmt_localsite import lab as lab_mod  # noqa: E402
from mgmt_localsite import site as site_mod  # noqa: E402

from mgmt_driver.model import core
from tests.functional import tacker_fakes  # noqa: E402

pytestmark = pytest.mark.skipif(site_mod.unavailable() is not None,
                                reason=str(site_mod.unavailable()))

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: The longest the hub may be kept from running (seconds), the time its
#: thread waited for a CPU aside (green_conductor.Heartbeat: what load
#: adds is not counted): a property of the driver's I/O (every wait
#: yields), not a speed claim.  A wait that does not yield lasts what it
#: waits for: the other worker's hold of the lock (HOLD, 2 s), a
#: playbook run (seconds); a hook's CPU between two yields is
#: milliseconds.  Half of HOLD tells the two apart on any machine.
MAX_STALL = 1.0
CONTEXT = types.SimpleNamespace(project_id='runtimes')


def _cluster(base):
    """Addresses of one cluster: Ansible, LB, 1 master, 2 workers (one
    at instantiate, one added by the scale-out: what both claims need;
    the three clusters run at once on a 2-core machine)."""
    return types.SimpleNamespace(
        ansible='127.0.41.%d' % base, lb='127.0.41.%d' % (base + 1),
        masters=['127.0.41.%d' % (base + 2)],
        workers=['127.0.41.%d' % (base + i) for i in (3, 4)])


@pytest.fixture(scope='module')
def green_conductor(tmp_path_factory):
    """The eventlet-patched process, started once: the threads test asks
    for it too, so that both run at the same time (CI time) on their own
    addresses.  Its output goes to files: a full pipe would block it."""
    c = _cluster(1)
    program = ('import tacker.cmd.eventlet\n'
               'from tests.integration import green_conductor\n'
               'green_conductor.main(%r, %r, %r, %r)\n'
               % (c.ansible, c.lb, c.masters, c.workers))
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS='ignore')
    where = tmp_path_factory.mktemp('green')
    with open(where / 'out', 'w') as out, open(where / 'err', 'w') as err:
        proc = subprocess.Popen([sys.executable, '-c', program], cwd=where,
                                env=env, stdout=out, stderr=err)
    try:
        yield proc, where
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


class Recorded(logging.Handler):
    """Every mgmt_driver log line, with the thread that logged it."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []

    def emit(self, record):
        self.lines.append((record.threadName, record.getMessage()))


class Instance:
    """One VNF instance on its own lab; all share one known_hosts file
    (and the records directory beside it), as in one conductor."""

    def __init__(self, lab, cluster, known_hosts):
        self.lab = lab
        self.cluster = cluster
        lab.conf.set_override('known_hosts_file', known_hosts,
                              group='kubespray_mgmt')
        self.vnf, self.registry, self.hooks = tacker_fakes.vnf_on_lab(
            lab, cluster.masters, cluster.workers[:-1], cluster.lb)

    def addresses(self):
        c = self.cluster
        return [c.ansible, c.lb] + c.masters + c.workers

    def lifecycle(self):
        self.hooks.instantiate_end(
            CONTEXT, self.vnf.instance,
            tacker_fakes.instantiate_request(self.vnf.additional_params),
            None, None)
        new = self.vnf.add_vm(core.ROLE_WORKER, self.cluster.workers[-1])
        self.hooks.scale_end(CONTEXT, self.vnf.instance,
                             tacker_fakes.scale_request('SCALE_OUT'), None,
                             None, scale_out_id_list=[new.stack_id])


def _run_at_once(instances):
    errors, barrier = {}, threading.Barrier(len(instances))

    def target(name, instance):
        try:
            barrier.wait(60)
            instance.lifecycle()
        except BaseException as exc:  # reported below, not lost
            errors[name] = exc
    threads = [threading.Thread(target=target, args=item, name=item[0])
               for item in instances.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(900)
    assert not errors, errors


def _host_keys(known_hosts):
    """``{known_hosts name: key text}``."""
    keys = {}
    for line in pathlib.Path(known_hosts).read_text().splitlines():
        if line.strip():
            name, kind, key = line.split()[:3]
            keys[name] = '%s %s' % (kind, key)
    return keys


def test_two_instances_at_once_on_threads_do_not_cross(tmp_path,
                                                       green_conductor):
    # green_conductor: the eventlet run goes on meanwhile (see there).
    known_hosts = str(tmp_path / 'conductor' / 'known_hosts')
    clusters = {'vnf-a': _cluster(31), 'vnf-b': _cluster(51)}
    labs = {name: lab_mod.Lab(c.ansible, c.lb, c.masters, c.workers)
            for name, c in clusters.items()}
    recorded = Recorded()
    logger = logging.getLogger('mgmt_driver')
    level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(recorded)
    try:
        for lab in labs.values():
            lab.start()
        instances = {name: Instance(labs[name], c, known_hosts)
                     for name, c in clusters.items()}
        _run_at_once(instances)
        problems = {name: labs[name].check(c.masters, c.workers)
                    for name, c in clusters.items()}
        ports = {name: lab.sshd.port for name, lab in labs.items()}
        host_keys = {name: pathlib.Path(lab.sshd.host_key + '.pub')
                     .read_text().split()[:2] for name, lab in labs.items()}
    finally:
        logger.removeHandler(recorded)
        logger.setLevel(level)
        for lab in labs.values():
            lab.stop()

    assert problems == {'vnf-a': [], 'vnf-b': []}
    for name, instance in instances.items():
        assert len(instance.registry.current) == 1, name
    records = pathlib.Path(known_hosts).parent / 'records'
    recorded_keys = _host_keys(known_hosts)
    for name, instance in instances.items():
        other = instances['vnf-b' if name == 'vnf-a' else 'vnf-a']
        theirs = set(other.addresses()) | {other.vnf.id}
        # Its record names its own hosts, none of the other's.
        record = (records / (instance.vnf.id + '.json')).read_text()
        assert instance.cluster.ansible in record
        assert not [x for x in theirs if '"%s"' % x in record], name
        # Each host is recorded with the key of its own site's sshd.
        for address in instance.addresses():
            entry = '[%s]:%d' % (address, ports[name])
            if entry in recorded_keys:
                assert recorded_keys[entry] == ' '.join(host_keys[name])
        assert '[%s]:%d' % (instance.cluster.ansible,
                            ports[name]) in recorded_keys
        # Its thread's log lines speak of its own cluster only.
        lines = [text for thread, text in recorded.lines if thread == name]
        assert any(instance.cluster.ansible in text for text in lines)
        crossed = [text for text in lines
                   if any(x in text for x in theirs)]
        assert crossed == [], crossed[:5]


def test_an_eventlet_conductor_is_never_stalled(green_conductor):
    proc, where = green_conductor
    returncode = proc.wait(900)
    stderr = (where / 'err').read_text()
    assert returncode == 0, stderr[-4000:]
    report = json.loads((where / 'out').read_text().strip().splitlines()[-1])
    assert report['problems'] == [] and report['vims'] == 1, report
    assert report['ticks'] > 100, report
    assert report['longest_stall'] < MAX_STALL, (
        'a hook kept every other green thread of the eventlet-patched '
        'conductor from running for %.2f s (limit %.1f s): some call '
        'blocks without yielding to the hub; the worst gaps [hub stall, '
        'raw gap, hook]: %s' % (report['longest_stall'], MAX_STALL,
                                report['worst']))
