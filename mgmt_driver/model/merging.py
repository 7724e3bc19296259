"""A scale or heal request's overrides, laid over the instantiation's.

Tacker keeps the ``additionalParams`` of the instantiation; a scale or
heal request may give some of its sections again
(:data:`OVERRIDABLE_SECTIONS`).  :func:`merge_operation_params` lays them
over the instantiated ones, and :func:`parse_for_operation` validates
the result as :func:`mgmt_driver.model.params.parse_params` does.
"""

import copy

from mgmt_driver.model import core
from mgmt_driver.model import params
from mgmt_driver.model import validation

#: Sections a scale or heal request may override, key by key.
OVERRIDABLE_SECTIONS = ('worker_node', 'external_lb_param', 'ansible',
                        'node_pools')
#: What a scale or heal request may change in an existing node pool.
OVERRIDABLE_POOL_KEYS = ('labels', 'taints')


def merge_operation_params(instantiated, operation, operation_name='scale',
                           max_size=None):
    """Lay a scale/heal request's overrides over the instantiated params.

    Only :data:`OVERRIDABLE_SECTIONS` may be overridden; within a section
    each given key replaces the instantiated one (a mapping value such as
    ``labels`` is replaced whole), other keys are kept.  ``node_pools`` is
    merged pool by pool: a request may give an existing pool other
    :data:`OVERRIDABLE_POOL_KEYS`, nothing else.

    :param instantiated: the ``additionalParams`` of the instantiation.
    :param operation: the operation request's ``additionalParams`` (None
        or without ``k8s_cluster_installation_param``: no override).
    :param operation_name: used in messages (``'scale'``, ``'heal'``).
    :param max_size: see :func:`~mgmt_driver.model.validation.check_bounds`.
    :returns: a new ``additionalParams`` dict; the inputs are unchanged.
    :raises ParamsInvalid: when the overrides are malformed, or either
        tree is too deep or too large to copy.
    """
    _check_both(instantiated, operation, max_size)
    return _merged(instantiated, operation, operation_name)


def _merged(instantiated, operation, operation_name):
    """A copy of *instantiated* with the overrides *operation* gives laid
    over it (see :func:`merge_operation_params`)."""
    merged = copy.deepcopy(instantiated) if isinstance(
        instantiated, dict) else instantiated
    overrides = (operation or {}).get(core.ROOT) if isinstance(
        operation, (dict, type(None))) else operation
    if overrides is None or not isinstance(merged, dict) or not isinstance(
            merged.get(core.ROOT), dict):
        return merged
    problems = validation.Problems()
    if not isinstance(overrides, dict):
        problems.invalid(core.ROOT, 'the %s request\'s value must be a '
                         'mapping, not %s' % (
                             operation_name, validation.type_name(overrides)))
    else:
        _merge_sections(problems, merged[core.ROOT], overrides,
                        operation_name)
    problems.raise_if_any()
    return merged


def _check_both(instantiated, operation, max_size):
    """Bounds of both trees, before anything copies them (recursively)."""
    problems = validation.Problems()
    for what, tree in (('instantiated', instantiated),
                       ('operation', operation)):
        if isinstance(tree, dict) and tree.get(core.ROOT) is not None:
            validation.check_bounds(
                problems, '%s (%s request)' % (core.ROOT, what),
                tree[core.ROOT], max_size)
    problems.raise_if_any()


def _merge_sections(problems, target, overrides, operation_name):
    for name, section in overrides.items():
        path = '%s.%s' % (core.ROOT, validation.key_text(name))
        if name not in OVERRIDABLE_SECTIONS:
            problems.invalid(path, 'cannot be changed by a %s request '
                             '(only %s)' % (operation_name,
                                            ', '.join(OVERRIDABLE_SECTIONS)))
        elif not isinstance(section, dict):
            problems.invalid(path, 'must be a mapping, not %s'
                             % validation.type_name(section))
        elif name == 'node_pools':
            _merge_pools(problems, path, target, section, operation_name)
        elif isinstance(target.get(name), dict):
            target[name].update(copy.deepcopy(section))
        else:
            target[name] = copy.deepcopy(section)


def _merge_pools(problems, path, target, overrides, operation_name):
    """``node_pools`` overrides: labels and taints of existing pools,
    pool by pool and key by key."""
    pools = target.get('node_pools')
    pools = pools if isinstance(pools, dict) else {}
    for name, changes in overrides.items():
        pool_path = '%s.%s' % (path, validation.key_text(name))
        if not isinstance(pools.get(name), dict):
            problems.invalid(pool_path, 'is not a pool of the instantiation; '
                             'a %s request may only change the labels and '
                             'taints of one' % operation_name)
        elif not isinstance(changes, dict):
            problems.invalid(pool_path, 'must be a mapping, not %s'
                             % validation.type_name(changes))
        else:
            _merge_pool(problems, pool_path, pools[name], changes,
                        operation_name)


def _merge_pool(problems, pool_path, pool, changes, operation_name):
    """Lay *changes* over one existing *pool*, unless they touch a key
    other than :data:`OVERRIDABLE_POOL_KEYS` (each is reported)."""
    refused = [key for key in changes if key not in OVERRIDABLE_POOL_KEYS]
    for key in refused:
        problems.invalid(
            '%s.%s' % (pool_path, validation.key_text(key)), (
                'cannot be changed by a %s request (only %s)') % (
                    operation_name, ', '.join(OVERRIDABLE_POOL_KEYS)))
    if not refused:
        pool.update(copy.deepcopy(changes))


def sets_node_settings(operation):
    """Whether a scale or heal request's ``additionalParams`` give
    labels or taints (``worker_node``, ``node_pools``): the nodes it
    joins take them instead of what was recorded for them."""
    overrides = operation.get(core.ROOT) if isinstance(operation, dict) \
        else None
    if not isinstance(overrides, dict):
        return False
    worker = overrides.get('worker_node')
    pools = overrides.get('node_pools')
    sections = [worker] + (list(pools.values())
                           if isinstance(pools, dict) else [])
    return any(isinstance(section, dict) and (
        'labels' in section or 'taints' in section)
        for section in sections)


def parse_for_operation(instantiated, operation, operation_name='scale',
                        default_key_file=None, need_cp_names=True,
                        max_size=None):
    """:func:`merge_operation_params`, then
    :func:`~mgmt_driver.model.params.parse_params`.

    :returns: the :class:`~mgmt_driver.model.core.ClusterSpec` that applies to
        this operation.
    :raises ParamsNotFound, ParamsInvalid: as
        :func:`~mgmt_driver.model.params.parse_params`.
    """
    merged = merge_operation_params(instantiated, operation, operation_name,
                                    max_size)
    return params.parse_params(merged, default_key_file=default_key_file,
                               need_cp_names=need_cp_names, max_size=max_size)
