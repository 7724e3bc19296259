"""Rolling Kubernetes upgrades: the version rules, the plan, the record.

Not in the design's layout: a day-2 capability gets its own module
beside the others (STYLE), and :func:`mgmt_driver.operations.day2.upgrade`
only orchestrates what this module decides.  Pure functions, no I/O.

The rules are kubespray's (``docs/operations/upgrades.md``) and
kubeadm's: no downgrade, no skipped minor release (patch releases may be
skipped), and a version the checkout lists in its ``kubelet_checksums``
(kubespray asserts that in ``validate_inventory``).  The versions a
cluster runs are the nodes' kubelet versions, so an upgrade that failed
half-way (some nodes new, some old) is completed by the same request run
again.

The version the cluster was upgraded to is recorded in the workspace
(:data:`mgmt_driver.state.kubeversion.RECORD_FILE`), because the parameters
Tacker keeps are those of the instantiation, which a v1 PATCH cannot change:
every later operation of the driver reads it back and renders ``kube_version``
from it, so scale-outs and heals join nodes at the new version.
"""

import dataclasses
import json
import re

from mgmt_driver.common import exceptions
from mgmt_driver.common import untrusted
from mgmt_driver.model import absence
from mgmt_driver.model import core
from mgmt_driver.model import labels
from mgmt_driver.model import validation
from mgmt_driver.operations import certificates
from mgmt_driver.operations import etcdsnapshots

#: The workspace file naming the nodes that were cordoned when the
#: upgrade to its target started (:func:`render_cordons`).
CORDONS_FILE = 'upgrade-cordons.json'
#: Most node names :data:`CORDONS_FILE` may hold.
MAX_CORDONED = 10000
#: Metadata keys of a PATCH (modify_information): Tacker v1 keeps them
#: in ``vnf_metadata``, v2 in ``metadata``; :func:`check_metadata`.
METADATA_VERSION = 'kube_version'
METADATA_SERIAL = 'kube_upgrade_serial'

# A kubelet version may carry a suffix (v1.33.5+rke2r1, -eks-...).
_KUBELET_RE = re.compile(r'v?([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,4})'
                         r'(?:[-+.][A-Za-z0-9.+-]{0,60})?')
_SERIAL_RE = re.compile(r'([0-9]{1,4})(%?)')
#: How many supported versions an error message lists.
_SHOWN = 8


def parse_version(text, field):
    """``(major, minor, patch)`` of a requested version.

    :param text: ``'1.34.3'`` or ``'v1.34.3'``.
    :param field: where the value came from, for the message.
    :raises ParamsInvalid: naming *field*.
    """
    version = core.KubeVersion.parse(text)
    if version is None:
        raise exceptions.ParamsInvalid([
            '%s: must be a Kubernetes version such as 1.34.3, not %s'
            % (field, _shown(text))])
    return version.number


def version_text(version):
    """``'1.34.3'``: how kubespray wants ``kube_version`` (no "v")."""
    return '%d.%d.%d' % version


def parse_serial(value, field):
    """kubespray's ``serial`` (worker batch size): ``3`` or ``'25%'``.

    :returns: an int, a percentage string, or None when *value* is None.
    :raises ParamsInvalid: naming *field*.
    """
    if value is None:
        return None
    match = _SERIAL_RE.fullmatch(str(value)) if isinstance(
        value, (int, str)) and not isinstance(value, bool) else None
    number = int(match.group(1)) if match else 0
    if not match or number < 1 or (match.group(2) and number > 100):
        raise exceptions.ParamsInvalid([
            '%s: must be a number of workers upgraded at once (1 or more) '
            'or a percentage such as 20%%, not %s' % (field, _shown(value))])
    return '%d%%' % number if match.group(2) else number


@dataclasses.dataclass(frozen=True)
class MetadataRequest:
    """What the metadata of a PATCH asks of the driver.

    :param kube_version: ``(major, minor, patch)``, or None (no upgrade).
    :param serial: as :func:`parse_serial` returns it, or None.
    :param prefix: the metadata's field name, for messages.
    :param relabel: a :class:`mgmt_driver.model.labels.Relabel`, or None.
    :param renew: the ``renew_certificates`` request id, or None.
    :param etcd_snapshot: the tag of an etcd snapshot asked for
        (:mod:`mgmt_driver.operations.etcdsnapshots`), or None.
    :param excused: node names the upgrade's preflight accepts not Ready
        or cordoned (:data:`mgmt_driver.model.absence.EXCUSED_KEY`).
    :param absent: workers left out of the operation's runs
        (:data:`mgmt_driver.model.absence.ABSENT_KEY`).
    """

    kube_version: tuple = None
    serial: object = None
    prefix: str = 'metadata'
    relabel: object = None
    renew: str = None
    etcd_snapshot: str = None
    excused: tuple = ()
    absent: tuple = ()

    @property
    def empty(self):
        """True when the metadata asks the driver for nothing."""
        return self.kube_version is None and self.relabel is None and \
            self.renew is None and self.etcd_snapshot is None

    def field(self, key):
        """``'<prefix>.<key>'``: how messages name a metadata key."""
        return '%s.%s' % (self.prefix, key)


def check_metadata(metadata, prefix):
    """Check the metadata keys the driver reads; leave the others alone.

    The one place that knows them: the v1 hook (``vnf_metadata``), the
    v2 script and ``kubespray-mgmt params check`` (``metadata`` of a
    PATCH body) all call it.  An absent or null key is not asked for.

    :param metadata: the merged metadata (v1, v2) or a PATCH body's.
    :param prefix: its field name in messages: ``'vnf_metadata'``,
        ``'metadata'``.
    :returns: a :class:`MetadataRequest`.
    :raises ParamsInvalid: every problem at once, each naming
        ``<prefix>.<key>``.
    """
    if not isinstance(metadata, dict):
        raise exceptions.ParamsInvalid([
            '%s: must be an object of key-value pairs, not %s'
            % (prefix, type(metadata).__name__)])
    problems, found, relabel = validation.Problems(), {}, None
    for key, check in METADATA_CHECKS:
        if metadata.get(key) is not None:
            with problems.gathered():
                found[key] = check(metadata[key], '%s.%s' % (prefix, key))
    with problems.gathered():
        relabel = labels.relabel_from_metadata(metadata, prefix)
    problems.raise_if_any()
    return MetadataRequest(found.get(METADATA_VERSION),
                           found.get(METADATA_SERIAL), prefix, relabel,
                           found.get(certificates.METADATA_RENEW),
                           found.get(etcdsnapshots.METADATA_KEY),
                           found.get(absence.EXCUSED_KEY, ()),
                           found.get(absence.ABSENT_KEY, ()))


#: Metadata key -> its check ``(value, field) -> parsed``, in the order
#: problems are listed: a key the driver reads is added here (the
#: relabel keys, read together, are checked by
#: :func:`mgmt_driver.model.labels.relabel_from_metadata` after these).
METADATA_CHECKS = ((METADATA_VERSION, parse_version),
                   (METADATA_SERIAL, parse_serial),
                   (certificates.METADATA_RENEW, certificates.parse_request),
                   (etcdsnapshots.METADATA_KEY, etcdsnapshots.check_reason),
                   (absence.EXCUSED_KEY, absence.parse_names),
                   (absence.ABSENT_KEY, absence.parse_names))
#: Every metadata key the driver reads.
METADATA_KEYS = tuple(key for key, _ in METADATA_CHECKS) + (
    labels.METADATA_NODES, labels.METADATA_POOLS, labels.METADATA_LABELS,
    labels.METADATA_TAINTS)


def _shown(value):
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + '...'


def kubelet_version(node):
    """``(major, minor, patch)`` of a ``kubectl.NodeInfo``.

    :raises RemoteDataInvalid: the node reports no usable version.
    """
    match = _KUBELET_RE.fullmatch(node.kubelet_version)
    if match is None:
        raise exceptions.RemoteDataInvalid(
            host='the cluster', what='kubectl get nodes output',
            problem='node %s reports kubelet version %s' % (
                node.name, _shown(node.kubelet_version)))
    return tuple(int(part) for part in match.groups()[:3])


@dataclasses.dataclass(frozen=True)
class Plan:
    """What an upgrade to *target* still has to do.

    :param target: ``(major, minor, patch)``.
    :param masters: control-plane node names to upgrade, in the
        inventory's order (the first one runs ``kubeadm upgrade apply``).
    :param workers: worker node names to upgrade.
    """

    target: tuple
    masters: tuple
    workers: tuple

    @property
    def done(self):
        return not self.masters and not self.workers


def plan(target, nodes, masters, workers, supported, field,
         cordoned_before=frozenset()):
    """Check *target* against the cluster and list the nodes to upgrade.

    :param target: ``(major, minor, patch)``.
    :param nodes: ``kubectl.NodeInfo`` of the cluster, or None to plan
        every node without the version rules (a dry run, with no
        cluster to ask).
    :param masters: the control-plane names, in the inventory's order.
    :param workers: the worker names.
    :param supported: versions the checkout supports (tuples), or None
        when it does not say.
    :param field: the field that asked for *target*, for messages.
    :param cordoned_before: names of the nodes that were cordoned when
        the upgrade to *target* started: kubespray upgrades such a node
        where it stands and leaves it cordoned, so it is done once at
        *target*.
    :returns: a :class:`Plan`; nodes at *target* and schedulable (or
        cordoned before) are done (a re-run after a failure skips them).
    :raises ParamsInvalid: a downgrade, a skipped minor release or a
        version the checkout lacks; every problem, naming *field*.
    """
    problems = validation.Problems()
    if nodes is None:
        _check_target(problems, target, {}, supported, field)
        problems.raise_if_any()
        return Plan(target, tuple(masters), tuple(workers))
    wanted = set(masters) | set(workers)
    versions = {n.name: kubelet_version(n) for n in nodes if n.name in wanted}
    if not versions:
        raise exceptions.MgmtDriverOtherError(
            error_message='no node of the cluster is registered in '
                          'Kubernetes: nothing to upgrade')
    _check_target(problems, target, versions, supported, field)
    problems.raise_if_any()
    ready = {n.name for n in nodes if n.schedulable} | set(cordoned_before)
    todo = {name for name, v in versions.items()
            if v != target or name not in ready}
    return Plan(target, tuple(n for n in masters if n in todo),
                tuple(n for n in workers if n in todo))


def _check_target(problems, target, versions, supported, field):
    if versions:
        _check_order(problems, target, versions, field)
    if supported is not None and target not in supported:
        listed = sorted(supported, reverse=True)
        problems.invalid(field, '%s is not supported by the kubespray '
                         'checkout (its kubelet_checksums list %s%s)' % (
                             version_text(target), ', '.join(
                                 version_text(v) for v in listed[:_SHOWN]),
                             ', ...' if len(listed) > _SHOWN else ''))


def _check_order(problems, target, versions, field):
    shown = version_text(target)
    newest_name, newest = max(versions.items(), key=lambda item: item[1])
    oldest = min(versions.values())
    if target < newest:
        problems.invalid(field, '%s is older than %s, the version of %s '
                         '(downgrades are not supported)' % (
                             shown, version_text(newest), newest_name))
    elif target[0] != oldest[0] or target[1] > oldest[1] + 1:
        problems.invalid(field, '%s skips a minor release: the cluster runs '
                         '%s (upgrade to %d.%d first; patch releases may be '
                         'skipped)' % (shown, version_text(oldest),
                                       oldest[0], oldest[1] + 1))


def parse_supported(lines):
    """The versions of ``kubespray.supported_kube_versions``'s output.

    :param lines: version strings (``1.35.4`` or ``v1.26.5``); others
        are skipped.
    :returns: a set of tuples, or None when no line was a version (the
        checkout does not say).
    """
    versions = (core.KubeVersion.parse(line.strip()) for line in lines)
    found = {version.number for version in versions if version}
    return found or None


def left_cordoned(nodes, todo, cordoned_before):
    """The nodes of *todo* that are cordoned although they were not when
    the upgrade started: an earlier run of it cordoned them and failed.

    kubespray's pre-upgrade cordons and drains only a Ready, schedulable
    node and its post-upgrade uncordons only what it cordoned, so such a
    node must be made schedulable again before the run, or it would be
    upgraded undrained and stay cordoned.

    :param nodes: ``kubectl.NodeInfo`` of the cluster.
    :param todo: the :class:`Plan`.
    :returns: their names, in *todo*'s order.
    """
    cordoned = {n.name for n in nodes if not n.schedulable}
    return [name for name in todo.masters + todo.workers
            if name in cordoned and name not in cordoned_before]


def render_cordons(target, names):
    """The text of :data:`CORDONS_FILE`: *target* and the cordoned
    nodes' *names* (sorted)."""
    return json.dumps({'target': version_text(target),
                       'cordoned_before': sorted(names)}) + '\n'


# The node names kubectl.py accepts from a cluster.
_NODE_NAME_RE = re.compile(r'[A-Za-z0-9]([-A-Za-z0-9_.]{0,251}[A-Za-z0-9])?')


def parse_cordons(text):
    """``(target, names)`` of :data:`CORDONS_FILE`, or None if absent.

    The file lives on the Ansible server: its shape is checked exactly.

    :raises ValueError: not such a record (the message names no value).
    """
    if text is None:
        return None
    data = untrusted.load_record(text)
    if not isinstance(data, dict) or set(data) != {'target',
                                                   'cordoned_before'}:
        raise ValueError('not an object with target and cordoned_before')
    target = core.KubeVersion.parse(data['target'])
    names = data['cordoned_before']
    if target is None:
        raise ValueError('target is not a version')
    if not isinstance(names, list) or len(names) > MAX_CORDONED or not all(
            isinstance(n, str) and _NODE_NAME_RE.fullmatch(n)
            for n in names):
        raise ValueError('cordoned_before is not a list of node names')
    return target.number, frozenset(names)
