"""Tacker 16's real v2 LCM driver runs our package script on the local site.

Real: ``VnfLcmDriverV2.grant/post_grant/process/rollback`` (which hooks
run and when, the grant requests with their ``addResources`` and
``removeResources``, the instance handed to ``*_start`` and ``*_end``,
``user_script_err_handling_data``), the VNFD lookup of the script
artifact and the package copy it runs from (``Vnfd.get_interface_script``,
``make_tmp_csar_dir``), the subprocess with the pickled dicts, and inside
it our script, Tacker's v2 ``HeatClient`` and our driver down to the
local site (sshd, ansible-playbook with the kubespray double, HAProxy on
127.0.14.x).  The v2 package is the one ``kubespray-mgmt csar build``
makes, onboarded by Tacker's ``csar_utils.load_csar_data``.

Faked: the OpenStack infra driver (``Openstack.instantiate/scale/heal/
terminate`` and their rollbacks: :class:`V2Infra` keeps the VNF's stacks
laid out as StandardUserData does and writes ``instantiatedVnfInfo`` as
the real driver would), Keystone and Heat behind an HTTP server on
127.0.14.2 (:class:`FakeHeatServer`, answering the script's Heat
lookups), and the NFVO's grant (the grant request is Tacker's own).

The scenarios share one VNF and run in file order.
"""

import contextlib
import datetime
import json
import pathlib
import subprocess
import sys
import uuid

import pytest

pytest.importorskip('tacker')

from mgmt_localsite import lab as lab_mod  # noqa: E402
from mgmt_localsite import site as site_mod  # noqa: E402

from mgmt_driver.adapters import v2  # noqa: E402
from mgmt_driver.common import conf as kconf  # noqa: E402
from tests import packages  # noqa: E402
from tests.integration import conductor_site as cs  # noqa: E402
from tests.integration import fake_heat  # noqa: E402
from tests.integration import test_v2_packages  # noqa: E402

ANSIBLE = '127.0.14.10'
HEAT_ADDRESS = '127.0.14.2'
LB_ADDRESS = '127.0.14.20'
MASTERS = ['127.0.14.31']
WORKERS = ['127.0.14.%d' % i for i in range(41, 45)]
V2_PACKAGE = 'kubespray_v2_simple'
VNFD_ID = '7b2a4c1e-5d0f-4a3b-9e61-2f8c0d4b6a17'
VDUS = {cs.MASTER: 'masterNode', cs.WORKER: 'workerNode', cs.LB: 'externalLB'}
ROLES = {vdu: role for role, vdu in VDUS.items()}
# VDU: (external CP, floating IP), as in the v2 package's BaseHOT.
CPS = {'masterNode': ('masterNode_CP1', 'masterNode_FloatingIP'),
       'workerNode': ('workerNode_CP2', 'workerNode_FloatingIP'),
       'externalLB': ('externalLB_CP3', 'externalLB_FloatingIP')}


class FakeHeatServer:
    """:mod:`tests.integration.fake_heat` in a process of its own.

    ``stacks`` is ``{stack id: {resource name: resource dict}}``;
    :meth:`save` hands it to the server.
    """

    def __init__(self, address, directory):
        self.address = address
        self.state = directory / 'heat-stacks.json'
        self.stacks = {}
        self.process = None
        self.url = None

    def start(self):
        self.save()
        self.process = subprocess.Popen(
            [sys.executable, '-m', 'tests.integration.fake_heat',
             self.address, str(self.state)], stdout=subprocess.PIPE,
            cwd=packages.REPO)
        self.url = self.process.stdout.readline().decode().strip()
        assert self.url.startswith('http://'), 'fake Heat did not start'

    def save(self):
        self.state.write_text(json.dumps(self.stacks))

    @property
    def requests(self):
        log = pathlib.Path(str(self.state) + '.log')
        return log.read_text().splitlines() if log.exists() else []

    def stop(self):
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process.stdout.close()


class V2Infra:
    """Tacker v2's OpenStack infra driver over :class:`FakeHeatServer`.

    Each VM is a nested stack ``<VDU>-<index>`` holding its floating IP
    and port (both on the VM's loopback address); ``instantiatedVnfInfo``
    is written as the real driver writes it (``vnfcResourceInfo`` ids are
    the server ids, ``metadata.stack_id`` the nested stack).
    """

    def __init__(self, lab, heat, objects, lb_address=LB_ADDRESS):
        self.lab, self.heat, self.objects = lab, heat, objects
        self.lb_address = lb_address
        self.site = cs.FakeInfra(lab, objects)  # the site's VM events
        self.layout = ([], [])
        self.free_workers = []
        self.vms = []   # dicts: vdu, address, stack, server, created
        self.index = 0
        self.made = {}  # granted resource id: the VM made for it

    # --- Openstack's methods ------------------------------------------

    def instantiate(self, req, inst, grant_req, grant, vnfd):
        masters, workers = self.layout
        self.vms = []
        for vdu, address in ([('externalLB', self.lb_address)] +
                             [('masterNode', a) for a in masters] +
                             [('workerNode', a) for a in workers]):
            self._add(vdu, address)
        self.lab.haproxy.start()  # a new LB VM: HAProxy not configured
        self._write(inst, req.flavourId)

    def instantiate_rollback(self, req, inst, grant_req, grant, vnfd):
        self._delete_all()

    def terminate(self, req, inst, grant_req, grant, vnfd):
        self._delete_all()

    def scale(self, req, inst, grant_req, grant, vnfd):
        if req.type == 'SCALE_OUT':
            # One VM per granted COMPUTE resource: a retry, which applies
            # the same grant again, makes none more (as Heat's update).
            for res in grant_req.addResources:
                if res.type == 'COMPUTE' and res.id not in self.made:
                    self.made[res.id] = self._add(
                        res.resourceTemplateId, self.free_workers.pop(0))
        else:
            for vm in self._removed(grant_req):
                self._remove(vm)
        self._write(inst, inst.instantiatedVnfInfo.flavourId)

    def scale_rollback(self, req, inst, grant_req, grant, vnfd):
        known = {v.computeResource.resourceId
                 for v in inst.instantiatedVnfInfo.vnfcResourceInfo}
        for vm in [vm for vm in self.vms if vm['server'] not in known]:
            self._remove(vm)
        self.heat.save()

    def heal(self, req, inst, grant_req, grant, vnfd):
        healed = self._removed(grant_req)
        for vm in healed:
            vm['server'] = str(uuid.uuid4())
            if vm['vdu'] == 'externalLB':
                self.site.empty_lb()
        if len(healed) == len(self.vms):  # every VM new: no cluster left
            self.site._forget_cluster()
        self._write(inst, inst.instantiatedVnfInfo.flavourId)

    # --- stacks -------------------------------------------------------

    def _add(self, vdu, address):
        stack = 'stack-%s-%d-%s' % (vdu, self.index, uuid.uuid4().hex[:6])
        self.index += 1
        port, fip = CPS[vdu]
        self.heat.stacks[stack] = {
            port: {'resource_name': port,
                   'resource_type': 'OS::Neutron::Port',
                   'attributes': {'fixed_ips': [{'ip_address': address}]}},
            fip: {'resource_name': fip,
                  'resource_type': 'OS::Neutron::FloatingIP',
                  'attributes': {'floating_ip_address': address}}}
        vm = {'vdu': vdu, 'address': address, 'stack': stack,
              'server': str(uuid.uuid4()),
              'created': '2026-01-01T00:%02d:00Z' % self.index}
        self.vms.append(vm)
        return vm

    def _remove(self, vm):
        self.vms.remove(vm)
        del self.heat.stacks[vm['stack']]
        if vm['vdu'] == 'workerNode':
            self.free_workers.append(vm['address'])

    def _delete_all(self):
        for vm in list(self.vms):
            self._remove(vm)
        self.free_workers.sort()
        self.heat.save()
        self.lab.haproxy.stop()
        self.site._forget_cluster()

    def _removed(self, grant_req):
        servers = {r.resource.resourceId for r in grant_req.removeResources
                   if r.type == 'COMPUTE'}
        return [vm for vm in self.vms if vm['server'] in servers]

    def _write(self, inst, flavour_id):
        self.heat.save()
        o = self.objects
        vnfcs = [o.VnfcResourceInfoV2(
            id=vm['server'], vduId=vm['vdu'],
            computeResource=o.ResourceHandle(
                resourceId=vm['server'],
                vimLevelResourceType='OS::Nova::Server'),
            metadata={'stack_id': vm['stack'],
                      'creation_time': vm['created']})
            for vm in self.vms]
        inst.instantiatedVnfInfo = o.VnfInstanceV2_InstantiatedVnfInfo(
            flavourId=flavour_id, vnfState='STARTED',
            vnfcResourceInfo=vnfcs,
            vnfcInfo=[o.VnfcInfoV2(id='%s-%s' % (v.vduId, v.id),
                                   vduId=v.vduId, vnfcResourceInfoId=v.id,
                                   vnfcState='STARTED') for v in vnfcs],
            metadata={'stack_id': 'top-stack'})

    def addresses(self, vdu):
        return [vm['address'] for vm in self.vms if vm['vdu'] == vdu]

    def vm(self, address):
        return next(vm for vm in self.vms if vm['address'] == address)


class World:
    """Tacker's v2 LCM driver, the site and the one VNF instance."""

    def __init__(self, lab, lcm, infra, heat, vnfd, objects, context):
        self.lab, self.lcm, self.infra, self.heat = lab, lcm, infra, heat
        self.vnfd, self.objects, self.context = vnfd, objects, context
        self.inst = None
        self.scripts = []   # (operation, return code)

    def new_instance(self):
        self.inst = self.objects.VnfInstanceV2(
            id=str(uuid.uuid4()), vnfdId=VNFD_ID, vnfProvider='mgmt_driver',
            vnfProductName='kubespray', vnfSoftwareVersion='1.0',
            vnfdVersion='1.0', instantiationState='NOT_INSTANTIATED')
        return self.inst

    def vim_info(self):
        return {'vim1': {
            'vimId': cs.OPENSTACK_VIM,
            'vimType': 'ETSINFV.OPENSTACK_KEYSTONE.V_3',
            'interfaceInfo': {'endpoint': self.heat.url + '/identity/v3'},
            'accessInfo': {'username': 'nfv', 'password': 'not-used',
                           'project': fake_heat.PROJECT, 'region': 'RegionOne',
                           'userDomain': 'Default',
                           'projectDomain': 'Default'}}}

    # --- operations, as Tacker's v2 conductor runs them ---------------

    def run(self, operation, request, data=None):
        """grant, post_grant, process: ``(state, lcmocc pieces)``.

        As the conductor does, the instance is saved only when the
        operation completes; a failed one leaves the saved one.
        """
        return self.start(self._lcmocc(operation, request), data)

    def start(self, lcmocc, data=None):
        """:meth:`run` of an lcmocc made elsewhere (Tacker's auto-heal
        makes its own)."""
        grant_req, grant = self.lcm.grant(self.context, lcmocc,
                                          self.inst.obj_clone(), self.vnfd)
        lcmocc.operationState = 'PROCESSING'
        failed = {'lcmocc': lcmocc, 'grant_req': grant_req, 'grant': grant,
                  'data': {} if data is None else data}
        return self.process(failed)

    def _lcmocc(self, operation, request):
        return self.objects.VnfLcmOpOccV2(
            id=str(uuid.uuid4()), operationState='STARTING',
            vnfInstanceId=self.inst.id, operation=operation,
            isAutomaticInvocation=False, isCancelPending=False,
            operationParams=request,
            startTime=datetime.datetime.now(datetime.timezone.utc),
            stateEnteredTime=datetime.datetime.now(datetime.timezone.utc))

    def modify(self, metadata):
        """PATCH of the instance, as the conductor's modify_vnfinfo runs
        it: no grant, then process (which merges the metadata into the
        instance before modify_information_end)."""
        request = self.objects.VnfInfoModificationRequest(metadata=metadata)
        lcmocc = self._lcmocc('MODIFY_INFO', request)
        lcmocc.operationState = 'PROCESSING'
        return self.process({'lcmocc': lcmocc, 'grant_req': None,
                             'grant': None, 'data': {}})

    def _granted(self, failed):
        # The saved instance, as the conductor reads it for the first
        # run, a retry and a rollback, then post_grant.
        inst = self.inst.obj_clone()
        self.lcm.post_grant(self.context, failed['lcmocc'], inst,
                            failed['grant_req'], failed['grant'], self.vnfd)
        return inst

    def process(self, failed):
        """The conductor's process or its retry of *failed*."""
        inst = self._granted(failed)
        try:
            self.lcm.process(self.context, failed['lcmocc'], inst,
                             failed['grant_req'], failed['grant'],
                             self.vnfd, failed['data'])
        except Exception as exc:
            return dict(failed, state='FAILED_TEMP', error=str(exc))
        if failed['lcmocc'].operation == 'TERMINATE':
            inst.instantiationState = 'NOT_INSTANTIATED'
        else:
            inst.instantiationState = 'INSTANTIATED'
        self.inst = inst
        return dict(failed, state='COMPLETED')

    def rollback(self, failed):
        inst = self._granted(failed)
        self.lcm.rollback(self.context, failed['lcmocc'], inst,
                          failed['grant_req'], failed['grant'], self.vnfd,
                          failed['data'])
        return 'ROLLED_BACK'

    def instantiate(self, masters, workers):
        self.infra.layout = (masters, workers)
        self.infra.free_workers = [a for a in self.lab.workers
                                   if a not in workers]
        request = self.objects.InstantiateVnfRequest.from_dict({
            'flavourId': 'simple',
            'instantiationLevelId': 'instantiation_level_1',
            'vimConnectionInfo': self.vim_info(),
            'additionalParams': self.lab.additional_params})
        return self.run('INSTANTIATE', request)

    def scale(self, kind):
        request = self.objects.ScaleVnfRequest(
            type=kind, aspectId='worker_instance', numberOfSteps=1)
        return self.run('SCALE', request)

    def heal(self, addresses=()):
        body = {'cause': 'test'}
        if addresses:
            body['vnfcInstanceId'] = [
                '%s-%s' % (self.infra.vm(a)['vdu'], self.infra.vm(a)['server'])
                for a in addresses]
        return self.run('HEAL', self.objects.HealVnfRequest.from_dict(body))

    def terminate(self):
        return self.run('TERMINATE', self.objects.TerminateVnfRequest(
            terminationType='FORCEFUL'))

    # --- checks -------------------------------------------------------

    def check(self):
        """The cluster matches the VNF's VMs, everywhere we can look."""
        masters = self.infra.addresses('masterNode')
        workers = self.infra.addresses('workerNode')
        assert self.lab.check(masters, workers) == []
        inventory = site_mod.read_inventory(
            self.lab.workspace(self.inst.id))
        assert sorted(inventory['kube_node']) == sorted(
            site_mod.name_of(cs.WORKER, a) for a in workers)
        kubeconfig = self.lab.sshd.home() / '.kube' / 'config'
        assert 'https://%s:%d' % (
            self.infra.lb_address, self.lab.api_port) in \
            kubeconfig.read_text()

    def kept(self):
        """The parameters the script keeps for the instance, or None."""
        return v2.SpecStore(str(self.records / 'v2')).load(self.inst.id)

    def check_gone(self):
        assert not self.lab.workspace(self.inst.id).exists()
        assert self.kept() is None
        assert list(self.kubeconfigs.iterdir()) == []


def _script_config(lab, tmp):
    """``[kubespray_mgmt]`` of the lab as a file for the script."""
    options = {opt.name: lab.conf[kconf.GROUP][opt.name]
               for opt in kconf.list_opts()[0][1]
               if lab.conf[kconf.GROUP][opt.name] != opt.default}
    options['records_dir'] = str(tmp / 'records')
    options['kubeconfig_dir'] = str(tmp / 'kubeconfigs')
    path = tmp / 'kubespray-mgmt.conf'
    path.write_text(site_mod.config_file_text(options))
    return path


@contextlib.contextmanager
def make_world(tacker_conf, admin_context, tmp, ansible=ANSIBLE,
               heat_address=HEAT_ADDRESS, lb=LB_ADDRESS, masters=MASTERS,
               workers=WORKERS, patch=None, infra_class=None):
    """Tacker's v2 LCM driver over a new local site (its addresses
    given), as the :func:`world` fixture and other modules use it.

    :param patch: a ``pytest.MonkeyPatch`` to use (undone on exit).
    :param infra_class: :class:`V2Infra` or a subclass.
    """
    reason = site_mod.unavailable()
    if reason:
        pytest.skip(reason)
    from tacker.sol_refactored import objects
    from tacker.sol_refactored.conductor import vnflcm_driver_v2
    from tacker.sol_refactored.infra_drivers.openstack import openstack

    objects.register_all()
    patch = patch or pytest.MonkeyPatch()
    lab = lab_mod.Lab(ansible, lb, masters, workers)
    heat = FakeHeatServer(heat_address, tmp)
    try:
        lab.start()
        heat.start()
        patch.setenv(v2.CONFIG_ENV, str(_script_config(lab, tmp)))
        vnfd = test_v2_packages.onboard(tacker_conf, tmp, V2_PACKAGE)
        infra = (infra_class or V2Infra)(lab, heat, objects, lb_address=lb)
        for name in ('instantiate', 'instantiate_rollback', 'scale',
                     'scale_rollback', 'heal', 'terminate'):
            # A bound method is no descriptor: Openstack().<name> is it.
            patch.setattr(openstack.Openstack, name, getattr(infra, name))
        lcm = object.__new__(vnflcm_driver_v2.VnfLcmDriverV2)
        lcm.endpoint = 'http://127.0.0.1:9890'
        lcm.nfvo_client = _LocalGrants(objects)
        real_exec = lcm._exec_mgmt_driver_script
        w = World(lab, lcm, infra, heat, vnfd, objects, admin_context)
        w.kubeconfigs = tmp / 'kubeconfigs'
        w.records = tmp / 'records'
        infra.site.records_dirs = [w.records]  # the script's records_dir
        w.kubeconfigs.mkdir()

        def recorded(operation, *args, **kwargs):
            try:
                real_exec(operation, *args, **kwargs)
            except Exception:
                w.scripts.append((operation, 'failed'))
                raise
            if vnfd.get_interface_script('simple', operation):
                w.scripts.append((operation, 'ok'))
        lcm._exec_mgmt_driver_script = recorded
        yield w
    finally:
        patch.undo()
        heat.stop()
        lab.stop()


@pytest.fixture(scope='module')
def world(tacker_conf, admin_context, tmp_path_factory):
    with make_world(tacker_conf, admin_context,
                    tmp_path_factory.mktemp('v2')) as w:
        yield w


class _LocalGrants:
    """The NFVO: grants whatever Tacker's grant request asks."""

    def __init__(self, objects):
        self.objects = objects

    def grant(self, context, grant_req):
        return self.objects.GrantV1(
            id=str(uuid.uuid4()), vnfInstanceId=grant_req.vnfInstanceId,
            vnfLcmOpOccId=grant_req.vnfLcmOpOccId)


@pytest.fixture
def w(world):
    world.scripts = []
    return world


def _worker(address):
    return site_mod.name_of(cs.WORKER, address)


# ---------------------------------------------------------------- scenarios


def test_instantiate_fails_then_rollback(w):
    """instantiate_end fails; the rollback releases what it set up."""
    w.new_instance()
    w.lab.site.inject_failure('cluster.yml', host=_worker(WORKERS[0]))
    failed = w.instantiate(MASTERS, WORKERS[:1])
    assert failed['state'] == 'FAILED_TEMP'
    assert 'kubespray-mgmt instantiate_end failed' in failed['error']
    assert w.kept() == w.lab.additional_params
    assert w.lab.workspace(w.inst.id).exists()
    assert w.rollback(failed) == 'ROLLED_BACK'
    assert w.scripts == [('instantiate_end', 'failed'),
                         ('instantiate_rollback_end', 'ok')]
    assert w.infra.vms == []
    w.check_gone()


def test_instantiate(w):
    w.new_instance()
    done = w.instantiate(MASTERS, WORKERS[:1])
    assert done['state'] == 'COMPLETED', done.get('error')
    assert w.scripts == [('instantiate_end', 'ok')]
    w.check()
    assert w.kept() == w.lab.additional_params
    # The script read the VMs from Heat, with Tacker's v2 HeatClient.
    assert 'POST %s' % fake_heat.TOKENS_PATH in w.heat.requests


def test_scale_out(w):
    done = w.scale('SCALE_OUT')
    assert done['state'] == 'COMPLETED', done.get('error')
    assert w.scripts == [('scale_start', 'ok'), ('scale_end', 'ok')]
    assert len(w.infra.addresses('workerNode')) == 2
    w.check()


def _failing_scale_out(w):
    """A scale-out whose scale_end fails on the new worker."""
    new = w.infra.free_workers[0]
    w.lab.site.inject_failure('scale.yml', host=_worker(new))
    failed = w.scale('SCALE_OUT')
    assert failed['state'] == 'FAILED_TEMP'
    assert 'kubespray-mgmt scale_end failed' in failed['error']
    assert w.scripts == [('scale_start', 'ok'), ('scale_end', 'failed')]
    return new, failed


def test_scale_out_fails_then_retry(w):
    """v2 retries the whole operation: scale_start, Heat, scale_end."""
    new, failed = _failing_scale_out(w)
    # The saved instance does not have the new VM; the retry runs both
    # hooks again over what Heat now holds.
    w.scripts = []
    retried = w.process(failed)
    assert retried['state'] == 'COMPLETED', retried.get('error')
    assert w.scripts == [('scale_start', 'ok'), ('scale_end', 'ok')]
    assert new in w.infra.addresses('workerNode')
    w.check()


def test_scale_out_fails_then_rollback(w):
    """Tacker deletes the new VM, then scale_rollback_end converges."""
    new, failed = _failing_scale_out(w)
    assert w.rollback(failed) == 'ROLLED_BACK'
    assert w.scripts[-1] == ('scale_rollback_end', 'ok')
    assert new not in w.infra.addresses('workerNode')
    w.check()


def test_scale_in(w):
    before = w.infra.addresses('workerNode')
    done = w.scale('SCALE_IN')
    assert done['state'] == 'COMPLETED', done.get('error')
    assert w.scripts == [('scale_start', 'ok'), ('scale_end', 'ok')]
    assert len(w.infra.addresses('workerNode')) == len(before) - 1
    w.check()


def test_heal_worker(w):
    worker = w.infra.addresses('workerNode')[0]
    old = w.infra.vm(worker)['server']
    done = w.heal([worker])
    assert done['state'] == 'COMPLETED', done.get('error')
    assert w.infra.vm(worker)['server'] != old
    assert w.scripts == [('heal_start', 'ok'), ('heal_end', 'ok')]
    w.check()


def test_heal_load_balancer(w):
    kubeconfig = w.lab.sshd.home() / '.kube' / 'config'
    done = w.heal([LB_ADDRESS])
    assert done['state'] == 'COMPLETED', done.get('error')
    # heal_start told heal_end which stack was healed.
    assert done['data'] == {v2.DATA_KEY: {
        'healed_stacks': [w.infra.vm(LB_ADDRESS)['stack']]}}
    assert kubeconfig.exists()
    w.check()


def test_heal_whole_vnf(w):
    done = w.heal()
    assert done['state'] == 'COMPLETED', done.get('error')
    w.check()


def test_modify_information_upgrades_the_cluster(w):
    """A PATCH with metadata kube_version: every node upgraded."""
    done = w.modify({'kube_version': '1.34.3'})
    assert done['state'] == 'COMPLETED', done.get('error')
    assert w.scripts == [('modify_information_end', 'ok')]
    assert {n['kubelet_version'] for n in w.lab.site.nodes().values()} == \
        {'v1.34.3'}
    assert w.inst.metadata == {'kube_version': '1.34.3'}
    w.check()
    # Another PATCH leaves the cluster alone.
    w.scripts = []
    runs = len(w.lab.site.runs())
    assert w.modify({'owner': 'ops'})['state'] == 'COMPLETED'
    assert w.scripts == [('modify_information_end', 'ok')]
    assert w.lab.site.runs()[runs:] == []


def test_modify_information_relabels_a_node(w):
    """A PATCH with the relabel_* keys: the worker's label and taint
    are set (and recorded for later runs), nothing else changes."""
    worker = sorted(n for n in w.lab.site.nodes() if n.startswith(
        'worker-'))[0]
    runs = len(w.lab.site.runs())
    done = w.modify({'relabel_nodes': worker,
                     'relabel_labels': 'example.com/rack=r7',
                     'relabel_taints': 'example.com/rack=r7:NoSchedule'})
    assert done['state'] == 'COMPLETED', done.get('error')
    node = w.lab.site.nodes()[worker]
    assert node['labels']['example.com/rack'] == 'r7'
    assert {'key': 'example.com/rack', 'value': 'r7',
            'effect': 'NoSchedule'} in node['taints']
    assert w.lab.site.runs()[runs:] == []
    w.check()


def test_terminate(w):
    done = w.terminate()
    assert done['state'] == 'COMPLETED', done.get('error')
    assert w.scripts == [('terminate_start', 'ok'), ('terminate_end', 'ok')]
    assert w.infra.vms == []
    w.check_gone()


def test_the_script_runs_from_the_package_copy(w):
    """The artifact Tacker's VNFD lookup finds is our script, relative to
    Definitions/, and identical to the installed one."""
    script = w.vnfd.get_interface_script('simple', 'heal_end')
    assert script == '../' + v2.SCRIPT
    tmp_csar = w.vnfd.make_tmp_csar_dir()
    try:
        copied = pathlib.Path(tmp_csar) / 'Definitions' / script
        assert copied.read_bytes() == \
            pathlib.Path(v2.script_path()).read_bytes()
    finally:
        w.vnfd.remove_tmp_csar_dir(tmp_csar)
