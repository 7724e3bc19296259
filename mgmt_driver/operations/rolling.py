"""Rolling node replacement: Tacker v2's "Change current VNF package"
(``upgrade_type: RollingUpdate``), one node at a time.

Where the driver can act, read from Tacker 16
(``sol_refactored/conductor/vnflcm_driver_v2.py`` ``process`` and
``rollback``; ``sol_refactored/infra_drivers/openstack/openstack.py``
``_change_vnfpkg_rolling_update*`` and
``_execute_coordinate_vnf_script``): the management script's
``change_current_package_start`` runs before the infra driver updates
any VM, then for each VNFC in turn (the order of
``instantiatedVnfInfo.vnfcResourceInfo``, those the grant request
removes) Heat updates the VM and only *then* runs the coordinate-VNF
script.  No call comes between two VNFCs other than that script, so the
earliest point before VNFC *k+1* is replaced is the script run after
VNFC *k*: it brings *k* back and takes *k+1* out; the start hook takes
out the first.  A rollback runs the same loop with the old image and the
``-old-vnf`` script, framed by ``change_current_package_rollback_start``
and ``_end``.

Taking a node out is the heal's first half
(:func:`mgmt_driver.operations.lcm.heal_begin`: drained, budgets honoured,
out of HAProxy, control-plane nodes out of etcd after a snapshot);
bringing it back is the heal's second half
(:func:`~mgmt_driver.operations.lcm.heal_finish`: the same node name,
workers by ``scale.yml --limit``, control-plane nodes by ``cluster.yml``,
labels and taints from the record), then :func:`gate`.

The rules (pure, :func:`check_plan`, :func:`check_take_out`) and the
:class:`Progress` record are here; the v2 script
(:mod:`mgmt_driver.adapters.v2`) stores the record and calls :func:`take_out`
and :func:`bring_back`.  Not in the design's layout: an operations-layer
module.
"""

import collections
import typing

from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.operations import day2
from mgmt_driver.operations import gates
from mgmt_driver.operations import lcm
from mgmt_driver.remote import kubectl

#: A node's state in a rolling replacement.
PENDING, OUT, REPLACED = 'pending', 'out', 'replaced'
STATES = (PENDING, OUT, REPLACED)
#: Which way the VMs are being replaced.
FORWARD, ROLLBACK = 'forward', 'rollback'


def quorum(members):
    """etcd's quorum of a cluster of *members* members."""
    return members // 2 + 1


class Step(typing.NamedTuple):
    """One VNFC of the replacement: its ``vnfcResourceInfo`` id, node
    name and role."""

    vnfc: str
    node: str
    role: str


# ------------------------------------------------------------ rules


def check_plan(masters, order):
    """Why the nodes *order* cannot be replaced one at a time.

    :param masters: the names of every control-plane node.
    :param order: the :class:`Step` list, in Tacker's order.
    :returns: sentences (none: fit).
    """
    problems = []
    names = [s.node for s in order]
    # Counted once, not once per name: Tacker's order is request-sized.
    twice = sorted(n for n, seen in collections.Counter(names).items()
                   if seen > 1)
    if twice:
        problems.append('nodes named twice: %s' % ', '.join(twice))
    chosen = [s.node for s in order if s.role == core.ROLE_MASTER]
    if chosen and len(masters) - 1 < quorum(len(masters)):
        problems.append(
            'replacing control-plane node %s would leave etcd below '
            'quorum while it is out (%d of %d members left, quorum %d): '
            'a rolling replacement needs at least 3 control-plane nodes; '
            'heal the whole VNF instead' % (
                chosen[0], len(masters) - 1, len(masters),
                quorum(len(masters))))
    return problems


def check_take_out(progress, node, masters):
    """Why *node* cannot be taken out now: only one node is out at a
    time, and a control-plane node only while etcd keeps its quorum
    without it.

    :param masters: the names of every control-plane node.
    :returns: sentences.
    """
    others = [n for n in progress.nodes(OUT) if n != node]
    problems = []
    if others:
        problems.append('one node at a time: %s is still out of the '
                        'cluster' % ', '.join(others))
    if node in masters:
        left = len(masters) - 1 - len([n for n in others if n in masters])
        if left < quorum(len(masters)):
            problems.append('taking control-plane node %s out would leave '
                            '%d of %d etcd members, below quorum %d' % (
                                node, left, len(masters),
                                quorum(len(masters))))
    return problems


def wants_out(direction, state):
    """Whether a node in *state* must be taken out before its VM is
    replaced in *direction* (a node already at the wanted image stays:
    Heat leaves its VM as it is)."""
    return state == (PENDING if direction == FORWARD else REPLACED)


def done_state(direction):
    """A node's state once back at the image of *direction*."""
    return REPLACED if direction == FORWARD else PENDING


# ------------------------------------------------------------ the record


class Progress:
    """The record of one rolling replacement (kept under the instance's
    state lock, so that a retry continues where it stopped).

    :param operation_id: Tacker's ``vnfLcmOpOccId``.
    :param order: :class:`Step` list, in Tacker's order.
    :param states: ``{node: state}``; missing: :data:`PENDING`.
    :param direction: :data:`FORWARD` or :data:`ROLLBACK`.
    :param snapshots: the directions in which the etcd snapshot before
        the first control-plane node was taken.
    """

    def __init__(self, operation_id, order, states=None, direction=FORWARD,
                 snapshots=()):
        self.operation_id = operation_id
        self.order = list(order)
        self.states = {s.node: (states or {}).get(s.node, PENDING)
                       for s in self.order}
        self.direction = direction
        self.snapshots = set(snapshots)

    def state(self, node):
        return self.states[node]

    def set(self, node, state):
        self.states[node] = state

    def nodes(self, state):
        """The nodes in *state*, in order."""
        return [s.node for s in self.order if self.states[s.node] == state]

    def step_of_vnfc(self, vnfc_id):
        """:raises MgmtDriverNotFound: *vnfc_id* is not replaced by this
        operation."""
        for step in self.order:
            if step.vnfc == vnfc_id:
                return step
        raise exceptions.MgmtDriverNotFound(
            param='VNFC %s (not among the VNFCs operation %s replaces)'
                  % (vnfc_id, self.operation_id))

    def after(self, node):
        """The step after *node*'s, or None."""
        names = [s.node for s in self.order]
        index = names.index(node) + 1
        return self.order[index] if index < len(self.order) else None

    def lead(self):
        """The node names a control-plane node taken out should leave
        first in the inventory: those done in this direction, then
        those still to do from the last in order.  kubespray removes
        the first control-plane node only after another one was put
        first and ``cluster.yml`` re-ran (one run over the control
        plane); led so, only the first node of the order and the one
        put first then pay for it, not every control-plane node."""
        done = done_state(self.direction)
        names = [s.node for s in self.order]
        return ([n for n in names if self.states[n] == done] +
                [n for n in reversed(names) if self.states[n] != done])

    def summary(self):
        """Which nodes are replaced, out, and not replaced: the text a
        failure reports."""
        parts = []
        for state, label in ((REPLACED, 'replaced'),
                             (OUT, 'out of the cluster (VM being '
                                   'replaced)'),
                             (PENDING, 'not replaced')):
            parts.append('%s: %s' % (label, ', '.join(self.nodes(state))
                                     or 'none'))
        return '; '.join(parts)

    def to_dict(self):
        return {'operation': self.operation_id, 'direction': self.direction,
                'order': [s._asdict() for s in self.order],
                'states': dict(self.states),
                'snapshots': sorted(self.snapshots)}

    @classmethod
    def from_dict(cls, data, where):
        """:raises InstanceRecordInvalid: not a record of this shape."""
        try:
            order = [Step(**{k: str(s[k]) for k in Step._fields})
                     for s in data['order']]
            states = dict(data['states'])
            direction = data['direction']
            # A record written before snapshots were kept: none taken.
            snapshots = set(data.get('snapshots') or ())
            if not {direction} | snapshots <= {FORWARD, ROLLBACK} or not set(
                    states.values()) <= set(STATES):
                raise ValueError('unknown state or direction')
            return cls(str(data['operation']), order, states, direction,
                       snapshots)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise exceptions.InstanceRecordInvalid(
                path=where, instance='', reason='rolling replacement '
                'record: %s' % type(exc).__name__)


# ------------------------------------------------------------ the steps


def _masters(cluster):
    return [n.name for n in cluster.masters]


def _advice(progress):
    return ('%s.  Fix the cause and retry the operation (it continues '
            'with the nodes not done), or roll it back.'
            % progress.summary())


def take_out(drv, cluster, progress, node, save):
    """Take *node* out before Tacker replaces its VM (the heal's first
    half), unless it is already out or at the wanted image.

    :param save: called with *progress* once it changed.
    :raises UpgradeGateClosed: a rule or a disruption budget stops it;
        nothing was changed.
    """
    if not wants_out(progress.direction, progress.state(node)):
        drv.step('rolling replacement: %s is %s, not taken out', node,
                 progress.state(node))
        return
    problems = check_take_out(progress, node, _masters(cluster))
    if not lcm.planning(drv) and not problems:
        problems = _budget_problems(drv, cluster, node)
    if problems:
        gates.refuse('before taking %s out (nothing was changed for it)'
                     % node, problems, _advice(progress))
    drv.step('rolling replacement: taking %s out', node)
    _heal_begin(drv, cluster, progress, node, save)


def _heal_begin(drv, cluster, progress, node, save):
    # The etcd snapshot: before the first control-plane node of each
    # direction only (a heal takes one before every control-plane node).
    snapshot = (node in _masters(cluster) and
                progress.direction not in progress.snapshots)
    lcm.heal_begin(drv, cluster, [node], snapshot=snapshot,
                   lead=progress.lead())
    if snapshot:
        progress.snapshots.add(progress.direction)
    progress.set(node, OUT)
    save(progress)


def _budget_problems(drv, cluster, node):
    # Checked first: kubectl drain would only wait out its timeout on a
    # budget that allows no disruption.
    client = drv.kubectl_client(cluster, exclude=[node])
    if not client.node_exists(node):
        return []
    blockers = gates.drain_blockers(client.pods(), client.budgets(), [node])
    return gates.blocker_lines(blockers, [node])


def bring_back(drv, cluster, progress, node, save, vim_name, vims):
    """After Tacker replaced *node*'s VM: join it again as the same node
    (the heal's second half), then :func:`gate`.

    A node Heat replaced while still in the cluster (never taken out:
    nothing should do that) is removed first, as a dead one.

    :raises UpgradeGateClosed: the gate failed; the record says the
        node is still out.
    """
    state = progress.state(node)
    if state != OUT:
        if not (progress.direction == FORWARD and state == PENDING):
            drv.step('rolling replacement: %s is %s already', node, state)
            return
        drv.warn('%s was replaced while in the cluster: removing it '
                 'before it joins again', node)
        _heal_begin(drv, cluster, progress, node, save)
    lcm.heal_finish(drv, cluster, [node], vim_name, vims)
    gate(drv, cluster, node, progress)
    progress.set(node, done_state(progress.direction))
    save(progress)


def gate(drv, cluster, node, progress):
    """*node* Ready and schedulable, the API ready through the load
    balancer and (a control-plane node) etcd healthy with every member,
    polled up to ``rolling_gate_timeout``.

    :raises UpgradeGateClosed: naming every problem and the progress.
    """
    if lcm.planning(drv):
        return
    client = drv.kubectl_client(cluster)
    server = drv.discovery_server(cluster)

    # A gateway is no Kubernetes node: the API through it is its check.
    k8s = [n.name for n in cluster.k8s_nodes if n.name == node]

    def probe():
        problems = gates.node_problems(client.nodes(), k8s) if k8s else []
        ready, why = client.api_ready(server)
        if not ready:
            problems.append('the API is not ready through %s: %s'
                            % (server, why))
        if node in _masters(cluster):
            problems += gates.etcd_problems(
                _masters(cluster), *day2.etcd_state(drv, client))
        return not problems, problems
    ok, problems = kubectl.poll(
        probe, drv.conf.kubespray_mgmt.rolling_gate_timeout,
        kubectl.KubectlSettings.from_conf(drv.conf))
    if not ok:
        gates.refuse('the check after %s rejoined' % node, problems,
                     _advice(progress))
