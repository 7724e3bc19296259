"""The LB install script, run by bash against stub commands.

The stubs (apt-get, dpkg-query, systemctl, curl, gpg, id, haproxy and
the kubectl that "apt-get install kubectl" creates) log their arguments
and keep package state in a directory, so the test sees what the script
would do on a VM: nothing leaves this machine.
"""

import os
import pathlib
import shutil
import subprocess

import pytest

SCRIPT = (pathlib.Path(__file__).parents[2] / 'mgmt_driver' / 'templates'
          / 'install_external_lb.sh')
BASH = shutil.which('bash')
REAL_TOOLS = ('cat', 'grep', 'sed', 'head', 'chmod', 'dirname', 'install',
              'mkdir', 'touch', 'rm', 'printf', 'env', 'tr', 'mktemp',
              'stat')

STUBS = {
    'id': 'echo "${STUB_UID:-0}"',
    'dpkg-query': '''
pkg="${@: -1}"
[ -e "$STUB_STATE/pkg-$pkg" ] && printf 'install ok installed'
exit 0''',
    'apt-get': '''
echo "apt-get $*" >> "$STUB_LOG"
prev=""
for arg in "$@"; do
    if [ "$prev" = -c ]; then
        { stat -c 'conf mode %a' "$arg"; cat "$arg"; } >> "$STUB_LOG.conf"
    fi
    prev="$arg"
done
seen=""
for arg in "$@"; do
    if [ "$seen" = yes ] && [ "${arg#-}" = "$arg" ]; then
        pkg="${arg%%=*}"
        touch "$STUB_STATE/pkg-$pkg"
        if [ "$pkg" = kubectl ]; then
            version="${arg#kubectl=}"; version="${version%-\\*}"
            [ "$version" = kubectl ] && version=1.30.9
            printf '#!/bin/sh\\necho "Client Version: v%s"\\n' \\
                "$version" > "$STUB_BIN/kubectl"
            chmod +x "$STUB_BIN/kubectl"
        fi
    fi
    [ "$arg" = install ] && seen=yes
done
exit 0''',
    'systemctl': '''
echo "systemctl $*" >> "$STUB_LOG"
case "$1" in
    is-active) [ -e "$STUB_STATE/active" ] ;;
    start) touch "$STUB_STATE/active" ;;
esac''',
    'curl': '''
echo "curl $*" >> "$STUB_LOG"
echo "curl_env http_proxy=${http_proxy:-} no_proxy=${no_proxy:-}" \\
    >> "$STUB_LOG"
echo KEY''',
    'gpg': '''
echo "gpg $*" >> "$STUB_LOG"
cat > "${@: -1}"''',
    'haproxy': 'echo "HAProxy version 2.6.12"',
    'keepalived': 'echo "Keepalived v2.2.7 (01/16,2022)" >&2',
}


@pytest.fixture
def vm(tmp_path):
    """A fake VM: stub commands, state and the apt file locations."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    for tool in REAL_TOOLS:
        real = shutil.which(tool)
        if real:
            (bin_dir / tool).symlink_to(real)
    for name, body in STUBS.items():
        path = bin_dir / name
        path.write_text('#!%s\n%s\n' % (BASH, body.strip()))
        path.chmod(0o755)
    (tmp_path / 'state').mkdir()
    return tmp_path


def run(vm, *args, **env):
    environ = {
        'PATH': str(vm / 'bin'), 'STUB_BIN': str(vm / 'bin'),
        'STUB_STATE': str(vm / 'state'), 'STUB_LOG': str(vm / 'log'),
        'LB_APT_KEYRING': str(vm / 'etc' / 'keyrings' / 'k8s.gpg'),
        'LB_APT_SOURCES': str(vm / 'etc' / 'kubernetes.list'),
    }
    environ.update(env)
    (vm / 'log').write_text('')
    proc = subprocess.run([BASH, str(SCRIPT), *args], env=environ,
                          capture_output=True, text=True, timeout=60)
    return proc, (vm / 'log').read_text().splitlines()


def test_script_syntax():
    subprocess.run([BASH, '-n', str(SCRIPT)], check=True)
    assert os.access(SCRIPT, os.X_OK)


def test_fresh_vm_gets_haproxy_and_kubectl(vm):
    proc, log = run(vm)
    assert proc.returncode == 0, proc.stderr
    apt = [line for line in log if line.startswith('apt-get')]
    assert sum(' update' in line for line in apt) == 2  # before, after repo
    assert any(line.endswith('install --no-install-recommends haproxy '
                             'diffutils') for line in apt)
    assert any(line.endswith('install kubectl') for line in apt)
    assert 'systemctl enable haproxy' in log
    assert 'systemctl start haproxy' in log
    assert any('https://pkgs.k8s.io/core:/stable:/v1.30/deb/Release.key'
               in line for line in log)
    sources = (vm / 'etc' / 'kubernetes.list').read_text()
    assert sources == ('deb [signed-by=%s] https://pkgs.k8s.io/core:/stable:'
                       '/v1.30/deb/ /\n' % (vm / 'etc' / 'keyrings' /
                                            'k8s.gpg'))
    assert (vm / 'etc' / 'keyrings' / 'k8s.gpg').read_text() == 'KEY\n'


def test_a_vm_without_cmp_gets_diffutils_alone(vm):
    """lb-apply compares each new file with cmp: a VM with HAProxy but
    not diffutils (a trimmed image) gets it, and only it."""
    assert run(vm)[0].returncode == 0
    (vm / 'state' / 'pkg-diffutils').unlink(missing_ok=True)
    proc, log = run(vm)
    assert proc.returncode == 0, proc.stderr
    assert [line for line in log if ' install ' in line] == [
        'apt-get -y -q -o Dpkg::Options::=--force-confold install '
        '--no-install-recommends diffutils']


def test_second_run_installs_nothing(vm):
    assert run(vm)[0].returncode == 0
    proc, log = run(vm)
    assert proc.returncode == 0, proc.stderr
    assert not [line for line in log if line.startswith(('apt-get', 'curl'))]
    assert 'systemctl start haproxy' not in log
    assert 'kubectl already installed' in proc.stderr


def test_keepalived_only_with_its_option(vm):
    proc, log = run(vm)
    assert proc.returncode == 0, proc.stderr
    # (the temporary directory's name holds the test's: match words)
    assert not any(' keepalived' in line for line in log)
    proc, log = run(vm, '--with-keepalived')
    assert proc.returncode == 0, proc.stderr
    assert any(line.endswith('install --no-install-recommends keepalived')
               for line in log)
    assert 'systemctl enable keepalived' in log
    # The driver starts it once its configuration is there.
    assert not any(line.startswith('systemctl start keepalived')
                   for line in log)
    assert 'keepalived: Keepalived v2.2.7' in proc.stderr
    proc, log = run(vm, '--with-keepalived')
    assert not [line for line in log if line.startswith('apt-get')]


def test_proxies_reach_apt_and_curl(vm):
    proc, log = run(vm, http_proxy='http://proxy.example:3128',
                    https_proxy='http://proxy.example:3129',
                    no_proxy='10.0.0.0/8')
    assert proc.returncode == 0, proc.stderr
    apt = [line for line in log if line.startswith('apt-get')]
    assert apt and all(' -c ' in line and 'proxy.example' not in line
                       for line in apt)
    conf = (vm / 'log.conf').read_text().splitlines()
    assert conf[:3] == ['conf mode 600',
                        'Acquire::http::Proxy "http://proxy.example:3128";',
                        'Acquire::https::Proxy "http://proxy.example:3129";']
    assert 'curl_env http_proxy=http://proxy.example:3128 ' \
        'no_proxy=10.0.0.0/8' in log


def _run_with_stdin(vm, text, *args, **env):
    environ = {
        'PATH': str(vm / 'bin'), 'STUB_BIN': str(vm / 'bin'),
        'STUB_STATE': str(vm / 'state'), 'STUB_LOG': str(vm / 'log'),
        'LB_APT_KEYRING': str(vm / 'etc' / 'keyrings' / 'k8s.gpg'),
        'LB_APT_SOURCES': str(vm / 'etc' / 'kubernetes.list'),
        'KUBESPRAY_MGMT_PROXY_ON_STDIN': '1', 'TMPDIR': str(vm),
    }
    environ.update(env)
    (vm / 'log').write_text('')
    proc = subprocess.run([BASH, str(SCRIPT), *args], env=environ,
                          input=text, capture_output=True, text=True,
                          timeout=60)
    return proc, (vm / 'log').read_text().splitlines()


def test_proxies_with_credentials_come_on_standard_input(vm):
    # As the driver sends them: one NAME=VALUE line each, no command line.
    url = 'http://user:s3cret%40x@proxy.example:3128'
    proc, log = _run_with_stdin(
        vm, 'http_proxy=%s\nhttps_proxy=%s\nno_proxy=10.0.0.0/8,.svc\n'
        % (url, url))
    assert proc.returncode == 0, proc.stderr
    assert not any('s3cret' in line for line in log
                   if not line.startswith('curl_env'))
    assert 'Acquire::http::Proxy "%s";' % url in \
        (vm / 'log.conf').read_text()
    assert 'curl_env http_proxy=%s no_proxy=10.0.0.0/8,.svc' % url in log
    assert not list(vm.glob('tmp.*')), 'the apt proxy file is left behind'
    assert 's3cret' not in proc.stderr


@pytest.mark.parametrize('text, said', [
    ('PATH=/tmp\n', 'not a proxy setting'),
    ('http_proxy=http://a"b\n', 'http_proxy holds a quote'),
])
def test_bad_proxy_input_is_refused_before_apt(vm, text, said):
    proc, log = _run_with_stdin(vm, text)
    assert proc.returncode != 0 and said in proc.stderr
    assert not [line for line in log if line.startswith('apt-get')]


def test_exact_kubectl_version_and_upgrade(vm):
    proc, log = run(vm, '--kubectl-version', 'v1.29.3')
    assert proc.returncode == 0, proc.stderr
    assert any('/v1.29/deb/Release.key' in line for line in log)
    assert any(line.endswith('install --allow-downgrades kubectl=1.29.3-*')
               for line in log)
    proc, log = run(vm, '--kubectl-version', '1.29.3')
    assert not [line for line in log if line.startswith('apt-get')]
    proc, log = run(vm, '--kubectl-version', '1.30.1')
    assert proc.returncode == 0, proc.stderr
    assert any(line.endswith('kubectl=1.30.1-*') for line in log)
    assert '/v1.30/deb/' in (vm / 'etc' / 'kubernetes.list').read_text()


@pytest.mark.parametrize('args, env, message', [
    (('--kubectl-version', '1.30'), {}, 'must look like 1.30.2'),
    (('--kubectl-channel', 'latest'), {}, 'must look like v1.30'),
    (('--bogus',), {}, 'unknown argument: --bogus'),
    ((), {'STUB_UID': '1000'}, 'run as root'),
])
def test_bad_invocations_fail_clearly(vm, args, env, message):
    proc, log = run(vm, *args, **env)
    assert proc.returncode != 0
    assert message in proc.stderr
    assert not log
