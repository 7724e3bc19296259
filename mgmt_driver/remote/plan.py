"""Dry runs: what an operation would do, without connecting anywhere.

A module of its own (not in DESIGN's list) because ``kubespray-mgmt run
--dry-run`` must show the plan of the very code that does the work: the
operation runs unchanged against :class:`PlanPool`, whose connections
record each command and file instead of touching a host, and answer as a
fresh cluster would (a current kubespray checkout, no Kubernetes node
yet).  Every step is shown in the order it runs: the commands, the files
written (those of an upload too: the inventory, the vars files), and what a
command is given on its standard input (the RBAC manifest); a content
that holds a secret of the request (a password, a key, a proxy's
credentials), a private key or a token is listed without it, and the
placeholder token never reaches a printout.  A closing summary says what
would change on each host.
"""

import base64
import contextlib
import dataclasses
import io
import json
import posixpath
import re
import tarfile
import types
import urllib.parse

from mgmt_driver.remote import connection
from mgmt_driver.remote import detached
from mgmt_driver.remote import kubectl
from mgmt_driver.remote import kubespray
from mgmt_driver.remote import loadbalancer
from mgmt_driver.remote import programs
from mgmt_driver.remote import ssh
from mgmt_driver.state import records

#: The layout markers a current kubespray checkout prints (see
#: ``kubespray.detect_layout``), without its version (:func:`_layout`).
_LAYOUT = ('KS:FILE:cluster.yml\nKS:FILE:scale.yml\nKS:FILE:remove-node.yml'
           '\nKS:FILE:reset.yml\nKS:FILE:playbooks/facts.yml\n'
           'KS:SKIP_CONFIRMATION\n')
_PLACEHOLDER_CA = ('-----BEGIN CERTIFICATE-----\n(dry run)\n'
                   '-----END CERTIFICATE-----\n')
_PLACEHOLDER_SECRET = json.dumps({'data': {
    'token': 'ZHJ5LXJ1bg==',
    'ca.crt': base64.b64encode(_PLACEHOLDER_CA.encode()).decode()}})

#: A cluster-info that names no usable server: the plan shows the apply.
_PLACEHOLDER_CLUSTER_INFO = json.dumps({'data': {'kubeconfig': json.dumps(
    {'clusters': [{'cluster': {'server': '(dry run)'}}]})}})


def _is_layout_probe(command):
    # OPEN's answer holds DETECT's, and no record: the driver reads
    # those as before.
    return programs.name_of(command) in (kubespray.DETECT, kubespray.OPEN)


def _layout(kubespray_version):
    """The probe's answer: a checkout at *kubespray_version* (the
    request's ``kubespray.version``) when one is asked for, so that the
    version check passes as it would on a matching checkout."""
    return _LAYOUT + 'KS:GIT:%s\n' % (
        'v%s' % kubespray_version if kubespray_version else '(dry run)')


#: ``ip -o addr show to ADDRESS`` on a gateway (keepalived).
_ADDRESS_PROBE = 'ip -o addr show to '
#: The interface and prefix a dry run takes a gateway's address to have.
PLACEHOLDER_INTERFACE = ('eth0', 24)


def _interface_answer(command):
    """A gateway has its cluster address on :data:`PLACEHOLDER_INTERFACE`."""
    address = command.split(_ADDRESS_PROBE, 1)[1].split()[0]
    return '2: %s    inet %s/%d scope global %s\n' % (
        PLACEHOLDER_INTERFACE[0], address, PLACEHOLDER_INTERFACE[1],
        PLACEHOLDER_INTERFACE[0])


#: What the remote programs (mgmt_driver/remote/scripts/, known by
#: ``remote.name_of``) answer in a dry run; the others print nothing.
_PROGRAM_ANSWERS = {
    detached.START: 'KR:STARTED:20000101T000000Z-dry_run-playbook:1\n',
    detached.END: 'KR:RC:0\nKR:TAIL\n',
    kubectl.NODES_PROGRAM: json.dumps({'items': []}),
    kubectl.DRAIN_PROGRAM: 'KD:PODS\n' + json.dumps({'items': []}),
}


def _answer(argv, command, kubespray_version=None):
    """What a fresh cluster answers to *argv* (shown as *command*)."""
    if _is_layout_probe(argv):
        return _layout(kubespray_version)
    if programs.name_of(argv) is not None:
        return _PROGRAM_ANSWERS.get(programs.name_of(argv), '')
    if command.startswith(_ADDRESS_PROBE):
        return _interface_answer(command)
    return _kubectl_answer(command)


def _kubectl_answer(command):
    """What a fresh cluster's kubectl answers to *command* ('' for
    anything else)."""
    if ' get secret ' in command:
        return _PLACEHOLDER_SECRET
    if ' get node ' in command:
        return _node_answer(command)
    if ' get nodes ' in command or ' get pods ' in command:
        return json.dumps({'items': []})
    if ' get configmap cluster-info ' in command:
        return _PLACEHOLDER_CLUSTER_INFO
    return ''


def _node_answer(command):
    """``kubectl get node NAME...``: the nodes are there."""
    words = command.split(' get node ', 1)[1].split()
    if ' -o json' in command:
        # Every node named is there (as for "-o name"), unchanged
        # and Ready (so the plan shows its drain).
        names = words[:[w.startswith('-') for w in words].index(True)]
        return json.dumps({'items': [{'metadata': {'name': name},
                                      'status': {'conditions': [{
                                          'type': 'Ready',
                                          'status': 'True'}]}}
                                     for name in names]})
    return 'node/%s\n' % words[0]


@dataclasses.dataclass
class Step:
    """One recorded action on one host.

    :param kind: ``run``, ``write`` (a file, written alone or in an
        upload), ``input`` (what the command before is given on its
        standard input) or ``local``.
    :param argv: the command's argv, for a ``run`` given one.
    :param secret: the content holds a secret and is never shown.
    """

    host: str
    kind: str
    text: str
    mode: int | None = None
    content: str | None = None
    argv: list | None = None
    secret: bool = False
    #: A ``local`` step that changes something here (a file deleted, a
    #: host key forgotten): listed under "What would change".
    changes: bool = False


#: The host of the steps done on the host the command runs on.
THIS_HOST = 'this host'


def note(pool, host, text, changes=False):
    """Add a ``local`` step to the plan *pool* records: an assumption a
    real run checks, or (*changes*) a change made on this host."""
    pool.steps.append(Step(host, 'local', text, changes=changes))


class PlanConnection(connection.Connection):
    """Records what an ``ssh.Connection`` would be asked to do."""

    def __init__(self, host, port, username, steps, kubespray_version=None,
                 secrets=()):
        self.host = host
        self.port = port
        self.username = username
        self._steps = steps
        self._kubespray_version = kubespray_version
        self._secrets = secrets

    def run(self, command, timeout=None, check=True, env=None, stdin=None,
            on_line=None, keep_tail=False):
        text = ssh.display_command(command, env)
        shown = detached.plan_text(command)
        if shown is not False:
            # A detached playbook run: its start, in words; following it
            # and reading its end are not shown.
            if shown is not None:
                self._steps.append(Step(self.host, 'run', shown))
            return ssh.CommandResult(self.host, text,
                                     _answer(command, text), '', 0)
        self._steps.append(Step(self.host, 'run', text, argv=list(
            command) if isinstance(command, (list, tuple)) else None))
        self._steps += _input_steps(self.host, command, stdin, self._secrets)
        self._note_assumptions(command, text)
        return ssh.CommandResult(self.host, text, _answer(
            command, text, self._kubespray_version), '', 0)

    def _note_assumptions(self, command, text):
        """Say what a plan assumes where a real run reads the host."""
        if text.startswith(_ADDRESS_PROBE):
            self._steps.append(Step(
                self.host, 'local', 'assumed: the address is on %s, /%d; '
                'a real run reads it here' % PLACEHOLDER_INTERFACE))
        if programs.name_of(command) == kubespray.SUPPORTED:
            self._steps.append(Step(
                self.host, 'local', 'not read: the Kubernetes versions the '
                'checkout lists (kubelet_checksums); a real run checks the '
                'version against them here'))
        if _is_layout_probe(command) and self._kubespray_version:
            self._steps.append(Step(
                self.host, 'local', 'assumed: the checkout is kubespray %s '
                '(kubespray.version); a real run checks it here'
                % self._kubespray_version))

    def write_file(self, path, content, mode=0o600):
        if isinstance(content, bytes):
            content = content.decode('utf-8', 'replace')
        self._steps.append(Step(self.host, 'write', path, mode, content,
                                secret=holds_secret(content, self._secrets)))

    def read_file(self, path, missing_ok=False):
        return None

    def close(self):
        pass


class PlanPool(connection.Pool):
    """Stands in for ``ssh.ConnectionPool`` during a dry run.

    :param kubespray_version: the request's ``kubespray.version``, or
        None: the version the checkout is taken to have (a dry run
        cannot read it; the plan says so).
    """

    def __init__(self, kubespray_version=None, secrets=()):
        self.steps = []
        self._connections = {}
        self._kubespray_version = kubespray_version
        #: Texts never shown (:func:`secrets_of`); the logins' own are
        #: added as connections are asked for.
        self.secrets = set(secrets)

    def connection(self, host, credentials, port=22, on_new_key=None):
        key = (host, int(port))
        self.secrets |= _credential_secrets(credentials)
        if key not in self._connections:
            self._connections[key] = PlanConnection(
                host, port, credentials.username, self.steps,
                self._kubespray_version, self.secrets)
        return self._connections[key]

    def reachable(self, host, credentials=None, port=22, timeout=30,
                  on_new_key=None):
        return True

    def forget_host(self, host, port=22, key=None):
        note(self, THIS_HOST, 'forget the SSH host key of %s:%s in '
             'known_hosts_file' % (host, port), changes=True)

    def close_all(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close_all()


class PlanRecords(records.RecordStore):
    """Stands in for ``records.RecordStore`` during a dry run: reads the
    real records, writes nothing, and unregisters nothing.  What the
    operation saves is kept in memory and read back, so the plan goes
    on as the real run would (a VIM it unregistered is no longer named).

    :param store: the real ``records.RecordStore``.
    """

    def __init__(self, store):
        super().__init__(store.directory)
        self._saved = {}

    def locked(self):
        return contextlib.nullcontext()

    def load(self, instance_id):
        if instance_id in self._saved:
            return records.InstanceRecord.from_json(
                instance_id, self._saved[instance_id])
        return super().load(instance_id)

    def save(self, record):
        self._saved[record.instance_id] = record.to_json()

    def remove(self, instance_id):
        self._saved[instance_id] = records.InstanceRecord(
            instance_id).to_json()

    def unregister(self, vim_id):
        pass


def format_plan(steps):
    """The recorded steps as text, in the order they run (a ``== HOST``
    line wherever the host changes), then what would change on each
    host (:func:`summary_lines`).

    A content that holds a secret (``Step.secret``) is never shown; a
    shell program is shown by its name and length (``--output json``
    has it whole).
    """
    lines, host = [], None
    for step in steps:
        if step.host != host:
            host = step.host
            lines.append('== %s' % host)
        lines += _format_step(step)
    return '\n'.join(lines + summary_lines(steps)) + '\n'


def summary_lines(steps):
    """``What would change``: per host in order of first use, the files
    written, the playbooks run and the manifests applied (the dry run's
    probes and reads change nothing and are left out)."""
    changes = {}
    for step in steps:
        what = _change_of(step)
        if what:
            changes.setdefault(step.host, []).append(what)
    if not changes:
        return ['', 'What would change: nothing']
    lines = ['', 'What would change:']
    for host, items in changes.items():
        lines.append('  %s:' % host)
        lines += ['    - %s' % item for item in items]
    return lines


#: Commands that change a host (after ``sudo -n`` and ``env NAME=...``).
_CHANGING = frozenset({'mv', 'install', 'rm', 'ln', 'chmod', 'chown',
                       'mkdir', 'systemctl', 'bash', 'service'})
#: kubectl verbs that only read.
_KUBECTL_READS = frozenset({'get', 'version', 'describe', 'wait', 'auth',
                            'top', 'api-resources', 'cluster-info'})


def _change_of(step):
    if step.kind == 'write':
        return 'write %s (mode %s%s)' % (step.text, _mode(step.mode),
                                         ', secret' if step.secret else '')
    if step.kind == 'local':
        return step.text if step.changes else None
    if step.kind != 'run':
        return None
    if step.text.startswith('(detached'):
        return 'run ' + step.text.rsplit(' ', 1)[-1] + _limit_of(step.text)
    if step.text.startswith('rm -rf -- '):  # the workspace's removal
        return step.text
    # A shell program (mgmt_driver/remote/scripts/) says in its file whether it
    # changes the host; a detached run was shown by its playbook above.
    name = programs.name_of(step.argv or step.text)
    if name == loadbalancer.APPLY and step.argv and \
            loadbalancer.plan_change(step.argv):
        return loadbalancer.plan_change(step.argv)
    if name == kubectl.DRAIN_PROGRAM and step.argv and \
            kubectl.drain_of(step.argv):
        return kubectl.drain_of(step.argv)
    if name is not None:
        return 'program %s' % name if programs.changes_host(name) else None
    return _plain_change(step)


def _plain_change(step):
    """The change a plain command (not a named program) makes, or None
    if it only reads."""
    words = _plain_words(step)
    if not words:
        return None
    program = posixpath.basename(words[0])
    if program == 'kubectl' or program.endswith('kubectl'):
        verb = next((w for w in words[1:] if not w.startswith('-') and
                     w not in _option_values(words)), None)
        return None if verb in _KUBECTL_READS else step.text
    if program in _CHANGING:
        return step.text
    return None


def _plain_words(step):
    """The argv without ``sudo -n`` and ``env NAME=VALUE...``; None for
    a shell program or a command given as one string."""
    words = list(step.argv or [])
    if words[:2] == ['sudo', '-n']:
        words = words[2:]
    if words[:1] == ['env']:
        words = words[1:]
        while words and '=' in words[0] and not words[0].startswith('-'):
            words = words[1:]
    if not words or words[0] in ('sh', 'bash') and words[1:2] == ['-c']:
        return None
    return words


def _option_values(words):
    """The values of kubectl's options that take one (``--kubeconfig
    PATH``), which are not its verb."""
    return {words[i + 1] for i, w in enumerate(words[:-1])
            if w in ('--kubeconfig', '-n', '--namespace', '--context',
                     '--server', '-s')}


def _limit_of(text):
    found = re.search(r'(?:^| )(--limit(?:=| )\S+)', text)
    return ' ' + found.group(1) if found else ''


def _mode(mode):
    return '%04o' % (0o644 if mode is None else mode)


def plan_records(steps):
    """The recorded steps as JSON-ready dicts, in the order they ran.

    Each has the same keys: ``host``, ``kind`` (``run``, ``write``,
    ``input`` or ``local``), ``text`` (the command, the path written, or
    the local action), and for a ``write`` ``mode`` (octal text),
    ``bytes`` and ``content``, which is None for a content that holds a
    secret (credentials, keys, kubeconfigs); an ``input`` (what the
    command before it reads on standard input) has ``bytes`` and
    ``content`` too; the others have None there.
    """
    return [_record(step) for step in steps]


def _record(step):
    record = {'host': step.host, 'kind': step.kind, 'text': step.text,
              'mode': None, 'bytes': None, 'content': None}
    if step.kind == 'input':
        record.update(bytes=len(step.content or ''),
                      content=None if step.secret else step.content)
    if step.kind == 'write':
        record.update(mode=_mode(step.mode),
                      bytes=len(step.content or ''),
                      content=None if step.secret else step.content)
    return record


def _format_step(step):
    if step.kind == 'run':
        return ['$ ' + _command_text(step)]
    if step.kind == 'local':
        return ['# ' + step.text]
    if step.kind == 'input':
        header = '< standard input of the command above'
    else:
        header = '> write %s (mode %s)' % (step.text, _mode(step.mode))
    if step.secret:
        return ['%s: secret, %d bytes not shown' % (
            header, len(step.content or ''))]
    body = (step.content or '').rstrip('\n').splitlines()
    if len(body) > MAX_SHOWN_LINES:
        body = body[:MAX_SHOWN_LINES] + ['... %d more line(s); --output '
                                         'json has them' % (
                                             len(body) - MAX_SHOWN_LINES)]
    return [header] + ['    ' + line for line in body]


#: Lines of a file or an input shown in the text plan.
MAX_SHOWN_LINES = 120


def _command_text(step):
    """``sh -c <program NAME, N lines> ARGS`` for a shell program (the
    JSON plan has it whole), else the command."""
    argv = list(step.argv or ())
    sudo = argv[:2] == ['sudo', '-n']
    if sudo:
        argv = argv[2:]
    if argv[:2] != ['sh', '-c'] or len(argv) < 3 or '\n' not in argv[2]:
        return step.text
    name = programs.name_of(argv)
    program = argv[2].strip('\n').splitlines()
    label = 'program %s, %d lines' % (name, len(program)) if name else \
        '%d-line program: %s' % (len(program), program[0].strip()[:60])
    return '%ssh -c <%s> %s' % ('sudo -n ' if sudo else '', label,
                                ssh.display_command(argv[3:]))


# --------------------------------------------------------------- secrets --

#: Contents shown as secret whatever the request holds: private keys,
#: kubeconfig and ServiceAccount tokens, passwords in a document.
_ALWAYS_SECRET = re.compile(
    r'PRIVATE KEY-----|\btoken\b\s*[:=]|"token"\s*:|\bpassword\b\s*[:=]|'
    r'"password"\s*:', re.IGNORECASE)
#: Shorter texts are not looked for (a one-letter "password" would hide
#: every file).
_MIN_SECRET = 3


def holds_secret(content, secrets):
    """Whether *content* must not be shown: it holds one of *secrets*
    (:func:`secrets_of`), a private key, a token or a password field."""
    if not content:
        return False
    return bool(_ALWAYS_SECRET.search(content)) or any(
        secret in content for secret in secrets)


def secrets_of(spec):
    """The secret texts of a request (every field its model keeps out
    of ``repr``: passwords, keys, the VRRP password; of a proxy URL, its
    password only), for :class:`PlanPool`."""
    found = set()
    _collect(spec, found, set())
    return {s for s in found if len(s) >= _MIN_SECRET}


def _collect(value, found, seen):
    if id(value) in seen:
        return
    seen.add(id(value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            item = getattr(value, field.name, None)
            if not field.repr and isinstance(item, str):
                found.add(_secret_part(item))
            else:
                _collect(item, found, seen)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            _collect(item, found, seen)
    elif isinstance(value, (dict, types.MappingProxyType)):
        for item in value.values():
            _collect(item, found, seen)


def _secret_part(text):
    """The password of a URL with credentials, else *text* whole."""
    if '://' not in text:
        return text
    try:
        return urllib.parse.urlsplit(text).password or ''
    except ValueError:
        return text


def _credential_secrets(credentials):
    return {s for s in (getattr(credentials, name, None) for name in (
        'password', 'key_text', 'key_passphrase', 'sudo_password'))
        if isinstance(s, str) and len(s) >= _MIN_SECRET}


def _input_steps(host, command, stdin, secrets):
    """What a command is given on standard input, as steps: each file of
    an upload (a tar stream, unpacked into the command's last argument,
    the workspace), else the text itself."""
    if stdin is None:
        return []
    if isinstance(stdin, bytes):
        files = _tar_files(stdin)
        if files is not None:
            dest = command[-1] if isinstance(command, (list, tuple)) else ''
            return [Step(host, 'write', posixpath.join(dest, name), mode,
                         text, secret=holds_secret(text, secrets))
                    for name, mode, text in files]
        stdin = stdin.decode('utf-8', 'replace')
    return [Step(host, 'input', 'standard input', None, stdin,
                 secret=holds_secret(stdin, secrets))]


def _tar_files(data):
    """``[(name, mode, text)]`` of the files of a tar stream, or None."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode='r:') as archive:
            return [(m.name, m.mode, archive.extractfile(m).read().decode(
                'utf-8', 'replace')) for m in archive.getmembers()
                if m.isfile()]
    except tarfile.TarError:
        return None
