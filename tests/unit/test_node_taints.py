"""Node taints per role (``master_node.taints``, ``worker_node.taints``):
validation, the ``node_taints`` host var, and scale overrides."""

import pytest

from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.model import merging
from mgmt_driver.remote import inventory
from tests.unit import params_data
from tests.unit.test_inventory import _cluster
from tests.unit.test_inventory import _spec

P = core.ROOT


def test_taints_per_role_become_node_taints():
    spec = _spec(master_node={'taints': ['example.com/cp=:NoExecute']},
                 worker_node={'taints': ['dedicated=sriov:NoSchedule',
                                         'gpu:PreferNoSchedule',
                                         'dedicated=sriov:NoSchedule']})
    hosts = inventory.render_hosts(spec, _cluster(spec))['all']['hosts']
    assert hosts['master-10-10-0-11']['node_taints'] == [
        'example.com/cp=:NoExecute']
    assert hosts['worker-10-10-0-21']['node_taints'] == [
        'dedicated=sriov:NoSchedule', 'gpu:PreferNoSchedule']


def test_no_taints_no_host_var():
    spec = _spec()
    hosts = inventory.render_hosts(spec, _cluster(spec))['all']['hosts']
    assert all('node_taints' not in h for h in hosts.values())


@pytest.mark.parametrize('taints, problem', [
    ('a=b:NoSchedule', 'worker_node.taints: must be a list, not str'),
    ([5], 'worker_node.taints[0]: must be a string "key=value:Effect", '
          'not int'),
    (['a=b'], "worker_node.taints[0]: 'a=b': the effect after \":\" must "
              'be one of NoSchedule, PreferNoSchedule, NoExecute'),
    (['ok:NoSchedule', 'a=b:Never'], 'worker_node.taints[1]: '),
    (['a=b c:NoSchedule'], "worker_node.taints[0]: 'a=b c:NoSchedule': "
                           "value 'b c' is not a taint value"),
    (['/a=b:NoSchedule'], 'prefix before "/" is empty'),
    (['=b:NoSchedule'], 'is not a taint name'),
])
def test_bad_taints_name_the_entry(taints, problem):
    with pytest.raises(exceptions.ParamsInvalid) as caught:
        _spec(worker_node={'taints': taints})
    assert len(caught.value.problems) == 1
    assert caught.value.problems[0].startswith(P + '.')
    assert problem in caught.value.problems[0]


def test_a_scale_request_gives_the_new_workers_other_taints():
    base = params_data.minimal()
    base[P]['worker_node']['taints'] = ['pool=a:NoSchedule']
    spec = merging.parse_for_operation(
        base, {P: {'worker_node': {'taints': ['pool=b:NoSchedule']}}},
        need_cp_names=False)
    assert spec.taints_for(core.ROLE_WORKER) == ['pool=b:NoSchedule']
    assert spec.taints_for(core.ROLE_EXTERNAL_LB) == []
