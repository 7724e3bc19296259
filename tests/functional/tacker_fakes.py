"""What Tacker and Heat know of a VNF instance, for end-to-end tests.

:class:`FakeHeat` answers the ``HeatClient`` lookups the driver makes,
:class:`TackerVnf` keeps the stacks, scaling-group members, servers and
VNFCs of one VNF instance on the local site
(:mod:`mgmt_localsite.site`), and :class:`FakeRegistry` records the
Kubernetes VIMs the driver registers.
"""

import types
import uuid

from mgmt_localsite import site

from mgmt_driver.adapters import v1
from mgmt_driver.model import core
from mgmt_driver.remote import ssh
from tests import fakes

# ------------------------------------------------------ Tacker + Heat --

SERVER = 'OS::Nova::Server'
PORT = 'OS::Neutron::Port'
FLOATING_IP = 'OS::Neutron::FloatingIP'
GROUP = 'OS::Heat::AutoScalingGroup'

# role: (aspect, VDU, nic CP, ssh CP), as in vnf_packages/.
_ROLE_NAMES = {
    core.ROLE_MASTER: ('master_instance', 'masterNode', 'masterNode_CP1',
                       'masterNode_FloatingIP'),
    core.ROLE_WORKER: ('worker_instance', 'workerNode', 'workerNode_CP2',
                       'workerNode_FloatingIP'),
    core.ROLE_EXTERNAL_LB: (None, 'externalLB', 'externalLB_CP3',
                            'externalLB_FloatingIP'),
}


def _resource(name, kind, physical_id, **attributes):
    return types.SimpleNamespace(resource_name=name, resource_type=kind,
                                 physical_resource_id=physical_id,
                                 attributes=attributes)


class FakeHeat:
    """Tacker's ``HeatClient`` lookups over stacks held in a dict.

    ``stacks`` is ``{stack id: {resource name: resource}}``.
    """

    def __init__(self):
        self.stacks = {}

    def resource_get(self, stack_id, name):
        return self.stacks[stack_id][name]  # KeyError: "not found"

    def resource_get_list(self, stack_id, nested_depth=0):
        return list(self.stacks[stack_id].values())


class Vm:
    """One VM of the VNF: its member stack, server and VNFC."""

    def __init__(self, role, address, member=None, stack_id=None):
        self.role = role
        self.address = address
        self.member = member
        self.stack_id = stack_id
        self.server_id = str(uuid.uuid4())
        self.vnfc_id = str(uuid.uuid4())

    @property
    def name(self):
        return site.name_of(self.role, self.address)


class TackerVnf:
    """A VNF instance as Tacker v1 and Heat see it.

    The top stack holds one scaling group per aspect (masters, workers),
    each member a nested stack with the VDU, its port and floating IP
    (both on the VM's loopback address), and the LB's resources
    directly.

    :param additional_params: the instantiate request's additionalParams.
    """

    def __init__(self, additional_params, masters, workers, lb):
        self.id = str(uuid.uuid4())
        self.additional_params = additional_params
        self.heat = FakeHeat()
        #: ``vnf_metadata`` (a v1 PATCH stores it before the hook runs).
        self.metadata = {}
        self.vms = []
        self.build(masters, workers, lb)

    def build(self, masters, workers, lb):
        """(Re)create the whole stack, as instantiate or a VNF heal does."""
        self.top = 'stack-' + uuid.uuid4().hex[:8]
        self.heat.stacks = {self.top: {}}
        self.vms = []
        for role in (core.ROLE_MASTER, core.ROLE_WORKER):
            aspect = _ROLE_NAMES[role][0]
            group = 'group-' + uuid.uuid4().hex[:8]
            self.heat.stacks[group] = {}
            self.heat.stacks[self.top][aspect] = _resource(aspect, GROUP,
                                                           group)
        lb_vm = Vm(core.ROLE_EXTERNAL_LB, lb)
        self._put_vm(self.top, lb_vm)
        self.vms.append(lb_vm)
        for address in masters:
            self.add_vm(core.ROLE_MASTER, address)
        for address in workers:
            self.add_vm(core.ROLE_WORKER, address)

    def _put_vm(self, stack_id, vm):
        _, vdu, nic_cp, ssh_cp = _ROLE_NAMES[vm.role]
        stack = self.heat.stacks.setdefault(stack_id, {})
        stack[vdu] = _resource(vdu, SERVER, vm.server_id)
        stack[nic_cp] = _resource(nic_cp, PORT, uuid.uuid4().hex,
                                  fixed_ips=[{'ip_address': vm.address}])
        stack[ssh_cp] = _resource(ssh_cp, FLOATING_IP, uuid.uuid4().hex,
                                  floating_ip_address=vm.address)

    def _group(self, role):
        aspect = _ROLE_NAMES[role][0]
        return self.heat.stacks[self.top][aspect].physical_resource_id

    def add_vm(self, role, address):
        """A new scaling-group member with a VM at *address*."""
        # Heat names members with random strings: order means nothing.
        member = uuid.uuid4().hex[:12]
        vm = Vm(role, address, member, 'member-' + uuid.uuid4().hex[:8])
        self._put_vm(vm.stack_id, vm)
        self.heat.stacks[self._group(role)][member] = _resource(
            member, 'OS::Heat::Stack', vm.stack_id)
        self.vms.append(vm)
        return vm

    def remove_vm(self, vm):
        """Delete a member and its VM (after a scale-in)."""
        del self.heat.stacks[self._group(vm.role)][vm.member]
        del self.heat.stacks[vm.stack_id]
        self.vms.remove(vm)

    def recreate_vm(self, vm):
        """Heal: a new server for the VNFC, in the same member stack."""
        vm.server_id = str(uuid.uuid4())
        self._put_vm(vm.stack_id or self.top, vm)  # the LB: top stack

    def vm(self, address):
        return next(v for v in self.vms if v.address == address)

    def addresses(self, role):
        return [v.address for v in self.vms if v.role == role]

    @property
    def instance(self):
        """The ``VnfInstance`` handed to the hooks."""
        vnfcs = [types.SimpleNamespace(
            id=vm.vnfc_id, vdu_id=_ROLE_NAMES[vm.role][1],
            compute_resource=types.SimpleNamespace(
                resource_id=vm.server_id,
                vim_level_resource_type=SERVER))
            for vm in self.vms]
        return types.SimpleNamespace(
            id=self.id, vnfd_id='vnfd-e2e', vim_connection_info=[],
            vnf_metadata=dict(self.metadata),
            instantiated_vnf_info=types.SimpleNamespace(
                instance_id=self.top, flavour_id='simple',
                additional_params=self.additional_params,
                vnfc_resource_info=vnfcs))


#: Records what the driver registers as a Kubernetes VIM.
FakeRegistry = fakes.FakeRegistry


def vnf_on_lab(lab, masters, workers, lb, pool_factory=None):
    """A new VNF instance on a ``Lab`` and Tacker v1's hooks for it: its
    Heat, VIMs into a :class:`FakeRegistry`, SSH pools from the lab's
    options unless *pool_factory* is given.

    :returns: ``(TackerVnf, FakeRegistry, LcmHooks)``.
    """
    vnf = TackerVnf(lab.additional_params, masters, workers, lb)
    registry = FakeRegistry()
    hooks = v1.LcmHooks(
        lab.conf, pool_factory=pool_factory or (
            lambda: ssh.ConnectionPool(ssh.SSHSettings.from_conf(lab.conf))),
        heat_factory=lambda context, instance, request: vnf.heat,
        vim_registry=registry, package_dir_of=lambda c, i: None)
    return vnf, registry, hooks


def namer(masters):
    """How the local site names a node: ``name(address)``, a master's name
    for an address in *masters*, a worker's otherwise."""
    masters = frozenset(masters)

    def name(address):
        role = core.ROLE_MASTER if address in masters else core.ROLE_WORKER
        return site.name_of(role, address)
    return name


class Chain:
    """One VNF instance on a started *lab*, driven through Tacker v1's
    hooks by a module's chain of scenarios (:func:`vnf_on_lab`).

    ``workers`` are the worker addresses the VNF has now: a scenario that
    adds or removes one updates it.
    """

    def __init__(self, lab, context, masters, workers, lb):
        self.lab = lab
        self.context = context
        self.vnf, self.registry, self.hooks = vnf_on_lab(
            lab, masters, workers, lb)
        self.workers = list(workers)

    def call(self, hook, request=None, **kwargs):
        """Tacker v1's call of *hook* for the instance, with *request*."""
        getattr(self.hooks, hook)(self.context, self.vnf.instance, request,
                                  None, None, **kwargs)

    def versions(self):
        """``{node name: kubelet version}`` on the site now."""
        return {n: node['kubelet_version']
                for n, node in self.lab.site.nodes().items()}


def instantiated_on(lab, context, masters, workers, lb):
    """A new VNF instance on the started *lab* (:func:`vnf_on_lab`),
    instantiated through Tacker v1's ``instantiate_end`` and checked.

    :returns: ``(TackerVnf, LcmHooks)``.
    """
    vnf, _, hooks = vnf_on_lab(lab, masters, workers, lb)
    hooks.instantiate_end(context, vnf.instance, instantiate_request(
        vnf.additional_params), None, None)
    assert lab.check(masters, workers) == []
    return vnf, hooks


# ----------------------------------------------------------- requests --

def instantiate_request(additional_params):
    """An ``InstantiateVnfRequest`` with *additional_params*."""
    return types.SimpleNamespace(flavour_id='simple',
                                 additional_params=additional_params)


def scale_request(kind, additional_params=None):
    """A ``ScaleVnfRequest`` of one step of the worker aspect.

    :param kind: ``'SCALE_OUT'`` or ``'SCALE_IN'``.
    """
    return types.SimpleNamespace(type=kind, aspect_id='worker_instance',
                                 number_of_steps=1,
                                 additional_params=additional_params or {})


def heal_request(vms=(), cause='test'):
    """A ``HealVnfRequest`` of the VNFCs of *vms* (none: the whole VNF)."""
    return types.SimpleNamespace(vnfc_instance_id=[vm.vnfc_id for vm in vms],
                                 cause=cause, additional_params={})
