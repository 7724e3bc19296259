"""Dry runs: what an operation would do, without connecting anywhere.

A module of its own (not in DESIGN's list) because ``kubespray-mgmt run
--dry-run`` must show the plan of the very code that does the work: the
operation runs unchanged against :class:`PlanPool`, whose connections
record each command and file instead of touching a host, and answer as a
fresh cluster would (a current kubespray checkout, no Kubernetes node
yet).  Files written with mode 0600 are listed without their content, and
the placeholder token never reaches a printout.
"""

import base64
import contextlib
import dataclasses
import json

from mgmt_driver import detached
from mgmt_driver import records
from mgmt_driver import ssh

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
    return 'KS:MISSING' in command


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


def _answer(command, kubespray_version=None):
    if _is_layout_probe(command):
        return _layout(kubespray_version)
    if command.startswith(_ADDRESS_PROBE):
        return _interface_answer(command)
    if 'start a detached ansible-playbook run' in command:
        return 'KR:STARTED:20000101T000000Z-dry_run-playbook:1\n'
    if 'the exit status and the end of a detached run' in command:
        return 'KR:RC:0\nKR:TAIL\n'

    if ' get secret ' in command:
        return _PLACEHOLDER_SECRET
    if ' get node ' in command:
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
    if ' get nodes ' in command or ' get pods ' in command:
        return json.dumps({'items': []})
    if ' get configmap cluster-info ' in command:
        return _PLACEHOLDER_CLUSTER_INFO
    return ''


@dataclasses.dataclass
class Step:
    """One recorded action on one host."""

    host: str
    kind: str  # 'run' or 'write'
    text: str
    mode: int | None = None
    content: str | None = None


class PlanConnection:
    """Records what an ``ssh.Connection`` would be asked to do."""

    def __init__(self, host, port, username, steps, kubespray_version=None):
        self.host = host
        self.port = port
        self.username = username
        self._steps = steps
        self._kubespray_version = kubespray_version

    def run(self, command, timeout=None, check=True, env=None, stdin=None,
            on_line=None, keep_tail=False):
        text = ssh.display_command(command, env)
        shown = detached.plan_text(command)
        if shown is not False:
            # A detached playbook run: its start, in words; following it
            # and reading its end are not shown.
            if shown is not None:
                self._steps.append(Step(self.host, 'run', shown))
            return ssh.CommandResult(self.host, text, _answer(text), '', 0)
        self._steps.append(Step(self.host, 'run', text))
        if text.startswith(_ADDRESS_PROBE):
            self._steps.append(Step(
                self.host, 'local', 'assumed: the address is on %s, /%d; '
                'a real run reads it here' % PLACEHOLDER_INTERFACE))
        if _is_layout_probe(text) and self._kubespray_version:
            self._steps.append(Step(
                self.host, 'local', 'assumed: the checkout is kubespray %s '
                '(kubespray.version); a real run checks it here'
                % self._kubespray_version))
        return ssh.CommandResult(self.host, text, _answer(
            text, self._kubespray_version), '', 0)

    def write_file(self, path, content, mode=0o600):
        if isinstance(content, bytes):
            content = content.decode('utf-8', 'replace')
        self._steps.append(Step(self.host, 'write', path, mode, content))

    def read_file(self, path, missing_ok=False):
        return None

    def close(self):
        pass


class PlanPool:
    """Stands in for ``ssh.ConnectionPool`` during a dry run.

    :param kubespray_version: the request's ``kubespray.version``, or
        None: the version the checkout is taken to have (a dry run
        cannot read it; the plan says so).
    """

    def __init__(self, kubespray_version=None):
        self.steps = []
        self._connections = {}
        self._kubespray_version = kubespray_version

    def connection(self, host, credentials, port=22, on_new_key=None):
        key = (host, int(port))
        if key not in self._connections:
            self._connections[key] = PlanConnection(
                host, port, credentials.username, self.steps,
                self._kubespray_version)
        return self._connections[key]

    def reachable(self, host, credentials=None, port=22, timeout=30,
                  on_new_key=None):
        return True

    def forget_host(self, host, port=22, key=None):
        self.steps.append(Step(host, 'local',
                               'forget the SSH host key of %s:%s'
                               % (host, port)))

    def close_all(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close_all()


class PlanRecords(records.RecordStore):
    """Stands in for ``records.RecordStore`` during a dry run: reads the
    real records, writes nothing, and unregisters nothing.

    :param store: the real ``records.RecordStore``.
    """

    def __init__(self, store):
        super().__init__(store.directory)

    def locked(self):
        return contextlib.nullcontext()

    def save(self, record):
        pass

    def remove(self, instance_id):
        pass

    def unregister(self, vim_id):
        pass


def format_plan(steps):
    """The recorded steps as text, host by host in order of first use.

    Content of files with mode 0600 (credentials, keys, kubeconfigs) is
    never shown.
    """
    by_host = {}  # insertion order: hosts in order of first use
    for step in steps:
        by_host.setdefault(step.host, []).append(step)
    lines = []
    for host, host_steps in by_host.items():
        lines.append('== %s' % host)
        for step in host_steps:
            lines += _format_step(step)
    return '\n'.join(lines) + '\n'


def _is_secret(step):
    return step.mode is not None and step.mode & 0o077 == 0


def plan_records(steps):
    """The recorded steps as JSON-ready dicts, in the order they ran.

    Each has the same keys: ``host``, ``kind`` (``run``, ``write`` or
    ``local``), ``text`` (the command, the path written or the local
    action), and for a ``write`` ``mode`` (octal text), ``bytes`` and
    ``content``, which is None for a file with mode 0600 (credentials,
    keys, kubeconfigs); those three are None for the other kinds.
    """
    return [_record(step) for step in steps]


def _record(step):
    record = {'host': step.host, 'kind': step.kind, 'text': step.text,
              'mode': None, 'bytes': None, 'content': None}
    if step.kind == 'write':
        record.update(mode='%04o' % (step.mode or 0o644),
                      bytes=len(step.content or ''),
                      content=None if _is_secret(step) else step.content)
    return record


def _format_step(step):
    if step.kind == 'run':
        return ['$ ' + step.text]
    if step.kind == 'local':
        return ['# ' + step.text]
    header = 'write %s (mode %s)' % (step.text, oct(step.mode or 0o644))
    if _is_secret(step):
        return ['> %s: secret, %d bytes not shown' % (
            header, len(step.content or ''))]
    body = (step.content or '').rstrip('\n').splitlines()
    return ['> ' + header] + ['    ' + line for line in body]
