"""Ansible's SSH master connections (``ControlPersist``) to one node of a
workspace, as the functional tests that remove or heal a node see them
on the site's Ansible server."""

import os
import pathlib

import yaml
from mgmt_localsite import procs

from mgmt_driver.remote import isolation


def socket_of(workspace, node):
    """The name of the control socket of Ansible's SSH master to the
    inventory host *node* of *workspace*, from its host and login."""
    ws = pathlib.Path(workspace)
    host = yaml.safe_load((ws / 'hosts.yaml').read_text())[
        'all']['hosts'][node] or {}
    host_vars = ws / 'host_vars' / (node + '.yaml')
    if host_vars.exists():
        host = {**host, **yaml.safe_load(host_vars.read_text())}
    return isolation.control_socket_name(
        host['ansible_host'], host['ansible_port'], host['ansible_user'])


def running(workspace, socket_name):
    """PIDs of the SSH masters at *socket_name* of *workspace*: a
    master's title is ``ssh: SOCKET [mux]``."""
    control = isolation.control_path_dir(str(workspace))
    control = control[2:] if control.startswith('~/') else control
    found = []
    for entry in os.listdir('/proc'):
        argv = procs.cmdline(int(entry)) if entry.isdigit() else []
        if argv and argv[0].startswith('ssh: ') and control in argv[0] \
                and argv[0].split()[1].endswith('/' + socket_name):
            found.append(int(entry))
    return found
