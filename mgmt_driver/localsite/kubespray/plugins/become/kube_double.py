# kubespray TEST DOUBLE (mgmt_driver/localsite/README.rst).
"""Become plugin that escalates nothing.

The driver runs kubespray with ``--become`` (real kubespray needs root).
On the local test site every host is one machine and the SSH user is an
unprivileged test user without sudo, so the double's ansible.cfg selects
this plugin: the command runs unchanged as the login user, and the usual
BECOME-SUCCESS handshake still happens, so Ansible's become code path is
exercised.  The run log (kube_double_runs callback) records whether
``--become`` was given, so tests can still check the driver's argv.
"""

from ansible.plugins.become import BecomeBase

DOCUMENTATION = """
    name: kube_double
    short_description: No privilege escalation (kubespray test double)
    description:
      - Runs the command as the login user; for the local test site only.
    author: kubespray-mgmt tests
    options:
      become_user:
        description: The user asked for; not used.
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
"""


class BecomeModule(BecomeBase):

    name = 'kube_double'

    def build_become_command(self, cmd, shell):
        super().build_become_command(cmd, shell)
        if not cmd:
            return cmd
        return self._build_success_command(cmd, shell)
