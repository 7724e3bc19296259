"""The local site: every VM of a cluster is a loopback address.

One machine plays the Ansible server, the masters, the workers and the
external load balancer, each on its own 127.0.0.x address:

* :class:`SiteSshd`: one real ``sshd`` on all of them.  Every session
  starts in a home directory of the site (``<sshd root>/home/<user>``,
  as on every :class:`mgmt_localsite.sshd.Sshd`),
  never in the real home of the user running the tests, so what the
  driver writes home-relative (the LB's ``.kube/config``) stays inside
  the site.  Run as root, the Ansible server's address also logs ``root``
  in (by key), so ``ansible-playbook`` of the test's virtualenv, which
  the unprivileged test user cannot execute, runs on the "server".
* :class:`LbHaproxy`: a real ``haproxy`` in master-worker mode that the
  driver configures over SSH as on an LB VM: it rewrites the config file,
  checks it with ``haproxy -c`` and runs a reload script that sends the
  master ``SIGUSR2`` (a graceful reload).
* :class:`Backends`: a TCP server on every node address and port HAProxy
  forwards to (6443 on masters, each NodePort on workers) that greets
  with its address, so a test sees which nodes HAProxy serves.
* :func:`make_conf` and :func:`cluster_params`: the driver's options and
  the ``additionalParams`` of a cluster on the site.

The end-to-end tests, ``kubespray-mgmt demo`` and the lifecycle benchmark
all build on this module and on the kubespray test double
(:func:`mgmt_localsite.materialise`).

Nothing here sends traffic anywhere but 127.0.0.0/8; every process is
stopped by its ``stop``/``cleanup`` method.
"""

import json
import os
import pathlib
import pwd
import signal
import socket
import subprocess
import sys
import time

import yaml
from oslo_config import cfg

from mgmt_driver.common import conf as kconf
from mgmt_driver.model import core
from mgmt_driver.model import nodes as nodes_mod
from mgmt_localsite import clusterstate
from mgmt_localsite import etcd
from mgmt_localsite import haproxy as haproxy_site
from mgmt_localsite import sshd as sshd_mod

ANSIBLE_PLAYBOOK = os.environ.get('KMGMT_ANSIBLE_PLAYBOOK') or str(
    pathlib.Path(sys.executable).parent / 'ansible-playbook')
#: The API server port kubespray sets up on control-plane nodes (the
#: driver's HAProxy backend port).
APISERVER_PORT = 6443
DEADLINE = 20.0
#: Bytes of a UNIX socket path Linux takes (sun_path is 108, NUL ended).
_MAX_SOCKET_PATH = 107

def unavailable():
    """Why the end-to-end site cannot run here, or None."""
    reason = (sshd_mod.available() or haproxy_site.available()
              or etcd.available())
    if reason:
        return reason
    if not os.access(ANSIBLE_PLAYBOOK, os.X_OK):
        return 'ansible-playbook not found at %s' % ANSIBLE_PLAYBOOK
    return None


def name_of(role, address):
    """The node name the driver gives a VM (role + whole address)."""
    return nodes_mod.node_name(role, address)


# ------------------------------------------------------------- sshd --

class SiteSshd(sshd_mod.Sshd):
    """The site's sshd (see the module docstring).

    :param addresses: every VM address.
    :param ansible_address: the Ansible server's address; as root, root
        may log in there.
    """

    def __init__(self, addresses, ansible_address):
        super().__init__(addresses=addresses)
        self.ansible_address = ansible_address
        #: Who runs ansible-playbook on the Ansible server.
        self.ansible_user = 'root' if self.is_root else self.user

    def _config(self, addresses, index):
        text = super()._config(addresses, index)
        if self.is_root:
            text += ('Match LocalAddress %s\n'
                     '    AllowUsers %s root\n'
                     '    PermitRootLogin prohibit-password\n'
                     % (self.ansible_address, self.user))
        return text


def chown(path, user):
    """Give *path* to *user* (only possible, and needed, as root)."""
    if os.geteuid() == 0 and user != 'root':
        entry = pwd.getpwnam(user)
        os.chown(path, entry.pw_uid, entry.pw_gid)


# ---------------------------------------------------------- backends --

def bindable(address, port):
    with socket.socket() as sock:
        try:
            sock.bind((address, port))
        except OSError:
            return False
    return True


class Backends(haproxy_site.Backends):
    """Greeting servers for the nodes: ``"<address>:<port>"``."""

    def __init__(self, masters, workers, nodeports):
        super().__init__()
        try:
            for address in masters:
                self.add(address, address, [APISERVER_PORT])
            for address in workers:
                self.add(address, address, nodeports)
        except BaseException:
            self.stop()
            raise


def served(address, port, attempts):
    """Which backends *attempts* new connections to *port* reached.

    :returns: a set of ``(backend address, backend port)``; a refused or
        dropped connection adds ``None``.
    """
    seen = set()
    for _ in range(attempts):
        try:
            seen.add(haproxy_site.ask(address, port, timeout=2.0))
        except OSError:
            seen.add(None)
    return seen


def wait_served(address, port, expected, timeout=DEADLINE):
    """Poll until connections to *port* reach exactly *expected*.

    :param expected: set of ``(backend address, backend port)``.
    :raises AssertionError: naming what was served at the deadline.
    """
    deadline = time.monotonic() + timeout
    while True:
        seen = served(address, port, 2 * len(expected) + 2)
        if seen == expected:
            return
        if time.monotonic() > deadline:
            raise AssertionError(
                'HAProxy %s:%d served %s, expected %s' % (
                    address, port, sorted(seen, key=str),
                    sorted(expected)))
        time.sleep(0.1)


def forget_cluster(site):
    """Every VM was re-created: the Kubernetes cluster and its etcd
    members went with them."""
    for address in etcd.addresses(str(site.etcd_dir)):
        etcd.stop(str(site.etcd_dir), address, sig=signal.SIGKILL, wipe=True)
    os.unlink(clusterstate.state_path(site.state_dir))


# ------------------------------------------------------------ haproxy --

_PLACEHOLDER = '''# A fresh LB VM: nothing configured yet.
global
    maxconn 50
defaults
    mode tcp
    timeout connect 1s
    timeout client 1s
    timeout server 1s
frontend placeholder
    bind %(address)s:%(port)d
'''

_RELOAD_SCRIPT = '''#!/bin/sh
# Local site's "systemctl reload haproxy": SIGUSR2 makes the master
# re-read its configuration and replace its worker gracefully.  A master
# still re-executing itself after the previous reload has no handler
# yet and would die of the signal: wait until it catches USR2 (bit 12
# of SigCgt in /proc), for 10 s at most.
status=/proc/%(pid)d/status
deadline=$(( $(date +%%s) + 10 ))
while :; do
    mask=$(sed -n 's/^SigCgt:[[:space:]]*//p' "$status") || exit 1
    [ $(( 0x$mask & 0x800 )) -ne 0 ] && break
    if [ "$(date +%%s)" -ge "$deadline" ]; then
        echo "haproxy is not ready for a reload" >&2
        exit 1
    fi
    sleep 0.05
done
exec kill -USR2 %(pid)d
'''


class LbHaproxy:
    """A real HAProxy configured by the driver as on an LB VM.

    Runs as the LB's SSH user (who rewrites and reloads it) in
    master-worker mode; starts from a placeholder configuration, as a
    fresh VM would.  The driver's configuration opens a read-only
    runtime socket, ``stats.sock`` in *directory*, for ``kubespray-mgmt
    status``.

    :param directory: where the configuration, the reload script and the
        log live (created).
    :param address: the LB address.
    :param api_port: the API frontend port (the placeholder binds it).
    :param user: the LB's SSH user.
    """

    def __init__(self, directory, address, api_port, user):
        self.dir = pathlib.Path(directory)
        self.address = address
        self.api_port = api_port
        self.user = user
        self.config = self.dir / 'haproxy.cfg'
        self.reload_script = self.dir / 'reload-haproxy'
        self.log = self.dir / 'haproxy.log'
        self.stats_socket = self.dir / 'stats.sock'
        self.proc = None
        self.dir.mkdir(parents=True, mode=0o755)
        chown(self.dir, user)

    def options(self):
        """The ``[kubespray_mgmt]`` options that point the driver here."""
        return {'haproxy_config_path': str(self.config),
                'haproxy_check_command': '%s -c -f' % haproxy_site.HAPROXY,
                'haproxy_reload_command': str(self.reload_script),
                'haproxy_sudo': 'never',
                'haproxy_bind_addresses': [self.address],
                # HAProxy does not start as root: no user, group, chroot,
                # and a connection limit that fits 1024 descriptors.
                'haproxy_user': '', 'haproxy_group': '',
                'haproxy_chroot': '', 'haproxy_maxconn': 200,
                # the read-only runtime socket kubespray-mgmt status reads
                # (none where the path is too long for a UNIX socket)
                'haproxy_stats_socket': str(self.stats_socket) if len(
                    str(self.stats_socket)) < _MAX_SOCKET_PATH else ''}

    def start(self):
        """A fresh LB: the placeholder configuration, a new process."""
        self.stop()
        for path in self.dir.glob('haproxy.cfg*'):
            path.unlink()
        self.config.write_text(_PLACEHOLDER % {'address': self.address,
                                               'port': self.api_port})
        chown(self.config, self.user)
        with open(self.log, 'ab') as log:
            self.proc = subprocess.Popen(
                [haproxy_site.HAPROXY, '-W', '-db', '-f', str(self.config)],
                stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
                cwd=self.dir, **self._as_user())
        self.reload_script.write_text(_RELOAD_SCRIPT % {'pid': self.proc.pid})
        self.reload_script.chmod(0o755)
        self._wait_listening()
        return self

    def _as_user(self):
        if os.geteuid() != 0 or self.user == 'root':
            return {}
        entry = pwd.getpwnam(self.user)
        return {'user': entry.pw_uid, 'group': entry.pw_gid,
                'extra_groups': []}

    def _wait_listening(self):
        deadline = time.monotonic() + DEADLINE
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError('haproxy exited: %s' % self.read_log())
            try:
                socket.create_connection((self.address, self.api_port),
                                         1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError('haproxy does not listen on %s:%d: %s'
                                       % (self.address, self.api_port,
                                          self.read_log()))
                time.sleep(0.05)

    def read_log(self):
        try:
            return self.log.read_text(errors='replace')[-3000:]
        except FileNotFoundError:
            return ''

    def stop(self):
        """Stop the master and every worker (one process group)."""
        if self.proc is None:
            return
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        self.proc = None


# ------------------------------------------------------ driver config --

def make_conf(site, haproxy, known_hosts, key_dirs=(), **overrides):
    """A private ``ConfigOpts`` pointing the driver at the local site.

    :param site: the :class:`mgmt_localsite.Site`.
    :param key_dirs: where the requests' key files are (``ssh_key_dirs``).
    """
    conf = cfg.ConfigOpts()
    kconf.register_opts(conf)
    conf([])
    for name, value in dict(driver_options(site, haproxy, known_hosts,
                                           key_dirs),
                            **overrides).items():
        conf.set_override(name, value, group=kconf.GROUP)
    return conf


def driver_options(site, haproxy, known_hosts, key_dirs=()):
    """``[kubespray_mgmt]`` values for the local site."""
    values = {
        'known_hosts_file': str(known_hosts),
        'ssh_key_dirs': [str(d) for d in key_dirs],
        'host_key_policy': 'accept-new',
        'ssh_connect_timeout': 5, 'ssh_connect_retries': 2,
        'ssh_retry_initial_delay': 0.2, 'ssh_retry_max_delay': 1.0,
        'ssh_command_timeout': 120,
        'playbook_timeout_base': 300, 'playbook_timeout_per_node': 60,
        'ansible_playbook_command': ANSIBLE_PLAYBOOK,
        'kubectl_command': str(site.kubectl), 'kubectl_kubeconfig': '',
        'kubectl_sudo': 'never', 'kubectl_timeout': 30,
        'etcdctl_command': str(site.etcdctl),
        'kubeadm_command': str(site.kubeadm),
        'crictl_command': str(site.crictl),
        'drain_timeout': 60,
        'poll_initial_delay': 0.1, 'poll_max_delay': 0.5,
        # The site's Ansible account is one for every test process of the
        # machine: slots on (the path is exercised), but never a queue.
        'max_parallel_playbooks_per_server': 64,
    }
    values.update(haproxy.options())
    return values


def config_file_text(options):
    """*options* as the ``[kubespray_mgmt]`` section of a config file."""
    lines = ['[%s]' % kconf.GROUP]
    for name, value in sorted(options.items()):
        if isinstance(value, (list, tuple)):
            value = ','.join(value)
        lines.append('%s = %s' % (name, value))
    return '\n'.join(lines) + '\n'


def cluster_params(sshd, site, ansible_address, api_port, nodeports,
                   **sections):
    """``additionalParams`` for a cluster on the local site.

    Heat names (aspects, connection points) as in our VNF packages;
    *sections* replace or add sections of the installation parameters.
    """
    def login(user_key='username', port_key='port', user=None):
        return {user_key: user or sshd.user, 'ssh_key_file':
                sshd.client_key, port_key: sshd.port}
    root = {
        'master_node': dict(login(), aspect_id='master_instance',
                            ssh_cp_name='masterNode_FloatingIP',
                            nic_cp_name='masterNode_CP1'),
        'worker_node': dict(login(), aspect_id='worker_instance',
                            ssh_cp_name='workerNode_FloatingIP',
                            nic_cp_name='workerNode_CP2'),
        'ansible': dict(login(user=sshd.ansible_user),
                        ip_address=ansible_address,
                        kubespray_root_path=str(site.checkout),
                        transferring_inventory_path=str(
                            site.root / 'inventories')),
        'external_lb_param': dict(
            login('ssh_username', 'ssh_port'),
            ssh_cp_name='externalLB_FloatingIP', nic_cp_name='externalLB_CP3',
            api_port=api_port,
            nodeport_range='%d-%d' % (nodeports[0], nodeports[-1])),
        'kubespray': {'reset_on_terminate': True},
    }
    root.update(sections)
    return {core.ROOT: root}


def explicit_nodes(masters, workers, lb):
    """The ``nodes`` parameter: VMs given without Heat."""
    return ([{'role': 'master', 'ssh_ip': a} for a in masters] +
            [{'role': 'worker', 'ssh_ip': a} for a in workers] +
            [{'role': 'external_lb', 'ssh_ip': lb}])


# ------------------------------------------------------- observations --

def known_hosts_entries(path):
    """The host names recorded in a known_hosts file."""
    try:
        lines = pathlib.Path(path).read_text().splitlines()
    except FileNotFoundError:
        return set()
    return {line.split()[0] for line in lines if line.strip()}


def read_inventory(workspace):
    """The groups and hosts of ``hosts.yaml`` in a workspace.

    :returns: ``{'kube_control_plane': [...], 'etcd': [...],
        'kube_node': [...], 'hosts': {name: vars}}``, or None.
    """
    path = pathlib.Path(workspace) / 'hosts.yaml'
    if not path.exists():
        return None
    doc = yaml.safe_load(path.read_text())['all']
    groups = {name: list((group or {}).get('hosts') or {})
              for name, group in doc['children'].items()}
    groups['hosts'] = doc['hosts']
    return groups


def swap_host_key(known_hosts, address, key_line, records_dirs=()):
    """Make *address* look re-created with the host key *key_line*
    (``<type> <base64>``), which the site's sshd does not have: its
    entries in *known_hosts*, and the key an instance's record says its
    own login recorded there (``records`` beside *known_hosts*, where
    the site's configuration keeps them), become *key_line*.  The
    driver, which forgets only a key it owns and only while the file
    holds that very key, then sees what it sees after a real re-creation:
    its own old key, and a host presenting another.

    :param records_dirs: other ``records_dir`` to look in.
    :returns: how many records owned a key of *address*.
    """
    known_hosts = pathlib.Path(known_hosts)
    lines = []
    for line in known_hosts.read_text().splitlines():
        host = line.split()[0] if line.strip() else ''
        ours = any(name == address or name.startswith('[%s]:' % address)
                   for name in host.split(','))
        lines.append('%s %s' % (host, key_line) if ours else line)
    known_hosts.write_text('\n'.join(lines) + '\n')
    owned = 0
    for path in [p for d in [known_hosts.parent / 'records',
                             *map(pathlib.Path, records_dirs)]
                 for p in sorted(d.glob('*.json'))]:
        record = json.loads(path.read_text())
        for entry in record.get('keys', []):
            if entry.get('address') == address:
                entry['key'] = key_line
                owned += 1
        path.write_text(json.dumps(record))
    return owned
