"""membership.reconcile: Kubernetes' node list brought in line with
the VMs, which deletes a worker whose VM is gone and never a
control-plane node of the recorded inventory (only a heal, which also
removes its etcd member, may take a master out)."""

import json

from mgmt_driver.operations import membership
from mgmt_driver.session import driver
from tests.fakes import FakePool
from tests.unit.test_driver import LAYOUT
from tests.unit.test_driver import conf  # noqa: F401 (a fixture)
from tests.unit.test_inventory import _cluster
from tests.unit.test_inventory import _spec

MASTERS = ('10.10.0.11', '10.10.0.12', '10.10.0.13')
NAMES = ['master-10-10-0-11', 'master-10-10-0-12', 'master-10-10-0-13',
         'worker-10-10-0-21', 'worker-10-10-0-22']


def test_reconcile_deletes_gone_workers_never_recorded_masters(
        conf):  # noqa: F811
    spec = _spec()
    pool = FakePool()
    pool.connection(spec.ansible.ip_address).script(r'^program:detect-layout ',
                                                    stdout=LAYOUT)
    first = pool.connection(MASTERS[0])
    first.script(r'get nodes ', stdout=json.dumps({'items': [
        {'metadata': {'name': name}} for name in NAMES]}))
    drv = driver.ClusterDriver(spec, 'i1', pool, conf=conf)
    cluster = _cluster(spec, masters=MASTERS)
    drv.upload_inventory(cluster)  # the recorded inventory: 3 masters
    assert drv.recorded_masters() == NAMES[:3]

    # The VMs of two masters and of the second worker are gone.
    now = _cluster(spec, masters=MASTERS[:1], workers=('10.10.0.21',))
    fresh = driver.ClusterDriver(spec, 'i1', pool, conf=conf)
    assert membership.reconcile(fresh, now) == []
    deletes = [c for c in first.commands if ' delete node ' in c]
    assert [c.split(' delete node ')[1] for c in deletes] == [
        'worker-10-10-0-22 --ignore-not-found']
