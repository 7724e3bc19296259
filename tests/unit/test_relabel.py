"""Day-2 relabel of existing nodes: the option checks (params), the
kubectl commands and ClusterDriver.relabel (recording SSH fake)."""

import pytest

from mgmt_driver import cli
from mgmt_driver import driver
from mgmt_driver import exceptions
from mgmt_driver import params
from tests.fakes import FakePool
from tests.unit.test_driver import conf  # noqa: F401 (a fixture)
from tests.unit.test_inventory import _cluster
from tests.unit.test_inventory import _spec
from tests.unit.test_kubectl import make_client

MASTER = '10.10.0.11'
W1, W2 = 'worker-10-10-0-21', 'worker-10-10-0-22'
KUBECTL = 'kubectl --kubeconfig /etc/kubernetes/admin.conf '
NOT_FOUND = 'Error from server (NotFound): nodes "%s" not found\n'


def test_label_and_taint_lists_are_checked_as_the_parameters():
    assert params.parse_label_list('zone=a,pool=,zone=b', '--labels') == (
        ('pool', ''), ('zone', 'b'))
    assert params.parse_taint_list(
        'gpu=yes:NoSchedule,,gpu=yes:NoSchedule,x:NoExecute',
        '--taints') == ('gpu=yes:NoSchedule', 'x:NoExecute')
    assert params.parse_label_list(None, '--labels') == ()


@pytest.mark.parametrize('parse, text, problems', [
    (params.parse_label_list, 'zone', ["--labels: 'zone': must be "
                                       'key=value']),
    (params.parse_label_list, 'a=$(id),b=ok,kubernetes.io/x=y', [
        "--labels: 'a=$(id)': value '$(id)' is not a label value",
        "--labels: 'kubernetes.io/x=y': the kubelet may not set labels"]),
    (params.parse_taint_list, 'a=b:Never', [
        "--taints: 'a=b:Never': the effect after \":\" must be one of"]),
    (params.parse_taint_list, "a=b';x:NoSchedule", [
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
    assert client.label(W1, (('pool', 'a'), ('zone', ''))) is True
    assert client.taint(W1, ('gpu=yes:NoSchedule', 'x:NoExecute')) is True
    assert client.conn.commands == [
        'kubectl label node %s --overwrite pool=a zone=' % W1,
        'kubectl taint node %s --overwrite gpu=yes:NoSchedule x:NoExecute'
        % W1]
    client.conn.script(r'label', exit_code=1, stderr=NOT_FOUND % W2)
    assert client.label(W2, (('pool', 'a'),)) is False
    with pytest.raises(exceptions.MgmtDriverParamInvalid):
        client.label('bad name; id', (('pool', 'a'),))


def _driver(conf):  # noqa: F811
    spec = _spec()
    pool = FakePool()
    return (driver.ClusterDriver(spec, 'i1', pool, conf=conf),
            _cluster(spec), pool.connection(MASTER))


def test_relabel_sets_labels_then_taints_node_by_node(conf):  # noqa: F811
    drv, cluster, master = _driver(conf)
    missing = drv.relabel(cluster, [W1, W2], (('pool', 'a'),),
                          ('gpu=yes:NoSchedule',))
    assert missing == []
    assert [c for c in master.commands if ' label ' in c or ' taint ' in c
            ] == [KUBECTL + c for c in (
                'label node %s --overwrite pool=a' % W1,
                'taint node %s --overwrite gpu=yes:NoSchedule' % W1,
                'label node %s --overwrite pool=a' % W2,
                'taint node %s --overwrite gpu=yes:NoSchedule' % W2)]


def test_relabel_names_a_node_kubernetes_lacks(conf):  # noqa: F811
    drv, cluster, master = _driver(conf)
    master.script(r'label node %s' % W1, exit_code=1, stderr=NOT_FOUND % W1)
    assert drv.relabel(cluster, [W1, W2], (), ('x:NoExecute',)) == []
    assert drv.relabel(cluster, [W1, W2], (('pool', 'a'),),
                       ('x:NoExecute',)) == [W1]
    # No taint command for the node that is not there.
    taint = KUBECTL + 'taint node %s --overwrite x:NoExecute'
    assert master.commands.count(taint % W2) == 2
    assert master.commands.count(taint % W1) == 1


@pytest.mark.parametrize('extra, text', [
    (['--labels', 'a=b'], '--nodes: missing'),
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
    assert 'ansible-playbook' not in out
    assert out.rstrip().splitlines()[-1] == (
        'dry run, nothing done: relabelled worker-10-10-0-22')
