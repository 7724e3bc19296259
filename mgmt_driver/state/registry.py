"""Make the new cluster usable: a Tacker Kubernetes VIM, or a kubeconfig.

Inside Tacker, :class:`TackerVimRegistry` registers the cluster as a
Kubernetes VIM (bearer token and CA certificate, ``auth_url`` pointing at
the external load balancer) and records it in the VNF instance's
``vim_connection_info``; terminate undoes both.  Outside Tacker,
:class:`KubeconfigRegistry` writes a kubeconfig file (mode 0600).

Both act only on what the instance owns: the caller passes the id it
recorded when it registered (:mod:`mgmt_driver.state.records`); a name taken
by anything else is refused (:meth:`check_free`), and ``unregister``
deletes by that id, never by name.  Document rendering is pure; Tacker
is imported lazily.
"""

import base64
import dataclasses
import os
import threading
import uuid

import yaml

from mgmt_driver.common import exceptions
from mgmt_driver.common import safetext
from mgmt_driver.model import core

LOG = safetext.logger(__name__)

VIM_TYPE = 'kubernetes'
#: Where the VIM name comes from in a request, for error messages.
VIM_NAME_FIELD = '%s.vim_name' % core.ROOT


@dataclasses.dataclass(frozen=True)
class ClusterAccess:
    """How to reach the cluster's API server as its admin.

    :param name: VIM (or kubeconfig context) name.
    :param server: ``https://<address>:<port>`` of the API endpoint.
    :param token: bearer token of the admin ServiceAccount (never shown).
    :param ca_cert: PEM of the cluster CA.
    """

    name: str
    server: str
    token: str = dataclasses.field(repr=False)
    ca_cert: str = dataclasses.field(repr=False)


def server_url(address, port):
    """``https://`` URL of *address*:*port* (IPv6 in brackets)."""
    host = '[%s]' % address if ':' in address else address
    return 'https://%s:%d' % (host, int(port))


def default_vim_name(vnf_instance_id):
    return 'kubernetes_vim_%s' % vnf_instance_id


def vim_body(access, project_id, instance_id=None):
    """The body Tacker's ``NfvoPlugin.create_vim`` takes.

    :param access: a :class:`ClusterAccess`.
    :param project_id: the owning project (``context.project_id``).
    :param instance_id: the VNF instance, named in the description.
    """
    description = 'Kubernetes cluster built by the kubespray MgmtDriver'
    if instance_id:
        description += ' for VNF instance %s' % instance_id
    return {'vim': {
        'name': access.name,
        'description': description,
        'type': VIM_TYPE,
        'auth_url': access.server,
        'vim_project': {'name': 'default'},
        'auth_cred': {'bearer_token': access.token,
                      'ssl_ca_cert': access.ca_cert},
        'is_default': False,
        'tenant_id': project_id,
    }}


def render_kubeconfig(access, user='kubespray-mgmt-admin'):
    """A kubeconfig (YAML text) for *access*; it holds the token."""
    ca = base64.b64encode(access.ca_cert.encode('utf-8')).decode('ascii')
    doc = {
        'apiVersion': 'v1',
        'kind': 'Config',
        'clusters': [{'name': access.name, 'cluster': {
            'server': access.server,
            'certificate-authority-data': ca}}],
        'users': [{'name': user, 'user': {'token': access.token}}],
        'contexts': [{'name': access.name, 'context': {
            'cluster': access.name, 'user': user}}],
        'current-context': access.name,
    }
    return yaml.safe_dump(doc, sort_keys=True, default_flow_style=False)


#: Bytes of a VIM name that names a kubeconfig file: the name of its
#: temporary file, ``<name>.kubeconfig.<8 hex>.tmp``, must fit in 255.
MAX_FILE_NAME_BYTES = 255 - len('.kubeconfig.12345678.tmp')


def check_file_name(name):
    """Refuse a VIM name that cannot name a kubeconfig file.

    Called before any work by the adapters whose VIM is a file (v2, the
    CLI), so that a name too long fails at once, not when the file is
    written at the end of an instantiate.

    :raises MgmtDriverParamInvalid: naming the field.
    """
    if not name or '/' in name or name.startswith('.') or \
            len(name.encode('utf-8')) > MAX_FILE_NAME_BYTES:
        raise exceptions.MgmtDriverParamInvalid(
            param='%s (%r is not usable as a kubeconfig file name: no "/", '
                  'no leading ".", at most %d bytes in UTF-8)' % (
                      VIM_NAME_FIELD, exceptions.clip(name or '', 80),
                      MAX_FILE_NAME_BYTES))


class KubeconfigRegistry:
    """Outside Tacker: one kubeconfig file per cluster in *directory*."""

    def __init__(self, directory):
        self.directory = directory

    def path(self, name):
        check_file_name(name)
        return os.path.join(self.directory, '%s.kubeconfig' % name)

    def check_free(self, name, owned_id=None):
        """Refuse *name* when its file exists and is not *owned_id*.

        :raises VimNameInUse: another cluster's kubeconfig has the name.
        """
        path = self.path(name)
        if os.path.exists(path) and path != owned_id:
            raise exceptions.VimNameInUse(param=VIM_NAME_FIELD, name=name)

    def register(self, access, owned_id=None):
        """Write the kubeconfig atomically with mode 0600.

        :param owned_id: the path this instance registered before.
        :returns: its path (the id to record).
        :raises VimNameInUse: another cluster's kubeconfig has the name.
        """
        self.check_free(access.name, owned_id)
        path = self.path(access.name)
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        tmp = '%s.%s.tmp' % (path, uuid.uuid4().hex[:8])
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, 'w') as f:
            f.write(render_kubeconfig(access))
        os.replace(tmp, path)
        LOG.info('Wrote kubeconfig of %s to %s', access.name, path)
        return path

    def unregister(self, vim_id):
        """Remove the kubeconfig *vim_id* (a path :meth:`register` gave).

        Absent is fine; a path outside the directory is left alone.

        :returns: True if a file was removed.
        """
        if os.path.dirname(os.path.abspath(vim_id)) != \
                os.path.abspath(self.directory):
            LOG.warning('Not removing %s: not in %s', vim_id, self.directory)
            return False
        try:
            os.unlink(vim_id)
        except FileNotFoundError:
            return False
        return True


class TackerVimRegistry:
    """Inside Tacker: the cluster as a Kubernetes VIM of the VNF instance.

    :param plugin: an object with Tacker's ``NfvoPlugin`` methods
        ``get_vims``, ``create_vim`` and ``delete_vim`` (default: a new
        ``NfvoPlugin``).
    :param make_connection_info: builds a ``VimConnectionInfo`` from
        keyword arguments (default: Tacker's object class).
    """

    def __init__(self, plugin=None, make_connection_info=None):
        self._plugin = plugin
        self._make_connection_info = make_connection_info
        # One object serves every hook of the conductor, several at once.
        self._lock = threading.Lock()

    def _nfvo(self):
        with self._lock:
            if self._plugin is None:
                from tacker.nfvo import nfvo_plugin
                self._plugin = nfvo_plugin.NfvoPlugin()
            return self._plugin

    def _connection_info(self, **fields):
        if self._make_connection_info is None:
            from tacker import objects
            self._make_connection_info = objects.VimConnectionInfo
        return self._make_connection_info(**fields)

    def _find(self, context, field, value):
        vims = self._nfvo().get_vims(context, filters={field: [value]})
        return vims[0] if vims else None

    def check_free(self, context, name, owned_id=None):
        """Refuse *name* when a VIM other than *owned_id* has it.

        :param owned_id: the VIM id this instance recorded, or None.
        :returns: the VIM named *name* (then owned), or None.
        :raises VimNameInUse: a VIM this instance does not own has it.
        """
        vim = self._find(context, 'name', name)
        if vim is not None and vim['id'] != owned_id:
            raise exceptions.VimNameInUse(param=VIM_NAME_FIELD, name=name)
        return vim

    def register(self, context, vnf_instance, access, owned_id=None):
        """Create (or reuse the owned) VIM and attach it to *vnf_instance*.

        The owned VIM pointing at another API endpoint (the load
        balancer was re-created with a new address) is replaced: Tacker
        cannot change a VIM's ``auth_url``, so it is detached and
        deleted, by its id, and registered again.  Only the VIM whose id
        the instance recorded is ever replaced; a run that fails between
        the delete and the create registers it on the next run.

        :param owned_id: the VIM id this instance recorded, or None.
        :returns: the VIM id (to record).
        :raises VimNameInUse: a VIM this instance does not own has the
            name.
        :raises MgmtDriverOtherError: Tacker refused the VIM.
        """
        vim = self.check_free(context, access.name, owned_id)
        if vim is not None and vim.get('auth_url') != access.server:
            LOG.info('The VIM %s (%s) points at %s, not %s: replacing it',
                     access.name, vim['id'], vim.get('auth_url'),
                     access.server)
            self.unregister(context, vnf_instance, vim['id'])
            vim = None
        if vim is None:
            vim = self._create(context, access, vnf_instance.id)
        self._attach(vnf_instance, vim['id'])
        return vim['id']

    def _create(self, context, access, instance_id):
        try:
            vim = self._nfvo().create_vim(
                context, vim_body(access, getattr(context, 'project_id',
                                                  None), instance_id))
        except Exception as exc:  # Tacker raises many kinds here
            reason = str(exc).replace(access.token, '***') or \
                type(exc).__name__
            raise exceptions.MgmtDriverOtherError(
                error_message='registering the Kubernetes VIM %s at %s '
                              'failed: %s' % (access.name, access.server,
                                              reason))
        LOG.info('Registered Kubernetes VIM %s (%s) at %s', access.name,
                 vim['id'], access.server)
        return vim

    def _attach(self, vnf_instance, vim_id):
        infos = vnf_instance.vim_connection_info
        if any(info.vim_id == vim_id for info in infos):
            return
        infos.append(self._connection_info(
            id=str(uuid.uuid4()), vim_id=vim_id, vim_type=VIM_TYPE,
            access_info={}, interface_info={}, extra={}))
        vnf_instance.vim_connection_info = infos
        vnf_instance.save()

    def unregister(self, context, vnf_instance, vim_id):
        """Detach and delete the VIM *vim_id*; absent is fine.

        :param vim_id: the id :meth:`register` returned (never a name:
            a name may belong to a VIM someone else registered since).
        :returns: True if a VIM was deleted.
        """
        self._detach(vnf_instance, vim_id)
        vim = self._find(context, 'id', vim_id)
        if vim is None:
            return False
        self._nfvo().delete_vim(context, vim_id)
        LOG.info('Deleted Kubernetes VIM %s (%s)', vim.get('name'), vim_id)
        return True

    @staticmethod
    def _detach(vnf_instance, vim_id):
        infos = vnf_instance.vim_connection_info
        kept = [info for info in infos if info.vim_id != vim_id]
        if len(kept) != len(infos):
            vnf_instance.vim_connection_info = kept
            vnf_instance.save()
