"""HAProxy on the external load balancer VM: render, check, swap, reload.

Two layers:

* pure rendering: :class:`LbLayout` holds plain values (ports and
  ``(name, address)`` pairs), validates and sorts them;
  :func:`render_haproxy_config` turns it into the whole configuration file
  through ``templates/haproxy.cfg.j2``.  Same layout, same bytes.
* remote apply: :func:`apply_config` replaces the file on the LB VM over a
  :class:`mgmt_driver.remote.ssh.Connection` only when it changed, after
  ``haproxy -c`` accepted it, keeping the previous file as ``.bak``, and
  reloads HAProxy gracefully.  A refused configuration is never applied.

The API frontend forwards to every control-plane node's API server port
with a TCP health check; the NodePort frontend listens on the whole
NodePort range and forwards each connection to the same port of a worker
(a server without a port keeps the client's destination port).

One module of the gateway family: :mod:`mgmt_driver.remote.keepalived` builds
on the public helpers here (:data:`NAME_RE`, :func:`backends`,
:func:`reject_duplicates`, :data:`TEMPLATE_DIR`, :func:`config_argv`),
and :mod:`mgmt_driver.operations.gateways` holds the steps operations run on
the gateway VMs.
"""

import dataclasses
import functools
import ipaddress
import os
import re
import shlex

from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.common import safetext
from mgmt_driver.common import untrusted
from mgmt_driver.remote import programs

LOG = safetext.logger(__name__)

DEFAULT_API_PORT = 8383
DEFAULT_APISERVER_PORT = 6443
DEFAULT_NODEPORT_RANGE = (30000, 32767)
DEFAULT_CONFIG_PATH = '/etc/haproxy/haproxy.cfg'

#: The package's templates (HAProxy's here, keepalived's too).
TEMPLATE_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'templates')
_TEMPLATE_NAME = 'haproxy.cfg.j2'

#: A name HAProxy (and keepalived) accept: letters, digits and "-_.:"
#: (proxy and server names); Kubernetes node names (DNS-1123
#: subdomains) always fit.
NAME_RE = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.:-]{0,252}')
# chroot, user and group land verbatim in the file: no spaces, no quotes.
_WORD_RE = re.compile(r'[A-Za-z0-9_./-]+')


@dataclasses.dataclass(frozen=True, order=True)
class Backend:
    """One node behind the load balancer.

    :param name: the node name, used as the HAProxy server name.
    :param address: its IPv4 or IPv6 address (normalised by LbLayout).
    """

    name: str
    address: str

    def __iter__(self):  # unpacks like the (name, address) pair it models
        return iter((self.name, self.address))


def _invalid(reason, *args):
    return exceptions.LoadBalancerLayoutInvalid(reason=reason % args)


def _check_port(field, value):
    if isinstance(value, bool) or not isinstance(value, int) or not (
            1 <= value <= 65535):
        raise _invalid('%s: %r is not a TCP port (1-65535)', field, value)


def _check_seconds(field, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _invalid('%s: %r is not a positive number of seconds',
                       field, value)


def _parse_address(field, value):
    """The normalised text of an IP address (IPv6 compressed)."""
    try:
        if '%' in str(value):  # zone ids have no HAProxy server syntax
            raise ValueError(value)
        return str(ipaddress.ip_address(str(value)))
    except ValueError:
        raise _invalid('%s: %r is not an IP address', field, value)


def backends(field, nodes):
    """Validated Backends of *nodes* (pairs or Backends), sorted by name."""
    result = []
    for index, node in enumerate(nodes):
        where = '%s[%d]' % (field, index)
        try:
            if isinstance(node, (str, bytes)):  # "ab" would unpack
                raise TypeError(node)
            name, address = node
        except (TypeError, ValueError):
            raise _invalid('%s: %r is not a (name, address) pair',
                           where, node)
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise _invalid('%s.name: %r is not a valid node name (letters, '
                           'digits and "-_.:", at most 253 characters)',
                           where, name)
        result.append(Backend(name, _parse_address(where + '.address',
                                                   address)))
    reject_duplicates(field, [b.name for b in result], 'node name')
    reject_duplicates(field, [b.address for b in result], 'address')
    return tuple(sorted(result))


def reject_duplicates(field, values, what):
    """:raises LoadBalancerLayoutInvalid: a value of *values* twice,
    named as a *what* of *field*."""
    seen = set()
    for value in values:
        if value in seen:
            raise _invalid('%s: %s %r appears twice', field, what, value)
        seen.add(value)


def _default_binds(backends):
    """All IPv4 addresses, plus all IPv6 ones when a node is IPv6."""
    if any(':' in b.address for b in backends):
        return ('0.0.0.0', '::')
    return ('0.0.0.0',)


@dataclasses.dataclass(frozen=True)
class LbLayout:
    """Everything the HAProxy configuration depends on, validated.

    Node lists are given as ``(name, address)`` pairs (or
    :class:`Backend`) in any order and stored sorted by name, so the
    rendered file does not depend on the order nodes were listed in.

    :param control_plane: the control-plane nodes; at least one.
    :param workers: the worker nodes behind the NodePort range; with none
        the NodePort frontend is left out.
    :param api_port: port of the API frontend on the LB.
    :param apiserver_port: port of the API server on the nodes.
    :param nodeport_range: ``(first, last)`` NodePort, inclusive.
    :param bind_addresses: LB addresses to listen on; None means all IPv4
        addresses, plus all IPv6 ones when any node is IPv6.
    :param worker_check_port: port of a TCP health check of each worker
        (for example 10256, kube-proxy's health port); None: no check.
    :param maxconn: HAProxy's global and per-frontend connection limit.
    :param connect_timeout: seconds to connect to a node (and to check it).
    :param idle_timeout: seconds a connection may stay idle.
    :param hard_stop_after: seconds a process replaced by a reload may
        keep serving its established connections.
    :param user: system user HAProxy drops to, or None to stay as started.
    :param group: system group HAProxy drops to, or None.
    :param chroot: directory HAProxy chroots into, or None.
    :param stats_socket: path of a read-only runtime socket (``level
        user``: ``show stat`` and the like, no changes), or None.
    :raises LoadBalancerLayoutInvalid: naming the wrong field.
    """

    control_plane: tuple
    workers: tuple = ()
    api_port: int = DEFAULT_API_PORT
    apiserver_port: int = DEFAULT_APISERVER_PORT
    nodeport_range: tuple = DEFAULT_NODEPORT_RANGE
    bind_addresses: tuple | None = None
    worker_check_port: int | None = None
    maxconn: int = 20000
    connect_timeout: int = 5
    idle_timeout: int = 3600
    hard_stop_after: int = 3600
    user: str | None = 'haproxy'
    group: str | None = 'haproxy'
    chroot: str | None = '/var/lib/haproxy'
    stats_socket: str | None = None

    def __post_init__(self):
        set_ = functools.partial(object.__setattr__, self)
        set_('control_plane', backends('control_plane', self.control_plane))
        set_('workers', backends('workers', self.workers))
        if not self.control_plane:
            raise _invalid('control_plane: at least one control-plane node '
                           'is required')
        self._check_ports()
        set_('nodeport_range', tuple(self.nodeport_range))
        set_('bind_addresses', self._binds())
        for field in ('maxconn', 'connect_timeout', 'idle_timeout',
                      'hard_stop_after'):
            _check_seconds(field, getattr(self, field))
        for field in ('user', 'group', 'chroot', 'stats_socket'):
            value = getattr(self, field)
            if value is not None and not _WORD_RE.fullmatch(str(value)):
                raise _invalid('%s: %r is not a plain name or path',
                               field, value)

    def _check_ports(self):
        _check_port('api_port', self.api_port)
        _check_port('apiserver_port', self.apiserver_port)
        if self.worker_check_port is not None:
            _check_port('worker_check_port', self.worker_check_port)
        try:
            first, last = self.nodeport_range
        except (TypeError, ValueError):
            raise _invalid('nodeport_range: %r is not a (first, last) pair',
                           self.nodeport_range)
        _check_port('nodeport_range[0]', first)
        _check_port('nodeport_range[1]', last)
        if first > last:
            raise _invalid('nodeport_range: first port %d is above last '
                           'port %d', first, last)
        if self.workers and first <= self.api_port <= last:
            raise _invalid('api_port: %d lies inside nodeport_range %d-%d',
                           self.api_port, first, last)

    def _binds(self):
        if self.bind_addresses is None:
            return _default_binds(self.control_plane + self.workers)
        if isinstance(self.bind_addresses, str):
            raise _invalid('bind_addresses: give a list of addresses, not '
                           'the string %r', self.bind_addresses)
        addresses = {_parse_address('bind_addresses[%d]' % i, a)
                     for i, a in enumerate(self.bind_addresses)}
        if not addresses:
            raise _invalid('bind_addresses: at least one address is needed')
        return tuple(sorted(addresses, key=lambda a: (':' in a, a)))


def layout_for(lb_spec, cluster, **options):
    """The :class:`LbLayout` of a cluster's node set.

    :param lb_spec: the request's ``external_lb_param`` (an
        ``ExternalLbSpec``: ``api_port``, ``nodeport_range``).
    :param cluster: the node set (a ``ClusterNodes``: ``masters`` and
        ``workers``, each node with ``name`` and ``cluster_address``).
    :param options: any other :class:`LbLayout` field.
    :raises LoadBalancerLayoutInvalid: naming the wrong field.
    """
    return LbLayout(
        control_plane=[(n.name, n.cluster_address) for n in cluster.masters],
        workers=[(n.name, n.cluster_address) for n in cluster.workers],
        api_port=lb_spec.api_port, nodeport_range=lb_spec.nodeport_range,
        **options)


def layout_options(conf):
    """The :class:`LbLayout` fields that ``[kubespray_mgmt]`` options set.

    How HAProxy runs on the LB VM (addresses it binds, the user, group
    and chroot it drops to, its connection limit); an empty option means
    the field's "none" (all addresses, no user line, ...).

    :param conf: an ``oslo_config.cfg.ConfigOpts`` with the options of
        :mod:`mgmt_driver.common.conf` registered.
    :returns: keyword arguments for :func:`layout_for`.
    """
    group = conf.kubespray_mgmt
    return {'bind_addresses': tuple(group.haproxy_bind_addresses) or None,
            'user': group.haproxy_user or None,
            'group': group.haproxy_group or None,
            'chroot': group.haproxy_chroot or None,
            'maxconn': group.haproxy_maxconn,
            'stats_socket': group.haproxy_stats_socket or None}


def hostport(address, port):
    """``address:port`` in HAProxy syntax; IPv6 in brackets.

    :param address: a normalised IP address.
    :param port: a port, or None for the address alone (IPv6 still gets
        brackets, or HAProxy would read its last group as a port).
    """
    host = '[%s]' % address if ':' in address else address
    return host if port is None else '%s:%d' % (host, port)


def _bind_lines(layout, first, last):
    ports = str(first) if first == last else '%d-%d' % (first, last)
    # Linux lets "::" take IPv4 too; v6only keeps it off 0.0.0.0's ports.
    dual = '0.0.0.0' in layout.bind_addresses
    lines = []
    for address in layout.bind_addresses:
        line = '%s:%s' % (hostport(address, None), ports)
        if address == '::' and dual:
            line += ' v6only'
        lines.append(line)
    return lines


@functools.lru_cache(maxsize=1)
def _template():
    # Imported here: only an operation that configures the LB renders,
    # and jinja2 costs every process that imports this module otherwise.
    import jinja2
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATE_DIR),
        undefined=jinja2.StrictUndefined, autoescape=False,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters['hostport'] = hostport
    return env.get_template(_TEMPLATE_NAME)


def render_haproxy_config(layout):
    """The whole HAProxy configuration file for *layout*.

    :param layout: an :class:`LbLayout` (validated on construction).
    :returns: the file's text; equal layouts give equal text.
    """
    return _template().render(
        layout=layout, binds=functools.partial(_bind_lines, layout))


def render(control_plane, workers=(), **options):
    """Shortcut: :func:`render_haproxy_config` of ``LbLayout(...)``.

    :param control_plane: ``(name, address)`` pairs of control-plane nodes.
    :param workers: ``(name, address)`` pairs of workers.
    :param options: any other :class:`LbLayout` field.
    :raises LoadBalancerLayoutInvalid: naming the wrong field.
    """
    return render_haproxy_config(
        LbLayout(control_plane=control_plane, workers=workers, **options))


# ---------------------------------------------------------------- apply --

@dataclasses.dataclass(frozen=True)
class ApplySettings:
    """Where the configuration lives on the LB VM and how to reload it.

    :param config_path: the configuration file HAProxy loads.
    :param check_command: argv that checks a file; the path is appended.
    :param reload_command: argv that reloads HAProxy gracefully.
    :param sudo: run the program that installs it under ``sudo -n``.
    :param timeout: seconds per remote command (None: the connection's).
    :param program: whose configuration it is, for messages.
    :param mode: permission bits of the file (0600 when it holds a
        secret).  Files are compared on the LB VM, never read back.
    """

    config_path: str = DEFAULT_CONFIG_PATH
    check_command: tuple = ('haproxy', '-c', '-f')
    reload_command: tuple = ('systemctl', 'reload', 'haproxy')
    sudo: bool = False
    timeout: int | None = None
    program: str = 'HAProxy'
    mode: int = 0o644

    @property
    def temp_path(self):
        # Fixed name next to the target: same filesystem, so "mv" is an
        # atomic rename, and a retry overwrites what a crash left behind.
        # HAProxy reading a directory loads *.cfg files only.
        return self.config_path + '.new'

    @property
    def backup_path(self):
        return self.config_path + '.bak'

    @classmethod
    def from_conf(cls, conf, ssh_username='root'):
        """Settings from the ``[kubespray_mgmt]`` options of *conf*.

        :param conf: an ``oslo_config.cfg.ConfigOpts`` with the options
            of :mod:`mgmt_driver.common.conf` registered.
        :param ssh_username: the LB login user (``haproxy_sudo = auto``
            uses sudo for any user but root).
        """
        group = conf.kubespray_mgmt
        sudo = kconf.use_sudo(group.haproxy_sudo, ssh_username)
        return cls(config_path=group.haproxy_config_path,
                   check_command=config_argv('haproxy_check_command',
                                             group.haproxy_check_command),
                   reload_command=config_argv('haproxy_reload_command',
                                              group.haproxy_reload_command),
                   sudo=sudo, timeout=group.ssh_command_timeout)


def config_argv(option, text):
    """The command of the ``[kubespray_mgmt]`` *option* (*text*), as argv.

    :raises MgmtDriverParamInvalid: the option is empty.
    """
    argv = tuple(shlex.split(text or ''))
    if not argv:
        raise exceptions.MgmtDriverParamInvalid(
            message='[kubespray_mgmt] %s is empty' % option)
    return argv


def apply_config(conn, rendered, settings, secrets=()):
    """Install *rendered* as HAProxy's configuration and reload it, in
    one remote command (the program ``scripts/lb-apply.sh``).

    The new text goes to ``<path>.new`` (on standard input; under sudo
    the whole program runs as root) and is compared with the file there:
    the file's text never travels back, and nothing derived from it is
    on the command line (any user of the LB VM reads those).  An equal
    file: ``<path>.new`` is removed, nothing else done.  Otherwise the
    check command checks it, the old file is copied to ``<path>.bak``,
    the new one renamed into place and HAProxy reloaded.  If the reload
    fails the previous file is put back, so a retry tries again instead
    of finding nothing to do.

    :param conn: a :class:`mgmt_driver.remote.ssh.Connection` to the LB VM.
    :param rendered: the configuration text (see :func:`render`).
    :param settings: an :class:`ApplySettings` (the program, file and
        commands: HAProxy's by default).
    :param secrets: strings of *rendered* never to show: the command's
        output is scrubbed of them before it is logged or raised.
    :returns: True if the configuration was replaced and reloaded.
    :raises LoadBalancerConfigInvalid: the check refused the file; it was
        removed and the running configuration is untouched.
    :raises RemoteCommandFailed: a copy, rename or the reload failed.
    """
    result = _scrub(conn.run(
        apply_argv(settings), stdin=rendered,
        timeout=settings.timeout, check=False), secrets)
    marks = [line for line in result.stdout.splitlines()
             if line.startswith(_MARK)]
    if marks == ['KL:SAME'] and result.ok:
        LOG.info('%s configuration on %s is up to date', settings.program,
                 conn.host)
        return False
    if result.exit_code == _CHECK_REFUSED:
        _refused(conn, settings, result, marks)
    if result.failed:
        _failed(conn, settings, result, marks)
    LOG.info('%s configuration on %s replaced and reloaded',
             settings.program, conn.host)
    return True


#: The program that installs a configuration (``scripts/lb-apply.sh``).
APPLY = 'lb-apply'
_MARK = 'KL:'
_CHECK_REFUSED = 90


def apply_argv(settings):
    """The argv of :data:`APPLY` under *settings*, the whole program
    under ``sudo -n`` when *settings* say so.  The text goes on standard
    input; no word depends on it (the text may hold a secret)."""
    check = list(settings.check_command)
    prefix = ['sudo', '-n'] if settings.sudo else []
    return prefix + programs.command(
        APPLY, settings.config_path, '%04o' % settings.mode,
        str(len(check)), *check, *settings.reload_command)


def plan_change(argv):
    """How a dry run's summary shows an :data:`APPLY` command *argv*:
    the file it installs and the command that reloads it (the check
    only reads), or None for an argv of another shape.  Its arguments
    are found by the program (:func:`programs.args_of`), not by a place
    in *argv*: a wrapper before it moves them."""
    words = programs.args_of(argv) or []
    checks = untrusted.whole_number(words[2], 3) if len(words) >= 3 else None
    if checks is None:
        return None
    return 'install %s (mode %s, if it differs and passes its check), ' \
        'then %s' % (shlex.quote(words[0]), words[1], shlex.join(
            sudo_prefix(argv) + words[3 + checks:]))


def sudo_prefix(argv):
    """``['sudo', '-n']`` when a ``sudo -n`` comes before the program of
    *argv* (the reload then runs as root, as the whole program does),
    else ``[]``."""
    words = programs.args_of(argv) or []
    before = list(argv[:len(argv) - len(words)])
    return ['sudo', '-n'] if any(
        before[i:i + 2] == ['sudo', '-n'] for i in range(len(before))) \
        else []


def _refused(conn, settings, result, marks):
    """Raise the check's refusal: its output without the program's
    marks, its own exit status."""
    status = [m[len('KL:CHECKRC:'):] for m in marks
              if m.startswith('KL:CHECKRC:')]
    # A status is at most 3 digits; anything else is not the check's.
    rc = untrusted.whole_number(status[-1], 3) if status else None
    rc = result.exit_code if rc is None else rc
    check = dataclasses.replace(result, exit_code=rc, stdout=''.join(
        line for line in result.stdout.splitlines(keepends=True)
        if not line.startswith(_MARK)))
    LOG.error('%s refused the new configuration on %s: %s',
              settings.program, conn.host, check.tail(20))
    if 'KL:CLEANUP:FAILED' in marks:
        LOG.warning('Could not remove %s on %s', settings.temp_path,
                    conn.host)
    raise exceptions.LoadBalancerConfigInvalid(check, settings.temp_path,
                                               settings.program)


def _failed(conn, settings, result, marks):
    """Log which step failed (a reload: the previous file was put back)
    and raise ``RemoteCommandFailed``."""
    if 'KL:STEP:reload' in marks:
        LOG.error('%s reload failed on %s; putting the previous '
                  'configuration back', settings.program, conn.host)
    if 'KL:RESTORE:FAILED' in marks:
        LOG.error('Could not restore %s on %s', settings.config_path,
                  conn.host)
    raise exceptions.RemoteCommandFailed(result)


def _scrub(result, secrets):
    """*result* with every one of *secrets* in its output masked."""
    out, err = result.stdout, result.stderr
    for secret in secrets:
        if secret:
            out, err = (out.replace(secret, '***'),
                        err.replace(secret, '***'))
    return dataclasses.replace(result, stdout=out, stderr=err)
