"""A dry run ends with what it would do, never with what it did
(issue 29): every operation's last line in the conditional, worded in
one place (:mod:`mgmt_driver.common.outcomes`), and ``-o json`` saying the plan
with keys of its own."""

import json
import pathlib
import re

import pytest

from mgmt_driver.adapters import cli
from mgmt_driver.common import outcomes

SAMPLES = pathlib.Path(__file__).parents[2] / 'samples'
PARAMS = str(SAMPLES / 'instantiate_ha.json')
TOPOLOGY = str(SAMPLES / 'topology_ha.yaml')
VIM = 'kubernetes_vim_ha'
LB = 'lb-10-10-0-30'
MASTERS = ['master-10-10-0-11', 'master-10-10-0-12', 'master-10-10-0-13']
W1, W2 = 'worker-10-10-0-21', 'worker-10-10-0-22'
CLUSTER = '%s at https://10.10.0.30:8383' % VIM
WORKSPACE = '/home/ubuntu/kubespray/inventory/cluster-ha/kubespray-mgmt'

#: (operation, options, the last line after "dry run, nothing done: ",
#: nodes would_add, nodes would_remove)
CASES = [
    ('instantiate', [], 'would build cluster ' + CLUSTER,
     sorted(MASTERS + [W1, W2, LB]), []),
    ('scale-out', ['--nodes', W2], 'would add 1 worker(s): ' + W2, [W2],
     []),
    ('scale-out', [], 'would add 2 worker(s) Kubernetes lacks among %s, %s '
     '(a dry run cannot ask it: the plan joins every one)' % (W1, W2),
     [W1, W2], []),
    ('scale-in', ['--nodes', W2], 'would remove ' + W2, [], [W2]),
    ('heal', ['--nodes', '%s,%s' % (MASTERS[0], W1)],
     'would heal %s, %s' % (MASTERS[0], W1), [], []),
    ('heal', [], 'would heal the whole VNF: cluster ' + CLUSTER, [], []),
    ('terminate', [], 'would terminate ' + VIM, [],
     sorted(MASTERS + [W1, W2, LB])),
    ('upgrade', ['--kube-version', '1.31.4', '--absent', W2],
     'would upgrade %s to 1.31.4: 4 node(s), every one planned (a dry run '
     'cannot ask their versions; a real run skips those already there); '
     'would skip (declared absent): %s' % (VIM, W2), [], []),
    ('relabel', ['--nodes', W1, '--labels', 'zone=a'], 'would relabel ' + W1,
     [], []),
    ('renew-certs', [], 'would renew the control-plane certificates of %s, '
     'one master at a time; the API would answer through the load '
     'balancer' % VIM, [], []),
    ('snapshot', [], 'would take a new etcd snapshot and keep it in '
     '%s/etcd-snapshots' % WORKSPACE, [], []),
]


def _dry_run(capsys, operation, options, *output):
    code = cli.main(['run', operation, *options, '--dry-run', '--params',
                     PARAMS, '--topology', TOPOLOGY, *output])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_OK, err
    return out


def test_every_operation_has_a_case():
    assert {case[0] for case in CASES} == set(cli.OPERATIONS)


@pytest.mark.parametrize('operation, options, line, added, removed', CASES)
def test_a_dry_run_ends_with_what_it_would_do(capsys, operation, options,
                                              line, added, removed):
    out = _dry_run(capsys, operation, options)
    assert out.rstrip().splitlines()[-1] == 'dry run, nothing done: ' + line


@pytest.mark.parametrize('operation, options, line, added, removed', CASES)
def test_a_dry_run_in_json_says_the_plan(capsys, operation, options, line,
                                         added, removed):
    document = json.loads(_dry_run(capsys, operation, options, '-o', 'json'))
    assert document['dry_run'] is True
    assert document['summary'] == line
    # Keys of its own: nothing reads a plan as nodes added or removed.
    assert document['nodes'] == {
        'would_add': added, 'would_remove': removed,
        'named': [n for o in options[1:2] if options[0] == '--nodes'
                  for n in o.split(',')]}
    assert document['steps']


def test_a_dry_run_snapshot_invents_no_file_name(capsys):
    # The name is the time the snapshot is taken: a plan cannot know it.
    out = _dry_run(capsys, 'snapshot', [])
    assert not re.search(r'etcd-\d{8}T\d{6}Z', out), out


def test_a_run_keeps_the_past_tense():
    outcome = outcomes.Outcome(
        '{add} {count} worker(s); {how}', count=2,
        how=outcomes.Tense('done', 'planned'))
    assert outcome.words(False) == 'added 2 worker(s); done'
    assert outcome.words(True) == 'would add 2 worker(s); planned'
    summary = outcome.words(True)
    assert summary.planned and isinstance(summary, str)


def test_a_value_is_never_read_as_a_template():
    outcome = outcomes.Outcome('{remove} {names}', removed=['{add}'],
                               names='{add}')
    summary = outcome.words(True)
    assert summary == 'would remove {add}' and summary.removed == ('{add}',)


def test_every_verb_has_a_conditional():
    for verb, tense in outcomes.VERBS.items():
        assert tense.planned.startswith('would '), verb
        assert not tense.done.startswith('would '), verb


def test_an_upgrade_plan_shows_its_preflight_and_every_gate(capsys):
    """Issue 41, item 9: the real run reads nodes, etcd and budgets
    before it changes anything, and checks after every run; the plan
    showed neither."""
    out = _dry_run(capsys, 'upgrade', ['--kube-version', '1.31.4',
                                       '--serial', '1'])
    notes = [line for line in out.splitlines()
             if line.startswith('# not read: ') and 'budgets here' in line]
    assert notes[0].startswith('# not read: the preflight, before any '
                               'change: every node Ready')
    checked = [line.split('the check after upgrading ')[1].split(':')[0]
               for line in notes[1:]]
    assert checked == MASTERS + [W1, W2]
    first_run = out.index('upgrade-cluster.yml')
    assert out.index(notes[0]) < first_run < out.index(notes[1])
