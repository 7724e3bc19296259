"""Each node's labels and taints: day-2 changes, and their record.

A node gets its labels and taints from the parameters when it first
appears in the inventory (:meth:`mgmt_driver.model.core.ClusterSpec.
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

The grammar lives here too, for every place a label or taint comes
from: :func:`label_problem` and :func:`taint_problem` (what Kubernetes
and the kubelet accept), the request's ``labels`` and ``taints``
(:func:`read_labels`, :func:`read_taints`), the ``k=v,...`` lists of the
command line and of metadata (:func:`parse_label_list`,
:func:`parse_taint_list`), and the identity labels the driver sets
itself, which no relabel may touch (:func:`check_relabel`).
"""

import dataclasses
import re

import yaml

from mgmt_driver.common import blockyaml
from mgmt_driver.common import exceptions
from mgmt_driver.common import safeyaml
from mgmt_driver.common import untrusted
from mgmt_driver.model import core
from mgmt_driver.model import validation

RECORD_FILE = 'node-settings.yaml'

#: Most nodes a record may hold (far above any cluster's size).
MAX_NODES = 10000

_NODE_KEYS = ('labels', 'taints')

#: The labels the driver gives every node it joins, naming its VNF
#: instance and VNFC (vnfcInfo id): auto-heal alerts carry them
#: (:mod:`mgmt_driver.operations.autoheal`), so no relabel may change them.
LABEL_INSTANCE = 'kubespray-mgmt/vnf-instance-id'
LABEL_VNFC = 'kubespray-mgmt/vnfc-info-id'
IDENTITY_LABELS = (LABEL_INSTANCE, LABEL_VNFC)

_LABEL_NAME_RE = re.compile(r'[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?')
# The kubelet may set only these labels in the kubernetes.io and k8s.io
# namespaces (NodeRestriction); any other makes it refuse to start.
_KUBELET_LABELS = frozenset((
    'kubernetes.io/hostname', 'kubernetes.io/os', 'kubernetes.io/arch',
    'beta.kubernetes.io/instance-type', 'beta.kubernetes.io/os',
    'beta.kubernetes.io/arch', 'failure-domain.beta.kubernetes.io/zone',
    'failure-domain.beta.kubernetes.io/region',
    'topology.kubernetes.io/zone', 'topology.kubernetes.io/region'))
_KUBELET_PREFIXES = ('kubelet.kubernetes.io', 'node.kubernetes.io')
_TAINT_EFFECTS = ('NoSchedule', 'PreferNoSchedule', 'NoExecute')


def label_problem(key, value):
    """What is wrong with one node label, or None."""
    if not isinstance(key, str) or not isinstance(value, str):
        return 'keys and values must be strings (quote numbers)'
    prefix, slash, name = key.rpartition('/')
    problem = _prefix_problem(prefix, slash) or _name_problem(name, value)
    if problem:
        return problem
    if prefix.endswith(('kubernetes.io', 'k8s.io')) and \
            key not in _KUBELET_LABELS and \
            not prefix.endswith(_KUBELET_PREFIXES):
        return ('the kubelet may not set labels in the kubernetes.io or '
                'k8s.io namespaces (except node.kubernetes.io/ and '
                'kubelet.kubernetes.io/); it would refuse to start')
    return None


def _prefix_problem(prefix, slash):
    """What is wrong with a label key's prefix (before *slash*), or None."""
    if slash and not prefix:
        return 'prefix before "/" is empty'
    if prefix and (len(prefix) > 253 or not all(
            validation.is_dns_label(part) for part in prefix.split('.'))):
        return 'prefix %s is not a DNS subdomain' % validation.show(prefix)
    return None


def _name_problem(name, value):
    """What is wrong with a label's name (its key after the prefix) or
    value, or None."""
    if not _LABEL_NAME_RE.fullmatch(name):
        return 'name %s is not a label name (1-63 of "A-Za-z0-9-_.", ' \
               'alphanumeric at both ends)' % validation.show(name)
    if value and not _LABEL_NAME_RE.fullmatch(value):
        return 'value %s is not a label value (0-63 of "A-Za-z0-9-_.", ' \
               'alphanumeric at both ends)' % validation.show(value)
    return None


def read_labels(sec, key):
    """The labels mapping *key* of the request section *sec* (a
    :class:`~mgmt_driver.model.validation.Section`), checked entry by entry.

    :returns: sorted ``(key, value)`` pairs of the valid entries.
    """
    data = sec.value(key, dict)
    if data is None:
        return ()
    labels = []
    for name, value in data.items():
        problem = label_problem(name, value)
        if problem:
            sec.problems.invalid(
                sec.at('%s.%s' % (key, validation.key_text(name))), problem)
        else:
            labels.append((name, value))
    return tuple(sorted(labels))


def taint_problem(text):
    """What is wrong with one ``key=value:Effect`` taint, or None."""
    if not isinstance(text, str):
        return 'must be a string "key=value:Effect", not %s' % (
            validation.type_name(text))
    pair, colon, effect = text.rpartition(':')
    key, _, value = pair.partition('=')
    if not colon or effect not in _TAINT_EFFECTS:
        return '%s: the effect after ":" must be one of %s' % (
            validation.show(text), ', '.join(_TAINT_EFFECTS))
    problem = label_problem(key, value)
    if problem and not problem.startswith('the kubelet'):
        return '%s: %s' % (validation.show(text),
                           problem.replace('label', 'taint'))
    return None


def parse_label_list(text, field, removals=False):
    """Node labels from ``k=v,k2=v2`` (a command-line option).

    :param removals: accept ``key-`` too (remove the label), returned
        as ``(key, None)``.
    :returns: sorted ``(key, value)`` pairs, checked as ``labels`` are.
    :raises ParamsInvalid: every bad entry, naming *field*.
    """
    labels, problems = {}, validation.Problems()
    for entry in _list_entries(text):
        key, value, problem = _label_entry(entry, removals)
        if problem:
            problems.invalid(field, '%s: %s' % (validation.show(entry),
                                                problem))
        else:
            labels[key] = value
    problems.raise_if_any()
    return tuple(sorted(labels.items()))


def _label_entry(entry, removals):
    """``(key, value, problem)`` of one entry of :func:`parse_label_list`:
    value None for a removal, problem None for a valid entry."""
    key, equals, value = entry.partition('=')
    if removals and not equals and key.endswith('-'):
        return key[:-1], None, label_problem(key[:-1], '')
    problem = None if equals else 'must be key=value' + (
        ' or key-' if removals else '')
    return key, value, problem or label_problem(key, value)


def parse_taint_list(text, field, removals=False):
    """Node taints from ``k=v:Effect,...`` (a command-line option).

    :param removals: accept ``key:Effect-`` (remove that taint) and
        ``key-`` (every taint of the key) too, returned as given.
    :returns: the taints, checked as ``taints`` are, repeats dropped.
    :raises ParamsInvalid: every bad entry, naming *field*.
    """
    taints, problems = {}, validation.Problems()
    for entry in _list_entries(text):
        if removals and entry.endswith('-'):
            problem = _taint_removal_problem(entry[:-1])
        else:
            problem = taint_problem(entry)
        if problem:
            problems.invalid(field, problem)
        else:
            taints.setdefault(entry)
    problems.raise_if_any()
    return tuple(taints)


def _taint_removal_problem(text):
    if ':' in text:
        return taint_problem(text)
    problem = label_problem(text, '')
    if problem and not problem.startswith('the kubelet'):
        return '%s: %s' % (validation.show(text + '-'),
                           problem.replace('label', 'taint'))
    return None


def _list_entries(text):
    return [entry for entry in (text or '').split(',') if entry]


def read_taints(sec, key):
    """The taints list *key* of the request section *sec*, checked.

    :returns: the valid ``key=value:Effect`` strings, repeats dropped.
    """
    data = sec.value(key, list)
    taints = {}  # a dict: repeats dropped, order kept, linear time
    for i, text in enumerate(data or ()):
        problem = taint_problem(text)
        if problem:
            sec.problems.invalid(sec.at('%s[%d]' % (key, i)), problem)
        else:
            taints.setdefault(text)
    return tuple(taints)


def apply_change(settings, labels=(), taints=()):
    """*settings* changed as ``kubectl label``/``taint`` would change a
    node.

    :param settings: a :class:`mgmt_driver.model.core.NodeSettings`.
    :param labels: ``(key, value)`` pairs; a None value removes the key
        (``key-``).
    :param taints: ``key=value:Effect`` strings set (one of the same key
        and effect is replaced); ``key:Effect-`` removes that taint and
        ``key-`` every taint of that key.
    :returns: a new :class:`~mgmt_driver.model.core.NodeSettings`.
    """
    label_map = settings.label_map
    for key, value in labels:
        if value is None:
            label_map.pop(key, None)
        else:
            label_map[key] = value
    return core.NodeSettings(tuple(sorted(label_map.items())),
                             _changed_taints(settings.taints, taints))


def _changed_taints(present, changes):
    """*present* after *changes* (as :func:`apply_change` takes them).

    One pass from the last change back: a taint is kept when no later
    change sets its key and effect or removes it; the result is the one
    of filtering the list at each change, in linear time.
    """
    slots_gone, keys_gone, added = set(), set(), []
    for change in reversed(changes):
        if not change.endswith('-'):
            slot = core.taint_slot(change)
            if _kept(slot, slots_gone, keys_gone):
                added.append(change)
            slots_gone.add(slot)
        elif ':' in change:
            slots_gone.add(core.taint_slot(change[:-1]))
        else:
            keys_gone.add(change[:-1])
    return tuple([t for t in present
                  if _kept(core.taint_slot(t), slots_gone, keys_gone)] +
                 added[::-1])


def _kept(slot, slots_gone, keys_gone):
    """Whether the taint of *slot* ``(key, effect)`` survives the later
    changes: none set or removed its slot, none removed its key."""
    return slot not in slots_gone and slot[0] not in keys_gone


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
    slots = {core.taint_slot(t) for t in present}
    keys = {key for key, _ in slots}
    return [taint for taint in taints
            if (_removes(taint[:-1], slots, keys)
                if taint.endswith('-') else taint not in present)]


def _removes(removal, slots, keys):
    """Whether the removal ``key:Effect`` or ``key`` matches one of
    *slots* (``(key, effect)`` pairs) or *keys*."""
    if ':' in removal:
        return core.taint_slot(removal) in slots
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
    given = _relabel_keys(metadata)
    if not given:
        return None
    _check_metadata_texts(given, prefix)
    problems = validation.Problems()
    names, pools = _relabel_targets(problems, given, prefix)
    changes = _relabel_changes(problems, given, prefix)
    problems.raise_if_any()
    return Relabel(tuple(names), changes[METADATA_LABELS],
                   changes[METADATA_TAINTS], tuple(pools))


def _relabel_keys(metadata):
    """``{key: value}`` of the relabel keys *metadata* gives (not null)."""
    return {key: metadata.get(key) for key in (
        METADATA_NODES, METADATA_POOLS, METADATA_LABELS, METADATA_TAINTS)
        if metadata.get(key) is not None}


def _check_metadata_texts(given, prefix):
    """Each relabel key of the metadata is a string, not too long.

    :raises ParamsInvalid: naming each other one.
    """
    problems = validation.Problems()
    for key, value in sorted(given.items()):
        field = '%s.%s' % (prefix, key)
        if not isinstance(value, str):
            problems.invalid(field, 'must be a string (comma-separated), '
                             'not %s' % validation.type_name(value))
        elif len(value) > MAX_METADATA_TEXT:
            problems.invalid(field, 'longer than %d characters'
                             % MAX_METADATA_TEXT)
    problems.raise_if_any()


def _relabel_targets(problems, given, prefix):
    """The node names and pool names to relabel (dicts: order kept,
    repeats dropped), at least one of them."""
    names, pools = {}, {}
    for key, found in ((METADATA_NODES, names), (METADATA_POOLS, pools)):
        for name in given.get(key, '').split(','):
            if name and not validation.is_dns_label(name):
                problems.invalid('%s.%s' % (prefix, key), (
                    '%s is not a %s name' % (validation.show(name),
                                             key.split('_')[1][:-1])))
            elif name:
                found[name] = True
    if not names and not pools:
        problems.invalid('%s.%s, %s.%s' % (
            prefix, METADATA_NODES, prefix, METADATA_POOLS),
            'missing (which nodes to relabel?)')
    return names, pools


def _relabel_changes(problems, given, prefix):
    """``{key: changes}`` of the labels and taints keys, at least one
    change, and no identity label touched."""
    changes = {}
    for key, parse in ((METADATA_LABELS, parse_label_list),
                       (METADATA_TAINTS, parse_taint_list)):
        with problems.gathered():
            changes[key] = parse(given.get(key), '%s.%s' % (prefix, key),
                                 removals=True)
    with problems.gathered():
        check_relabel(changes.get(METADATA_LABELS) or (),
                      '%s.%s' % (prefix, METADATA_LABELS))
    if not problems and not any(changes.values()):
        problems.invalid('%s.%s, %s.%s' % (
            prefix, METADATA_LABELS, prefix, METADATA_TAINTS),
            'missing (what to change?)')
    return changes


def check_relabel(labels, field='labels'):
    """Refuse a relabel that sets or removes an identity label.

    :param labels: ``(key, value or None)`` pairs.
    :raises ParamsInvalid: naming *field* and the keys.
    """
    touched = sorted({key for key, _ in labels if key in IDENTITY_LABELS})
    if touched:
        raise exceptions.ParamsInvalid([
            '%s: %s set by the driver (they name the node\'s VNF instance '
            'and VNFC in auto-heal alerts); a relabel cannot change them'
            % (field, ', '.join(touched))])


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
            field, ', '.join(unknown), core.ROOT, ', '.join(
                p.name for p in spec.node_pools) or 'none')])
    wanted = set(pools)
    return [node.name for node in cluster.k8s_nodes
            if getattr(spec.pool_of(node), 'name', None) in wanted]


def render_record(settings):
    """The text of :data:`RECORD_FILE`.

    :param settings: ``{node name: NodeSettings}``.
    """
    # Built in sorted order: blockyaml writes it as safe_dump sorts it,
    # without PyYAML's representer (seconds for 5,000 nodes).
    doc = {'nodes': {
        name: {'labels': dict(sorted(settings[name].label_map.items())),
               'taints': list(settings[name].taints)}
        for name in sorted(settings)}}
    return blockyaml.dump(doc) or yaml.safe_dump(
        doc, default_flow_style=False, sort_keys=True)


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
        doc = untrusted.load_yaml(
            text, per_entry=untrusted.RECORD_TEXT_PER_ENTRY)
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
    if not validation.is_dns_label(name):
        raise ValueError('nodes: a key is not a node name')
    return name


def _node_entry(name, entry):
    where = 'nodes.%s' % name
    if not isinstance(entry, dict) or set(entry) != set(_NODE_KEYS):
        raise ValueError('%s: must be a mapping of %s' % (
            where, ' and '.join(_NODE_KEYS)))
    labels, taints = entry['labels'], entry['taints']
    if not isinstance(labels, dict) or any(
            label_problem(k, v) for k, v in labels.items()):
        raise ValueError('%s.labels: not a mapping of valid node labels'
                         % where)
    if not isinstance(taints, list) or any(
            taint_problem(t) for t in taints):
        raise ValueError('%s.taints: not a list of valid taints' % where)
    return core.NodeSettings(tuple(sorted(labels.items())),
                             tuple(taints))


def with_identity(settings, identity):
    """*settings* (a ``NodeSettings``) with the *identity* labels laid
    over them; identity labels that *identity* lacks are dropped (a
    node's old VNFC id must not outlive its VM)."""
    kept = {k: v for k, v in settings.labels
            if k not in IDENTITY_LABELS}
    kept.update(identity or ())
    return core.NodeSettings(tuple(sorted(kept.items())), settings.taints)
