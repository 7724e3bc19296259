"""``kubespray-mgmt demo``: the whole lifecycle on the local site.

Starts a :class:`~mgmt_localsite.lab.Lab` (real sshd, real
ansible-playbook running the kubespray test double, fake kubectl, real
HAProxy, all on 127.0.0.x), then runs the operations of
``kubespray-mgmt run`` one after the other: instantiate, scale out by
two workers, scale in by one, heal a worker, heal the first master (with
three masters), with ``--upgrade`` a rolling upgrade by one minor
release, and terminate.  Every step prints the driver's progress
(its steps, the plays and tasks of each playbook) with timings, then
checks the Kubernetes nodes and what HAProxy serves against the VMs the
step should have left.  A summary table ends the run; the site is
stopped and its files removed whatever happens.
"""

import dataclasses
import sys
import time

import yaml

from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.operations import lcm
from mgmt_driver.operations import upgrade as upgrade_mod
from mgmt_localsite import lab as lab_mod
from mgmt_localsite import site as site_mod

ANSIBLE = '127.0.0.210'
LB = '127.0.0.211'
MASTERS = ['127.0.0.%d' % i for i in range(221, 224)]
WORKERS = ['127.0.0.%d' % i for i in range(231, 255)]
INSTANCE_ID = 'demo'
MAX_WORKERS = len(WORKERS) - 2  # scale-out adds two
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C
INTERRUPTED = 'interrupted'
UPGRADE_TITLE = 'upgrade a minor release'
#: The double's list of supported versions, in the checkout (kubespray's
#: v2.28+ place and shape).
CHECKSUMS = 'roles/kubespray_defaults/vars/main/checksums.yml'


@dataclasses.dataclass
class Step:
    """One operation of the demo and the VMs it leaves."""

    title: str
    operation: str          # a key of operations.COMMANDS
    masters: list           # the VMs the operation sees
    workers: list
    names: list             # --nodes
    after_masters: list     # what Kubernetes must hold afterwards
    after_workers: list


@dataclasses.dataclass
class Outcome:
    step: Step
    seconds: float = 0.0
    playbook_seconds: float = 0.0
    playbooks: list = dataclasses.field(default_factory=list)
    connections: int = 0
    max_per_host: int = 0
    commands: int = 0
    problems: list = dataclasses.field(default_factory=list)
    error: str = ''

    @property
    def ok(self):
        return not (self.problems or self.error)


def _worker_name(address):
    return site_mod.name_of(core.ROLE_WORKER, address)


def plan_steps(masters, workers, upgrade=False):
    """The lifecycle the demo runs, for *masters* and *workers* VMs.

    :param masters: 1 or 3 master addresses.
    :param workers: the initial workers followed by two spare addresses
        that scale-out adds.
    :param upgrade: upgrade the cluster by one minor release before
        terminating it (the version is chosen when the step runs:
        :func:`next_minor`).
    """
    first, added = workers[:-2], workers[-2:]
    grown = first + added
    gone, healed = grown[0], grown[1]
    shrunk = grown[1:]
    steps = [
        Step('instantiate', 'instantiate', masters, first, [],
             masters, first),
        Step('scale out by 2', 'scale-out', masters, grown,
             [_worker_name(a) for a in added], masters, grown),
        Step('scale in by 1', 'scale-in', masters, grown,
             [_worker_name(gone)], masters, shrunk),
        Step('heal a worker', 'heal', masters, shrunk,
             [_worker_name(healed)], masters, shrunk),
    ]
    if len(masters) > 1:
        steps.append(Step('heal the first master', 'heal', masters, shrunk,
                          [site_mod.name_of(core.ROLE_MASTER,
                                            masters[0])],
                          masters, shrunk))
    if upgrade:
        steps.append(Step(UPGRADE_TITLE, 'upgrade', masters, shrunk, [],
                          masters, shrunk))
    steps.append(Step('terminate', 'terminate', masters, shrunk, [],
                      [], []))
    return steps


def next_minor(installed, supported):
    """The newest of *supported* one minor release above *installed*.

    :param installed: ``(major, minor, patch)`` the cluster runs.
    :param supported: the versions the checkout lists (tuples).
    :raises MgmtDriverOtherError: the checkout lists none.
    """
    above = [v for v in supported or ()
             if v[:2] == (installed[0], installed[1] + 1)]
    if not above:
        raise exceptions.MgmtDriverOtherError(
            error_message='the kubespray checkout lists no %d.%d.x '
                          'version to upgrade %s to' % (
                              installed[0], installed[1] + 1,
                              upgrade_mod.version_text(installed)))
    return max(above)


def _installed_version(lab):
    """The oldest kubelet version of the site's Kubernetes nodes."""
    return min(upgrade_mod.parse_version(node['kubelet_version'],
                                         'kubelet_version')
               for node in lab.site.nodes().values())


def _supported_versions(lab):
    with open(lab.site.checkout / CHECKSUMS) as f:
        listed = yaml.safe_load(f)['kubelet_checksums']['amd64']
    return upgrade_mod.parse_supported(str(v) for v in listed)


def _version_problems(lab, target):
    """The nodes not running *target* after an upgrade."""
    wanted = 'v' + upgrade_mod.version_text(target)
    return ['%s runs kubelet %s, expected %s' % (
        name, node['kubelet_version'], wanted)
        for name, node in sorted(lab.site.nodes().items())
        if node['kubelet_version'] != wanted]


def _result(outcome):
    if outcome.ok:
        return 'ok'
    return 'interrupted' if outcome.error == INTERRUPTED else 'FAILED'


class Demo:
    """Runs :func:`plan_steps` on a fresh local site.

    :param masters: 1 or 3.
    :param workers: initial workers, 1 to :data:`MAX_WORKERS`.
    :param out: where the progress and the summary go.
    :param tasks: print every task line, not only plays and steps.
    :param upgrade: add the rolling upgrade step (before terminate).
    """

    def __init__(self, masters=1, workers=2, out=None, tasks=True,
                 upgrade=False):
        if masters not in (1, 3):
            raise ValueError('masters must be 1 or 3, not %r' % masters)
        if not 1 <= workers <= MAX_WORKERS:
            raise ValueError('workers must be 1 to %d, not %r'
                             % (MAX_WORKERS, workers))
        self.masters = MASTERS[:masters]
        self.workers = WORKERS[:workers + 2]
        self.out = out or sys.stdout
        self.tasks = tasks
        self.upgrade = upgrade
        self.outcomes = []
        self.interrupted = False
        self._current = None
        self._started = None

    def say(self, text):
        elapsed = time.monotonic() - self._started
        self.out.write('[%7.1fs] %s\n' % (elapsed, text))
        self.out.flush()

    def _progress(self, line):
        if self.tasks or not line.lstrip().startswith('TASK ['):
            self.say('  ' + line)

    def run(self):
        """:returns: 0 when every step worked and checked out, 130 when
        interrupted (Ctrl-C), else 2."""
        self._started = time.monotonic()
        lab_mod.stop_on_sigterm()
        self.say('starting the local site: sshd on %d loopback '
                 'addresses, HAProxy, kubespray test double'
                 % (2 + len(self.masters) + len(self.workers)))
        try:
            self._run_on_site()
        except lab_mod.LabError as exc:
            self.out.write('kubespray-mgmt demo: the local site cannot '
                           'start: %s\n' % exc)
            return 2
        except KeyboardInterrupt:
            # The Lab's with block has stopped the site by now.
            return self._interrupted()
        self.out.write(self.summary())
        return 0 if self.outcomes and all(o.ok for o in self.outcomes) \
            else 2

    def _run_on_site(self):
        with lab_mod.Lab(ANSIBLE, LB, self.masters, self.workers) as lab:
            self._introduce(lab)
            for step in plan_steps(self.masters, self.workers,
                                   self.upgrade):
                self._current = Outcome(step, seconds=time.monotonic())
                outcome = self._run_step(lab, step)
                self._current = None
                self.outcomes.append(outcome)
                if not outcome.ok:
                    break
            self.say('stopping the local site')

    def _interrupted(self):
        current = self._current
        if current is not None:  # seconds held its start time
            current.seconds = time.monotonic() - current.seconds
            current.error = INTERRUPTED
            self.outcomes.append(current)
        self.interrupted = True
        self.out.write('\nkubespray-mgmt demo: interrupted (Ctrl-C)\n')
        self.out.write(self.summary())
        return EXIT_INTERRUPTED

    def _introduce(self, lab):
        self.say('Ansible server %s, LB %s (API port %d, NodePorts %s), '
                 'masters %s, workers %s' % (
                     ANSIBLE, LB, lab.api_port,
                     ','.join(str(p) for p in lab.nodeports),
                     ' '.join(self.masters), ' '.join(self.workers)))
        self.say('kubespray test double at %s (ansible-playbook %s)' % (
            lab.site.checkout, site_mod.ANSIBLE_PLAYBOOK))

    def _run_step(self, lab, step):
        outcome = Outcome(step)
        try:
            target = self._upgrade_target(lab, step)
        except exceptions.MgmtDriverOtherError as exc:
            outcome.error = str(exc)
            self.say('FAILED: %s' % exc)
            return outcome
        extra = {} if target is None else {
            'kube_version': upgrade_mod.version_text(target)}
        args = ''.join(' --%s %s' % (key.replace('_', '-'), value)
                       for key, value in extra.items())
        if step.names:
            args += ' --nodes ' + ','.join(step.names)
        self.say('== %s (kubespray-mgmt run %s%s)' % (
            step.title, step.operation, args))
        spec = lab.spec()
        cluster = lab.cluster(spec, step.masters, step.workers)
        runs_before = len(lab.site.runs())
        drv, stats = lab.driver(spec, INSTANCE_ID, self._progress,
                                step.operation)
        started = time.monotonic()
        try:
            with drv.pool:
                summary = lcm.COMMANDS[step.operation](
                    drv, cluster, step.names, 'demo', **extra)
            self.say(summary)
        except (exceptions.MgmtDriverRemoteCommandError,
                exceptions.MgmtDriverRemoteCommandTimeOut,
                exceptions.MgmtDriverOtherError,
                exceptions.MgmtDriverParamInvalid,
                exceptions.MgmtDriverNotFound) as exc:
            outcome.error = str(exc)
            self.say('FAILED: %s' % exc)
        outcome.seconds = time.monotonic() - started
        outcome.playbook_seconds = sum(s for _, s in drv.playbook_timings)
        outcome.playbooks = [(r['playbook'], len(r['touched']))
                             for r in lab.runs_since(runs_before)]
        counts = stats.snapshot()
        outcome.connections = stats.total('connections')
        outcome.commands = stats.total('commands')
        outcome.max_per_host = max(
            (c['connections'] for c in counts.values()), default=0)
        if not outcome.error:
            outcome.problems = lab.check(step.after_masters,
                                         step.after_workers)
            if target is not None:
                outcome.problems += _version_problems(lab, target)
            self._report(outcome, target)
        return outcome

    def _upgrade_target(self, lab, step):
        """The version an upgrade step goes to, or None for another
        step: one minor release above what the cluster runs."""
        if step.operation != 'upgrade':
            return None
        if not lab.site.nodes():
            raise exceptions.MgmtDriverOtherError(
                error_message='no Kubernetes node to upgrade')
        installed = _installed_version(lab)
        target = next_minor(installed, _supported_versions(lab))
        self.say('the cluster runs %s; the checkout supports %s one minor '
                 'release above' % (upgrade_mod.version_text(installed),
                                    upgrade_mod.version_text(target)))
        return target

    def _report(self, outcome, target=None):
        step = outcome.step
        for problem in outcome.problems:
            self.say('CHECK FAILED: %s' % problem)
        if not outcome.problems and not step.after_masters:
            self.say('checked: no Kubernetes node left')
        elif not outcome.problems:
            self.say('checked: Kubernetes has %d control-plane node(s) and '
                     '%d worker(s), all Ready%s; HAProxy serves the API '
                     'from those masters and the NodePorts from those '
                     'workers' % (
                         len(step.after_masters), len(step.after_workers),
                         '' if target is None else ', all at kubelet v%s'
                         % upgrade_mod.version_text(target)))
        self.say('%s took %.1f s (%.1f s in ansible-playbook); SSH: %d '
                 'connection(s), at most %d per host, %d command(s)' % (
                     step.title, outcome.seconds, outcome.playbook_seconds,
                     outcome.connections, outcome.max_per_host,
                     outcome.commands))

    def _verdict(self, ok):
        if self.interrupted:
            return 'The demo was INTERRUPTED'
        return 'The whole lifecycle worked' if ok else 'The demo FAILED'

    def summary(self):
        """The final table, one row per step run."""
        rows = [('step', 'result', 'time', 'ansible', 'driver', 'k8s nodes',
                 'SSH conn.', 'cmds', 'playbooks (hosts touched)')]
        for o in self.outcomes:
            rows.append((
                o.step.title, _result(o),
                '%.1fs' % o.seconds, '%.1fs' % o.playbook_seconds,
                '%.1fs' % (o.seconds - o.playbook_seconds),
                '%d+%d' % (len(o.step.after_masters),
                           len(o.step.after_workers)),
                '%d (max %d/host)' % (o.connections, o.max_per_host),
                str(o.commands),
                ', '.join('%s (%d)' % p for p in o.playbooks) or '-'))
        widths = [max(len(row[i]) for row in rows)
                  for i in range(len(rows[0]))]
        lines = ['', 'Summary']
        for row in rows:
            lines.append('  '.join(cell.ljust(width) for cell, width
                                   in zip(row, widths, strict=True)).rstrip())
        ok = self.outcomes and all(o.ok for o in self.outcomes)
        total = time.monotonic() - self._started
        lines.append('')
        lines.append('%s in %.1f s; the local site is stopped.' % (
            self._verdict(ok), total))
        return '\n'.join(lines) + '\n'
