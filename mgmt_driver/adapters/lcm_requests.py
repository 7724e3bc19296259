"""SOL003 request bodies as ``kubespray-mgmt params check`` meets them.

Not in the design's layout: the driver itself is handed each request by
Tacker, which knows its kind, but a user checking a file offline has only
the body.  This module tells the kind from the body's shape (or is told
it) and checks the ``additionalParams`` the way the driver will read
them: an instantiate request in full, a scale, heal or terminate request
as overrides laid over the instantiated parameters
(:func:`mgmt_driver.model.merging.parse_for_operation`), a modify request (the
PATCH body, v1 and v2 alike) by the metadata keys the driver reads
(:func:`mgmt_driver.operations.upgrade.check_metadata`).

Without the instantiated parameters, the overrides are laid over a
complete placeholder instantiation, so every override is still checked in
full (unknown keys, types, values); what the real instantiation holds
cannot be checked then.
"""

import copy
import dataclasses

from mgmt_driver.model import core
from mgmt_driver.model import merging
from mgmt_driver.model import params
from mgmt_driver.model import validation
from mgmt_driver.operations import upgrade

INSTANTIATE = 'instantiate'
SCALE = 'scale'
HEAL = 'heal'
TERMINATE = 'terminate'
MODIFY = 'modify'
KINDS = (INSTANTIATE, SCALE, HEAL, TERMINATE, MODIFY)
#: A PATCH body's metadata field (VnfInfoModificationRequest, v1 and v2).
METADATA = 'metadata'

#: Fields only one kind of SOL003 request body has (the others are
#: optional or shared), in the order they are looked for.
_SHAPES = ((SCALE, ('type', 'aspectId', 'numberOfSteps')),
           (HEAL, ('vnfcInstanceId', 'cause', 'healScript')),
           (TERMINATE, ('terminationType', 'gracefulTerminationTimeout')),
           (INSTANTIATE, ('flavourId', 'instantiationLevelId')),
           # After instantiate: an InstantiateVnfRequest may have
           # vimConnectionInfo and extensions too, never these.
           (MODIFY, (METADATA, 'vnfInstanceName', 'vnfInstanceDescription',
                     'vnfdId', 'vnfPkgId', 'vnfcInfoModifications',
                     # v2's instantiate may carry it too, after flavourId
                     'vnfConfigurableProperties')))
_SCALE_TYPES = ('SCALE_OUT', 'SCALE_IN')

_LOGIN = {'username': 'placeholder', 'password': 'placeholder'}
#: A complete, valid instantiation that overrides are checked against
#: when the real one is not given.
_PLACEHOLDER = {core.ROOT: {
    'master_node': dict(_LOGIN),
    'worker_node': dict(_LOGIN),
    'ansible': dict(_LOGIN, ip_address='192.0.2.1',
                    kubespray_root_path='/placeholder/kubespray',
                    transferring_inventory_path='/placeholder/inventory'),
    'external_lb_param': {'ssh_username': 'placeholder',
                          'ssh_password': 'placeholder'},
}}


@dataclasses.dataclass
class Checked:
    """The outcome of :func:`check` for a valid request."""

    kind: str
    spec: object            # the ClusterSpec that applies (None: modify)
    overrides: list         # sections a non-instantiate request replaces
    merged: bool            # overrides checked merged into the real
                            # instantiation (--instantiated)
    metadata: object = None  # a modify's upgrade.MetadataRequest
    other_keys: tuple = ()   # a modify's metadata keys left to Tacker
    warnings: list = dataclasses.field(default_factory=list)  # see check


def detect_kind(body):
    """The kind of SOL003 request *body* is, from its fields.

    A mapping without any request field (bare ``additionalParams``) is
    taken as an instantiation.
    """
    if isinstance(body, dict):
        for kind, fields in _SHAPES:
            if any(field in body for field in fields):
                return kind
    return INSTANTIATE


def additional_params(document):
    """``additionalParams`` of a whole request body, or *document* itself."""
    if isinstance(document, dict) and 'additionalParams' in document:
        return document['additionalParams']
    if isinstance(document, dict) and detect_kind(document) != INSTANTIATE:
        return {}  # a scale/heal/terminate body without overrides
    return document


def check(document, kind=None, instantiated=None, default_key_file=None):
    """Check a request as the driver will read it.

    :param document: a whole request body or its ``additionalParams``.
    :param kind: one of :data:`KINDS`; default: :func:`detect_kind`.
    :param instantiated: the instantiation's body or ``additionalParams``
        (for the other kinds), or None for the placeholder.
    :param default_key_file: as :func:`mgmt_driver.model.params.parse_params`.
    :returns: a :class:`Checked`.
    :raises ParamsNotFound, ParamsInvalid: every problem at once.
    """
    kind = kind or detect_kind(document)
    problems = validation.Problems()
    if kind == SCALE:
        _check_scale_type(problems, document)
    with problems.gathered():
        checked = _check_kind(document, kind, instantiated, default_key_file)
    problems.raise_if_any()
    checked.warnings = placeholder_warnings(document)
    return checked


#: How the samples mark a value the operator must give (VIM and network
#: UUIDs): Tacker cannot tell it from a real one, and fails late.
PLACEHOLDER_PREFIX = 'REPLACE-WITH-'
#: Placeholders named one by one; more are counted.
PLACEHOLDERS_SHOWN = 20


def placeholder_warnings(document):
    """One warning per string value of *document* (the whole body, not
    only ``additionalParams``) that is still a sample's placeholder, in
    document order; the value is not repeated (only its path)."""
    paths = placeholder_paths(document)
    warnings = ['%s: still a sample placeholder (%s...): replace it before '
                'sending the request' % (path, PLACEHOLDER_PREFIX)
                for path in paths[:PLACEHOLDERS_SHOWN]]
    if len(paths) > PLACEHOLDERS_SHOWN:
        warnings.append('and %d more placeholder(s)'
                        % (len(paths) - PLACEHOLDERS_SHOWN))
    return warnings


def placeholder_paths(document):
    """Paths (``a.b[0].c``) of the placeholder strings in *document*.

    One pass with an explicit stack: a request nested past Python's
    recursion limit is walked as any other.
    """
    found, stack = [], [('', document)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            stack += [('%s.%s' % (path, key) if path else str(key), item)
                      for key, item in reversed(value.items())]
        elif isinstance(value, list):
            stack += [('%s[%d]' % (path, index), item)
                      for index, item in reversed(list(enumerate(value)))]
        elif isinstance(value, str) and value.startswith(PLACEHOLDER_PREFIX):
            found.append(path)
    return found


def _check_kind(document, kind, instantiated, default_key_file):
    if kind == MODIFY:
        return _check_modify(document)
    if kind == INSTANTIATE:
        spec = params.parse_params(additional_params(document),
                                   default_key_file=default_key_file)
        return Checked(kind, spec, [], False)  # nothing to merge
    return _check_overrides(document, kind, instantiated, default_key_file)


def _check_overrides(document, kind, instantiated, default_key_file):
    operation = additional_params(document)
    base = _placeholder(operation) if instantiated is None else \
        additional_params(instantiated)
    spec = merging.parse_for_operation(
        base, operation, kind, default_key_file=default_key_file,
        need_cp_names=instantiated is not None)
    return Checked(kind, spec, _overridden(operation),
                   instantiated is not None)


def _placeholder(operation):
    """The placeholder instantiation, with an empty pool for each pool the
    *operation* overrides (its keys are checked, not its existence)."""
    base = copy.deepcopy(_PLACEHOLDER)
    overrides = operation.get(core.ROOT) if isinstance(operation, dict) \
        else None
    pools = overrides.get('node_pools') if isinstance(overrides, dict) \
        else None
    if isinstance(pools, dict):
        base[core.ROOT]['node_pools'] = {name: {} for name in pools}
    return base


def _check_modify(document):
    """A PATCH body: the metadata keys the driver reads, the way its
    hooks check them; the body's other fields are Tacker's."""
    metadata = document.get(METADATA) if isinstance(document, dict) \
        else document
    wanted = upgrade.check_metadata({} if metadata is None else metadata,
                                    METADATA)
    known = set(upgrade.METADATA_KEYS)
    return Checked(MODIFY, None, [], False, wanted, tuple(sorted(
        key for key in (metadata or {}) if key not in known)))


def _overridden(operation):
    overrides = (operation or {}).get(core.ROOT) \
        if isinstance(operation, dict) else None
    return sorted(overrides) if isinstance(overrides, dict) else []


def _check_scale_type(problems, document):
    if isinstance(document, dict) and 'type' in document and \
            document['type'] not in _SCALE_TYPES:  # else bare params
        problems.invalid('type', 'a scale request needs %s'
                         % ' or '.join(_SCALE_TYPES))


def describe(checked):
    """One line for a valid request, without any secret."""
    if checked.kind == MODIFY:
        return _describe_modify(checked)
    if checked.kind == INSTANTIATE:
        return core.describe(checked.spec)
    overrides = 'overrides %s' % ', '.join(checked.overrides) \
        if checked.overrides else 'no override (the instantiated ' \
        'parameters apply)'
    if not checked.merged:
        return 'valid %s request: %s; checked over a placeholder ' \
               'instantiation (--instantiated FILE checks the merge)' % (
                   checked.kind, overrides)
    merged = core.describe(checked.spec).split(': ', 1)[1]
    return 'valid %s request: %s; with the instantiation: %s' % (
        checked.kind, overrides, merged)


def _describe_modify(checked):
    wanted = checked.metadata
    done = []
    if wanted.etcd_snapshot is not None:
        done.append('takes the etcd snapshot %s (once)' % wanted.etcd_snapshot)
    if wanted.relabel is not None:
        done.append('relabels %s' % ', '.join(
            list(wanted.relabel.nodes) +
            ['pool %s' % pool for pool in wanted.relabel.pools]))
    if wanted.renew is not None:
        done.append('renews the control-plane certificates (request %s)'
                    % wanted.renew)
    if wanted.kube_version is not None:
        done.append('upgrades Kubernetes to %s' % upgrade.version_text(
            wanted.kube_version) + (
            ', workers in batches of %s' % wanted.serial
            if wanted.serial is not None else ''))
    done = '; '.join(done) or 'no %s: runs no playbook' % wanted.field(
        upgrade.METADATA_VERSION)
    others = ', '.join(checked.other_keys) or 'none'
    return 'valid modify request: %s; other metadata keys (left to ' \
           'Tacker): %s' % (done, others)
