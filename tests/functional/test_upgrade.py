"""Rolling Kubernetes upgrades on the local site (Tacker v1's PATCH).

One 3-master HA cluster serves the whole chain, in order, as an
operator would run it: refused versions change nothing; an upgrade
across one minor release goes node by node (control plane in the
inventory's order, each out of HAProxy's API backends while the double
upgrades it, then the workers in batches of ``kube_upgrade_serial``,
one run each, with the gates of mgmt_driver.operations.gates after every run),
each node drained first, while a prober keeps connecting to the LB's
API port; a worker added afterwards joins at the new version (with the
taints its scale request gives, through kubespray's node_taints); an upgrade
failing on the second control-plane node, then the same PATCH run
again, converges.
"""

import types

import pytest
from mgmt_localsite import lab as lab_mod
from mgmt_localsite import site as site_mod

from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.state import kubeversion
from tests.functional import tacker_fakes
from tests.functional.lb_prober import Prober
from tests.functional.tacker_fakes import instantiate_request
from tests.functional.tacker_fakes import scale_request

ANSIBLE = '127.0.15.1'
LB = '127.0.15.2'
MASTERS = ['127.0.15.10', '127.0.15.11', '127.0.15.12']
WORKERS = ['127.0.15.20', '127.0.15.21', '127.0.15.22']
CONTEXT = types.SimpleNamespace(project_id='upgrade-project')
FIELD = 'vnf_metadata.kube_version'
#: Seconds each node's upgrade takes in the double: long enough for the
#: prober to connect several times while a master is out.
UPGRADE_DELAY = 0.6

pytestmark = pytest.mark.skipif(site_mod.unavailable() is not None,
                                reason=str(site_mod.unavailable()))


name = tacker_fakes.namer(MASTERS)


class Chain(tacker_fakes.Chain):
    """The VNF instance on the lab, built once for the module."""

    def patch(self, **metadata):
        """Tacker v1's PATCH: the DB first, then modify_information_end
        without the request."""
        self.vnf.metadata.update(metadata)
        self.call('modify_information_end')

    def upgrades(self):
        return self.lab.site.state().get('upgrades', [])

    def workspace_file(self, relative):
        path = self.lab.workspace(self.vnf.id) / relative
        return path.read_text() if path.exists() else None

    def masters(self):
        """Master names in the inventory's control-plane order."""
        inventory = site_mod.read_inventory(
            self.lab.workspace(self.vnf.id))
        return list(inventory['kube_control_plane'])

    def workers_order(self):
        inventory = site_mod.read_inventory(
            self.lab.workspace(self.vnf.id))
        return list(inventory['kube_node'])

    def upgrade_runs(self, since):
        return [r for r in self.lab.runs_since(since)
                if r['playbook'] == 'upgrade-cluster.yml']


@pytest.fixture(scope='module')
def chain():
    try:
        lab = lab_mod.Lab(ANSIBLE, LB, MASTERS, WORKERS).start()
    except lab_mod.LabError as exc:
        pytest.skip(str(exc))
    try:
        c = Chain(lab, CONTEXT, MASTERS, WORKERS[:2], LB)
        c.call('instantiate_end',
               instantiate_request(c.vnf.additional_params))
        assert lab.check(MASTERS, c.workers) == []
        yield c
    finally:
        lab.stop()


def test_refused_versions_change_nothing(chain):
    before = (chain.versions(), chain.workspace_file('cluster-vars.yaml'),
              len(chain.lab.site.runs()))
    for version, why in (('1.33.0', 'downgrades are not supported'),
                         ('1.35.0', 'skips a minor release'),
                         ('1.34.9', 'not supported by the kubespray '
                                    'checkout'),
                         ('latest', 'must be a Kubernetes version')):
        with pytest.raises(exceptions.ParamsInvalid) as caught:
            chain.patch(kube_version=version)
        assert caught.value.problems[0].startswith(FIELD + ': ')
        assert why in str(caught.value)
    with pytest.raises(exceptions.ParamsInvalid, match='kube_upgrade_serial'):
        chain.patch(kube_version='1.34.3', kube_upgrade_serial='0')
    chain.vnf.metadata.clear()
    assert (chain.versions(), chain.workspace_file('cluster-vars.yaml'),
            len(chain.lab.site.runs())) == before
    assert chain.workspace_file(kubeversion.RECORD_FILE) is None
    assert set(chain.versions().values()) == {'v1.33.5'}


def test_rolling_upgrade_keeps_the_api_served(chain):
    lab = chain.lab
    for address in MASTERS[:1] + chain.workers:
        lab.site.add_pod('app-%s-x' % address.rsplit('.', 1)[1], name(address))
    lab.site.settings(upgrade_delay=UPGRADE_DELAY)
    runs = len(lab.site.runs())
    with Prober(LB, lab.api_port) as prober:
        chain.patch(kube_version='1.34.3', kube_upgrade_serial='1')
    lab.site.settings(upgrade_delay=0.0)

    steps = chain.upgrades()
    order = chain.masters() + chain.workers_order()
    assert [s['node'] for s in steps] == order
    assert all(s['cordoned'] and s['workload_pods'] == [] for s in steps)
    assert [s['batch'] for s in steps] == [[n] for n in order]
    # One run per master, then one per batch of kube_upgrade_serial
    # workers, a gate after each.
    assert [r['limit'] for r in chain.upgrade_runs(runs)] == (
        chain.masters() + chain.workers_order())
    assert set(chain.versions().values()) == {'v1.34.3'}
    assert lab.site.state()['cluster']['kube_version'] == 'v1.34.3'
    assert lab.check(MASTERS, chain.workers) == []

    # The API frontend answered every attempt, never from a master
    # while the double upgraded it.
    assert len(prober.seen) > 20
    assert [t for t, backend in prober.seen if backend is None] == []
    answered_during = set()
    for step in steps[:len(MASTERS)]:
        address = next(a for a in MASTERS if name(a) == step['node'])
        during = {backend[0] for t, backend in prober.seen
                  if step['started'] <= t <= step['time']}
        assert address not in during, step
        answered_during |= during
    assert len(answered_during) >= 2  # the other masters served


def test_a_worker_added_later_joins_at_the_new_version(chain):
    assert 'kube_version: 1.34.3' in chain.workspace_file(
        'cluster-vars.yaml')
    chain.vnf.add_vm(core.ROLE_WORKER, WORKERS[2])
    chain.workers = WORKERS[:3]
    chain.call('scale_end', scale_request('SCALE_OUT', {core.ROOT: {
        'worker_node': {'taints': ['dedicated=sriov:NoSchedule']}}}),
        scale_out_id_list=[])
    assert chain.versions()[name(WORKERS[2])] == 'v1.34.3'
    # The request's taints reach the node it adds (kubespray's
    # node_taints), not those that joined before.
    nodes = chain.lab.site.nodes()
    assert nodes[name(WORKERS[2])]['taints'] == [
        {'key': 'dedicated', 'value': 'sriov', 'effect': 'NoSchedule'}]
    assert nodes[name(WORKERS[0])]['taints'] == []
    assert chain.lab.check(MASTERS, chain.workers) == []


def test_a_failed_upgrade_run_again_converges(chain):
    """The double cordons, drains and uncordons as kubespray does: only a
    Ready, schedulable node, and it uncordons only what it cordoned.  The
    master the failed run left cordoned is made schedulable again before
    the re-run, so it is drained and uncordoned; a worker an operator
    cordoned before the upgrade is upgraded and stays cordoned."""
    lab = chain.lab
    first, second, third = chain.masters()
    kept = chain.workers_order()[-1]
    lab.site.tool('kubectl', '--kubeconfig', '/etc/kubernetes/admin.conf',
                  'cordon', kept)
    lab.site.inject_failure('upgrade-cluster.yml', host=second)
    runs = len(lab.site.runs())
    # A node cordoned before the upgrade must be named (the preflight).
    with pytest.raises(exceptions.UpgradeGateClosed,
                       match='%s is cordoned' % kept):
        chain.patch(kube_version='1.35.0')
    assert lab.runs_since(runs) == []
    # All workers in one batch: one run for them, as before the gates.
    with pytest.raises(exceptions.MgmtDriverRemoteCommandError):
        chain.patch(kube_version='1.35.0', kube_upgrade_excused=[kept],
                    kube_upgrade_serial='100%')
    versions = chain.versions()
    assert versions.pop(first) == 'v1.35.0'
    assert set(versions.values()) == {'v1.34.3'}
    assert lab.site.nodes()[second]['schedulable'] is False  # drained

    # The same PATCH again (Tacker cannot retry it): the first master is
    # done and skipped, the rest follow.
    runs = len(lab.site.runs())
    chain.call('modify_information_end')
    assert [r['limit'] for r in chain.upgrade_runs(runs)] == [
        second, third, ','.join(chain.workers_order())]
    assert set(chain.versions().values()) == {'v1.35.0'}
    assert {name for name, n in lab.site.nodes().items()
            if not n['schedulable']} == {kept}
    steps = {s['node']: s for s in lab.site.state()['upgrades']}  # last
    assert steps[second]['cordoned'] and steps[second]['workload_pods'] == []
    assert lab.check(MASTERS, chain.workers) == []

    # Nothing left to do: a PATCH of other metadata runs no playbook.
    runs = len(lab.site.runs())
    chain.patch(owner='team-a')
    assert lab.runs_since(runs) == []
