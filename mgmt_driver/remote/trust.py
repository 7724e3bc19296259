"""What the operator lets a tenant's request use on the conductor host.

A request (``additionalParams``) comes from a tenant; the conductor host,
its files and the ``[kubespray_mgmt]`` options belong to the operator
(see doc/source/security/threat-model.rst).  :func:`apply` runs after
:mod:`mgmt_driver.model.params` has checked the request's shape and before any
remote work, and decides three things:

* **key files**: a role's ``ssh_key_file`` is read only from a directory
  the operator listed (``ssh_key_dirs``) or, when relative, from the
  instance's own VNF package; the resolved path must stay inside it
  (links are resolved first), be a regular file of at most
  :data:`MAX_KEY_BYTES` and parse as a private key.  Every refusal has
  the same text, so a tenant learns nothing about the conductor's files.
  The key text is then carried in the spec: nothing reads the file again.
* **the operator's default key** (``ssh_private_key_file``) is used for
  the driver's own logins, but copied to the Ansible server (so that
  Ansible logs in to the nodes with it) only when that server is in
  ``default_key_ansible_servers``; and it logs in to an address the
  request names (``ansible.ip_address``, a ``nodes`` entry's ``ssh_ip``)
  only when the operator lists that address in
  ``default_key_login_hosts`` (an Ansible server in
  ``default_key_ansible_servers`` too).  VMs found in Heat need no
  entry only when the VIM Heat was reached through is the operator's: its
  auth URL is in ``trusted_vim_auth_urls`` (:func:`check_heat_logins`).
  A tenant chooses its VIM (v2's inline ``vimConnectionInfo``, a v1 VIM
  it registered), and a Heat of its own can name any address.
* **extra vars**: names the operator denies (``extra_vars_denied``) or
  does not allow (``extra_vars_allowed``) are refused.

``kubespray-mgmt`` passes ``trusted_paths=True``: whoever runs it wrote
the parameter file on their own machine, so key files may be anywhere
(they are still size-capped and must parse as keys).
"""

import dataclasses
import fnmatch
import ipaddress
import os
import stat
import urllib.parse

from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.model import validation
from mgmt_driver.remote import ssh

#: A private key file is at most this long (a 16384-bit RSA key in PEM is
#: about 12.5 KiB); anything longer is not a key.
MAX_KEY_BYTES = 64 * 1024

_REFUSED = ('is not a private key file the driver may read: give a path in '
            'a directory the operator allows ([kubespray_mgmt] ssh_key_dirs) '
            'or a path inside the VNF package')


@dataclasses.dataclass(frozen=True)
class Policy:
    """The operator's rules, from ``[kubespray_mgmt]``.

    :param key_dirs: directories request key files may come from.
    :param package_dir: the instance's VNF package directory, or None.
    :param trusted_paths: key files may be anywhere (the CLI).
    :param default_key_servers: networks of Ansible servers that may
        receive the default key.
    :param default_key_hosts: networks of addresses a request names that
        the driver may log in to with the default key.
    :param extra_vars_allowed: fnmatch patterns of allowed extra vars.
    :param extra_vars_denied: fnmatch patterns of refused extra vars.
    :param trusted_vims: normalised auth URLs (:func:`normal_url`) of
        the VIMs whose Heat vouches for the addresses it returns.
    """

    key_dirs: tuple = ()
    package_dir: str | None = None
    trusted_paths: bool = False
    default_key_servers: tuple = ()
    default_key_hosts: tuple = ()
    extra_vars_allowed: tuple = ('*',)
    extra_vars_denied: tuple = ()
    trusted_vims: tuple = ()

    @classmethod
    def from_conf(cls, conf, package_dir=None, trusted_paths=False):
        group = conf.kubespray_mgmt
        return cls(
            key_dirs=tuple(group.ssh_key_dirs),
            package_dir=package_dir, trusted_paths=trusted_paths,
            default_key_servers=tuple(_networks(
                group.default_key_ansible_servers,
                'default_key_ansible_servers')),
            default_key_hosts=tuple(_networks(
                group.default_key_login_hosts, 'default_key_login_hosts')),
            extra_vars_allowed=tuple(group.extra_vars_allowed),
            extra_vars_denied=tuple(group.extra_vars_denied),
            trusted_vims=tuple(_vim_urls(group.trusted_vim_auth_urls)))


def _networks(entries, option):
    networks, problems = kconf.parse_networks(entries)
    if problems:
        raise exceptions.MgmtDriverOtherError(
            error_message='[kubespray_mgmt] %s: %s'
                          % (option, '; '.join(problems)))
    return networks


def _vim_urls(entries):
    urls, problems = [], []
    for entry in entries:
        url = normal_url(entry)
        if url is None:
            problems.append('%r is not an http(s) URL with a host' % entry)
        urls.append(url)
    if problems:
        raise exceptions.MgmtDriverOtherError(
            error_message='[kubespray_mgmt] trusted_vim_auth_urls: %s'
                          % '; '.join(problems))
    return urls


def normal_url(text):
    """*text* as an auth URL compared with the operator's list, or None.

    Scheme and host are lowercased, an absent port becomes the scheme's,
    a final ``/`` goes and ``/v3`` is added when missing (as Tacker's VIM
    registry stores a Keystone URL): two spellings of one Keystone match.
    Query, fragment and user info make it no URL of a VIM.
    """
    if not isinstance(text, str):
        return None
    try:
        parts = urllib.parse.urlsplit(text.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme.lower() not in ('http', 'https') or not parts.hostname \
            or parts.query or parts.fragment or '@' in parts.netloc:
        return None
    return _canonical_url(parts, port)


def _canonical_url(parts, port):
    """The one spelling of an http(s) URL split in *parts* (see
    :func:`normal_url`)."""
    port = port or (443 if parts.scheme.lower() == 'https' else 80)
    path = parts.path.rstrip('/')
    if not path.endswith('/v3'):
        path += '/v3'
    host = parts.hostname.lower()
    if ':' in host:
        host = '[%s]' % host
    return '%s://%s:%d%s' % (parts.scheme.lower(), host, port, path)


def vim_vouches(urls, policy):
    """Whether Heat reached through *urls* is the operator's: there is
    at least one, and every one is in ``trusted_vim_auth_urls``.

    :param urls: the auth URLs the VIM's Heat client uses (v2's
        ``interfaceInfo`` URLs, v1's ``vim_auth.auth_url``).
    """
    urls = list(urls or ())
    return bool(urls) and all(normal_url(url) in policy.trusted_vims
                              for url in urls)


def check_heat_logins(spec, addresses, policy, vim_urls):
    """Refuse VMs found in Heat that the default key would log in to,
    unless the VIM vouches for them (:func:`vim_vouches`) or the
    operator lists them in ``default_key_login_hosts``.

    A tenant chooses the VIM the instance's Heat is reached through: v2
    keeps ``vimConnectionInfo`` from its InstantiateVnfRequest or a
    PATCH, a v1 tenant may register a VIM of its own.  Such a "Heat"
    may name any address, another tenant's VMs too; only the operator's
    VIM vouches for what it returns.  Called before any connection.

    :param addresses: the :class:`~mgmt_driver.model.core.NodeAddress` of
        each VM found.
    :param vim_urls: the auth URLs the Heat client used.
    :raises ParamsInvalid: naming each refused section, its addresses,
        ``vimConnectionInfo`` and both options.
    """
    if policy.trusted_paths or vim_vouches(vim_urls, policy):
        return
    _heat_login_problems(spec, addresses, policy).raise_if_any()


def _heat_login_problems(spec, addresses, policy):
    """The :class:`Problems` of :func:`check_heat_logins`: each role
    section whose VMs the default key would log in to, unlisted."""
    problems = validation.Problems()
    for role, section in _ROLE_SECTIONS:
        if not spec.login_for(role).default_key:
            continue
        refused = _refused_hosts(addresses, role, policy)
        if refused:
            problems.invalid('%s.%s' % (core.ROOT, section), (
                'gives no password and no ssh_key_file, and the '
                'operator\'s default key may not log in to %s: Heat '
                'returned them, but through vimConnectionInfo of a VIM '
                'the operator does not list ([kubespray_mgmt] '
                'trusted_vim_auth_urls), and they are not in '
                '[kubespray_mgmt] default_key_login_hosts')
                % _shown(refused))
    return problems


def _refused_hosts(addresses, role, policy):
    """The SSH addresses of *role* among *addresses* that the default key
    may not log in to (not in ``default_key_login_hosts``)."""
    return [a.ssh_ip for a in addresses if a.role == role and
            not _listed(a.ssh_ip, policy.default_key_hosts)]


_SECTIONS = (('ansible', lambda s: s.ansible),
             ('master_node', lambda s: s.master),
             ('worker_node', lambda s: s.worker),
             ('external_lb_param', lambda s: s.external_lb))
#: Sections whose key Ansible uses on the Ansible server (uploaded).
_UPLOADED = ('master_node', 'worker_node')


def apply(spec, policy):
    """Check *spec* against *policy* and load its private keys.

    :returns: a copy of *spec* whose logins carry their key text.
    :raises ParamsInvalid: a refused key file, default key or extra var
        (every problem, with its field path).
    """
    problems = validation.Problems()
    _check_extra_vars(problems, spec, policy)
    _check_default_key_logins(problems, spec, policy)
    sections = {}
    for name, get in _SECTIONS:
        sections[name] = _with_key(get(spec), name, spec, policy, problems)
    problems.raise_if_any()
    return dataclasses.replace(
        spec, ansible=sections['ansible'], master=sections['master_node'],
        worker=sections['worker_node'],
        external_lb=sections['external_lb_param'])


def _with_key(section, name, spec, policy, problems):
    """*section* with the key text of its login, unchanged when it has
    no key file to read or the key is refused (then in *problems*)."""
    login = section.login
    if not login.key_file or login.key_text:
        return section
    text = _section_key(login, name, spec, policy, problems)
    if text is None:
        return section
    return dataclasses.replace(
        section, login=dataclasses.replace(login, key_text=text))


def _section_key(login, name, spec, policy, problems):
    """The key text for *login* of section *name*, or None (reported)."""
    field = '%s.%s' % (core.ROOT, name)
    if login.default_key:
        text = _default_key(login.key_file)
        if name in _UPLOADED and not _may_receive_default_key(spec, policy):
            problems.invalid(field, _default_key_refused(spec))
    elif policy.trusted_paths:
        # The command line's user wrote the request on their own host:
        # say what is wrong with the file (no operator's rule applies).
        text, reason = _load_key(os.path.realpath(os.path.expanduser(
            login.key_file)))
        if text is None:
            problems.invalid(field + '.ssh_key_file', '%s: %s' % (
                validation.show(login.key_file), reason))
    else:
        text = _request_key(login.key_file, policy)
        if text is None:
            problems.invalid(field + '.ssh_key_file', _REFUSED)
    return text


def _may_receive_default_key(spec, policy):
    return _listed(spec.ansible.ip_address, policy.default_key_servers)


def _listed(text, networks):
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return False
    return any(address in net for net in networks
               if net.version == address.version)


#: Addresses a refusal names (the others are counted).
_SHOWN = 5
_ROLE_SECTIONS = ((core.ROLE_MASTER, 'master_node'),
                  (core.ROLE_WORKER, 'worker_node'),
                  (core.ROLE_EXTERNAL_LB, 'external_lb_param'))


def _check_default_key_logins(problems, spec, policy):
    """Report the request's addresses the default key may not log in to.

    Only addresses the request names: the Ansible server's, and the
    ``nodes`` entries'.  VMs found in Heat are the instance's own (Tacker
    created them and Neutron gave them their addresses), and the command
    line's user wrote the request: neither is restricted.
    """
    if policy.trusted_paths:
        return
    _check_ansible_default_key(problems, spec, policy)
    for role, section in _ROLE_SECTIONS:
        if spec.nodes is None or not spec.login_for(role).default_key:
            continue
        refused = _refused_hosts(spec.nodes, role, policy)
        if refused:
            _login_refused(problems, section, refused,
                           'default_key_login_hosts')


def _check_ansible_default_key(problems, spec, policy):
    """The default key logs in to a listed Ansible server only."""
    ansible = spec.ansible
    if ansible.login.default_key and not _listed(
            ansible.ip_address,
            policy.default_key_hosts + policy.default_key_servers):
        _login_refused(
            problems, 'ansible', [ansible.ip_address],
            'default_key_login_hosts or default_key_ansible_servers')


def _shown(addresses):
    shown = ', '.join(addresses[:_SHOWN])
    if len(addresses) > _SHOWN:
        shown += ' and %d more' % (len(addresses) - _SHOWN)
    return shown


def _login_refused(problems, section, addresses, option):
    problems.invalid('%s.%s' % (core.ROOT, section), (
        'gives no password and no ssh_key_file, and the operator\'s '
        'default key may not log in to %s, which the request names (not '
        'in [kubespray_mgmt] %s)') % (_shown(addresses), option))


def _default_key_refused(spec):
    return ('gives no password and no ssh_key_file, and the operator\'s '
            'default key may not be copied to the Ansible server %s (it is '
            'not in [kubespray_mgmt] default_key_ansible_servers)'
            % spec.ansible.ip_address)


def _default_key(path):
    text = _read_key(os.path.expanduser(path))
    if text is None:
        raise exceptions.MgmtDriverOtherError(
            error_message='[kubespray_mgmt] ssh_private_key_file is not a '
                          'readable private key of at most %d bytes'
                          % MAX_KEY_BYTES)
    return text


def key_path(login, policy):
    """Where the key file of *login* is read on this host (links
    resolved, as :func:`apply` read it), or None: the operator's default
    key, a password login, or a path *policy* refuses.  Recorded as a
    reference to the key (:mod:`mgmt_driver.state.follow`), never its text."""
    if not login.key_file or login.default_key:
        return None
    return _resolve(login.key_file, policy)


def _request_key(path, policy):
    """The key text of a request's key file, or None if refused."""
    real = _resolve(path, policy)
    return _read_key(real) if real else None


def _resolve(path, policy):
    if '\0' in path:
        return None
    if policy.trusted_paths:
        return os.path.realpath(os.path.expanduser(path))
    if path.startswith(('/', '~')):
        candidate = os.path.realpath(os.path.expanduser(path))
        bases = policy.key_dirs
    else:
        bases = (policy.package_dir,) if policy.package_dir else ()
        candidate = None
    for base in bases:
        real_base = os.path.realpath(os.path.expanduser(base))
        real = candidate or os.path.realpath(os.path.join(real_base, path))
        if os.path.commonpath([real_base, real]) == real_base and \
                real != real_base:
            return real
    return None


def _read_key(path):
    """The text of the private key at *path*, or None (no reason given:
    a tenant learns nothing about the conductor's files)."""
    return _load_key(path)[0]


def _load_key(path):
    """``(text, None)`` of the private key at *path*, or ``(None,
    reason)``.

    Opens without following a final link and without blocking (a FIFO or
    a device is refused before any read), reads at most
    :data:`MAX_KEY_BYTES` + 1 bytes, and checks that it parses as a key.
    """
    data, reason = _read_regular_file(path, MAX_KEY_BYTES + 1)
    if data is None:
        return None, reason
    return _key_text(data)


def _read_regular_file(path, limit):
    """``(at most *limit* bytes, None)`` of the regular file at *path*,
    or ``(None, reason)``; a final link is not followed and the open
    never blocks."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK |
                     os.O_CLOEXEC)
    except (OSError, ValueError) as exc:
        return None, 'cannot open it: %s' % (
            getattr(exc, 'strerror', None) or exc)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, 'not a regular file'
        return os.read(fd, limit), None
    except OSError as exc:
        return None, 'cannot read it: %s' % exc.strerror
    finally:
        os.close(fd)


def _key_text(data):
    """``(text, None)`` if *data* is a private key ssh can use, else
    ``(None, reason)``."""
    if len(data) > MAX_KEY_BYTES:
        return None, 'longer than %d bytes: not a private key' % (
            MAX_KEY_BYTES)
    try:
        text = data.decode('ascii')
    except UnicodeDecodeError:
        return None, 'not a private key (not ASCII text)'
    if not ssh.is_private_key(text):
        return None, 'not a private key ssh can use (PEM or OpenSSH)'
    return text, None


def _check_extra_vars(problems, spec, policy):
    for name in spec.kubespray.variables:
        denied = _matches(name, policy.extra_vars_denied)
        if denied or not _matches(name, policy.extra_vars_allowed):
            problems.invalid(
                '%s.kubespray.extra_vars.%s' % (core.ROOT, name),
                'not allowed by the operator ([kubespray_mgmt] %s)' % (
                    'extra_vars_denied' if denied
                    else 'extra_vars_allowed'))


def _matches(name, patterns):
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)
