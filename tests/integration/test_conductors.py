"""Two tacker-conductors, each with its own home directory and the same
tacker.conf, serve one VNF instance (issue "several conductors").

Conductor A instantiates; conductor B scales, heals and terminates.  One
local site on 127.0.40.x serves both chains, one after the other:

* **v1**: Tacker 16's real ``Conductor`` and ``VnfLcmDriver``
  (:mod:`tests.integration.conductor_site`), one for each conductor,
  each with its own ``DriverManager`` and so its own driver object; the
  conductor that runs an operation has its own ``HOME``.  First with
  the default configuration (every conductor keeps its state under its
  own ``~/.kubespray-mgmt``): B's terminate must refuse, changing
  nothing (before, it reported success and left the VIM registered).
  Then the operator moves A's state into one shared directory and sets
  ``state_store_id``: B, whose shared directory is not mounted yet,
  refuses a scale-in; mounted, it scales out, heals and terminates,
  leaving nothing behind.
* **v2**: Tacker 16's real ``VnfLcmDriverV2`` runs our package script in
  a process of its own, under the ``HOME`` of the conductor running it
  (:mod:`tests.integration.test_v2_scripts`).  The same refusal of an
  unmounted store, then B scales out, heals and terminates what A
  instantiated.

"Not mounted" is shown as it looks on a conductor host: the shared
directory's path is an empty directory there.
"""

import contextlib
import shutil

import pytest

pytest.importorskip('tacker')
from mgmt_localsite import lab as lab_mod  # noqa: E402
from mgmt_localsite import site as site_mod  # noqa: E402
from tacker.conductor import conductor_server  # noqa: E402,F401

from mgmt_driver.adapters import v2  # noqa: E402
from mgmt_driver.common import conf as kconf  # noqa: E402
from mgmt_driver.state import records  # noqa: E402
from tests import packages  # noqa: E402
from tests.integration import conductor_site as cs  # noqa: E402
from tests.integration import test_conductor as tc  # noqa: E402
from tests.integration import test_v2_scripts as tv  # noqa: E402

ANSIBLE = '127.0.40.10'
HEAT_ADDRESS = '127.0.40.2'
LB_ADDRESS = '127.0.40.20'
MASTERS = ['127.0.40.31']
WORKERS = ['127.0.40.%d' % i for i in range(41, 45)]
SIMPLE = packages.DESCRIPTOR_IDS['kubespray_simple']
STORE_ID = 'conductors-test-store'
OURS = tc.OURS


class Conductors:
    """Which conductor runs the next operation: its ``HOME`` (and, for
    v1, its ``Conductor``), with one tacker.conf for both."""

    def __init__(self, tmp, patch):
        self.tmp, self.patch = tmp, patch
        self.homes = {name: tmp / ('home-' + name) for name in 'ab'}
        for home in self.homes.values():
            home.mkdir()
        self.shared = tmp / 'shared'   # the shared state directory
        self.v1 = {}

    def use(self, name):
        self.patch.setenv('HOME', str(self.homes[name]))
        return self.v1.get(name)

    def shared_options(self):
        return {'known_hosts_file': str(self.shared / 'known_hosts'),
                'kubeconfig_dir': str(self.shared / 'clusters'),
                'state_store_id': STORE_ID, 'records_dir': None}

    def make_shared(self):
        from mgmt_driver.state import statestore
        self.shared.mkdir(mode=0o700, exist_ok=True)
        (self.shared / statestore.MARKER).write_text(STORE_ID + '\n')

    @contextlib.contextmanager
    def unmounted(self):
        """The shared directory's path is an empty mount point."""
        aside = self.tmp / 'shared-mounted'
        self.shared.rename(aside)
        self.shared.mkdir(mode=0o700)
        try:
            yield
        finally:
            assert list(self.shared.iterdir()) == [], 'written unmounted'
            self.shared.rmdir()
            aside.rename(self.shared)


@pytest.fixture(scope='module')
def site(tmp_path_factory):
    reason = site_mod.unavailable()
    if reason:
        pytest.skip(reason)
    lab = lab_mod.Lab(ANSIBLE, LB_ADDRESS, MASTERS, WORKERS)
    try:
        lab.start()
        yield lab
    finally:
        lab.stop()


def _set(tacker_conf, options):
    for name, value in options.items():
        tacker_conf.set_override(name, value, group=kconf.GROUP)


@pytest.fixture(scope='module')
def v1(site, tacker_conf, onboarded, objects, admin_context,
       tmp_path_factory):
    from tacker.common import coordination
    from tacker.common import driver_manager

    patch = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp('conductors')
    conductors = Conductors(tmp, patch)
    try:
        tacker_conf.set_override(
            'backend_url', 'file://%s' % tmp_path_factory.mktemp('locks'),
            group='coordination')
        coordination.COORDINATOR.start()
        infra = cs.FakeInfra(site, objects)
        world = tc._conductor_world(site, infra, tacker_conf, onboarded,
                                    objects, admin_context, patch)
        # The default tacker.conf: each conductor's state in its home.
        _set(tacker_conf, {'known_hosts_file': '~/.kubespray-mgmt/'
                           'known_hosts', 'records_dir': None,
                           'kubeconfig_dir': '~/.kubespray-mgmt/clusters',
                           'state_store_id': None})
        conductors.v1['a'] = world.conductor
        manager = driver_manager.DriverManager(
            packages.MGMT_NAMESPACE, tacker_conf.tacker.vnflcm_mgmt_driver)
        conductors.v1['b'] = cs.conductor_without_db(
            patch, cs.lcm_driver_without_db(manager, infra, world.log),
            infra, world.ops)
        world.conductors = conductors
        yield world
    finally:
        coordination.COORDINATOR.stop()
        for opt in kconf.list_opts()[0][1]:
            tacker_conf.clear_override(opt.name, group=kconf.GROUP)
        tacker_conf.clear_override('backend_url', group='coordination')
        patch.undo()


def _on(w, name, scenario):
    w.conductor = w.conductors.use(name)
    w.log.scenario = scenario


def _unchanged(w, masters, workers, runs):
    assert w.vms(cs.MASTER) == masters and w.vms(cs.WORKER) == workers
    assert w.lab.site.runs()[runs:] == []
    w.check()


def test_v1_default_state_b_refuses_what_a_instantiated(v1):
    w = v1
    _on(w, 'a', 'a_instantiate')
    w.new_instance(SIMPLE, 'simple')
    w.infra.free_workers = WORKERS[2:]
    report = w.instantiate(MASTERS, WORKERS[:2])
    assert report['state'] == 'COMPLETED', report
    w.check()
    home_a = w.conductors.homes['a'] / '.kubespray-mgmt'
    assert (home_a / 'records' / ('%s.json' % w.instance.id)).exists()

    runs = len(w.lab.site.runs())
    _on(w, 'b', 'b_terminate_refused')
    report = w.terminate()
    assert report['state'] == 'FAILED_TEMP', report
    assert w.log.hooks('b_terminate_refused') == [
        (OURS, 'terminate_start', 'raised InstanceStateMissing')]
    assert 'terminate_start of VNF instance %s needs what its instantiate ' \
        'recorded' % w.instance.id in report['error']
    assert 'Point [kubespray_mgmt] records_dir at' in report['error']
    # Refused before Tacker deleted anything: VMs, VIM and cluster stay.
    _unchanged(w, MASTERS, WORKERS[:2], runs)


def test_v1_b_refuses_while_the_shared_store_is_not_mounted(v1,
                                                            tacker_conf):
    """The operator moves A's state into the shared directory and sets
    the store options; B's mount is missing."""
    w, c = v1, v1.conductors
    c.make_shared()
    for item in (c.homes['a'] / '.kubespray-mgmt').iterdir():
        shutil.move(str(item), str(c.shared / item.name))
    _set(tacker_conf, c.shared_options())
    runs = len(w.lab.site.runs())
    _on(w, 'b', 'b_scale_in_unmounted')
    with c.unmounted():
        report = w.scale('SCALE_IN')
    assert report['state'] == 'FAILED_TEMP', report
    assert 'not the one shared by every tacker-conductor' in report['error']
    assert '[kubespray_mgmt] records_dir: %s is in no directory holding' % (
        c.shared / 'records') in report['error']
    assert w.log.hooks('b_scale_in_unmounted') == [
        (OURS, 'scale_start', 'raised StateStoreUnusable')]
    _unchanged(w, MASTERS, WORKERS[:2], runs)


def test_v1_b_scales_heals_and_terminates(v1):
    w = v1
    _on(w, 'b', 'b_scale_out')
    report = w.scale('SCALE_OUT')
    assert report['state'] == 'COMPLETED', report
    assert w.log.hooks('b_scale_out') == [(OURS, 'scale_end', 'ok')]
    w.check()

    _on(w, 'b', 'b_heal_worker')
    sick = w.infra.vnf.vm(w.vms(cs.WORKER)[0])
    report = w.heal([sick])
    assert report['state'] == 'COMPLETED', report
    w.check()

    _on(w, 'b', 'b_terminate')
    report = w.terminate()
    assert report['state'] == 'COMPLETED', report
    assert w.log.hooks('b_terminate') == [(OURS, 'terminate_start', 'ok'),
                                          (OURS, 'terminate_end', 'ok')]
    w.check_gone()
    _nothing_left(w.conductors, w.instance.id)


def _nothing_left(conductors, instance_id):
    """The shared store holds no state of the instance: its record is
    released, and no host key its logins recorded is left."""
    store = records.RecordStore(str(conductors.shared / 'records'))
    assert store.state(instance_id) == records.RELEASED
    known = (conductors.shared / 'known_hosts').read_text()
    nodes = [LB_ADDRESS] + MASTERS + WORKERS
    assert [line for line in known.splitlines()
            if any(a in line.split()[0] for a in nodes)] == []
    for home in conductors.homes.values():
        assert not (home / '.kubespray-mgmt' / 'records').exists() or \
            list((home / '.kubespray-mgmt' / 'records').glob('*.json')) == []


# --- v2 -------------------------------------------------------------------


class Infra(tv.V2Infra):
    """:class:`tv.V2Infra` on this module's addresses."""

    def instantiate(self, req, inst, grant_req, grant, vnfd):
        masters, workers = self.layout
        self.vms = []
        for vdu, address in ([('externalLB', LB_ADDRESS)] +
                             [('masterNode', a) for a in masters] +
                             [('workerNode', a) for a in workers]):
            self._add(vdu, address)
        self.lab.haproxy.start()
        self._write(inst, req.flavourId)


class V2World(tv.World):

    def instantiate(self, masters, workers):
        self.infra.layout = (masters, workers)
        self.infra.free_workers = [a for a in WORKERS if a not in workers]
        request = self.objects.InstantiateVnfRequest.from_dict({
            'flavourId': 'simple',
            'instantiationLevelId': 'instantiation_level_1',
            'vimConnectionInfo': self.vim_info(),
            'additionalParams': self.lab.additional_params})
        return self.run('INSTANTIATE', request)

    def check(self):
        masters = self.infra.addresses('masterNode')
        workers = self.infra.addresses('workerNode')
        assert self.lab.check(masters, workers) == []
        inventory = site_mod.read_inventory(self.lab.workspace(self.inst.id))
        assert sorted(inventory['kube_node']) == sorted(
            site_mod.name_of(cs.WORKER, a) for a in workers)


@pytest.fixture(scope='module')
def v2world(site, v1, tacker_conf, admin_context, tmp_path_factory):
    from tacker.sol_refactored import objects
    from tacker.sol_refactored.conductor import vnflcm_driver_v2
    from tacker.sol_refactored.infra_drivers.openstack import openstack

    objects.register_all()
    tmp = tmp_path_factory.mktemp('v2conductors')
    patch = pytest.MonkeyPatch()
    heat = tv.FakeHeatServer(HEAT_ADDRESS, tmp)
    conductors = v1.conductors  # the same homes and shared directory
    conductors.make_shared()
    try:
        heat.start()
        options = {opt.name: site.conf[kconf.GROUP][opt.name]
                   for opt in kconf.list_opts()[0][1]
                   if site.conf[kconf.GROUP][opt.name] != opt.default}
        options.update({k: v for k, v in conductors.shared_options().items()
                        if v is not None})
        config = tmp / 'tacker.conf'
        config.write_text(site_mod.config_file_text(options))
        patch.setenv(v2.CONFIG_ENV, str(config))
        vnfd = tv.test_v2_packages.onboard(tacker_conf, tmp, tv.V2_PACKAGE)
        infra = Infra(site, heat, objects)
        for name in ('instantiate', 'instantiate_rollback', 'scale',
                     'scale_rollback', 'heal', 'terminate'):
            patch.setattr(openstack.Openstack, name, getattr(infra, name))
        lcm = object.__new__(vnflcm_driver_v2.VnfLcmDriverV2)
        lcm.endpoint = 'http://127.0.0.1:9890'
        lcm.nfvo_client = tv._LocalGrants(objects)
        w = V2World(site, lcm, infra, heat, vnfd, objects, admin_context)
        w.conductors = conductors
        yield w
    finally:
        patch.undo()
        heat.stop()


def test_v2_b_refuses_unmounted_then_scales_heals_terminates(v2world):
    w, c = v2world, v2world.conductors
    c.use('a')
    w.new_instance()
    done = w.instantiate(MASTERS, WORKERS[:1])
    assert done['state'] == 'COMPLETED', done.get('error')
    w.check()
    kept = v2.SpecStore(str(c.shared / 'records' / 'v2'))
    assert kept.load(w.inst.id) == w.lab.additional_params

    c.use('b')
    runs = len(w.lab.site.runs())
    with c.unmounted():
        failed = w.scale('SCALE_OUT')
    assert failed['state'] == 'FAILED_TEMP'
    assert 'kubespray-mgmt scale_start failed: ' in failed['error']
    assert 'state store on this conductor is not the one shared' in \
        failed['error']
    # scale_start refused before Heat: no VM, no playbook.
    assert w.infra.addresses('workerNode') == WORKERS[:1]
    assert w.lab.site.runs()[runs:] == []

    done = w.scale('SCALE_OUT')
    assert done['state'] == 'COMPLETED', done.get('error')
    assert len(w.infra.addresses('workerNode')) == 2
    w.check()
    done = w.heal([w.infra.addresses('workerNode')[0]])
    assert done['state'] == 'COMPLETED', done.get('error')
    w.check()
    done = w.terminate()
    assert done['state'] == 'COMPLETED', done.get('error')
    assert not w.lab.workspace(w.inst.id).exists()
    assert kept.load(w.inst.id) is None
    assert list((c.shared / 'clusters').iterdir()) == []
    _nothing_left(c, w.inst.id)
