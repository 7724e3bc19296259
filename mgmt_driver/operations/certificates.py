"""Control-plane certificates: their expiry on each master, their renewal.

Not in the design's layout: a day-2 capability gets its own module
(STYLE).  What kubespray v2.31.0 does, read in its code:

* kubeadm issues the control-plane certificates for one year, the CAs
  for ten (``kubeadm certs check-expiration`` lists both);
* ``roles/kubernetes/control-plane/tasks/main.yml`` always installs
  ``{{ bin_dir }}/k8s-certs-renew.sh``
  (``templates/k8s-certs-renew.sh.j2``): ``kubeadm certs renew all``,
  then ``crictl rmp -f`` of the kube-apiserver, kube-controller-manager,
  kube-scheduler (and etcd) static pods so that the kubelet starts them
  again with the new files, then it waits, without a deadline, for port
  6443; its systemd timer runs it on every master at the same calendar
  time only with ``auto_renew_certificates: true`` (default false);
* ``kubeadm upgrade`` renews them too (``kubeadm_upgrade_auto_cert_renewal``,
  default true).

Reading (``kubespray-mgmt status``): ``kubeadm certs check-expiration -o
json`` on every master, parsed as untrusted, bounded JSON
(:func:`parse_expiration`).  Renewing
(:func:`mgmt_driver.operations.day2.renew_certificates`): the same two steps as
kubespray's script (``scripts/renew-certs.sh``), one master at a time
with that master out of HAProxy's API backends, its API server waited
for with a deadline, and the API checked through the load balancer at
the end.  Pure functions here; the orchestration is in day2.
"""

import dataclasses
import json
import re

from mgmt_driver.common import exceptions
from mgmt_driver.common import untrusted
from mgmt_driver.common import utctime
from mgmt_driver.remote import kubectl

#: ``kubeadm certs check-expiration -o json`` (after the command).
CHECK_ARGS = ('certs', 'check-expiration', '-o', 'json')
#: The remote program of one master's renewal (scripts/renew-certs.sh).
RENEW_PROGRAM = 'renew-certs'
#: The workspace record of the last renewal a PATCH asked for.
RECORD_FILE = 'cert-renewal.json'
#: The PATCH metadata key (v1 ``vnf_metadata``, v2 ``metadata``) that
#: asks for a renewal: a request id; the same id again is done already.
METADATA_RENEW = 'renew_certificates'
#: Most certificates read from one master (kubeadm lists 14).
MAX_CERTIFICATES = 200
#: Most master names the record may hold.
MAX_RECORDED = 1000
SECONDS_PER_DAY = 86400

_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]{0,62}')
_DATE = re.compile(r'[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}'
                   r'(?:\.[0-9]{1,9})?(?:Z|[+-][0-9]{2}:[0-9]{2})')
_REQUEST = re.compile(r'[A-Za-z0-9][A-Za-z0-9._:-]{0,63}')


@dataclasses.dataclass(frozen=True)
class Certificate:
    """One line of ``kubeadm certs check-expiration``.

    :param days_left: days until it expires (0 once expired).
    """

    name: str
    authority: bool
    expires: str
    days_left: float
    missing: bool = False
    external: bool = False

    def as_dict(self):
        return dataclasses.asdict(self)


def parse_expiration(text, host):
    """The certificates and CAs of ``kubeadm certs check-expiration -o
    json`` output, certificates first.

    :raises RemoteDataInvalid: naming *host* and the field (never the
        text itself).
    """
    with kubectl.parsing(host, 'kubeadm certs check-expiration output'):
        data = kubectl.load_json(text)
        found = []
        for key, authority in (('certificates', False),
                               ('certificateAuthorities', True)):
            items = kubectl.json_field(data, key, list, 'the output', [])
            if len(found) + len(items) > MAX_CERTIFICATES:
                raise kubectl.BadShape('more than %d certificates'
                                       % MAX_CERTIFICATES)
            found += [_certificate(item, '%s[%d]' % (key, i), authority)
                      for i, item in enumerate(items)]
        return found


def _flag(item, key, where):
    value = item.get(key, False)
    if not isinstance(value, bool):
        raise kubectl.BadShape('%s.%s must be true or false' % (where, key))
    return value


def _certificate(item, where, authority):
    name = kubectl.json_field(item, 'name', str, where)
    if not _NAME.fullmatch(name):
        raise kubectl.BadShape('%s.name is not a certificate name' % where)
    missing = _flag(item, 'missing', where)
    expires = item.get('expirationDate')
    seconds = item.get('residualTime', 0)
    if not isinstance(seconds, int) or isinstance(seconds, bool) or \
            not 0 <= seconds < 1000 * 365 * SECONDS_PER_DAY:
        raise kubectl.BadShape('%s.residualTime must be a number of '
                               'seconds' % where)
    if missing:
        expires = None
    elif not isinstance(expires, str) or not _DATE.fullmatch(expires):
        raise kubectl.BadShape('%s.expirationDate must be an RFC 3339 '
                               'time' % where)
    return Certificate(name, authority, utctime.iso_utc(expires),
                       round(seconds / SECONDS_PER_DAY, 1), missing,
                       _flag(item, 'externallyManaged', where))


def expiring(certificates, warn_days):
    """The certificates (present, kubeadm's own) that expire within
    *warn_days* days (0: the expired ones)."""
    return [c for c in certificates if not (c.missing or c.external)
            and (c.days_left < warn_days or c.days_left <= 0)]


def parse_request(value, field):
    """The request id of a ``renew_certificates`` metadata value.

    :raises ParamsInvalid: naming *field*.
    """
    if isinstance(value, str) and _REQUEST.fullmatch(value):
        return value
    raise exceptions.ParamsInvalid([
        '%s: must be a request id (1 to 64 letters, digits, ".", "_", '
        '":" or "-", such as 2026-11-26; the same id again renews '
        'nothing), not %s' % (field, type(value).__name__
                              if not isinstance(value, str) else
                              'that text')])


def render_record(request, done):
    """:data:`RECORD_FILE`: the request id and the masters renewed."""
    return json.dumps({'request': request, 'done': sorted(done)},
                      sort_keys=True) + '\n'


def parse_record(text):
    """``(request, frozenset of master names)``, or None (no file).

    :raises ValueError: not such a record (names no value).
    """
    if text is None:
        return None
    data = untrusted.load_record(text)
    request = data.get('request') if isinstance(data, dict) else None
    done = data.get('done') if isinstance(data, dict) else None
    if not (isinstance(request, str) and _REQUEST.fullmatch(request)) or \
            not isinstance(done, list) or len(done) > MAX_RECORDED or \
            not all(isinstance(n, str) for n in done):
        raise ValueError('not {"request": ID, "done": [names]}')
    return request, frozenset(done)


# ------------------------------------------------------------ status --

def master_entry(name, host, certificates=None, error=None):
    """One master's part of the status section."""
    return {'name': name, 'host': host, 'error': error,
            'certificates': [c.as_dict() for c in certificates or ()]}


def section(masters, warn_days):
    """The ``certificates`` section of ``kubespray-mgmt status``.

    :param masters: :func:`master_entry` dicts.
    :returns: ``{ok, error, warn_days, masters, expiring}``: *error*
        names the masters that could not be read; *expiring* lists
        ``{master, name, expires, days_left}``; *ok* is false for
        either.
    """
    soon = []
    for master in masters:
        certs = [Certificate(**c) for c in master['certificates']]
        soon += [{'master': master['name'], 'name': c.name,
                  'expires': c.expires, 'days_left': c.days_left}
                 for c in expiring(certs, warn_days)]
    errors = ['%s: %s' % (m['name'], m['error']) for m in masters
              if m['error']]
    error = exceptions.clip('; '.join(errors), 2000) if errors else None
    if not masters:
        error = 'no control-plane node in the topology'
    return {'ok': not (error or soon), 'error': error,
            'warn_days': warn_days, 'masters': masters, 'expiring': soon}


def format_section(sec):
    """The section as text: the soonest certificate and CA per master,
    then each certificate inside the warning window."""
    head = 'Certificates (warning within %d days)' % sec['warn_days']
    lines = [head]
    if sec['error']:
        lines.append('  UNAVAILABLE: %s' % sec['error'])
    rows = []
    for master in sec['masters']:
        certs = [c for c in master['certificates'] if not c['missing']]
        leaves = [c for c in certs if not c['authority']]
        cas = [c for c in certs if c['authority']]
        rows.append((master['name'], _soonest(leaves), _soonest(cas)))
    width = max([len(r[0]) for r in rows] + [6])
    lines.append('  %s  %s  %s' % ('MASTER'.ljust(width),
                                   'SOONEST CERTIFICATE'.ljust(44),
                                   'SOONEST CA'))
    lines += ['  %s  %s  %s' % (r[0].ljust(width), r[1].ljust(44), r[2])
              for r in rows]
    lines += ['  EXPIRING: %s %s on %s (%s days left)' % (
        e['master'], e['name'], e['expires'], e['days_left'])
        for e in sec['expiring']]
    return '\n'.join(lines)


def _soonest(certs):
    if not certs:
        return '-'
    first = min(certs, key=lambda c: c['days_left'])
    return '%s %s (%sd)' % (first['name'], first['expires'],
                            first['days_left'])
