"""One Ansible server account for several clusters: nothing crosses.

doc/source/security/threat-model.rst, "The shared Ansible server": two tenants'
clusters whose nodes have the same cluster addresses (private networks), so the
same node names, on one site whose Ansible server runs every playbook as one
account (root here, as the site's Ansible account).  The kubespray double's
ansible.cfg mirrors kubespray's: one fact cache for every inventory on the
server, SSH masters that persist 30 minutes in ``~/.ansible/cp``.  And a
workspace whose parent another account can write (the site's second account,
the nodes' SSH user, plays it).

Each test drives the driver's own code paths (``ClusterDriver`` for the
workspace and inventory, :func:`mgmt_driver.remote.factcache.refresh_facts`
and the runner for playbooks) and fails on the driver without
:mod:`mgmt_driver.remote.isolation`.
"""

import copy
import os
import subprocess

import pytest
from mgmt_localsite import lab as lab_mod
from mgmt_localsite import site as site_mod

from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.model import nodes
from mgmt_driver.model import params
from mgmt_driver.remote import factcache
from mgmt_driver.remote import isolation
from mgmt_driver.remote import ssh

ANSIBLE = '127.0.35.10'
LB = '127.0.35.20'
# Two clusters' VMs (their SSH addresses differ: floating IPs) ...
A_MASTER, A_WORKER = '127.0.35.11', '127.0.35.21'
B_MASTER, B_WORKER = '127.0.35.12', '127.0.35.22'
# ... on private networks with the same cluster addresses: same names.
NIC_MASTER, NIC_WORKER = '127.0.36.11', '127.0.36.21'
NAMES = [nodes.node_name(core.ROLE_MASTER, NIC_MASTER),
         nodes.node_name(core.ROLE_WORKER, NIC_WORKER)]
MARGIN = 3600

pytestmark = pytest.mark.skipif(site_mod.unavailable() is not None,
                                reason=str(site_mod.unavailable()))


@pytest.fixture(scope='module')
def lab():
    if os.geteuid() != 0:
        pytest.skip('optional: a second account on the server needs root')
    lab = lab_mod.Lab(ANSIBLE, LB, [A_MASTER, B_MASTER],
                      [A_WORKER, B_WORKER], nodeports=1, backends=False)
    lab.start()
    try:
        yield lab
    finally:
        lab.stop()


class Tenant:
    """One VNF instance's driver, workspace and node set on the lab.

    :param key_file: the nodes' key (default: the site's, which works).
    :param inventory_path: ``transferring_inventory_path`` (default:
        the site's).
    """

    def __init__(self, lab, instance_id, master, worker, key_file=None,
                 inventory_path=None):
        additional = copy.deepcopy(lab.additional_params)
        root = additional[core.ROOT]
        if key_file is not None:
            for role in ('master_node', 'worker_node'):
                root[role]['ssh_key_file'] = key_file
        if inventory_path is not None:
            root['ansible']['transferring_inventory_path'] = inventory_path
        spec = params.parse_params(additional)
        self.driver, _ = lab.driver(spec, instance_id)
        self.cluster = nodes.build_nodes(spec, nodes.load_topology({
            'masters': [{'ssh_ip': master, 'nic_ip': NIC_MASTER}],
            'workers': [{'ssh_ip': worker, 'nic_ip': NIC_WORKER}],
            'external_lb': {'ssh_ip': lab.lb}}))
        assert [n.name for n in self.cluster.k8s_nodes] == NAMES
        self.workspace = self.driver.workspace_path

    def prepare(self):
        """What each operation does first: claim, write the inventory."""
        self.driver.claim('instantiate_end')
        self.driver.upload_inventory(self.cluster)
        return self.driver.runner()

    def refresh(self):
        return factcache.refresh_facts(self.driver.runner(), NAMES, MARGIN)


@pytest.fixture
def tenant(lab):
    made = []

    def make(*args, **kwargs):
        made.append(Tenant(lab, *args, **kwargs))
        return made[-1]
    yield make
    for t in made:
        t.driver.pool.close_all()


def _mtimes(lab, workspace):
    cache = lab.site.inventories / os.path.basename(workspace) / \
        isolation.FACT_CACHE
    return {p.name: p.stat().st_mtime_ns for p in cache.iterdir()} \
        if cache.is_dir() else {}


def _node_logins(lab):
    """Logins the nodes' sshd accepted for the nodes' user so far."""
    return lab.sshd.read_log().count('Accepted publickey for %s '
                                     % lab.sshd.user)


# ------------------------------------------------------------ facts --

def test_a_cluster_never_counts_another_clusters_facts(lab, tenant):
    a = tenant('fc-a', A_MASTER, A_WORKER)
    a.prepare()
    assert a.refresh() == NAMES  # nothing cached yet: every host
    a_entries = _mtimes(lab, a.workspace)
    runs = len(lab.site.runs())

    b = tenant('fc-b', B_MASTER, B_WORKER)
    b.prepare()
    # A's entries are fresh and have B's node names: B must not take
    # them for its own (it would skip its facts run and its --limit runs
    # would read A's facts).
    assert b.refresh() == NAMES
    facts = [r for r in lab.site.runs()[runs:]
             if r['playbook'].endswith('facts.yml')]
    assert len(facts) == 1
    assert facts[0]['inventory'] == [b.workspace + '/hosts.yaml']
    # B's run wrote its own cache, not A's (nor the checkout's).
    for t in (a, b):
        assert lab.site.cached_hosts(workspace=t.workspace) == NAMES
    assert _mtimes(lab, a.workspace) == a_entries
    assert lab.site.cached_hosts(workspace=None) == NAMES
    assert not lab.site.fact_cache.exists() or \
        not any(lab.site.fact_cache.iterdir())
    # Still exact: fresh entries of B's own are kept.
    assert b.refresh() == []


# ---------------------------------------------------------- sockets --

@pytest.fixture(scope='module')
def wrong_key(lab):
    """A valid private key that no node accepts, where the driver may
    read keys (``ssh_key_dirs``)."""
    path = os.path.join(lab.sshd.key_dir, 'id_not_authorised')
    subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-C',
                    'not-authorised', '-f', path], check=True)
    return path


def test_another_tenant_never_rides_an_open_ssh_master(lab, tenant,
                                                       wrong_key):
    a = tenant('cp-a', A_MASTER, A_WORKER)
    a.prepare()
    expire = lab.site.fact_cache_timeout() + 60
    lab.site.age_fact_cache(expire)
    assert a.refresh() == NAMES
    # A's masters are open (ControlPersist=30m): A's next run logs in
    # to no node again.
    logins = _node_logins(lab)
    lab.site.age_fact_cache(expire)
    assert a.refresh() == NAMES
    assert _node_logins(lab) == logins

    # Right after, C names A's VMs (same address, port and user) with a
    # key no node accepts: its run must not get through.
    c = tenant('cp-c', A_MASTER, A_WORKER, key_file=wrong_key)
    c.prepare()
    lab.site.age_fact_cache(expire)
    with pytest.raises(exceptions.FactsUnavailable) as err:
        c.refresh()
    assert all(name in str(err.value) for name in NAMES)
    assert lab.site.cached_hosts(workspace=c.workspace) == []
    assert _node_logins(lab) == logins


# ------------------------------------------------- workspace parent --

def _other_account(lab):
    creds = ssh.Credentials(lab.sshd.user, key_file=lab.sshd.client_key)
    return ssh.Connection(ANSIBLE, creds, port=lab.sshd.port,
                          settings=ssh.SSHSettings(
                              known_hosts_file=str(lab.root / 'kh-other')))


def test_a_workspace_parent_others_can_write_is_refused(lab, tenant):
    shared = lab.root / 'open-parent'
    shared.mkdir()
    os.chmod(shared, 0o777)
    t = tenant('wp-open', A_MASTER, A_WORKER, inventory_path=str(shared))
    with pytest.raises(exceptions.UnsafeRemotePath) as err:
        t.driver.claim('instantiate_end')
    text = str(err.value)
    assert str(shared) in text and 'writable by other accounts' in text
    assert 'transferring_inventory_path' in text
    assert list(shared.iterdir()) == []  # nothing created


# The swapped workspace's inventory: a script that records who ran it.
_HOSTILE_INVENTORY = '''#!/bin/sh
id -u > %(marker)s
echo '{"_meta": {"hostvars": {}}, "all": {"hosts": []}}'
'''


def _plant(conn, workspace, marker):
    """As *conn*'s account: a workspace of its own in place of the
    driver's, with an executable hosts.yaml."""
    conn.run(['sh', '-c', 'mv -- "$1" "$1.old" && mkdir -m 0777 -- "$1" '
              '&& cd -- "$1" && cat > hosts.yaml && chmod 0755 hosts.yaml '
              '&& echo {} > cluster-vars.yaml && echo {} > secret-vars.yaml '
              '&& chmod 0666 cluster-vars.yaml secret-vars.yaml',
              'sh', workspace],
             stdin=(_HOSTILE_INVENTORY % {'marker': marker}).encode())


def test_a_swapped_workspace_never_runs_as_the_driver(lab, tenant):
    parent = lab.root / 'later-open'
    parent.mkdir()
    t = tenant('wp-swap', A_MASTER, A_WORKER, inventory_path=str(parent))
    runner = t.prepare()
    # The parent becomes writable by others after the workspace was made
    # (a group directory, an operator's chmod): the next command that
    # enters the workspace must see it.
    os.chmod(parent, 0o777)
    marker = lab.root / ('pwned-' + os.path.basename(t.workspace))
    with _other_account(lab) as conn:
        assert conn.run(['id', '-un']).stdout.strip() == lab.sshd.user
        _plant(conn, t.workspace, str(marker))
    try:
        runner.facts(2)
        raised = None
    except Exception as exc:  # checked below, after the marker
        raised = exc
    assert not marker.exists(), 'the inventory ran as uid %s' % (
        marker.read_text().strip())
    assert isinstance(raised, exceptions.UnsafeRemotePath), raised
    assert '%s is writable by other accounts' % parent in str(raised)


def test_the_inventory_is_never_run_as_a_script(lab, tenant):
    t = tenant('inv-script', A_MASTER, A_WORKER)
    runner = t.prepare()
    marker = lab.root / 'ran-inventory'
    hosts = os.path.join(t.workspace, 'hosts.yaml')
    with open(hosts, 'w') as f:
        f.write(_HOSTILE_INVENTORY % {'marker': marker})
    os.chmod(hosts, 0o700)
    with pytest.raises(exceptions.PlaybookFailed):
        runner.facts(2)
    assert not marker.exists()
