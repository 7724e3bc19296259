"""A second conductor for the fleet: Tacker v2's, one process per
script call (issue 40 item 1).

:mod:`tests.functional.fleet_site` plays one Tacker 16 conductor with
threads running Tacker v1's hooks in its own process.  Tacker v2 runs
the management script of the VNF package instead: for every hook of
every operation, ``subprocess.run([sys.executable, script])`` with a
pickled dict on stdin (``VnfLcmDriverV2._exec_mgmt_driver_script``,
``sol_refactored/conductor/vnflcm_driver_v2.py``) and a pickled dict
back on stdout.  :class:`ProcessConductor` is that conductor for the
instances given to it: a :class:`fleet_site.Conductor` (Tacker's
executor, one LCM operation of an instance at a time) whose workers run
:data:`V2_RUNNERS`, each hook the packaged script
(:func:`mgmt_driver.adapters.v2.script_path`) in a new interpreter.

Both conductors share what a deployment shares: the state store
(records, locks, the v2 kept parameters, kubeconfigs: the script reads
the same ``[kubespray_mgmt]`` options from a file,
``KUBESPRAY_MGMT_CONFIG_FILES``), the Ansible server account, its
workspace parent and its playbook slots.

What Tacker v2 would hand the script is built here as the dicts its
``to_dict()`` makes: the instance (``vimConnectionInfo`` naming the
fake Keystone and Heat of :class:`test_v2_scripts.FakeHeatServer`,
``instantiatedVnfInfo.vnfcResourceInfo`` with each VNFC's server and
nested stack), the request, and the grant request (a heal's
``removeResources``).  The script reads the VMs' addresses from that
Heat through Tacker's own v2 ``HeatClient`` (hence the tacker
environment); :meth:`V2Fleet.publish` writes the instances' stacks
(:class:`tests.functional.tacker_fakes.TackerVnf`) for it.

Only 127.0.0.0/8 is used (Heat on :data:`HEAT_HOST` of the fleet's
first block).
"""

import json
import os
import pickle
import subprocess
import sys
import threading
import time

from mgmt_localsite import site as site_mod

from mgmt_driver.adapters import v2
from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from tests.functional import fleet_site
from tests.integration import fake_heat
from tests.integration import test_v2_scripts

#: Heat's address in the fleet's first /24 (the instances take .1 to
#: .250 at most, the Ansible server .254).
HEAT_HOST = 251
FLAVOUR = 'simple'
#: ``vduId`` of each role (the v2 package's VDUs).
VDUS = {core.ROLE_MASTER: 'masterNode', core.ROLE_WORKER: 'workerNode',
        core.ROLE_EXTERNAL_LB: 'externalLB'}
#: Worker processes of the v2 conductor: each runs one operation's
#: script calls at a time, so at most this many script processes live.
SCRIPT_WORKERS = 8


class ScriptFailed(Exception):
    """A script call exited non-zero (Tacker: the operation FAILED_TEMP
    with the script's stderr as detail)."""

    def __init__(self, operation, returncode, stderr):
        self.operation, self.returncode = operation, returncode
        self.detail = stderr.strip().splitlines()[-1] if stderr.strip() \
            else ''
        super().__init__('%s exited %d: %s' % (operation, returncode,
                                               self.detail))

    @property
    def refused(self):
        """Whether the driver said why (one of its own errors), not an
        internal error or a crash."""
        return self.detail.startswith('kubespray-mgmt ') and \
            'an internal error of the driver' not in self.detail


class V2Fleet:
    """The v2 side of a started :class:`fleet_site.Fleet`: the fake
    Keystone and Heat, and one config file per v2 instance.

    :param fleet: the started fleet.
    :param instances: the instances Tacker v2 manages.
    """

    def __init__(self, fleet, instances):
        self.fleet = fleet
        self.instances = list(instances)
        prefix = fleet.ansible.rsplit('.', 1)[0]
        self.heat = test_v2_scripts.FakeHeatServer(
            '%s.%d' % (prefix, HEAT_HOST), fleet.root)
        self._lock = threading.Lock()
        self.configs = {}
        #: Every script call: ``(instance, operation, exit status)``.
        self.calls = []
        #: Most script processes that ran at once.
        self.peak_scripts = 0
        self._running = 0

    def __enter__(self):
        self.publish()
        self.heat.start()
        for inst in self.instances:
            self.configs[inst] = self._config(inst)
        return self

    def __exit__(self, *exc_info):
        self.heat.stop()

    def _config(self, inst):
        """``[kubespray_mgmt]`` of *inst*'s hooks as a file for the
        script: every option the fleet set, and the state store's
        paths as the threaded conductor resolves them."""
        conf = inst.conf[kconf.GROUP]
        options = {opt.name: conf[opt.name]
                   for opt in kconf.list_opts()[0][1]
                   if conf[opt.name] != opt.default}
        options['records_dir'] = str(self.fleet.records_dir)
        path = self.fleet.root / ('v2-%02d.conf' % inst.index)
        path.write_text(site_mod.config_file_text(options))
        return path

    def publish(self):
        """Hand every v2 instance's stacks to the fake Heat (atomically:
        script processes read it meanwhile)."""
        with self._lock:
            self.heat.stacks = {
                stack: {name: _resource_dict(r) for name, r in res.items()}
                for inst in self.instances
                for stack, res in inst.vnf.heat.stacks.items()}
            temporary = self.heat.state.with_name(
                self.heat.state.name + '.new')
            temporary.write_text(json.dumps(self.heat.stacks))
            os.replace(temporary, self.heat.state)

    def vim(self):
        """The instances' ``vimConnectionInfo``: the fake Keystone."""
        return {'vim1': {
            'vimId': 'fleet-openstack',
            'vimType': 'ETSINFV.OPENSTACK_KEYSTONE.V_3',
            'interfaceInfo': {'endpoint': self.heat.url + '/identity/v3'},
            'accessInfo': {'username': 'nfv', 'password': 'not-used',
                           'project': fake_heat.PROJECT,
                           'region': 'RegionOne', 'userDomain': 'Default',
                           'projectDomain': 'Default'}}}

    def instance(self, inst):
        """*inst* as ``VnfInstanceV2.to_dict()`` after the infra driver
        ran: one VNFC per VM (its server, its nested stack; the LB's is
        the top stack)."""
        vnf = inst.vnf
        vnfcs = [{'id': vm.server_id, 'vduId': VDUS[vm.role],
                  'computeResource': {
                      'resourceId': vm.server_id,
                      'vimLevelResourceType': 'OS::Nova::Server'},
                  'metadata': {'stack_id': vm.stack_id or vnf.top,
                               'creation_time': '2026-01-01T00:00:%02dZ'
                               % n}}
                 for n, vm in enumerate(vnf.vms)]
        return {
            'id': inst.id, 'vnfdId': 'fleet-v2-vnfd',
            'instantiationState': 'INSTANTIATED',
            'vimConnectionInfo': self.vim(),
            'metadata': dict(vnf.metadata),
            'instantiatedVnfInfo': {
                'flavourId': FLAVOUR, 'vnfState': 'STARTED',
                'vnfcResourceInfo': vnfcs,
                'vnfcInfo': [{'id': 'vnfc-' + v['id'], 'vduId': v['vduId'],
                              'vnfcResourceInfoId': v['id'],
                              'vnfcState': 'STARTED'} for v in vnfcs]}}

    def call(self, inst, operation, request, grant_request=None,
             carried=None):
        """One script call, as Tacker v2's conductor makes it.

        :returns: the script's output dict.
        :raises ScriptFailed: it exited non-zero.
        """
        data = {'operation': operation, 'request': request,
                'vnf_instance': self.instance(inst),
                'grant_request': grant_request, 'grant_response': None,
                'tmp_csar_dir': None,
                'user_script_err_handling_data': dict(carried or {})}
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        env[v2.CONFIG_ENV] = str(self.configs[inst])
        with self._lock:
            self._running += 1
            self.peak_scripts = max(self.peak_scripts, self._running)
        try:
            done = subprocess.run([sys.executable, v2.script_path()],
                                  input=pickle.dumps(data),
                                  capture_output=True, env=env, check=False)
        finally:
            with self._lock:
                self._running -= 1
        self.calls.append((inst, operation, done.returncode))
        output = pickle.loads(done.stdout) if done.stdout else {}
        if done.returncode != 0:
            raise ScriptFailed(operation, done.returncode,
                               done.stderr.decode(errors='replace'))
        return output


def _resource_dict(resource):
    return {'resource_name': resource.resource_name,
            'resource_type': resource.resource_type,
            'physical_resource_id': resource.physical_resource_id,
            'attributes': dict(resource.attributes)}


# ------------------------------------------------------------ operations --
# The v2 operations of fleet_site's kinds: Tacker v2 calls *_start and
# *_end of each (the infra driver between them), the instance saved as
# the infra driver left it.

def _v2(op):
    return op.instance.v2


def _instantiate(op):
    inst = op.instance
    _v2(op).call(inst, 'instantiate_end', {
        'flavourId': FLAVOUR,
        'additionalParams': inst.vnf.additional_params})
    inst.site.settings(**fleet_site.FAST_CONTROLLER)


def _heal(op):
    """Tacker's automatic heal (its Prometheus plugin's request: the
    VNFCs, nothing else), granted: the servers are removed and made
    again."""
    inst, fleet = op.instance, _v2(op)
    vms = [inst.vnf.vm(a) for a in op.args['addresses']]
    request = {'vnfcInstanceId': ['vnfc-' + vm.server_id for vm in vms]}
    grant = {'removeResources': [
        {'type': 'COMPUTE', 'resource': {'resourceId': vm.server_id}}
        for vm in vms]}
    output = fleet.call(inst, 'heal_start', request, grant)
    for vm in vms:
        inst.vnf.recreate_vm(vm)
    fleet.publish()
    fleet.call(inst, 'heal_end', request, grant,
               output.get('user_script_err_handling_data'))


def _scale_out(op):
    inst, fleet = op.instance, _v2(op)
    request = {'type': 'SCALE_OUT', 'aspectId': 'worker_instance',
               'numberOfSteps': 1}
    fleet.call(inst, 'scale_start', request)
    inst.vnf.add_vm(core.ROLE_WORKER, inst.spare.pop(0))
    fleet.publish()
    fleet.call(inst, 'scale_end', request)


def _patch(op, **metadata):
    """Tacker v2's PATCH: the metadata merged into the instance, then
    modify_information_start and _end with the request."""
    op.instance.vnf.metadata.update(metadata)
    request = {'metadata': metadata}
    for hook in ('modify_information_start', 'modify_information_end'):
        _v2(op).call(op.instance, hook, request)


def _modify(op):
    _patch(op, **fleet_site.patch_metadata(op))


def _terminate(op):
    request = {'terminationType': 'FORCEFUL'}
    _v2(op).call(op.instance, 'terminate_start', request)
    _v2(op).call(op.instance, 'terminate_end', request)


V2_RUNNERS = dict(fleet_site.RUNNERS, instantiate=_instantiate, heal=_heal,
                  scale_out=_scale_out, upgrade=_modify, relabel=_modify,
                  renew=_modify, terminate=_terminate)


class _Refusal(exceptions.MgmtDriverOtherError):
    """A script's refusal (the driver's own message), counted as
    :data:`fleet_site.REFUSALS` count the v1 hooks' errors."""


def _refusing(runner):
    def run(op):
        try:
            runner(op)
        except ScriptFailed as exc:
            if exc.refused:
                raise _Refusal(error_message=exc.detail) from None
            raise
    return run


class ProcessConductor(fleet_site.Conductor):
    """Tacker v2's conductor for the instances of a :class:`V2Fleet`:
    each hook a script process (see the module docstring)."""

    def __init__(self, v2fleet, workers=SCRIPT_WORKERS):
        super().__init__(workers, {kind: _refusing(runner) for kind, runner
                                   in V2_RUNNERS.items()})
        for inst in v2fleet.instances:
            inst.v2 = v2fleet


class Conductors:
    """Two conductors behind Tacker's API: each operation goes to the
    conductor of its instance (a VNF's operations are always the
    conductor of its API version's)."""

    def __init__(self, threaded, processes, v2_instances):
        self.threaded, self.processes = threaded, processes
        self._v2 = set(v2_instances)

    @property
    def v2_instances(self):
        return sorted(self._v2, key=lambda inst: inst.index)

    def of(self, op):
        return self.processes if op.instance in self._v2 else \
            self.threaded

    @property
    def ops(self):
        return self.threaded.ops + self.processes.ops

    def submit(self, op):
        self.of(op).submit(op)

    def wait(self, timeout):
        """:meth:`fleet_site.Conductor.wait` of both, within one
        *timeout*."""
        deadline = time.monotonic() + timeout
        return self.threaded.wait(timeout) and self.processes.wait(
            max(0.0, deadline - time.monotonic()))

    def run_all(self, ops, timeout):
        for op in ops:
            self.submit(op)
        return self.wait(timeout)

    def shutdown(self):
        self.threaded.shutdown()
        self.processes.shutdown()


def mixed_day(fleet, v2_instances, count, window, timeout,
              sample_period=fleet_site.Sampler.PERIOD):
    """:func:`fleet_site.bad_day` with *v2_instances* on a
    :class:`ProcessConductor` and the others on the threaded one
    (*sample_period*: its sampler's).

    :returns: ``(day, conductors, v2fleet)``.
    """
    with V2Fleet(fleet, v2_instances) as v2fleet:
        conductors = Conductors(fleet_site.Conductor(),
                                ProcessConductor(v2fleet), v2_instances)
        day = fleet_site.bad_day(fleet, count, window, timeout, conductors,
                                 sample_period)
    return day, conductors, v2fleet


def v2_leaks(fleet, v2_instances):
    """What the v2 instances left in the shared store: kept parameters
    and kubeconfigs (the v1 VIM registry is :func:`fleet_site.leaks`')."""
    problems = []
    kept = fleet.records_dir / 'v2'
    for inst in v2_instances:
        if (kept / ('%s.json' % inst.id)).exists():
            problems.append('v2 parameters kept for %s' % inst.id)
    kubeconfigs = fleet.root / 'kubeconfigs'
    left = sorted(os.listdir(kubeconfigs)) if kubeconfigs.is_dir() else []
    if left:
        problems.append('kubeconfigs left: %s' % left)
    return problems
