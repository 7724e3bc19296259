"""Upgrade preflight and a dead worker declared absent, on the local site
(Tacker v1's hooks).

One site on 127.0.55.0/24 serves the chain, in order: an upgrade whose
preflight finds a PodDisruptionBudget that would block a drain is
refused, naming the budget and its pod, and changes nothing; then a
worker's VM dies (its sshd stopped by PID, its fact cache entry
expired), which alone would block every ``--limit`` run (kubespray
#13491); a scale-out declaring it absent succeeds, leaves it out of
every run, and says so.
"""

import logging
import types

import pytest
from mgmt_localsite import site as site_mod

from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.state import kubeversion
from tests.functional import tacker_fakes
from tests.functional.tacker_fakes import instantiate_request
from tests.functional.tacker_fakes import scale_request
from tests.functional.test_faults import OPTIONS
from tests.functional.test_faults import FaultLab
from tests.functional.test_faults import kill_vm_sshd
from tests.functional.test_faults import running

ANSIBLE = '127.0.55.1'
LB = '127.0.55.2'
MASTERS = ['127.0.55.10']
WORKERS = ['127.0.55.20', '127.0.55.21']
DEAD = WORKERS[1]
SPARE = '127.0.55.30'
CONTEXT = types.SimpleNamespace(project_id='gates-project')

pytestmark = pytest.mark.skipif(site_mod.unavailable() is not None,
                                reason=str(site_mod.unavailable()))


name = tacker_fakes.namer(MASTERS)


@pytest.fixture(scope='module')
def chain():
    with running(FaultLab(ANSIBLE, LB, MASTERS, WORKERS + [SPARE],
                          options=OPTIONS, aside=[DEAD])) as lab:
        c = tacker_fakes.Chain(lab, CONTEXT, MASTERS, WORKERS, LB)
        c.call('instantiate_end',
               instantiate_request(c.vnf.additional_params))
        yield c


def test_an_upgrade_blocked_by_a_budget_is_refused_unchanged(chain):
    site = chain.lab.site
    site.add_pod('db-0', name(WORKERS[0]), labels={'app': 'db'})
    site.add_budget('db-pdb', {'app': 'db'}, min_available=1)
    before = (chain.versions(), len(site.runs()),
              sorted(n for n, node in site.nodes().items()
                     if not node['schedulable']))
    chain.vnf.metadata.update(kube_version='1.34.3')
    with pytest.raises(exceptions.UpgradeGateClosed) as caught:
        chain.call('modify_information_end')
    chain.vnf.metadata.clear()
    message = str(caught.value)
    assert message.startswith(
        'Upgrade stopped at preflight (nothing was changed): draining %s '
        'would be blocked by default/db-pdb (needs 1 healthy pods, has 1), '
        'allows no disruption: pod default/db-0' % name(WORKERS[0]))
    assert (chain.versions(), len(site.runs()),
            sorted(n for n, node in site.nodes().items()
                   if not node['schedulable'])) == before
    workspace = chain.lab.workspace(chain.vnf.id)
    assert not (workspace / kubeversion.RECORD_FILE).exists()


def test_a_scale_out_with_a_dead_worker_declared_absent(chain, caplog):
    lab, site = chain.lab, chain.lab.site
    kill_vm_sshd(lab.aside[DEAD])
    assert site.age_fact_cache(site.fact_cache_timeout() + 60,
                               hosts=[name(DEAD)]) == [name(DEAD)]
    new = chain.vnf.add_vm(core.ROLE_WORKER, SPARE)
    runs = len(site.runs())
    with caplog.at_level(logging.WARNING, logger='mgmt_driver'):
        chain.call('scale_end', scale_request('SCALE_OUT', {
            'absent_nodes': [name(DEAD)]}),
            scale_out_id_list=[new.stack_id])
    assert name(SPARE) in site.nodes()
    done = lab.runs_since(runs)
    assert [r['playbook'] for r in done][-1] == 'scale.yml'
    assert all(r['ok'] for r in done)
    for run in done:
        assert name(DEAD) not in (run['limit'] or '').split(',')
        assert name(DEAD) not in run.get('touched', [])
    inventory = site_mod.read_inventory(lab.workspace(chain.vnf.id))
    assert name(DEAD) not in inventory['kube_node']
    assert name(SPARE) in inventory['kube_node']
    assert 'declared absent, left out of every playbook run: %s' % name(
        DEAD) in caplog.text
