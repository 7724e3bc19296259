"""The whole lifecycle through the driver code Tacker calls, on loopback.

``mgmt_driver.adapters.v1.LcmHooks`` (Tacker v1's hook calls, with a Heat
client over fake stacks, or with an explicit ``nodes`` list and no Heat)
and ``kubespray-mgmt run`` drive the local site
(localsite-dist/mgmt_localsite/site.py): a real sshd on every VM address, the
real ansible-playbook running the kubespray test double, the fake kubectl
on the masters and a real HAProxy configured over SSH.  After every step
the tests check the inventory on the Ansible server, the Kubernetes state
the double keeps, and which backends HAProxy really serves on loopback.
"""

import json
import posixpath
import stat
import subprocess
import types
import uuid

import mgmt_localsite as localsite
import pytest
import yaml
from mgmt_localsite import haproxy as haproxy_site
from mgmt_localsite import site as e2e
from oslo_config import cfg

from mgmt_driver.adapters import cli
from mgmt_driver.adapters import v1
from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.remote import ssh
from mgmt_driver.state import registry
from tests.functional import ansible_masters
from tests.functional import tacker_fakes
from tests.functional.tacker_fakes import heal_request
from tests.functional.tacker_fakes import instantiate_request
from tests.functional.tacker_fakes import scale_request

ANSIBLE = '127.0.0.140'
LB = '127.0.0.160'
LB_DOWN = '127.0.0.161'  # no sshd there
#: The LB of the cluster the tests of :func:`one_master` share (alive
#: beside the other tests' clusters, so not on LB).
LB_SHARED = '127.0.0.162'
MASTERS = ['127.0.0.%d' % i for i in range(141, 146)]
WORKERS = ['127.0.0.%d' % i for i in range(151, 159)]
MASTER, WORKER = core.ROLE_MASTER, core.ROLE_WORKER
CONTEXT = types.SimpleNamespace(project_id='e2e-project')

pytestmark = pytest.mark.skipif(e2e.unavailable() is not None,
                                reason=str(e2e.unavailable()))


@pytest.fixture(scope='module')
def world():
    """The sshd on every address, free LB ports and the node backends."""
    busy = [a for a in MASTERS if not e2e.bindable(a, e2e.APISERVER_PORT)]
    if busy:
        pytest.skip('port %d is in use on %s' % (e2e.APISERVER_PORT, busy))
    ports = haproxy_site.free_ports(3, [LB, LB_SHARED] + WORKERS)
    sshd = e2e.SiteSshd([ANSIBLE, LB, LB_SHARED] + MASTERS + WORKERS,
                        ANSIBLE)
    backends = None
    try:
        sshd.start()
        backends = e2e.Backends(MASTERS, WORKERS, ports[1:])
        yield types.SimpleNamespace(sshd=sshd, api_port=ports[0],
                                    nodeports=ports[1:])
    finally:
        if backends is not None:
            backends.stop()
        sshd.cleanup()


class Cluster:
    """One VNF instance on a fresh site: its hooks, Heat and checks.

    :param explicit: give the VMs as the ``nodes`` parameter (no Heat).
    :param lb: the LB VM's address.
    """

    def __init__(self, world, tmp_path, masters, workers, explicit=False,
                 lb=LB):
        self.world = world
        self.lb = lb
        self.masters, self.workers = list(masters), list(workers)
        sshd = world.sshd
        self.site = localsite.materialise(
            sshd.scratch + '/site-' + uuid.uuid4().hex[:8], owner=sshd.user)
        self.haproxy = e2e.LbHaproxy(self.site.root / 'lb', lb,
                                     world.api_port, sshd.user)
        self.known_hosts = tmp_path / 'known_hosts'
        self.conf = e2e.make_conf(self.site, self.haproxy,
                                  self.known_hosts, [sshd.key_dir])
        extra = {'nodes': e2e.explicit_nodes(masters, workers, lb)} \
            if explicit else {}
        additional = e2e.cluster_params(sshd, self.site, ANSIBLE,
                                        world.api_port, world.nodeports,
                                        **extra)
        self.vnf = tacker_fakes.TackerVnf(additional, masters, workers, lb)
        self.registry = tacker_fakes.FakeRegistry()
        self.stats = None
        self.hooks = v1.LcmHooks(
            self.conf, pool_factory=self._pool,
            heat_factory=self._no_heat if explicit else self._heat,
            vim_registry=self.registry, package_dir_of=lambda c, i: None)

    def _pool(self):
        return ssh.ConnectionPool(ssh.SSHSettings.from_conf(self.conf),
                                  stats=self.stats)

    def _heat(self, context, vnf_instance, request):
        return self.vnf.heat

    @staticmethod
    def _no_heat(context, vnf_instance, request):
        raise AssertionError('Heat was asked although nodes are given')

    def start(self):
        self.haproxy.start()
        return self

    def stop(self):
        self.site.stop_etcd()
        self.haproxy.stop()

    # Hooks.

    def call(self, hook, request, **kwargs):
        """Run one hook as Tacker does; at most one SSH connection per
        host (the driver's target), counted across the hook."""
        self.stats = ssh.Stats()
        getattr(self.hooks, hook)(CONTEXT, self.vnf.instance, request, None,
                                  None, **kwargs)
        many = {host: counts['connections']
                for host, counts in self.stats.snapshot().items()
                if counts['connections'] > 1}
        assert not many, '%s: SSH connections per host %s' % (hook, many)

    def fails(self, hook, request, **kwargs):
        """Run a hook that must fail; its exception."""
        self.stats = ssh.Stats()
        with pytest.raises(exceptions.MgmtDriverRemoteCommandError) as info:
            getattr(self.hooks, hook)(CONTEXT, self.vnf.instance, request,
                                      None, None, **kwargs)
        return info.value

    # Observations.

    @property
    def workspace(self):
        return self.site.root / 'inventories' / self.vnf.id

    def control_plane_order(self):
        """Master addresses in the inventory's control-plane order."""
        inventory = e2e.read_inventory(self.workspace)
        return [inventory['hosts'][name]['ansible_host']
                for name in inventory['kube_control_plane']]

    def playbook_runs(self, playbook):
        return [r for r in self.site.runs() if r['playbook'] == playbook]

    def check(self, masters, workers):
        """Inventory, Kubernetes state and HAProxy agree with the VMs.

        :param masters: master addresses in the control-plane order the
            inventory must have.
        """
        check_cluster(self.site, self.workspace, self.world, masters,
                      workers, self.lb)

    def check_access(self):
        """The cluster is registered, and kubectl works on the LB."""
        name = registry.default_vim_name(self.vnf.id)
        access = self.registry.current[name]
        assert access.server == 'https://%s:%d' % (
            self.lb, self.world.api_port)
        assert access.token and 'CERTIFICATE' in access.ca_cert
        kubeconfig = self.world.sshd.home() / '.kube' / 'config'
        assert kubeconfig.stat().st_mode & 0o777 == 0o600
        doc = yaml.safe_load(kubeconfig.read_text())
        assert doc['users'][0]['user']['token'] == access.token


def check_cluster(site, workspace, world, masters, workers, lb=LB):
    """See :meth:`Cluster.check`."""
    master_names = [e2e.name_of(MASTER, a) for a in masters]
    worker_names = sorted(e2e.name_of(WORKER, a) for a in workers)
    inventory = e2e.read_inventory(workspace)
    assert inventory['kube_control_plane'] == master_names
    assert inventory['etcd'] == master_names
    assert sorted(inventory['kube_node']) == worker_names
    hosts = inventory['hosts']
    assert sorted(hosts) == sorted(master_names + worker_names)
    for role, addresses in ((MASTER, masters), (WORKER, workers)):
        for address in addresses:
            host = hosts[e2e.name_of(role, address)]
            assert host['ansible_host'] == host['ip'] == address
    nodes = site.nodes()
    assert {name: node['roles'] for name, node in nodes.items()} == dict(
        [(n, ['control-plane']) for n in master_names] +
        [(n, ['worker']) for n in worker_names])
    assert all(node['ready'] for node in nodes.values())
    assert all(nodes[n]['schedulable'] for n in worker_names)
    assert sorted(site.etcd_members()) == sorted(master_names)
    check_served(world, masters, workers, lb)


def check_served(world, masters, workers, lb=LB):
    """HAProxy sends the API port to the masters, NodePorts to workers."""
    e2e.wait_served(lb, world.api_port,
                    {(a, e2e.APISERVER_PORT) for a in masters})
    for port in world.nodeports:
        e2e.wait_served(lb, port, {(a, port) for a in workers})


@pytest.fixture
def cluster_factory(world, tmp_path):
    made = []

    def make(masters, workers, explicit=False):
        cluster = Cluster(world, tmp_path, masters, workers, explicit)
        made.append(cluster)
        return cluster.start()
    try:
        yield make
    finally:
        for cluster in made:
            cluster.stop()


@pytest.fixture(scope='module')
def one_master(world, tmp_path_factory):
    """One instantiated cluster (a master, two workers) that the tests
    using it share: cluster.yml runs once for all of them, not once
    each.  Each of them leaves it serving the workers its Heat stack has
    (``cluster.workers``) and starts from whatever that is, so they
    still pass in any order and alone.  Its master and LB are no other
    test's: it stays up beside their clusters."""
    c = Cluster(world, tmp_path_factory.mktemp('one-master'), MASTERS[3:4],
                WORKERS[:2], lb=LB_SHARED).start()
    try:
        c.call('instantiate_end',
               instantiate_request(c.vnf.additional_params))
        yield c
    finally:
        c.stop()


# ------------------------------------------------------------------ tests --

def test_lifecycle_one_master(cluster_factory):
    """instantiate, scale out by 2, scale in by 1, heal a worker, heal the
    VNF, terminate; a failed scale-out and scale-in converge on retry."""
    masters, workers = MASTERS[:1], WORKERS[:2]
    c = cluster_factory(masters, workers)
    vnf = c.vnf

    c.call('instantiate_start', instantiate_request(vnf.additional_params))
    c.call('instantiate_end', instantiate_request(vnf.additional_params))
    c.check(masters, workers)
    c.check_access()
    assert [r['playbook'] for r in c.site.runs()] == ['cluster.yml']
    # Credentials on the Ansible server are for its user only.
    assert stat.S_IMODE(c.workspace.stat().st_mode) == 0o700
    secret = list((c.workspace / 'host_vars').iterdir()) + list(
        (c.workspace / 'keys').iterdir())
    assert secret and all(stat.S_IMODE(p.stat().st_mode) == 0o600
                          for p in secret)

    # Scale out by 2; the join of the second new worker fails once: the
    # first, which joined, is taken out again (Tacker's rollback would
    # only delete the VMs).
    new = [vnf.add_vm(WORKER, a) for a in WORKERS[2:4]]
    c.site.inject_failure('scale.yml', host=new[1].name)
    error = c.fails('scale_end', scale_request('SCALE_OUT'),
                    scale_out_id_list=[vm.stack_id for vm in new])
    assert isinstance(error, exceptions.PlaybookFailed)
    assert 'ansible-playbook scale.yml on %s failed' % ANSIBLE in str(error)
    assert error.failed_hosts == [new[1].name]
    assert 'injected failure' in str(error) and 'roll it back' in str(error)
    assert new[0].name not in c.site.nodes()
    c.check(masters, workers)
    # The next scale-out joins both (Tacker's retry would run no hook).
    c.call('scale_end', scale_request('SCALE_OUT'),
           scale_out_id_list=[vm.stack_id for vm in new])
    workers = WORKERS[:4]
    c.check(masters, workers)
    first, again = c.playbook_runs('scale.yml')
    assert first['limit'] == again['limit'] == '%s,%s' % (new[0].name,
                                                          new[1].name)
    # The first master answers the join discovery (delegated).
    assert again['ok'] and again['touched'] == sorted(
        [e2e.name_of(MASTER, masters[0]), new[0].name, new[1].name])

    # Scale in by 1; kubespray's removal fails once after the drain.
    gone = vnf.vm(WORKERS[1])
    c.site.inject_failure('remove-node.yml', host=gone.name)
    error = c.fails('scale_start', scale_request('SCALE_IN'),
                    scale_name_list=[gone.member],
                    scale_out_id_list=[gone.stack_id])
    assert 'ansible-playbook remove-node.yml on %s failed' % ANSIBLE \
        in str(error)
    assert error.failed_hosts == [gone.name]
    # The LB stopped sending to it before anything else happened.
    check_served(c.world, masters, [a for a in workers if a != gone.address])
    c.call('scale_start', scale_request('SCALE_IN'),
           scale_name_list=[gone.member], scale_out_id_list=[gone.stack_id])
    vnf.remove_vm(gone)
    workers = [a for a in workers if a != gone.address]
    c.check(masters, workers)
    assert c.playbook_runs('remove-node.yml')[-1]['ok']

    # Heal one worker: removed, its VM re-created, joined again.  The
    # master's cache entry has expired meanwhile: only it is gathered.
    sick = vnf.vm(WORKERS[2])
    c.call('heal_start', heal_request([sick], 'e2e'))
    c.check(masters, [a for a in workers if a != sick.address])
    assert c.playbook_runs('remove-node.yml')[-1]['touched'] == sorted(
        [sick.name, e2e.name_of(MASTER, masters[0])])
    vnf.recreate_vm(sick)
    c.site.age_fact_cache(c.site.fact_cache_timeout() + 60,
                          hosts=[e2e.name_of(MASTER, masters[0])])
    c.call('heal_end', heal_request([sick], 'e2e'))
    c.check(masters, workers)
    assert c.playbook_runs('scale.yml')[-1]['limit'] == sick.name
    assert c.playbook_runs('playbooks/facts.yml')[-1]['limit'] == \
        e2e.name_of(MASTER, masters[0])

    # Heal the whole VNF: every VM re-created with new addresses.
    c.call('heal_start', heal_request(cause='e2e'))
    assert not c.workspace.exists() and c.registry.current == {}
    masters, workers = MASTERS[1:2], WORKERS[4:7]
    vnf.build(masters, workers, LB)
    e2e.forget_cluster(c.site)
    c.haproxy.start()  # the new LB VM has a fresh HAProxy
    c.call('heal_end', heal_request(cause='e2e'))
    c.check(masters, workers)
    c.check_access()

    # Terminate: kubespray's reset (reset_on_terminate), then cleanup.
    c.call('terminate_start', None)
    assert c.site.state() is None
    assert c.playbook_runs('reset.yml')[-1]['touched'] == sorted(
        e2e.name_of(MASTER, a) for a in masters) + sorted(
        e2e.name_of(WORKER, a) for a in workers)
    c.call('terminate_end', None)
    assert not c.workspace.exists()
    assert c.registry.calls[-1] == ('unregister',
                                    registry.default_vim_name(vnf.id))
    assert c.registry.current == {}
    # Only the Ansible server, which is no VM of the VNF, keeps its key:
    # the LB's floating IP may be the next VNF's.
    port = c.world.sshd.port
    assert e2e.known_hosts_entries(c.known_hosts) == {
        ssh.KnownHosts.entry(ANSIBLE, port)}


def test_heal_masters_including_the_first(cluster_factory):
    """Three masters: heal the second, then the first one."""
    masters, workers = MASTERS[:3], WORKERS[:1]
    c = cluster_factory(masters, workers)
    vnf = c.vnf
    c.call('instantiate_end', instantiate_request(vnf.additional_params))
    # Heat lists group members in no useful order; from now on the
    # inventory on the Ansible server is the record of the order.
    order = c.control_plane_order()
    assert sorted(order) == masters
    masters = order
    c.check(masters, workers)

    for sick_address in (masters[1], masters[0]):
        sick = vnf.vm(sick_address)
        # A day later: every fact cache entry has expired.  Healing the
        # first master runs cluster.yml --limit=etcd,kube_control_plane,
        # which needs the workers' facts: gathered again, for them only.
        c.site.age_fact_cache(c.site.fact_cache_timeout() + 60)
        runs = len(c.site.runs())
        # Ansible's SSH master to it (ControlPersist) closes with its
        # removal: the new VM is not reached through the old one's.
        socket_name = ansible_masters.socket_of(
            c.workspace, e2e.name_of(MASTER, sick_address))
        assert ansible_masters.running(c.workspace, socket_name)
        c.call('heal_start', heal_request([sick], 'e2e'))
        assert ansible_masters.running(c.workspace, socket_name) == []
        facts = [r for r in c.site.runs()[runs:]
                 if r['playbook'] == 'playbooks/facts.yml']
        if sick_address == masters[0]:
            assert [r['limit'] for r in facts] == [
                ','.join(e2e.name_of(WORKER, a) for a in workers)]
        else:
            assert facts == []  # removal needs no cached facts
        others = [a for a in masters if a != sick_address]
        c.check(others, workers)
        vnf.recreate_vm(sick)
        c.call('heal_end', heal_request([sick], 'e2e'))
        # A re-created master joins at the end of the control plane.
        masters = others + [sick_address]
        c.check(masters, workers)
    assert masters == [order[2], order[1], order[0]]
    # kubespray cannot remove its first control-plane node: the driver
    # first moved the others to the front with cluster.yml.  Every
    # cluster.yml after instantiate is limited to the control plane
    # (the workers reach the API through the load balancer).
    limits = [r['limit'] for r in c.playbook_runs('cluster.yml')]
    assert limits == [None] + ['etcd,kube_control_plane'] * 3
    c.check_access()


def test_explicit_nodes_failed_instantiate_converges(cluster_factory):
    """No Heat: the VMs come from the nodes parameter.  kubeadm join
    fails on one worker; the same hook run again finishes the cluster."""
    masters, workers = MASTERS[:1], WORKERS[:2]
    c = cluster_factory(masters, workers, explicit=True)
    request = instantiate_request(c.vnf.additional_params)
    bad = e2e.name_of(WORKER, workers[1])
    c.site.inject_failure('cluster.yml', host=bad)

    error = c.fails('instantiate_end', request)
    assert isinstance(error, exceptions.PlaybookFailed)
    assert 'ansible-playbook cluster.yml on %s failed' % ANSIBLE \
        in str(error)
    assert error.failed_hosts == [bad]
    assert 'injected failure' in str(error)
    assert c.registry.calls == []
    assert bad not in c.site.nodes()
    # HAProxy still has its placeholder: nothing is served yet.
    assert e2e.served(LB, c.world.api_port, 2) == {None}

    c.call('instantiate_end', request)
    c.check(masters, workers)
    c.check_access()
    assert [r['ok'] for r in c.playbook_runs('cluster.yml')] == [False, True]


# ----------------------------------------------------- kubespray-mgmt run --

@pytest.fixture
def global_conf():
    """``kubespray-mgmt`` loads its options into the global CONF; put the
    defaults back afterwards."""
    try:
        yield
    finally:
        cfg.CONF([], project='kubespray-mgmt', default_config_files=[])


def test_kubespray_mgmt_run(world, tmp_path, capsys, global_conf):
    """instantiate, scale-out, scale-in, heal and terminate through the
    command line, with a topology file and a config file."""
    sshd = world.sshd
    site = localsite.materialise(
        sshd.scratch + '/site-' + uuid.uuid4().hex[:8], owner=sshd.user)
    haproxy = e2e.LbHaproxy(site.root / 'lb', LB, world.api_port,
                            sshd.user)
    kubeconfigs = tmp_path / 'clusters'
    options = dict(e2e.driver_options(site, haproxy,
                                      tmp_path / 'known_hosts'),
                   kubeconfig_dir=str(kubeconfigs))
    config = tmp_path / 'kubespray-mgmt.conf'
    config.write_text(e2e.config_file_text(options))
    params_file = tmp_path / 'params.json'
    params_file.write_text(json.dumps(e2e.cluster_params(
        sshd, site, ANSIBLE, world.api_port, world.nodeports)))
    topology = tmp_path / 'topology.yaml'
    workspace = site.root / 'inventories' / 'cli-e2e'

    def run(operation, masters, workers, *extra):
        topology.write_text(yaml.safe_dump({
            'masters': [{'ssh_ip': a} for a in masters],
            'workers': [{'ssh_ip': a} for a in workers],
            'external_lb': {'ssh_ip': LB}}))
        code = cli.main(['--config-file', str(config), 'run', operation,
                         '--params', str(params_file), '--topology',
                         str(topology), '--instance-id', 'cli-e2e', *extra])
        out, err = capsys.readouterr()
        assert code == cli.EXIT_OK, out + err
        return out

    masters, workers = MASTERS[:1], WORKERS[:1]
    haproxy.start()
    try:
        out = run('instantiate', masters, workers)
        check_cluster(site, workspace, world, masters, workers)
        assert 'TASK [' in out  # live playbook progress
        kubeconfig = kubeconfigs / 'cli-e2e.kubeconfig'
        assert 'kubeconfig: %s' % kubeconfig in out.splitlines()[-1]
        assert 'https://%s:%d' % (LB, world.api_port) in \
            kubeconfig.read_text()

        workers = WORKERS[:3]
        out = run('scale-out', masters, workers)
        added = out.splitlines()[-1]
        assert added.startswith('added 2 worker(s): ')  # and their names
        assert set(added.split(': ', 1)[1].split(', ')) == {
            e2e.name_of(WORKER, w) for w in workers[1:]}
        check_cluster(site, workspace, world, masters, workers)

        gone = e2e.name_of(WORKER, workers[0])
        run('scale-in', masters, workers, '--nodes', gone)
        workers = workers[1:]
        check_cluster(site, workspace, world, masters, workers)

        sick = e2e.name_of(WORKER, workers[0])
        out = run('heal', masters, workers, '--nodes', sick)
        assert out.splitlines()[-1] == 'healed %s' % sick
        check_cluster(site, workspace, world, masters, workers)

        check_status(world, site, workspace, config, params_file,
                     tmp_path, masters, workers, capsys)
        # status found a worker Kubernetes lost: scale-out joins it again.
        out = run('scale-out', masters, workers)
        assert out.splitlines()[-1].startswith('added 1 worker(s): worker-')
        check_cluster(site, workspace, world, masters, workers)

        # Heal the whole VNF: reset, workspace removed, cluster.yml again.
        out = run('heal', masters, workers)
        assert out.splitlines()[-1].startswith('healed the whole VNF: '
                                               'cluster ')
        check_cluster(site, workspace, world, masters, workers)
        assert kubeconfig.exists()

        run('terminate', masters, workers)
        assert not workspace.exists()
        assert not kubeconfig.exists()
    finally:
        site.stop_etcd()
        haproxy.stop()


# Names status must skip among the logs of the real runs.
ODD_LOGS = ('20261399T000000Z-instantiate-cluster.log', 'notes.txt')
#: What the operations above ran, newest first (status shows 5).
#: (No facts.yml: every host's cached facts are fresh minutes after
#: instantiate.)
LAST_RUNS = [('heal', 'scale'), ('heal', 'remove-node'),
             ('scale_in', 'remove-node'), ('scale_out', 'scale'),
             ('instantiate', 'cluster')]


def _snapshot(site, workspace, tmp_path):
    """Everything status could change: state, workspace, LB, keys.

    Not HAProxy's own log: its master logs an old worker's exit when the
    worker's last connection ends, which on a loaded machine came
    seconds after the heal's reload, while status ran (seen once)."""
    files = {str(p): p.read_bytes() for root in (
        workspace, site.root / 'lb', tmp_path) for p in sorted(
        root.rglob('*')) if p.is_file() and p.suffix != '.sock' and
        p.name != 'haproxy.log'}
    return site.observed_state(), len(site.runs()), files


def check_status(world, site, workspace, config, params_file, tmp_path,
                 masters, workers, capsys):
    """``kubespray-mgmt status``: text and JSON on the built cluster,
    read only; a node Kubernetes lost; an LB that does not answer.
    Leaves the cluster without the first worker."""
    logs = workspace / 'logs'
    for name in ODD_LOGS:
        (logs / name).write_text('PLAY [x]\n')
        e2e.chown(logs / name, world.sshd.ansible_user)

    topologies = {lb: tmp_path / ('status-%s.yaml' % lb)
                  for lb in (LB, LB_DOWN)}
    for lb, path in topologies.items():
        path.write_text(yaml.safe_dump({
            'masters': [{'ssh_ip': a} for a in masters],
            'workers': [{'ssh_ip': a} for a in workers],
            'external_lb': {'ssh_ip': lb}}))

    def status(*extra, lb=LB):
        code = cli.main(['--config-file', str(config), 'status', '--params',
                         str(params_file), '--topology',
                         str(topologies[lb]), '--instance-id', 'cli-e2e',
                         *extra])
        return code, capsys.readouterr().out

    master_names = [e2e.name_of(MASTER, a) for a in masters]
    worker_names = sorted(e2e.name_of(WORKER, a) for a in workers)
    before = _snapshot(site, workspace, tmp_path)
    code, text = status()
    assert code == cli.EXIT_OK, text
    for name in master_names + worker_names:
        assert '\n  %s  ' % name in text
    assert 'health: ok' in text
    assert ['heal', 'scale', 'succeeded'] in [
        line.split()[1:4] for line in text.splitlines()]
    assert text.endswith('Differences from the inventory\n  none\n')

    code, out = status('--output', 'json')
    assert code == cli.EXIT_OK, out
    report = json.loads(out)
    assert _snapshot(site, workspace, tmp_path) == before  # read only
    assert report['ok'] is True
    assert {n['name']: (n['roles'], n['ready'])
            for n in report['nodes']['items']} == dict(
        [(n, (['control-plane'], 'True')) for n in master_names] +
        [(n, ([], 'True')) for n in worker_names])
    # etcd lists its members by ID, not in join order.
    assert sorted(m['name'] for m in report['etcd']['members']) == sorted(
        master_names)
    backends = report['load_balancer']['backends']
    assert {(b['backend'], b['server']) for b in backends} == {
        ('kube_apiserver', n) for n in master_names} | {
        ('kube_nodeports', n) for n in worker_names}
    assert all(b['status'] == 'UP' for b in backends
               if b['backend'] == 'kube_apiserver')
    runs = report['playbook_runs']['runs']
    # Runs started in the same second sort by name: compare as a set.
    assert sorted((r['operation'], r['playbook']) for r in runs) == \
        sorted(LAST_RUNS)
    assert {(r['status'], r['exit_code']) for r in runs} == {
        ('succeeded', 0)}
    # The log of the last run, and of another one by its name.
    code = cli.main(['--config-file', str(config), 'logs', '--params',
                     str(params_file), '--instance-id', 'cli-e2e'])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_OK, err
    assert 'PLAY RECAP' in out and '-heal-scale.log on ' in err
    older = [r for r in runs if r['operation'] == 'scale_in'][0]
    stem = posixpath.basename(older['log'])[:-len('.log')]
    code = cli.main(['--config-file', str(config), 'logs', '--params',
                     str(params_file), '--instance-id', 'cli-e2e',
                     '--run', stem])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_OK, err
    assert 'remove-node' in err and 'PLAY RECAP' in out
    assert report['differences']['items'] == []

    # Kubernetes loses a worker the inventory still lists.
    lost = worker_names[0]
    site.tool('kubectl', 'delete', 'node', lost)
    code, out = status('--output', 'json')
    assert code == cli.EXIT_DIFFERENCES, out
    assert json.loads(out)['differences']['items'] == [{
        'kind': 'missing_from_kubernetes', 'name': lost,
        'detail': 'in the inventory, not a Kubernetes node'}]

    # The LB does not answer: said in its section, the rest still shown.
    code, text = status(lb=LB_DOWN)
    assert code == cli.EXIT_REMOTE_FAILURE, text
    assert 'haproxy.cfg)\n  UNAVAILABLE: unreachable: SSH connection to ' \
        '%s:' % LB_DOWN in text
    assert '\n  %s  ' % master_names[0] in text
    assert 'missing_from_kubernetes %s' % lost in text
    code, out = status('--output', 'json', lb=LB_DOWN)
    assert code == cli.EXIT_REMOTE_FAILURE
    assert json.loads(out)['load_balancer']['ok'] is False


def _new_host_key(known_hosts, address, tmp_path):
    """The VM at *address* comes back with another host key."""
    key = tmp_path / 'recreated'
    subprocess.run(['ssh-keygen', '-q', '-t', 'ecdsa', '-N', '', '-f',
                    str(key)], check=True)
    kind, blob = key.with_suffix('.pub').read_text().split()[:2]
    assert address in known_hosts.read_text(), address
    assert e2e.swap_host_key(known_hosts, address,
                             '%s %s' % (kind, blob)), address


def test_heal_the_load_balancer_vnfc(one_master, tmp_path):
    """The LB VM is re-created empty, with a new host key: heal_end
    installs it again (HAProxy config, kubeconfig) and runs no playbook."""
    c = one_master
    c.check(c.masters, c.workers)
    runs = len(c.site.runs())
    lb = c.vnf.vm(c.lb)
    c.call('heal_start', heal_request([lb], 'e2e'))
    c.vnf.recreate_vm(lb)
    c.haproxy.start()  # a fresh HAProxy with its placeholder config
    (c.world.sshd.home() / '.kube' / 'config').unlink()
    _new_host_key(c.known_hosts, c.lb, tmp_path)
    c.call('heal_end', heal_request([lb], 'e2e'))
    c.check(c.masters, c.workers)
    c.check_access()
    assert c.site.runs()[runs:] == []


def test_no_node_outlives_its_vm(one_master):
    """A scale-out that fails and that Tacker rolls back (no hook, the new
    VMs deleted), then a worker VM deleted outside Tacker: Kubernetes,
    the inventory and HAProxy keep matching Heat's VMs."""
    c = one_master
    masters, workers = c.masters, c.workers
    c.check(masters, workers)
    spare = [a for a in WORKERS if a not in workers]
    new = [c.vnf.add_vm(WORKER, a) for a in spare[:2]]
    c.site.inject_failure('scale.yml', host=new[1].name)
    c.fails('scale_end', scale_request('SCALE_OUT'),
            scale_out_id_list=[vm.stack_id for vm in new])
    for vm in new:  # Tacker's rollback of the scale-out
        c.vnf.remove_vm(vm)
    c.check(masters, workers)
    c.vnf.remove_vm(c.vnf.vm(workers[1]))
    later = c.vnf.add_vm(WORKER, spare[2])
    c.call('scale_end', scale_request('SCALE_OUT'),
           scale_out_id_list=[later.stack_id])
    c.workers = [workers[0], spare[2]]
    c.check(masters, c.workers)
