"""Nodes a request declares absent (dead, left out of the runs) or
excused (an upgrade takes them as they are): the fields and their
checks, pure.

Not in the design's layout: one small concern that the operations,
:mod:`mgmt_driver.operations.upgrade`'s metadata checks, the v2 script and the
command line all read.  Why a host must be declared absent on purpose
(kubespray v2.31.0, ``roles/kubernetes/preinstall/tasks/
0040-verify-settings.yml``): a ``--limit`` run stops when a
``k8s_cluster`` host it leaves out has no cached facts, and facts cannot
be gathered from a dead host, so one dead worker whose cache entry
expired (``fact_caching_timeout``, 24 h) blocks every scale-out, heal
and upgrade (kubespray issue #13491).  The driver then renders the
runs' inventory without that worker (:meth:`mgmt_driver.session.driver.
ClusterDriver.declare_absent`): kubespray sees a cluster without it.
"""

import yaml

from mgmt_driver.common import exceptions
from mgmt_driver.common import safeyaml
from mgmt_driver.common import untrusted
from mgmt_driver.model import validation

#: ``additionalParams`` key (scale, heal; Tacker v1 and v2) and PATCH
#: metadata key (upgrade, relabel) of the workers declared absent.
ABSENT_KEY = 'absent_nodes'
#: PATCH metadata key of the nodes an upgrade's preflight excuses (not
#: Ready, or cordoned, and upgraded where they stand, as kubespray does).
EXCUSED_KEY = 'kube_upgrade_excused'
#: Most names one of these fields may hold.
MAX_NAMES = 1000
#: The workspace's record of the workers the last inventory upload left
#: out (declared absent), for ``status``: written with every inventory.
RECORD_FILE = 'absent-nodes.yaml'


def parse_names(value, field):
    """A list of node names, or one comma-separated string of them.

    :returns: a tuple of names, without duplicates ('' parts dropped);
        () for None.
    :raises ParamsInvalid: naming *field*.
    """
    if value is None:
        return ()
    if isinstance(value, str):
        value = [part.strip() for part in value.split(',')]
    if not isinstance(value, list) or len(value) > MAX_NAMES:
        raise exceptions.ParamsInvalid([
            '%s: must be a list of node names (at most %d)' % (
                field, MAX_NAMES)])
    bad = [v for v in value if not isinstance(v, str) or (
        v and not validation.NODE_NAME.match(v))]
    if bad:
        raise exceptions.ParamsInvalid([
            '%s: %s is not a node name' % (
                field, exceptions.clip(repr(bad[0]), 80))])
    return tuple(dict.fromkeys(v for v in value if v))


def check_absent(cluster, names, field):
    """*names* must be workers of *cluster*: a dead control-plane node
    is the heal's job (it is taken out of etcd and joined again).

    :returns: a frozenset of the names.
    :raises ParamsInvalid: naming *field* and every wrong name.
    """
    masters = {n.name for n in cluster.masters}
    workers = {n.name for n in cluster.workers}
    problems = []
    for name in names:
        if name in masters:
            problems.append(
                '%s: %s is a control-plane node: heal it instead (a '
                'control-plane node cannot be left out of kubespray\'s '
                'runs)' % (field, name))
        elif name not in workers:
            problems.append('%s: %s is not a worker of this cluster'
                            % (field, name))
    if problems:
        raise exceptions.ParamsInvalid(problems)
    return frozenset(names)


def render_record(names):
    """The text of :data:`RECORD_FILE` for the workers *names*."""
    return yaml.safe_dump({'absent': sorted(names)},
                          default_flow_style=False)


def parse_record(text):
    """Read :data:`RECORD_FILE` back (remote text).

    :param text: its text, or None when there is none.
    :returns: a frozenset of node names (empty for no file).
    :raises ValueError: not the document :func:`render_record` writes;
        the message names no value.
    """
    if not text:
        return frozenset()
    try:
        doc = untrusted.load_yaml(text)
    except yaml.YAMLError as exc:
        raise ValueError('not valid YAML' + safeyaml.describe(exc))
    names = doc.get('absent') if isinstance(doc, dict) else None
    if not isinstance(names, list) or len(doc) != 1 or \
            len(names) > MAX_NAMES:
        raise ValueError('must be a mapping with the one key "absent", '
                         'a list of at most %d node names' % MAX_NAMES)
    if not all(isinstance(n, str) and validation.NODE_NAME.match(n)
               for n in names):
        raise ValueError('absent: an item is not a node name')
    return frozenset(names)
