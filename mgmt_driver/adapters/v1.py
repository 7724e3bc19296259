"""Tacker v1's hooks: :class:`LcmHooks` turns each hook call into the
inputs of one operation of :mod:`mgmt_driver.operations.lcm`, run over a
:class:`mgmt_driver.session.driver.ClusterDriver`.

Tacker loads :mod:`mgmt_driver.kubespray_mgmt`, a byte-stable shim that
forwards every hook here (it imports this module by its old name,
``driver``, from the package root: see :data:`mgmt_driver.MOVED`).  Each
hook first passes :func:`mgmt_driver.state.statestore.hook` (the state
store is the shared one, the instance's record is there, no other
operation of the instance runs).
"""


from mgmt_driver import DRIVER_NAME  # noqa: F401 (the shim reads it)
from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.common import safetext
from mgmt_driver.model import absence
from mgmt_driver.model import core
from mgmt_driver.model import labels as labels_mod
from mgmt_driver.model import merging
from mgmt_driver.model import nodes as nodes_mod
from mgmt_driver.model import params
from mgmt_driver.operations import lcm
from mgmt_driver.operations import upgrade as upgrade_mod
from mgmt_driver.remote import heat
from mgmt_driver.remote import ssh
from mgmt_driver.remote import trust
from mgmt_driver.session import driver
from mgmt_driver.state import records as records_mod
from mgmt_driver.state import registry
from mgmt_driver.state import statestore

LOG = safetext.logger(__name__)

DESCRIPTION = ('Builds, scales, heals and terminates a Kubernetes cluster '
               'VNF with kubespray run from an Ansible server over SSH.')

#: Appended to the error of a failed scale_end.
SCALE_OUT_ADVICE = lcm.SCALE_OUT_ADVICE


def _declare_absent(drv, cluster, vms, named, field):
    """Declare absent the workers *named* by the request's *field* and
    those whose VM Heat reports gone (*vms*: ``{name: VmRecord}``)."""
    workers = {n.name for n in cluster.workers}
    gone = sorted(name for name, r in (vms or {}).items()
                  if r is not None and r.gone and name in workers
                  and name not in named)
    if gone:
        drv.warn('Heat reports the VM of %s gone', ', '.join(gone))
    drv.declare_absent(cluster, tuple(named) + tuple(gone), field)



def _instance_id(vnf_instance):
    return getattr(vnf_instance, 'id', None) or '(unknown instance)'


def _additional_params(obj):
    return dict(getattr(obj, 'additional_params', None) or {})


#: Config files whose ignored keys were already logged (once a process).
_WARNED_FILES = set()


def _warn_ignored_options(conf):
    """Log each ``[kubespray_mgmt]`` key of Tacker's config files that
    names no option (``kubespray-mgmt doctor`` lists them too): a typo
    would otherwise lose the setting silently."""
    files = tuple(kconf.config_files(conf))
    if files in _WARNED_FILES:
        return
    _WARNED_FILES.add(files)
    for ignored in kconf.unknown_options(conf, files=files):
        LOG.warning('%s', ignored)


class LcmHooks:
    """Tacker v1's hooks, adapted to
    :class:`~mgmt_driver.session.driver.ClusterDriver`.

    :param conf: an oslo.config object (default: the global one).
    :param pool_factory: returns a new ``ssh.ConnectionPool``.
    :param heat_factory: ``(context, vnf_instance, request)`` -> Heat
        client.
    :param vim_registry: a ``registry.TackerVimRegistry``.
    :param package_dir_of: ``(context, vnf_instance)`` -> local VNF
        package directory, or None.
    :param records: a ``records.RecordStore`` (default: from *conf* at
        each hook).
    """

    def __init__(self, conf=None, pool_factory=None, heat_factory=None,
                 vim_registry=None, package_dir_of=None, records=None):
        self.conf = conf or kconf.CONF
        self._records = records
        self._pool_factory = pool_factory or (
            lambda: ssh.ConnectionPool(ssh.SSHSettings.from_conf(self.conf)))
        self._heat_factory = heat_factory or heat.heat_client
        self._registry = vim_registry or registry.TackerVimRegistry()
        self._package_dir_of = package_dir_of or _tacker_package_dir
        _warn_ignored_options(self.conf)

    def _noop(self, hook, vnf_instance):
        LOG.info('%s: nothing to do for VNF instance %s', hook,
                 _instance_id(vnf_instance))

    # Hooks this driver deliberately leaves to Tacker.

    def instantiate_start(self, context, vnf_instance, request, grant,
                          grant_request, **kwargs):
        self._noop('instantiate_start', vnf_instance)

    @statestore.hook
    def terminate_start(self, context, vnf_instance, request, grant,
                        grant_request, **kwargs):
        # Only kubespray.reset_on_terminate needs this hook: the VMs
        # still exist here, and are gone by terminate_end.
        spec = self._spec_or_none(context, vnf_instance, request,
                                  'terminate', log=LOG.debug)
        if spec is None or not spec.kubespray.reset_on_terminate:
            self._noop('terminate_start', vnf_instance)
            return
        with self._pool_factory() as pool:
            lcm.terminate_begin(self._driver(
                context, vnf_instance, spec, pool, 'terminate_start'))

    def change_external_connectivity_start(self, context, vnf_instance,
                                           request, grant, grant_request,
                                           **kwargs):
        self._noop('change_external_connectivity_start', vnf_instance)

    def change_external_connectivity_end(self, context, vnf_instance,
                                         request, grant, grant_request,
                                         **kwargs):
        self._noop('change_external_connectivity_end', vnf_instance)

    def modify_information_start(self, context, vnf_instance, request,
                                 grant, grant_request, **kwargs):
        self._noop('modify_information_start', vnf_instance)

    @statestore.hook
    def modify_information_end(self, context, vnf_instance, request,
                               grant, grant_request,
                               metadata_field='vnf_metadata', **kwargs):
        """A PATCH with ``vnf_metadata.kube_version`` upgrades the cluster;
        one with ``relabel_nodes`` or ``relabel_pools`` and
        ``relabel_labels`` or ``relabel_taints`` relabels those nodes
        (first); one with ``renew_certificates: <request id>`` renews
        the control-plane certificates (once per id; before an upgrade).

        Tacker v1 passes no request here and has already stored the new
        metadata: the keys are read from the instance, and a version the
        cluster already runs on every node, or labels and taints the
        nodes have, are nothing to do, so any other PATCH changes nothing
        (it reads the nodes).  ``etcd_snapshot`` (a tag) takes an etcd
        snapshot first, once per tag.  ``kube_upgrade_serial`` sets the worker
        batch size.  The keys are checked by
        :func:`mgmt_driver.operations.upgrade.check_metadata`, the pools named
        before any connection.

        :param metadata_field: the metadata's name in messages (the v2
            adapter passes ``'metadata'``).
        """
        wanted = upgrade_mod.check_metadata(
            dict(getattr(vnf_instance, 'vnf_metadata', None) or {}),
            metadata_field)
        if wanted.empty:
            self._noop('modify_information_end', vnf_instance)
            return
        spec = self._spec(context, vnf_instance, None, 'upgrade')
        cluster, vms = self._vms(context, vnf_instance, None, spec)
        relabel = wanted.relabel
        if relabel is not None:
            relabel = (list(relabel.nodes) + labels_mod.pool_members(
                spec, cluster, relabel.pools,
                wanted.field(labels_mod.METADATA_POOLS)),
                relabel.labels, relabel.taints)
        target = None if wanted.kube_version is None else \
            upgrade_mod.version_text(wanted.kube_version)
        with self._pool_factory() as pool:
            drv = self._driver(context, vnf_instance, spec, pool,
                               'modify_information_end')
            _declare_absent(drv, cluster, vms, wanted.absent,
                            wanted.field(absence.ABSENT_KEY))
            lcm.modify(
                drv, cluster, relabel, target, wanted.serial,
                wanted.field(upgrade_mod.METADATA_VERSION), wanted.excused,
                renew=wanted.renew, snapshot=wanted.etcd_snapshot)

    # Inputs.

    def _default_key(self):
        return self.conf.kubespray_mgmt.ssh_private_key_file

    def _spec(self, context, vnf_instance, request, operation):
        """The request's spec, checked against the operator's rules
        (:mod:`mgmt_driver.remote.trust`) before any connection is opened; a
        VIP named by its port (``vip_cp_name``) is read from Heat."""
        instantiated = _additional_params(getattr(
            vnf_instance, 'instantiated_vnf_info', None))
        max_size = self.conf.kubespray_mgmt.max_request_size
        if operation == 'instantiate':
            spec = params.parse_params(_additional_params(request),
                                       self._default_key(),
                                       max_size=max_size)
        else:
            spec = merging.parse_for_operation(
                instantiated, _additional_params(request), operation,
                self._default_key(), max_size=max_size)
        spec = trust.apply(spec, trust.Policy.from_conf(
            self.conf, self._package_dir_of(context, vnf_instance)))
        # Terminate needs no VIP, and its VMs and ports may be gone.
        if operation != 'terminate' and spec.external_lb.vip_cp_name and \
                spec.external_lb.vip is None:
            spec = self._resolve_vip(context, vnf_instance, request, spec)
        return spec

    def _resolve_vip(self, context, vnf_instance, request, spec):
        """*spec* with the VIP read from its port in Heat."""
        return heat.resolve_vip(
            spec, heat.HeatNodeFinder(self._heat_factory(
                context, vnf_instance, request)),
            vnf_instance.instantiated_vnf_info.instance_id)

    def _spec_or_none(self, context, vnf_instance, request, operation,
                      log=LOG.warning):
        try:
            return self._spec(context, vnf_instance, request, operation)
        except (exceptions.ParamsInvalid, exceptions.ParamsNotFound) as exc:
            log('%s of VNF instance %s: parameters unusable (%s)',
                operation, _instance_id(vnf_instance), exc)
            return None

    def _vms(self, context, vnf_instance, request, spec):
        """:returns: ``(ClusterNodes, {name: VmRecord or None})``."""
        if spec.nodes is not None:
            cluster = nodes_mod.nodes_from_spec(spec)
            return cluster, dict.fromkeys(cluster.names)
        client = self._heat_factory(context, vnf_instance, request)
        stack_id = vnf_instance.instantiated_vnf_info.instance_id
        records = heat.HeatNodeFinder(client).cluster_vms(stack_id, spec)
        self._check_vouched(spec, records, client)
        cluster = nodes_mod.build_nodes(spec, [r.address for r in records],
                                        path='heat stack %s' % stack_id)
        by_name = {nodes_mod.node_name(r.address.role, r.address.nic_ip): r
                   for r in records}
        return cluster, by_name

    def _check_vouched(self, spec, records, client):
        """Refuse, before any connection, VMs from the Heat of a VIM the
        operator does not list that the default key would log in to
        (:func:`mgmt_driver.remote.trust.check_heat_logins`)."""
        trust.check_heat_logins(
            spec, [r.address for r in records],
            trust.Policy.from_conf(self.conf), heat.vim_urls(client))

    def _store(self):
        return self._records or records_mod.RecordStore.from_conf(self.conf)

    def _driver(self, context, vnf_instance, spec, pool, operation,
                request=None, cluster=None, vms=None):
        """The :class:`~mgmt_driver.session.driver.ClusterDriver` of the hook
        *operation*; the workers *request*'s ``additionalParams.absent_nodes``
        names, and those whose VM Heat reports gone (*vms*: ``{name:
        VmRecord}``), are declared absent in *cluster*."""
        drv = driver.ClusterDriver(spec, vnf_instance.id, pool, self.conf,
                                   self._package_dir_of(context, vnf_instance),
                                   records=self._store(), operation=operation)
        if request is not None:
            field = 'additionalParams.' + absence.ABSENT_KEY
            _declare_absent(drv, cluster, vms, absence.parse_names(
                _additional_params(request).get(absence.ABSENT_KEY), field),
                field)
        return drv

    def _vims(self, context, vnf_instance):
        """The VIM registry, as :mod:`mgmt_driver.operations.lcm` calls it."""
        return TackerVims(self._registry, context, vnf_instance)

    @staticmethod
    def _vim_name(spec, vnf_instance):
        return spec.vim_name or registry.default_vim_name(vnf_instance.id)

    # Hooks that build and change the cluster.

    @statestore.hook
    def instantiate_end(self, context, vnf_instance, request, grant,
                        grant_request, **kwargs):
        spec = self._spec(context, vnf_instance, request, 'instantiate')
        self._instantiate(context, vnf_instance, request, spec)

    def _instantiate(self, context, vnf_instance, request, spec,
                     operation='instantiate_end'):
        cluster, _ = self._vms(context, vnf_instance, request, spec)
        run = lcm.heal_vnf_finish if operation == 'heal_end' else \
            lcm.instantiate
        with self._pool_factory() as pool:
            run(
                self._driver(context, vnf_instance, spec, pool, operation),
                cluster, self._vim_name(spec, vnf_instance),
                self._vims(context, vnf_instance))

    @statestore.hook
    def terminate_end(self, context, vnf_instance, request, grant,
                      grant_request, **kwargs):
        spec = self._spec_or_none(context, vnf_instance, request,
                                  'terminate')
        if spec is None:
            # Rollback of an instantiate refused for its parameters.
            with self._pool_factory() as pool:
                lcm.release(self._store(), vnf_instance.id, pool,
                            self._vims(context, vnf_instance))
            return
        self._terminate(context, vnf_instance, spec)

    def _terminate(self, context, vnf_instance, spec,
                   operation='terminate_end'):
        # A whole-VNF heal keeps the etcd snapshots (lcm.heal_vnf_begin).
        run = lcm.heal_vnf_begin if operation == 'heal_start' else \
            lcm.terminate_finish
        with self._pool_factory() as pool:
            run(
                self._driver(context, vnf_instance, spec, pool, operation),
                self._vims(context, vnf_instance))

    @statestore.hook
    def scale_end(self, context, vnf_instance, request, grant,
                  grant_request, **kwargs):
        spec = self._spec(context, vnf_instance, request, 'scale')
        cluster, records = self._vms(context, vnf_instance, request, spec)
        # New gateways (a scale-out of external_lb_param.aspect_id): the
        # members Tacker added.
        new_gateways = _members(records, kwargs.get('scale_out_id_list'),
                                'stack_id', core.ROLE_EXTERNAL_LB)
        with self._pool_factory() as pool:
            lcm.scale_out(
                self._driver(context, vnf_instance, spec, pool,
                             'scale_end', request, cluster, records),
                cluster, gateways=new_gateways,
                vim_name=self._vim_name(spec, vnf_instance),
                advice=SCALE_OUT_ADVICE)

    @statestore.hook
    def scale_start(self, context, vnf_instance, request, grant,
                    grant_request, **kwargs):
        spec = self._spec(context, vnf_instance, request, 'scale')
        self._need_heat(spec, 'scale-in')
        cluster, records = self._vms(context, vnf_instance, request, spec)
        if getattr(request, 'type', 'SCALE_IN') == 'SCALE_OUT':
            chosen = set(kwargs.get('scale_name_list') or [])
            match = 'member_name'
        else:
            chosen = set(kwargs.get('scale_out_id_list') or [])
            match = 'stack_id'
        with self._pool_factory() as pool:
            lcm.scale_in(
                self._driver(context, vnf_instance, spec, pool,
                             'scale_start', request, cluster, records),
                cluster,
                _members(records, chosen, match, core.ROLE_WORKER),
                _members(records, chosen, match, core.ROLE_EXTERNAL_LB))

    @staticmethod
    def _need_heat(spec, operation):
        # Tacker names the VMs of these operations by Heat ids, which an
        # explicit nodes list cannot be matched against: refuse rather
        # than leave a stale node in Kubernetes and HAProxy.
        if spec.nodes is not None:
            raise exceptions.MgmtDriverParamInvalid(
                param='%s.nodes (%s needs the VMs from Heat; with an '
                      'explicit nodes list use "kubespray-mgmt run" with '
                      '--nodes)' % (core.ROOT, operation))

    def _healed(self, vnf_instance, request, records):
        servers = set(heat.server_ids_for_vnfcs(
            vnf_instance, list(request.vnfc_instance_id)))
        return [name for name, r in records.items()
                if r is not None and r.server_id in servers]

    @statestore.hook
    def heal_start(self, context, vnf_instance, request, grant,
                   grant_request, **kwargs):
        spec = self._spec(context, vnf_instance, request, 'heal')
        if not getattr(request, 'vnfc_instance_id', None):
            self._terminate(context, vnf_instance, spec, 'heal_start')
            return
        self._need_heat(spec, 'heal of single VNFCs')
        cluster, records = self._vms(context, vnf_instance, request, spec)
        with self._pool_factory() as pool:
            lcm.heal_begin(
                self._driver(context, vnf_instance, spec, pool,
                             'heal_start', request, cluster, records),
                cluster, self._healed(vnf_instance, request, records))

    @statestore.hook
    def heal_end(self, context, vnf_instance, request, grant,
                 grant_request, **kwargs):
        spec = self._spec(context, vnf_instance, request, 'heal')
        if not getattr(request, 'vnfc_instance_id', None):
            self._instantiate(context, vnf_instance, request, spec,
                              'heal_end')
            return
        cluster, records = self._vms(context, vnf_instance, request, spec)
        with self._pool_factory() as pool:
            lcm.heal_finish(
                self._driver(context, vnf_instance, spec, pool, 'heal_end',
                             request, cluster, records),
                cluster, self._healed(vnf_instance, request, records),
                self._vim_name(spec, vnf_instance),
                self._vims(context, vnf_instance),
                new_settings=merging.sets_node_settings(
                    _additional_params(request)))


class TackerVims:
    """Tacker's VIM registry bound to one hook call, with the interface
    of :class:`mgmt_driver.operations.lcm.KubeconfigVims`.

    :param vim_registry: a ``registry.TackerVimRegistry`` (or v2's).
    """

    kind = records_mod.TACKER_VIM

    def __init__(self, vim_registry, context, vnf_instance):
        self._registry = vim_registry
        self._context = context
        self._vnf_instance = vnf_instance

    def check_free(self, name, owned_id=None):
        self._registry.check_free(self._context, name, owned_id)

    def register(self, access, owned_id=None):
        return self._registry.register(self._context, self._vnf_instance,
                                       access, owned_id)

    def unregister(self, vim_id):
        return self._registry.unregister(self._context, self._vnf_instance,
                                         vim_id)


def _members(records, chosen, match, role):
    """Names of the VMs of *role* whose ``VmRecord`` field *match*
    (``stack_id``, ``member_name``) is in *chosen*, sorted."""
    chosen = set(chosen or ())
    return sorted(name for name, r in records.items()
                  if r is not None and getattr(r, match) in chosen
                  and r.address.role == role)


def _tacker_package_dir(context, vnf_instance):
    try:
        from tacker.vnflcm import utils as vnflcm_utils
    except ImportError:
        return None
    return vnflcm_utils._get_vnf_package_path(context, vnf_instance.vnfd_id)
