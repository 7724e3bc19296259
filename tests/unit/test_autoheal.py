"""Self-healing (mgmt_driver.operations.autoheal): the identity labels and
their survival (inventory, relabel), Tacker's automatic heal request, the guard
rails, and the shipped Prometheus rules (promtool)."""

import functools
import json
import logging
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import types

import pytest
import yaml

from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.model import labels
from mgmt_driver.operations import autoheal
from mgmt_driver.operations import day2
from mgmt_driver.operations import membership
from mgmt_driver.session import driver
from tests import docs
from tests import packages
from tests.unit.test_driver import conf  # noqa: F401 (a fixture)
from tests.unit.test_relabel import W1
from tests.unit.test_relabel import W2
from tests.unit.test_relabel import _driver
from tests.unit.test_relabel import _workspace_file

RULES = pathlib.Path(packages.REPO) / 'etc' / 'prometheus'
RULES_FILE = RULES / 'kubespray-mgmt-autoheal.rules.yaml'
RULES_TEST = RULES / 'kubespray-mgmt-autoheal.test.yaml'
INST = '1b0f3c55-7a63-4e0e-9d2b-5f3c7a1e9b20'


def _inst(*servers):
    """A v2 instance dict as Tacker's infra driver writes it: one
    vnfcResourceInfo per server, vnfcInfo ids ``<VDU>-<resource id>``."""
    return {'id': INST, 'instantiatedVnfInfo': {
        'vnfcResourceInfo': [
            {'id': 'res-%s' % s, 'vduId': 'workerNode',
             'computeResource': {'resourceId': s}} for s in servers],
        'vnfcInfo': [
            {'id': 'workerNode-res-%s' % s, 'vduId': 'workerNode',
             'vnfcResourceInfoId': 'res-%s' % s} for s in servers]}}


# ------------------------------------------------------------ identity


def test_each_node_is_named_by_its_instance_and_vnfc_info_id():
    identity = autoheal.identity_of(_inst('s1', 's2'), {
        'worker-a': 's1', 'worker-b': 's2', 'worker-c': 'unknown'})
    assert identity == {
        'worker-a': ((labels.LABEL_INSTANCE, INST),
                     (labels.LABEL_VNFC, 'workerNode-res-s1')),
        'worker-b': ((labels.LABEL_INSTANCE, INST),
                     (labels.LABEL_VNFC, 'workerNode-res-s2')),
        # No vnfcInfo for its server: Tacker could not name it anyway.
        'worker-c': ((labels.LABEL_INSTANCE, INST),)}


def test_an_id_that_is_no_label_value_is_left_out():
    inst = _inst('s1')
    inst['instantiatedVnfInfo']['vnfcInfo'][0]['id'] = 'a b/$(id)'
    assert autoheal.identity_of(inst, {'w': 's1'}) == {
        'w': ((labels.LABEL_INSTANCE, INST),)}


def test_identity_is_laid_over_the_settings_and_a_stale_one_dropped():
    settings = core.NodeSettings(
        (('pool', 'a'), (labels.LABEL_VNFC, 'workerNode-old')),
        ('x:NoSchedule',))
    new = labels.with_identity(settings, ((labels.LABEL_INSTANCE, INST),))
    assert new.label_map == {'pool': 'a', labels.LABEL_INSTANCE: INST}
    assert new.taints == ('x:NoSchedule',)


def test_kube_state_metrics_label_names():
    assert autoheal.ksm_label(labels.LABEL_INSTANCE) == \
        'label_kubespray_mgmt_vnf_instance_id'
    assert autoheal.ksm_label(labels.LABEL_VNFC) == \
        'label_kubespray_mgmt_vnfc_info_id'


def test_the_inventory_and_record_carry_the_identity(conf):  # noqa: F811
    drv, cluster, _ = _driver(conf)
    drv.node_identity = {W1: ((labels.LABEL_INSTANCE, INST),
                              (labels.LABEL_VNFC, 'workerNode-1'))}
    drv.upload_inventory(cluster)
    hosts = yaml.safe_load(_workspace_file(drv, 'hosts.yaml'))['all']
    assert hosts['hosts'][W1]['node_labels'][labels.LABEL_VNFC] == \
        'workerNode-1'
    assert labels.LABEL_VNFC not in hosts['hosts'][W2].get(
        'node_labels', {})
    # The next operation (a heal: the VM and its VNFC id are new).
    again = driver.ClusterDriver(drv.spec, 'i1', drv.pool, conf=conf)
    again.node_identity = {W1: ((labels.LABEL_INSTANCE, INST),
                                (labels.LABEL_VNFC, 'workerNode-2'))}
    membership.remove_workers(again, cluster, [W1], rejoin=True)
    again.upload_inventory(cluster)
    recorded = labels.parse_record(_workspace_file(drv, labels.RECORD_FILE))
    assert recorded[W1].label_map[labels.LABEL_VNFC] == 'workerNode-2'


@pytest.mark.parametrize('change', [
    ((labels.LABEL_VNFC, None),), ((labels.LABEL_INSTANCE, 'x'),)])
def test_a_relabel_cannot_touch_the_identity(conf, change):  # noqa: F811
    drv, cluster, master = _driver(conf)
    with pytest.raises(exceptions.ParamsInvalid) as caught:
        day2.relabel(drv, cluster, [W1], (('pool', 'a'),) + change, ())
    assert 'relabel labels: %s set by the driver' % change[0][0] in str(
        caught.value)
    assert master.commands == []  # nothing read, nothing changed


def test_a_relabel_by_metadata_cannot_touch_the_identity():
    with pytest.raises(exceptions.ParamsInvalid) as caught:
        labels.relabel_from_metadata({
            labels.METADATA_NODES: W1,
            labels.METADATA_LABELS: 'pool=a,%s-' % labels.LABEL_VNFC},
            'metadata')
    assert caught.value.problems == [
        'metadata.relabel_labels: %s set by the driver (they name the '
        'node\'s VNF instance and VNFC in auto-heal alerts); a relabel '
        'cannot change them' % labels.LABEL_VNFC]


# ------------------------------------------------------------ requests


@pytest.mark.parametrize('request_, automatic', [
    ({'vnfcInstanceId': ['workerNode-1']}, True),   # Tacker's own
    ({'vnfcInstanceId': ['workerNode-1'], 'cause': 'disk'}, False),
    ({'vnfcInstanceId': ['workerNode-1'], 'additionalParams': {}}, False),
    ({'vnfcInstanceId': []}, False),
    ({}, False), (None, False)])
def test_the_automatic_request_is_tacker_s(request_, automatic):
    assert autoheal.is_automatic(request_) is automatic


# ------------------------------------------------------------ guard rails


def _cluster(masters, workers, gateways=()):
    return types.SimpleNamespace(
        names=list(masters) + list(workers),
        masters=[types.SimpleNamespace(name=n) for n in masters],
        gateways=[types.SimpleNamespace(name=n) for n in gateways])


M3 = ['master-1', 'master-2', 'master-3']
W5 = ['worker-%d' % i for i in range(1, 6)]


def _ready(down=(), missing=()):
    return {n: ('Unknown' if n in down else 'True')
            for n in M3 + W5 if n not in missing}


def test_one_dead_worker_is_healed():
    autoheal.check_heal(_cluster(M3, W5), _ready(['worker-1']),
                        ['worker-1'], 40)


def test_one_dead_master_of_three_is_healed():
    autoheal.check_heal(_cluster(M3, W5), _ready(['master-2']),
                        ['master-2'], 40)


@pytest.mark.parametrize('down, missing, healed, percent, reason', [
    # 4 of 8 down (a partition): 40 % allows 3.
    (['worker-1', 'worker-2', 'worker-3', 'master-3'], [], ['worker-1'], 40,
     '4 of 8 Kubernetes nodes are not Ready (master-3, worker-1, worker-2, '
     'worker-3), more than 40% ([kubespray_mgmt] '
     'auto_heal_max_unhealthy_percent allows 3)'),
    # A node Kubernetes lacks counts as unhealthy; 0 % refuses all.
    ([], ['worker-5'], ['worker-5'], 0, '1 of 8 Kubernetes nodes'),
    (['master-1', 'master-2'], [], ['master-1', 'master-2'], 100,
     're-create 2 control-plane nodes at once (master-1, master-2)'),
    (['master-1', 'master-2'], [], ['master-1'], 100,
     'etcd would be left with 1 healthy member(s) of 3 while master-1 is '
     'removed, below its quorum of 2'),
    ([], [], ['worker-2'], 40, 'worker-2 Ready again: the alert is stale'),
])
def test_the_guard_rails_refuse(down, missing, healed, percent, reason):
    with pytest.raises(autoheal.AutoHealRefused) as caught:
        autoheal.check_heal(_cluster(M3, W5), _ready(down, missing), healed,
                            percent)
    assert reason in str(caught.value)
    assert str(caught.value).startswith(
        'automatic heal refused, nothing was changed: ')
    assert isinstance(caught.value, exceptions.MgmtDriverOtherError)


@pytest.mark.parametrize('masters, down, healed, rule', [
    # 4 etcd members need 3: with 2 down, none may be re-created.
    (4, ['master-1', 'master-2'], ['master-1'], autoheal.RULE_QUORUM),
    (4, ['master-1'], ['master-1'], None),
    (2, ['master-1'], ['master-1'], autoheal.RULE_QUORUM),
    (6, ['master-1', 'master-2', 'master-3'], ['master-1'],
     autoheal.RULE_QUORUM),
    (6, ['master-1', 'master-2'], ['master-1'], None),
    # 5 members keep their quorum of 3 without two of them: only the
    # rule of one control-plane node at a time refuses.
    (5, ['master-1', 'master-2'], ['master-1', 'master-2'],
     autoheal.RULE_ONE_MASTER),
])
def test_the_control_plane_rules_by_their_structure(masters, down, healed,
                                                    rule):
    names = ['master-%d' % i for i in range(1, masters + 1)]
    ready = {n: 'Unknown' if n in down else 'True' for n in names + W5}
    _refused_by(rule, functools.partial(
        autoheal.check_heal, _cluster(names, W5), ready, healed, 100))


def _refused_by(rule, check):
    """*check* passes (*rule* None) or is refused by *rule*."""
    if rule is None:
        check()
        return None
    with pytest.raises(autoheal.AutoHealRefused) as caught:
        check()
    assert caught.value.rule == rule
    return caught.value


def test_a_lone_master_is_never_healed_automatically():
    with pytest.raises(autoheal.AutoHealRefused, match='below its quorum'):
        autoheal.check_heal(_cluster(['m'], ['w1', 'w2', 'w3']),
                            {'m': 'Unknown', 'w1': 'True', 'w2': 'True',
                             'w3': 'True'}, ['m'], 40)


GW = ['gw-1', 'gw-2', 'gw-3']


@pytest.mark.parametrize('gateways, healed, rule', [
    (GW, ['gw-2'], None),
    (GW[:2], ['gw-1'], None),
    (GW, ['gw-1', 'gw-3'], autoheal.RULE_ONE_GATEWAY),
    (GW[:2], ['gw-1', 'gw-2'], autoheal.RULE_ONE_GATEWAY),
    (GW[:1], ['gw-1'], autoheal.RULE_LAST_GATEWAY),
    # With a worker: the gateway's rule still holds.
    (GW[:1], ['gw-1', 'worker-1'], autoheal.RULE_LAST_GATEWAY),
])
def test_the_gateway_rules(gateways, healed, rule):
    error = _refused_by(rule, functools.partial(
        autoheal.check_heal, _cluster(M3, W5, gateways), _ready(['worker-1']),
        healed, 40))
    assert error is None or 'gw-1' in str(error)


def test_the_budget_rounds_down():
    assert [autoheal.unhealthy_budget(n, 40) for n in (1, 2, 3, 5, 8)] == [
        0, 0, 1, 2, 3]


# ------------------------------------------------------------ Prometheus


def test_the_shipped_rules_are_the_rendered_ones():
    assert RULES_FILE.read_text() == autoheal.render_rules()
    rule = yaml.safe_load(autoheal.render_rules('90s'))['groups'][0][
        'rules'][0]
    assert rule['for'] == '90s'
    assert rule['labels'] == {'receiver_type': 'tacker',
                              'function_type': 'auto_heal'}


def test_the_rules_file_header_names_the_page_that_says_how():
    """The header names a page and a section of it (issue 41: it named
    the README's "Self-healing" section, which is no more)."""
    header = ' '.join(line.lstrip('# ') for line in
                      autoheal.HEADER.splitlines()).replace('/ ', '/')
    page = re.search(r'doc/source/(\S+)\.rst, "([^"]+)"', header)
    assert page, header
    assert docs.section(page.group(1), page.group(2), '=')


def test_the_runbook_line_renders_the_rules(tmp_path):
    """The page's command, with this Python for the conductor's."""
    block = docs.page('admin/autoheal').split('\n.. code-block:: shell\n',
                                              1)[1].split('\n\n', 2)[1]
    command = [line.strip() for line in block.splitlines()
               if line.strip() and not line.strip().startswith('#')]
    assert command[0].startswith('/path/to/tacker/venv/bin/python -c ')
    argv = shlex.split(command[0].split(' > ')[0])
    done = subprocess.run([sys.executable] + argv[1:], capture_output=True,
                          text=True, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout)['groups'][0]['rules'][0][
        'for'] == '10m'


@pytest.mark.parametrize('duration', ['5', '0m', 'soon', '5m; x', None])
def test_a_bad_duration_is_refused(duration):
    with pytest.raises(exceptions.ParamsInvalid, match='unhealthy_for'):
        autoheal.render_rules(duration)


def _promtool(*args):
    promtool = shutil.which('promtool')
    if promtool is None:
        pytest.skip('promtool is not installed (Debian: prometheus; '
                    'tools/host-packages installs it)')
    return subprocess.run([promtool, *args], capture_output=True, text=True,
                          timeout=120)


def test_promtool_accepts_the_rules():
    done = _promtool('check', 'rules', str(RULES_FILE))
    assert done.returncode == 0, done.stdout + done.stderr


def test_promtool_alerts_on_kube_state_metrics_series():
    """The alert fires only for the VNF's node NotReady longer than
    ``for:``, with the ids Tacker's plugin reads (the test file's
    series are kube-state-metrics')."""
    done = _promtool('test', 'rules', str(RULES_TEST))
    assert done.returncode == 0, done.stdout + done.stderr


def test_promtool_test_fails_on_a_rule_without_the_ids(tmp_path):
    # The promtool test can fail: the same series, a rule whose alert
    # lacks vnfc_info_id.
    broken = autoheal.render_rules().replace(
        'group_left (vnf_instance_id, vnfc_info_id)',
        'group_left (vnf_instance_id)')
    (tmp_path / RULES_FILE.name).write_text(broken)
    shutil.copy(RULES_TEST, tmp_path / RULES_TEST.name)
    done = _promtool('test', 'rules', str(tmp_path / RULES_TEST.name))
    assert done.returncode != 0
    assert 'vnfc_info_id' in done.stdout + done.stderr


# ------------------------------------------------------------ v2 hooks


def _v2_harness(conf, not_ready):  # noqa: F811
    from tests.unit import test_v2
    names = ['master-10-10-0-11', 'worker-10-10-0-21', 'worker-10-10-0-22']
    h = test_v2.Harness(conf, k8s_nodes=names)
    h.instantiate()
    h.master.script(r'get nodes -o json', first=True, stdout=json.dumps({
        'items': [{'metadata': {'name': n}, 'status': {'conditions': [
            {'type': 'Ready',
             'status': 'Unknown' if n in not_ready else 'True'}]}}
            for n in names]}))
    h.master.script(r'get node worker-10-10-0-21',
                    stdout='node/worker-10-10-0-21\n')
    return h, test_v2


def _hosts(h):
    [text] = [t for p, t in h.ansible.files.items()
              if p.endswith('/hosts.yaml')]
    return yaml.safe_load(text)['all']['hosts']


def test_v2_nodes_carry_their_vnfc_info_ids(conf):  # noqa: F811
    h, _ = _v2_harness(conf, ())
    hosts = _hosts(h)
    infos = {i['vnfcResourceInfoId']: i['id'] for i in h.vnf.dict()[
        'instantiatedVnfInfo']['vnfcInfo']}
    labelled = {name: host['node_labels'][labels.LABEL_VNFC]
                for name, host in hosts.items()
                if labels.LABEL_VNFC in host.get('node_labels', {})}
    assert sorted(labelled) == ['master-10-10-0-11', 'worker-10-10-0-21',
                                'worker-10-10-0-22']
    assert set(labelled.values()) <= set(infos.values())
    assert {host['node_labels'][labels.LABEL_INSTANCE]
            for host in hosts.values() if 'node_labels' in host} == {
        h.vnf.dict()['id']}


def test_v2_automatic_heal_removes_the_dead_worker_undrained(conf, caplog):  # noqa: F811,E501
    h, test_v2 = _v2_harness(conf, ['worker-10-10-0-21'])
    worker = h.vnf.vnfc(test_v2.WORKERS[0][0])
    # Its readiness at the removal: the claim's node list (Unknown).
    with caplog.at_level(logging.WARNING, logger='mgmt_driver'):
        h.run('heal_start', {'vnfcInstanceId': ['info-' + worker['id']]},
              test_v2._removing(worker))
    assert not [c for c in h.master.commands if ' drain ' in c]
    assert 'worker-10-10-0-21 is NotReady (its kubelet does not answer): ' \
        'removing it without draining' in caplog.text
    assert 'remove-node.yml' in h.playbooks()
    [vars_text] = [t for p, t in h.ansible.files.items()
                   if p.endswith('remove-node-vars.yaml')]
    assert yaml.safe_load(vars_text)['reset_nodes'] is False


def test_v2_requested_heal_drains(conf):  # noqa: F811
    # A Ready node an operator heals: not known dead, drained.
    h, test_v2 = _v2_harness(conf, [])
    worker = h.vnf.vnfc(test_v2.WORKERS[0][0])
    h.master.script(r'get pods', stdout=json.dumps({'items': []}))
    h.run('heal_start', {'vnfcInstanceId': ['info-' + worker['id']],
                         'cause': 'disk'}, test_v2._removing(worker))
    assert [c for c in h.master.commands if ' drain worker-10-10-0-21' in c]


def test_v2_automatic_heal_refused_changes_nothing(conf):  # noqa: F811
    h, test_v2 = _v2_harness(conf, ['worker-10-10-0-21',
                                    'worker-10-10-0-22'])
    worker = h.vnf.vnfc(test_v2.WORKERS[0][0])
    ansible, master = len(h.ansible.commands), len(h.master.commands)
    with pytest.raises(autoheal.AutoHealRefused, match='2 of 3 Kubernetes'):
        h.run('heal_start', {'vnfcInstanceId': ['info-' + worker['id']]},
              test_v2._removing(worker))
    assert h.ansible.commands[ansible:] == []
    # Only read: kubectl found, the nodes listed.
    assert [c.split(' -o ')[0].split()[-2:] for c in
            h.master.commands[master:]] == [['version', '--client'],
                                            ['get', 'nodes']]
