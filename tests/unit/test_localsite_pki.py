"""The double's control-plane certificates: real X.509 files per master
(mgmt_localsite.pki), written at kubeadm init/join, read by the
fake ``kubeadm certs check-expiration -o json``, rewritten by ``kubeadm
certs renew all``; the fake crictl's static pod restart; the fake
kubectl's ``get --raw /readyz`` with ``--server``."""

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

import pytest
from mgmt_localsite import materialise
from mgmt_localsite import pki

from mgmt_driver.operations import certificates

pytestmark = pytest.mark.skipif(shutil.which('openssl') is None,
                                reason='openssl is not installed')
DAY = 86400


def _openssl(*args):
    return subprocess.run(['openssl', *args], capture_output=True,
                          text=True, check=False)


def test_install_writes_real_certificates_signed_by_the_cluster_ca(
        tmp_path):
    assert pki.install(str(tmp_path), 'cp1', 365, init=True) is True
    assert pki.install(str(tmp_path), 'cp2', 365) is True
    assert pki.install(str(tmp_path), 'cp1', 5) is False  # a re-join
    cp1, cp2 = (tmp_path / 'pki' / n for n in ('cp1', 'cp2'))
    for name, ca in pki.LEAVES:
        checked = _openssl('verify', '-CAfile', str(cp1 / (ca + '.crt')),
                           str(cp1 / (name + '.crt')))
        assert checked.returncode == 0, checked.stderr
    assert (cp1 / 'ca.crt').read_bytes() == (cp2 / 'ca.crt').read_bytes()
    assert not (cp2 / 'super-admin.conf.crt').exists()
    assert oct((cp1 / 'apiserver.key').stat().st_mode & 0o777) == '0o600'
    left = (pki.not_after(str(cp1 / 'apiserver.crt')) - time.time()) / DAY
    assert 364 < left <= 365


def test_expiration_is_kubeadms_json_and_the_driver_reads_it(tmp_path):
    pki.install(str(tmp_path), 'cp1', 10, init=True)
    pki.install(str(tmp_path), 'cp2', 10)
    report = pki.expiration(str(tmp_path), 'cp2')
    assert report['kind'] == 'CertificateExpirationInfo'
    certs = certificates.parse_expiration(json.dumps(report), 'cp2')
    by_name = {c.name: c for c in certs}
    assert set(by_name) == {n for n, _ in pki.LEAVES} | set(pki.AUTHORITIES)
    assert by_name['super-admin.conf'].missing
    assert 9.9 < by_name['apiserver'].days_left <= 10
    assert by_name['ca'].authority and by_name['ca'].days_left > 3000
    assert [c.name for c in certificates.expiring(certs, 30)] == sorted(
        n for n, _ in pki.LEAVES if n != 'super-admin.conf')


def test_renew_all_signs_the_same_key_for_a_year_and_reissue_ages(
        tmp_path):
    pki.install(str(tmp_path), 'cp1', 365, init=True)
    crt = str(tmp_path / 'pki' / 'cp1' / 'apiserver.crt')
    key = tmp_path / 'pki' / 'cp1' / 'apiserver.key'
    key_before = key.read_bytes()
    pki.reissue(str(tmp_path), 'cp1', 3, ['apiserver'])
    assert (pki.not_after(crt) - time.time()) / DAY < 3.01
    assert pki.renew_all(str(tmp_path), 'cp1') == [n for n, _ in pki.LEAVES]
    assert (pki.not_after(crt) - time.time()) / DAY > 364
    assert key.read_bytes() == key_before
    pki.remove(str(tmp_path), 'cp1')
    with pytest.raises(pki.PkiError):
        pki.renew_all(str(tmp_path), 'cp1')


@pytest.fixture
def site(tmp_path):
    site = materialise(tmp_path / 'site')
    site.seed([('cp1', '127.0.53.200'), ('cp2', '127.0.53.201')],
              [('w1', '127.0.53.202')])
    return site


def _tool(site, tool, node, *args):
    env = dict(site.env, KUBE_DOUBLE_NODE=node)
    env.pop('SSH_CONNECTION', None)
    return subprocess.run([sys.executable, str(site.bin_dir / tool), *args],
                          capture_output=True, text=True, env=env,
                          check=False, timeout=120)


def test_kubeadm_of_the_site_reads_and_renews_this_masters_files(site):
    site.age_certificates('cp2', 4)
    out = _tool(site, 'kubeadm', 'cp2', 'certs', 'check-expiration', '-o',
                'json')
    assert out.returncode == 0, out.stderr
    soon = certificates.expiring(certificates.parse_expiration(
        out.stdout, 'cp2'), 30)
    assert {c.name for c in soon} == {n for n, _ in pki.LEAVES} - {
        'super-admin.conf'}
    assert max(site.certificate_expiry('cp1').values()) > 1e9  # untouched
    renewed = _tool(site, 'kubeadm', 'cp2', 'certs', 'renew', 'all')
    assert renewed.returncode == 0 and 'Done renewing' in renewed.stdout
    assert min(v for k, v in site.certificate_expiry('cp2').items()
               ) - time.time() > 364 * DAY
    worker = _tool(site, 'kubeadm', 'w1', 'certs', 'check-expiration', '-o',
                   'json')
    assert worker.returncode == 1 and 'no /etc/kubernetes/pki' in \
        worker.stderr
    assert _tool(site, 'kubeadm', 'cp2', 'init').returncode == 1
    site.tool('kube-double', 'reset', '--node', 'cp2')
    assert not (site.state_dir / 'pki' / 'cp2').exists()


def test_crictl_restarts_this_masters_static_pods(site):
    site.settings(static_pod_restart=0.2)
    pattern = '^(kube-apiserver|kube-controller-manager|kube-scheduler|etcd)-'
    listed = _tool(site, 'crictl', 'cp1', 'pods', '--namespace',
                   'kube-system', '--name', pattern, '-q')
    pods = listed.stdout.split()
    assert sorted(pods) == ['kube-apiserver-cp1',
                            'kube-controller-manager-cp1',
                            'kube-scheduler-cp1']
    removed = _tool(site, 'crictl', 'cp1', 'rmp', '-f', *pods)
    assert removed.returncode == 0, removed.stderr
    (restart,) = site.restarts()
    assert restart['node'] == 'cp1' and sorted(restart['pods']) == pods
    assert restart['end'] - restart['start'] >= 0.2
    assert _tool(site, 'crictl', 'cp1', 'rmp', '-f', 'kube-apiserver-cp2'
                 ).returncode == 1


def test_kubectl_readyz_through_a_server_needs_a_greeting(site):
    server = socket.socket()
    server.bind(('127.0.53.203', 0))
    server.listen(4)
    port = server.getsockname()[1]

    def greet():
        for _ in range(1):
            conn, _ = server.accept()
            conn.sendall(b'cp1:6443\n')
            conn.close()
    thread = threading.Thread(target=greet, daemon=True)
    thread.start()
    try:
        ok = site.tool('kubectl', '--server', 'https://127.0.53.203:%d' % port,
                       'get', '--raw', '/readyz')
        assert ok.stdout.strip() == 'ok'
    finally:
        thread.join(5)
        server.close()
    refused = site.tool('kubectl', '--server',
                        'https://127.0.53.203:%d' % port, 'get', '--raw',
                        '/readyz', check=False)
    assert refused.returncode == 1 and 'was refused' in refused.stderr
    assert site.tool('kubectl', 'get', '--raw', '/readyz').stdout == 'ok\n'
    assert site.tool('kubectl', 'get', '--raw', '/metrics', check=False
                     ).returncode == 1


def test_every_tool_module_is_copied_to_the_site(site):
    for name in ('pki.py', 'fake_kubeadm.py'):
        assert os.path.exists(site.root / name)
