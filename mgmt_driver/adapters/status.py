"""The state of one cluster as it is, read only.

:class:`StatusReader` asks the cluster's hosts what they have and
returns one JSON-ready document (the shape is in ``samples/README.rst``,
"Cluster status"): the Kubernetes nodes (kubectl on the first master
that answers), the etcd members (kubespray's ``etcdctl.sh`` there), the
backends HAProxy serves and their health (the configuration file on the
LB VM and, when ``haproxy_stats_socket`` is set, HAProxy's ``show
stat``), the last playbook runs (``<workspace>/logs`` on the Ansible
server) and how all that differs from the inventory the driver last
uploaded.  ``kubespray-mgmt status`` prints it; Tacker users call
:func:`collect` with the same spec and nodes their hooks get.

Nothing is changed anywhere: only reading commands and file reads run,
no host is added to the instance records, and an unknown SSH host key
is refused rather than recorded (:func:`read_only_settings`).  A part
that cannot be read is reported in its section (``ok`` false, ``error``
the reason) and the other sections are still filled.  Everything a host
sends is untrusted: outputs are bounded by the SSH layer, parsed line by
line or as type-checked JSON, and names are matched by strict patterns.
"""

import dataclasses
import json
import posixpath
import re

from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.common import safetext
from mgmt_driver.common import untrusted
from mgmt_driver.common import utctime
from mgmt_driver.model import absence
from mgmt_driver.model import labels
from mgmt_driver.operations import certificates
from mgmt_driver.operations import etcdsnapshots
from mgmt_driver.operations import gates
from mgmt_driver.remote import detached
from mgmt_driver.remote import inventory
from mgmt_driver.remote import kubectl
from mgmt_driver.remote import kubespray
from mgmt_driver.remote import loadbalancer
from mgmt_driver.remote import programs
from mgmt_driver.remote import ssh
from mgmt_driver.remote import trust

LOG = safetext.logger(__name__)

SECTIONS = ('nodes', 'etcd', 'load_balancer', 'playbook_runs',
            'differences', 'certificates', 'etcd_snapshots')
#: Directory of the playbook logs in the workspace, and how many runs
#: are shown (newest first).
LOGS_DIR = detached.LOG_DIR
RUNS_SHOWN = 5
#: Names listed, so that odd names among the newest do not hide runs.
RUNS_LISTED = 4 * RUNS_SHOWN
#: HAProxy backends of the rendered configuration.
API_BACKEND = 'kube_apiserver'
NODEPORT_BACKEND = 'kube_nodeports'
#: Bytes of ``show stat`` read from the socket; more is cut.
MAX_STAT_BYTES = 1024 * 1024

#: What every remote read may raise: reported in the section, not raised.
_READ_ERRORS = (exceptions.MgmtDriverOtherError,
                exceptions.MgmtDriverRemoteCommandError,
                exceptions.MgmtDriverRemoteCommandTimeOut,
                exceptions.MgmtDriverParamInvalid)

_RUN_LINE = re.compile(r'(-?\d{1,3}|-|\?)/(\S{1,200})')
# Prints "<rc or - or ?>/<name>" for the newest N run logs (the program
# scripts/list-runs.sh, given LOGS_DIR N).
_RUNS = 'list-runs'
# The playbook slots taken and the runs queued for them (the program
# scripts/slot-queue.sh, given max_parallel_playbooks_per_server).
_QUEUE = 'slot-queue'
#: Queued runs shown at most (the program lists 200 at most).
QUEUE_SHOWN = 200
_TICKET = re.compile(r'([0-9]{12})\.[0-9.]{1,40}')
_QUEUE_FIELD = re.compile(r'[A-Za-z0-9_.:-]{0,60}')

# Sends "show stat" to the runtime socket argv[1]; prints the answer.
_SHOW_STAT = '''\
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall(b"show stat\\n")
data = b""
while len(data) <= %d:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
sys.stdout.write(data[:%d].decode("utf-8", "replace"))
''' % (MAX_STAT_BYTES, MAX_STAT_BYTES)


def read_only_settings(conf=None):
    """SSH settings that record no host key (``accept-new`` ->
    ``read-only``: rejected, with a reason that fits a reading command).

    :param conf: an oslo.config object (default: the global one).
    """
    group = (conf or kconf.CONF).kubespray_mgmt
    settings = dataclasses.replace(
        ssh.SSHSettings.from_conf(conf), connect_once=True,
        connect_timeout=group.read_only_connect_timeout,
        connect_retries=group.read_only_connect_retries)
    if settings.host_key_policy == 'accept-new':
        settings = dataclasses.replace(settings,
                                       host_key_policy='read-only')
    return settings


def collect(spec, cluster, instance_id, pool, conf=None,
            trusted_paths=False):
    """The status document of a cluster; see :class:`StatusReader`.

    :raises ParamsInvalid: the operator's rules refuse a key file.
    """
    return StatusReader(spec, instance_id, pool, conf,
                        trusted_paths).collect(cluster)


# --------------------------------------------------------- parsing --

def parse_run_name(name):
    """``(time, operation, playbook)`` of a run log's file name, or None
    (:func:`mgmt_driver.remote.detached.parse_stem` of the name without
    ``.log``)."""
    if not name.endswith('.log'):
        return None
    return detached.parse_stem(name[:-len('.log')])


def parse_runs(output, logs_dir):
    """The run entries of ``scripts/list-runs.sh``'s output, newest first.

    Lines that are not ``<rc>/<valid name>`` are skipped (logged), so
    the script lists more names than are shown.
    """
    runs = []
    for line in output.splitlines()[-RUNS_LISTED:]:
        match = _RUN_LINE.fullmatch(line)
        parsed = match and parse_run_name(match.group(2))
        if not parsed:
            LOG.warning('Skipping a log name in %s that is not '
                        '<time>-<operation>-<playbook>.log', logs_dir)
            continue
        runs.append(_run_entry(parsed, match.group(1),
                               posixpath.join(logs_dir, match.group(2))))
    return runs[::-1][:RUNS_SHOWN]


def parse_queue(output, workspace_path):
    """The queue section's fields from ``scripts/slot-queue.sh``.

    :param workspace_path: this instance's workspace (its runs are
        marked ``this_instance``).
    :returns: ``{'slots_taken': int or None, 'waiting': [{position,
        instance, operation, playbook, priority, arrived,
        this_instance}]}``, first served first; malformed lines skipped.
    """
    taken, waiting = None, []
    for line in output.splitlines()[:QUEUE_SHOWN + 2]:
        if line.startswith('KR:TAKEN:'):
            number = untrusted.whole_number(line[9:], 9)
            taken = taken if number is None else number
        elif line.startswith('KR:WAIT:'):
            entry = _queue_entry(line[8:], workspace_path)
            if entry is not None:
                waiting.append(dict(entry, position=len(waiting) + 1))
    return {'slots_taken': taken, 'waiting': waiting}


def _queue_entry(text, workspace_path):
    ticket, operation, playbook, arrived, rest = (text.split(':', 4) +
                                                  [''] * 5)[:5]
    # arrived is HH:MM:SS: its colons split it.
    parts = (arrived + ':' + rest).split(':', 3)
    arrived, workspace = ':'.join(parts[:3]), ''.join(parts[3:])
    if not (_TICKET.fullmatch(ticket) and
            all(_QUEUE_FIELD.fullmatch(v) for v in
                (operation, playbook, arrived))):
        return None
    return {'instance': posixpath.basename(workspace)[:80] or '?',
            'operation': operation or '?', 'playbook': playbook or '?',
            'priority': detached.PRIORITY_CLASSES[
                detached.priority_class(operation)],
            'arrived': utctime.iso_utc(arrived) or '?',
            'this_instance': workspace == workspace_path}


def _run_entry(parsed, rc, path):
    when, operation, playbook = parsed
    if rc == '-':
        status, code = 'running', None  # or died without an exit status
    elif rc == '?':
        status, code = 'unknown', None
    else:
        code = int(rc)
        status = 'succeeded' if code == 0 else 'failed'
    return {'time': when, 'operation': operation, 'playbook': playbook,
            'status': status, 'exit_code': code, 'log': path}


def parse_haproxy_servers(text):
    """``[{backend, server, address}]`` of an HAProxy configuration.

    Reads ``backend NAME`` sections and their ``server NAME ADDRESS``
    lines, one line at a time; other sections end a backend.
    """
    servers, backend = [], None
    for line in text.splitlines():
        words = line.split('#', 1)[0].split()
        if not words:
            continue
        if not line[0].isspace():
            backend = words[1] if words[0] == 'backend' and \
                len(words) > 1 else None
        elif backend and words[0] == 'server' and len(words) > 2:
            servers.append({'backend': backend, 'server': words[1],
                            'address': words[2]})
    return servers


def parse_show_stat(text):
    """``{(backend, server): (status, check)}`` from ``show stat`` CSV.

    :raises ValueError: no ``# pxname,svname,...`` header line.
    """
    lines = text.splitlines()
    if not lines or not lines[0].startswith('# '):
        raise ValueError('no "# pxname,svname,..." header')
    columns = lines[0][2:].split(',')
    try:
        at = [columns.index(c) for c in ('pxname', 'svname', 'status',
                                         'check_status')]
    except ValueError:
        raise ValueError('a column is missing from the header') from None
    health = {}
    for line in lines[1:]:
        fields = line.split(',')
        if len(fields) > max(at):
            proxy, server, status, check = (fields[i] for i in at)
            health[(proxy, server)] = (status, check or None)
    return health


# ------------------------------------------------------ differences --

def differences(recorded, nodes=None, members=None, backends=None,
                settings=None, health=None, absent=frozenset()):
    """How the cluster differs from the recorded inventory, or from a
    cluster at rest: a node cordoned or on an older kubelet than the
    others (an upgrade stopped half-way), an unhealthy etcd member (what
    the upgrade's preflight refuses).

    :param recorded: the ``inventory.RecordedInventory`` last uploaded.
    :param nodes: Kubernetes node dicts (``name``, ``ready``, ``labels``,
        ``taints``, ``schedulable``, ``kubelet_version``), or None when
        they could not be read (not compared).
    :param members: etcd member dicts (``name``), or None.
    :param health: ``[{endpoint, healthy, error}]`` of etcd's endpoints,
        or None.
    :param absent: the workers the last operation declared absent (left
        out of *recorded*): each is one ``declared_absent`` difference
        instead of ``not_in_inventory`` and ``backend_not_a_worker``.
    :param backends: LB backend dicts (``backend``, ``server``,
        ``status``), or None.
    :param settings: the recorded labels and taints (``{node name:
        NodeSettings}``, :mod:`mgmt_driver.model.labels`), or None.
    :returns: ``[{kind, name, detail}]``, sorted.
    """
    masters = set(recorded.masters)
    workers = {h[0] for h in recorded.hosts} - masters
    found = []
    if nodes is not None:
        found += _node_differences(masters | workers, nodes)
        found += _settings_differences(settings or {}, nodes)
    if members is not None:
        found += _set_differences(
            masters, {m['name'] for m in members if m['name']},
            'master_not_an_etcd_member', 'etcd_member_not_a_master')
    found += [_difference('etcd_member_unhealthy', h['endpoint'],
                          'not healthy%s' % (': %s' % h['error']
                                             if h['error'] else ''))
              for h in health or () if not h['healthy']]
    if backends is not None:
        found += _backend_differences(masters, workers, backends)
    return sorted(_explained_absent(found, absent - masters - workers),
                  key=lambda d: (d['kind'], d['name']))


def _explained_absent(found, absent):
    """*found* with the differences of each declared-absent worker (the
    inventory left it out on purpose) said once, as a declaration."""
    if not absent:
        return found
    kept = [d for d in found if not (d['name'] in absent and d['kind'] in (
        'not_in_inventory', 'backend_not_a_worker'))]
    return kept + [_difference('declared_absent', name,
                               _DETAILS['declared_absent'])
                   for name in sorted(absent)]


def _difference(kind, name, detail):
    return {'kind': kind, 'name': name, 'detail': detail}


_DETAILS = {
    'missing_from_kubernetes': 'in the inventory, not a Kubernetes node',
    'not_in_inventory': 'a Kubernetes node the inventory does not list',
    'declared_absent': 'declared absent (--absent, absent_nodes) by the '
                       'last operation: left out of its inventory, still '
                       'an HAProxy backend; the next operation that does '
                       'not declare it absent puts it back',
    'node_cordoned': 'cordoned (unschedulable): an operation that '
                     'stopped half-way may have left it so; run it again, '
                     'or uncordon the node (kubectl uncordon)',
    'master_not_an_etcd_member': 'a master of the inventory that is not '
                                 'an etcd member',
    'etcd_member_not_a_master': 'an etcd member that is not a master of '
                                'the inventory',
    'master_not_a_backend': 'a master HAProxy does not send the API to',
    'backend_not_a_master': 'an API backend that is not a master of the '
                            'inventory',
    'worker_not_a_backend': 'a worker HAProxy does not send NodePorts to',
    'backend_not_a_worker': 'a NodePort backend that is not a worker of '
                            'the inventory',
}


def _set_differences(expected, actual, missing_kind, extra_kind):
    return ([_difference(missing_kind, n, _DETAILS[missing_kind])
             for n in expected - actual] +
            [_difference(extra_kind, n, _DETAILS[extra_kind])
             for n in actual - expected])


def _node_differences(listed, nodes):
    found = _set_differences(listed, {n['name'] for n in nodes},
                             'missing_from_kubernetes', 'not_in_inventory')
    found += [_difference('node_cordoned', n['name'], _DETAILS[
        'node_cordoned']) for n in nodes if not n.get('schedulable', True)]
    return found + _version_differences(nodes) + [
        _difference('node_not_ready', n['name'], 'Ready is %s' % n['ready'])
        for n in nodes if n['ready'] != 'True']


_KUBELET_VERSION = re.compile(r'v?(\d{1,6})\.(\d{1,6})\.(\d{1,6})')


def _version_differences(nodes):
    """Nodes whose kubelet is older than the newest one's (an unreadable
    version is not compared)."""
    versions = {}
    for node in nodes:
        found = _KUBELET_VERSION.match(node.get('kubelet_version') or '')
        if found:
            versions[node['name']] = tuple(int(g) for g in found.groups())
    if not versions:
        return []
    newest = max(versions.values())
    behind = sorted(name for name, v in versions.items() if v < newest)
    text = 'v%d.%d.%d' % newest
    return [_difference('kubelet_version_behind', name, 'kubelet %s; '
                        '%d node(s) at %s: an upgrade stopped half-way? '
                        'run the same upgrade again' % (
                            next(n['kubelet_version'] for n in nodes
                                 if n['name'] == name),
                            len(versions) - len(behind), text))
            for name in behind]


def _settings_differences(settings, nodes):
    """Recorded labels and taints a node does not have (keys only: the
    values came from the node)."""
    found = []
    for node in nodes:
        wanted = settings.get(node['name'])
        if wanted is None:
            continue
        labels = [key for key, value in wanted.labels
                  if node['labels'].get(key) != value]
        live = set(node['taints'])  # remote data: a set, not a list scan
        taints = [taint for taint in wanted.taints if taint not in live]
        if labels or taints:
            found.append(_difference(
                'labels_not_as_recorded', node['name'], '; '.join(
                    part for part in (
                        labels and 'label(s) %s' % ', '.join(labels),
                        taints and 'taint(s) %s' % ', '.join(taints))
                    if part) + ': not as recorded (relabel again)'))
    return found


def _backend_differences(masters, workers, backends):
    def servers(backend):
        return {b['server'] for b in backends if b['backend'] == backend}
    found = _set_differences(masters, servers(API_BACKEND),
                             'master_not_a_backend', 'backend_not_a_master')
    if workers or servers(NODEPORT_BACKEND):
        found += _set_differences(
            workers, servers(NODEPORT_BACKEND), 'worker_not_a_backend',
            'backend_not_a_worker')
    return found + [
        _difference('backend_down', b['server'], '%s: HAProxy says %s%s' % (
            b['backend'], b['status'],
            ' (%s)' % b['check'] if b['check'] else ''))
        for b in backends if b['status'] and not b['status'].startswith(
            ('UP', 'no check'))]


# ----------------------------------------------------------- reader --

def _section(**fields):
    return dict({'ok': True, 'error': None}, **fields)


def _failed(section, exc):
    section.update(ok=False, error=read_error(exc))
    return section


def read_error(exc):
    """What a section says of *exc*: ``unreachable: ...`` for a host
    (or every master) that could not be connected to."""
    if isinstance(exc, (exceptions.SSHConnectError,
                        exceptions.NoReachableHost)):
        return 'unreachable: %s' % exc
    return str(exc)


class StatusReader:
    """Reads one cluster's status; changes nothing.

    :param spec: the :class:`~mgmt_driver.model.core.ClusterSpec`.
    :param instance_id: names the workspace on the Ansible server.
    :param pool: an ``ssh.ConnectionPool``, best built with
        :func:`read_only_settings`.
    :param conf: an oslo.config object (default: the global one).
    :param trusted_paths: the request's key files may be anywhere on
        this host (``kubespray-mgmt``); see :mod:`mgmt_driver.remote.trust`.
    :raises ParamsInvalid: the operator's rules refuse a key file.
    """

    def __init__(self, spec, instance_id, pool, conf=None,
                 trusted_paths=False):
        self.conf = conf or kconf.CONF
        self.spec = trust.apply(spec, trust.Policy.from_conf(
            self.conf, None, trusted_paths))
        self.instance_id = instance_id
        self.pool = pool
        self.group = self.conf.kubespray_mgmt

    def collect(self, cluster):
        """The status document of *cluster* (the topology's VMs).

        :returns: a dict with ``instance_id``, ``ok`` and one key per
            name in :data:`SECTIONS`.
        """
        report = {'instance_id': self.instance_id,
                  'workspace': self.workspace_path}
        client = self._kubectl(cluster, report)
        if client is not None:
            report['nodes'] = self._nodes(client)
            report['etcd'] = self._etcd(client)
        report['load_balancer'] = self._load_balancer(cluster)
        report['playbook_runs'] = self._runs()
        report['etcd_snapshots'] = self._etcd_snapshots()
        report['differences'] = self._differences(report)
        report['certificates'] = self._certificates(cluster)
        report['ok'] = all(report[s]['ok'] for s in SECTIONS)
        return report

    @property
    def workspace_path(self):
        return posixpath.join(self.spec.ansible.transferring_inventory_path,
                              self.instance_id)

    def _connection(self, node):
        login = self.spec.login_for(node.role)
        return self.pool.connection(node.ssh_address,
                                    ssh.credentials_for(login), node.ssh_port)

    def _kubectl(self, cluster, report):
        """kubectl on the first master that answers, or None (reported)."""
        try:
            return kubectl.client_on_first_reachable(
                [self._connection(n) for n in cluster.masters],
                kubectl=self.group.kubectl_command,
                kubeconfig=self.group.kubectl_kubeconfig or None,
                sudo=self._master_sudo(),
                settings=kubectl.KubectlSettings.from_conf(self.conf))
        except _READ_ERRORS as exc:
            report['nodes'] = _failed(_section(host=None, items=[]), exc)
            report['etcd'] = _failed(_section(host=None, members=[]), exc)
            return None

    def _master_sudo(self):
        return kconf.use_sudo(self.group.kubectl_sudo,
                              self.spec.master.login.username)

    def _nodes(self, client):
        section = _section(host=client.conn.host, items=[])
        try:
            section['items'] = [dict(dataclasses.asdict(n),
                                     roles=list(n.roles),
                                     taints=list(n.taints))
                                for n in client.nodes()]
        except _READ_ERRORS as exc:
            return _failed(section, exc)
        return section

    def _etcd(self, client):
        conn = client.conn
        section = _section(host=conn.host, members=[])
        argv = (['sudo', '-n'] if self._master_sudo() else []) + [
            self.group.etcdctl_command, 'member', 'list', '-w', 'json']
        try:
            result = conn.run(argv, timeout=self.group.kubectl_timeout)
            section['members'] = kubectl.parse_etcd_members(result.stdout,
                                                            conn.host)
        except _READ_ERRORS as exc:
            return _failed(section, exc)
        section['health'] = self._etcd_health(conn, argv[:-4])
        return section

    def _etcd_health(self, conn, etcdctl):
        """``[{endpoint, healthy, error}]`` of ``etcdctl endpoint health
        --cluster`` (as the upgrade's preflight asks), or None when it
        gave no answer that parses (the members are still shown)."""
        try:
            result = conn.run(etcdctl + ['endpoint', 'health', '--cluster',
                                         '-w', 'json'],
                              timeout=self.group.kubectl_timeout,
                              check=False)
            found = gates.parse_etcd_health(result.stdout, conn.host)
        except _READ_ERRORS as exc:
            LOG.info('etcd health not read on %s: %s', conn.host, exc)
            return None
        return [{'endpoint': e, 'healthy': ok, 'error': error}
                for e, ok, error in found]

    def _load_balancer(self, cluster):
        lb = cluster.external_lb
        settings = loadbalancer.ApplySettings.from_conf(
            self.conf, self.spec.external_lb.login.username)
        section = _section(host=lb and lb.ssh_address,
                           config_path=settings.config_path, stats=None,
                           backends=[])
        if lb is None:
            return _failed(section, 'no load balancer VM in the topology')
        try:
            conn = self._connection(lb)
            text = conn.read_file(settings.config_path, missing_ok=True)
        except _READ_ERRORS as exc:
            return _failed(section, exc)
        if text is None:
            return _failed(section, 'no HAProxy configuration at %s'
                           % settings.config_path)
        section['backends'] = parse_haproxy_servers(text)
        section['stats'] = self._add_health(conn, settings, section)
        return section

    def _add_health(self, conn, settings, section):
        """Each backend's status and check from ``show stat``; the
        socket's state: ``ok``, ``not configured`` or why not."""
        socket_path = self.group.haproxy_stats_socket
        for backend in section['backends']:
            backend.update(status=None, check=None)
        if not socket_path:
            return 'not configured (haproxy_stats_socket)'
        argv = (['sudo', '-n'] if settings.sudo else []) + [
            'python3', '-c', _SHOW_STAT, socket_path]
        try:
            result = conn.run(argv, timeout=settings.timeout, check=False)
            health = parse_show_stat(result.stdout) if result.ok else None
        except (ValueError, *_READ_ERRORS) as exc:
            return 'unavailable: %s' % exc
        if health is None:
            return 'unavailable: %s' % (result.tail(1) or 'no answer')
        for backend in section['backends']:
            backend['status'], backend['check'] = health.get(
                (backend['backend'], backend['server']), (None, None))
        return 'ok'

    def _certificates(self, cluster):
        """Each master's ``kubeadm certs check-expiration -o json``
        (:mod:`mgmt_driver.operations.certificates`); a master that cannot be
        read is named in the section's error, the others still shown."""
        argv = (['sudo', '-n'] if self._master_sudo() else []) + [
            self.group.kubeadm_command, *certificates.CHECK_ARGS]
        masters = []
        for node in cluster.masters:
            try:
                conn = self._connection(node)
                result = conn.run(argv, timeout=self.group.kubectl_timeout)
                masters.append(certificates.master_entry(
                    node.name, node.ssh_address, certificates.parse_expiration(
                        result.stdout, conn.host)))
            except _READ_ERRORS as exc:
                masters.append(certificates.master_entry(
                    node.name, node.ssh_address, error=read_error(exc)))
        return certificates.section(masters, self.group.cert_warn_days)

    def _ansible(self):
        login = self.spec.ansible.login
        return self.pool.connection(self.spec.ansible.ip_address,
                                    ssh.credentials_for(login), login.port)

    def _runs(self):
        logs = posixpath.join(self.workspace_path, LOGS_DIR)
        section = _section(host=self.spec.ansible.ip_address,
                           directory=logs, runs=[])
        try:
            result = self._ansible().run(programs.command(
                _RUNS, logs, str(RUNS_LISTED)))
        except _READ_ERRORS as exc:
            return _failed(section, exc)
        section['runs'] = parse_runs(result.stdout, logs)
        section['queue'] = self._queue()
        return section

    def _queue(self):
        """The playbook slots of the Ansible server account and the runs
        waiting for one (none without slots)."""
        limit = self.group.max_parallel_playbooks_per_server
        queue = {'slots': limit, 'slots_taken': None, 'waiting': [],
                 'error': None}
        if not limit:
            return queue
        try:
            result = self._ansible().run(programs.command(_QUEUE,
                                                          str(limit)))
        except _READ_ERRORS as exc:
            return dict(queue, error=str(exc))
        return dict(queue, **parse_queue(result.stdout,
                                         self.workspace_path))

    def _workspace(self):
        return kubespray.Workspace(self._ansible(), self.workspace_path)

    def _etcd_snapshots(self):
        """The etcd snapshots kept in the workspace, newest first
        (:mod:`mgmt_driver.operations.etcdsnapshots`); none is not a
        failure."""
        directory = etcdsnapshots.directory_of(self.workspace_path)
        section = _section(host=self.spec.ansible.ip_address,
                           directory=directory, items=[])
        try:
            found = etcdsnapshots.listing(self._ansible(), directory)
        except _READ_ERRORS as exc:
            return _failed(section, exc)
        # Their names' compact time, shown as every other time here.
        section['items'] = [dict(item, time=utctime.iso_utc(item['time']))
                            for item in found[::-1]]
        return section

    def _recorded_inventory(self):
        workspace = self._workspace()
        path = workspace.file(inventory.HOSTS_FILE)
        return inventory.parse_recorded(
            workspace.conn.read_file(path, missing_ok=True),
            workspace.conn.host, path)

    def _recorded_settings(self):
        return self._workspace().read_record(labels.RECORD_FILE,
                                             labels.parse_record)

    def _differences(self, report):
        section = _section(items=[])
        try:
            recorded = self._recorded_inventory()
        except _READ_ERRORS as exc:
            return _failed(section, 'the recorded inventory cannot be '
                                    'read: %s' % read_error(exc))
        if not recorded.hosts:
            return _failed(section, 'no inventory in the workspace %s '
                                    '(not instantiated?)'
                           % self.workspace_path)

        try:
            settings = self._recorded_settings()
            absent = self._workspace().read_record(absence.RECORD_FILE,
                                                   absence.parse_record)
        except _READ_ERRORS as exc:
            return _failed(section, 'the recorded labels, taints and '
                                    'absent workers cannot be read: %s'
                           % exc)

        def read(name, key):
            return report[name][key] if report[name]['ok'] else None
        section['items'] = differences(
            recorded, read('nodes', 'items'), read('etcd', 'members'),
            read('load_balancer', 'backends'), settings,
            read('etcd', 'health'), absent)
        section['ok'] = not section['items']
        return section


# ------------------------------------------------------- formatting --

def to_json(report):
    """The report as the documented JSON text (sorted keys)."""
    return json.dumps(report, indent=2, sort_keys=True)


def format_text(report):
    """The report as text for people: one block per section."""
    blocks = [_format_nodes(report['nodes']), _format_etcd(report['etcd']),
              certificates.format_section(report['certificates']),
              _format_lb(report['load_balancer']),
              _format_runs(report['playbook_runs']),
              _format_etcd_snapshots(report['etcd_snapshots']),
              _format_differences(report['differences'])]
    return '\n\n'.join(blocks) + '\n'


def _heading(title, section, where=None):
    line = title + (' (%s)' % where if where else '')
    if not section['ok']:
        return '%s\n  UNAVAILABLE: %s' % (line, section['error'])
    return line


def _table(rows, header):
    if not rows:
        return ['  (none)']
    widths = [max(len(str(r[i])) for r in [header] + rows)
              for i in range(len(header))]
    return ['  ' + '  '.join(str(v).ljust(w) for v, w in
                             zip(row, widths, strict=True)).rstrip()
            for row in [header] + rows]


def _format_nodes(section):
    head = _heading('Nodes', section, section['host'] and
                    'kubectl on %s' % section['host'])
    if not section['ok']:
        return head
    rows = [(n['name'], ','.join(n['roles']) or '-', _readiness(n),
             n['kubelet_version'] or '-',
             ','.join('%s=%s' % kv for kv in sorted(n['labels'].items())
                      if not kv[0].startswith('node-role.')) or '-',
             ','.join(n['taints']) or '-')
            for n in section['items']]
    return '\n'.join([head] + _table(
        rows, ('NAME', 'ROLES', 'READY', 'VERSION', 'LABELS', 'TAINTS')))


def _readiness(node):
    """``True``, or ``True,cordoned`` for a node marked unschedulable."""
    return node['ready'] + ('' if node['schedulable'] else ',cordoned')


def _format_etcd(section):
    head = _heading('etcd members', section, section['host'])
    if not section['ok']:
        return head
    rows = [(m['name'] or '(unstarted)', m['id'], ','.join(m['peer_urls']))
            for m in section['members']]
    return '\n'.join([head] + _table(rows, ('NAME', 'ID', 'PEER URLS')))


def _format_lb(section):
    head = _heading('Load balancer', section, section['host'] and
                    '%s:%s' % (section['host'], section['config_path']))
    if not section['ok']:
        return head
    rows = [(b['backend'], b['server'], b['address'], b['status'] or '-',
             b['check'] or '-') for b in section['backends']]
    return '\n'.join([head, '  health: %s' % section['stats']] + _table(
        rows, ('BACKEND', 'SERVER', 'ADDRESS', 'STATUS', 'CHECK')))


def _format_runs(section):
    head = _heading('Last playbook runs', section, section['directory'])
    if not section['ok']:
        return head
    rows = [(r['time'], r['operation'], r['playbook'], r['status'] + (
        ' (%d)' % r['exit_code'] if r['exit_code'] else ''), r['log'])
        for r in section['runs']]
    return '\n'.join([head] + _table(
        rows, ('TIME', 'OPERATION', 'PLAYBOOK', 'STATUS', 'LOG')) +
        _format_queue(section.get('queue')))


def _format_queue(queue):
    """The lines of the playbook slots' queue, or [] without slots."""
    if not queue or not queue['slots']:
        return []
    if queue['error']:
        return ['  Playbook slots: UNAVAILABLE: %s' % queue['error']]
    taken = '?' if queue['slots_taken'] is None else queue['slots_taken']
    head = ['  Playbook slots: %s of %s taken, %d run(s) waiting '
            '(max_parallel_playbooks_per_server)' % (
                taken, queue['slots'], len(queue['waiting']))]
    if not queue['waiting']:
        return head
    rows = [(w['position'], w['instance'] + (
        ' (this one)' if w['this_instance'] else ''), w['operation'],
        w['playbook'], w['priority'], w['arrived'])
        for w in queue['waiting']]
    return head + _table(rows, ('WAITING', 'INSTANCE', 'OPERATION',
                                'PLAYBOOK', 'PRIORITY', 'SINCE'))


def _format_etcd_snapshots(section):
    head = _heading('etcd snapshots', section, section['host'] and
                    '%s:%s' % (section['host'], section['directory']))
    if not section['ok']:
        return head
    rows = [(s['time'], s['reason'], str(s['bytes']), s['name'])
            for s in section['items']]
    return '\n'.join([head] + _table(rows, ('TIME', 'REASON', 'BYTES',
                                            'NAME')))


def _format_differences(section):
    head = 'Differences from the inventory'
    if section['error']:
        return '%s\n  UNKNOWN: %s' % (head, section['error'])
    if not section['items']:
        return head + '\n  none'
    return '\n'.join([head] + ['  %s %s: %s' % (d['kind'], d['name'],
                                                d['detail'])
                               for d in section['items']])
