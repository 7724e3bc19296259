"""Each master's kubeadm PKI in the kubespray test double: real X.509.

Every host of the local site is one machine, so a master's
``/etc/kubernetes/pki`` is ``<state>/pki/<node>/`` here: real PEM
certificates and keys made with the ``openssl`` command (stdlib only, as
every tool of the site).  kubeadm's layout, for kubespray's default of an
etcd outside the static pods (no etcd certificates in kubeadm's list):

* certificate authorities ``ca`` and ``front-proxy-ca`` (ten years), one
  pair for the cluster, copied to every master (kubeadm join
  --control-plane downloads them);
* the leaf certificates kubeadm lists, each signed by its CA, valid for
  ``cert_days`` days (the double's setting; kubeadm: 365).  The
  kubeconfig files' embedded client certificates (``admin.conf`` ...)
  are kept as ``<name>.crt`` files too.  ``super-admin.conf`` exists on
  the node that ran kubeadm init only: kubeadm lists it as missing on
  the others (kubespray issue #12875 shows it), and renews what exists.

:func:`install` runs at kubeadm init/join of a control-plane node,
:func:`expiration` is ``kubeadm certs check-expiration -o json``,
:func:`renew_all` is ``kubeadm certs renew all`` (same key, new
certificate for one year from now), :func:`remove` is kubeadm reset.
"""

import calendar
import os
import shutil
import subprocess
import tempfile
import time

PKI_DIR = 'pki'
CLUSTER = '.cluster'
#: kubeadm's leaf certificates -> the CA that signs them.
LEAVES = (('admin.conf', 'ca'), ('apiserver', 'ca'),
          ('apiserver-kubelet-client', 'ca'),
          ('controller-manager.conf', 'ca'),
          ('front-proxy-client', 'front-proxy-ca'),
          ('scheduler.conf', 'ca'), ('super-admin.conf', 'ca'))
AUTHORITIES = ('ca', 'front-proxy-ca')
CA_DAYS = 3650
#: kubeadm's certificate validity (CertificateValidityPeriod, 8760h).
RENEW_DAYS = 365


class PkiError(Exception):
    """openssl failed (the message has its stderr's tail)."""


def _openssl(*args):
    openssl = shutil.which('openssl')
    if openssl is None:
        raise PkiError('openssl is not installed')
    result = subprocess.run([openssl, *args], capture_output=True,
                            text=True, check=False, timeout=60)
    if result.returncode != 0:
        raise PkiError('openssl %s: %s' % (args[0], result.stderr[-300:]))
    return result.stdout


def node_dir(state_dir, node):
    return os.path.join(state_dir, PKI_DIR, node)


def _new_key(path):
    _openssl('genpkey', '-algorithm', 'EC', '-pkeyopt',
             'ec_paramgen_curve:prime256v1', '-out', path)
    os.chmod(path, 0o600)


def _authorities(state_dir):
    """The cluster's CA pairs (made once)."""
    directory = os.path.join(state_dir, PKI_DIR, CLUSTER)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    for name in AUTHORITIES:
        crt = os.path.join(directory, name + '.crt')
        if not os.path.exists(crt):
            key = os.path.join(directory, name + '.key')
            _new_key(key)
            _openssl('req', '-x509', '-new', '-key', key, '-days',
                     str(CA_DAYS), '-subj', '/CN=%s' % name, '-out', crt)
    return directory


def _sign(directory, name, ca, days):
    """``<name>.crt`` for ``<name>.key`` (made if missing), by *ca*
    (``openssl req -x509 -CA``: one command, no request file)."""
    key = os.path.join(directory, name + '.key')
    if not os.path.exists(key):
        _new_key(key)
    crt = os.path.join(directory, name + '.crt')
    fd, tmp = tempfile.mkstemp(dir=directory, prefix='.new-')
    os.close(fd)
    try:
        _openssl('req', '-new', '-x509', '-key', key, '-subj',
                 '/CN=kube-%s' % name, '-CA',
                 os.path.join(directory, ca + '.crt'), '-CAkey',
                 os.path.join(directory, ca + '.key'), '-set_serial',
                 str(int.from_bytes(os.urandom(8), 'big')), '-days',
                 str(days), '-out', tmp)
        os.replace(tmp, crt)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


#: Only on the node where kubeadm init ran.
INIT_ONLY = ('super-admin.conf',)


def install(state_dir, node, days, init=False):
    """A new control-plane node's PKI (kept if it has one: a re-join;
    none without the openssl command).

    :param init: kubeadm init runs there (:data:`INIT_ONLY` too).

    :returns: True when it was made now.
    """
    directory = node_dir(state_dir, node)
    if os.path.exists(os.path.join(directory, 'apiserver.crt')) or \
            shutil.which('openssl') is None:
        # Without openssl (tools/host-packages installs it) the node has
        # no PKI: status says so for that master, nothing else fails.
        return False
    cluster = _authorities(state_dir)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    for name in AUTHORITIES:
        for ext in ('.crt', '.key'):
            shutil.copy2(os.path.join(cluster, name + ext), directory)
    for name, ca in LEAVES:
        if init or name not in INIT_ONLY:
            _sign(directory, name, ca, days)
    return True


def reissue(state_dir, node, days, names=None):
    """Sign *names* (default: every leaf) of *node* again for *days*
    (the test's way to make them expire soon)."""
    directory = node_dir(state_dir, node)
    wanted = set(names or (n for n, _ in LEAVES))
    for name, ca in LEAVES:
        if name in wanted and os.path.exists(
                os.path.join(directory, name + '.crt')):
            _sign(directory, name, ca, days)


def renew_all(state_dir, node):
    """``kubeadm certs renew all``: every leaf for :data:`RENEW_DAYS`.

    :returns: the names renewed.
    :raises PkiError: *node* has no PKI.
    """
    if not os.path.isdir(node_dir(state_dir, node)):
        raise PkiError('%s has no /etc/kubernetes/pki' % node)
    directory = node_dir(state_dir, node)
    present = [name for name, _ in LEAVES if os.path.exists(
        os.path.join(directory, name + '.crt'))]
    reissue(state_dir, node, RENEW_DAYS, present)
    return present


def remove(state_dir, node):
    """kubeadm reset: the node's PKI is deleted."""
    shutil.rmtree(node_dir(state_dir, node), ignore_errors=True)


def not_after(path):
    """The certificate's notAfter, seconds since the epoch."""
    text = _openssl('x509', '-noout', '-enddate', '-in', path).strip()
    # notAfter=Nov 26 12:00:00 2027 GMT
    when = time.strptime(text.split('=', 1)[1], '%b %d %H:%M:%S %Y %Z')
    return calendar.timegm(when)


def _entry(directory, name, ca, now):
    path = os.path.join(directory, name + '.crt')
    entry = {'name': name, 'externallyManaged': False}
    if ca:
        entry['caName'] = ca
    if not os.path.exists(path):
        return dict(entry, missing=True, residualTime=0,
                    expirationDate='0001-01-01T00:00:00Z')
    end = not_after(path)
    return dict(entry, missing=False, residualTime=max(0, int(end - now)),
                expirationDate=time.strftime('%Y-%m-%dT%H:%M:%SZ',
                                             time.gmtime(end)))


def expiration(state_dir, node, now=None):
    """``kubeadm certs check-expiration -o json`` of *node* (a dict).

    :raises PkiError: *node* has no PKI.
    """
    directory = node_dir(state_dir, node)
    if not os.path.isdir(directory):
        raise PkiError('%s has no /etc/kubernetes/pki' % node)
    now = time.time() if now is None else now
    return {'kind': 'CertificateExpirationInfo',
            'apiVersion': 'output.kubeadm.k8s.io/v1alpha3',
            'certificates': [_entry(directory, name, ca, now)
                             for name, ca in LEAVES],
            'certificateAuthorities': [_entry(directory, name, None, now)
                                       for name in AUTHORITIES]}
