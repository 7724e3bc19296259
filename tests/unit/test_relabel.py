"""Day-2 relabel of existing nodes: the option checks (params), the
kubectl commands and day2.relabel (recording SSH fake)."""

import json

import pytest
import yaml

from mgmt_driver.adapters import cli
from mgmt_driver.common import exceptions
from mgmt_driver.common import safeyaml
from mgmt_driver.model import labels
from mgmt_driver.operations import day2
from mgmt_driver.operations import membership
from mgmt_driver.remote import kubectl
from mgmt_driver.session import driver
from tests.fakes import FakePool
from tests.unit.test_driver import LAYOUT
from tests.unit.test_driver import conf  # noqa: F401 (a fixture)
from tests.unit.test_inventory import _cluster
from tests.unit.test_inventory import _spec
from tests.unit.test_kubectl import make_client

MASTER = '10.10.0.11'
W1, W2 = 'worker-10-10-0-21', 'worker-10-10-0-22'
KUBECTL = 'kubectl --kubeconfig /etc/kubernetes/admin.conf '
NOT_FOUND = 'Error from server (NotFound): nodes "%s" not found\n'


def test_label_and_taint_lists_are_checked_as_the_parameters():
    assert labels.parse_label_list('zone=a,pool=,zone=b', '--labels') == (
        ('pool', ''), ('zone', 'b'))
    assert labels.parse_taint_list(
        'gpu=yes:NoSchedule,,gpu=yes:NoSchedule,x:NoExecute',
        '--taints') == ('gpu=yes:NoSchedule', 'x:NoExecute')
    assert labels.parse_label_list(None, '--labels') == ()


def test_removals_are_accepted_only_when_asked():
    assert labels.parse_label_list('zone-,pool=a', '--labels',
                                   removals=True) == (
        ('pool', 'a'), ('zone', None))
    assert labels.parse_taint_list('gpu:NoSchedule-,gpu-,a=b:NoExecute',
                                   '--taints', removals=True) == (
        'gpu:NoSchedule-', 'gpu-', 'a=b:NoExecute')
    with pytest.raises(exceptions.ParamsInvalid):
        labels.parse_label_list('zone-', '--labels')
    with pytest.raises(exceptions.ParamsInvalid):
        labels.parse_taint_list('gpu-', '--taints')
    with pytest.raises(exceptions.ParamsInvalid) as caught:
        labels.parse_taint_list('a b-,x:Never-', '--taints', removals=True)
    assert len(caught.value.problems) == 2


@pytest.mark.parametrize('parse, text, problems', [
    (labels.parse_label_list, 'zone', ["--labels: 'zone': must be "
                                       'key=value']),
    (labels.parse_label_list, 'a=$(id),b=ok,kubernetes.io/x=y', [
        "--labels: 'a=$(id)': value '$(id)' is not a label value",
        "--labels: 'kubernetes.io/x=y': the kubelet may not set labels"]),
    (labels.parse_taint_list, 'a=b:Never', [
        "--taints: 'a=b:Never': the effect after \":\" must be one of"]),
    (labels.parse_taint_list, "a=b';x:NoSchedule", [
        "--taints: \"a=b';x:NoSchedule\": value \"b';x\" is not a taint"]),
])
def test_bad_entries_are_all_named(parse, text, problems):
    field = problems[0].split(':', 1)[0]
    with pytest.raises(exceptions.ParamsInvalid) as caught:
        parse(text, field)
    got = caught.value.problems
    assert len(got) == len(problems)
    assert all(g.startswith(p) for g, p in zip(got, problems, strict=True))


def test_kubectl_label_and_taint_are_argv_with_overwrite():
    client = make_client()
    assert client.label([W1], (('pool', 'a'), ('zone', ''))) is True
    assert client.taint([W1, W2], ('gpu=yes:NoSchedule', 'x:NoExecute')
                        ) is True
    assert client.conn.commands == [
        'kubectl label node %s --overwrite pool=a zone=' % W1,
        'kubectl taint node %s %s --overwrite gpu=yes:NoSchedule '
        'x:NoExecute' % (W1, W2)]
    assert client.label([W1], (('pool', None),)) is True
    assert client.conn.commands[-1] == (
        'kubectl label node %s --overwrite pool-' % W1)
    client.conn.script(r'label', exit_code=1, stderr=NOT_FOUND % W2)
    assert client.label([W2], (('pool', 'a'),)) is False
    with pytest.raises(exceptions.MgmtDriverParamInvalid):
        client.label(['bad name; id'], (('pool', 'a'),))


def test_nodes_are_read_by_name_in_bounded_commands(monkeypatch):
    client = make_client()
    monkeypatch.setattr(kubectl, 'NODES_PER_COMMAND', 2)
    names = ['worker-%d' % i for i in range(5)]
    client.conn.script(r'get node worker-0 worker-1 ', stdout=json.dumps(
        {'kind': 'List', 'items': [json.loads(_node_json('worker-1'))]}))
    client.conn.script(r'get node worker-4 ', stdout=_node_json('worker-4'))
    assert sorted(client.nodes_named(names)) == ['worker-1', 'worker-4']
    assert [c.split(' --')[0] for c in client.conn.commands] == [
        'kubectl get node worker-0 worker-1', 'kubectl get node worker-2 '
        'worker-3', 'kubectl get node worker-4']
    # A node kubectl did not name is not taken; bad JSON is refused.
    client.conn.script(r'get node x ', stdout=_node_json('worker-4'))
    assert client.nodes_named(['x']) == {}
    client.conn.script(r'get node y ', stdout='{"items": 1}')
    with pytest.raises(exceptions.RemoteDataInvalid):
        client.nodes_named(['y'])


def _driver(conf):  # noqa: F811
    spec = _spec()
    pool = FakePool()
    pool.connection(spec.ansible.ip_address).script(r'^program:detect-layout ',
                                                    stdout=LAYOUT)
    master = pool.connection(MASTER)
    master.script(r'get (nodes|pods) ', stdout=json.dumps({'items': []}))
    return (driver.ClusterDriver(spec, 'i1', pool, conf=conf),
            _cluster(spec), master)


def _node_json(name, taints=(), labels=None):
    return json.dumps({'metadata': {'name': name, 'labels': labels or {}},
                       'spec': {'taints': [dict(t) for t in taints]}})


def _workspace_file(drv, name):
    return drv.pool.connection(drv.spec.ansible.ip_address).files[
        drv._workspace().file(name)]


def test_relabel_records_then_changes_node_by_node(conf):  # noqa: F811
    drv, cluster, master = _driver(conf)
    _nodes_are(master, json.loads(_node_json(W1, [
        {'key': 'old', 'effect': 'NoSchedule'}], {'zone': 'z'})),
        json.loads(_node_json(W2)))
    missing = day2.relabel(drv, cluster, [W1, W2],
                           (('pool', 'a'), ('zone', None)),
                           ('gpu=yes:NoSchedule', 'old:NoSchedule-'))
    assert missing == []
    assert _changes(master) == [KUBECTL + c for c in (
        'label node %s --overwrite pool=a zone-' % W1,
        'label node %s --overwrite pool=a' % W2,
        'taint node %s --overwrite gpu=yes:NoSchedule old:NoSchedule-' % W1,
        # W2 has neither "zone" nor "old": kubectl would fail to remove
        # the taint.
        'taint node %s --overwrite gpu=yes:NoSchedule' % W2)]
    assert [c for c in master.commands if ' get node ' in c] == [
        KUBECTL + 'get node %s %s --ignore-not-found -o json' % (W1, W2)]
    recorded = labels.parse_record(_workspace_file(drv, labels.RECORD_FILE))
    for name in (W1, W2):
        assert recorded[name].label_map['pool'] == 'a'
        assert recorded[name].taints == ('gpu=yes:NoSchedule',)
    hosts = yaml.safe_load(_workspace_file(drv, 'hosts.yaml'))
    assert hosts['all']['hosts'][W1]['node_labels']['pool'] == 'a'
    assert hosts['all']['hosts'][W1]['node_taints'] == ['gpu=yes:NoSchedule']


def _nodes_are(master, *items):
    master.script(r' get node ', stdout=json.dumps({'items': list(items)}))


def test_nodes_that_need_the_same_change_share_a_command(conf):  # noqa: F811
    drv, cluster, master = _driver(conf)
    _nodes_are(master, *(json.loads(_node_json(n)) for n in (W1, W2)))
    day2.relabel(drv, cluster, [W1, W2, W1], (('pool', 'a'),),
                 ('x:NoExecute',))
    assert _changes(master) == [KUBECTL + c % (W1, W2) for c in (
        'label node %s %s --overwrite pool=a',
        'taint node %s %s --overwrite x:NoExecute')]


def _changes(master):
    return [c for c in master.commands if ' label ' in c or ' taint ' in c]


def test_a_relabel_the_node_has_already_changes_nothing(conf):  # noqa: F811
    drv, cluster, master = _driver(conf)
    master.script(r'get node %s ' % W1, stdout=_node_json(
        W1, [{'key': 'gpu', 'value': 'yes', 'effect': 'NoSchedule'}],
        {'pool': 'a'}))
    assert drv.kubectl_client(cluster).nodes_named([W1])[W1].taints == (
        'gpu=yes:NoSchedule',)
    day2.relabel(drv, cluster, [W1], (('pool', 'a'), ('zone', None)),
                 ('gpu=yes:NoSchedule', 'old-'))
    assert _changes(master) == []
    assert labels.parse_record(_workspace_file(drv, labels.RECORD_FILE))[
        W1].taints == ('gpu=yes:NoSchedule',)


def test_relabel_names_a_node_kubernetes_lacks(conf):  # noqa: F811
    drv, cluster, master = _driver(conf)
    _nodes_are(master, json.loads(_node_json(W2)))
    assert day2.relabel(drv, cluster, [W1, W2, 'worker-9-9-9-9'],
                        (('pool', 'a'),),
                        ('x:NoExecute',)) == [W1, 'worker-9-9-9-9']
    assert not [c for c in master.commands
                if ' label node %s' % W1 in c or ' taint node %s' % W1 in c]
    recorded = labels.parse_record(_workspace_file(drv, labels.RECORD_FILE))
    assert recorded[W1] == drv.spec.node_settings(cluster.get(W1))
    assert recorded[W2].label_map['pool'] == 'a'


def test_a_new_driver_renders_the_recorded_values(conf):  # noqa: F811
    drv, cluster, master = _driver(conf)
    master.script(r'get node %s ' % W1, stdout=_node_json(W1))
    day2.relabel(drv, cluster, [W1], (('pool', 'a'),), ())
    # The next operation (a new driver, the parameters unchanged) keeps
    # W1's label; a heal keeps it too, a scale-in forgets it.
    again = driver.ClusterDriver(drv.spec, 'i1', drv.pool, conf=conf)
    again.upload_inventory(cluster)
    hosts = yaml.safe_load(_workspace_file(drv, 'hosts.yaml'))['all']
    assert hosts['hosts'][W1]['node_labels']['pool'] == 'a'
    assert 'pool' not in hosts['hosts'][W2].get('node_labels', {})
    membership.remove_workers(again, cluster, [W1], rejoin=True)
    assert W1 in labels.parse_record(_workspace_file(drv, labels.RECORD_FILE))
    membership.remove_workers(again, cluster, [W1])
    assert W1 not in labels.parse_record(
        _workspace_file(drv, labels.RECORD_FILE))


def test_reconcile_forgets_nodes_whose_vm_is_gone(conf):  # noqa: F811
    drv, cluster, master = _driver(conf)
    drv.upload_inventory(cluster)
    assert W2 in labels.parse_record(_workspace_file(drv, labels.RECORD_FILE))
    fresh = driver.ClusterDriver(drv.spec, 'i1', drv.pool, conf=conf)
    membership.reconcile(fresh, cluster.remove(W2))
    fresh.upload_inventory(cluster.remove(W2))
    assert sorted(labels.parse_record(
        _workspace_file(drv, labels.RECORD_FILE))) == [
        'master-10-10-0-11', W1]


def test_a_tampered_record_is_refused(conf):  # noqa: F811
    drv, cluster, master = _driver(conf)
    drv.upload_inventory(cluster)
    ansible = drv.pool.connection(drv.spec.ansible.ip_address)
    ansible.files[drv._workspace().file(labels.RECORD_FILE)] = (
        'nodes: {%s: {labels: {a: "$(id)"}, taints: []}}\n' % W1)
    fresh = driver.ClusterDriver(drv.spec, 'i1', drv.pool, conf=conf)
    with pytest.raises(exceptions.RemoteDataInvalid) as caught:
        fresh.upload_inventory(cluster)
    assert 'nodes.%s.labels' % W1 in str(caught.value)
    assert '$(id)' not in str(caught.value)


@pytest.mark.parametrize('extra, text', [
    (['--labels', 'a=b'], '--nodes, --pools: missing'),
    (['--pools', 'nope', '--labels', 'a=b'],
     "--pools: nope not in k8s_cluster_installation_param.node_pools"),
    (['--nodes', W1], '--labels, --taints: missing'),
    (['--nodes', W1, '--labels', 'a=$(id)'], "--labels: 'a=$(id)'"),
    (['--nodes', W1, '--taints', 'a=b'], "--taints: 'a=b'"),
    (['--nodes', 'worker-9-9-9-9', '--labels', 'a=b'],
     'not in the topology'),
])
def test_bad_relabel_options(capsys, extra, text):
    from tests.unit.test_cli_run import _run
    code, _, err = _run(capsys, 'relabel', '--dry-run', *extra)
    assert code == cli.EXIT_BAD_INPUT and text in err, err


def test_labels_are_only_for_relabel(capsys):
    from tests.unit.test_cli_run import _run
    code, _, err = _run(capsys, 'scale-out', '--dry-run', '--labels', 'a=b')
    assert code == cli.EXIT_BAD_INPUT
    assert '--labels: only for run relabel' in err


def test_dry_run_of_relabel_plans_the_kubectl_commands(capsys):
    from tests.unit.test_cli_run import _run
    code, out, err = _run(capsys, 'relabel', '--dry-run', '--nodes',
                          'worker-10-10-0-22', '--labels', 'pool=a',
                          '--taints', 'gpu=yes:NoSchedule')
    assert code == cli.EXIT_OK, err
    assert 'label node worker-10-10-0-22 --overwrite pool=a' in out
    assert 'taint node worker-10-10-0-22 --overwrite gpu=yes:NoSchedule' \
        in out
    assert 'ansible-playbook -i' not in out
    assert out.rstrip().splitlines()[-1] == (
        'dry run, nothing done: would relabel worker-10-10-0-22')


def _relabel_workers(conf, count):  # noqa: F811
    spec = _spec()
    workers = ['10.10.1.%d' % i for i in range(1, count + 1)]
    cluster = _cluster(spec, workers=workers)
    pool = FakePool()
    pool.connection(spec.ansible.ip_address).script(r'^program:detect-layout ',
                                                    stdout=LAYOUT)
    master = pool.connection(MASTER)
    names = [n.name for n in cluster.workers]
    _nodes_are(master, *(json.loads(_node_json(n)) for n in names))
    drv = driver.ClusterDriver(spec, 'i1', pool, conf=conf)
    assert day2.relabel(drv, cluster, names, (('pool', 'a'),),
                        ('x:NoExecute',)) == []
    return pool


def test_relabel_commands_do_not_grow_with_the_node_count(conf):  # noqa
    small, large = _relabel_workers(conf, 3), _relabel_workers(conf, 150)
    for host in (MASTER, _spec().ansible.ip_address):
        assert len(small.connection(host).calls) == len(
            large.connection(host).calls), host


def test_a_relabel_too_large_to_read_back_changes_nothing(
        conf, monkeypatch):  # noqa: F811
    """A relabel that would make the workspace's records larger than the
    driver reads back is refused before anything is written or sent:
    otherwise every later operation of the instance would fail reading
    them (a 64 KiB relabel_taints PATCH on 50 workers wrote 3.9 MB)."""
    monkeypatch.setattr(safeyaml, 'MAX_CHARS', 20000)
    spec = _spec()
    cluster = _cluster(spec, workers=['10.10.1.%d' % i for i in range(1, 6)])
    pool = FakePool()
    ansible = pool.connection(spec.ansible.ip_address)
    ansible.script(r'^program:detect-layout ', stdout=LAYOUT)
    master = pool.connection(MASTER)
    names = [n.name for n in cluster.workers]
    _nodes_are(master, *(json.loads(_node_json(n)) for n in names))
    drv = driver.ClusterDriver(spec, 'i1', pool, conf=conf)
    taints = tuple('k%d=%s:NoSchedule' % (i, 'v' * 40) for i in range(80))
    with pytest.raises(exceptions.ParamsInvalid) as caught:
        day2.relabel(drv, cluster, names, (), taints)
    message = str(caught.value)
    assert 'node-settings.yaml' in message and '20000' in message
    assert 'v' * 40 not in message
    assert ansible.files == {}
    assert not [c for c in master.commands if ' taint ' in c]
    # Within the cap, the same relabel goes through.
    monkeypatch.setattr(safeyaml, 'MAX_CHARS', 2 * 1024 * 1024)
    assert day2.relabel(drv, cluster, names, (), taints) == []


def test_a_relabel_that_changes_nothing_says_so(conf):  # noqa: F811
    """Issue 41, low item: it said "relabelled W1" though W1 had the
    label already."""
    from mgmt_driver.operations import lcm
    drv, cluster, master = _driver(conf)
    _nodes_are(master, json.loads(_node_json(W1, labels={'zone': 'a'})),
               json.loads(_node_json(W2)))
    same = lcm._run_relabel(drv, cluster, [W1], 'vim', None,
                            labels=(('zone', 'a'),))
    assert same.words(planned=False) == (
        'nothing changed: %s had every label and taint asked' % W1)
    both = lcm._run_relabel(drv, cluster, [W1, W2], 'vim', None,
                            labels=(('zone', 'a'),))
    assert both.words(planned=False) == (
        'relabelled %s; nothing changed on %s (every label and taint asked '
        'was there)' % (W2, W1))
