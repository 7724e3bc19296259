"""A fleet of VNF instances on one Ansible server account, driven by one
process that plays a Tacker 16 conductor (issue 40 item 1).

:class:`Fleet` starts one real sshd for every VM of every instance and
the Ansible server, and per instance its own kubespray test double
(each checkout keeps one Kubernetes state and its own real etcd) and
its own LB with a real HAProxy.  Every instance names the same Ansible
server, the same account on it and the same workspace parent
(``transferring_inventory_path``); the driver's known_hosts, records,
locks and kubeconfigs are one store, as on a conductor.

:class:`Conductor` is Tacker's side: one
``ThreadPoolExecutor(64)`` (oslo.messaging's executor size in Tacker
16) running Tacker v1's hook calls through
:class:`mgmt_driver.adapters.v1.LcmHooks`, with a fake Heat per
instance (:mod:`tests.functional.tacker_fakes`) and one VIM registry.
Tacker's API refuses a second LCM operation of an instance while one
runs (409); the NFVO that sent it sends it again when the first is done:
:meth:`Conductor.submit` queues it per instance and hands it to the
executor then.  ``status`` probes are not LCM operations and go at once.

Each instance's hooks get an oslo.config object of their own: the
options are the conductor's, one set for the fleet, but for the paths of
the site's tools (the fake kubectl and HAProxy of *that* instance's
double; on a real fleet every VM has them at the same path).

:func:`burst` makes the bad day (a rack loss that makes a share of all
workers NotReady, with one automatic heal per instance it hits, then
scale-outs, upgrades, relabels, certificate renewals and ``status``
probes spread over a window); :class:`Sampler` samples the conductor's
RSS and threads, the ``ansible-playbook`` runs of the fleet's workspaces
(by the workspace path in their command lines: detached runs are no
descendants of sshd) and the SSH sessions to the Ansible server.
:func:`leaks` and :func:`divergence` say what is left and what is not
converged.  ``benchmarks/fleet.py`` prints the figures,
``tests/functional/test_fleet.py`` checks the invariants.

Only 127.0.0.0/8 is used.
"""

import collections
import concurrent.futures
import dataclasses
import fcntl
import os
import pathlib
import random
import re
import resource
import shutil
import subprocess
import sys
import threading
import time
import traceback
import types
import uuid

import mgmt_localsite as localsite
from mgmt_localsite import haproxy as haproxy_site
from mgmt_localsite import procs
from mgmt_localsite import site as site_mod

from mgmt_driver.adapters import status as status_mod
from mgmt_driver.adapters import v1
from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.model import nodes as nodes_mod
from mgmt_driver.model import params
from mgmt_driver.remote import ssh
from mgmt_driver.state import records as records_mod
from mgmt_driver.state import statestore
from tests.functional import tacker_fakes

#: Tacker 16's conductor: oslo.messaging's default executor_thread_pool_size.
CONDUCTOR_THREADS = 64
#: Workers per instance: one NotReady of three stays under the driver's
#: per-cluster heal guard (at most 40 % NotReady).
WORKERS = 3
#: Share of all workers a rack loss makes NotReady.
RACK_SHARE = 0.3
#: The version the upgrades go to (the double starts at 1.33.5).
UPGRADE_TO = '1.34.3'
#: LCM operations; ``status`` is a read.
KINDS = ('heal', 'scale_out', 'upgrade', 'relabel', 'renew', 'status')
#: The kinds that fill the burst after the heal storm, in turn.
OTHER_KINDS = ('status', 'scale_out', 'upgrade', 'relabel', 'renew')
#: Short node-controller timings: a stopped kubelet is NotReady in
#: about a second, not 40 s.
FAST_CONTROLLER = {'node_monitor_grace_period': 1.0,
                   'node_monitor_period': 0.0}
CONTEXT = types.SimpleNamespace(project_id='fleet')
#: Errors that are a clear refusal by the driver (the message says why).
REFUSALS = (exceptions.MgmtDriverOtherError,
            exceptions.MgmtDriverRemoteCommandError,
            exceptions.MgmtDriverRemoteCommandTimeOut,
            exceptions.MgmtDriverParamInvalid,
            exceptions.MgmtDriverNotFound)


def addresses(block, count, spares):
    """Loopback addresses of *count* instances from ``127.0.<block>.1``:
    ten a instance (LB, master, workers, spares), 25 instances a /24.

    :returns: ``(ansible, [SimpleNamespace(lb, master, workers, spare)])``.
    """
    if WORKERS + spares + 2 > 10:
        raise ValueError('at most %d spares' % (8 - WORKERS))
    out = []
    for i in range(count):
        prefix = '127.0.%d.' % (block + i // 25)
        first = 1 + 10 * (i % 25)
        taken = [prefix + str(first + k) for k in range(2 + WORKERS + spares)]
        out.append(types.SimpleNamespace(
            lb=taken[0], master=taken[1], workers=taken[2:2 + WORKERS],
            spare=taken[2 + WORKERS:]))
    return '127.0.%d.254' % block, out


class Instance:
    """One VNF instance of the fleet: its double, LB, hooks and Tacker
    view."""

    def __init__(self, fleet, index, where):
        self.index = index
        self.where = where
        root = fleet.root / ('site-%02d' % index)
        self.site = localsite.materialise(root, owner=fleet.sshd.user)
        ports = haproxy_site.free_ports(2, [where.lb] + where.workers)
        self.api_port, self.nodeports = ports[0], ports[1:]
        self.haproxy = site_mod.LbHaproxy(root / 'lb', where.lb,
                                          self.api_port, fleet.sshd.user)
        self.haproxy.start()
        self.conf = site_mod.make_conf(
            self.site, self.haproxy, fleet.known_hosts,
            key_dirs=[fleet.sshd.key_dir],
            kubeconfig_dir=str(fleet.root / 'kubeconfigs'),
            **fleet.options)
        additional = site_mod.cluster_params(
            fleet.sshd, self.site, fleet.ansible, self.api_port,
            self.nodeports)
        additional[core.ROOT]['ansible']['transferring_inventory_path'] = \
            str(fleet.inventories)
        self.vnf = tacker_fakes.TackerVnf(additional, [where.master],
                                          where.workers, where.lb)
        self.hooks = v1.LcmHooks(
            self.conf, pool_factory=lambda: ssh.ConnectionPool(
                ssh.SSHSettings.from_conf(self.conf)),
            heat_factory=lambda *args: self.vnf.heat,
            vim_registry=fleet.registry,
            package_dir_of=lambda context, instance: None)
        self.spare = list(where.spare)
        self.relabels = 0

    @property
    def id(self):
        return self.vnf.id

    def call(self, hook, request=None, **kwargs):
        """Tacker v1's call of *hook*."""
        getattr(self.hooks, hook)(CONTEXT, self.vnf.instance, request,
                                  None, None, **kwargs)

    def name(self, vm):
        return site_mod.name_of(vm.role, vm.address)

    def stop(self):
        self.site.stop_etcd()
        self.haproxy.stop()


#: The API servers' stand-ins (greeting servers on every master's 6443,
#: what the fake kubectl's ``get --raw /readyz --server`` and the
#: upgrade gates look for), in a process of their own so that their
#: threads are not counted as the conductor's.  It serves until its
#: standard input closes.
_BACKENDS = """
import sys
from mgmt_localsite import site
backends = site.Backends(sys.argv[1:], [], [])
print('ready', flush=True)
sys.stdin.read()
backends.stop()
"""


def _start_api_backends(masters):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, '-c', _BACKENDS] + masters,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env=env, text=True)
    if proc.stdout.readline().strip() != 'ready':
        proc.wait(10)
        raise RuntimeError('the API backends did not start (exit %s)'
                           % proc.returncode)
    return proc


class Fleet:
    """The started site of *count* instances (a context manager).

    :param block: the first ``127.0.<block>.0/24`` of its addresses.
    :param spares: spare worker addresses per instance (scale-outs).
    :param slots: ``max_parallel_playbooks_per_server`` (the driver's
        default, 4, unless told).
    """

    def __init__(self, block, count, spares=1, slots=4, forks=20):
        self.ansible, self.places = addresses(block, count, spares)
        self.options = {'max_parallel_playbooks_per_server': slots,
                        'ansible_forks': forks}
        self.count = count
        self.sshd = self.backends = None
        self.instances = []
        self.registry = tacker_fakes.FakeRegistry()

    def __enter__(self):
        reason = site_mod.unavailable()
        if reason:
            raise RuntimeError(reason)
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info):
        self.stop()

    def _start(self):
        every = [self.ansible] + [a for p in self.places for a in (
            [p.lb, p.master] + p.workers + p.spare)]
        self.sshd = site_mod.SiteSshd(every, self.ansible)
        self.sshd.start()
        self.root = pathlib.Path(self.sshd.scratch) / (
            'fleet-' + uuid.uuid4().hex[:8])
        # root's (as root): the workspace parent below must lie in
        # directories no other account can write
        self.root.mkdir(mode=0o755)
        self.inventories = self.root / 'inventories'
        self.inventories.mkdir(mode=0o700)
        # the Ansible account's (root's as root): a workspace parent must
        # not belong to another account
        site_mod.chown(self.inventories, self.sshd.ansible_user)
        self.known_hosts = self.root / 'conductor' / 'known_hosts'
        self.known_hosts.parent.mkdir(mode=0o700)
        self.backends = _start_api_backends([p.master for p in self.places])
        for index, where in enumerate(self.places):
            self.instances.append(Instance(self, index, where))

    def stop(self):
        for instance in self.instances:
            instance.stop()
        if self.backends is not None:
            self.backends.stdin.close()
            try:
                self.backends.wait(10)
            except subprocess.TimeoutExpired:
                self.backends.kill()
                self.backends.wait()
            self.backends = None
        if self.sshd is not None:
            self.sshd.cleanup()

    @property
    def records_dir(self):
        return self.known_hosts.parent / 'records'

    def sshd_pids(self):
        return [p.pid for p in self.sshd._procs]


# ------------------------------------------------------------ conductor --

@dataclasses.dataclass
class Op:
    """One operation of the burst and what became of it."""

    kind: str
    instance: Instance
    arrival: float  # seconds after the burst's start
    args: dict = dataclasses.field(default_factory=dict)
    submitted: float = None  # monotonic: it reached Tacker
    started: float = None    # a conductor worker began its hooks
    ended: float = None
    outcome: str = None      # 'done', 'refused' or 'failed'
    error: str = None

    @property
    def latency(self):
        return self.ended - self.submitted

    @property
    def wait(self):
        return self.started - self.submitted


class Conductor:
    """Tacker's conductor: an executor of :data:`CONDUCTOR_THREADS`
    workers; LCM operations of one instance one at a time (see the
    module docstring)."""

    def __init__(self, threads=CONDUCTOR_THREADS, runners=None):
        #: ``{kind: function(op)}``: how an operation of each kind runs
        #: (default :data:`RUNNERS`, Tacker v1's hook calls).
        self.runners = RUNNERS if runners is None else runners
        self.executor = concurrent.futures.ThreadPoolExecutor(
            threads, thread_name_prefix='conductor')
        self._lock = threading.Lock()
        self._busy = set()
        self._waiting = collections.defaultdict(collections.deque)
        self.ops = []
        self._all_done = threading.Condition(self._lock)
        self._open = 0

    def submit(self, op):
        """*op* reaches Tacker now."""
        op.submitted = time.monotonic()
        with self._lock:
            self.ops.append(op)
            self._open += 1
            key = op.instance.id
            if op.kind != 'status' and key in self._busy:
                self._waiting[key].append(op)
                return
            if op.kind != 'status':
                self._busy.add(key)
        self.executor.submit(self._run, op)

    def _run(self, op):
        op.started = time.monotonic()
        try:
            self.runners[op.kind](op)
            op.outcome = 'done'
        except REFUSALS as exc:
            op.outcome, op.error = 'refused', '%s: %s' % (
                type(exc).__name__, exc)
        except Exception as exc:  # kept for the report, never lost
            op.outcome, op.error = 'failed', '%s: %s\n%s' % (
                type(exc).__name__, exc, traceback.format_exc()[-2000:])
        op.ended = time.monotonic()
        self._finished(op)

    def _finished(self, op):
        follow = None
        with self._lock:
            key = op.instance.id
            if op.kind != 'status':
                if self._waiting[key]:
                    follow = self._waiting[key].popleft()
                else:
                    self._busy.discard(key)
            self._open -= 1
            self._all_done.notify_all()
        if follow is not None:
            self.executor.submit(self._run, follow)

    def wait(self, timeout):
        """Wait until every submitted operation ended.

        :returns: whether they all did within *timeout* seconds.
        """
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._open:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._all_done.wait(min(left, 1.0))
        return True

    def run_all(self, ops, timeout):
        """Submit *ops* now and wait for them (instantiate, terminate)."""
        for op in ops:
            self.submit(op)
        return self.wait(timeout)

    def shutdown(self):
        self.executor.shutdown(wait=True)


# ------------------------------------------------------------ operations --

def _instantiate(op):
    inst = op.instance
    inst.call('instantiate_end', tacker_fakes.instantiate_request(
        inst.vnf.additional_params))
    inst.site.settings(**FAST_CONTROLLER)


def _heal(op):
    """Tacker's automatic heal of the VNFCs whose node is NotReady (its
    Prometheus plugin gathers an instance's alerts into one request)."""
    inst = op.instance
    vms = [inst.vnf.vm(a) for a in op.args['addresses']]
    request = tacker_fakes.heal_request(vms, 'auto-heal: node NotReady')
    inst.call('heal_start', request)
    for vm in vms:
        inst.vnf.recreate_vm(vm)
    inst.call('heal_end', request)


def _scale_out(op):
    inst = op.instance
    vm = inst.vnf.add_vm(core.ROLE_WORKER, inst.spare.pop(0))
    inst.call('scale_end', tacker_fakes.scale_request('SCALE_OUT'),
              scale_out_id_list=[vm.stack_id])


def _patch(op, **metadata):
    """Tacker v1's PATCH: the metadata is stored, then
    modify_information_end runs without the request."""
    op.instance.vnf.metadata.update(metadata)
    op.instance.call('modify_information_end')


def patch_metadata(op):
    """The PATCH metadata of an upgrade, relabel or renewal *op*."""
    if op.kind == 'upgrade':
        return {'kube_version': UPGRADE_TO}
    if op.kind == 'relabel':
        inst = op.instance
        inst.relabels += 1
        return {'relabel_nodes': op.args['node'],
                'relabel_labels': 'fleet.example.com/burst=r%d'
                                  % inst.relabels}
    return {'renew_certificates': 'fleet-%s' % op.args['tag']}


def _modify(op):
    _patch(op, **patch_metadata(op))


def _status(op):
    """``kubespray-mgmt status`` of the instance, read-only."""
    inst = op.instance
    spec = params.parse_params(inst.vnf.additional_params)
    topology = {'masters': [{'ssh_ip': a} for a in
                            inst.vnf.addresses(core.ROLE_MASTER)],
                'workers': [{'ssh_ip': a} for a in
                            inst.vnf.addresses(core.ROLE_WORKER)],
                'external_lb': {'ssh_ip': inst.where.lb}}
    cluster = nodes_mod.build_nodes(spec, nodes_mod.load_topology(topology))
    with ssh.ConnectionPool(status_mod.read_only_settings(inst.conf)) as pool:
        report = status_mod.collect(spec, cluster, inst.id, pool, inst.conf)
    failed = [name for name, section in report.items()
              if isinstance(section, dict) and section.get('error')]
    op.args['failed_sections'] = failed


def _terminate(op):
    op.instance.call('terminate_start')
    op.instance.call('terminate_end')


RUNNERS = {'instantiate': _instantiate, 'heal': _heal,
           'scale_out': _scale_out, 'upgrade': _modify,
           'relabel': _modify, 'renew': _modify, 'status': _status,
           'terminate': _terminate}


# ----------------------------------------------------------------- burst --

def rack_loss(fleet, share=RACK_SHARE):
    """Stop the kubelets of *share* of all workers, at most one per
    instance first (a rack holds the same slot of every cluster), and
    wait until the node controller marks them NotReady.

    :returns: ``{instance: [addresses]}``.
    """
    total = sum(len(i.vnf.addresses(core.ROLE_WORKER))
                for i in fleet.instances)
    lost = round(total * share)
    hit = collections.defaultdict(list)
    for slot in range(WORKERS):
        for inst in fleet.instances:
            if lost and slot < len(inst.where.workers):
                hit[inst].append(inst.where.workers[slot])
                lost -= 1
    for inst, lost_here in hit.items():
        for address in lost_here:
            inst.site.stop_kubelet(site_mod.name_of(core.ROLE_WORKER,
                                                    address))
    for inst, lost_here in hit.items():
        _wait_not_ready(inst, lost_here)
    return dict(hit)


def _wait_not_ready(inst, lost, timeout=60.0):
    names = {site_mod.name_of(core.ROLE_WORKER, a) for a in lost}
    deadline = time.monotonic() + timeout
    while True:
        # every kubectl call runs the double's node controller first
        inst.site.tool('kubectl', 'get', 'nodes', check=False)
        ready = {n for n, node in inst.site.nodes().items()
                 if node['ready'] and node.get('condition', 'True') == 'True'}
        if not names & ready:
            return
        if time.monotonic() > deadline:
            raise RuntimeError('%s stayed Ready' % sorted(names & ready))
        time.sleep(0.2)


def burst(fleet, lost, count, window, seed=40):
    """The bad day's operations, by arrival (seconds after the start).

    The automatic heals of the instances the rack loss hit arrive in the
    first tenth of *window* (every alert fires at once); the rest, the
    kinds of :data:`OTHER_KINDS` in turn on instances picked at random,
    spread over the whole window.
    """
    rng = random.Random(seed)
    ops = [Op('heal', inst, rng.uniform(0, window / 10),
              {'addresses': list(addrs)}) for inst, addrs in lost.items()]
    scale_outs = collections.Counter()
    index = 0
    while len(ops) < count:
        kind = OTHER_KINDS[index % len(OTHER_KINDS)]
        index += 1
        inst = rng.choice(fleet.instances)
        if kind == 'scale_out':
            if scale_outs[inst] >= len(inst.spare):
                continue
            scale_outs[inst] += 1
        args = {'tag': index}
        if kind == 'relabel':
            # a worker the rack loss left alone
            kept = [a for a in inst.where.workers if a not in lost.get(
                inst, ())]
            args['node'] = site_mod.name_of(core.ROLE_WORKER, kept[-1])
        ops.append(Op(kind, inst, rng.uniform(0, window), args))
    return sorted(ops, key=lambda op: op.arrival)


def play(conductor, ops):
    """Submit each of *ops* at its arrival time (from now)."""
    start = time.monotonic()
    for op in ops:
        delay = start + op.arrival - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        conductor.submit(op)
    return start


# --------------------------------------------------------------- sampling --

def _rss_kib():
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    return 0


def _established_to(address, port):
    """TCP connections established to *address*:*port* (``/proc/net/tcp``,
    addresses in hex, little-endian)."""
    want = '%s:%04X' % (''.join('%02X' % int(b) for b in reversed(
        address.split('.'))), port)
    count = 0
    with open('/proc/net/tcp') as f:
        next(f)
        for line in f:
            fields = line.split()
            if fields[1] == want and fields[3] == '01':
                count += 1
    return count


def playbook_runs(workspaces):
    """``ansible-playbook`` runs of the workspaces under *workspaces* (a
    path): the processes of that name whose command line names a path
    below it (the inventory, ``-i``) and whose parent is not one (Ansible
    forks workers).

    By command line, not by PID below the site's sshd: a detached run
    (:mod:`mgmt_driver.remote.detached`) is started with ``setsid`` by a
    shell that exits, so it is no descendant of its SSH session.  The
    path holds the fleet's random root: another test's runs are never
    counted.  The ``ansible-playbook --version`` each hook's claim asks
    (no playbook, no slot) names no workspace.
    """
    where = str(workspaces).rstrip('/') + '/'
    parents = procs.parents()
    runs = 0
    for pid in parents:
        words = procs.cmdline(pid)
        if _is_playbook(pid, words) and '--version' not in words and \
                any(w.startswith(where) for w in words) and \
                not _is_playbook(parents.get(pid)):
            runs += 1
    return runs


def _is_playbook(pid, words=None):
    if pid is None:
        return False
    words = procs.cmdline(pid) if words is None else words
    return any(os.path.basename(w) == 'ansible-playbook' for w in words[:2])


class Sampler:
    """Samples, every *period* seconds, the conductor's RSS and threads
    and, on the site, the ``ansible-playbook`` runs and the SSH sessions
    to the Ansible server; keeps the peaks."""

    #: The benchmark's period: its peaks are figures it reports.
    PERIOD = 0.25
    #: A test's: it only asks for a peak of runs lasting seconds, and
    #: each sample reads the whole process table (~12 ms of CPU with
    #: 300 processes: 5 % of a core at the benchmark's period).
    TEST_PERIOD = 1.0

    def __init__(self, fleet, period=PERIOD):
        self.fleet = fleet
        self.period = period
        self.peak = dict.fromkeys(('rss_kib', 'threads', 'playbooks',
                                   'ansible_ssh'), 0)
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name='sampler')

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        self._stop.set()
        self._thread.join(10)

    def reset(self):
        """Start the peaks again (the burst's own, after instantiate)."""
        self.peak = dict.fromkeys(self.peak, 0)

    def _loop(self):
        while not self._stop.wait(self.period):
            now = {'rss_kib': _rss_kib(), 'threads': threading.active_count(),
                   'playbooks': playbook_runs(self.fleet.inventories),
                   'ansible_ssh': _established_to(self.fleet.ansible,
                                                  self.fleet.sshd.port)}
            self.samples += 1
            for key, value in now.items():
                self.peak[key] = max(self.peak[key], value)

    @staticmethod
    def max_rss_kib():
        """The process's peak RSS as the kernel counts it."""
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


# ------------------------------------------------------------ end checks --

#: A backend line of the driver's HAProxy configuration (masters with
#: the API port, workers without a port).
_SERVER_LINE = re.compile(r'^\s*server\s+\S+\s+(127\.[0-9]+\.[0-9]+\.[0-9]+)',
                          re.M)


def divergence(inst):
    """What differs, on *inst*'s double and LB, from the instance Tacker
    knows: nodes, roles, readiness, one kubelet version, the LB's
    backends.

    :returns: a list of problems (empty: converged).
    """
    vnf = inst.vnf
    want = {site_mod.name_of(vm.role, vm.address): vm.role
            for vm in vnf.vms if vm.role != core.ROLE_EXTERNAL_LB}
    inst.site.tool('kubectl', 'get', 'nodes', check=False)
    nodes = inst.site.nodes()
    problems = []
    if sorted(nodes) != sorted(want):
        problems.append('nodes %s, Tacker has %s' % (sorted(nodes),
                                                     sorted(want)))
    not_ready = sorted(n for n, node in nodes.items() if not (
        node['ready'] and node.get('condition', 'True') == 'True'))
    if not_ready:
        problems.append('NotReady: %s' % ', '.join(not_ready))
    versions = {node['kubelet_version'] for node in nodes.values()}
    if len(versions) > 1:
        problems.append('kubelet versions %s' % sorted(versions))
    served = set(_SERVER_LINE.findall(inst.haproxy.config.read_text()))
    addresses = {vm.address for vm in vnf.vms
                 if vm.role != core.ROLE_EXTERNAL_LB}
    if served != addresses:
        problems.append('HAProxy backends %s, nodes %s' % (
            sorted(served), sorted(addresses)))
    return ['%s: %s' % (inst.id[:8], p) for p in problems]


def _held(path):
    """Whether some process holds an flock on *path*."""
    with open(path, 'rb') as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
    return False


def leaks(fleet, settle=15.0):
    """What the terminated fleet left: VIMs, records, workspaces, held
    instance locks and playbook slots, processes below sshd.

    :param settle: seconds to let SSH sessions end.
    :returns: a list of problems (empty: nothing leaked).
    """
    problems = []
    if fleet.registry.current:
        problems.append('VIMs left: %s' % sorted(fleet.registry.current))
    store = records_mod.RecordStore.from_conf(fleet.instances[0].conf)
    for inst in fleet.instances:
        if store.state(inst.id) != records_mod.RELEASED:
            problems.append('record of %s: %s, not released' % (
                inst.id, store.state(inst.id)))
    left = sorted(os.listdir(fleet.inventories))
    if left:
        problems.append('workspaces left: %s' % left)
    for inst in fleet.instances:
        path = statestore.lock_path(store, inst.id)
        if os.path.exists(path) and _held(path):
            problems.append('instance lock held: %s' % path)
    slots = fleet.sshd.home(fleet.sshd.ansible_user) / '.kubespray-mgmt' / \
        'playbook-slots'
    for path in sorted(slots.glob('*')) if slots.is_dir() else ():
        if path.is_file() and _held(path):
            problems.append('playbook slot held: %s' % path.name)
    masters = ssh_masters(fleet)
    problems += _processes_left(fleet, settle, len(masters))
    return problems


def ssh_masters(fleet):
    """The SSH master connections (``ControlPersist``) that Ansible runs
    of the fleet's workspaces left on the Ansible server: ``ssh``
    processes whose control socket is in a workspace (or in the
    account's ``~/.ansible/cp``, where a long workspace path puts it).

    :returns: their PIDs.
    """
    where = (str(fleet.inventories),
             str(fleet.sshd.home(fleet.sshd.ansible_user) / '.ansible'))
    found = []
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            line = ' '.join(procs.cmdline(int(entry)))
            if line.startswith('ssh') and any(w in line for w in where):
                found.append(int(entry))
    return found


def _session_processes(pids):
    return [p for p in pids if ' '.join(procs.cmdline(p)).startswith(
        'sshd: ')]


def _processes_left(fleet, settle, masters):
    """Processes below the site's sshd after *settle* seconds, but for
    the node-side sessions (two processes each) of *masters* SSH
    master connections, which :func:`ssh_masters` reports."""
    deadline = time.monotonic() + settle
    while True:
        below = procs.descendants(fleet.sshd_pids())
        others = [p for p in below if p not in _session_processes(below)]
        if len(below) <= 2 * masters and not others:
            return []
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    return ['processes left below sshd (%d SSH masters explain %d): %s' % (
        masters, 2 * masters, '; '.join('%d %s' % (
            pid, ' '.join(procs.cmdline(pid)).strip()[:120])
            for pid in below))]


# ------------------------------------------------------------------ a day --

#: Playbook runs (or reads as long) an operation of each kind makes at
#: most, for its bound (:func:`bound`).
PLAYBOOKS = {'heal': 2, 'scale_out': 1, 'upgrade': 2, 'relabel': 1,
             'renew': 2, 'status': 1}


def bound(op):
    """The longest *op* may take once a conductor worker runs it: the
    driver's own deadlines for the playbooks its kind runs (each may
    first wait as long for a slot), plus a drain.  A liveness bound (an
    operation that passes it hangs), not a speed target."""
    options = op.instance.conf.kubespray_mgmt
    nodes = len(op.instance.vnf.vms)
    playbook = options.playbook_timeout_base + \
        options.playbook_timeout_per_node * nodes
    return PLAYBOOKS[op.kind] * 2 * playbook + options.drain_timeout + 60


@dataclasses.dataclass
class Day:
    """What :func:`bad_day` measured and found."""

    instantiate_s: float
    ops: list
    burst_s: float
    peak: dict
    max_rss_kib: int
    lost: dict
    all_ended: bool
    divergence: list
    terminate_problems: list
    leaks: list
    #: SSH masters Ansible left after terminate (:func:`ssh_masters`).
    masters_left: int


def _ended_or_raise(conductor, ops, timeout, what):
    if not conductor.run_all(ops, timeout):
        raise RuntimeError('%s did not end within %d s' % (what, timeout))
    failed = [op for op in ops if op.outcome != 'done']
    if failed:
        raise RuntimeError('%s failed: %s' % (what, '; '.join(
            '%s: %s' % (op.instance.id[:8], op.error) for op in failed)))


def bad_day(fleet, count, window, timeout, conductor=None,
            sample_period=Sampler.PERIOD):
    """Instantiate every instance, lose a rack, play a burst of *count*
    operations over *window* seconds, wait at most *timeout* seconds for
    them, check convergence, terminate every instance and look for
    leaks, all on one :class:`Conductor`.

    :param conductor: what runs the operations instead (an object with
        :class:`Conductor`'s ``submit``, ``wait``, ``run_all`` and
        ``shutdown``), e.g. several conductors behind one router.
    :param sample_period: the :class:`Sampler`'s period, in seconds.
    """
    conductor = conductor or Conductor()
    try:
        with Sampler(fleet, sample_period) as sampler:
            started = time.monotonic()
            _ended_or_raise(conductor, [Op('instantiate', inst, 0) for inst
                                        in fleet.instances], timeout,
                            'instantiate')
            instantiate_s = time.monotonic() - started
            lost = rack_loss(fleet)
            ops = burst(fleet, lost, count, window)
            sampler.reset()
            start = play(conductor, ops)
            all_ended = conductor.wait(timeout)
            burst_s = time.monotonic() - start
            peak = dict(sampler.peak)
        diverged = [p for inst in fleet.instances for p in divergence(inst)]
        terminate = [Op('terminate', inst, 0) for inst in fleet.instances]
        conductor.run_all(terminate, timeout)
        terminate_problems = ['%s: %s' % (op.instance.id[:8], op.error or
                                          'did not end')
                              for op in terminate if op.outcome != 'done']
    finally:
        conductor.shutdown()
    left = leaks(fleet)
    return Day(instantiate_s, ops, burst_s, peak, Sampler.max_rss_kib(),
               lost, all_ended, diverged, terminate_problems, left,
               len(ssh_masters(fleet)))


def unbounded(day):
    """The operations of *day* that did not end done or refused with a
    message, or ran past their :func:`bound`.

    :returns: a list of problems (empty: all fine).
    """
    problems = []
    for op in day.ops:
        if op.outcome not in ('done', 'refused'):
            problems.append('%s %s: %s' % (op.kind, op.outcome, op.error))
        elif op.outcome == 'refused' and not op.error.split(
                ': ', 1)[-1].strip():
            problems.append('%s refused without a reason' % op.kind)
        elif op.ended - op.started > bound(op):
            problems.append('%s ran %.0f s, past its bound' % (
                op.kind, op.ended - op.started))
    return problems


def starved(ops):
    """The operations of *ops* that waited longer than the bounds of
    the operations of their instance that arrived before them, plus
    their own.

    :returns: a list of problems (empty: no instance starved).
    """
    by_instance = collections.defaultdict(list)
    for op in sorted(ops, key=lambda o: o.submitted):
        by_instance[op.instance].append(op)
    problems = []
    for mine in by_instance.values():
        ahead = 0.0
        for op in mine:
            if op.started is None or op.wait > ahead + bound(op):
                problems.append('%s of %s waited %s (%.0f s ahead)' % (
                    op.kind, op.instance.id[:8], op.started and op.wait,
                    ahead))
            if op.kind != 'status':
                ahead += bound(op)
    return problems


def remove(fleet):
    """Remove the fleet's files (after :meth:`Fleet.stop`)."""
    shutil.rmtree(fleet.root, ignore_errors=True)
