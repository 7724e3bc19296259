"""A rolling node replacement through Tacker 16's real v2 code.

Real: ``VnfLcmDriverV2.grant/process/rollback`` for ``CHANGE_VNFPKG``
(the grant request removing every VNFC of the VDUs in ``vdu_params``,
``change_current_package_start/_end`` and the rollback hooks run from the
package), and inside the infra driver ``Openstack._change_vnfpkg_rolling_
update`` with its DefaultUserData loop: one Heat stack update per VNFC,
then ``_execute_coordinate_vnf_script`` (the package's coordinate script
under Tacker's interpreter, the pickled ``vnfc_param`` on stdin, the SSH
address read from Heat), in ``vnfcResourceInfo`` order.  The request is
``samples/v2/change_vnfpkg_rolling.json``.

Faked, as in :mod:`tests.integration.test_v2_scripts`: the rest of
``Openstack.change_vnfpkg`` (the HOT made from the new VNFD, the final
stack update and ``_make_instantiated_vnf_info``), Heat (a client whose
``update_stack`` re-creates the VM named by the update's ``vcImageId``:
the VM's greeting servers and etcd data go, the VM comes back after a
second) and the NFVO.

The site is 127.0.60.x (no other test uses it); the scenarios share one
VNF of 3 masters and 2 workers and run in file order.
"""

import json
import signal
import subprocess
import sys
import time
import types

import pytest

pytest.importorskip('tacker')

from mgmt_localsite import etcd  # noqa: E402
from mgmt_localsite import site as site_mod  # noqa: E402

from mgmt_driver.common import conf as kconf  # noqa: E402
from tests import packages  # noqa: E402
from tests.integration import conductor_site as cs  # noqa: E402
from tests.integration import test_v2_scripts as v2s  # noqa: E402

ANSIBLE = '127.0.60.10'
HEAT_ADDRESS = '127.0.60.2'
LB_ADDRESS = '127.0.60.20'
MASTERS = ['127.0.60.31', '127.0.60.32', '127.0.60.33']
WORKERS = ['127.0.60.41', '127.0.60.42']
SAMPLE = packages.REPO / 'samples' / 'v2' / 'change_vnfpkg_rolling.json'
OLD_IMAGE, NEW_IMAGE = 'ubuntu-22.04', 'ubuntu-24.04'
#: Seconds a re-created VM takes to boot (nothing answers on it then).
#: Half a second is enough for the probes (one every ~20 ms per port) to
#: meet the outage many times if the LB still sent traffic to the VM;
#: the test re-creates 11 VMs, so every second here costs 11.
BOOT = 0.5


class FakeHeatClient:
    """The calls ``_change_vnfpkg_rolling_update`` and
    ``_execute_coordinate_vnf_script`` make."""

    def __init__(self, infra):
        self.infra = infra

    def get_parameters(self, stack_name):
        return {'nfv': '{}'}

    def get_resource_info(self, stack_id, name):
        return self.infra.heat.stacks[stack_id][name]

    def update_stack(self, stack_name, fields):
        for key, vdu in fields['parameters']['nfv']['VDU'].items():
            self.infra.rebuild(key, vdu['vcImageId'])


class RollingInfra(v2s.V2Infra):
    """:class:`~v2s.V2Infra` with Tacker's rolling update: each VNFC
    has a ``vdu_idx`` (the real driver's, for VDUs in one stack) and an
    image; :meth:`rebuild` is Heat re-creating a VM."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.events = []   # one dict per VM re-created
        self.image = NEW_IMAGE

    def _write(self, inst, flavour_id):
        super()._write(inst, flavour_id)
        for index, vnfc in enumerate(
                inst.instantiatedVnfInfo.vnfcResourceInfo):
            vnfc.metadata['vdu_idx'] = index
            self.vms[index].setdefault('image', OLD_IMAGE)

    def _fields(self, inst, image):
        vnfcs = inst.instantiatedVnfInfo.vnfcResourceInfo
        return {'parameters': {'nfv': {'CP': {}, 'VDU': {
            '%s-%d' % (v.vduId, v.metadata['vdu_idx']): {'vcImageId': image}
            for v in vnfcs}}}}

    def _rolling(self, req, inst, grant_req, grant, vnfd, image, back):
        from tacker.sol_refactored.infra_drivers.openstack import openstack
        openstack.Openstack()._change_vnfpkg_rolling_update(
            req, inst, grant_req, grant, vnfd, self._fields(inst, image),
            FakeHeatClient(self), back)
        self._write(inst, inst.instantiatedVnfInfo.flavourId)

    def change_vnfpkg(self, req, inst, grant_req, grant, vnfd):
        self._rolling(req, inst, grant_req, grant, vnfd, self.image, False)

    def change_vnfpkg_rollback(self, req, inst, grant_req, grant, vnfd,
                               lcmocc):
        self._rolling(req, inst, grant_req, grant, vnfd, OLD_IMAGE, True)

    def rebuild(self, key, image):
        """Heat's update of VM *key* (``<vdu>-<vdu_idx>``) to *image*:
        none when it has it already."""
        vm = self.vms[int(key.rpartition('-')[2])]
        if vm['image'] == image:
            return
        role = v2s.ROLES[vm['vdu']]
        name = site_mod.name_of(role, vm['address'])
        site = self.lab.site
        self.events.append({
            'node': name, 'image': image, 'time': time.time(),
            'in_cluster': name in site.nodes(),
            'pods': [p['name'] for p in site.pods_on(name)
                     if p.get('owner_kind') != 'DaemonSet']})
        self.lab.backends.stop(vm['address'])
        if role == cs.MASTER:
            etcd.stop(str(site.etcd_dir), vm['address'],
                      sig=signal.SIGKILL, wipe=True)
        time.sleep(BOOT)
        ports = ([site_mod.APISERVER_PORT] if role == cs.MASTER
                 else self.lab.nodeports)
        self.lab.backends.add(vm['address'], vm['address'], ports)
        vm['image'] = image


@pytest.fixture(scope='module')
def world(tacker_conf, admin_context, tmp_path_factory):
    from tacker.sol_refactored.infra_drivers.openstack import openstack

    patch = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp('v2rolling')
    with v2s.make_world(tacker_conf, admin_context, tmp, ansible=ANSIBLE,
                        heat_address=HEAT_ADDRESS, lb=LB_ADDRESS,
                        masters=MASTERS, workers=WORKERS, patch=patch,
                        infra_class=RollingInfra) as w:
        for name in ('change_vnfpkg', 'change_vnfpkg_rollback'):
            patch.setattr(openstack.Openstack, name,
                          getattr(w.infra, name))
        # The gate's wait, short: the broken image's node never gets Ready.
        w.lab.conf.set_override('rolling_gate_timeout', 10, kconf.GROUP)
        v2s._script_config(w.lab, tmp)
        w.lcm.nfvo_client.get_vnf_package_info_vnfd = \
            lambda context, vnfd_id: types.SimpleNamespace(
                vnfProvider='mgmt_driver', vnfProductName='kubespray',
                vnfSoftwareVersion='1.0', vnfdVersion='1.0')
        w.tmp = tmp
        yield w


@pytest.fixture
def w(world):
    world.scripts = []
    world.infra.events = []
    return world


def _request(w, vdus):
    body = json.loads(SAMPLE.read_text())
    body['vnfdId'] = v2s.VNFD_ID
    params = body['additionalParams']
    params['vdu_params'] = [p for p in params['vdu_params']
                            if p['vdu_id'] in vdus]
    return w.objects.ChangeCurrentVnfPkgRequest.from_dict(body)


def _names(role, addresses):
    return [site_mod.name_of(role, a) for a in addresses]


class Probes:
    """:mod:`tests.integration.rolling_watch` probing the API and a
    NodePort through the load balancer."""

    def __init__(self, w):
        self.out = w.tmp / 'probes.json'
        self.ports = [w.lab.api_port, w.lab.nodeports[0]]
        self.process = None
        self.seen = None

    def __enter__(self):
        self.process = subprocess.Popen(
            [sys.executable, '-m', 'tests.integration.rolling_watch',
             'probe', str(self.out), LB_ADDRESS] +
            [str(p) for p in self.ports],
            stdout=subprocess.PIPE, cwd=packages.REPO)
        assert self.process.stdout.readline() == b'probing\n'
        return self

    def __exit__(self, *exc_info):
        self.process.terminate()
        self.process.wait(timeout=30)
        self.process.stdout.close()
        self.seen = {int(port): seen for port, seen in
                     json.loads(self.out.read_text()).items()}


def test_instantiate(w):
    w.new_instance()
    done = w.instantiate(MASTERS, WORKERS)
    assert done['state'] == 'COMPLETED', done.get('error')
    w.check()


def test_rolling_update_keeps_everything_served(w):
    """Every master and worker re-created one at a time: the API and the
    NodePort answer every probe through the LB, no pod is on a node when
    its VM goes, and the cluster is whole at the end."""
    workers = _names(cs.WORKER, WORKERS)
    for index, worker in enumerate(workers):
        w.lab.site.add_pod('web-%d' % index, worker)
    with Probes(w) as probes:
        done = w.run('CHANGE_VNFPKG', _request(
            w, ['masterNode', 'workerNode']))
    assert done['state'] == 'COMPLETED', done.get('error')
    assert w.scripts == [('change_current_package_start', 'ok'),
                         ('change_current_package_end', 'ok')]
    events = w.infra.events
    # Tacker's order (vnfcResourceInfo), every VM once, each already out
    # of the cluster with no workload pod left on it.
    assert [e['node'] for e in events] == \
        _names(cs.MASTER, MASTERS) + workers
    assert [(e['in_cluster'], e['pods']) for e in events] == \
        [(False, [])] * len(events)
    assert {vm['image'] for vm in w.infra.vms
            if vm['vdu'] != 'externalLB'} == {NEW_IMAGE}
    # The workload is still there (moved, not lost).
    assert len([p for p in w.lab.site.state()['pods']
                if p['name'].startswith('web-')]) == len(workers)
    w.check()
    for port in probes.ports:
        seen = probes.seen[port]
        during = [s for s in seen
                  if events[0]['time'] <= s[0] <= events[-1]['time']]
        assert len(during) > 20, port
        assert [s for s in seen if s[1] is None] == [], port


def _watch(w, command, node):
    return subprocess.Popen(
        [sys.executable, '-m', 'tests.integration.rolling_watch', command,
         str(w.lab.site.state_dir), node], stdout=subprocess.PIPE,
        cwd=packages.REPO)


def _ended(watcher):
    """What *watcher* printed (it must have ended)."""
    try:
        watcher.wait(timeout=60)
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
        out = watcher.stdout.read().decode()
        watcher.stdout.close()
    return out


def test_a_conductor_stop_then_a_retry(w):
    """The conductor stops while the first worker's coordinate script
    joins it (the script killed with it, its scale.yml run left going):
    the retry re-creates no VM again and finishes both workers."""
    first, second = _names(cs.WORKER, WORKERS)
    w.infra.image = 'ubuntu-24.04.1'
    killer = _watch(w, 'kill', first)
    failed = w.run('CHANGE_VNFPKG', _request(w, ['workerNode']))
    assert _ended(killer) == 'killed\n'
    assert failed['state'] == 'FAILED_TEMP'
    assert [e['node'] for e in w.infra.events] == [first]

    w.scripts = []
    w.infra.events = []
    retried = w.process(failed)
    assert retried['state'] == 'COMPLETED', retried.get('error')
    assert w.scripts == [('change_current_package_start', 'ok'),
                         ('change_current_package_end', 'ok')]
    assert [e['node'] for e in w.infra.events] == [second]
    assert [(e['in_cluster'], e['pods']) for e in w.infra.events] == [
        (False, [])]
    assert {vm['image'] for vm in w.infra.vms
            if vm['vdu'] == 'workerNode'} == {'ubuntu-24.04.1'}
    w.check()


def test_failed_gate_then_rollback(w):
    """The second worker's new image never gets Ready: the gate stops
    the operation naming what is replaced; Tacker's rollback brings both
    workers back to the old image, one at a time."""
    first, second = _names(cs.WORKER, WORKERS)
    w.infra.image = 'broken-image'
    for vm in w.infra.vms:
        vm['image'] = OLD_IMAGE     # the image the rollback returns to
    breaker = _watch(w, 'break', second)
    failed = w.run('CHANGE_VNFPKG', _request(w, ['workerNode']))
    assert _ended(breaker) == 'broken\n'
    assert failed['state'] == 'FAILED_TEMP'
    assert w.scripts == [('change_current_package_start', 'ok')]
    for text in ('not Ready', 'replaced: %s' % first,
                 'out of the cluster (VM being replaced): %s' % second):
        assert text in failed['error'], failed['error']
    assert [e['node'] for e in w.infra.events] == [first, second]

    # The operator repairs the node's kubelet, then rolls back.
    w.lab.site.stop_kubelet(second, stopped=False)
    w.infra.events = []
    assert w.rollback(failed) == 'ROLLED_BACK'
    assert w.scripts[1:] == [('change_current_package_rollback_start', 'ok'),
                             ('change_current_package_rollback_end', 'ok')]
    assert [(e['node'], e['image'], e['in_cluster'], e['pods'])
            for e in w.infra.events] == [
        (first, OLD_IMAGE, False, []), (second, OLD_IMAGE, False, [])]
    assert {vm['image'] for vm in w.infra.vms
            if vm['vdu'] == 'workerNode'} == {OLD_IMAGE}
    w.check()


def test_terminate(w):
    done = w.terminate()
    assert done['state'] == 'COMPLETED', done.get('error')
    w.check_gone()

