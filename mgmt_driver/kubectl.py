"""kubectl on a control-plane node (or the LB VM) over one SSH connection.

:class:`KubectlClient` asks about nodes, cordons, drains, waits for pods
to leave a node and deletes nodes; each call is one remote command
(polls one command per attempt), with waits done by polling with
exponential backoff up to a deadline, never by fixed sleeps.  It also
creates the admin ServiceAccount the VIM registration needs and reads its
token from an explicit ``kubernetes.io/service-account-token`` Secret,
which works on Kubernetes 1.24 and newer (no auto-created token Secrets).
The token only ever travels in a command's standard output: it is never
on a command line, in a log record or in an exception message.
:func:`first_reachable` picks the first control-plane host that answers.
"""

import base64
import binascii
import dataclasses
import json
import re
import time

from oslo_log import log as logging

from mgmt_driver import conf as kconf
from mgmt_driver import exceptions

LOG = logging.getLogger(__name__)

_NOT_FOUND = re.compile(r'\(NotFound\)|\b[a-z]+ "[^"]*" not found')
_DNS_LABEL = re.compile(r'^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$')
_NODE_NAME = re.compile(r'^[A-Za-z0-9]([-A-Za-z0-9_.]{0,251}[A-Za-z0-9])?$')
_MIRROR_ANNOTATION = 'kubernetes.io/config.mirror'
_DONE_PHASES = ('Succeeded', 'Failed')

#: Seconds an SSH command may run past kubectl's own ``--timeout``.
DRAIN_MARGIN = 60


@dataclasses.dataclass(frozen=True)
class KubectlSettings:
    """Timeouts and polling policy; :meth:`from_conf` reads the options.

    :param command_timeout: seconds for one kubectl command but drain.
    :param drain_timeout: kubectl drain ``--timeout`` in seconds.
    :param poll_initial_delay: first delay between two polls (s).
    :param poll_max_delay: upper bound of the doubling delay (s).
    """

    command_timeout: float = 120
    drain_timeout: float = 600
    poll_initial_delay: float = 1.0
    poll_max_delay: float = 10.0

    @classmethod
    def from_conf(cls, conf=None):
        """Settings from ``[kubespray_mgmt]`` of *conf* (default global)."""
        group = (conf or kconf.CONF).kubespray_mgmt
        return cls(command_timeout=group.kubectl_timeout,
                   drain_timeout=group.drain_timeout,
                   poll_initial_delay=group.poll_initial_delay,
                   poll_max_delay=group.poll_max_delay)


def poll(probe, timeout, settings, sleep=time.sleep, clock=time.monotonic):
    """Call *probe* until it reports done or *timeout* seconds pass.

    The delay starts at ``poll_initial_delay`` and doubles up to
    ``poll_max_delay``; the last sleep never goes past the deadline, and
    the probe runs once more at the deadline.

    :param probe: returns ``(done, state)``.
    :returns: ``(done, state)`` of the last call.
    """
    deadline = clock() + timeout
    delay = settings.poll_initial_delay
    while True:
        done, state = probe()
        remaining = deadline - clock()
        if done or remaining <= 0:
            return done, state
        sleep(min(delay, remaining))
        delay = min(delay * 2, settings.poll_max_delay)


@dataclasses.dataclass(frozen=True, repr=False)
class AdminCredentials:
    """A bearer token for the cluster and the cluster CA (PEM).

    ``repr`` and ``str`` never show the token.
    """

    token: str
    ca_cert: str

    def __repr__(self):
        return '<AdminCredentials token=*** ca_cert=%d chars>' % len(
            self.ca_cert)

    __str__ = __repr__


def _check_node_name(name):
    if not isinstance(name, str) or not _NODE_NAME.match(name):
        raise exceptions.MgmtDriverParamInvalid(
            param='Kubernetes node name %r' % (name,))
    return name


def _check_label(value, what):
    if not isinstance(value, str) or not _DNS_LABEL.match(value):
        raise exceptions.MgmtDriverParamInvalid(
            param='%s %r (a DNS label: lower-case letters, digits and '
                  '"-")' % (what, value))
    return value


def _is_evacuated(pod):
    """True for pods that need not leave a drained node."""
    meta = pod.get('metadata') or {}
    owners = meta.get('ownerReferences') or []
    if any(owner.get('kind') == 'DaemonSet' for owner in owners):
        return True
    if _MIRROR_ANNOTATION in (meta.get('annotations') or {}):
        return True  # static pod: the kubelet runs it, not the API
    return (pod.get('status') or {}).get('phase') in _DONE_PHASES


def admin_manifest(name='tacker-admin', namespace='kube-system',
                   secret_name=None):
    """The ServiceAccount, ClusterRoleBinding and token Secret.

    :param name: ServiceAccount and ClusterRoleBinding name.
    :param namespace: namespace of the ServiceAccount and Secret.
    :param secret_name: default ``<name>-token``.
    :returns: a JSON ``List`` document for ``kubectl apply -f -``.
    """
    secret_name = secret_name or name + '-token'
    documents = [
        {'apiVersion': 'v1', 'kind': 'ServiceAccount',
         'metadata': {'name': name, 'namespace': namespace}},
        {'apiVersion': 'rbac.authorization.k8s.io/v1',
         'kind': 'ClusterRoleBinding',
         'metadata': {'name': name},
         'roleRef': {'apiGroup': 'rbac.authorization.k8s.io',
                     'kind': 'ClusterRole', 'name': 'cluster-admin'},
         'subjects': [{'kind': 'ServiceAccount', 'name': name,
                       'namespace': namespace}]},
        # Since Kubernetes 1.24 no token Secret is created for a
        # ServiceAccount; an explicit one is filled by the token
        # controller and lives as long as the Secret.
        {'apiVersion': 'v1', 'kind': 'Secret',
         'type': 'kubernetes.io/service-account-token',
         'metadata': {'name': secret_name, 'namespace': namespace,
                      'annotations': {
                          'kubernetes.io/service-account.name': name}}},
    ]
    # One JSON "List": every kubectl reads it, no YAML parser needed.
    return json.dumps({'apiVersion': 'v1', 'kind': 'List',
                       'items': documents}, indent=2) + '\n'


class KubectlClient:
    """kubectl commands on one host.

    :param conn: an ``ssh.Connection`` to a control-plane node or LB.
    :param kubectl: the kubectl command or path on that host.
    :param kubeconfig: ``--kubeconfig`` path on that host, or None.
    :param sudo: run kubectl under ``sudo -n`` (e.g. to read
        ``/etc/kubernetes/admin.conf``).
    :param settings: :class:`KubectlSettings` (default: from conf).
    :param sleep: sleep function between polls (tests pass a fake).
    :param clock: monotonic clock for deadlines (tests pass a fake).
    """

    def __init__(self, conn, kubectl='kubectl', kubeconfig=None, sudo=False,
                 settings=None, sleep=time.sleep, clock=time.monotonic):
        self.conn = conn
        self.kubectl = kubectl
        self.kubeconfig = kubeconfig
        self.sudo = sudo
        self.settings = settings or KubectlSettings.from_conf()
        self._sleep = sleep
        self._clock = clock

    def __repr__(self):
        return '<KubectlClient on %s>' % self.conn.host

    def argv(self, *args):
        """The argv of ``kubectl <args>`` with sudo and kubeconfig."""
        argv = ['sudo', '-n'] if self.sudo else []
        argv.append(self.kubectl)
        if self.kubeconfig:
            argv += ['--kubeconfig', self.kubeconfig]
        return argv + list(args)

    def _run(self, *args, timeout=None, check=True, stdin=None):
        return self.conn.run(self.argv(*args),
                             timeout=timeout or self.settings.command_timeout,
                             check=check, stdin=stdin)

    def _json(self, *args):
        result = self._run(*args, '-o', 'json')
        try:
            data = json.loads(result.stdout)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise exceptions.MgmtDriverOtherError(
                error_message='kubectl %s on %s printed no JSON object'
                              % (' '.join(args), self.conn.host))
        return data

    # Nodes.

    def node_names(self):
        """Names of all nodes of the cluster: one command."""
        items = self._json('get', 'nodes').get('items') or []
        return [item['metadata']['name'] for item in items]

    def node_exists(self, name):
        """Whether node *name* is registered: one command."""
        result = self._run('get', 'node', _check_node_name(name),
                           '--ignore-not-found', '-o', 'name')
        return bool(result.stdout.strip())

    def _on_node(self, name, *args, timeout=None):
        """Run a node command; False if the node does not exist."""
        result = self._run(*args, timeout=timeout, check=False)
        if result.ok:
            return True
        if _NOT_FOUND.search(result.stderr):
            LOG.info('Node %s is not registered (kubectl %s on %s); '
                     'nothing to do', name, args[0], self.conn.host)
            return False
        raise exceptions.RemoteCommandFailed(result)

    def cordon(self, name):
        """Mark node *name* unschedulable: one command.

        :returns: False when the node does not exist (nothing to do).
        :raises RemoteCommandFailed: kubectl failed for another reason.
        """
        return self._on_node(name, 'cordon', _check_node_name(name))

    def drain(self, name, timeout=None, force=True, grace_period=None):
        """Evict the pods of node *name* (cordons it first): one command.

        ``--ignore-daemonsets`` (DaemonSet pods stay until the node goes),
        ``--delete-emptydir-data`` (emptyDir data dies with the node
        anyway) and, unless *force* is False, ``--force``: pods that no
        controller manages would block the drain forever, and they are
        lost with the VM in any case.

        :param timeout: kubectl ``--timeout`` (default: drain_timeout).
        :param grace_period: ``--grace-period`` seconds, or None for the
            pods' own.
        :returns: False when the node does not exist (nothing to do).
        :raises RemoteCommandFailed: the drain failed or timed out (for
            example a PodDisruptionBudget never allowed an eviction).
        """
        timeout = int(timeout or self.settings.drain_timeout)
        args = ['drain', _check_node_name(name), '--ignore-daemonsets',
                '--delete-emptydir-data']
        if force:
            args.append('--force')
        if grace_period is not None:
            args.append('--grace-period=%d' % int(grace_period))
        args.append('--timeout=%ds' % timeout)
        return self._on_node(name, *args, timeout=timeout + DRAIN_MARGIN)

    def pods_left(self, name):
        """Pods on node *name* that a drain must evict: one command.

        DaemonSet pods, static (mirror) pods and finished pods are not
        counted.

        :returns: ``namespace/name`` strings, sorted.
        """
        data = self._json('get', 'pods', '-A', '--field-selector',
                          'spec.nodeName=' + _check_node_name(name))
        return sorted(
            '%s/%s' % (pod['metadata'].get('namespace', ''),
                       pod['metadata']['name'])
            for pod in data.get('items') or [] if not _is_evacuated(pod))

    def wait_evacuated(self, name, timeout=None):
        """Poll until no pod but DaemonSet/static ones runs on *name*.

        One command per poll, with exponential backoff.

        :param timeout: seconds (default: drain_timeout).
        :raises WaitTimedOut: pods are still there at the deadline; the
            message names them.
        """
        timeout = timeout or self.settings.drain_timeout

        def probe():
            pods = self.pods_left(name)
            return not pods, pods

        done, pods = poll(probe, timeout, self.settings, self._sleep,
                          self._clock)
        if not done:
            raise exceptions.WaitTimedOut(
                timeout=timeout, host=self.conn.host,
                what='the pods to leave node %s' % name,
                detail='%d pod(s) left: %s' % (len(pods), ', '.join(pods)))
        LOG.info('Node %s has no pod left to evacuate', name)

    def delete_node(self, name):
        """Delete node *name*; an absent node is fine: one command."""
        self._run('delete', 'node', _check_node_name(name),
                  '--ignore-not-found')
        LOG.info('Node %s deleted (or already absent)', name)

    # Admin credentials for the VIM.

    def ensure_admin_account(self, name='tacker-admin',
                             namespace='kube-system', secret_name=None):
        """Apply the admin ServiceAccount, binding and token Secret.

        Idempotent (``kubectl apply``), one command; the manifest goes on
        standard input.
        """
        manifest = admin_manifest(_check_label(name, 'account name'),
                                  _check_label(namespace, 'namespace'),
                                  secret_name and _check_label(
                                      secret_name, 'secret name'))
        self._run('apply', '-f', '-', stdin=manifest)
        LOG.info('Admin ServiceAccount %s/%s applied on %s', namespace,
                 name, self.conn.host)

    def admin_credentials(self, name='tacker-admin',
                          namespace='kube-system', secret_name=None,
                          timeout=None):
        """Ensure the admin account, then read its token and the CA.

        One ``apply`` command, then one ``get secret`` per poll until
        the token controller has filled the Secret.

        :param timeout: seconds to wait for the token (default:
            kubectl_timeout).
        :returns: :class:`AdminCredentials`.
        :raises WaitTimedOut: the Secret got no token in time.
        """
        secret_name = secret_name or name + '-token'
        self.ensure_admin_account(name, namespace, secret_name)
        timeout = timeout or self.settings.command_timeout
        done, creds = poll(
            lambda: self._read_token(secret_name, namespace), timeout,
            self.settings, self._sleep, self._clock)
        if not done:
            raise exceptions.WaitTimedOut(
                timeout=timeout, host=self.conn.host,
                what='the token of Secret %s/%s' % (namespace, secret_name),
                detail='the token controller has not filled it; is '
                       'kube-controller-manager running?')
        LOG.info('Read the admin token of %s/%s on %s', namespace, name,
                 self.conn.host)
        return creds

    def _read_token(self, secret_name, namespace):
        """``(True, AdminCredentials)`` once the Secret holds a token."""
        try:
            result = self._run('get', 'secret', secret_name, '-n',
                               namespace, '-o', 'json', check=False)
        except exceptions.RemoteCommandTimedOut as exc:
            # Partial output could hold the token: keep it out.
            raise exceptions.RemoteCommandTimedOut(
                dataclasses.replace(exc.result, stdout=''), exc.timeout)
        if result.failed:
            if _NOT_FOUND.search(result.stderr):
                return False, None
            # Keep stdout out of the error: it could hold the token.
            raise exceptions.RemoteCommandFailed(
                dataclasses.replace(result, stdout=''))
        data = _secret_data(result.stdout, secret_name, self.conn.host)
        if not data.get('token') or not data.get('ca.crt'):
            return False, None
        return True, AdminCredentials(
            token=_b64(data['token'], 'token', secret_name),
            ca_cert=_b64(data['ca.crt'], 'ca.crt', secret_name))


def _secret_data(stdout, secret_name, host):
    try:
        return json.loads(stdout).get('data') or {}
    except (ValueError, AttributeError):
        raise exceptions.MgmtDriverOtherError(
            error_message='kubectl get secret %s on %s printed no valid '
                          'JSON' % (secret_name, host))


def _b64(value, key, secret_name):
    try:
        return base64.b64decode(value, validate=True).decode('utf-8')
    except (binascii.Error, UnicodeDecodeError):
        raise exceptions.MgmtDriverOtherError(
            error_message='field %s of Secret %s is not valid base64 text'
                          % (key, secret_name))


# Errors that mean "try the next host".
_HOST_ERRORS = (exceptions.SSHConnectError, exceptions.SSHAuthError,
                exceptions.HostKeyUnknown, exceptions.HostKeyChanged,
                exceptions.RemoteCommandFailed,
                exceptions.RemoteCommandTimedOut)


def first_reachable(connections, command=('kubectl', 'version', '--client'),
                    timeout=30):
    """The first connection on which *command* succeeds.

    :param connections: ``ssh.Connection`` objects, in preference order
        (control-plane nodes, then perhaps the LB).
    :param command: a cheap argv that proves the host is usable.
    :param timeout: seconds for the command on each host.
    :returns: the first connection that ran *command* successfully;
        one command per host tried.
    :raises NoReachableHost: none did; names every host and why.
    """
    tried = []
    for conn in connections:
        try:
            conn.run(list(command), timeout=timeout)
            return conn
        except _HOST_ERRORS as exc:
            LOG.warning('%s cannot run %s: %s', conn.host, command[0], exc)
            tried.append('%s (%s)' % (conn.host, exc))
    raise exceptions.NoReachableHost(
        what=' '.join(command), tried='; '.join(tried) or 'no host')


def client_on_first_reachable(connections, **kwargs):
    """A :class:`KubectlClient` on the first host where kubectl runs.

    :param kwargs: :class:`KubectlClient` arguments (kubectl, sudo, ...).
    :raises NoReachableHost: no host could run ``kubectl version
        --client``.
    """
    client = KubectlClient(None, **kwargs)
    client.conn = first_reachable(
        connections, command=client.argv('version', '--client'))
    return client
