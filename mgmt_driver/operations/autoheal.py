"""Self-healing through Tacker's own fault path: identity labels, the
guard rails of an automatic heal, and the Prometheus alert rules.

Tacker v2 heals a VNFC on its own when its Prometheus plugin
(``[prometheus_plugin] auto_healing``) receives a firing alert labelled
``receiver_type: tacker``, ``function_type: auto_heal``,
``vnf_instance_id`` and ``vnfc_info_id``, and the instance's
``vnfConfigurableProperties.isAutohealEnabled`` is true
(``tacker/sol_refactored/common/prometheus_plugin.py``:
``PrometheusPluginAutoHealing._alert``); the alerts of one instance are
packed for ``timer_interval`` seconds, then the conductor starts a HEAL
whose request is ``{'vnfcInstanceId': [...]}`` and nothing else
(``conductor/prometheus_plugin_driver.py``: ``_trigger_heal``; the
server notification path, ``server_notification_driver.py``:
``request_heal``, sends the same request).  ``vnfc_info_id`` is the id
of an ``instantiatedVnfInfo.vnfcInfo`` entry (by default
``<VDU id>-<vnfcResourceInfo id>``, a new one for a re-created VM).

So that an alert over Kubernetes' own node conditions names the VNFC,
every Kubernetes node of a v2 instance carries two labels,
:data:`~mgmt_driver.model.labels.LABEL_INSTANCE` and
:data:`~mgmt_driver.model.labels.LABEL_VNFC`, laid over its recorded
labels each time the inventory is written (:func:`with_identity`):
kubespray sets them when the node joins and again on every play, a
healed node gets its new VNFC's id, and a relabel may not touch them
(:func:`mgmt_driver.model.labels.check_relabel`).  :func:`render_rules`
writes the Prometheus rules that join kube-state-metrics'
``kube_node_status_condition`` with ``kube_node_labels`` to fill the
alert's labels.

An automatic heal (:func:`is_automatic`) is checked before anything
changes (:func:`check_heal`), as Cluster API's MachineHealthCheck
``maxUnhealthy``: refused when too large a share of the nodes is not
Ready (a partition), when it names more than one control-plane node,
when it would leave etcd without quorum, or when a named node is Ready
again.  A refusal fails ``heal_start``: Tacker records the operation as
FAILED_TEMP with the reason, before its infra driver re-creates any VM.
Requested heals are not checked.
"""

import math

import yaml

from mgmt_driver.common import exceptions
from mgmt_driver.common import untrusted
from mgmt_driver.model import labels
from mgmt_driver.model import validation

#: Tacker's alert label names (``prometheus_plugin_schemas.Alert``).
ALERT_INSTANCE = 'vnf_instance_id'
ALERT_VNFC = 'vnfc_info_id'

#: The request keys of Tacker's own auto-heal request.
AUTOMATIC_KEYS = frozenset(['vnfcInstanceId'])

#: Default ``for:`` of the alert: a node NotReady for less is left alone
#: (Magnum's Cluster API driver waits 5 minutes too).
DEFAULT_UNHEALTHY_FOR = '5m'


#: The guard rails of :func:`check_heal`, as ``AutoHealRefused.rule``.
RULE_PARTITION = 'unhealthy budget'
RULE_STALE = 'stale alert'
RULE_ONE_MASTER = 'one control-plane node at a time'
RULE_QUORUM = 'etcd quorum'
RULE_ONE_GATEWAY = 'one gateway at a time'
RULE_LAST_GATEWAY = 'never every gateway'


class AutoHealRefused(exceptions.MgmtDriverOtherError):
    """An automatic heal the guard rails refuse (nothing was changed).

    Its ``rule`` is the guard rail that refused: one of the ``RULE_``
    names below, for callers (and tests) that must not parse the text.
    """

    rule = None

    message = ('automatic heal refused, nothing was changed: %(reason)s. '
               'Look at the cluster; then heal by request (a heal request '
               'with a cause or additionalParams is not checked) or mark '
               'this operation failed')


# ------------------------------------------------------------ identity


def ksm_label(key):
    """The label name kube-state-metrics gives node label *key* in
    ``kube_node_labels`` (``label_`` and the key, every character other
    than a letter, digit or ``_`` made ``_``)."""
    return 'label_' + ''.join(c if c.isalnum() and c.isascii() or c == '_'
                              else '_' for c in key)


def identity_of(inst, server_by_name):
    """The identity labels of each node of a v2 instance.

    :param inst: the v2 instance dict (``instantiatedVnfInfo`` with
        ``vnfcResourceInfo`` and ``vnfcInfo``).
    :param server_by_name: ``{node name: server id}``.
    :returns: ``{node name: ((key, value), ...)}``; a node whose VNFC has
        no vnfcInfo entry, or whose ids are no label values, gets only
        what is valid (Tacker could not name it in an alert anyway).
    """
    info = (inst or {}).get('instantiatedVnfInfo') or {}
    resource_of_server = {
        (v.get('computeResource') or {}).get('resourceId'): v.get('id')
        for v in info.get('vnfcResourceInfo') or []}
    vnfc_of_resource = {i.get('vnfcResourceInfoId'): i.get('id')
                        for i in info.get('vnfcInfo') or []}
    result = {}
    for name, server in server_by_name.items():
        pairs = [(labels.LABEL_INSTANCE, inst.get('id')),
                 (labels.LABEL_VNFC, vnfc_of_resource.get(
                     resource_of_server.get(server)))]
        result[name] = tuple(
            (key, value) for key, value in pairs
            if isinstance(value, str) and value and
            labels.label_problem(key, value) is None)
    return result


# ------------------------------------------------------------ guard rails


def is_automatic(request):
    """Whether a v2 HEAL request is Tacker's automatic one: it names
    VNFCs and carries nothing else (no ``cause``, no
    ``additionalParams``, no ``healScript``)."""
    request = request or {}
    return bool(request.get('vnfcInstanceId')) and \
        set(request) <= AUTOMATIC_KEYS


def unhealthy_budget(total, percent):
    """Most nodes that may be unhealthy for an automatic heal to go on:
    *percent* of *total*, rounded down."""
    return math.floor(total * percent / 100)


def check_heal(cluster, ready, healed, max_unhealthy_percent):
    """The guard rails of an automatic heal (pure).

    :param cluster: the ``ClusterNodes`` (its masters are the etcd
        members: the inventory's ``etcd`` group).
    :param ready: ``{node name: Ready condition}`` as Kubernetes lists
        them (``'True'``, ``'False'``, ``'Unknown'``); a node of
        *cluster* missing from it is unhealthy.
    :param healed: the Kubernetes node names the heal re-creates.
    :param max_unhealthy_percent: the option of that name.
    :raises AutoHealRefused: naming the rule, the nodes and the numbers.
    """
    names = cluster.names
    unhealthy = [n for n in names if ready.get(n) != 'True']
    budget = unhealthy_budget(len(names), max_unhealthy_percent)
    if len(unhealthy) > budget:
        _refuse(RULE_PARTITION,
                '%d of %d Kubernetes nodes are not Ready (%s), more than '
                '%d%% ([kubespray_mgmt] auto_heal_max_unhealthy_percent '
                'allows %d): a partition or a cluster-wide fault is not '
                'healed by replacing VMs' % (
                    len(unhealthy), len(names), ', '.join(unhealthy),
                    max_unhealthy_percent, budget))
    healthy_named = [n for n in healed if ready.get(n) == 'True']
    if healthy_named:
        _refuse(RULE_STALE, '%s Ready again: the alert is stale' %
                ', '.join(healthy_named))
    _check_gateways(cluster, healed)
    masters = [n.name for n in cluster.masters]
    healed_masters = sorted(set(healed).intersection(masters))
    if len(healed_masters) > 1:
        _refuse(RULE_ONE_MASTER,
                'it would re-create %d control-plane nodes at once (%s); '
                'an automatic heal takes one at a time' % (
                    len(healed_masters), ', '.join(healed_masters)))
    quorum = len(masters) // 2 + 1
    left = [n for n in masters if ready.get(n) == 'True' and
            n not in healed_masters]
    if healed_masters and len(left) < quorum:
        _refuse(RULE_QUORUM,
                'etcd would be left with %d healthy member(s) of %d while '
                '%s is removed, below its quorum of %d' % (
                    len(left), len(masters), healed_masters[0], quorum))


def _check_gateways(cluster, healed):
    """The gateways' rails: one at a time, never all of them.

    Only what the conductor knows without SSH to a gateway goes in: how
    many gateways the cluster has (the instance's VMs) and which ones the
    heal names.  A gateway is no Kubernetes node: no Ready condition
    says whether it is dead, nor which one holds the VIP now
    (keepalived's state is on the VMs); so an automatic heal never
    re-creates the last gateway that is not itself being healed.
    """
    gateways = [n.name for n in cluster.gateways]
    named = sorted(set(healed).intersection(gateways))
    if len(named) > 1:
        _refuse(RULE_ONE_GATEWAY,
                'it would re-create %d gateways at once (%s); an automatic '
                'heal takes one at a time, so that the others keep serving '
                'the VIP' % (len(named), ', '.join(named)))
    if named and len(gateways) == len(named):
        _refuse(RULE_LAST_GATEWAY,
                'it would re-create %s, the only gateway of the cluster: '
                'the API address would have no gateway while it is '
                're-created, and the driver cannot tell without logging '
                'in whether it still serves' % named[0])


def refusal(rule, reason):
    """An :class:`AutoHealRefused` for guard rail *rule* (also the
    fleet's: :mod:`mgmt_driver.state.healfleet`)."""
    error = AutoHealRefused(reason=reason)
    error.rule = rule
    return error


def _refuse(rule, reason):
    raise refusal(rule, reason)


# ------------------------------------------------------------ Prometheus


def render_rules(unhealthy_for=DEFAULT_UNHEALTHY_FOR):
    """The Prometheus rule file for Tacker's auto-heal (text).

    One alert per node of a v2 instance whose Ready condition is not
    ``true`` for *unhealthy_for*: kube-state-metrics'
    ``kube_node_status_condition`` joined on ``node`` with
    ``kube_node_labels`` (which must export the identity labels:
    ``--metric-labels-allowlist=nodes=[...]``), the two ids copied into
    the labels Tacker reads.

    :param unhealthy_for: a Prometheus duration (``5m``, ``90s``).
    :raises ParamsInvalid: *unhealthy_for* is no duration.
    """
    _check_duration(unhealthy_for)
    instance = ksm_label(labels.LABEL_INSTANCE)
    vnfc = ksm_label(labels.LABEL_VNFC)
    joined = ('label_replace(label_replace(\n'
              '  max by (node, {i}, {v}) (kube_node_labels{{{v}!=""}}),\n'
              '  "{ai}", "$1", "{i}", "(.+)"),\n'
              '  "{av}", "$1", "{v}", "(.+)")').format(
        i=instance, v=vnfc, ai=ALERT_INSTANCE, av=ALERT_VNFC)
    expr = ('max by (node) (kube_node_status_condition{condition="Ready",'
            'status!="true"} == 1)\n'
            '* on (node) group_left (%s, %s)\n%s\n' % (
                ALERT_INSTANCE, ALERT_VNFC, joined))
    doc = {'groups': [{
        'name': 'kubespray-mgmt-autoheal',
        'rules': [{
            'alert': 'KubesprayMgmtNodeNotReady',
            'expr': expr,
            'for': unhealthy_for,
            'labels': {'receiver_type': 'tacker',
                       'function_type': 'auto_heal'},
            'annotations': {
                'summary': 'Kubernetes node {{ $labels.node }} of VNF '
                           'instance {{ $labels.vnf_instance_id }} is not '
                           'Ready',
                'description': 'Tacker heals VNFC {{ $labels.vnfc_info_id '
                               '}} (re-creates its VM) when the instance '
                               'has isAutohealEnabled.'}}]}]}
    return HEADER + yaml.dump(doc, Dumper=_BlockDumper,
                              default_flow_style=False, sort_keys=False,
                              width=1000)


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings as ``|`` blocks (the PromQL stays readable)."""


def _str(dumper, text):
    return dumper.represent_scalar('tag:yaml.org,2002:str', text,
                                   style='|' if '\n' in text else None)


_BlockDumper.add_representer(str, _str)


#: The rendered file's first lines: where an operator reads how to
#: render it for another duration (tests/unit/test_autoheal.py checks
#: that the page has that section).
HEADER = ('# Generated by mgmt_driver.operations.autoheal.render_rules(); '
          'doc/source/admin/\n# autoheal.rst, "Detection: Prometheus '
          'rules", says how to change the\n# unhealthy duration.\n')


def _check_duration(text):
    units = ('ms', 's', 'm', 'h', 'd', 'w', 'y')
    ok = isinstance(text, str) and any(
        text.endswith(u) and
        (untrusted.whole_number(text[:-len(u)], 12) or 0) > 0 for u in units)
    if not ok:
        raise exceptions.ParamsInvalid([
            'unhealthy_for: %s is not a Prometheus duration such as 5m '
            'or 90s' % validation.show(text)])
