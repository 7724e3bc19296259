"""Rolling upgrades: the version rules (mgmt_driver.operations.upgrade) and how
the driver, its v1 hook and the CLI use them, with the recording SSH fake."""

import json
import types

import pytest
import yaml

from mgmt_driver.adapters import cli
from mgmt_driver.common import exceptions
from mgmt_driver.model import labels
from mgmt_driver.operations import upgrade
from mgmt_driver.state import kubeversion
from tests.unit import test_cli_run
from tests.unit.test_driver import Harness
from tests.unit.test_driver import _instantiate_params
from tests.unit.test_driver import conf  # noqa: F401 (fixture)

SUPPORTED = {(1, 33, 0), (1, 33, 5), (1, 34, 0), (1, 34, 3), (1, 35, 0)}
MASTERS = ['m1', 'm2', 'm3']
WORKERS = ['w1', 'w2']


def _nodes(version='v1.33.5', **special):
    """NodeInfo-like nodes; *special*: ``{name: (version, schedulable)}``."""
    return [types.SimpleNamespace(
        name=n, kubelet_version=special.get(n, (version, True))[0],
        schedulable=special.get(n, (version, True))[1])
        for n in MASTERS + WORKERS]


def _plan(target, nodes=None, supported=SUPPORTED):
    return upgrade.plan(upgrade.parse_version(target, 'f'),
                        _nodes() if nodes is None else nodes, MASTERS,
                        WORKERS, supported, 'f')


@pytest.mark.parametrize('text, expected', [
    ('1.34.3', (1, 34, 3)), ('v1.34.3', (1, 34, 3)),
    ('1.33.10', (1, 33, 10))])
def test_parse_version(text, expected):
    assert upgrade.parse_version(text, 'f') == expected


@pytest.mark.parametrize('text', [
    '1.32', '1.34.3.1', ' 1.34.3', '1.34.3\n', 'latest', '', None, 1.32,
    '1.34.3; rm -rf /', '{{ lookup("pipe", "id") }}', '9' * 60])
def test_parse_version_refuses_and_names_the_field(text):
    with pytest.raises(exceptions.ParamsInvalid) as caught:
        upgrade.parse_version(text, 'vnf_metadata.kube_version')
    assert caught.value.problems[0].startswith('vnf_metadata.kube_version: ')
    assert len(str(caught.value)) < 200


@pytest.mark.parametrize('value, expected', [
    (None, None), (3, 3), ('3', 3), ('25%', '25%'), ('100%', '100%')])
def test_parse_serial(value, expected):
    assert upgrade.parse_serial(value, 's') == expected


@pytest.mark.parametrize('value', [0, '0', '101%', '-1', '1.5', 'all',
                                   True, 2.0, '', '%'])
def test_parse_serial_refuses(value):
    with pytest.raises(exceptions.ParamsInvalid, match='^1 problem.*s: '):
        upgrade.parse_serial(value, 's')


def test_one_minor_up_upgrades_every_node_masters_in_order():
    got = _plan('1.34.3')
    assert (got.masters, got.workers) == (tuple(MASTERS), tuple(WORKERS))
    assert not got.done


@pytest.mark.parametrize('target, problem', [
    ('1.33.0', 'f: 1.33.0 is older than 1.33.5, the version of m1 '
               '(downgrades are not supported)'),
    ('1.35.0', 'f: 1.35.0 skips a minor release: the cluster runs 1.33.5 '
               '(upgrade to 1.34 first; patch releases may be skipped)'),
    ('1.34.9', 'f: 1.34.9 is not supported by the kubespray checkout (its '
               'kubelet_checksums list 1.35.0, 1.34.3, 1.34.0, 1.33.5, '
               '1.33.0)'),
])
def test_refused_targets(target, problem):
    with pytest.raises(exceptions.ParamsInvalid) as caught:
        _plan(target)
    assert caught.value.problems == [problem]


def test_a_major_release_and_an_unknown_one_are_both_reported():
    with pytest.raises(exceptions.ParamsInvalid) as caught:
        _plan('2.0.0')
    assert [p.split(':')[0] for p in caught.value.problems] == ['f', 'f']
    assert 'skips a minor release' in caught.value.problems[0]


def test_patch_releases_may_be_skipped_and_an_unknown_list_is_not_checked():
    assert _plan('1.33.9', supported=None).masters == tuple(MASTERS)


def test_a_half_done_upgrade_continues_where_it_stopped():
    # m1 and w1 are done; m2 was drained and upgraded but not uncordoned.
    nodes = _nodes(m1=('v1.34.3', True), w1=('v1.34.3', True),
                   m2=('v1.34.3', False))
    got = _plan('1.34.3', nodes)
    assert (got.masters, got.workers) == (('m2', 'm3'), ('w2',))
    # Back to the old version is a downgrade of m1; two minors up from
    # the oldest node is a skip.
    for target in ('1.33.5', '1.35.0'):
        with pytest.raises(exceptions.ParamsInvalid):
            _plan(target, nodes)


def test_a_node_cordoned_before_the_upgrade_is_done_at_the_target():
    # w1 was cordoned by an operator before the upgrade: kubespray
    # upgrades it where it stands and leaves it cordoned.  m2 was
    # cordoned by a failed run of this upgrade: not done, and to be
    # uncordoned before the next run so that kubespray drains it.
    nodes = _nodes(m1=('v1.34.3', True), w1=('v1.34.3', False),
                   m2=('v1.33.5', False))
    target = upgrade.parse_version('1.34.3', 'f')
    got = upgrade.plan(target, nodes, MASTERS, WORKERS, SUPPORTED, 'f',
                       frozenset({'w1'}))
    assert (got.masters, got.workers) == (('m2', 'm3'), ('w2',))
    assert upgrade.left_cordoned(nodes, got, frozenset({'w1'})) == ['m2']
    # Without the record, w1 would be upgraded again and again.
    assert 'w1' in _plan('1.34.3', nodes).workers


def test_the_cordon_record_round_trips_and_is_untrusted():
    text = upgrade.render_cordons((1, 34, 3), {'w2', 'w1'})
    assert json.loads(text) == {'target': '1.34.3',
                                'cordoned_before': ['w1', 'w2']}
    assert upgrade.parse_cordons(text) == ((1, 34, 3),
                                           frozenset({'w1', 'w2'}))
    assert upgrade.parse_cordons(None) is None
    # Any name kubectl reports may be recorded and read back.
    assert upgrade.parse_cordons(upgrade.render_cordons(
        (1, 34, 3), {'Stray_1'})) == ((1, 34, 3), frozenset({'Stray_1'}))
    for bad in ('', '[]', '{"target": "1.34.3"}',
                '{"target": "latest", "cordoned_before": []}',
                '{"target": "1.34.3", "cordoned_before": ["W 1"]}',
                '{"target": "1.34.3", "cordoned_before": [1]}',
                '{"target": "1.34.3", "cordoned_before": ["a"], "x": 1}',
                '[' * 100000 + ']' * 100000,
                json.dumps({'target': '1.34.3', 'cordoned_before': [
                    'n%d' % i for i in range(upgrade.MAX_CORDONED + 1)]})):
        with pytest.raises(ValueError) as caught:
            upgrade.parse_cordons(bad)
        assert 'W 1' not in str(caught.value)


def test_every_node_at_the_target_is_nothing_to_do():
    assert _plan('1.33.5').done


def test_nodes_outside_the_cluster_do_not_count():
    nodes = _nodes() + [types.SimpleNamespace(
        name='stray', kubelet_version='v1.35.0', schedulable=True)]
    assert _plan('1.34.3', nodes).masters == tuple(MASTERS)


def test_no_registered_node_is_an_error_but_a_dry_run_plans_every_node():
    with pytest.raises(exceptions.MgmtDriverOtherError):
        _plan('1.34.3', [])
    got = upgrade.plan((1, 34, 3), None, MASTERS, WORKERS, SUPPORTED, 'f')
    assert got.masters == tuple(MASTERS)
    with pytest.raises(exceptions.ParamsInvalid):
        upgrade.plan((1, 34, 9), None, MASTERS, WORKERS, SUPPORTED, 'f')


@pytest.mark.parametrize('text, expected', [
    ('v1.33.5', (1, 33, 5)), ('v1.33.5+rke2r1', (1, 33, 5)),
    ('1.30.2-eks-1234', (1, 30, 2))])
def test_kubelet_versions_with_suffixes(text, expected):
    node = types.SimpleNamespace(name='n', kubelet_version=text)
    assert upgrade.kubelet_version(node) == expected


def test_a_bad_kubelet_version_names_the_node_and_is_cut():
    node = types.SimpleNamespace(name='n1', kubelet_version='x' * 5000)
    with pytest.raises(exceptions.RemoteDataInvalid) as caught:
        upgrade.kubelet_version(node)
    assert 'node n1' in str(caught.value) and len(str(caught.value)) < 300


def test_record_round_trip_and_tampering():
    text = kubeversion.render_record((1, 34, 3))
    assert text == 'kube_version: "1.34.3"\n'
    assert kubeversion.parse_record(text) == (1, 34, 3)
    assert kubeversion.parse_record(None) is None
    for bad in ('', 'kube_version: "{{ x }}"\n', 'kube_version: 1.34.3\n',
                text + text, 'kube_version: "1.34.3"\nother: 1\n'):
        with pytest.raises(ValueError):
            kubeversion.parse_record(bad)


def test_parse_supported_keeps_versions_only():
    assert upgrade.parse_supported(['1.35.4', 'v1.26.5', 'junk', '']) == {
        (1, 35, 4), (1, 26, 5)}
    assert upgrade.parse_supported([]) is None


# --------------------------------------------------------------- driver --

def _k8s_nodes(version, ready='True'):
    return json.dumps({'items': [
        {'metadata': {'name': n},
         'status': {'nodeInfo': {'kubeletVersion': version},
                    'conditions': [{'type': 'Ready', 'status': ready}]}}
        for n in ('master-10-10-0-11', 'worker-10-10-0-21',
                  'worker-10-10-0-22')]})


def healthy(h, before='v1.33.5', after='v1.34.3', listed=None, gated=None):
    """Script a healthy cluster on *h*'s master: its nodes at *before*
    for the preflight's listing, at *after* for the gates' (each gate
    lists them once), no pod, no budget, one healthy etcd member, the
    API ready through the load balancer.

    :param listed: the preflight's node list (JSON), if not all Ready at
        *before*.
    :param gated: the gates' node list (JSON), if not all Ready and
        schedulable at *after*.
    """
    h.master.script(r'get nodes -o json', stdout=gated or _k8s_nodes(after),
                    first=True)
    h.master.script(r'get nodes -o json', stdout=listed or _k8s_nodes(
        before), first=True, times=1)
    h.master.script(r'get pods -A -o json', stdout='{"items": []}')
    h.master.script(r'get poddisruptionbudgets -A -o json',
                    stdout='{"items": []}')
    h.master.script(r'member list -w json', stdout=json.dumps(
        {'members': [{'ID': 1, 'name': 'etcd1'}]}))
    h.master.script(r'endpoint health --cluster -w json', stdout=json.dumps(
        [{'endpoint': 'https://10.10.0.11:2379', 'health': True}]))
    h.master.script(r'get --raw=/readyz', stdout='ok\n')


def test_check_metadata_reads_its_keys_and_leaves_the_others():
    wanted = upgrade.check_metadata(
        {'kube_version': 'v1.34.3', 'kube_upgrade_serial': '25%',
         'owner': {'any': ['thing']}}, 'metadata')
    assert wanted == upgrade.MetadataRequest((1, 34, 3), '25%', 'metadata')
    assert wanted.field('kube_version') == 'metadata.kube_version'


@pytest.mark.parametrize('metadata', [{}, {'owner': 'ops'},
                                      {'kube_version': None}])
def test_check_metadata_without_a_version_asks_nothing(metadata):
    assert upgrade.check_metadata(metadata, 'metadata') == \
        upgrade.MetadataRequest(prefix='metadata')


def test_check_metadata_lists_every_problem_with_its_field():
    with pytest.raises(exceptions.ParamsInvalid) as caught:
        upgrade.check_metadata({'kube_version': '1.32',
                                'kube_upgrade_serial': 'all'}, 'metadata')
    # Sorted by field, as every request's problems are.
    assert [p.split(': ')[0] for p in caught.value.problems] == [
        'metadata.kube_upgrade_serial', 'metadata.kube_version']


def test_check_metadata_refuses_a_non_object():
    with pytest.raises(exceptions.ParamsInvalid) as caught:
        upgrade.check_metadata(['kube_version'], 'metadata')
    assert caught.value.problems == [
        'metadata: must be an object of key-value pairs, not list']


def _upgrade_harness(conf, version='v1.33.5', listed=None,  # noqa: F811
                     gated=None):
    h = Harness(conf)
    healthy(h, version, listed=listed, gated=gated)
    h.ansible.script(r'^program:supported-kube-versions ',
                     stdout='KS:KUBE:1.34.3\nKS:KUBE:1.33.5\n')
    return h


def _patch(h, metadata):
    instance = h.instance(_instantiate_params())
    instance.vnf_metadata = metadata
    h.hooks.modify_information_end(None, instance, None, None, None)


def _playbook_limits(h):
    return [(c.rsplit(' ', 1)[-1], c.split('--limit=')[1].split()[0]
             if '--limit=' in c else None)
            for c in h.ansible.commands if 'ansible-playbook -i' in c]


WORKSPACE = '/home/ubuntu/kubespray/inventory/mycluster/inst-1/'


def _k8s_nodes_cordoned(version, cordoned):
    data = json.loads(_k8s_nodes(version))
    for item in data['items']:
        if item['metadata']['name'] in cordoned:
            item['spec'] = {'unschedulable': True}
    return json.dumps(data)


def test_a_rerun_uncordons_what_the_failed_run_left_cordoned(conf):  # noqa
    h = _upgrade_harness(conf, listed=_k8s_nodes_cordoned(
        'v1.33.5', {'worker-10-10-0-21', 'worker-10-10-0-22'}))
    # The first run for 1.34.3 found worker-10-10-0-22 cordoned already.
    h.ansible.files[WORKSPACE + upgrade.CORDONS_FILE] = \
        upgrade.render_cordons((1, 34, 3), {'worker-10-10-0-22'})
    _patch(h, {'kube_version': '1.34.3'})
    uncordoned = [c for c in h.master.commands if ' uncordon ' in c]
    assert len(uncordoned) == 1 and uncordoned[0].endswith(
        ' uncordon worker-10-10-0-21')
    assert json.loads(h.workspace_files()[upgrade.CORDONS_FILE]) == {
        'target': '1.34.3', 'cordoned_before': ['worker-10-10-0-22']}


def test_a_first_run_records_the_nodes_cordoned_before_it(conf):  # noqa
    h = _upgrade_harness(conf, listed=_k8s_nodes_cordoned(
        'v1.33.5', {'worker-10-10-0-22'}))
    _patch(h, {'kube_version': '1.34.3',
               'kube_upgrade_excused': ['worker-10-10-0-22']})
    assert [c for c in h.master.commands if ' uncordon ' in c] == []
    assert json.loads(h.workspace_files()[upgrade.CORDONS_FILE]) == {
        'target': '1.34.3', 'cordoned_before': ['worker-10-10-0-22']}


def test_modify_information_without_a_version_does_nothing(conf):  # noqa
    h = _upgrade_harness(conf)
    _patch(h, {'owner': 'team-a'})
    assert not any(c.calls for c in (h.ansible, h.master, h.lb))


@pytest.mark.parametrize('metadata, field', [
    ({'kube_version': '1.32'}, 'vnf_metadata.kube_version'),
    ({'kube_version': '1.34.3', 'kube_upgrade_serial': 'all'},
     'vnf_metadata.kube_upgrade_serial'),
    # A bad value is refused even while no upgrade is asked for.
    ({'kube_upgrade_serial': '0', 'owner': 'ops'},
     'vnf_metadata.kube_upgrade_serial')])
def test_a_bad_patch_is_refused_before_any_connection(conf, metadata,  # noqa
                                                      field):
    h = _upgrade_harness(conf)
    with pytest.raises(exceptions.ParamsInvalid) as caught:
        _patch(h, metadata)
    assert caught.value.problems[0].startswith(field + ': ')
    assert not any(c.calls for c in (h.ansible, h.master, h.lb))


def test_a_refused_version_writes_nothing_and_runs_no_playbook(conf):  # noqa
    h = _upgrade_harness(conf)
    with pytest.raises(exceptions.ParamsInvalid, match='skips a minor'):
        _patch(h, {'kube_version': '1.35.0'})
    assert h.playbooks() == []
    assert h.workspace_files() == {}
    assert h.lb.calls == []


def test_upgrade_records_the_version_and_runs_node_by_node(conf):  # noqa
    h = _upgrade_harness(conf)
    _patch(h, {'kube_version': 'v1.34.3', 'kube_upgrade_serial': '50%'})
    assert _playbook_limits(h) == [
        ('playbooks/facts.yml', None),
        ('upgrade-cluster.yml', 'master-10-10-0-11'),
        # 50 % of two workers: batches of one, one run each (a gate
        # after each).
        ('upgrade-cluster.yml', 'worker-10-10-0-21'),
        ('upgrade-cluster.yml', 'worker-10-10-0-22')]
    files = h.workspace_files()
    assert files[kubeversion.RECORD_FILE] == 'kube_version: "1.34.3"\n'
    assert yaml.safe_load(files['cluster-vars.yaml'])['kube_version'] == \
        '1.34.3'
    assert yaml.safe_load(files['upgrade-vars.yaml']) == {'serial': 1}


def test_a_later_operation_renders_the_recorded_version(conf):  # noqa
    h = _upgrade_harness(conf, 'v1.34.3')
    prefix = '/home/ubuntu/kubespray/inventory/mycluster/inst-1/'
    h.ansible.files[prefix + kubeversion.RECORD_FILE] = \
        'kube_version: "1.34.3"\n'
    extra = _instantiate_params(3)
    extra['k8s_cluster_installation_param']['kubespray'] = {
        'extra_vars': {'kube_version': '1.33.5'}}
    instance = h.instance(extra)
    h.hooks.scale_end(None, instance, types.SimpleNamespace(
        additional_params={}, type='SCALE_OUT'), None, None)
    assert yaml.safe_load(h.workspace_files()['cluster-vars.yaml'])[
        'kube_version'] == '1.34.3'
    assert 'scale.yml' in h.playbooks()


def test_a_tampered_record_is_refused(conf):  # noqa
    h = _upgrade_harness(conf)
    prefix = '/home/ubuntu/kubespray/inventory/mycluster/inst-1/'
    h.ansible.files[prefix + kubeversion.RECORD_FILE] = 'kube_version: "{{x}}"'
    with pytest.raises(exceptions.RemoteDataInvalid,
                       match=kubeversion.RECORD_FILE):
        _patch(h, {'kube_version': '1.34.3'})
    assert h.playbooks() == []


# ------------------------------------------------------------------ cli --

def test_cli_dry_run_plans_the_upgrade(capsys):
    code, out, err = test_cli_run._run(
        capsys, 'upgrade', '--dry-run', '--kube-version', '1.34.3',
        '--serial', '2')
    assert code == cli.EXIT_OK, err
    # Issue 31, defect 11: no past tense, no warning about a list the
    # dry run did not read (the plan says it was not read).
    assert out.rstrip().splitlines()[-1] == (
        'dry run, nothing done: would upgrade %s to 1.34.3: 3 node(s), '
        'every one planned (a dry run cannot ask their versions; a real '
        'run skips those already there)' % 'kubernetes_vim_simple')
    assert 'kubelet_checksums' not in err
    assert '# not read: the Kubernetes versions the checkout lists ' \
           '(kubelet_checksums); a real run checks' in out
    ran = [line.split('--limit=')[-1] for line in out.splitlines()
           if line.startswith('$ ') and 'upgrade-cluster.yml' in line]
    assert ran == ['master-10-10-0-11 upgrade-cluster.yml',
                   'worker-10-10-0-21,worker-10-10-0-22 upgrade-cluster.yml']
    assert 'kube_version: "1.34.3"' in out


@pytest.mark.parametrize('extra, text', [
    ([], '--kube-version: missing'),
    (['--kube-version', '1.32'], '--kube-version: must be a Kubernetes'),
    (['--kube-version', '1.34.3', '--serial', '0'], '--serial: must be'),
])
def test_cli_upgrade_arguments(capsys, extra, text):
    code, out, err = test_cli_run._run(capsys, 'upgrade', '--dry-run',
                                       *extra)
    assert code == cli.EXIT_BAD_INPUT and text in err and out == ''


def test_cli_upgrade_options_only_for_upgrade(capsys):
    code, _, err = test_cli_run._run(capsys, 'scale-out', '--dry-run',
                                     '--kube-version', '1.34.3')
    assert code == cli.EXIT_BAD_INPUT
    assert '--kube-version: only for run upgrade' in err


# ------------------------------------------------------- the checkout --

_CHECKSUMS = '''---
crictl_checksums:
  amd64:
    1.99.0: sha256:0
kubelet_checksums:
  arm:
    %(prefix)s1.30.9: 0
  amd64:
    %(prefix)s1.33.5: sha256:0
    # a comment
    %(prefix)s1.33.0: sha256:0
  ppc64le:
    %(prefix)s1.29.0: sha256:0
kubectl_checksums:
  amd64:
    1.98.0: sha256:0
'''


@pytest.mark.parametrize('path, prefix', [
    ('roles/kubespray_defaults/vars/main/checksums.yml', ''),
    ('roles/kubespray-defaults/defaults/main/checksums.yml', 'v'),
    ('roles/download/defaults/main/checksums.yml', 'v'),
    ('roles/download/defaults/main.yml', 'v')])
def test_supported_versions_are_the_amd64_kubelet_keys(tmp_path, path,
                                                       prefix):
    import subprocess

    from mgmt_driver.remote import kubespray

    class Local:
        host = 'localhost'

        def run(self, argv):
            out = subprocess.run(argv, capture_output=True, text=True,
                                 check=True, timeout=30).stdout
            return types.SimpleNamespace(stdout=out)

    target = tmp_path / path
    target.parent.mkdir(parents=True)
    target.write_text(_CHECKSUMS % {'prefix': prefix})
    found = kubespray.supported_kube_versions(Local(), str(tmp_path))
    assert found == [prefix + '1.33.5', prefix + '1.33.0']
    assert upgrade.parse_supported(found) == {(1, 33, 5), (1, 33, 0)}
    target.unlink()
    assert kubespray.supported_kube_versions(Local(), str(tmp_path)) == []


# ------------------------------------------------------ relabel by PATCH --

W1 = 'worker-10-10-0-21'


def test_a_patch_relabels_nodes_before_any_upgrade(conf):  # noqa: F811
    h = _upgrade_harness(conf)
    h.master.script(r'get node %s ' % W1, stdout=json.dumps({
        'metadata': {'name': W1, 'labels': {'zone': 'z'}}}))
    _patch(h, {'relabel_nodes': W1, 'relabel_labels': 'pool=a,zone-',
               'relabel_taints': 'gpu=yes:NoSchedule', 'owner': 'ops'})
    assert [c.split('admin.conf ')[1] for c in h.master.commands
            if ' label ' in c or ' taint ' in c] == [
        'label node %s --overwrite pool=a zone-' % W1,
        'taint node %s --overwrite gpu=yes:NoSchedule' % W1]
    assert h.playbooks() == []
    record = labels.parse_record(h.workspace_files()[labels.RECORD_FILE])
    assert record[W1].label_map['pool'] == 'a'
    # The same metadata again (any later PATCH): nothing to change.
    h.master.script(r'get node %s ' % W1, stdout=json.dumps({
        'metadata': {'name': W1, 'labels': {'pool': 'a'}},
        'spec': {'taints': [{'key': 'gpu', 'value': 'yes',
                             'effect': 'NoSchedule'}]}}), first=True)
    before = len(h.master.commands)
    _patch(h, {'relabel_nodes': W1, 'relabel_labels': 'pool=a,zone-',
               'relabel_taints': 'gpu=yes:NoSchedule'})
    assert not [c for c in h.master.commands[before:]
                if ' label ' in c or ' taint ' in c]


@pytest.mark.parametrize('metadata, problem', [
    ({'relabel_labels': 'pool=a'}, 'vnf_metadata.relabel_nodes, '
     'vnf_metadata.relabel_pools: missing'),
    ({'relabel_nodes': W1, 'relabel_labels': 'pool=$(id)',
      'kube_version': '1.34.3'}, "vnf_metadata.relabel_labels: 'pool=$(id)'"),
    ({'relabel_pools': 'gpu', 'relabel_labels': 'pool=a'},
     'vnf_metadata.relabel_pools: gpu not in '),
])
def test_a_bad_relabel_patch_is_refused_before_any_connection(
        conf, metadata, problem):  # noqa: F811
    h = _upgrade_harness(conf)
    with pytest.raises(exceptions.ParamsInvalid) as caught:
        _patch(h, metadata)
    assert caught.value.problems[0].startswith(problem), caught.value
    assert not any(c.calls for c in (h.ansible, h.master, h.lb))


def test_a_repeated_upgrade_says_the_cluster_is_already_there(monkeypatch):
    # Issue 31, defect 11: not "0 node(s) upgraded".
    from mgmt_driver.operations import lcm
    from tests import fakes
    monkeypatch.setattr(lcm, 'upgrade', lambda *args, **kwargs:
                        upgrade.Plan((1, 34, 3), (), ()))
    drv = types.SimpleNamespace(pool=fakes.FakePool(), absent=frozenset(),
                                declare_absent=lambda *args: None)
    assert lcm.COMMANDS['upgrade'](
        drv, None, [], 'c1', vims=object(), kube_version='1.34.3') == \
        'c1 is already at 1.34.3: no node to upgrade'
    monkeypatch.setattr(lcm, 'upgrade', lambda *args, **kwargs:
                        upgrade.Plan((1, 34, 3), ('m1',), ('w1', 'w2')))
    assert lcm.COMMANDS['upgrade'](
        drv, None, [], 'c1', vims=object(), kube_version='1.34.3') == \
        'upgraded c1 to 1.34.3: 3 node(s) upgraded'
