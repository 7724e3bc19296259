"""Configuration options, group ``[kubespray_mgmt]``.

Inside Tacker these options live in tacker.conf (the driver registers them
on Tacker's global ``cfg.CONF``); the ``kubespray-mgmt`` command reads them
from ``--config-file``.  Values in a request's ``additionalParams`` (for
example ``kubespray.forks`` or a role's ``ssh_key_file``) override the
matching option for that request.  ``oslo-config-generator --namespace
mgmt_driver`` lists them with their help (``tox -e genconfig``).
"""

import difflib
import glob
import ipaddress
import os

from oslo_config import cfg
from oslo_config import iniparser

GROUP = 'kubespray_mgmt'


def _new_group():
    return cfg.OptGroup(
        GROUP, title='Kubespray MgmtDriver options',
        help='How the kubespray MgmtDriver reaches VMs over SSH and how '
             'long it waits for kubespray, kubectl and HAProxy.')


kubespray_mgmt_group = _new_group()

ssh_opts = [
    cfg.IntOpt('ssh_connect_timeout', default=10, min=1, max=300,
               help='Seconds to wait for one TCP connect, SSH banner or '
                    'authentication attempt.'),
    cfg.IntOpt('ssh_connect_retries', default=10, min=0, max=1000,
               help='How many times a failed SSH connection is retried '
                    '(VMs that are still booting refuse connections). '
                    'Authentication and host key failures are never '
                    'retried.'),
    cfg.IntOpt('read_only_connect_timeout', default=5, min=1, max=300,
               help='What ssh_connect_timeout is for the read-only '
                    'commands (kubespray-mgmt status, logs): seconds to '
                    'wait for one TCP connect, SSH banner or '
                    'authentication attempt.'),
    cfg.IntOpt('read_only_connect_retries', default=0, min=0, max=1000,
               help='What ssh_connect_retries is for the read-only '
                    'commands (kubespray-mgmt status, logs). They connect '
                    'to each host once per command (1 + this many '
                    'attempts): a host that could not be reached is not '
                    'tried again by the next part of the report.'),
    cfg.FloatOpt('ssh_retry_initial_delay', default=1.0, min=0.0, max=60.0,
                 help='Seconds before the first SSH connection retry; the '
                      'delay doubles after each attempt.'),
    cfg.FloatOpt('ssh_retry_max_delay', default=15.0, min=0.0, max=600.0,
                 help='Upper bound, in seconds, of the delay between two '
                      'SSH connection attempts.'),
    cfg.IntOpt('ssh_command_timeout', default=600, min=1, max=86400,
               help='Default timeout in seconds of one remote command. '
                    'Playbook runs use the playbook_timeout_* options '
                    'instead.'),
    cfg.IntOpt('ssh_master_exit_timeout', default=5, min=1, max=300,
               help='Seconds the Ansible server waits for one of the SSH '
                    'master connections Ansible kept for a workspace '
                    '(ControlPersist) to close when the workspace is '
                    'removed, or when a scale-in or heal took its node '
                    'out. A master that does not answer within it is '
                    'left, with a warning naming the host.'),
    cfg.IntOpt('sftp_timeout', default=120, min=1, max=3600,
               help='Seconds one SFTP exchange (starting the SFTP '
                    'subsystem, opening, reading, writing or renaming a '
                    'file) waits for the server\'s answer before the '
                    'transfer fails, naming the host. A server that '
                    'accepts the subsystem and never answers cannot hold '
                    'a hook longer than this (nor past its hook_deadline). '
                    'The request to start a command or the SFTP subsystem '
                    'on an open connection waits at most '
                    'ssh_connect_timeout.'),
    cfg.StrOpt('host_key_policy', default='accept-new',
               choices=[('reject', 'refuse any host key that is not '
                                   'already in known_hosts_file'),
                        ('accept-new', 'trust a host key on first use and '
                                       'record it in known_hosts_file'),
                        ('warn', 'accept an unknown host key with a '
                                 'warning, without recording it')],
               help='What to do with an SSH host key that is not yet known. '
                    'A key that differs from the recorded one is always '
                    'refused, whatever the policy.'),
    cfg.StrOpt('known_hosts_file', default='~/.kubespray-mgmt/known_hosts',
               help='known_hosts file owned by this driver (OpenSSH '
                    'format, mode 0600). The user\'s ~/.ssh/known_hosts is '
                    'never read or written.'),
    cfg.StrOpt('records_dir',
               help='Directory of the driver\'s own record of each VNF '
                    'instance (<instance id>.json, mode 0600): the hosts '
                    'it connected to or put in the inventory and the VIM '
                    'it registered. Terminate forgets exactly these host '
                    'keys and deletes only that VIM. Default: "records" '
                    'beside known_hosts_file.'),
    cfg.StrOpt('ssh_private_key_file',
               help='Private key file on this host used for every SSH login '
                    'whose request gives no password and no key file of '
                    'its own. It is copied to the Ansible server only when '
                    'that server is in default_key_ansible_servers.'),
]

kubespray_opts = [
    cfg.IntOpt('playbook_timeout_base', default=1800, min=60, max=172800,
               help='Fixed part, in seconds, of the timeout of one '
                    'ansible-playbook run.'),
    cfg.IntOpt('playbook_timeout_per_node', default=600, min=0, max=86400,
               help='Seconds added to the playbook timeout for each node '
                    'the playbook targets.'),
    cfg.IntOpt('playbook_logs_keep', default=30, min=1, max=10000,
               help='Logs of playbook runs kept in each instance\'s '
                    'workspace on the Ansible server (logs/); older ones '
                    'are deleted when a run starts.'),
    cfg.IntOpt('logs_follow_poll', default=5, min=1, max=300,
               help='Seconds "kubespray-mgmt logs --follow" waits between '
                    'looks for the next playbook run of the operation '
                    'still running (as the instance\'s record says) once '
                    'the run it followed ended.'),
    cfg.IntOpt('logs_follow_next_wait', default=1800, min=0, max=86400,
               help='Seconds "kubespray-mgmt logs --follow" waits at most '
                    'for the next playbook run of a running operation '
                    'before it stops (a record left "running" by a '
                    'conductor that died ends no other way).'),
    cfg.IntOpt('playbook_lock_wait', default=0, min=0, max=86400,
               help='Seconds an operation waits for another playbook run '
                    'of the same cluster (another operation, or one left '
                    'running by a conductor that died) to end before it '
                    'is refused. A hook run again for the same operation '
                    'follows its own running playbook instead.'),
    cfg.IntOpt('playbook_lock_poll', default=5, min=1, max=300,
               help='Seconds between two looks at the playbook run that '
                    'holds the cluster\'s lock while an operation waits '
                    'for it (playbook_lock_wait).'),
    cfg.IntOpt('max_parallel_playbooks_per_server', default=4, min=0,
               max=1000,
               help='Playbook runs one Ansible server account runs at once, '
                    'for all the VNF instances and conductors that use it '
                    '(0: no limit). Enforced on the Ansible server with '
                    'flock(1)ed slot files in '
                    '~/.kubespray-mgmt/playbook-slots; a run that finds '
                    'every slot taken waits (reported as progress) for at '
                    'most its own playbook timeout, then fails without '
                    'having run. Every conductor sharing an account should '
                    'set the same value: a run takes one of the first N '
                    'slots of its own setting.'),
    cfg.IntOpt('playbook_slot_wait', default=3600, min=0, max=86400,
               help='Seconds a playbook run waits at most for a playbook '
                    'slot of its Ansible server '
                    '(max_parallel_playbooks_per_server), and never past '
                    'its hook_deadline. A run that gets none in time is '
                    'refused before ansible-playbook starts, naming this '
                    'option. Waiting runs are served in order of arrival, '
                    'a run that restores capacity ahead (see '
                    'playbook_slot_priority_lead).'),
    cfg.IntOpt('playbook_slot_hold_max', default=21600, min=600,
               max=172800,
               help='Seconds one playbook run may hold a playbook slot, '
                    'whatever the size of the request: with slots '
                    '(max_parallel_playbooks_per_server above 0), a run\'s '
                    'timeout (playbook_timeout_base plus '
                    'playbook_timeout_per_node per node) is cut to this, '
                    'so no instance holds a slot the other instances wait '
                    'for for longer.'),
    cfg.IntOpt('playbook_slot_priority_lead', default=3600, min=0,
               max=86400,
               help='Head start, in seconds, that each priority class has '
                    'over the next one in the queue for playbook slots: '
                    'heal runs first, then scale-out and instantiate, then '
                    'every other operation (upgrade, relabel, certificate '
                    'renewal, scale-in, ...). A waiting run is served as if '
                    'it had arrived this many seconds earlier per class '
                    'ahead, so a heal goes before upgrades queued less than '
                    'twice this long, and nothing waits forever. 0: plain '
                    'order of arrival.'),
    cfg.IntOpt('fact_cache_margin', default=3600, min=0, max=86400,
               help='Before a kubespray run limited to some nodes, the '
                    'facts of the hosts it leaves out are gathered again '
                    'only when their entry in Ansible\'s fact cache is '
                    'missing or expires within this many seconds (at most '
                    'half the cache\'s timeout); fresh entries are kept.'),
    cfg.IntOpt('ansible_forks', default=10, min=1, max=500,
               help='ansible-playbook --forks; a request\'s '
                    'kubespray.forks overrides it.'),
    cfg.StrOpt('ansible_playbook_command', default='ansible-playbook',
               help='ansible-playbook on the Ansible server: a name on the '
                    'SSH user\'s PATH or an absolute path, such as the '
                    'one in the virtualenv that holds kubespray\'s '
                    'requirements (a non-interactive SSH session does not '
                    'activate it).'),
    cfg.IntOpt('drain_timeout', default=600, min=10, max=86400,
               help='Seconds "kubectl drain" may take before the node '
                    'removal fails.'),
    cfg.IntOpt('rolling_gate_timeout', default=600, min=10, max=7200,
               help='Seconds a rolling node replacement (Tacker v2\'s '
                    'Change current VNF package) waits, after a node '
                    'rejoined, for it to be Ready and the API to answer '
                    'through the load balancer before it stops with the '
                    'nodes replaced so far.'),
    cfg.IntOpt('kubectl_timeout', default=120, min=5, max=3600,
               help='Timeout in seconds of one kubectl command other than '
                    'drain.'),
    cfg.FloatOpt('poll_initial_delay', default=1.0, min=0.1, max=60.0,
                 help='First delay, in seconds, when polling for a state '
                      '(pods evacuated, node gone); it doubles up to '
                      'poll_max_delay until the step\'s deadline.'),
    cfg.FloatOpt('poll_max_delay', default=10.0, min=0.1, max=300.0,
                 help='Upper bound, in seconds, of the delay between two '
                      'polls.'),
]

lb_opts = [
    cfg.StrOpt('haproxy_config_path', default='/etc/haproxy/haproxy.cfg',
               help='HAProxy configuration file on the external load '
                    'balancer VM. The driver replaces it as a whole; the '
                    'previous file is kept as <path>.bak and the new one '
                    'is checked first as <path>.new.'),
    cfg.StrOpt('haproxy_check_command', default='haproxy -c -f',
               help='Command, split like a shell would (no shell runs it), '
                    'that checks a configuration file on the LB VM; the '
                    'file path is appended. A non-zero exit refuses the '
                    'new configuration.'),
    cfg.StrOpt('haproxy_reload_command', default='systemctl reload haproxy',
               help='Command, split like a shell would (no shell runs it), '
                    'that makes HAProxy load the new configuration without '
                    'cutting established connections. "systemctl '
                    'reload-or-restart haproxy" also starts a stopped '
                    'HAProxy.'),
    cfg.StrOpt('haproxy_sudo', default='auto',
               choices=[('auto', 'use "sudo -n" when the LB SSH user is '
                                 'not root'),
                        ('always', 'always use "sudo -n"'),
                        ('never', 'never use sudo; the SSH user must be '
                                  'able to write the configuration '
                                  'directory and reload HAProxy')],
               help='Whether the commands that replace the HAProxy '
                    'configuration and reload it run under "sudo -n" '
                    '(passwordless sudo) on the LB VM. When the LB login '
                    'has a sudo password (external_lb_param.'
                    'become_password, else ssh_password unless '
                    'passwordless_sudo), sudo gets it on standard input.'),
    cfg.ListOpt('haproxy_bind_addresses', default=[],
                help='Addresses the HAProxy frontends (API port and '
                     'NodePort range) listen on. Empty: every IPv4 '
                     'address, and every IPv6 address too when a node '
                     'has an IPv6 cluster address.'),
    cfg.StrOpt('haproxy_user', default='haproxy',
               help='System user HAProxy drops to after binding its '
                    'ports. Empty: no "user" line; HAProxy keeps running '
                    'as the user that started it.'),
    cfg.StrOpt('haproxy_group', default='haproxy',
               help='System group HAProxy drops to. Empty: no "group" '
                    'line.'),
    cfg.StrOpt('haproxy_chroot', default='/var/lib/haproxy',
               help='Directory HAProxy chroots into. Empty: no chroot, '
                    'as needed when HAProxy does not start as root.'),
    cfg.IntOpt('haproxy_maxconn', default=20000, min=1, max=1000000,
               help='HAProxy\'s global and per-frontend connection limit. '
                    'HAProxy needs about two file descriptors per '
                    'connection and refuses to start when it cannot get '
                    'them.'),
    cfg.StrOpt('haproxy_stats_socket', default='',
               help='Path of a read-only HAProxy runtime socket ("stats '
                    'socket ... level user", mode 0600) the driver adds '
                    'to the configuration, from which "kubespray-mgmt '
                    'status" reads the health of every backend ("show '
                    'stat", sent with python3 on the LB VM). Its directory '
                    'must exist on the LB VM. Empty: no socket; status '
                    'lists the configured backends without their '
                    'health.'),
    cfg.StrOpt('keepalived_config_path',
               default='/etc/keepalived/keepalived.conf',
               help='keepalived configuration file on each gateway (with '
                    'external_lb_param.vip). Replaced as a whole, mode '
                    '0600 (it holds the VRRP password), checked first as '
                    '<path>.new.'),
    cfg.StrOpt('keepalived_check_command', default='keepalived -t -f',
               help='Command, split like a shell would (no shell runs it), '
                    'that checks a keepalived configuration file on a '
                    'gateway; the file path is appended. A non-zero exit '
                    'refuses the new configuration.'),
    cfg.StrOpt('keepalived_reload_command',
               default='systemctl reload-or-restart keepalived',
               help='Command, split like a shell would (no shell runs it), '
                    'that makes keepalived load the new configuration, '
                    'starting it where it does not run yet.'),
    cfg.StrOpt('keepalived_stop_command', default='systemctl stop keepalived',
               help='Command, split like a shell would (no shell runs it), '
                    'that stops keepalived on a gateway a scale-in '
                    'removes, so the VIP moves before its VM is deleted.'),
]

kubectl_opts = [
    cfg.StrOpt('kubectl_command', default='kubectl',
               help='kubectl on the control-plane nodes (a name on PATH '
                    'or an absolute path; kubespray installs '
                    '/usr/local/bin/kubectl).'),
    cfg.StrOpt('kubectl_kubeconfig', default='/etc/kubernetes/admin.conf',
               help='kubeconfig used on the control-plane nodes; empty '
                    'for kubectl\'s default.'),
    cfg.StrOpt('kubectl_sudo', default='auto',
               choices=[('auto', 'use "sudo -n" when the master SSH user '
                                 'is not root'),
                        ('always', 'always use "sudo -n"'),
                        ('never', 'never use sudo')],
               help='Whether kubectl runs under sudo on the control-plane '
                    'nodes (admin.conf is readable by root only). sudo gets '
                    'master_node\'s sudo password (become_password, else '
                    'password unless passwordless_sudo) on standard input.'),
    cfg.StrOpt('etcdctl_command', default='/usr/local/bin/etcdctl.sh',
               help='etcdctl on the control-plane nodes, for "kubespray-mgmt '
                    'status" (etcd members); kubespray installs this '
                    'wrapper, which passes the endpoints and client '
                    'certificates. Runs under sudo as kubectl_sudo says.'),
    cfg.IntOpt('etcd_member_wait', default=300, min=10, max=3600,
               help='Seconds the driver waits, before an operation that '
                    'removes an etcd member (the heal of a control-plane '
                    'node), until every member that stays is started and '
                    'healthy and has been so for 5 s (etcd refuses the '
                    'removal otherwise: "unhealthy cluster"). Past it the '
                    'operation stops before removing anything, naming the '
                    'members not ready.'),
    cfg.StrOpt('admin_service_account', default='tacker-admin',
               help='ServiceAccount (in kube-system) whose token the '
                    'driver registers as the Kubernetes VIM\'s credential.'),
    cfg.StrOpt('kubeconfig_dir', default='~/.kubespray-mgmt/clusters',
               help='Outside Tacker: directory where the kubeconfig of '
                    'each cluster is written (mode 0600).'),
]

trust_opts = [
    cfg.ListOpt('ssh_key_dirs', default=[],
                help='Directories on this host from which a request\'s '
                     'absolute ssh_key_file may be read (links are resolved '
                     'and must stay inside). A relative ssh_key_file is '
                     'read from the instance\'s own VNF package. Empty: '
                     'requests may name only keys in their VNF package. '
                     'The key is copied to the Ansible server the request '
                     'names.'),
    cfg.ListOpt('default_key_ansible_servers', default=[],
                help='Ansible servers (addresses or CIDRs) to which the '
                     'driver may COPY ssh_private_key_file, so that '
                     'Ansible there logs in to nodes whose request gives '
                     'no password or key of its own. The key then LEAVES '
                     'this host: list only servers the operator controls. '
                     'Empty: never copied; such requests are refused. The '
                     'driver\'s own logins to these servers may use the '
                     'key too.'),
    cfg.ListOpt('default_key_login_hosts', default=[],
                help='Hosts (addresses or CIDRs) where the driver\'s own '
                     'logins may use ssh_private_key_file when a request '
                     'names them: its ansible.ip_address and the ssh_ip of '
                     'its nodes entries, and VMs found in Heat of a VIM '
                     'not in trusted_vim_auth_urls. A request that names '
                     'another address for a role logging in with the '
                     'default key is refused before any connection (it '
                     'must give its own password or key). Not needed for '
                     'VMs found in Heat of a VIM in trusted_vim_auth_urls, '
                     'for Ansible servers in default_key_ansible_servers, '
                     'or for kubespray-mgmt (its user wrote the request). '
                     'Empty: only those.'),
    cfg.ListOpt('trusted_vim_auth_urls', default=[],
                help='Auth URLs (Keystone, as in Tacker\'s VIM registry or '
                     'v2 vimConnectionInfo interfaceInfo.endpoint; with '
                     'OAuth2 mTLS also heatEndpoint and tokenEndpoint) of '
                     'the OpenStack VIMs the operator runs. Only Heat '
                     'reached through such a VIM vouches for the VMs it '
                     'returns, so that the default key may log in to them '
                     'without default_key_login_hosts: a tenant may give '
                     'its own VIM (a v1 VIM it registered, v2\'s inline '
                     'vimConnectionInfo) whose "Heat" names any address. '
                     'Compared after lowercasing scheme and host, adding '
                     'the default port and a missing /v3. Empty: no VIM '
                     'vouches; VMs found in Heat that log in with the '
                     'default key must be in default_key_login_hosts.'),
    cfg.ListOpt('extra_vars_allowed', default=['*'],
                help='Names (shell-style patterns) of kubespray extra vars '
                     'a request may set; a name must also not match '
                     'extra_vars_denied.'),
    cfg.ListOpt('extra_vars_denied', default=[
                'download_localhost', 'download_run_once',
                'download_cache_dir', 'kubeconfig_localhost',
                'kubectl_localhost', 'artifacts_dir', 'credentials_dir',
                'local_release_dir', 'inventory_dir', 'inventory_file',
                'playbook_dir', 'role_path', 'hostvars', 'groups',
                'group_names', 'inventory_hostname',
                'group_mappings', 'sysctl_minimum_values', 'cert_files',
                '_*'],
                help='Names (shell-style patterns) of kubespray extra vars '
                     'a request may not set. The default refuses the ones '
                     'that make kubespray download, write or run on the '
                     'Ansible server itself (which may be shared by '
                     'several VNFs), Ansible\'s magic variables, and '
                     'kubespray\'s internal tables that its roles loop '
                     'over (group_mappings, which every playbook runs '
                     'first, sysctl_minimum_values, cert_files, and '
                     'private names starting with "_"); ansible_*, '
                     'node_labels and node_taints are always refused.'),
]


limits_opts = [
    cfg.IntOpt('max_command_output', default=16 * 1024 * 1024,
               min=64 * 1024, max=1024 * 1024 * 1024,
               help='Bytes of standard output, and separately of standard '
                    'error, kept from one remote command other than a '
                    'playbook run (kubectl JSON of every pod of a large '
                    'cluster is the biggest legitimate output). A command '
                    'that prints more is stopped and fails with an error '
                    'naming the host and the command.'),
    cfg.IntOpt('max_playbook_output', default=2 * 1024 * 1024,
               min=64 * 1024, max=1024 * 1024 * 1024,
               help='Bytes of the end of an ansible-playbook output kept '
                    'in memory (for PLAY RECAP and error messages). '
                    'Playbook logs are legitimately long, so older output '
                    'is dropped instead of failing the run; every line is '
                    'still logged as it arrives.'),
    cfg.IntOpt('max_output_line', default=64 * 1024, min=1024,
               max=16 * 1024 * 1024,
               help='Characters of one output line passed to the progress '
                    'log while a command runs; the rest of a longer line '
                    'is dropped there (the captured output keeps it).'),
    cfg.IntOpt('max_remote_file_size', default=4 * 1024 * 1024,
               min=64 * 1024, max=1024 * 1024 * 1024,
               help='Largest file, in bytes, the driver reads back from a '
                    'host (the recorded inventory, the HAProxy '
                    'configuration). A larger file fails the operation '
                    'with an error naming the host and the path.'),
    cfg.IntOpt('max_request_size', default=1024 * 1024, min=64 * 1024,
               max=64 * 1024 * 1024,
               help='Largest k8s_cluster_installation_param a request may '
                    'carry, in approximate bytes (characters of strings '
                    'and keys, 8 per other value). Tacker\'s own request '
                    'body limit is usually far smaller.'),
]

# Several conductors: where the driver's state lives (statestore.py).
state_opts = [
    cfg.StrOpt('state_store_id',
               help='Id of the state store shared by every tacker-conductor '
                    'that serves this driver\'s VNF instances (one shared '
                    'directory holding records_dir, known_hosts_file and '
                    'kubeconfig_dir). When set, each of those must be in a '
                    'directory whose file "kubespray-mgmt-store-id" holds '
                    'this id, looked up from the location upwards; a '
                    'conductor that does not find it (the shared directory '
                    'is not mounted there, or is another one) refuses every '
                    'operation before changing anything. Empty: no check, '
                    'for a single conductor. "kubespray-mgmt state check" '
                    'reports what is wrong.'),
    cfg.IntOpt('state_lock_wait', default=0, min=0, max=86400,
               help='Seconds an operation waits for another operation of '
                    'the same VNF instance (on this or another conductor, '
                    'a retry arriving while the first still runs) to '
                    'release the instance\'s state lock before it is '
                    'refused, changing nothing.'),
    cfg.IntOpt('hook_deadline', default=43200, min=60, max=604800,
               help='Seconds one hook or kubespray-mgmt operation may take '
                    'in all (hook_deadlines may set it per operation). '
                    'Every wait of the operation (a remote command, a file '
                    'transfer, a playbook slot or run, a lock) ends by '
                    'then; the operation then fails, naming what it waited '
                    'on and this option, with every lock and playbook slot '
                    'it held released. Keep it below Tacker\'s own limits '
                    'on an LCM operation.'),
    cfg.DictOpt('hook_deadlines', default={},
                help='Per-operation overrides of hook_deadline, in seconds, '
                     'as operation:seconds pairs, e.g. '
                     '"heal_end:7200,instantiate_end:86400" (operations: '
                     'the hook names, such as scale_end, and the commands '
                     'of kubespray-mgmt run, such as renew_certs). Each '
                     'value is a whole number of seconds from 60 to '
                     '604800.'),
    cfg.IntOpt('shared_file_lock_wait', default=60, min=1, max=3600,
               help='Seconds a change to a shared record file (the '
                    'instance records, known hosts) waits for another '
                    'process that holds its lock before it fails, naming '
                    'the file. The lock is held only for the change.'),
]

# Automatic heals (Tacker's auto-heal request:
# mgmt_driver/operations/autoheal.py).
autoheal_opts = [
    cfg.IntOpt('auto_heal_max_unhealthy_percent', default=40, min=0,
               max=100,
               help='An automatic heal (a HEAL request that carries only '
                    'vnfcInstanceId, as Tacker\'s Prometheus plugin and '
                    'server notification send it) is refused, changing '
                    'nothing, when more than this share of the cluster\'s '
                    'Kubernetes nodes (in percent, rounded down to whole '
                    'nodes) is not Ready: a network partition must not '
                    'replace half the cluster (Cluster API\'s '
                    'maxUnhealthy). 0 refuses every automatic heal; '
                    'requested heals are never limited by it.'),
    # The fleet's rules (mgmt_driver/state/healfleet.py), in the state
    # store every conductor shares.
    cfg.IntOpt('auto_heal_max_in_flight', default=10, min=1, max=10000,
               help='Most automatic heals in flight at once across every '
                    'VNF instance of the state store (from heal_start to '
                    'the end of heal_end); one more is refused, changing '
                    'nothing. Requested heals are never limited by it.'),
    cfg.IntOpt('auto_heal_max_in_flight_per_ansible_server', default=4,
               min=1, max=10000,
               help='Most automatic heals in flight at once among the VNF '
                    'instances that share one Ansible server; one more is '
                    'refused, changing nothing.'),
    cfg.IntOpt('auto_heal_fleet_pause_percent', default=20, min=0, max=100,
               help='Automatic heals are paused across the fleet when this '
                    'share (in percent) of all Kubernetes nodes of the '
                    'state store\'s instances was found not Ready by '
                    'recent automatic-heal checks of at least '
                    'auto_heal_fleet_min_instances instances: a rack, power '
                    'or network failure, which re-creating VMs does not '
                    'heal. The pause lifts when fresh checks show less, or '
                    'by "kubespray-mgmt state resume-heals". 0 never '
                    'pauses.'),
    cfg.IntOpt('auto_heal_fleet_min_instances', default=3, min=1,
               max=10000,
               help='Fewest VNF instances whose recent checks found a node '
                    'not Ready before the fleet is paused (one cluster\'s '
                    'own failure is auto_heal_max_unhealthy_percent\'s '
                    'business); as many fresh checks are needed for the '
                    'pause to lift by itself.'),
    cfg.IntOpt('auto_heal_observation_max_age', default=900, min=30,
               max=86400,
               help='Seconds an automatic-heal check\'s count of not-Ready '
                    'nodes counts towards the fleet\'s share; older ones '
                    'are stale (the conductor hosts\' clocks must agree, '
                    'as for Tacker\'s database).'),
    cfg.IntOpt('auto_heal_lease', default=10800, min=60, max=604800,
               help='Seconds an automatic heal holds its place in flight '
                    'after its heal_start or heal_end began: the place is '
                    'released when the heal ends, and after this time when '
                    'a conductor died or Tacker never ended the heal.'),
]

# Control-plane certificates: expiry in status, renewal (certificates.py).
certificate_opts = [
    cfg.IntOpt('cert_warn_days', default=30, min=0, max=3650,
               help='"kubespray-mgmt status" warns about a control-plane '
                    'certificate (or certificate authority) that expires '
                    'within this many days, and exits with code 5. kubeadm '
                    'issues them for one year; 0 warns only about expired '
                    'ones.'),
    cfg.StrOpt('kubeadm_command', default='/usr/local/bin/kubeadm',
               help='kubeadm on the control-plane nodes (kubespray\'s '
                    'bin_dir): "kubeadm certs check-expiration -o json" '
                    'for status, "kubeadm certs renew all" for '
                    'renew-certs. Runs under sudo as kubectl_sudo says.'),
    cfg.StrOpt('crictl_command', default='/usr/local/bin/crictl',
               help='crictl on the control-plane nodes: renew-certs '
                    'restarts the control-plane static pods with it, as '
                    'kubespray\'s k8s-certs-renew.sh does.'),
    cfg.IntOpt('cert_renew_timeout', default=300, min=10, max=3600,
               help='Seconds renew-certs gives one control-plane node to '
                    'renew its certificates and restart its static pods, '
                    'and again for its API server to answer before the '
                    'node goes back into HAProxy.'),
]

# etcd snapshots (mgmt_driver/operations/etcdsnapshots.py).
etcd_snapshot_opts = [
    cfg.BoolOpt('etcd_snapshot_before_risky', default=True,
                help='Take an etcd snapshot, kept in the instance\'s '
                     'workspace on the Ansible server, before every '
                     'operation that can lose the control plane (an '
                     'upgrade, the heal of a control-plane node). A '
                     'snapshot that fails stops the operation before any '
                     'change. False: no snapshot is taken (say so '
                     'explicitly; kubespray-mgmt run --no-etcd-snapshot '
                     'does it for one run).'),
    cfg.IntOpt('etcd_snapshot_keep', default=3, min=1, max=1000,
               help='How many etcd snapshots each instance keeps (the '
                    'newest; older ones are deleted after a new one is '
                    'kept).'),
    cfg.IntOpt('etcd_snapshot_max_total_mb', default=8192, min=1,
               max=10 * 1024 * 1024,
               help='Most MiB the etcd snapshots of one instance may take '
                    'on the Ansible server: the oldest go first past it, '
                    'and a snapshot larger than it alone is refused (its '
                    'copy stops there). etcd\'s default space quota is '
                    '2 GiB (kubespray: etcd_quota_backend_bytes).'),
    cfg.IntOpt('etcd_snapshot_timeout', default=600, min=10, max=86400,
               help='Seconds "etcdctl snapshot save" may take on a '
                    'control-plane node.'),
    cfg.StrOpt('etcd_snapshot_tmp_dir', default='/tmp',
               help='Directory on the control-plane nodes where a snapshot '
                    'is written (in a private directory of its own, mode '
                    '0700) before it is copied off and deleted.'),
]

ALL_OPTS = (ssh_opts + kubespray_opts + lb_opts + kubectl_opts + trust_opts +
            limits_opts + state_opts + autoheal_opts + certificate_opts +
            etcd_snapshot_opts)


#: Bounds of one hook_deadlines value (those of hook_deadline).
HOOK_DEADLINE_RANGE = (60, 604800)


def hook_deadline(conf, operation):
    """``(seconds, setting)``: the wall-clock bound of *operation*.

    :param conf: an oslo.config object with ``[kubespray_mgmt]``.
    :param operation: the hook or command (``heal_end``).
    :raises ValueError: its hook_deadlines value is not a whole number
        within :data:`HOOK_DEADLINE_RANGE`.
    """
    group = conf[GROUP]
    value = group.hook_deadlines.get(operation)
    if value is None:
        return group.hook_deadline, 'hook_deadline'
    low, high = HOOK_DEADLINE_RANGE
    number = value.strip()
    if not (number.isascii() and number.isdigit() and len(number) <= 12
            and low <= int(number) <= high):
        raise ValueError('[%s] hook_deadlines: %s:%r is not a whole number '
                         'of seconds from %d to %d' % (
                             GROUP, operation, value[:20], low, high))
    return int(value), 'hook_deadlines[%s]' % operation


def use_sudo(setting, username):
    """Resolve a ``*_sudo`` option (``auto``, ``always``, ``never``).

    :param setting: the option's value.
    :param username: the SSH login user; ``auto`` means sudo unless root.
    """
    return {'always': True, 'never': False}.get(setting, username != 'root')


def check(conf):
    """Every ``[kubespray_mgmt]`` value that cannot be used, as text.

    oslo.config converts a value only when it is read; reading each one
    here reports a bad config file up front, all problems at once.

    :returns: ``'[kubespray_mgmt] <option>: <problem>'`` strings.
    """
    problems = []
    group = conf[GROUP]
    for opt in ALL_OPTS:
        try:
            value = group[opt.dest]
        except (cfg.ConfigFileValueError, ValueError) as exc:
            problems.append('[%s] %s: %s' % (GROUP, opt.dest,
                                             _reason(exc, opt)))
            continue
        if opt.dest in NETWORK_OPTS:
            problems += ['[%s] %s: %s' % (GROUP, opt.dest, problem)
                         for problem in parse_networks(value)[1]]
        if opt.dest == 'hook_deadlines':
            problems += _deadline_problems(conf, value)
    return problems


def _deadline_problems(conf, value):
    problems = []
    for operation in sorted(value):
        try:
            hook_deadline(conf, operation)
        except ValueError as exc:
            problems.append(str(exc))
    return problems


#: What an option of each type must be, for a value Python's own
#: conversion refused ("invalid literal for int() ...").
_TYPE_NEEDS = ((cfg.types.Integer, 'a whole number'),
               (cfg.types.Float, 'a number'))


def _reason(exc, opt=None):
    """Why a value was refused, without oslo.config's preamble (which
    repeats the option and the file): its checks say it in words ("Should
    be greater than or equal to 1"); a type conversion only quotes the
    value, so the option's type says what was expected."""
    text = str(exc)
    _, valid, reason = text.partition(' is not valid: ')
    reason = (reason if valid else text.rsplit(': ', 1)[-1]).strip()
    needs = next((words for kind, words in _TYPE_NEEDS
                  if isinstance(getattr(opt, 'type', None), kind)), None)
    if needs and ('invalid literal' in reason or
                  'could not convert' in reason):
        value = reason.rsplit(': ', 1)[-1]
        return 'must be %s, not %s' % (needs, value)
    return reason or type(exc).__name__


#: Options whose entries are addresses or CIDRs.
NETWORK_OPTS = ('default_key_ansible_servers', 'default_key_login_hosts')


def parse_networks(entries):
    """Entries of a :data:`NETWORK_OPTS` option (addresses or CIDRs).

    :returns: ``(networks, problems)``: the ``ipaddress`` networks of the
        valid entries, and one text for each entry that is not one.
    """
    networks, problems = [], []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry.strip(),
                                                 strict=False))
        except ValueError:
            problems.append('%r is not an address or CIDR' % entry)
    return networks, problems


# --- options a config file names that do not exist (doctor, driver load) --

#: Sections of a config file that hold no option of ours and that the
#: ``kubespray-mgmt`` command does not complain about.
_OTHER_SECTIONS = ('DEFAULT',)


def config_files(conf):
    """The config files *conf* was loaded from (``--config-file`` and
    ``--config-dir``), in order; [] before it was called."""
    try:
        files = list(conf.config_file or [])
        directory = conf.config_dir
    except cfg.Error:  # not parsed yet, or a ConfigOpts without them
        return []
    if directory:
        files += sorted(glob.glob(os.path.join(directory, '*.conf')))
    return files


def unknown_options(conf, files=None, foreign_sections=False):
    """Keys of ``[kubespray_mgmt]`` that name no option, and sections
    whose name is a near miss of it (``[kubespray-mgmt]``), in the
    config files *conf* read: oslo.config ignores both silently, so a
    typo (``host_key_polcy = reject``) loses the setting.

    :param files: the files to read (default: :func:`config_files`).
    :param foreign_sections: also report every section other than
        ``[DEFAULT]`` and ours (a file of the ``kubespray-mgmt`` command
        holds nothing else; tacker.conf holds many).
    :returns: ``'FILE: [section] key: problem'`` strings; a file that
        cannot be read is skipped (loading it reported that already).
    """
    known = {opt.dest for opt in ALL_OPTS}
    problems = []
    for path in config_files(conf) if files is None else files:
        for section, keys in _sections_of(path).items():
            problems += _section_problems(path, section, keys, known,
                                          foreign_sections)
    return problems


def _sections_of(path):
    """``{section: {key: values}}`` of the config file *path*, {} when it
    cannot be read."""
    sections = {}
    try:
        cfg.ConfigParser(path, sections).parse()
    except (OSError, iniparser.ParseError, UnicodeDecodeError):
        return {}
    return sections


def _section_problems(path, section, keys, known, foreign_sections):
    if section == GROUP:
        return ['%s: [%s] %s: no such option%s' % (
            path, GROUP, key, _did_you_mean(key, known))
            for key in sorted(keys) if key not in known]
    near = difflib.get_close_matches(section.lower().replace('-', '_'),
                                     [GROUP], 1, 0.8)
    if near and section != GROUP:
        return ['%s: [%s]: no such section; did you mean [%s]? its keys '
                'are ignored' % (path, section, GROUP)]
    if foreign_sections and section not in _OTHER_SECTIONS:
        return ['%s: [%s]: not read by kubespray-mgmt (only [%s])' % (
            path, section, GROUP)]
    return []


def _did_you_mean(key, known):
    near = difflib.get_close_matches(key, sorted(known), 1, 0.75)
    return ' (did you mean %s?); it is ignored' % near[0] if near else \
        '; it is ignored'


def register_opts(conf):
    """Register the ``[kubespray_mgmt]`` options on *conf*.

    :param conf: an ``oslo_config.cfg.ConfigOpts``; registering twice is
        harmless.
    """
    # A new OptGroup each time: ConfigOpts keeps a shallow copy of the
    # group, whose table of options (and their overrides) would otherwise
    # be shared by every ConfigOpts registered with the same object, so
    # a set_override on one would change them all, Tacker's CONF too.
    conf.register_group(_new_group())
    conf.register_opts(ALL_OPTS, group=GROUP)


def list_opts():
    """Options for ``oslo-config-generator`` (entry point oslo.config.opts).

    :returns: a list of ``(group, options)`` pairs.
    """
    return [(kubespray_mgmt_group, ALL_OPTS)]


CONF = cfg.CONF
register_opts(CONF)
