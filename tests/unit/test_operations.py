"""mgmt_driver.operations.lcm: one composition per operation.

For the same inputs, ``kubespray-mgmt run`` and Tacker v1's hooks issue
the same remote steps (each path on its own recording fake), because
both call the same operation function; flags an operation does not
take are refused; the package's import graph has no cycle.
"""

import base64
import json
import pathlib
import types

import pytest
import yaml
from oslo_config import cfg

from mgmt_driver.adapters import cli
from mgmt_driver.adapters import v1
from mgmt_driver.common import conf as kconf
from mgmt_driver.model import core
from mgmt_driver.model import nodes
from mgmt_driver.model import params
from mgmt_driver.remote import heat
from mgmt_driver.remote import kubespray
from mgmt_driver.remote import ssh
from mgmt_driver.state import localfiles
from mgmt_driver.state import records as records_mod
from tests.fakes import FakePool
from tests.fakes import FakeRegistry

ROOT = pathlib.Path(__file__).parents[2]
PACKAGE = ROOT / 'mgmt_driver'
SAMPLES = ROOT / 'samples'
PARAMS = str(SAMPLES / 'instantiate_simple.json')
TOPOLOGY = str(SAMPLES / 'topology_simple.yaml')
ANSIBLE = '10.10.0.50'
MASTER = '10.10.0.11'
LAYOUT = 'KS:FILE:cluster.yml\nKS:FILE:scale.yml\nKS:FILE:remove-node.yml' \
    '\nKS:FILE:reset.yml\nKS:FILE:playbooks/facts.yml\n' \
    'KS:SKIP_CONFIRMATION\nKS:GIT:v2.31.0\n'
SECRET = json.dumps({'data': {'token': 'dG9rZW4=', 'ca.crt': base64.b64encode(
    b'-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n'
).decode()}})
INSTANCE = 'inst-1'
WORKSPACE = '/home/ubuntu/kubespray/inventory/mycluster/' + INSTANCE
ALL = ['master-10-10-0-11', 'worker-10-10-0-21', 'worker-10-10-0-22']


def _scripted(k8s_nodes, inventory):
    """A FakePool answering as a cluster whose Kubernetes knows
    *k8s_nodes* and whose workspace holds the *inventory* names."""
    pool = FakePool()
    ansible = pool.connection(ANSIBLE)
    ansible.script(r'^program:detect-layout ', stdout=LAYOUT)
    if inventory:
        ansible.files[WORKSPACE + '/hosts.yaml'] = yaml.safe_dump(
            {'all': {'hosts': {n: {} for n in inventory}, 'children': {
                'kube_control_plane': {'hosts': {ALL[0]: {}}}}}})
    master = pool.connection(MASTER)
    master.script(r'get secret', stdout=SECRET)
    master.script(r'get nodes -o json', stdout=_nodes_in(
        dict.fromkeys(k8s_nodes, 'True')))
    master.script(r'get node worker', stdout='node/x\n')
    master.script(r'get pods', stdout=json.dumps({'items': []}))
    master.script(r'get configmap cluster-info', stdout=json.dumps(
        {'data': {'kubeconfig': json.dumps({'clusters': [{'cluster': {
            'server': 'https://10.10.0.30:8383'}}]})}}))
    return pool


def _steps(pool):
    """Every host's commands and files written, in order."""
    return {host: [c[1] for c in conn.calls if c[0] in ('run', 'write_file')]
            for host, conn in pool.connections.items()
            if any(c[0] in ('run', 'write_file') for c in conn.calls)}


def _home(monkeypatch, tmp_path, name):
    home = tmp_path / name
    home.mkdir()
    monkeypatch.setenv('HOME', str(home))


def _cli(monkeypatch, tmp_path, package, pool, argv, params_path=PARAMS):
    _home(monkeypatch, tmp_path, 'cli-home')
    if argv[0] != 'instantiate':  # run refuses an instance with no record
        _instantiated()
    monkeypatch.setattr(ssh, 'ConnectionPool', lambda *a, **k: pool)
    code = cli.main(['run', *argv, '--params', params_path, '--topology',
                     TOPOLOGY, '--instance-id', INSTANCE,
                     '--package-dir', package])
    assert code == cli.EXIT_OK, capsys_err(pool)
    return _steps(pool)


def _instantiated():
    """The instance was instantiated: its record exists (the state
    store and run refuse scale, heal and terminate without one)."""
    kconf.register_opts(cfg.CONF)
    store = records_mod.RecordStore.from_conf(cfg.CONF)
    if store.state(INSTANCE) == records_mod.MISSING:
        store.save(records_mod.InstanceRecord(INSTANCE))


def capsys_err(pool):
    return _steps(pool)


def _cluster():
    doc = localfiles.load_document(PARAMS, 'PARAMS')['additionalParams']
    spec = params.parse_params(doc, need_cp_names=False)
    return nodes.build_nodes(spec, nodes.load_topology(
        localfiles.load_document(TOPOLOGY, 'TOPOLOGY')))


class Tacker:
    """Tacker v1's hook calls on the same VMs, as Heat would give them
    (each VM is its own stack, named after the node)."""

    def __init__(self, monkeypatch, tmp_path, package, pool,
                 params_path=PARAMS):
        _home(monkeypatch, tmp_path, 'tacker-home')
        _instantiated()
        self.pool = pool
        self.hooks = v1.LcmHooks(
            cfg.CONF, pool_factory=lambda: pool, vim_registry=FakeRegistry(),
            package_dir_of=lambda context, inst: package)
        cluster = _cluster()
        records = {n.name: heat.VmRecord(
            address=core.NodeAddress(n.role, n.ssh_address,
                                     n.cluster_address),
            stack_id=n.name, server_id=n.name)
            for n in cluster.k8s_nodes + cluster.gateways}
        self.hooks._vms = lambda *args: (cluster, records)
        self.extra = localfiles.load_document(
            params_path, 'PARAMS')['additionalParams']
        self.instance = types.SimpleNamespace(
            id=INSTANCE, vnfd_id='vnfd', vim_connection_info=[],
            instantiated_vnf_info=types.SimpleNamespace(
                additional_params=self.extra, instance_id='stack',
                vnfc_resource_info=[]))

    def call(self, hook, request_fields=None, **kwargs):
        # Only instantiate's request holds the parameters; the others
        # hold overrides (none here).
        request = types.SimpleNamespace(
            additional_params=self.extra if hook == 'instantiate_end'
            else {}, **(request_fields or {}))
        getattr(self.hooks, hook)(None, self.instance, request, None, None,
                                  **kwargs)
        return self

    def heal(self, names):
        self.hooks._healed = lambda inst, request, records: list(names)
        fields = {'vnfc_instance_id': ['vnfc'] if names else []}
        return self.call('heal_start', fields).call('heal_end', fields)


@pytest.fixture(autouse=True)
def _cli_conf():
    # Both paths read the global configuration, as the CLI loads it.
    kconf.register_opts(cfg.CONF)
    cfg.CONF([], project='kubespray-mgmt', default_config_files=[])


GATEWAY = _cluster().gateways[0].name

#: (CLI arguments, the hooks Tacker calls, Kubernetes' nodes, inventory)
CASES = {
    'instantiate': (['instantiate'], lambda t: t.call('instantiate_end'),
                    [], []),
    'scale-out': (['scale-out'], lambda t: t.call(
        'scale_end', {'type': 'SCALE_OUT'}), ALL[:2], ALL[:2]),
    'scale-in': (['scale-in', '--nodes', ALL[2]], lambda t: t.call(
        'scale_start', {'type': 'SCALE_IN'}, scale_out_id_list=[ALL[2]]),
        ALL, ALL),
    'heal a worker': (['heal', '--nodes', ALL[1]],
                      lambda t: t.heal([ALL[1]]), ALL, ALL),
    'heal a gateway': (['heal', '--nodes', GATEWAY],
                       lambda t: t.heal([GATEWAY]), ALL, ALL),
    'heal the whole VNF': (['heal'], lambda t: t.heal([]), ALL, ALL),
    'terminate': (['terminate'], lambda t: t.call('terminate_end'), ALL,
                  ALL),
}


@pytest.mark.parametrize('case', sorted(CASES))
def test_the_cli_and_the_v1_hooks_issue_the_same_remote_steps(
        monkeypatch, tmp_path, package, case):
    argv, hooks, k8s_nodes, inventory = CASES[case]
    by_cli = _cli(monkeypatch, tmp_path, package,
                  _scripted(k8s_nodes, inventory), argv)
    tacker = hooks(Tacker(monkeypatch, tmp_path, package,
                          _scripted(k8s_nodes, inventory)))
    assert by_cli == _steps(tacker.pool)
    assert by_cli[ANSIBLE]


def test_terminate_resets_first_on_both_paths(monkeypatch, tmp_path,
                                              package):
    doc = json.loads(pathlib.Path(PARAMS).read_text())
    doc['additionalParams']['k8s_cluster_installation_param']['kubespray'] \
        = {'reset_on_terminate': True}
    reset = tmp_path / 'reset.json'
    reset.write_text(json.dumps(doc))
    by_cli = _cli(monkeypatch, tmp_path, package, _scripted(ALL, ALL),
                  ['terminate'], str(reset))
    tacker = Tacker(monkeypatch, tmp_path, package, _scripted(ALL, ALL),
                    str(reset))
    tacker.call('terminate_start').call('terminate_end')
    assert by_cli == _steps(tacker.pool)
    assert any('reset.yml' in c for c in by_cli[ANSIBLE])


@pytest.mark.parametrize('operation', ['terminate', 'upgrade',
                                       'instantiate'])
def test_nodes_is_refused_where_an_operation_takes_none(capsys, operation):
    extra = ['--kube-version', '1.34.3'] if operation == 'upgrade' else []
    code = cli.main(['run', operation, '--dry-run', '--nodes', ALL[2],
                     '--params', PARAMS, '--topology', TOPOLOGY, *extra])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_BAD_INPUT
    assert err.startswith('kubespray-mgmt: --nodes: only for run ')
    assert operation in err and len(err.splitlines()) == 1
    assert out == ''


#: Each worker's state: (its Ready condition, whether SSH answers).
NODE_STATES = {
    'not ready': {ALL[1]: ('Unknown', True), ALL[2]: ('True', True)},
    'unreachable': {ALL[1]: ('True', False), ALL[2]: ('True', True)},
}
WORKER_ADDRESSES = {ALL[1]: '10.10.0.21', ALL[2]: '10.10.0.22'}


def _nodes_in(states):
    """``get nodes -o json`` of ``{name: Ready condition}``."""
    return json.dumps({'items': [{
        'metadata': {'name': name},
        'status': {'conditions': [{'type': 'Ready', 'status': ready}]}}
        for name, ready in states.items()]})


def _in_states(states):
    pool = _scripted(ALL, ALL)
    ready = {name: ready for name, (ready, _) in states.items()}
    # The claim's node list (and a node read, if one is asked).
    pool.connection(MASTER).script(r'get nodes? .*-o json', first=True,
                                   stdout=_nodes_in(
                                       {ALL[0]: 'True', **ready}))
    pool.unreachable.update(WORKER_ADDRESSES[name] for name, (_, answers)
                            in states.items() if not answers)
    return pool


@pytest.mark.parametrize('states', sorted(NODE_STATES))
def test_heal_and_scale_in_leave_the_same_nodes_undrained(
        monkeypatch, tmp_path, package, states):
    """One rule (gates.undrained) on every path that removes a node:
    the same node states, the same drains and ungraceful removals."""
    removals = []
    real = kubespray.Runner.remove_nodes

    def spy(self, names, reachable=True, extra_vars=None):
        if names:
            removals.append((list(names), reachable))
        return real(self, names, reachable, extra_vars)
    monkeypatch.setattr(kubespray.Runner, 'remove_nodes', spy)
    both = ','.join(ALL[1:])
    paths = {
        'cli scale-in': lambda pool, tmp: _cli(
            monkeypatch, tmp, package, pool, ['scale-in', '--nodes', both]),
        'cli heal': lambda pool, tmp: _cli(
            monkeypatch, tmp, package, pool, ['heal', '--nodes', both]),
        'v1 scale-in': lambda pool, tmp: Tacker(
            monkeypatch, tmp, package, pool).call(
                'scale_start', {'type': 'SCALE_IN'},
                scale_out_id_list=ALL[1:]),
        'v1 heal': lambda pool, tmp: Tacker(monkeypatch, tmp, package,
                                            pool).heal(ALL[1:]),
    }
    seen = {}
    for index, (path, run) in enumerate(paths.items()):
        pool = _in_states(NODE_STATES[states])
        del removals[:]
        tmp = tmp_path / str(index)
        tmp.mkdir()
        run(pool, tmp)
        drained = [c.split(' drain ')[1].split()[0]
                   for c in pool.connection(MASTER).commands
                   if ' drain ' in c]
        seen[path] = (drained, list(removals))
    # worker-21 is NotReady or unreachable: removed as a dead node.
    assert seen == dict.fromkeys(paths, (
        [ALL[2]], [([ALL[2]], True), ([ALL[1]], False)]))


def test_the_cli_heals_a_gateway_without_touching_kubernetes_nodes(
        monkeypatch, tmp_path, package):
    steps = _cli(monkeypatch, tmp_path, package, _scripted(ALL, ALL),
                 ['heal', '--nodes', GATEWAY])
    assert not [c for c in steps[ANSIBLE] if 'ansible-playbook -i' in c]
    lb = _cluster().gateways[0].ssh_address
    assert any('install-lb' in c for c in steps[lb])
