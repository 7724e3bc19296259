"""The conformance layer's pure parts: parsing the real release's
output, comparing plays, judging guards, and the redaction of what the
double records (tests/functional/test_conformance.py runs them for
real)."""

import importlib.util
import pathlib

import mgmt_localsite as localsite

from tests.functional import kubespray_release as real

LIST_HOSTS = '''
playbook: remove-node.yml

  play #1 (localhost): Validate nodes for removal\tTAGS: []
    pattern: ['localhost']
    hosts (1):
      localhost

  play #2 (all): Check Ansible version\tTAGS: [always]
    pattern: ['all']
    hosts (2):
      w2
      cp1

  play #3 (bastion[0]): Install bastion ssh config\tTAGS: []
    pattern: ['bastion[0]']
    hosts (0):

  play #4 (w2): Confirm node removal\tTAGS: []
    pattern: ['w2']
    hosts (1):
      w2
'''

CALLBACK = (pathlib.Path(localsite.__file__).parent / 'kubespray' /
            'plugins' / 'callback' / 'kube_double_runs.py')


def play(name, *hosts):
    return {'name': name, 'hosts': list(hosts)}


def test_list_hosts_output_is_parsed_play_by_play():
    assert real.parse_list_hosts(LIST_HOSTS) == [
        {'name': 'Validate nodes for removal', 'pattern': ['localhost'],
         'hosts': ['localhost']},
        {'name': 'Check Ansible version', 'pattern': ['all'],
         'hosts': ['w2', 'cp1']},
        {'name': 'Install bastion ssh config', 'pattern': ['bastion[0]'],
         'hosts': []},
        {'name': 'Confirm node removal', 'pattern': ['w2'], 'hosts': ['w2']}]


def test_plays_that_agree_have_no_problem():
    reals = real.parse_list_hosts(LIST_HOSTS)
    double = [play('Validate nodes for removal', 'localhost'),
              play('Check Ansible version', 'cp1', 'w2'),
              play('Confirm node removal', 'w2')]
    assert real.compare_plays('remove-node.yml', double, reals) == []
    # v2.30's alias is the same playbook
    assert real.compare_plays('remove_node.yml', double, reals) == []


def test_a_play_on_other_hosts_is_named_with_both_sides():
    reals = real.parse_list_hosts(LIST_HOSTS)
    double = [play('Validate nodes for removal', 'localhost'),
              play('Check Ansible version', 'cp1', 'w2'),
              play('Confirm node removal', 'w2', 'cp1')]
    assert real.compare_plays('remove-node.yml', double, reals) == [
        "play 'Confirm node removal': the double targets ['cp1', 'w2'], "
        "the real play 'Confirm node removal' targets ['w2']"]


def test_a_play_the_release_lacks_and_a_wider_run_are_problems():
    reals = [play('Check Ansible version', 'w1')]
    double = [play('Check Ansible version', 'w1'),
              play('Invented play', 'w1', 'cp1')]
    assert real.compare_plays('scale.yml', double, reals) == [
        "double play 'Invented play' has no real play ['Invented play']",
        "the whole run: the double targets ['cp1', 'w1'], the real release "
        "['w1']"]


def test_plays_out_of_the_real_order_are_a_problem():
    reals = [play('A', 'w1'), play('B', 'w1')]
    problems = real.compare_plays('x.yml', [play('B', 'w1'), play('A', 'w1')],
                                  reals)
    assert problems == ["play 'A' comes before real play #2, which an "
                        "earlier double play maps to"]


def test_mapped_plays_use_their_relation():
    worker_plays = [play('Target only workers to get kubelet installed and '
                         'checking in on any new nodes(%s)' % p, 'w3')
                    for p in ('engine', 'node', 'network')]
    double = [play('Prepare nodes', 'w3'),
              play('Target only workers to get kubelet installed and '
                   'checking in on any new nodes', 'w3')]
    assert real.compare_plays('scale.yml', double, worker_plays) == []
    worker_plays[1]['hosts'] = ['w3', 'w4']
    assert len(real.compare_plays('scale.yml', double, worker_plays)) == 2
    # "within": the double's worker join is part of kubeadm's play.
    reals = [play('Invoke kubeadm and install a CNI', 'cp1', 'w1')]
    assert real.compare_plays('cluster.yml', [
        play('Join the worker nodes', 'w1'),
        play('Invoke kubeadm and install a CNI', 'cp1', 'w1')], reals) == []
    assert real.compare_plays('cluster.yml', [
        play('Join the worker nodes', 'w1', 'w9'),
        play('Invoke kubeadm and install a CNI', 'cp1', 'w1')], reals)[0] \
        .startswith("play 'Join the worker nodes': the double targets")


def _run(*rows):
    return {'plays': [{'play': {'name': p}, 'tasks': [
        {'task': {'name': t}, 'hosts': {h: result}}]}
        for p, t, h, result in rows]}


def test_guards_failed_missing_or_skipped_are_problems():
    rows = real.task_results(_run(
        ('Check Ansible version', 'Check', 'cp1', {}),
        ('Reset cluster', 'Check confirmation', 'cp1',
         {'failed': True, 'msg': 'Reset confirmation failed'}),
        ('Prepare', 'Stop if cached', 'cp1', {'skipped': True}),
        ('Bootstrap', 'Fetch', 'cp1', {'unreachable': True})))
    assert real.guard_problems(rows, plays=['Check Ansible version']) == [
        'Reset cluster / Check confirmation failed on cp1: Reset '
        'confirmation failed']
    assert real.guard_problems(
        rows[:1], plays=['Check Ansible version', 'Confirm node removal'],
        tasks=['Check', 'Reset Confirmation'],
        evaluated=['Check']) == [
        "play 'Confirm node removal' did not run",
        "task 'Reset Confirmation' did not run"]
    assert real.guard_problems(rows[2:3], evaluated=['Stop if cached']) == [
        "task 'Stop if cached' was skipped"]


def test_json_output_is_found_after_other_lines():
    assert real.parse_json_run('warning\n{"plays": []}\n') == {'plays': []}


def test_recorded_extra_vars_lose_their_credentials():
    spec = importlib.util.spec_from_file_location('invocations', CALLBACK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    recorded = module.redact({
        'http_proxy': 'http://user:s3cret@proxy:3128',
        'ansible_become_password': 'pw', 'api_token': {'a': 1},
        'node': 'w1,w2', 'skip_confirmation': True, 'serial': 2,
        'urls': ['https://mirror/x', 'ftp://u@host/']})
    assert recorded == {
        'http_proxy': 'http://<redacted>@proxy:3128',
        'ansible_become_password': '<redacted>', 'api_token': '<redacted>',
        'node': 'w1,w2', 'skip_confirmation': True, 'serial': 2,
        'urls': ['https://mirror/x', 'ftp://<redacted>@host/']}
