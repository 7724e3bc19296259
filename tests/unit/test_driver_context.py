"""ClusterDriver as the per-operation context: its spec never changes,
and what it caches is handed out as copies
(mgmt_driver.session.driver.Reads)."""

import pytest
import yaml

from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.model import labels
from mgmt_driver.model import nodes
from mgmt_driver.model import params
from mgmt_driver.session import driver
from mgmt_driver.state import kubeversion
from tests.fakes import FakePool
from tests.unit import test_driver
from tests.unit import test_inventory

WORKSPACE = '/home/ubuntu/kubespray/inventory/mycluster/inst-1/'
conf = test_driver.conf


def _context(conf, recorded_version=None, requested=None):
    pool = FakePool()
    ansible = pool.connection(test_driver.ANSIBLE)
    ansible.script(r'^program:detect-layout ', stdout=test_driver.LAYOUT)
    if recorded_version is not None:
        ansible.files[WORKSPACE + kubeversion.RECORD_FILE] = \
            kubeversion.render_record(recorded_version)
    request = test_driver._instantiate_params(2)
    if requested is not None:
        request[core.ROOT]['kubespray'] = {
            'extra_vars': {'kube_version': requested}}
    spec = params.parse_params(request)
    return (driver.ClusterDriver(spec, 'inst-1', pool, conf),
            nodes.nodes_from_spec(spec), ansible)


def test_the_recorded_version_is_rendered_and_the_spec_left_alone(conf):
    drv, cluster, ansible = _context(conf, (1, 33, 7))
    spec = drv.spec
    drv.upload_inventory(cluster)
    assert drv.spec is spec
    assert 'kube_version' not in spec.kubespray.extra_vars
    rendered = yaml.safe_load(ansible.files[WORKSPACE + 'cluster-vars.yaml'])
    assert rendered['kube_version'] == '1.33.7'


@pytest.mark.parametrize('requested, rendered', [
    ('v1.32.2', 'v1.33.7'), ('1.32.2', '1.33.7')])
def test_the_recorded_version_keeps_the_request_s_spelling(
        conf, requested, rendered):
    # kubespray up to v2.27 wants "v1.33.7", from v2.28 on "1.33.7".
    drv, cluster, ansible = _context(conf, (1, 33, 7), requested)
    drv.upload_inventory(cluster)
    vars_file = yaml.safe_load(ansible.files[WORKSPACE + 'cluster-vars.yaml'])
    assert vars_file['kube_version'] == rendered


def test_an_upgrade_record_changes_the_rendering_not_the_spec(conf):
    drv, cluster, ansible = _context(conf)
    spec = drv.spec
    drv.record_kube_version((1, 34, 1))
    drv.upload_inventory(cluster)
    assert drv.spec is spec
    rendered = yaml.safe_load(ansible.files[WORKSPACE + 'cluster-vars.yaml'])
    assert rendered['kube_version'] == '1.34.1'


def test_node_settings_hands_out_a_copy_the_upload_does_not_write(conf):
    drv, cluster, ansible = _context(conf)
    drv.upload_inventory(cluster)
    handed = drv.node_settings()
    handed['ghost-node'] = handed['worker-10-10-0-21']
    drv.upload_inventory(cluster)
    record = labels.parse_record(ansible.files[WORKSPACE +
                                               labels.RECORD_FILE])
    assert 'ghost-node' not in record
    assert 'ghost-node' not in drv.node_settings()
    drv.set_node_settings(handed)
    drv.upload_inventory(cluster)
    assert 'ghost-node' in labels.parse_record(
        ansible.files[WORKSPACE + labels.RECORD_FILE])


def test_a_claim_reads_afresh(conf):
    drv, cluster, ansible = _context(conf)
    drv.claim('scale_end')
    drv.upload_inventory(cluster)
    ansible.files[WORKSPACE + kubeversion.RECORD_FILE] = \
        kubeversion.render_record((1, 33, 9))
    drv.claim('heal_end')
    drv.upload_inventory(cluster)
    rendered = yaml.safe_load(ansible.files[WORKSPACE + 'cluster-vars.yaml'])
    assert rendered['kube_version'] == '1.33.9'
    assert len([c for c in ansible.commands if 'KS:MISSING' in c]) == 2


def test_record_host_keys_runs_only_true_on_each_node_s_connection(
        conf, monkeypatch):
    """Each master's key recorded and claimed as the instance's (status,
    which records none, can then read them all); one that does not
    answer is a warning, not a failure."""
    masters = ('10.10.0.11', '10.10.0.12', '10.10.0.13')
    spec = test_inventory._spec()
    cluster = test_inventory._cluster(spec, masters=masters)
    pool = FakePool()

    def refused():
        raise exceptions.MgmtDriverOtherError(error_message='refused')

    pool.connection(masters[1]).on_login = refused
    drv = driver.ClusterDriver(spec, 'inst-1', pool, conf)
    warnings = []
    monkeypatch.setattr(drv, 'warn', lambda text, *args: warnings.append(
        text % args))
    drv.record_host_keys(cluster.masters)
    keys = drv.records.load('inst-1').keys
    assert keys == {(masters[0], 22): pool.known[(masters[0], 22)],
                    (masters[2], 22): pool.known[(masters[2], 22)]}
    assert warnings == ['master-10-10-0-12 did not answer SSH: its host '
                        'key is not recorded (status cannot read it until '
                        'an operation does)']
    assert {h.address for h in drv.records.load('inst-1').hosts} == set(
        masters)
    # The pool's connection to each (no second session), and only true.
    assert {host: conn.commands for host, conn in pool.connections.items()
            } == {masters[0]: ['true'], masters[1]: [],
                  masters[2]: ['true']}
