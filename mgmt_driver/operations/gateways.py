"""The gateways' steps: set up, update, rebuild, add and remove the
load balancer VMs of a cluster.

One concern in three modules, each with a public surface:

* :mod:`mgmt_driver.remote.loadbalancer`: HAProxy's layout, its rendering and
  its checked, atomic apply on one VM;
* :mod:`mgmt_driver.remote.keepalived`: the VRRP group holding the VIP over
  several gateways (it uses loadbalancer's public helpers);
* this module: the steps an operation runs on the gateways, over the
  operation's context (a :class:`mgmt_driver.session.driver.ClusterDriver`,
  called *drv*: its ``spec``, ``conf``, ``connection()``,
  ``step()``/``warn()``, ``kubectl_client()``, ``cluster_access()``,
  ``point_cluster_info()``, ``upload_inventory()`` and
  ``forget_host_keys()``).  The operations
  (:mod:`mgmt_driver.operations.lcm`) and the context's own steps call it;
  it imports neither.
"""

import os
import posixpath

from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.remote import inventory
from mgmt_driver.remote import keepalived
from mgmt_driver.remote import loadbalancer
from mgmt_driver.state import registry

#: Where the LB install script is copied on the LB VM (home-relative).
LB_SCRIPT = '.kubespray-mgmt-install-lb.sh'
#: Set (to 1) for the LB install script when the proxy settings are on
#: its standard input, one ``NAME=VALUE`` line each.
LB_PROXY_FLAG = 'KUBESPRAY_MGMT_PROXY_ON_STDIN'
#: kubeconfig on the LB VM (home-relative), so kubectl works there.
LB_KUBECONFIG = '.kube/config'

#: What a failed remote step raises.
_REMOTE_ERRORS = (exceptions.MgmtDriverRemoteCommandError,
                  exceptions.MgmtDriverRemoteCommandTimeOut,
                  exceptions.MgmtDriverOtherError)


def first_connection(drv, cluster):
    """The connection to the cluster's (first) load balancer VM.

    :raises MgmtDriverNotFound: the cluster has none.
    """
    if cluster.external_lb is None:
        raise exceptions.MgmtDriverNotFound(
            param='%s.external_lb_param (no load balancer VM found)'
                  % core.ROOT)
    return drv.connection(cluster.external_lb)


def connections(drv, cluster, names=None):
    """``[(gateway Node, Connection)]``: every gateway, or those called
    *names*; the cluster has at least one."""
    first_connection(drv, cluster)
    wanted = None if names is None else set(names)
    return [(g, drv.connection(g)) for g in cluster.gateways
            if wanted is None or g.name in wanted]


def update(drv, cluster):
    """Render HAProxy's configuration for *cluster* and apply it (and
    keepalived's on every gateway, when ``external_lb_param.vip`` is
    set)."""
    conn = first_connection(drv, cluster)
    lb_spec = drv.spec.external_lb
    layout = loadbalancer.layout_for(
        lb_spec, cluster, **loadbalancer.layout_options(drv.conf))
    settings = loadbalancer.ApplySettings.from_conf(
        drv.conf, lb_spec.login.username)
    text = loadbalancer.render_haproxy_config(layout)
    if lb_spec.highly_available:
        gateways = connections(drv, cluster)
        changed = any(any(both) for both in keepalived.update_gateways(
            {g.name: c for g, c in gateways},
            [(g.name, g.cluster_address) for g, _ in gateways], text,
            lb_spec, settings, keepalived.settings_from_conf(
                drv.conf, settings),
            keepalived.check_address(layout.bind_addresses)).values())
    else:
        changed = loadbalancer.apply_config(conn, text, settings)
    drv.step('load balancer %s: %d master(s), %d worker(s)%s',
             conn.host, len(cluster.masters), len(cluster.workers),
             '' if changed else ' (unchanged)')


def prepare(drv, cluster, names=None):
    """Run the package's LB install script on every gateway (or on the
    gateways called *names*), if a script is given.

    :raises ParamsNotFound: the script cannot be read.
    """
    script = drv.spec.external_lb.script_path
    local = _script_file(drv, script)
    if local is None:
        return
    try:
        with open(local, 'rb') as f:
            content = f.read()
    except OSError as exc:
        raise exceptions.ParamsNotFound([
            '%s.external_lb_param.script_path: cannot read %s in the '
            'VNF package: %s' % (core.ROOT, script, exc.strerror)])
    proxies = inventory.proxy_environment(drv.spec, cluster)
    for _, conn in connections(drv, cluster, names):
        _run_script(drv, conn, content, proxies)


def _run_script(drv, conn, content, proxies):
    conn.write_file(LB_SCRIPT, content, mode=0o700)
    # The proxies (URLs may hold credentials) go on the script's
    # standard input, never on a command line (ps shows it to every
    # user of the VM); the variable only says that they are there.
    flag = ['%s=1' % LB_PROXY_FLAG] if proxies else []
    stdin = ''.join('%s=%s\n' % item for item in sorted(
        proxies.items())) or None
    # The script installs packages: root, through sudo for other users
    # (env after sudo, which would drop the variable otherwise); it is
    # a bash script whatever the VM's sh is.
    sudo = loadbalancer.ApplySettings.from_conf(
        drv.conf, drv.spec.external_lb.login.username).sudo
    ha = drv.spec.external_lb.highly_available
    drv.step('installing HAProxy%s and kubectl on %s',
             ', keepalived' if ha else '', conn.host)
    conn.run((['sudo', '-n'] if sudo else []) + ['env'] + flag +
             ['bash', LB_SCRIPT] + (['--with-keepalived'] if ha else []),
             stdin=stdin)


def _script_file(drv, script):
    if not script:
        return None
    if drv.lb_script:
        return drv.lb_script
    return os.path.join(drv.package_dir, script) \
        if drv.package_dir else None


def place_kubeconfig(drv, cluster, access, names=None):
    """A kubeconfig (0600) on every gateway, or on those called *names*,
    so kubectl works there."""
    for _, conn in connections(drv, cluster, names):
        conn.run(['mkdir', '-p', '-m', '0700', posixpath.dirname(
            LB_KUBECONFIG)])
        conn.write_file(LB_KUBECONFIG, registry.render_kubeconfig(access),
                        mode=0o600)


def rebuild(drv, cluster, vim_name, names=None):
    """Set up re-created gateways (a VNFC heal) from scratch.

    Their old host keys are forgotten first (a new VM has a new one;
    only keys the instance owns, :mod:`mgmt_driver.state.records`), then the
    install script and the kubeconfig are put in place again on them,
    and HAProxy's (and keepalived's) configuration on every gateway: the
    other gateways keep serving meanwhile and learn the new peer.

    :param names: the re-created gateways (default: the LB VM of a
        single-gateway cluster, :attr:`ClusterNodes.external_lb`).
    :returns: the cluster's :class:`~mgmt_driver.state.registry.ClusterAccess`.
    """
    if names is None:
        first_connection(drv, cluster)  # raises when there is no LB VM
        names = [cluster.external_lb.name]
    rebuilt = [g for g, _ in connections(drv, cluster, names)]
    for lb in rebuilt:
        drv.step('rebuilding the load balancer %s', lb.ssh_address)
    drv.forget_host_keys(cluster, [g.name for g in rebuilt], drop=False)
    prepare(drv, cluster, names)
    update(drv, cluster)
    # A new address must reach the joins of later operations.
    point_cluster_info(drv, cluster)
    access = drv.cluster_access(cluster, vim_name)
    place_kubeconfig(drv, cluster, access, names)
    return access


def add(drv, cluster, names, vim_name):
    """Set up the new gateways *names* (a scale-out of the gateway
    aspect): install script, HAProxy and keepalived on every gateway
    (the peers change), kubeconfig on the new ones."""
    drv.step('adding gateway(s) %s', ', '.join(names))
    prepare(drv, cluster, names)
    update(drv, cluster)
    place_kubeconfig(drv, cluster, drv.cluster_access(cluster, vim_name),
                     names)


def remove(drv, cluster, names):
    """Take the gateways *names* out (a scale-in of the gateway aspect,
    before their VMs are deleted).

    The remaining gateways get the new peer list first; then keepalived
    is stopped on the leaving ones (best effort), so the VIP moves to a
    staying gateway before Heat deletes the VM.

    :returns: the cluster without them.
    :raises MgmtDriverOtherError: *names* are every gateway.
    """
    remaining = cluster.remove(*names)
    if not remaining.gateways:
        raise exceptions.MgmtDriverOtherError(
            error_message='cannot remove every gateway (%s): the '
                          'cluster needs one' % ', '.join(names))
    settings = keepalived.settings_from_conf(
        drv.conf, loadbalancer.ApplySettings.from_conf(
            drv.conf, drv.spec.external_lb.login.username))
    command = keepalived.stop_command_from_conf(drv.conf)
    drv.step('removing gateway(s) %s', ', '.join(names))
    update(drv, remaining)
    for gateway, conn in connections(drv, cluster, names):
        try:
            keepalived.stop(conn, settings, command)
        except _REMOTE_ERRORS as exc:
            drv.warn('could not stop keepalived on the leaving gateway %s '
                     '(the VIP moves when its VM is deleted): %s',
                     gateway.name, exc)
    drv.upload_inventory(remaining)
    drv.forget_host_keys(cluster, names)
    return remaining


def point_cluster_info(drv, cluster):
    """Make ``kube-public/cluster-info`` name the cluster's discovery
    server (``drv.discovery_server``).

    Every ``kubeadm join`` kubespray runs discovers the cluster
    there; it was written once by ``kubeadm init`` on the first
    control-plane node and names a removed node or an old load
    balancer address after those were replaced.
    """
    server = drv.discovery_server(cluster)
    old = drv.kubectl_client(cluster).point_cluster_info(server)
    if old != server:
        drv.step('cluster-info names %s (was %s)', server, old)
