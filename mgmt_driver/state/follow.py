"""Following a cluster from the driver's own record, without its request.

Not in the design's layout: during a Tacker operation the operator sees
only PROCESSING, and has neither the instantiate body nor a topology
file at hand.  Each inventory the driver uploads also writes, in the
instance's record (:mod:`mgmt_driver.state.records`), how the cluster is
reached: :func:`describe` makes that ``cluster`` entry and
:func:`inputs` turns it back into the spec and node set that
``kubespray-mgmt status`` and ``logs`` read with::

    {"workspace": "/home/ubuntu/inventories/<id>", "vim_name": "...",
     "ansible": {"address": "10.10.0.50", "port": 22, "username": "ubuntu",
                 "key": "file", "key_file": "/etc/tacker/kubespray/k",
                 "kubespray_root_path": "...",
                 "transferring_inventory_path": "..."},
     "logins": {"master": {"username": "ubuntu", "port": 22,
                           "key": "default", "key_file": null,
                           "passwordless_sudo": false}, ...},
     "nodes": [{"role": "master", "name": "master-10-10-0-11",
                "ssh_address": "10.10.0.11", "cluster_address": "...",
                "ssh_port": 22}, ...]}

No secret goes in: a login's ``key`` says how it authenticates
(``file``: the private key file at ``key_file`` on the conductor host,
resolved as the driver resolved it; ``default``: the operator's
``ssh_private_key_file``; ``password``: a password, which no record
holds, so such a cluster is followed with ``--params`` only).  The
record is read back as untrusted: every field is checked again, and the
parameters built from it pass :func:`mgmt_driver.model.params.parse_params`.
"""

import ipaddress

from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.model import nodes as nodes_mod
from mgmt_driver.model import params
from mgmt_driver.model import validation
from mgmt_driver.state import records as records_mod

#: How a login authenticates (``key`` of a login entry).
KEY_FILE, DEFAULT_KEY, PASSWORD = 'file', 'default', 'password'
#: Request sections of the roles, with their user and port keys.
_ROLE_SECTIONS = ((core.ROLE_MASTER, 'master_node', 'username', 'port'),
                  (core.ROLE_WORKER, 'worker_node', 'username', 'port'),
                  (core.ROLE_EXTERNAL_LB, 'external_lb_param',
                   'ssh_username', 'ssh_port'))


def _login(login, key_file):
    if login.default_key:
        key = DEFAULT_KEY
    elif login.key_file:
        key = KEY_FILE
    else:
        key = PASSWORD
    return {'username': login.username, 'port': int(login.port),
            'key': key, 'key_file': key_file if key == KEY_FILE else None,
            'passwordless_sudo': bool(login.passwordless_sudo)}


def describe(spec, cluster, workspace, key_path):
    """The ``cluster`` entry of the record (JSON-ready, no secret).

    :param spec: the operation's :class:`~mgmt_driver.model.core.ClusterSpec`.
    :param cluster: the :class:`~mgmt_driver.model.nodes.ClusterNodes` of the
        inventory being uploaded.
    :param workspace: the workspace's path on the Ansible server.
    :param key_path: ``(Login) -> str or None``: where the driver read
        the login's key file on this host.
    """
    return {
        'workspace': workspace, 'vim_name': spec.vim_name,
        'ansible': _ansible_entry(spec.ansible, key_path),
        'logins': {role: _login(spec.login_for(role),
                                key_path(spec.login_for(role)))
                   for role, _, _, _ in _ROLE_SECTIONS},
        'nodes': _node_entries(cluster)}


def _ansible_entry(ansible, key_path):
    """The Ansible server's login and paths (see :func:`describe`)."""
    entry = _login(ansible.login, key_path(ansible.login))
    entry.update(address=ansible.ip_address,
                 kubespray_root_path=ansible.kubespray_root_path,
                 transferring_inventory_path=(
                     ansible.transferring_inventory_path))
    return entry


def _node_entries(cluster):
    """Each node's role, name, addresses and SSH port."""
    return [{'role': n.role, 'name': n.name,
             'ssh_address': n.ssh_address,
             'cluster_address': n.cluster_address,
             'ssh_port': int(n.ssh_port)}
            for n in cluster.k8s_nodes + cluster.gateways]


def node_counts(entry):
    """``{role: count}`` of a record's ``cluster`` entry (every role)."""
    counts = dict.fromkeys(core.ROLES, 0)
    for node in (entry or {}).get('nodes') or []:
        if isinstance(node, dict) and node.get('role') in counts:
            counts[node['role']] += 1
    return counts


# ------------------------------------------------------- reading back --

#: Where the records are (named when an instance has none).
_RECORDS_OPTION = '[kubespray_mgmt] records_dir'


def recorded_inputs(store, instance_id, default_key_file=None):
    """:func:`inputs` of the record of *instance_id* in *store*.

    :raises ParamsNotFound: no record there (naming the directory, the
        option and how to run on a conductor host), or see
        :func:`inputs`.
    """
    state = store.state(instance_id)
    if state == records_mod.RELEASED:
        raise exceptions.ParamsNotFound([
            '--instance-id %s: it was terminated: its record in %s was '
            'released, so there is no cluster to read (give --params to '
            'read the hosts anyway)' % (instance_id, store.directory)])
    if state != records_mod.PRESENT:
        raise exceptions.ParamsNotFound([
            '--instance-id %s: no record of it in %s (%s of the config '
            'files given: to follow an operation of Tacker, run this on a '
            'conductor host as its user with --config-file and the '
            'conductor\'s config; else give --params)' % (
                instance_id, store.directory, _RECORDS_OPTION)])
    return inputs(store.load(instance_id), default_key_file)


def inputs(record, default_key_file=None):
    """The spec and node set of a record, as ``status`` and ``logs``
    take them with ``--params`` and ``--topology``.

    :param record: an :class:`~mgmt_driver.state.records.InstanceRecord`.
    :param default_key_file: ``[kubespray_mgmt] ssh_private_key_file``.
    :returns: ``(ClusterSpec, ClusterNodes)``.
    :raises ParamsNotFound: the record has no ``cluster`` entry, or a
        login needs a password.
    :raises ParamsInvalid: the entry is damaged (each field named).
    """
    entry = _cluster_entry(record)
    where = 'record of %s: cluster' % record.instance_id
    problems = validation.Problems()
    document = _parameters(problems, where, entry)
    problems.raise_if_any()
    spec = params.parse_params(
        {core.ROOT: document}, default_key_file=default_key_file,
        need_cp_names=False)
    return spec, _nodes(entry, where)


def _cluster_entry(record):
    """The record's ``cluster`` entry.

    :raises ParamsNotFound: it has none (saying what to give instead).
    """
    if not isinstance(record.cluster, dict):
        raise exceptions.ParamsNotFound([
            '--instance-id %s: its record names no cluster (it was written '
            'before the driver recorded one, or before the first '
            'inventory was uploaded): give --params (and --topology) '
            'instead' % record.instance_id])
    return record.cluster


def _parameters(problems, where, entry):
    """The additionalParams that reach the hosts, from *entry*."""
    ansible = _mapping(problems, where, entry, 'ansible')
    logins = _mapping(problems, where, entry, 'logins')
    document = {'ansible': dict(
        _login_fields(problems, '%s.ansible' % where, ansible,
                      'username', 'port'),
        ip_address=ansible.get('address'),
        kubespray_root_path=ansible.get('kubespray_root_path'),
        transferring_inventory_path=ansible.get(
            'transferring_inventory_path'))}
    for role, section, user, port in _ROLE_SECTIONS:
        document[section] = _login_fields(
            problems, '%s.logins.%s' % (where, role),
            _mapping(problems, '%s.logins' % where, logins, role), user,
            port)
    return document


def _mapping(problems, where, entry, key):
    value = entry.get(key)
    if not isinstance(value, dict):
        problems.invalid('%s.%s' % (where, key), 'missing or not a mapping')
        return {}
    return value


def _login_fields(problems, where, login, user_key, port_key):
    fields = {user_key: login.get('username'), port_key: login.get('port')}
    key = login.get('key')
    if key == KEY_FILE:
        fields['ssh_key_file'] = login.get('key_file')
    elif key == PASSWORD:
        problems.missing(where, (
            'logs in with a password, which the driver never records: '
            'give --params (the request with its passwords) instead'))
    elif key != DEFAULT_KEY:
        problems.invalid('%s.key' % where, 'must be %s, %s or %s' % (
            KEY_FILE, DEFAULT_KEY, PASSWORD))
    if login.get('passwordless_sudo') is True:
        fields['passwordless_sudo'] = True
    return fields


def _nodes(entry, where):
    """The recorded nodes, each checked; masters in the recorded order."""
    found = []
    problems = validation.Problems()
    listed = entry.get('nodes')
    for index, node in enumerate(listed if isinstance(listed, list)
                                 else []):
        path = '%s.nodes[%d]' % (where, index)
        built = _node(node)
        if built is None:
            problems.invalid(path, 'not a node entry the driver writes')
        else:
            found.append(built)
    if not found:
        problems.missing('%s.nodes' % where, 'no node recorded')
    problems.raise_if_any()
    return nodes_mod.ClusterNodes(
        masters=[n for n in found if n.role == core.ROLE_MASTER],
        workers=[n for n in found if n.role == core.ROLE_WORKER],
        gateways=[n for n in found if n.role == core.ROLE_EXTERNAL_LB])


def _node(node):
    """A :class:`~mgmt_driver.model.nodes.Node` of a recorded entry, or
    None."""
    if not isinstance(node, dict) or node.get('role') not in core.ROLES:
        return None
    port = node.get('ssh_port')
    try:
        ssh_address = str(ipaddress.ip_address(node.get('ssh_address')))
        name = nodes_mod.node_name(node['role'], node.get('cluster_address'))
    except ValueError:
        return None
    if name != node.get('name') or not isinstance(port, int) or \
            isinstance(port, bool) or not 0 < port < 65536:
        return None
    return nodes_mod.Node(node['role'], name, ssh_address,
                          node['cluster_address'], port)
