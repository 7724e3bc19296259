"""What keeps the workspaces of one Ansible server apart.

A module of its own (not in DESIGN's list): one Ansible server, often
one account, serves many VNF instances of many tenants, and three things
there are shared unless the driver separates them
(doc/source/security/threat-model.rst, "The shared Ansible server"):

* **Ansible's fact cache.**  kubespray's ``ansible.cfg`` puts it in
  ``/tmp``, keyed by inventory host name; node names come from role and
  address, which clusters on private networks share.  Every run gets
  its own jsonfile cache in the workspace (:func:`fact_cache_dir`).
* **SSH master connections.**  kubespray's ``ansible.cfg`` sets
  ``ControlPersist=30m``; Ansible keys the sockets by host, port and
  user in ``~/.ansible/cp``, so one tenant's request naming another's
  node would ride that tenant's open connection, without its
  credentials.  Every workspace gets its own directory
  (:func:`control_path_dir`).
* **The directories above the workspace.**  An account that can write
  one of them can swap the workspace for its own, whose inventory and
  vars then steer a playbook run as the driver's account.  Every remote
  program that enters the workspace first runs the shell function
  ``ws_guard`` (``mgmt_driver/remote/scripts/lib/ws_guard.sh``, which each
  program takes with ``. lib/ws_guard.sh``): each existing directory of
  the path, the links in it and the directories they lead to must
  belong to root or to the account itself, and none may be writable by
  group or others unless it has the sticky bit (``/tmp``); missing ones
  are created one at a time (mode 0700) and checked again.  And the
  inventory is read by Ansible's ``yaml`` plugin only, never run as a
  script.

:func:`playbook_env` is the environment of every ``ansible-playbook``
run (:class:`~mgmt_driver.remote.kubespray.Runner`).
"""

import hashlib
import posixpath

from mgmt_driver.common import exceptions

#: Per-workspace state of Ansible, under the workspace.  The detached
#: runner leaves it out of a run's input hash (it changes during a run).
STATE_DIR = '.ansible'
#: Ansible's jsonfile fact cache of the workspace.
FACT_CACHE = STATE_DIR + '/facts'
_CONTROL_DIR = STATE_DIR + '/cp'
#: Longest control path directory: Ansible names a socket
#: ``<dir>/<10 hex>`` and ssh binds ``<that>.<16 random>`` first; a
#: UNIX socket path has 107 bytes (108 with its NUL).  A margin of 9.
MAX_CONTROL_DIR = 107 - 1 - 10 - 17 - 9
#: Where a workspace whose path is too long keeps its sockets: Ansible's
#: own default directory, one subdirectory per workspace (``~`` is
#: expanded by Ansible on the server).
HOME_CONTROL_BASE = '~/.ansible/cp'

#: Exit status of a remote program that refused the workspace's path
#: (``ws_guard ... || exit 97`` in each program).
UNSAFE_EXIT = 97
_UNSAFE = 'WS:UNSAFE:'


def fact_cache_dir(workspace_path):
    """The fact cache directory of the workspace (absolute)."""
    return posixpath.join(workspace_path, FACT_CACHE)


def control_path_dir(workspace_path):
    """The workspace's own SSH control path directory.

    ``<workspace>/.ansible/cp`` when that is short enough for a UNIX
    socket (see :data:`MAX_CONTROL_DIR`); else
    ``~/.ansible/cp/<16 hex of the workspace path's SHA-256>``, still
    one per workspace, in Ansible's own directory of the account.
    """
    inside = posixpath.join(workspace_path, _CONTROL_DIR)
    if len(inside.encode('utf-8')) <= MAX_CONTROL_DIR:
        return inside
    digest = hashlib.sha256(workspace_path.encode('utf-8')).hexdigest()
    return '%s/%s' % (HOME_CONTROL_BASE, digest[:16])


def control_socket_name(host, port, user):
    """The name Ansible gives, in :func:`control_path_dir`, the socket of
    its SSH master to *host*: ``ANSIBLE_SSH_CONTROL_PATH`` is empty
    (:func:`playbook_env`), so its ssh connection plugin names it by the
    first 10 hex digits of the SHA-1 of ``HOST-PORT-USER`` (the host's
    ``ansible_host``, ``ansible_port`` and ``ansible_user``)."""
    text = '%s-%s-%s' % (host, port, user)
    return hashlib.sha1(text.encode('utf-8'),
                        usedforsecurity=False).hexdigest()[:10]


def playbook_env(workspace_path):
    """Environment variables that give a run the workspace's own fact
    cache and SSH masters, and an inventory that cannot be a script.

    ``ANSIBLE_SSH_CONTROL_PATH`` is set empty so that a ``control_path``
    in the checkout's ``ansible.cfg`` does not pool the sockets again
    (Ansible then names them itself, inside the directory); a
    ``-o ControlPath`` in its ``ssh_args`` still would (see the threat
    model).  The cache plugin is forced to ``jsonfile`` because the
    connection is a directory; the timeout stays the checkout's.

    :returns: ``{name: value}`` (no secret: paths and switches).
    """
    return {
        'ANSIBLE_CACHE_PLUGIN': 'jsonfile',
        'ANSIBLE_CACHE_PLUGIN_CONNECTION': fact_cache_dir(workspace_path),
        'ANSIBLE_SSH_CONTROL_PATH_DIR': control_path_dir(workspace_path),
        'ANSIBLE_SSH_CONTROL_PATH': '',
        'ANSIBLE_INVENTORY_ENABLED': 'yaml',
        'ANSIBLE_INVENTORY_UNPARSED_FAILED': 'true',
    }


def refusal(result, path):
    """The :class:`~mgmt_driver.common.exceptions.UnsafeRemotePath` a guarded
    program's *result* reports, or None when it did not refuse.

    :param path: the workspace path the program was given.
    """
    if result.exit_code != UNSAFE_EXIT:
        return None
    for line in result.stdout.splitlines():
        if line.startswith(_UNSAFE):
            where, _, why = _printable(line[len(_UNSAFE):]).rpartition(
                ':')
            return exceptions.UnsafeRemotePath(
                path=path, reason='%s %s on %s: another account could '
                'swap the workspace (%s)' % (
                    exceptions.clip(where, 200), exceptions.clip(why, 120),
                    result.host, 'transferring_inventory_path must lie in '
                    'directories only root and this account can write'))
    return None


def _printable(text):
    # Remote output: a hostile path may hold escape sequences.
    return ''.join(ch if ch.isprintable() else '?' for ch in text)
