"""``kubespray-mgmt doctor``: is this host ready to run the driver?

A preflight, read only, that says every problem at once, one line each,
before an operation meets it half way:

* the configuration: values that cannot be used (:func:`conf.check`) and
  keys or sections oslo.config ignores silently (a typo such as
  ``host_key_polcy = reject`` would otherwise lose a security setting:
  :func:`conf.unknown_options`);
* this host's directories: the state store (``records_dir``, the
  directory of ``known_hosts_file``, ``kubeconfig_dir``, the store
  marker: :func:`statestore.report`), which must be writable or
  creatable, and the key files and directories, which must be readable;
* with a request's parameters: the Ansible server (reachable, the
  commands the detached runs use, ``ansible-playbook`` and its version
  against the range the kubespray checkout accepts, the checkout's own
  version against ``kubespray.version``), and each load balancer
  (reachable; sudo, when ``haproxy_sudo`` asks for it, and under it the
  HAProxy check command and :data:`LB_TOOLS`).

Nothing is changed on any host.  Host keys follow ``host_key_policy``
as for an operation: with ``accept-new`` the doctor's first login to a
host records its key, which every later operation then requires (a
check that accepted any key without recording it would hand a password
login to whoever answered, each time it ran).  Exit codes
(:func:`exit_code`): 0 no problem (warnings allowed), 1 a problem on this
host, 2 a problem on a remote host only, 3 both.
"""

import dataclasses
import os
import shlex

from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.common import safetext
from mgmt_driver.remote import kubespray
from mgmt_driver.remote import programs
from mgmt_driver.remote import ssh
from mgmt_driver.state import statestore

PROBLEM = 'problem'
WARNING = 'warning'
OK = 'ok'
NOTE = 'note'
#: Where a finding is, for the findings of this host.
LOCAL = 'local'

EXIT_OK = 0
EXIT_LOCAL = 1
EXIT_REMOTE = 2
EXIT_BOTH = EXIT_LOCAL | EXIT_REMOTE

#: What a detached playbook run needs on the Ansible server
#: (:mod:`mgmt_driver.remote.detached`, ``Workspace.replace``).
ANSIBLE_SERVER_TOOLS = ('flock', 'setsid', 'timeout', 'sha256sum', 'tar',
                        'mktemp')
#: What the load balancer's configuration installer (the remote program
#: ``lb-apply``, :mod:`mgmt_driver.remote.loadbalancer`) needs on each
#: gateway besides the HAProxy and keepalived commands: ``cmp``
#: (diffutils) compares the new file with the installed one.
LB_TOOLS = {'cmp': 'diffutils'}
#: The program :func:`_find_tools` sends.
TOOLS_PROGRAM = 'doctor-tools'

#: Errors a remote check turns into a finding.
_REMOTE_ERRORS = (exceptions.MgmtDriverOtherError,
                  exceptions.MgmtDriverRemoteCommandError,
                  exceptions.MgmtDriverRemoteCommandTimeOut)


@dataclasses.dataclass(frozen=True)
class Finding:
    """One line of the report.

    :param level: :data:`PROBLEM`, :data:`WARNING`, :data:`NOTE` or
        :data:`OK`.
    :param where: :data:`LOCAL`, or the remote host's address.
    :param text: what was found (escaped when printed).
    """

    level: str
    where: str
    text: str

    def line(self):
        return '%s: %s: %s' % (self.level, self.where, self.text)


def exit_code(findings):
    """:data:`EXIT_OK`, or the bits of :data:`EXIT_LOCAL` (a problem
    here) and :data:`EXIT_REMOTE` (a problem on a remote host)."""
    code = EXIT_OK
    for finding in findings:
        if finding.level == PROBLEM:
            code |= EXIT_LOCAL if finding.where == LOCAL else EXIT_REMOTE
    return code


# --------------------------------------------------------------- local --

def check_config(conf, foreign_sections=False):
    """The config files' unusable values and ignored keys.

    :param foreign_sections: report every section but ours and DEFAULT
        (a file of the ``kubespray-mgmt`` command holds nothing else).
    """
    found = [Finding(PROBLEM, LOCAL, text) for text in kconf.check(conf)]
    found += [Finding(PROBLEM, LOCAL, text) for text in
              kconf.unknown_options(conf, foreign_sections=foreign_sections)]
    files = kconf.config_files(conf)
    if not found:
        found.append(Finding(OK, LOCAL, 'configuration: %s' % (
            ', '.join(files) if files else 'no file, defaults only')))
    return found


def check_directories(conf):
    """The state store's directories, then the key files and
    directories (:data:`LOCAL` findings)."""
    found = state_findings(conf)
    for option, directory in statestore.locations(conf):
        if not os.path.exists(directory):
            found += _creatable(option, directory)
    return found + _key_findings(conf[kconf.GROUP])


def state_findings(conf):
    """The state store's report (:func:`statestore.report`) as
    :data:`LOCAL` findings: what ``state check`` prints."""
    levels = {'problem': PROBLEM, 'note': NOTE}
    return [Finding(levels.get(kind, OK), LOCAL, text)
            for kind, text in statestore.report(conf)]


def _creatable(option, directory):
    """A directory the driver will create: can this account create it?"""
    parent = os.path.dirname(os.path.abspath(directory))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if os.access(parent, os.W_OK | os.X_OK):
        return []
    return [Finding(PROBLEM, LOCAL, '[%s] %s: %s cannot be created: %s is '
                    'not writable by this account' % (
                        kconf.GROUP, option, directory, parent))]


def _key_findings(group):
    found = []
    for directory in group.ssh_key_dirs:
        if not os.path.isdir(directory):
            found.append(Finding(PROBLEM, LOCAL, '[%s] ssh_key_dirs: %s is '
                                 'not a directory' % (kconf.GROUP,
                                                      directory)))
        elif not os.access(directory, os.R_OK | os.X_OK):
            found.append(Finding(PROBLEM, LOCAL, '[%s] ssh_key_dirs: %s is '
                                 'not readable' % (kconf.GROUP, directory)))
    key = group.ssh_private_key_file
    if key:
        found += _key_file_findings(os.path.expanduser(key))
    return found


def _key_file_findings(path):
    name = '[%s] ssh_private_key_file' % kconf.GROUP
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return [Finding(PROBLEM, LOCAL, '%s: %s: %s' % (
            name, path, exc.strerror or exc))]
    if not os.access(path, os.R_OK):
        return [Finding(PROBLEM, LOCAL, '%s: %s is not readable by this '
                        'account' % (name, path))]
    if mode & 0o077:
        return [Finding(WARNING, LOCAL, '%s: %s is readable by other '
                        'accounts (mode %04o; want 0600)' % (
                            name, path, mode & 0o7777))]
    return []


# -------------------------------------------------------------- remote --

def doctor_settings(conf):
    """The SSH settings of the checks: an operation's (see the module
    on host keys)."""
    return ssh.SSHSettings.from_conf(conf)


def _find_tools(conn, tools, sudo=False):
    """``(found, missing)`` names of *tools* on *conn*'s host, or
    ``None, reason`` when the probe did not run to its end."""
    argv = ['sh', '-c', programs.program(TOOLS_PROGRAM), 'sh'] + list(tools)
    if sudo:
        argv = ['sudo', '-n'] + argv
    result = conn.run(argv, check=False)
    lines = result.stdout.splitlines()
    if 'KD:DONE' not in lines:
        return None, '%s exited %s: %s' % (
            'sudo -n' if sudo else 'sh', result.exit_code,
            safetext.clip(result.tail(3) or '(no output)', 300))
    found = {line[len('KD:HAVE:'):] for line in lines
             if line.startswith('KD:HAVE:')}
    return found, [t for t in tools if t not in found]


def check_ansible_server(spec, pool, conf):
    """The Ansible server of *spec*: reachable, its tools, its
    ``ansible-playbook`` and kubespray checkout."""
    ansible = spec.ansible
    where = ansible.ip_address
    group = conf[kconf.GROUP]
    command = group.ansible_playbook_command
    try:
        conn = pool.connection(where, ssh.credentials_for(ansible.login),
                               ansible.login.port)
        found, missing = _find_tools(
            conn, ANSIBLE_SERVER_TOOLS + (command,))
    except _REMOTE_ERRORS as exc:
        return [Finding(PROBLEM, where, 'cannot log in as %s: %s' % (
            ansible.login.username, exceptions.plain_message(exc)))]
    if found is None:
        return [Finding(PROBLEM, where, 'the tool check failed: %s'
                        % missing)]
    findings = [Finding(PROBLEM, where, '%s not found on the PATH of %s%s'
                        % (tool, ansible.login.username, _hint(tool, command)))
                for tool in missing]
    if not missing:
        findings.append(Finding(OK, where, 'logged in as %s; found %s' % (
            ansible.login.username, ', '.join(ANSIBLE_SERVER_TOOLS + (
                command,)))))
    return findings + _checkout_findings(conn, spec, command)


def _hint(tool, command):
    if tool == command:
        return (' ([kubespray_mgmt] ansible_playbook_command: an absolute '
                'path, e.g. in the virtualenv holding kubespray\'s '
                'requirements)')
    return ''


def _checkout_findings(conn, spec, command):
    root = spec.ansible.kubespray_root_path
    where = conn.host
    try:
        layout = kubespray.detect_layout(conn, root, command)
        kubespray.check_version(layout, spec.kubespray.version, where, root)
        kubespray.check_ansible(layout, where, root, command)
    except _REMOTE_ERRORS as exc:
        return [Finding(PROBLEM, where, exceptions.plain_message(exc))]
    findings = [Finding(OK, where, 'kubespray checkout %s: version %s' % (
        root, layout.version or 'unknown (no git tag, no galaxy.yml)'))]
    if layout.ansible is None:
        findings.append(Finding(WARNING, where, '%s --version printed no '
                                'version: the checkout\'s first play checks '
                                'it' % command))
    elif layout.ansible_range is None:
        findings.append(Finding(OK, where, 'ansible-playbook %s (the '
                                'checkout names no range)' % layout.ansible))
    else:
        findings.append(Finding(OK, where, 'ansible-playbook %s, in the '
                                'range the checkout accepts (%s <= version '
                                '< %s)' % ((layout.ansible,) +
                                           layout.ansible_range)))
    return findings


def check_load_balancers(spec, cluster, pool, conf):
    """Each gateway of *cluster*: reachable, sudo when ``haproxy_sudo``
    uses it, and the HAProxy check command and :data:`LB_TOOLS` under
    it."""
    login = spec.external_lb.login if spec.external_lb else None
    if login is None or not cluster.gateways:
        return []
    group = conf[kconf.GROUP]
    sudo = kconf.use_sudo(group.haproxy_sudo, login.username)
    checker = (shlex.split(group.haproxy_check_command) or ['haproxy'])[0]
    return [finding for node in cluster.gateways
            for finding in _gateway_findings(node, login, pool, sudo,
                                             checker)]


def _gateway_findings(node, login, pool, sudo, checker):
    where = node.ssh_address
    try:
        conn = pool.connection(where, ssh.credentials_for(login),
                               node.ssh_port)
        found, missing = _find_tools(conn, (checker,) + tuple(LB_TOOLS),
                                     sudo=sudo)
    except _REMOTE_ERRORS as exc:
        return [Finding(PROBLEM, where, 'cannot log in as %s: %s' % (
            login.username, exceptions.plain_message(exc)))]
    how = 'under sudo -n' if sudo else 'without sudo ([kubespray_mgmt] ' \
        'haproxy_sudo)'
    if found is None:
        return [Finding(PROBLEM, where, 'the load balancer\'s commands run '
                        '%s, which failed: %s' % (how, missing))]
    if missing:
        return [Finding(PROBLEM, where,
                        _missing_on_gateway(tool, checker, how))
                for tool in missing]
    return [Finding(OK, where, 'logged in as %s; %s found %s' % (
        login.username, ', '.join((checker,) + tuple(LB_TOOLS)), how))]


def _missing_on_gateway(tool, checker, how):
    """What a gateway without *tool* is told: the option that names it,
    or what needs it and the package that has it."""
    if tool == checker:
        return '%s (haproxy_check_command) not found %s' % (checker, how)
    return ('%s not found %s: the driver compares each new load balancer '
            'configuration with the installed one with it (install %s)'
            % (tool, how, LB_TOOLS[tool]))


def check_all(conf, spec=None, cluster=None, pool=None,
              foreign_sections=False):
    """Every finding: this host's, then the remote hosts' when *spec*
    (and for the load balancers *cluster*) and *pool* are given."""
    findings = check_config(conf, foreign_sections)
    if kconf.check(conf):  # the checks below would read those values
        return findings + [Finding(WARNING, LOCAL, 'nothing else checked '
                                   'until the configuration is fixed')]
    findings += check_directories(conf)
    if spec is not None and pool is not None:
        findings += check_ansible_server(spec, pool, conf)
        if cluster is not None:
            findings += check_load_balancers(spec, cluster, pool, conf)
    return findings
