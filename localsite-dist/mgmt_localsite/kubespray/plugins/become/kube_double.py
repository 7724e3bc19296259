# kubespray TEST DOUBLE (localsite-dist/mgmt_localsite/README.rst).
"""Ansible's ``sudo`` become plugin, with the site's sudo.

The driver runs kubespray with ``--become`` (real kubespray needs root;
its playbooks set no ``become`` of their own, so every task of a host
play escalates, the first one being the bootstrap play's ``raw``).  On
the local test site every host is one machine and the SSH user has no
sudo, so the double's ansible.cfg selects this plugin: Ansible's own
``sudo`` plugin, unchanged (flags ``-H -S -n``, ``-n`` dropped and a
``-p`` prompt added when a become password is set, the BECOME-SUCCESS
handshake), except that the program it runs is the site's
``bin/kube-sudo`` (``fake_sudo.py``).  That program asks a password on
the hosts the site says need one and runs the command as the login user
(a host the site does not list gets the handshake alone, as the old
no-op plugin did: the tests that do not ask for sudo pay nothing),
so a host without NOPASSWD fails as with real kubespray ("Missing ...
password" when none is set, "Incorrect ... password" when it is wrong).
The run log (kube_double_runs callback) records whether ``--become`` was
given, so tests can still check the driver's argv.
"""

import json
import os
import shlex

from ansible.plugins.become import BecomeBase
from ansible.plugins.become.sudo import BecomeModule as SudoBecomeModule

DOCUMENTATION = """
    name: kube_double
    short_description: sudo through the local site's bin/kube-sudo
    description:
      - Ansible's sudo plugin running the kubespray test double's sudo;
        for the local test site only.
    author: kubespray-mgmt tests
    options:
      become_user:
        description: The user asked for; kube-sudo runs as the login user.
        default: root
        ini:
          - section: privilege_escalation
            key: become_user
        vars:
          - name: ansible_become_user
        env:
          - name: ANSIBLE_BECOME_USER
        keyword:
          - name: become_user
      become_flags:
        description: Options passed to sudo.
        default: -H -S -n
        ini:
          - section: privilege_escalation
            key: become_flags
        vars:
          - name: ansible_become_flags
        env:
          - name: ANSIBLE_BECOME_FLAGS
        keyword:
          - name: become_flags
      kube_double_address:
        description: The host's SSH address, to look up in the site's
          state/sudo.json whether its sudo asks a password.
        vars:
          - name: ansible_host
      become_pass:
        description: Password sudo is given when it asks one.
        required: false
        vars:
          - name: ansible_become_password
          - name: ansible_become_pass
          - name: ansible_sudo_pass
        env:
          - name: ANSIBLE_BECOME_PASS
        ini:
          - section: sudo_become_plugin
            key: password
"""

#: ``<site>``: this file is ``<site>/kubespray/plugins/become/kube_double.py``.
SITE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
KUBE_SUDO = os.path.join(SITE, 'bin', 'kube-sudo')


def _asking(address):
    """Whether the site's sudo asks the host at *address* a password
    (fake_sudo.py's table; its state directory, as kube-sudo finds it)."""
    state = os.environ.get('KUBE_SUDO_STATE_DIR') or os.path.join(
        SITE, 'state')
    try:
        with open(os.path.join(state, 'sudo.json')) as f:
            return address in json.load(f)
    except (OSError, ValueError):
        return False


class BecomeModule(SudoBecomeModule):

    name = 'kube_double'

    def build_become_command(self, cmd, shell):
        address = self.get_option('kube_double_address')
        if address is None or _asking(address):
            return super().build_become_command(cmd, shell)
        # NOPASSWD, as kube-sudo would find it, without starting it for
        # every task of every test: only the BECOME-SUCCESS handshake.
        BecomeBase.build_become_command(self, cmd, shell)
        return self._build_success_command(cmd, shell) if cmd else cmd

    def get_option(self, option, *args, **kwargs):
        if option == 'become_exe':
            return shlex.quote(KUBE_SUDO)
        return super().get_option(option, *args, **kwargs)
