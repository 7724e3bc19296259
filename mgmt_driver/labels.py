"""Each node's labels and taints: day-2 changes, and their record.

A node gets its labels and taints from the parameters when it first
appears in the inventory (:meth:`mgmt_driver.params.ClusterSpec.
node_settings`: its role, its node pool, a scale request's overrides).
From then on the driver keeps what the node has in the workspace file
:data:`RECORD_FILE` and renders the inventory's ``node_labels`` and
``node_taints`` from it: kubespray applies both again on every play that
reaches the node (``kubectl label``/``taint --overwrite``), so rendering
them from the parameters would undo a relabel, or a scale request's
values, at the next upgrade.  A relabel changes the record first, then
the node; a healed node joins again with its record.

The record is read back from the Ansible server, so :func:`parse_record`
trusts nothing in it: every name, label and taint is checked as a
request's are, in one linear pass.
"""

import dataclasses

import yaml

from mgmt_driver import autoheal
from mgmt_driver import exceptions
from mgmt_driver import nodes
from mgmt_driver import params
from mgmt_driver import safeyaml

RECORD_FILE = 'node-settings.yaml'

#: Most nodes a record may hold (far above any cluster's size).
MAX_NODES = 10000

_NODE_KEYS = ('labels', 'taints')


def apply_change(settings, labels=(), taints=()):
    """*settings* changed as ``kubectl label``/``taint`` would change a
    node.

    :param settings: a :class:`mgmt_driver.params.NodeSettings`.
    :param labels: ``(key, value)`` pairs; a None value removes the key
        (``key-``).
    :param taints: ``key=value:Effect`` strings set (one of the same key
        and effect is replaced); ``key:Effect-`` removes that taint and
        ``key-`` every taint of that key.
    :returns: a new :class:`~mgmt_driver.params.NodeSettings`.
    """
    label_map = settings.label_map
    for key, value in labels:
        if value is None:
            label_map.pop(key, None)
        else:
            label_map[key] = value
    return params.NodeSettings(tuple(sorted(label_map.items())),
                               _changed_taints(settings.taints, taints))


def _changed_taints(present, changes):
    """*present* after *changes* (as :func:`apply_change` takes them).

    One pass from the last change back: a taint is kept when no later
    change sets its key and effect or removes it; the result is the one
    of filtering the list at each change, in linear time.
    """
    slots_gone, keys_gone, added = set(), set(), []

    def kept(slot):
        return slot not in slots_gone and slot[0] not in keys_gone
    for change in reversed(changes):
        if not change.endswith('-'):
            slot = params.taint_slot(change)
            if kept(slot):
                added.append(change)
            slots_gone.add(slot)
        elif ':' in change:
            slots_gone.add(params.taint_slot(change[:-1]))
        else:
            keys_gone.add(change[:-1])
    return tuple([t for t in present if kept(params.taint_slot(t))] +
                 added[::-1])


def labels_to_send(labels, present):
    """What of *labels* (as :func:`apply_change` takes them) to give
    ``kubectl label``: what would change *present* (the node's labels,
    a dict), so a change made already costs no command."""
    return [(key, value) for key, value in labels
            if (key in present if value is None
                else present.get(key) != value)]


def taints_to_send(taints, present):
    """What of *taints* (as :func:`apply_change` takes them) to give
    ``kubectl taint``: the taints *present* (the node's
    ``key=value:Effect`` strings) lacks, and the removals of taints it
    has (kubectl fails to remove a taint the node does not have)."""
    present = set(present)
    slots = {params.taint_slot(t) for t in present}
    keys = {key for key, _ in slots}
    return [taint for taint in taints
            if (_removes(taint[:-1], slots, keys)
                if taint.endswith('-') else taint not in present)]


def _removes(removal, slots, keys):
    """Whether the removal ``key:Effect`` or ``key`` matches one of
    *slots* (``(key, effect)`` pairs) or *keys*."""
    if ':' in removal:
        return params.taint_slot(removal) in slots
    return removal in keys


#: The ``vnf_metadata`` (v1) or ``metadata`` (v2) keys of a relabel by
#: PATCH: strings, as ``kubespray-mgmt run relabel``'s options.
METADATA_NODES = 'relabel_nodes'
METADATA_POOLS = 'relabel_pools'
METADATA_LABELS = 'relabel_labels'
METADATA_TAINTS = 'relabel_taints'
#: Longest value of one of them (a few hundred nodes, or changes).
MAX_METADATA_TEXT = 65536


@dataclasses.dataclass(frozen=True)
class Relabel:
    """A relabel asked for by metadata: node names, pool names (every
    node of the pools), and the changes as :func:`apply_change` takes
    them."""

    nodes: tuple = ()
    labels: tuple = ()
    taints: tuple = ()
    pools: tuple = ()


def relabel_from_metadata(metadata, prefix):
    """The relabel *metadata* asks for, checked.

    :param metadata: the instance's metadata (a dict).
    :param prefix: ``'vnf_metadata'`` or ``'metadata'``, for messages.
    :returns: a :class:`Relabel`, or None when *metadata* has none of
        the keys.
    :raises ParamsInvalid: a value is not a string, a node name or
        label or taint is malformed, or nodes or changes are missing;
        every problem is named.
    """
    given = {key: metadata.get(key) for key in (
        METADATA_NODES, METADATA_POOLS, METADATA_LABELS, METADATA_TAINTS)
        if metadata.get(key) is not None}
    if not given:
        return None
    problems = ['%s.%s: must be a string (comma-separated), not %s' % (
        prefix, key, type(value).__name__)
        for key, value in sorted(given.items())
        if not isinstance(value, str)]
    problems += ['%s.%s: longer than %d characters' % (
        prefix, key, MAX_METADATA_TEXT)
        for key, value in sorted(given.items())
        if isinstance(value, str) and len(value) > MAX_METADATA_TEXT]
    if problems:
        raise exceptions.ParamsInvalid(problems)
    names, pools, problems = {}, {}, []
    for key, found in ((METADATA_NODES, names), (METADATA_POOLS, pools)):
        for name in given.get(key, '').split(','):
            if name and not nodes.is_node_name(name):
                problems.append('%s.%s: %s is not a %s name' % (
                    prefix, key, params.show(name), key.split('_')[1][:-1]))
            elif name:
                found[name] = True
    if not names and not pools:
        problems.append('%s.%s, %s.%s: missing (which nodes to relabel?)'
                        % (prefix, METADATA_NODES, prefix, METADATA_POOLS))
    changes = {}
    for key, parse in ((METADATA_LABELS, params.parse_label_list),
                       (METADATA_TAINTS, params.parse_taint_list)):
        try:
            changes[key] = parse(given.get(key), '%s.%s' % (prefix, key),
                                 removals=True)
        except exceptions.ParamsInvalid as exc:
            problems += exc.problems
    try:
        # The driver's own labels (mgmt_driver.autoheal).
        autoheal.check_relabel(changes.get(METADATA_LABELS) or (),
                               '%s.%s' % (prefix, METADATA_LABELS))
    except exceptions.ParamsInvalid as exc:
        problems += exc.problems
    if not problems and not any(changes.values()):
        problems.append('%s.%s, %s.%s: missing (what to change?)' % (
            prefix, METADATA_LABELS, prefix, METADATA_TAINTS))
    if problems:
        raise exceptions.ParamsInvalid(problems)
    return Relabel(tuple(names), changes[METADATA_LABELS],
                   changes[METADATA_TAINTS], tuple(pools))


def pool_members(spec, cluster, pools, field):
    """Names of *cluster*'s Kubernetes nodes in the node pools *pools*.

    :param field: where *pools* came from, for messages.
    :raises ParamsInvalid: a name is not in ``node_pools``.
    """
    if not pools:
        return []
    unknown = [name for name in pools if spec.pool(name) is None]
    if unknown:
        raise exceptions.ParamsInvalid(['%s: %s not in %s.node_pools (%s)' % (
            field, ', '.join(unknown), params.ROOT, ', '.join(
                p.name for p in spec.node_pools) or 'none')])
    wanted = set(pools)
    return [node.name for node in cluster.k8s_nodes
            if getattr(spec.pool_of(node), 'name', None) in wanted]


def render_record(settings):
    """The text of :data:`RECORD_FILE`.

    :param settings: ``{node name: NodeSettings}``.
    """
    doc = {name: {'labels': settings[name].label_map,
                  'taints': list(settings[name].taints)}
           for name in sorted(settings)}
    return yaml.safe_dump({'nodes': doc}, default_flow_style=False,
                          sort_keys=True)


def parse_record(text):
    """Read :data:`RECORD_FILE` back.

    :param text: its text, or None when there is none.
    :returns: ``{node name: NodeSettings}`` (empty for no file).
    :raises ValueError: not the document :func:`render_record` writes;
        the message names the key path, never a value.
    """
    if not text:
        return {}
    try:
        doc = safeyaml.load(text)
    except yaml.YAMLError as exc:
        raise ValueError('not valid YAML' + safeyaml.describe(exc))
    nodes = doc.get('nodes') if isinstance(doc, dict) else None
    if not isinstance(nodes, dict) or len(doc) != 1:
        raise ValueError('must be a mapping with the one key "nodes"')
    if len(nodes) > MAX_NODES:
        raise ValueError('nodes: more than %d entries' % MAX_NODES)
    return {_node_name(name): _node_entry(name, entry)
            for name, entry in nodes.items()}


def _node_name(name):
    if not nodes.is_node_name(name):
        raise ValueError('nodes: a key is not a node name')
    return name


def _node_entry(name, entry):
    where = 'nodes.%s' % name
    if not isinstance(entry, dict) or set(entry) != set(_NODE_KEYS):
        raise ValueError('%s: must be a mapping of %s' % (
            where, ' and '.join(_NODE_KEYS)))
    labels, taints = entry['labels'], entry['taints']
    if not isinstance(labels, dict) or any(
            params.label_problem(k, v) for k, v in labels.items()):
        raise ValueError('%s.labels: not a mapping of valid node labels'
                         % where)
    if not isinstance(taints, list) or any(
            params.taint_problem(t) for t in taints):
        raise ValueError('%s.taints: not a list of valid taints' % where)
    return params.NodeSettings(tuple(sorted(labels.items())),
                               tuple(taints))
