"""The local site's kubespray test double, fake kubectl and their state.

:func:`materialise` lays out one site in a directory::

    <root>/kubespray/    fake kubespray checkout (ansible-playbook's cwd)
    <root>/bin/kubectl   fake kubectl          (stdlib Python 3 scripts;
    <root>/bin/kube-double  node-side tool      they import the modules
    <root>/bin/etcdctl.sh  kubespray's etcdctl.sh (real etcdctl, this
                         VM's real etcd member)
    <root>/bin/kube-sudo sudo of the hosts      (the become plugin's)
    <root>/*.py          their modules          next to bin/)
    <root>/state/        cluster.json, fail-next-* files
    <root>/etcd/<addr>/  a master's real etcd member (data, PID, log)

and returns a :class:`Site` to read the cluster state, inject failures,
add pods and read the log of playbook runs.  See README.rst here for
what the double reproduces of kubespray and what it does not.

Why inside the package rather than under ``tests/`` (a change to the
layout in DESIGN.md): ``kubespray-mgmt demo`` must run from an installed
package, and the demo, the functional tests and the benchmarks must use
the same site.  Nothing outside this package imports it, except the CLI's
``demo`` command, lazily.

Not in Tacker's environment: the driver's distribution
(``mgmt-driver-kubespray``, what ``pip install .`` gives a conductor)
leaves this package out (the repository's ``setup.py``), and
``localsite-dist/`` builds it as a distribution of its own,
``mgmt-driver-kubespray-localsite``, with the same import path, which
``tools/demo`` installs beside the driver.  The tests and the benchmarks
import it from the source tree.
"""

import contextlib
import json
import os
import pathlib
import pwd
import re
import shutil
import subprocess
import sys
import time

from mgmt_driver.remote import isolation
from mgmt_localsite import clusterstate
from mgmt_localsite import etcd
from mgmt_localsite import fake_sudo
from mgmt_localsite import pki

SOURCE = pathlib.Path(__file__).resolve().parent
CHECKOUT_SOURCE = SOURCE / 'kubespray'
TOOL_MODULES = ('clusterstate.py', 'fake_kubectl.py', 'kube_double.py',
                'etcd.py', 'fake_sudo.py', 'pki.py', 'fake_kubeadm.py')

#: Layouts: 'current' is kubespray v2.22+ (root playbooks import
#: playbooks/*.yml, facts only as playbooks/facts.yml); 'v2.21' has the
#: real playbooks at the root, with a root facts.yml.
LAYOUTS = ('current', 'v2.21')

#: Playbooks at the root of a v2.21 checkout (target name: source).
_OLD_ROOT = {'cluster.yml': 'cluster.yml', 'scale.yml': 'scale.yml',
             'remove-node.yml': 'remove_node.yml', 'reset.yml': 'reset.yml',
             'facts.yml': 'facts.yml', 'boilerplate.yml': 'boilerplate.yml',
             'internal_facts.yml': 'internal_facts.yml',
             # Old releases checked an older Ansible range; the double
             # keeps the one of the release it claims in both layouts.
             'ansible_version.yml': 'ansible_version.yml',
             'upgrade-cluster.yml': 'upgrade_cluster.yml'}


def materialise(root, layout='current', owner=None):
    """Write a site (checkout, tools, empty state) into *root*.

    :param root: a directory; created if missing, must not hold a site.
    :param layout: one of :data:`LAYOUTS`.
    :param owner: user name to own everything (the SSH user that runs
        ansible-playbook and kubectl on the site); needs root.
    :returns: a :class:`Site`.
    :raises ValueError: unknown layout.
    """
    if layout not in LAYOUTS:
        raise ValueError('layout %r is not one of %s' % (layout, LAYOUTS))
    site = Site(root)
    os.makedirs(site.root, mode=0o755, exist_ok=True)
    shutil.copytree(CHECKOUT_SOURCE, site.checkout,
                    ignore=shutil.ignore_patterns('__pycache__', '.double'))
    if layout == 'v2.21':
        _make_old_layout(site.checkout)
    _write_site_defaults(site)
    shutil.copytree(SOURCE / 'bin', site.bin_dir,
                    ignore=shutil.ignore_patterns('__pycache__'))
    for tool in site.bin_dir.iterdir():
        tool.chmod(0o755)  # an installed wheel may have lost the mode
    for name in TOOL_MODULES:
        shutil.copy2(SOURCE / name, site.root / name)
    os.makedirs(site.state_dir, mode=0o700)
    os.makedirs(site.etcd_dir, mode=0o700)
    if owner:
        _chown_tree(site.root, owner)
    return site


def _make_old_layout(checkout):
    """Turn a current-layout copy into kubespray <= v2.21's layout."""
    playbooks = checkout / 'playbooks'
    for wrapper in ('cluster.yml', 'scale.yml', 'remove-node.yml',
                    'remove_node.yml', 'reset.yml', 'upgrade-cluster.yml',
                    'galaxy.yml'):
        (checkout / wrapper).unlink()
    for target, source in _OLD_ROOT.items():
        (playbooks / source).rename(checkout / target)
    playbooks.rmdir()


def _write_site_defaults(site):
    path = (site.checkout / 'roles' / 'kubespray_defaults' / 'defaults' /
            'main' / 'site.yml')
    path.write_text('---\n# Written by localsite.materialise().\n'
                    'kube_double_site_dir: %s\n' % json.dumps(
                        str(site.root)))


def _chown_tree(root, owner):
    # The root itself stays the creator's (root): the driver's workspaces
    # go below it (<root>/inventories), and a directory above a workspace
    # must not belong to another account (mgmt_driver/remote/isolation.py).
    entry = pwd.getpwnam(owner)
    for directory, _dirs, files in os.walk(root):
        if directory != str(root):
            os.chown(directory, entry.pw_uid, entry.pw_gid)
        for name in files:
            os.chown(os.path.join(directory, name), entry.pw_uid,
                     entry.pw_gid)


class Site:
    """Paths of a materialised site and access to its state.

    :param root: the directory :func:`materialise` wrote.
    """

    def __init__(self, root):
        self.root = pathlib.Path(root).resolve()
        self.checkout = self.root / 'kubespray'
        self.bin_dir = self.root / 'bin'
        self.kubectl = self.bin_dir / 'kubectl'
        self.kube_double = self.bin_dir / 'kube-double'
        self.etcdctl = self.bin_dir / 'etcdctl.sh'
        self.kubeadm = self.bin_dir / 'kubeadm'
        self.crictl = self.bin_dir / 'crictl'
        self.state_dir = self.root / 'state'
        #: The masters' real etcd members (mgmt_localsite.etcd).
        self.etcd_dir = self.root / 'etcd'
        #: The checkout's fact cache (ansible.cfg): every run on the
        #: site whose environment does not name another.
        self.fact_cache = self.checkout / '.double' / 'facts'
        #: Where the driver's workspaces are (site.cluster_params).
        self.inventories = self.root / 'inventories'
        self.runs_log = self.checkout / '.double' / 'runs.jsonl'

    @property
    def env(self):
        """Environment for running the site's tools from a test."""
        return dict(os.environ, KUBE_DOUBLE_STATE_DIR=str(self.state_dir))

    # --- reading ------------------------------------------------------

    def state(self):
        """The whole state document, or None when no cluster exists."""
        return clusterstate.read(self.state_dir)

    def cluster_info_server(self):
        """The server ``kube-public/cluster-info`` names (joins discover
        the cluster there), or None."""
        state = self.state()
        return clusterstate.cluster_info_server(state) if state else None

    def set_cluster_info_server(self, server):
        """Make cluster-info name *server*, as ``kubectl edit`` would."""
        kubeconfig = {'apiVersion': 'v1', 'kind': 'Config', 'clusters': [
            {'name': '', 'cluster': {'server': server}}]}
        self.tool('kubectl', 'apply', '-f', '-', input=json.dumps({
            'apiVersion': 'v1', 'kind': 'ConfigMap',
            'metadata': {'name': 'cluster-info',
                         'namespace': 'kube-public'},
            'data': {'kubeconfig': json.dumps(kubeconfig)}}))

    #: What the node lifecycle controller keeps on a node for itself
    #: (when it last probed the kubelet, since when it has been lost):
    #: not the node's state, and left out of :meth:`nodes`, so that a
    #: kubectl call (each runs the controller) changes no node a test
    #: compares.
    CONTROLLER_KEYS = ('probed', 'lost')

    def nodes(self):
        """Node records by name ({} without a cluster), without the
        controller's bookkeeping (:data:`CONTROLLER_KEYS`)."""
        return (self.observed_state() or {}).get('nodes', {})

    def observed_state(self):
        """:meth:`state` without the controller's bookkeeping: what a
        read-only command must leave as it found it."""
        state = self.state()
        if state:
            state['nodes'] = {
                name: {k: v for k, v in node.items()
                       if k not in self.CONTROLLER_KEYS}
                for name, node in state.get('nodes', {}).items()}
        return state

    def pods_on(self, node):
        state = self.state()
        return clusterstate.pods_on(state, node) if state else []

    def etcd_members(self):
        """Names of the etcd members, as the site's real etcd lists
        them ('' for a member added but not started; [] when no member
        runs)."""
        return etcd.member_names(str(self.etcd_dir))

    def stop_etcd(self):
        """Stop every etcd member of the site, by PID (its teardown).

        :returns: the addresses whose member was stopped.
        """
        return etcd.stop_all(str(self.etcd_dir))

    def runs(self):
        """The playbook runs logged by the double, oldest first."""
        try:
            lines = self.runs_log.read_text().splitlines()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in lines if line.strip()]

    # --- snapshots ----------------------------------------------------

    def snapshot(self, target):
        """Save what the double keeps of a cluster into the new
        directory *target*: the state (``state/``: Kubernetes objects,
        certificates, injected failures), the checkout's ``.double/``
        (the runs log, the shared fact cache) and the real etcd members
        (:func:`etcd.save`: stopped, copied, started again), so that
        :meth:`restore` gives a later test the cluster a playbook built
        without running it again.  The driver's workspaces
        (``inventories/``), HAProxy and sshd are not part of it.

        :returns: *target* as a path.
        """
        target = pathlib.Path(target)
        target.mkdir(mode=0o700)
        etcd.copy_tree(self.state_dir, target / 'state')
        self._copy_double(self.checkout / '.double', target / 'double')
        etcd.save(str(self.etcd_dir), str(target / 'etcd'))
        return target

    def restore(self, snapshot):
        """Make the site what it was at :meth:`snapshot` (*snapshot* is
        its directory): state, runs log, fact cache and etcd members,
        whatever happened since."""
        snapshot = pathlib.Path(snapshot)
        shutil.rmtree(self.state_dir)
        etcd.copy_tree(snapshot / 'state', self.state_dir)
        shutil.rmtree(self.checkout / '.double', ignore_errors=True)
        self._copy_double(snapshot / 'double', self.checkout / '.double')
        etcd.restore(str(self.etcd_dir), str(snapshot / 'etcd'))

    @staticmethod
    def _copy_double(source, target):
        # .double/ appears with the first run: absent is a state too.
        if source.is_dir():
            etcd.copy_tree(source, target)

    def record_invocations(self):
        """From now on, record every ansible-playbook invocation on the
        site (argv, inventory, extra vars, each play's hosts) for
        :meth:`invocations` (plugins/callback/kube_double_runs.py;
        off unless asked: the conformance tests replay them with the
        real kubespray)."""
        directory = self.checkout / '.double'
        directory.mkdir(mode=0o755, exist_ok=True)
        _copy_owner(self.checkout, directory)
        (directory / 'record-invocations').touch()

    def invocations(self):
        """The recorded invocations, oldest first (see
        :meth:`record_invocations`)."""
        path = self.checkout / '.double' / 'invocations.jsonl'
        try:
            lines = path.read_text().splitlines()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in lines if line.strip()]

    def fact_caches(self):
        """Every fact cache directory on the site: the checkout's shared
        one and each workspace's own (:mod:`mgmt_driver.remote.isolation`)."""
        own = sorted(self.inventories.glob('*/' + isolation.FACT_CACHE))
        return [self.fact_cache] + own

    def cached_hosts(self, workspace=None):
        """Hosts with a fact-cache entry (expired ones included).

        :param workspace: only the cache this workspace's runs use
            (default: every cache on the site).
        """
        # ansible-core 2.19 prefixes cache keys with a schema id: "s1_".
        return sorted({re.sub(r'^s\d+_', '', p.name)
                       for p in self._cache_entries(workspace)})

    def clear_fact_cache(self):
        """Forget every cached fact (as after kubespray's 24 h timeout)."""
        for cache in self.fact_caches():
            shutil.rmtree(cache, ignore_errors=True)

    def fact_cache_timeout(self):
        """``fact_caching_timeout`` of the checkout's ansible.cfg (s)."""
        text = (self.checkout / 'ansible.cfg').read_text()
        return int(re.search(r'^fact_caching_timeout\s*=\s*(\d+)', text,
                             re.M).group(1))

    def age_fact_cache(self, seconds, hosts=None, workspace=None):
        """Make cache entries *seconds* old (Ansible goes by mtime).

        :param hosts: inventory names (default: every entry).
        :param workspace: see :meth:`cached_hosts`.
        :returns: the names of the entries aged.
        """
        aged = set()
        when = time.time() - seconds
        for path in self._cache_entries(workspace):
            name = re.sub(r'^s\d+_', '', path.name)
            if hosts is None or name in hosts:
                os.utime(path, (when, when))
                aged.add(name)
        return sorted(aged)

    def fact_cache_ages(self, workspace=None):
        """``{host: age in seconds}`` of the cache entries (the newest
        entry of a host found in several caches)."""
        now = time.time()
        ages = {}
        for path in self._cache_entries(workspace):
            name = re.sub(r'^s\d+_', '', path.name)
            ages[name] = min(ages.get(name, float('inf')),
                             now - path.stat().st_mtime)
        return ages

    def _cache_entries(self, workspace=None):
        caches = self.fact_caches() if workspace is None else [
            pathlib.Path(workspace) / isolation.FACT_CACHE]
        return [p for cache in caches if cache.is_dir()
                for p in cache.iterdir() if not p.name.startswith('.')]

    # --- changing -----------------------------------------------------

    def tool(self, tool, *args, input=None, check=True):
        """Run ``bin/<tool>`` (kubectl or kube-double) here, as a test,
        then give the state files back to the site's owner.

        :returns: the :class:`subprocess.CompletedProcess`.
        """
        try:
            return subprocess.run(
                [sys.executable, str(self.bin_dir / tool), *args],
                input=input, capture_output=True, text=True, env=self.env,
                check=check, timeout=600)
        finally:
            self._fix_owner()

    def seed(self, control_plane, workers=()):
        """Create a Kubernetes cluster directly, without Ansible (fast
        test setup).  No etcd member is started: etcd is real, and only
        cluster.yml starts it.

        :param control_plane: [(node name, address)], the first inits.
        :param workers: [(node name, address)].
        """
        for i, (name, address) in enumerate(control_plane):
            self.tool('kube-double', 'join' if i else 'init', '--node', name,
                      '--address', address, *(['--control-plane'] if i
                                              else []))
        for name, address in workers:
            self.tool('kube-double', 'join', '--node', name, '--address',
                      address, '--worker')

    def _fix_owner(self):
        for path in self.state_dir.iterdir():
            _copy_owner(self.state_dir, path)


    # --- certificates (pki.py) ----------------------------------------

    def age_certificates(self, node, days, names=None):
        """Sign *node*'s leaf certificates (or *names* of them) again,
        valid for *days* days: real X.509, as kubeadm left them."""
        pki.reissue(str(self.state_dir), node, days, names)
        if os.geteuid() == 0:
            info = os.stat(self.state_dir)
            for directory, _dirs, files in os.walk(
                    self.state_dir / pki.PKI_DIR):
                for path in [directory] + [os.path.join(directory, f)
                                           for f in files]:
                    os.chown(path, info.st_uid, info.st_gid)

    def certificate_expiry(self, node):
        """``{name: notAfter (epoch seconds)}`` of *node*'s files."""
        report = pki.expiration(str(self.state_dir), node, now=0)
        return {c['name']: c['residualTime'] for c in
                report['certificates'] + report['certificateAuthorities']
                if not c['missing']}

    def restarts(self):
        """The static pod restarts ``crictl rmp`` logged (node, pods,
        start, end)."""
        return (self.state() or {}).get('restarts', [])

    def require_sudo_password(self, address, password):
        """Make the host at *address* (its SSH address) ask *password*
        for sudo, as a user without NOPASSWD (None: ask none again).
        See ``fake_sudo.py``."""
        fake_sudo.require_password(self.state_dir, address, password)
        self._fix_owner()

    def slow_down(self, playbook, seconds):
        """Make the next run of *playbook* pause *seconds* once, when its
        first host joins or creates the cluster (before any change)."""
        path = self.state_dir / (clusterstate.SLOW_PREFIX + playbook)
        path.write_text('%g' % seconds)
        self._fix_owner()
        return path

    def hold(self, playbook):
        """Make the next run of *playbook* pause, at the point
        :meth:`slow_down` would, until the function returned is called
        (or 600 s pass): ``release = site.hold('cluster.yml')``."""
        held = self.state_dir / (clusterstate.HELD_PREFIX + playbook)
        held.touch()
        path = self.state_dir / (clusterstate.SLOW_PREFIX + playbook)
        path.write_text(clusterstate.HOLD)
        self._fix_owner()
        return lambda: held.unlink(missing_ok=True)

    def held(self, playbook):
        """Whether a run of *playbook* waits at the point :meth:`hold`
        asked for: it took the request and is not released yet."""
        asked = self.state_dir / (clusterstate.SLOW_PREFIX + playbook)
        held = self.state_dir / (clusterstate.HELD_PREFIX + playbook)
        return held.exists() and not asked.exists()

    def inject_failure(self, playbook, host=''):
        """Make the next run of *playbook* fail mid-run.

        :param playbook: 'cluster.yml', 'scale.yml', 'remove-node.yml',
            'reset.yml' or 'upgrade-cluster.yml'.
        :param host: fail on this inventory host; default: the first host
            to reach the hook.
        """
        path = self.state_dir / (clusterstate.FAIL_PREFIX + playbook)
        path.write_text(host)
        self._fix_owner()
        return path

    def pending_failures(self):
        return sorted(p.name[len(clusterstate.FAIL_PREFIX):]
                      for p in self.state_dir.glob(
                          clusterstate.FAIL_PREFIX + '*'))

    def add_pod(self, name, node, namespace='default', owner='ReplicaSet',
                emptydir=False, stuck=False, labels=None):
        """Put a workload pod on *node*.

        :param owner: 'ReplicaSet' (recreated elsewhere when evicted),
            'DaemonSet', or None for a bare pod (drain needs --force).
        :param stuck: eviction is always refused (a shortcut; see
            :meth:`add_budget` for a real PodDisruptionBudget).
        :param labels: the pod's labels (what budgets select).
        """
        with self._update() as state:
            owner_name = name.rsplit('-', 1)[0] if owner else None
            state['pods'].append(clusterstate.make_pod(
                name, namespace, node, owner, owner_name, emptydir, stuck,
                labels=labels))

    def add_budget(self, name, match_labels, namespace='default',
                   min_available=None, max_unavailable=None):
        """Apply a PodDisruptionBudget (policy/v1) selecting pods by
        *match_labels*, through the fake kubectl.

        :param min_available: an int or a percentage string.
        :param max_unavailable: likewise (give one of the two).
        """
        spec = {'selector': {'matchLabels': dict(match_labels)}}
        if min_available is not None:
            spec['minAvailable'] = min_available
        if max_unavailable is not None:
            spec['maxUnavailable'] = max_unavailable
        self.tool('kubectl', 'apply', '-f', '-', input=json.dumps({
            'apiVersion': 'policy/v1', 'kind': 'PodDisruptionBudget',
            'metadata': {'name': name, 'namespace': namespace},
            'spec': spec}))

    def delete_budget(self, name, namespace='default'):
        self.tool('kubectl', 'delete', 'pdb', name, '-n', namespace)

    def stop_kubelet(self, node, stopped=True):
        """Stop (or, with *stopped* False, start again) the kubelet of
        *node* while its VM keeps running: the node lifecycle controller
        sees it dead at its next look (see :func:`clusterstate.watch_nodes`;
        a killed VM's stopped sshd has the same effect)."""
        with self._update() as state:
            state['nodes'][node]['kubelet_stopped'] = stopped
            state['nodes'][node].pop('probed', None)

    def unstick(self, name):
        """Let a stuck pod be evicted again."""
        with self._update() as state:
            for pod in state['pods']:
                if pod['name'] == name:
                    pod['stuck'] = False

    def settings(self, **values):
        """Change tunables, e.g. ``token_delay=1.5``."""
        unknown = set(values) - set(clusterstate.DEFAULT_SETTINGS)
        if unknown:
            raise ValueError('unknown settings: %s' % sorted(unknown))
        with self._update() as state:
            state.setdefault('settings', {}).update(values)

    @contextlib.contextmanager
    def _update(self):
        """Locked update of a running cluster's state, keeping the files'
        owner (tests run as root, the site's tools as the SSH user)."""
        with clusterstate.transaction(self.state_dir) as txn:
            if not clusterstate.running(txn.state):
                raise RuntimeError('no cluster in %s' % self.state_dir)
            yield txn.state
        self._fix_owner()


def _copy_owner(directory, path):
    info = os.stat(directory)
    if os.path.exists(path) and os.geteuid() == 0:
        os.chown(path, info.st_uid, info.st_gid)
