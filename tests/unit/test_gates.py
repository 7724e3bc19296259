"""Upgrade preflight and gates (mgmt_driver.operations.gates), nodes declared
absent (mgmt_driver.model.absence), and the driver steps that use them."""

import dataclasses
import json

import pytest
import yaml

from mgmt_driver.adapters import cli
from mgmt_driver.common import exceptions
from mgmt_driver.model import absence
from mgmt_driver.model import nodes as nodes_mod
from mgmt_driver.model import params
from mgmt_driver.operations import gates
from mgmt_driver.operations import lcm
from mgmt_driver.operations import upgrade
from mgmt_driver.remote import heat
from mgmt_driver.remote import kubectl
from mgmt_driver.session import driver
from tests.unit import test_cli_run
from tests.unit.test_driver import Harness
from tests.unit.test_driver import _heat_like
from tests.unit.test_driver import _instantiate_params
from tests.unit.test_driver import _request
from tests.unit.test_driver import conf  # noqa: F401 (a fixture)
from tests.unit.test_upgrade import WORKSPACE
from tests.unit.test_upgrade import _k8s_nodes
from tests.unit.test_upgrade import _k8s_nodes_cordoned
from tests.unit.test_upgrade import _patch
from tests.unit.test_upgrade import _playbook_limits
from tests.unit.test_upgrade import _upgrade_harness

W1, W2 = 'worker-10-10-0-21', 'worker-10-10-0-22'
M1 = 'master-10-10-0-11'


def node(name, ready='True', schedulable=True, version='v1.34.3'):
    return kubectl.NodeInfo(name, (), ready, version, '', {}, schedulable)


def pod(name, node_name, labels=None, namespace='apps', evacuated=False):
    return kubectl.PodInfo(namespace, name, node_name,
                           labels if labels is not None else {'app': 'db'},
                           evacuated)


def budget(name, allowed, selector=None, namespace='apps'):
    return kubectl.Budget(namespace, name,
                          selector or {'matchLabels': {'app': 'db'}},
                          allowed, 2, 2 + allowed)


# ------------------------------------------------------------ nodes --

def test_node_problems_name_each_unfit_node_once():
    nodes = [node('a'), node('b', ready='Unknown'),
             node('c', schedulable=False),
             node('d', ready='False', schedulable=False)]
    assert gates.node_problems(nodes, ['a', 'b', 'c', 'd', 'e']) == [
        'b is not Ready (Ready is Unknown)', 'c is cordoned',
        'd is not Ready (Ready is False) and cordoned',
        'e is not a Kubernetes node']


def test_excused_nodes_pass_but_ready_ones_are_still_version_checked():
    nodes = [node('b', ready='Unknown', version='v1.33.5'),
             node('c', schedulable=False, version='v1.33.5'),
             node('d', schedulable=False)]
    names = ['b', 'c', 'd']
    assert gates.node_problems(nodes, names, excused=set(names)) == []
    # b's kubelet is dead: it cannot report a new version.
    assert gates.node_problems(nodes, names, excused=set(names),
                               version=(1, 34, 3)) == [
        'c is at v1.33.5, not 1.34.3']


def test_not_ready_is_any_condition_but_true():
    ready = gates.readiness([node('a'), node('b', ready='Unknown'),
                             node('c', ready='False')])
    assert gates.undrained(['a', 'b', 'c'], ready) == {
        'b': gates.NOT_READY, 'c': gates.NOT_READY}


def test_undrained_gives_the_first_reason_and_asks_ssh_last():
    asked = []

    def answers(name):
        asked.append(name)
        return name != 'e'
    ready = {'a': 'True', 'b': 'Unknown', 'c': 'True', 'd': 'False',
             'e': 'True'}
    found = gates.undrained(['e', 'd', 'c', 'b', 'a', 'f'], ready,
                            known_dead={'c', 'd'}, answers=answers)
    assert list(found.items()) == [
        ('e', gates.UNREACHABLE), ('d', gates.NOT_READY),
        ('c', gates.KNOWN_DEAD), ('b', gates.NOT_READY)]
    # Only the nodes no cheaper reason took; f (not listed) is Ready.
    assert asked == ['e', 'a', 'f']


def test_unread_readiness_leaves_it_to_the_context_and_ssh():
    found = gates.undrained(['a', 'b', 'c'], None, known_dead={'b'},
                            answers=lambda name: name != 'c')
    assert found == {'b': gates.KNOWN_DEAD, 'c': gates.UNREACHABLE}
    assert gates.undrained(['a'], {}) == {}


def test_an_upgrade_drains_the_ready_schedulable_and_uncordoned_nodes():
    nodes = [node('a'), node('b', ready='Unknown'),
             node('c', schedulable=False), node('d', schedulable=False),
             node('e', ready='False', schedulable=False)]
    assert gates.upgrade_drains(nodes, ['e', 'd', 'c', 'b', 'a', 'x'],
                                uncordoned=['d', 'e']) == ['d', 'a']


# ------------------------------------------------------------- PDBs --

def test_a_budget_allowing_no_disruption_blocks_the_nodes_of_its_pods():
    pods = [pod('db-0', 'w1'), pod('db-1', 'w1'), pod('db-2', 'w2'),
            pod('web-0', 'w1', {'app': 'web'}),
            pod('ds-0', 'w1', evacuated=True),          # DaemonSet pod
            pod('db-9', 'w3')]                          # not drained
    blockers = gates.drain_blockers(pods, [budget('db', 0),
                                           budget('web', 1, {
                                               'matchLabels': {
                                                   'app': 'web'}})],
                                    ['w1', 'w2'])
    text = 'apps/db (needs 2 healthy pods, has 2), allows no disruption'
    assert blockers == {'w1': [(text, ['apps/db-0', 'apps/db-1'])],
                        'w2': [(text, ['apps/db-2'])]}
    assert gates.blocker_lines(blockers, ['w2', 'w1']) == [
        'draining w2 would be blocked by %s: pod apps/db-2' % text,
        'draining w1 would be blocked by %s: pods apps/db-0, apps/db-1'
        % text]


def test_budgets_of_other_namespaces_and_pods_without_labels_do_not_block():
    pods = [pod('db-0', 'w1', namespace='other'), pod('x', 'w1', {})]
    assert gates.drain_blockers(pods, [budget('db', 0)], ['w1']) == {}


def test_a_pod_of_two_budgets_blocks_whatever_they_allow():
    blockers = gates.drain_blockers([pod('db-0', 'w1')],
                                    [budget('a', 3), budget('b', 3)], ['w1'])
    assert blockers == {'w1': [(
        'several PodDisruptionBudgets (apps/a, apps/b): evictions refused',
        ['apps/db-0'])]}


@pytest.mark.parametrize('extra_vars, stops', [
    ({}, True), ({'drain_nodes': False}, False),
    ({'drain_fallback_enabled': 'true'}, False),
    ({'upgrade_node_fail_if_drain_fails': 'no'}, False),
    ({'drain_fallback_enabled': False}, True)])
def test_pdb_policy_follows_kubespray_drain_variables(extra_vars, stops):
    stop, why = gates.pdb_policy(extra_vars)
    assert stop is stops and (why is None) is stops


# ------------------------------------------------------------- etcd --

def test_etcd_problems():
    healthy = [('http://a:2379', True, ''), ('http://b:2379', True, '')]
    assert gates.etcd_problems(['m1', 'm2'], ['e1', 'e2'], healthy) == []
    assert gates.etcd_problems(['m1', 'm2', 'm3'], ['e1', 'e2'], [
        ('http://a:2379', True, ''),
        ('http://b:2379', False, 'context deadline exceeded')]) == [
        'etcd has 2 member(s) for 3 control-plane node(s)',
        'etcd member at http://b:2379 is not healthy: context deadline '
        'exceeded']
    assert gates.etcd_problems(['m1'], ['e1', ''], healthy[:1]) == [
        '1 etcd member(s) not started',
        'only 1 of 2 etcd member(s) answered']
    assert gates.etcd_problems(['m1'], None, None) == [
        'etcd could not be asked for its members and health']


def test_parse_etcd_health_reads_etcdctl_json_and_refuses_the_rest():
    text = json.dumps([{'endpoint': 'http://a:2379', 'health': True,
                        'took': '2ms'},
                       {'endpoint': 'http://b:2379', 'health': False,
                        'error': 'bad\x1b[31m'}])
    assert gates.parse_etcd_health(text, 'm1') == [
        ('http://a:2379', True, ''), ('http://b:2379', False, 'bad\\x1b[31m')]
    for bad in ('', '{"a": 1}', '[1]', '[{"health": "yes"}]'):
        with pytest.raises(exceptions.RemoteDataInvalid, match='m1'):
            gates.parse_etcd_health(bad, 'm1')


# ---------------------------------------------------------- batches --

@pytest.mark.parametrize('count, serial, sizes', [
    (5, None, [1, 1, 1, 1, 1]), (10, None, [2] * 5), (3, '50%', [1, 1, 1]),
    (4, '50%', [2, 2]), (5, 2, [2, 2, 1]), (2, 5, [2]), (0, 1, [])])
def test_worker_batches_follow_ansible_serial(count, serial, sizes):
    names = ['w%d' % i for i in range(count)]
    batches = gates.worker_batches(names, serial)
    assert [len(b) for b in batches] == sizes
    assert sum(batches, []) == names


# ----------------------------------------------------------- absence --

def _cluster():
    spec = params.parse_params(_instantiate_params(2))
    return nodes_mod.nodes_from_spec(spec)


def test_parse_names_takes_a_list_or_a_comma_string():
    assert absence.parse_names(None, 'f') == ()
    assert absence.parse_names('a, b,,a', 'f') == ('a', 'b')
    assert absence.parse_names(['a', 'b'], 'f') == ('a', 'b')
    for bad in (3, ['a b'], [None], 'x;rm'):
        with pytest.raises(exceptions.ParamsInvalid, match='^.*f: '):
            absence.parse_names(bad, 'f')


def test_only_workers_of_the_cluster_may_be_absent():
    cluster = _cluster()
    assert absence.check_absent(cluster, [W1], 'f') == {W1}
    with pytest.raises(exceptions.ParamsInvalid) as caught:
        absence.check_absent(cluster, [M1, 'worker-9'], 'f')
    assert caught.value.problems == [
        'f: %s is a control-plane node: heal it instead (a control-plane '
        "node cannot be left out of kubespray's runs)" % M1,
        'f: worker-9 is not a worker of this cluster']


def test_check_metadata_reads_excused_and_absent_nodes():
    wanted = upgrade.check_metadata({'kube_version': '1.34.3',
                                     'kube_upgrade_excused': 'a,b',
                                     'absent_nodes': ['c']}, 'metadata')
    assert (wanted.excused, wanted.absent) == (('a', 'b'), ('c',))
    with pytest.raises(exceptions.ParamsInvalid,
                       match='metadata.absent_nodes: '):
        upgrade.check_metadata({'absent_nodes': 7}, 'metadata')


# ------------------------------------------- the driver's preflight --

def _blocking_pdb(h, on=W2):
    h.master.script(r'get pods -A -o json', first=True, stdout=json.dumps(
        {'items': [{'metadata': {'name': 'db-0', 'namespace': 'apps',
                                 'labels': {'app': 'db'}},
                    'spec': {'nodeName': on},
                    'status': {'phase': 'Running'}}]}))
    h.master.script(r'get poddisruptionbudgets', first=True,
                    stdout=json.dumps({'items': [{
                        'metadata': {'name': 'db', 'namespace': 'apps'},
                        'spec': {'selector': {'matchLabels': {'app': 'db'}}},
                        'status': {'disruptionsAllowed': 0,
                                   'desiredHealthy': 1,
                                   'currentHealthy': 1}}]}))


def test_a_blocking_pdb_refuses_the_upgrade_and_changes_nothing(conf):  # noqa
    h = _upgrade_harness(conf)
    _blocking_pdb(h)
    with pytest.raises(exceptions.UpgradeGateClosed) as caught:
        _patch(h, {'kube_version': '1.34.3'})
    text = str(caught.value)
    assert text.startswith('Upgrade stopped at preflight (nothing was '
                           'changed): draining %s would be blocked by '
                           'apps/db (needs 1 healthy pods, has 1), allows '
                           'no disruption: pod apps/db-0' % W2)
    assert h.playbooks() == []
    assert h.workspace_files() == {}
    assert [c for c in h.master.commands
            if ' cordon ' in c or ' drain ' in c] == []


def test_an_excused_node_that_kubespray_drains_is_checked_too(conf):  # noqa
    """Excusing a Ready, schedulable node does not stop kubespray from
    draining it (gates.upgrade_drains): its budget still refuses."""
    h = _upgrade_harness(conf)
    _blocking_pdb(h)
    with pytest.raises(exceptions.UpgradeGateClosed,
                       match='draining %s would be blocked by apps/db' % W2):
        _patch(h, {'kube_version': '1.34.3', 'kube_upgrade_excused': [W2]})
    assert h.playbooks() == []


def test_a_budget_over_a_pod_on_a_master_refuses_the_upgrade(conf):  # noqa
    # kubespray drains the control-plane nodes too: their pods' budgets
    # count as much as the workers'.
    h = _upgrade_harness(conf)
    _blocking_pdb(h, on=M1)
    with pytest.raises(exceptions.UpgradeGateClosed,
                       match='draining %s would be blocked by apps/db' % M1):
        _patch(h, {'kube_version': '1.34.3'})
    assert h.playbooks() == []


def test_a_blocking_pdb_is_a_warning_when_kubespray_gets_past_it(  # noqa
        conf, caplog):  # noqa: F811
    h = _upgrade_harness(conf)
    _blocking_pdb(h)
    extra = _instantiate_params()
    extra['k8s_cluster_installation_param'].setdefault(
        'kubespray', {})['extra_vars'] = {'drain_fallback_enabled': True}
    instance = h.instance(extra)
    instance.vnf_metadata = {'kube_version': '1.34.3'}
    h.hooks.modify_information_end(None, instance, None, None, None)
    assert 'upgrade-cluster.yml' in h.playbooks()
    warned = [r.getMessage() for r in caplog.records
              if r.levelname == 'WARNING' and 'would be blocked' in
              r.getMessage()]
    assert len(warned) == 1
    assert 'draining %s would be blocked by apps/db (needs 1 healthy ' \
        'pods, has 1), allows no disruption: pod apps/db-0; ' % W2 in \
        warned[0]
    assert 'drain_fallback_enabled' in warned[0]


def test_unready_nodes_and_an_unhealthy_etcd_are_all_named(conf):  # noqa
    h = _upgrade_harness(conf, listed=_k8s_nodes('v1.33.5', ready='Unknown'))
    h.master.script(r'endpoint health', first=True, exit_code=1, stdout=(
        json.dumps([{'endpoint': 'https://10.10.0.11:2379',
                     'health': False, 'error': 'timeout'}])))
    with pytest.raises(exceptions.UpgradeGateClosed) as caught:
        _patch(h, {'kube_version': '1.34.3'})
    for text in ('%s is not Ready (Ready is Unknown)' % M1,
                 '%s is not Ready' % W2,
                 'etcd member at https://10.10.0.11:2379 is not healthy: '
                 'timeout'):
        assert text in str(caught.value)
    assert h.playbooks() == []


def test_excused_nodes_are_upgraded_where_they_stand(conf):  # noqa
    # The only master must be Ready; the workers are excused.
    listed = json.loads(_k8s_nodes('v1.33.5', ready='Unknown'))
    listed['items'][0]['status']['conditions'][0]['status'] = 'True'
    h = _upgrade_harness(conf, listed=json.dumps(listed))
    _patch(h, {'kube_version': '1.34.3',
               'kube_upgrade_excused': [W1, W2]})
    assert [limit for _, limit in _playbook_limits(h)][1:] == [M1, W1, W2]


def test_a_gate_stops_the_upgrade_after_the_step_that_broke(conf):  # noqa
    h = _upgrade_harness(conf)
    h.master.script(r'get --raw=/readyz', first=True, exit_code=1,
                    stderr='Unable to connect to the server: EOF\n')
    with pytest.raises(exceptions.UpgradeGateClosed) as caught:
        _patch(h, {'kube_version': '1.34.3'})
    assert str(caught.value).startswith(
        'Upgrade stopped at the check after upgrading %s: the API is not '
        'ready through https://10.10.0.40:8383: Unable to connect to the '
        'server: EOF' % M1)
    # The master was upgraded; no worker was touched.
    assert [limit for _, limit in _playbook_limits(h)][1:] == [M1]


def test_a_gate_follows_each_worker_batch(conf):  # noqa
    # The master's gate passes, the first worker batch's does not: the
    # second batch is never run.
    h = _upgrade_harness(conf)
    h.master.script(r'get --raw=/readyz', first=True, exit_code=1,
                    stderr='Unable to connect to the server: EOF\n')
    h.master.script(r'get --raw=/readyz', first=True, times=1,
                    stdout='ok\n')
    with pytest.raises(exceptions.UpgradeGateClosed) as caught:
        _patch(h, {'kube_version': '1.34.3'})
    assert str(caught.value).startswith(
        'Upgrade stopped at the check after upgrading %s: the API is not '
        'ready' % W1)
    assert [limit for _, limit in _playbook_limits(h)][1:] == [M1, W1]


def test_a_gate_checks_etcd(conf):  # noqa
    # The preflight finds etcd healthy, the gate after the master not.
    h = _upgrade_harness(conf)
    h.master.script(r'endpoint health', first=True, exit_code=1, stdout=(
        json.dumps([{'endpoint': 'https://10.10.0.11:2379',
                     'health': False, 'error': 'timeout'}])))
    h.master.script(r'endpoint health', first=True, times=1, stdout=(
        json.dumps([{'endpoint': 'https://10.10.0.11:2379',
                     'health': True}])))
    with pytest.raises(exceptions.UpgradeGateClosed) as caught:
        _patch(h, {'kube_version': '1.34.3'})
    assert str(caught.value).startswith(
        'Upgrade stopped at the check after upgrading %s: etcd member at '
        'https://10.10.0.11:2379 is not healthy: timeout' % M1)
    assert [limit for _, limit in _playbook_limits(h)][1:] == [M1]


def test_a_rerun_remembers_the_nodes_cordoned_before_the_first_run(conf):  # noqa
    # The first run found W2 cordoned (excused then) and failed, leaving
    # W1 cordoned too.  kubespray upgrades a cordoned node where it
    # stands and leaves it cordoned: the re-run (without the excuse, as
    # a CLI re-run is) reads W2 from the first run's record and its
    # gates accept W2 cordoned.
    h = _upgrade_harness(conf, listed=_k8s_nodes_cordoned('v1.33.5',
                                                          {W1, W2}),
                         gated=_k8s_nodes_cordoned('v1.34.3', {W2}))
    h.ansible.files[WORKSPACE + upgrade.CORDONS_FILE] = \
        upgrade.render_cordons((1, 34, 3), {W2})
    _patch(h, {'kube_version': '1.34.3'})
    assert [limit for _, limit in _playbook_limits(h)][1:] == [M1, W1, W2]


# ------------------------------------------------- absent workers --

def test_an_absent_worker_is_left_out_of_the_upgrade_and_its_runs(conf):  # noqa
    h = _upgrade_harness(conf, listed=json.dumps({'items': [
        item if item['metadata']['name'] != W2 else dict(
            item, status={'nodeInfo': {'kubeletVersion': 'v1.33.5'},
                          'conditions': [{'type': 'Ready',
                                          'status': 'Unknown'}]})
        for item in json.loads(_k8s_nodes('v1.33.5'))['items']]}))
    _patch(h, {'kube_version': '1.34.3', 'absent_nodes': W2})
    assert [limit for _, limit in _playbook_limits(h)][1:] == [M1, W1]
    hosts = yaml.safe_load(h.workspace_files()['hosts.yaml'])
    assert W2 not in hosts['all']['hosts']
    facts = [c for c in h.ansible.commands if 'FC:TIMEOUT' in c]
    assert facts and all(W2 not in c for c in facts)


def test_a_scale_out_with_a_dead_worker_declared_absent(conf):  # noqa
    names = [M1, W1, W2]
    h = Harness(conf, k8s_nodes=names)
    extra = _instantiate_params(3)
    instance = h.instance(extra)
    h.hooks.scale_end(None, instance, _request(
        {'absent_nodes': [W2]}, type='SCALE_OUT'), None, None,
        scale_out_id_list=['s1'])
    assert h.playbooks() == ['playbooks/facts.yml', 'scale.yml']
    assert all(W2 not in c for c in h.ansible.commands
               if 'FC:TIMEOUT' in c or 'ansible-playbook' in c)
    hosts = yaml.safe_load(h.workspace_files()['hosts.yaml'])
    assert W2 not in hosts['all']['hosts'] and W1 in hosts['all']['hosts']
    # HAProxy keeps the absent worker's NodePort backend.
    assert W2 in h.lb.files['/etc/haproxy/haproxy.cfg.new']


def test_absent_nodes_must_be_workers_of_the_cluster(conf):  # noqa
    h = Harness(conf, k8s_nodes=[M1, W1, W2])
    with pytest.raises(exceptions.ParamsInvalid,
                       match='additionalParams.absent_nodes: %s is a '
                             'control-plane node' % M1):
        h.hooks.scale_end(None, h.instance(_instantiate_params(3)),
                          _request({'absent_nodes': M1}, type='SCALE_OUT'),
                          None, None, scale_out_id_list=['s1'])
    assert h.playbooks() == []


# ---------------------------------------------- NotReady removals --

def test_a_not_ready_node_is_removed_without_waiting_for_a_drain(conf):  # noqa
    """SSH answers, the kubelet does not: no drain (its pods could never
    confirm they ended), remove-node.yml as for an unreachable node."""
    h = Harness(conf)
    extra = _heat_like(h, 2, {W2: 'gone'})
    h.master.script(r'get node %s --ignore-not-found -o name' % W2,
                    stdout='node/%s\n' % W2)
    h.master.script(r'get node %s --ignore-not-found -o json' % W2,
                    stdout=json.dumps({
                        'metadata': {'name': W2},
                        'status': {'conditions': [
                            {'type': 'Ready', 'status': 'Unknown'}]}}))
    h.hooks.scale_start(None, h.instance(extra),
                        _request({}, type='SCALE_IN'), None, None,
                        scale_out_id_list=['gone'])
    assert [c for c in h.master.commands if ' drain ' in c] == []
    vars_file = yaml.safe_load(h.workspace_files()['remove-node-vars.yaml'])
    assert vars_file['reset_nodes'] is False
    assert vars_file['allow_ungraceful_removal'] is True
    # whether it is registered and whether it is Ready: one read
    assert [c for c in h.master.commands
            if ' get node %s ' % W2 in c] == [
        c for c in h.master.commands if c.endswith(
            'get node %s --ignore-not-found -o json' % W2)]
    assert len([c for c in h.master.commands
                if ' get node %s ' % W2 in c]) == 1


# ------------------------------------------------------ command line --

def test_cli_leaves_an_absent_worker_out_and_says_so(capsys):
    code, out, err = test_cli_run._run(
        capsys, 'upgrade', '--dry-run', '--kube-version', '1.34.3',
        '--absent', W2)
    assert code == cli.EXIT_OK, err
    assert out.rstrip().splitlines()[-1].endswith(
        'would upgrade kubernetes_vim_simple to 1.34.3: 2 node(s), every '
        'one planned (a dry run cannot ask their versions; a real run '
        'skips those already there); would skip (declared absent): %s' % W2)
    ran = [line.split('--limit=')[-1] for line in out.splitlines()
           if line.startswith('$ ') and 'upgrade-cluster.yml' in line]
    assert ran == ['%s upgrade-cluster.yml' % M1,
                   '%s upgrade-cluster.yml' % W1]


@pytest.mark.parametrize('extra, text', [
    (['--absent', M1], '--absent: %s is a control-plane node' % M1),
    (['--absent', 'a b'], "--absent: 'a b' is not a node name"),
])
def test_cli_refuses_bad_absent_nodes(capsys, extra, text):
    code, out, err = test_cli_run._run(
        capsys, 'upgrade', '--dry-run', '--kube-version', '1.34.3', *extra)
    assert code == cli.EXIT_BAD_INPUT and text in err, err


def test_cli_excuse_is_for_upgrade_only(capsys):
    code, out, err = test_cli_run._run(capsys, 'scale-out', '--dry-run',
                                       '--excuse', W1)
    assert code == cli.EXIT_BAD_INPUT and '--excuse: only for run upgrade' \
        in err


def test_a_worker_whose_vm_heat_reports_gone_is_absent(conf):  # noqa
    h = Harness(conf, k8s_nodes=[M1, W1, W2])
    extra = _heat_like(h, 3, {})
    vms = h.hooks._vms

    def with_w2_gone(*args):
        cluster, records = vms(*args)
        records[W2] = dataclasses.replace(records[W2], gone=True)
        return cluster, records
    h.hooks._vms = with_w2_gone
    h.hooks.scale_end(None, h.instance(extra),
                      _request({}, type='SCALE_OUT'), None, None)
    hosts = yaml.safe_load(h.workspace_files()['hosts.yaml'])
    assert W2 not in hosts['all']['hosts'] and W1 in hosts['all']['hosts']
    assert 'scale.yml' in h.playbooks()


def test_heat_marks_a_server_gone_by_its_resource_status():
    class Res:
        def __init__(self, kind, status, rid='srv'):
            self.resource_type, self.resource_status = kind, status
            self.physical_resource_id = rid

    class FakeHeat:
        def __init__(self, status):
            self.status = status

        def resource_get_list(self, stack_id):
            return [Res(heat.SERVER_TYPE, self.status), Res('OS::X', 'x')]

    for status, gone in (('CREATE_COMPLETE', False), ('CHECK_FAILED', True),
                         ('UPDATE_COMPLETE', False),
                         ('DELETE_COMPLETE', True)):
        assert heat.HeatNodeFinder(FakeHeat(status))._server('s') == (
            'srv', gone)


def test_a_heal_of_another_worker_leaves_an_absent_unknown_one_out(conf):  # noqa
    # Kubernetes knows neither worker: W1's VM was re-created, W2 is
    # dead and declared absent.  Only W1 joins.
    h = Harness(conf, k8s_nodes=[M1])
    spec = params.parse_params(_instantiate_params(2))
    cluster = nodes_mod.nodes_from_spec(spec)
    drv = driver.ClusterDriver(spec, 'inst-1', h.pool, conf)
    drv.declare_absent(cluster, (W2,), 'absent_nodes')
    lcm.heal_finish(drv, cluster, [W1], None, None)
    assert _playbook_limits(h)[-1] == ('scale.yml', W1)
    assert all(W2 not in c for c in h.ansible.commands
               if 'ansible-playbook' in c or 'FC:TIMEOUT' in c)


def test_absent_names_are_bounded():
    names = ['worker-%d' % i for i in range(absence.MAX_NAMES + 1)]
    for value in (names, ','.join(names)):
        with pytest.raises(exceptions.ParamsInvalid,
                           match='f: must be a list of node names '
                                 r'\(at most %d\)' % absence.MAX_NAMES):
            absence.parse_names(value, 'f')
    assert len(absence.parse_names(names[1:], 'f')) == absence.MAX_NAMES


# -------------------- issue 41 item 8: the refusal's advice fits its problem

def _refusal(h):
    with pytest.raises(exceptions.UpgradeGateClosed) as caught:
        _patch(h, {'kube_version': '1.34.3'})
    assert h.playbooks() == []
    return str(caught.value)


def test_a_cordoned_node_gets_node_advice_only(conf):  # noqa
    """Before: the budget advice and the metadata keys alone, whatever
    the problem."""
    h = _upgrade_harness(conf, listed=_k8s_nodes_cordoned('v1.33.5', [W2]))
    text = _refusal(h)
    assert '%s is cordoned' % W2 in text
    assert '--excuse NAME on the command line; the kube_upgrade_excused ' \
        'metadata key under Tacker' in text
    assert '--absent NAME; absent_nodes' in text
    assert 'PodDisruptionBudget' not in text and 'etcd' not in text


def test_an_unhealthy_etcd_gets_etcd_advice_only(conf):  # noqa
    h = _upgrade_harness(conf)
    h.master.script(r'endpoint health', first=True, exit_code=1, stdout=(
        json.dumps([{'endpoint': 'https://10.10.0.11:2379',
                     'health': False, 'error': 'timeout'}])))
    text = _refusal(h)
    assert 'bring every member back to health first' in text
    assert '--excuse' not in text and 'PodDisruptionBudget' not in text


def test_a_blocking_budget_gets_budget_advice_only(conf):  # noqa
    h = _upgrade_harness(conf)
    _blocking_pdb(h)
    text = _refusal(h)
    assert 'A blocking PodDisruptionBudget: make it allow a disruption' \
        in text
    assert '--excuse' not in text and 'bring every member' not in text
