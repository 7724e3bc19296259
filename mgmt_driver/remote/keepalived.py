"""keepalived on the gateways: one VRRP group holding the virtual IP.

With ``external_lb_param.vip`` set, several gateways (LB VMs) run the
same HAProxy configuration and keepalived moves the VIP to one of them
whose HAProxy answers.  Same two layers as
:mod:`mgmt_driver.remote.loadbalancer`:

* pure rendering: :class:`VrrpLayout` holds one gateway's values,
  validated; :func:`gateway_layouts` derives every gateway's layout from
  the gateway set (priorities by name, each gateway's peers are the
  others); :func:`render_keepalived_config` renders
  ``templates/keepalived.conf.j2``.
* remote apply: :func:`apply_gateway` installs HAProxy's file, then
  keepalived's, each checked (``haproxy -c``, ``keepalived -t``) before
  its own atomic swap; :func:`configure_gateways` does it on every
  gateway and raises once, naming each gateway that failed.

The VRRP password sits in keepalived's file only: the file is staged and
installed with mode 0600, compared on the gateway (``cmp``) instead of
read back, and the password is masked in whatever ``keepalived -t``
prints.  Neither it nor anything derived from it (a digest of the file)
appears on a command line.  Adverts go unicast to the peers (clouds drop
multicast); every gateway starts as BACKUP with ``nopreempt``, so a
healed gateway joins as BACKUP and the VIP does not move twice.
"""

import dataclasses
import functools
import ipaddress
import re

from mgmt_driver.common import exceptions
from mgmt_driver.common import safetext
from mgmt_driver.model import params
from mgmt_driver.remote import loadbalancer

LOG = safetext.logger(__name__)

DEFAULT_CONFIG_PATH = '/etc/keepalived/keepalived.conf'
INSTANCE_NAME = 'kube_gateways'
SCRIPT_NAME = 'chk_haproxy'
#: Priority of the first gateway by name; the next ones count down.
TOP_PRIORITY = 200
#: Stops keepalived on a gateway about to be deleted.
STOP_COMMAND = ('systemctl', 'stop', 'keepalived')
MAX_GATEWAYS = params.MAX_GATEWAYS

_TEMPLATE_NAME = 'keepalived.conf.j2'
# Linux interface names: at most 15 characters, no "/" and no blank.
_INTERFACE_RE = re.compile(r'[A-Za-z0-9_.:-]{1,15}')
# "2: eth0    inet 192.0.2.11/24 brd ..." ("veth0@if5" for a veth).
_ADDR_LINE_RE = re.compile(
    r'[0-9]{1,10}:\s+([A-Za-z0-9_.:-]{1,15})(?:@[A-Za-z0-9_.-]{1,32})?'
    r'\s+inet6?\s+([0-9A-Fa-f.:]{2,45})/([0-9]{1,3})\s')
_MAX_ADDR_OUTPUT = 4096
# What one gateway's SSH, commands or checks can raise.
_GATEWAY_ERRORS = (exceptions.MgmtDriverOtherError,
                   exceptions.MgmtDriverRemoteCommandError,
                   exceptions.MgmtDriverRemoteCommandTimeOut)


def _invalid(reason, *args):
    return exceptions.LoadBalancerLayoutInvalid(reason=reason % args)


def _address(field, value):
    try:
        if '%' in str(value):
            raise ValueError(value)
        return ipaddress.ip_address(str(value))
    except ValueError:
        raise _invalid('%s: %r is not an IP address', field, value)


def _bounded(field, value, low, high):
    if isinstance(value, bool) or not isinstance(value, int) or not (
            low <= value <= high):
        raise _invalid('%s: %r is not an integer from %d to %d',
                       field, value, low, high)


@dataclasses.dataclass(frozen=True)
class VrrpLayout:
    """What one gateway's keepalived configuration depends on, validated.

    :param name: the gateway's name (keepalived's ``router_id``).
    :param address: its own address (``unicast_src_ip``).
    :param peers: the other gateways' addresses, in any order (stored
        sorted); none for a lone gateway.
    :param interface: the interface holding *address*, where the VIP goes.
    :param prefix: the prefix length of that interface's network.
    :param vip: the virtual IP, same family as *address*.
    :param router_id: the VRRP ``virtual_router_id`` (1-255).
    :param priority: this gateway's VRRP priority (1-254).
    :param password: the VRRP password (``params``' rules).  Never in
        ``repr``.
    :param check_address: where the health check reaches HAProxy on the
        gateway itself.
    :param check_port: HAProxy's API frontend port.
    :param advert_int: seconds between VRRP adverts.
    :param check_interval: seconds between health checks.
    :param check_timeout: seconds one health check may take.
    :raises LoadBalancerLayoutInvalid: naming the wrong field.
    """

    name: str
    address: str
    peers: tuple
    interface: str
    prefix: int
    vip: str
    router_id: int
    priority: int
    password: str = dataclasses.field(repr=False)
    check_address: str = '127.0.0.1'
    check_port: int = loadbalancer.DEFAULT_API_PORT
    advert_int: int = 1
    check_interval: int = 1
    check_timeout: int = 2

    instance_name = INSTANCE_NAME
    script_name = SCRIPT_NAME

    def __post_init__(self):
        set_ = functools.partial(object.__setattr__, self)
        if not isinstance(self.name, str) or \
                not loadbalancer.NAME_RE.fullmatch(self.name):
            raise _invalid('name: %r is not a valid gateway name', self.name)
        own = _address('address', self.address)
        vip = _address('vip', self.vip)
        set_('address', str(own))
        set_('vip', str(vip))
        set_('peers', self._peers(own))
        set_('check_address', str(_address('check_address',
                                           self.check_address)))
        if vip.version != own.version:
            raise _invalid('vip: %s and the gateway address %s are not of '
                           'the same IP version', vip, own)
        if vip == own or str(vip) in self.peers:
            raise _invalid('vip: %s is a gateway\'s own address', vip)
        self._check_numbers(own.max_prefixlen)
        if not isinstance(self.interface, str) or \
                not _INTERFACE_RE.fullmatch(self.interface):
            raise _invalid('interface: %r is not an interface name',
                           self.interface)
        if not isinstance(self.password, str) or \
                not params.VRRP_PASSWORD_RE.fullmatch(self.password):
            raise _invalid('password: not 1 to 8 characters among letters, '
                           'digits and "%s"', params.VRRP_PASSWORD_PUNCT)

    def _peers(self, own):
        if isinstance(self.peers, str):
            raise _invalid('peers: give a list of addresses, not a string')
        peers = [_address('peers[%d]' % i, p)
                 for i, p in enumerate(self.peers)]
        for peer in peers:
            if peer.version != own.version:
                raise _invalid('peers: %s is not of the IP version of %s',
                               peer, own)
        if own in peers:
            raise _invalid('peers: %s is the gateway\'s own address', own)
        loadbalancer.reject_duplicates('peers', [str(p) for p in peers],
                                       'address')
        return tuple(str(p) for p in sorted(peers))

    def _check_numbers(self, max_prefix):
        _bounded('prefix', self.prefix, 1, max_prefix)
        _bounded('router_id', self.router_id, 1, 255)
        _bounded('priority', self.priority, 1, 254)
        _bounded('check_port', self.check_port, 1, 65535)
        for field in ('advert_int', 'check_interval', 'check_timeout'):
            _bounded(field, getattr(self, field), 1, 255)

    @property
    def check_command(self):
        """The health check: a TCP connect to HAProxy's API frontend.

        A connection, not a process lookup: a gateway that shares its
        process table (a container, a network namespace) or whose HAProxy
        runs but no longer listens fails it too.
        """
        host = self.check_address
        return "/bin/bash -c '</dev/tcp/%s/%d'" % (host, self.check_port)


def check_address(bind_addresses):
    """Where a gateway reaches its own HAProxy, from HAProxy's binds.

    :param bind_addresses: :attr:`LbLayout.bind_addresses`.
    :returns: loopback for a wildcard bind, else the first address.
    """
    if '0.0.0.0' in bind_addresses:
        return '127.0.0.1'
    if '::' in bind_addresses:
        return '::1'
    return bind_addresses[0]


def gateway_layouts(gateways, interfaces, lb_spec, check_at='127.0.0.1',
                    **options):
    """The :class:`VrrpLayout` of every gateway of a VRRP group.

    Priorities follow the gateways' names: the first name gets
    :data:`TOP_PRIORITY`, the next one less, and so on, so the same set
    gives the same files whatever order it was listed in.

    :param gateways: ``(name, address)`` pairs of the gateways.
    :param interfaces: ``{name: (interface, prefix)}`` of each gateway
        (see :func:`discover_interface`).
    :param lb_spec: the request's ``ExternalLbSpec`` (``vip``,
        ``vrrp_router_id``, ``vrrp_password``, ``api_port``).
    :param check_at: :func:`check_address` of HAProxy's binds.
    :param options: other :class:`VrrpLayout` fields (``advert_int``...).
    :returns: ``{name: VrrpLayout}``.
    :raises LoadBalancerLayoutInvalid: naming the wrong field.
    """
    if not lb_spec.highly_available:
        raise _invalid('vip: external_lb_param.vip is not set')
    backends = loadbalancer.backends('gateways', gateways)
    if not backends or len(backends) > MAX_GATEWAYS:
        raise _invalid('gateways: %d gateway(s); 1 to %d are supported',
                       len(backends), MAX_GATEWAYS)
    result = {}
    for index, gateway in enumerate(backends):
        interface, prefix = _interface_of(interfaces, gateway.name)
        result[gateway.name] = VrrpLayout(
            name=gateway.name, address=gateway.address,
            peers=[g.address for g in backends if g is not gateway],
            interface=interface, prefix=prefix, vip=lb_spec.vip,
            router_id=lb_spec.vrrp_router_id,
            priority=TOP_PRIORITY - index, password=lb_spec.vrrp_password,
            check_address=check_at, check_port=lb_spec.api_port, **options)
    return result


def _interface_of(interfaces, name):
    try:
        interface, prefix = interfaces[name]
    except (KeyError, TypeError, ValueError):
        raise _invalid('interfaces: no (interface, prefix) for gateway %r',
                       name)
    return interface, prefix


@functools.lru_cache(maxsize=1)
def _template():
    import jinja2  # as loadbalancer._template: only a render needs it
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(loadbalancer.TEMPLATE_DIR),
        undefined=jinja2.StrictUndefined, autoescape=False,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    return env.get_template(_TEMPLATE_NAME)


def render_keepalived_config(layout):
    """keepalived's whole configuration file for one gateway.

    :param layout: a :class:`VrrpLayout` (validated on construction).
    :returns: the file's text (it holds the password: keep it 0600).
    """
    return _template().render(layout=layout)


# ---------------------------------------------------------------- remote --

def discover_interface(conn, address, settings=None):
    """The interface holding *address* on a gateway, and its prefix.

    :param conn: a :class:`mgmt_driver.remote.ssh.Connection` to the gateway.
    :param address: the gateway's cluster address.
    :param settings: its
    :class:`~mgmt_driver.remote.loadbalancer.ApplySettings`
        (for the command timeout), or None.
    :returns: ``(interface, prefix length)``.
    :raises RemoteDataInvalid: no interface of the gateway has *address*.
    """
    timeout = settings.timeout if settings else None
    result = conn.run(['ip', '-o', 'addr', 'show', 'to', str(address)],
                      timeout=timeout)
    for line in result.stdout[:_MAX_ADDR_OUTPUT].splitlines():
        match = _ADDR_LINE_RE.match(line.strip() + ' ')
        if match and _same_address(match.group(2), address):
            return match.group(1), int(match.group(3))
    raise exceptions.RemoteDataInvalid(
        host=conn.host, what='"ip -o addr show" output',
        problem='no interface has the address %s' % address)


def _same_address(text, address):
    try:
        return ipaddress.ip_address(text) == ipaddress.ip_address(address)
    except ValueError:
        return False


def apply_settings(haproxy_settings, **overrides):
    """keepalived's :class:`~mgmt_driver.remote.loadbalancer.ApplySettings`.

    :param haproxy_settings: HAProxy's settings on the same gateways
        (whether to use sudo, the command timeout).
    :param overrides: other fields (``config_path``, ``reload_command``
        ...), for tests and unusual hosts.
    """
    fields = {'config_path': DEFAULT_CONFIG_PATH,
              'check_command': ('keepalived', '-t', '-f'),
              # Starts keepalived on a gateway where it is not running yet.
              'reload_command': ('systemctl', 'reload-or-restart',
                                 'keepalived'),
              'sudo': haproxy_settings.sudo,
              'timeout': haproxy_settings.timeout,
              'program': 'keepalived', 'mode': 0o600}
    fields.update(overrides)
    return loadbalancer.ApplySettings(**fields)


def settings_from_conf(conf, haproxy_settings):
    """keepalived's ``ApplySettings`` from the ``[kubespray_mgmt]``
    options of *conf* (``keepalived_config_path``, ``*_check_command``,
    ``*_reload_command``).

    :param haproxy_settings: HAProxy's settings on the same gateways
        (sudo, timeout).
    :raises MgmtDriverParamInvalid: a command option is empty.
    """
    group = conf.kubespray_mgmt
    return apply_settings(
        haproxy_settings, config_path=group.keepalived_config_path,
        check_command=loadbalancer.config_argv(
            'keepalived_check_command', group.keepalived_check_command),
        reload_command=loadbalancer.config_argv(
            'keepalived_reload_command', group.keepalived_reload_command))


def stop_command_from_conf(conf):
    """``keepalived_stop_command`` of *conf*, as argv.

    :raises MgmtDriverParamInvalid: the option is empty.
    """
    return loadbalancer.config_argv(
        'keepalived_stop_command',
        conf.kubespray_mgmt.keepalived_stop_command)


def apply_gateway(conn, haproxy_text, layout, haproxy_settings,
                  keepalived_settings):
    """Put HAProxy's and keepalived's files on one gateway and reload.

    HAProxy first: a gateway whose keepalived tracks an HAProxy that is
    not configured yet would only fail its health check.

    :returns: ``(haproxy changed, keepalived changed)``.
    :raises LoadBalancerConfigInvalid: a check refused a file; that
        program's running configuration is untouched.
    """
    haproxy = loadbalancer.apply_config(conn, haproxy_text, haproxy_settings)
    vrrp = loadbalancer.apply_config(
        conn, render_keepalived_config(layout), keepalived_settings,
        secrets=(layout.password,))
    return haproxy, vrrp


def configure_gateways(connections, haproxy_text, layouts, haproxy_settings,
                       keepalived_settings):
    """:func:`apply_gateway` on every gateway; one error for all failures.

    Every gateway is tried even when one fails, so one broken gateway
    does not leave the others with stale peers.

    :param connections: ``{name: Connection}`` of the gateways.
    :param layouts: ``{name: VrrpLayout}`` (:func:`gateway_layouts`).
    :param haproxy_settings: an ``ApplySettings``, or ``{name:
        ApplySettings}`` when the gateways differ.
    :param keepalived_settings: likewise (:func:`apply_settings`).
    :returns: ``{name: (haproxy changed, keepalived changed)}``.
    :raises GatewaysFailed: naming each gateway that failed and why.
    """
    changed, failed = {}, {}
    for name in sorted(layouts):
        try:
            changed[name] = apply_gateway(
                connections[name], haproxy_text, layouts[name],
                _of(haproxy_settings, name), _of(keepalived_settings, name))
        except _GATEWAY_ERRORS as exc:
            LOG.error('Gateway %s failed: %s', name, exc)
            failed[name] = exc
    if failed:
        raise exceptions.GatewaysFailed(failed, len(layouts))
    return changed


def update_gateways(connections, gateways, haproxy_text, lb_spec,
                    haproxy_settings, keepalived_settings, check_at):
    """The driver's gateway step: find each gateway's interface, derive
    every layout, and :func:`configure_gateways`.

    :param connections: ``{name: Connection}`` of the gateways.
    :param gateways: ``(name, address)`` pairs (cluster addresses).
    :param haproxy_text: the HAProxy file every gateway gets.
    :param lb_spec: the request's ``ExternalLbSpec`` (with ``vip``).
    :param haproxy_settings: an ``ApplySettings`` or ``{name: ...}``.
    :param keepalived_settings: likewise (:func:`apply_settings`).
    :param check_at: :func:`check_address` of HAProxy's binds.
    :returns: ``{name: (haproxy changed, keepalived changed)}``.
    :raises LoadBalancerLayoutInvalid: the gateway set is wrong.
    :raises RemoteDataInvalid: a gateway lacks its address.
    :raises GatewaysFailed: naming each gateway that failed.
    """
    interfaces = {name: discover_interface(
        connections[name], address, _of(haproxy_settings, name))
        for name, address in gateways}
    layouts = gateway_layouts(gateways, interfaces, lb_spec,
                              check_at=check_at)
    return configure_gateways(connections, haproxy_text, layouts,
                              haproxy_settings, keepalived_settings)


def stop(conn, settings, command=STOP_COMMAND):
    """Stop keepalived on a leaving gateway: it gives the VIP up and a
    peer takes it over while the VM still exists.

    :param settings: keepalived's ``ApplySettings`` (:func:`apply_settings`:
        sudo, timeout).
    :param command: the stop command (argv), for unusual hosts and tests.
    """
    conn.run((['sudo', '-n'] if settings.sudo else []) + list(command),
             timeout=settings.timeout)


def _of(settings, name):
    return settings[name] if isinstance(settings, dict) else settings
