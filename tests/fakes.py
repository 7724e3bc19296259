"""Recording test doubles for :mod:`mgmt_driver.remote.ssh`.

``FakeConnection`` has the public interface of ``ssh.Connection``
(``mgmt_driver.remote.connection.Connection``): it records every call in
``calls`` and answers commands from a script of ``(regex, CommandResult
fields)`` rules, first match wins; commands that match no rule succeed
with empty output.  A rule for one of the remote programs
(``mgmt_driver/remote/scripts/NAME.sh``) may name it: ``r'^program:NAME '``
(see ``_PROGRAM_TAG``).  Remote files live in
``files``.  ``kubespray.OPEN`` (ensure-workspace, detect-layout and
reading records in one program) answers what the rules for
``ensure-workspace`` and ``detect-layout`` answer, then the records it
is asked for from ``files``.
``loadbalancer.APPLY`` (``lb-apply.sh``) is played as the commands it
runs, each recorded and answered like any other (with ``sudo -n`` when
the program runs under it): a write of ``<path>.new`` (mode 0600, then
the program's), ``cmp -- <path>.new <path>`` when a rule answers it or
:attr:`files` holds ``<path>`` (unscripted: from :attr:`files`), then
its ``rm`` (equal) or the check, ``cp``, ``mv``, the reload.
``FakePool`` hands out one ``FakeConnection`` per host, like
``ssh.ConnectionPool``.  ``FakeRegistry`` stands in for
``registry.TackerVimRegistry``.
"""

import base64
import io
import re
import shlex
import tarfile

from mgmt_driver.common import exceptions
from mgmt_driver.operations import etcdsnapshots
from mgmt_driver.remote import connection
from mgmt_driver.remote import detached
from mgmt_driver.remote import kubectl
from mgmt_driver.remote import kubespray
from mgmt_driver.remote import loadbalancer
from mgmt_driver.remote import programs
from mgmt_driver.remote import ssh
from mgmt_driver.state import registry

_DETACHED_PROGRAMS = {detached.START: 'start', detached.FOLLOW: 'follow',
                      detached.END: 'end', detached.STOP: 'stop'}


def detached_call(command):
    """'start', 'follow', 'end' or 'stop' for the programs of
    ``mgmt_driver.remote.detached`` (known by ``remote.name_of``), else
    None."""
    return _DETACHED_PROGRAMS.get(programs.name_of(command))


#: What a rule sees besides the command's text for a remote program,
#: known by ``remote.name_of``: a rule for ``scripts/detect-layout.sh``
#: is ``r'^program:detect-layout '``, whatever the program's text.
_PROGRAM_TAG = 'program:%s '


def fake_key(host):
    """The host key line ``FakePool`` records for *host*."""
    return 'ssh-ed25519 FAKE-' + host


def _etcdctl(command, *args):
    """Whether *command* (an argv) ends with the etcdctl *args*."""
    return isinstance(command, (list, tuple)) and \
        tuple(command[-len(args):]) == args


class FakeConnection(connection.Connection):
    def __init__(self, host, port=22, username='user'):
        self.on_login = None
        self.host = host
        self.port = port
        self.username = username
        self.calls = []
        self.files = {}
        self.modes = {}
        self._rules = []
        self.closed = False
        #: ``{stem: answer}`` of each detached playbook run started.
        self.detached_runs = {}
        #: ``{command: stdin}`` of each command given a standard input.
        self.stdin_of = {}

    def script(self, pattern, stdout='', stderr='', exit_code=0,
               timeout=False, times=None, first=False):
        """Answer commands matching *pattern* (``re.search``).

        :param timeout: raise ``RemoteCommandTimedOut`` instead.
        :param times: use the rule this many times only (None: always).
        :param first: put the rule before the existing ones.
        """
        rule = {'re': re.compile(pattern), 'stdout': stdout,
                'stderr': stderr, 'exit_code': exit_code,
                'timeout': timeout, 'times': times}
        self._rules.insert(0 if first else len(self._rules), rule)

    @property
    def commands(self):
        return [c[1] for c in self.calls if c[0] == 'run']

    def _match(self, command, tag=None):
        """The first rule that matches *command* (its text) or *tag*."""
        for rule in self._rules:
            if rule['times'] == 0 or not (
                    rule['re'].search(command) or
                    (tag and rule['re'].search(tag))):
                continue
            if rule['times'] is not None:
                rule['times'] -= 1
            return rule
        return None

    def _login(self):
        on_login, self.on_login = self.on_login, None
        if on_login is not None:
            on_login()

    def run(self, command, timeout=None, check=True, env=None, stdin=None,
            on_line=None, keep_tail=False):
        self._login()
        kind = detached_call(command)
        if kind:
            return self._detached(kind, command, on_line)
        if programs.name_of(command) == loadbalancer.APPLY:
            return _LbApply(self, command, stdin).result(check)
        if programs.name_of(command) == kubectl.NODES_PROGRAM:
            return self._kubectl_nodes(programs.args_of(command), timeout,
                                       check)
        if programs.name_of(command) == kubectl.DRAIN_PROGRAM:
            return self._kubectl_drain(programs.args_of(command), timeout,
                                       check)
        text = ssh.display_command(command, env)
        self.calls.append(('run', text))
        if stdin is not None:
            self.stdin_of[text] = stdin
        if isinstance(stdin, bytes) and \
                programs.name_of(command) == kubespray.REPLACE:
            self._unpack(programs.args_of(command)[0], stdin)
        name = programs.name_of(command)
        rule = self._match(text, name and _PROGRAM_TAG % name)
        if rule is None and name == kubespray.OPEN:
            rule = self._open(command)
        rule = rule or self._default_answer(command)
        result = ssh.CommandResult(host=self.host, command=text,
                                   stdout=rule['stdout'],
                                   stderr=rule['stderr'],
                                   exit_code=rule['exit_code'])
        if on_line:
            for line in result.stdout.splitlines():
                on_line(line)
        return self._finish(result, rule, timeout, check)

    def _kubectl_nodes(self, prefix, timeout, check):
        """``kubectl.NODES_PROGRAM KUBECTL...``: the rules of ``KUBECTL
        version --client``, then of ``KUBECTL get nodes -o json``, as the
        program runs them; one command, recorded as both (``&&``)."""
        probe, listing = (ssh.display_command(prefix + words) for words in (
            ['version', '--client'], ['get', 'nodes', '-o', 'json']))
        text = probe + ' && ' + listing
        self.calls.append(('run', text))
        first = self._answer(probe)
        if first['timeout'] or first['exit_code']:
            result = ssh.CommandResult(
                host=self.host, command=text, stdout='',
                stderr=first['stderr'].rstrip('\n') + '\nKN:NOCLIENT\n',
                exit_code=97)
            rule = first
        else:
            rule = self._answer(listing)
            result = ssh.CommandResult(
                host=self.host, command=text, stdout=rule['stdout'],
                stderr='KN:CLIENT\n' + rule['stderr'],
                exit_code=rule['exit_code'])
        return self._finish(result, rule, timeout, check)

    def _kubectl_drain(self, args, timeout, check):
        """``kubectl.DRAIN_PROGRAM NODE N KUBECTL... drain ...``: the
        rule of the drain, then (when it succeeds) of the pod list, as
        the program runs them; one command, recorded as both (``&&``)."""
        node, prefix = args[0], args[2:2 + int(args[1])]
        drain = ssh.display_command(args[2:])
        pods = ssh.display_command(prefix + [
            'get', 'pods', '-A', '--field-selector',
            'spec.nodeName=' + node, '-o', 'json'])
        text = drain + ' && ' + pods
        self.calls.append(('run', text))
        rule = self._answer(drain)
        stdout, stderr, code = rule['stdout'], rule['stderr'], \
            rule['exit_code']
        if not (rule['timeout'] or code):
            rule = self._answer(pods)
            stdout += 'KD:PODS\n' + rule['stdout']
            stderr += 'KD:PODS\n' + rule['stderr']
            code = rule['exit_code']
        result = ssh.CommandResult(host=self.host, command=text,
                                   stdout=stdout, stderr=stderr,
                                   exit_code=code)
        return self._finish(result, rule, timeout, check)

    @staticmethod
    def _finish(result, rule, timeout, check):
        """*result* as :meth:`run` gives it back under *rule*: a timeout,
        a failure when *check*, else the result."""
        if rule['timeout']:
            raise exceptions.RemoteCommandTimedOut(result, timeout)
        if check and not result.ok:
            raise exceptions.RemoteCommandFailed(result)
        return result

    def _answer(self, command):
        """The rule *command* matches, or the default answer."""
        return self._match(command) or self._default_answer(command)

    #: Where the fake etcd snapshot script says it saved a snapshot.
    SNAPSHOT_PATH = '/tmp/kubespray-mgmt-etcd.FAKE0001/snapshot.db'

    def _default_answer(self, command):
        """What a command no rule matches answers: success, empty
        output; the etcd snapshot script (``etcd-snapshot-save``) saves
        a snapshot in :attr:`files` and prints its path."""
        answer = {'stdout': '', 'stderr': '', 'exit_code': 0,
                  'timeout': False}
        # etcdctl answers (etcd_member_wait's wait before a master heal
        # asks): a cluster that lists no member, so no removal waits.
        if _etcdctl(command, 'member', 'list', '-w', 'json'):
            answer['stdout'] = '{"members": []}'
        if _etcdctl(command, 'endpoint', 'health', '--cluster', '-w', 'json'):
            answer['stdout'] = '[]'
        if programs.name_of(command) == etcdsnapshots.SAVE_PROGRAM:
            self.files[self.SNAPSHOT_PATH] = 'etcd snapshot of ' + self.host
            answer['stdout'] = 'KS:SNAPSHOT:%s\n' % self.SNAPSHOT_PATH
        return answer

    def _open(self, command):
        """``kubespray.OPEN WS ROOT LIMIT PLAYBOOK NAME...`` that no rule
        of its own matched: the answer of the ensure-workspace rule
        (when it fails, that alone), then the detect-layout rule's
        output and the records in :attr:`files`."""
        empty = {'stdout': '', 'stderr': '', 'exit_code': 0,
                 'timeout': False}
        ensure = self._match('', _PROGRAM_TAG % detached.ENSURE) or empty
        if ensure['exit_code'] or ensure['timeout']:
            return ensure
        layout = self._match('', _PROGRAM_TAG % kubespray.DETECT) or empty
        args = programs.args_of(command)
        workspace, limit = args[0], int(args[2])
        lines = []
        for name in args[4:]:
            content = self.files.get('%s/%s' % (workspace, name))
            if content is None:
                lines.append('KO:MISSING:%s\n' % name)
                continue
            data = content.encode('utf-8')
            lines.append('KO:FILE:%s:%d:%s\n' % (
                name, len(data),
                base64.b64encode(data[:limit + 1]).decode('ascii')))
        return dict(ensure, stdout=ensure['stdout'] + layout['stdout'] +
                    ''.join(lines), stderr=ensure['stderr'])

    def copy_to(self, path, target, target_path, mode=0o600, limit=None):
        """``ssh.Connection.copy_to`` between two fakes' :attr:`files`."""
        self._login()
        target._login()
        self.calls.append(('copy_to', path, target.host, target_path))
        content = self.read_file(path)
        if limit is not None and len(content) > limit:
            raise exceptions.RemoteFileTooLarge(path=path, host=self.host,
                                                limit=limit)
        target.files[target_path] = content
        target.modes[target_path] = mode
        return len(content)

    def _detached(self, kind, command, on_line):
        """A detached playbook run (``mgmt_driver.remote.detached``) that ends
        as the first rule matching ``detached in <root>: <argv>`` says.

        Only the start is in :attr:`commands`; following the log, reading
        its end and stopping the run are in :attr:`calls` as
        ``('follow'|'end'|'stop', stem)``.
        """
        args = programs.args_of(command)
        if kind != 'start':
            self.calls.append((kind, args[1]))
            run = self.detached_runs[args[1]]
            if kind == 'follow':
                if run['timeout']:
                    raise exceptions.RemoteCommandTimedOut(
                        ssh.CommandResult(self.host, 'tail', '', '', -1), 1)
                for line in run['stdout'].splitlines():
                    if on_line:
                        on_line(line)
                return ssh.CommandResult(self.host, 'tail', '', '', 0)
            if kind == 'end':
                head = 'KR:RUNNING' if run['timeout'] else \
                    'KR:RC:%d' % run['exit_code']
                return ssh.CommandResult(
                    self.host, 'end', '%s\nKR:TAIL\n%s' % (
                        head, run['stdout']), '', 0)
            return ssh.CommandResult(self.host, 'stop', '', '', 0)
        root, operation, book, argv = args[1], args[2], args[3], args[11:]
        text = 'detached in %s: %s' % (root, ssh.display_command(argv))
        self.calls.append(('run', text))
        rule = self._match(text) or {'stdout': '', 'stderr': '',
                                     'exit_code': 0, 'timeout': False}
        stem = '20260101T%06dZ-%s-%s' % (len(self.detached_runs), operation,
                                         book)
        # The run's stderr goes to its log too.
        self.detached_runs[stem] = dict(
            rule, text=text, limit=int(args[5]),
            stdout=rule['stdout'] + rule['stderr'])
        return ssh.CommandResult(self.host, 'start',
                                 'KR:STARTED:%s:4242\n' % stem, '', 0)

    def _unpack(self, directory, data):
        """What ``Workspace.replace`` does on a real host: top-level
        directories of the tar stream replace their old copies."""
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            members = [m for m in archive.getmembers() if m.isfile()]
            for top in {m.name.split('/')[0] for m in members
                        if '/' in m.name}:
                prefix = '%s/%s/' % (directory, top)
                for path in [p for p in self.files if p.startswith(prefix)]:
                    del self.files[path]
                    del self.modes[path]
            for member in members:
                path = '%s/%s' % (directory, member.name)
                self.files[path] = archive.extractfile(member).read().decode()
                self.modes[path] = member.mode

    def write_file(self, path, content, mode=0o600):
        self._login()
        self.calls.append(('write_file', path))
        if isinstance(content, bytes):
            content = content.decode('utf-8')
        self.files[path] = content
        self.modes[path] = mode

    def read_file(self, path, missing_ok=False):
        self._login()
        self.calls.append(('read_file', path))
        if path not in self.files:
            if missing_ok:
                return None
            raise exceptions.RemoteFileError(action='Reading', path=path,
                                             host=self.host,
                                             reason='No such file')
        return self.files[path]

    def get(self, remote_path, local_path):
        self.calls.append(('get', remote_path, local_path))
        with open(local_path, 'w', encoding='utf-8') as f:
            f.write(self.read_file(remote_path))

    def close(self):
        self.closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class FakePool(connection.Pool):
    """One FakeConnection per host address; see ``ssh.ConnectionPool``.

    ``known`` stands in for known_hosts (``{(host, port): key line}``):
    a connection's first command, transfer or read is its login, which
    records ``fake_key(host)`` for a host not in it and then calls the
    connection's ``on_new_key``, as ``accept-new`` does.
    """

    def __init__(self, unreachable=()):
        self.connections = {}
        self.unreachable = set(unreachable)
        self.forgotten = []
        self.known = {}
        self._callbacks = {}

    def connection(self, host, credentials=None, port=22, on_new_key=None):
        if host not in self.connections:
            user = getattr(credentials, 'username', 'user')
            conn = FakeConnection(host, port, user)
            conn.on_login = lambda: self._login(host, port)
            self.connections[host] = conn
        # Tests make connections before the driver does: the first
        # callback given is the connection's.
        if on_new_key is not None:
            self._callbacks.setdefault(host, on_new_key)
        return self.connections[host]

    def _login(self, host, port, on_new_key=None):
        endpoint = (host, int(port))
        if endpoint in self.known:
            return
        self.known[endpoint] = fake_key(host)
        on_new_key = on_new_key or self._callbacks.get(host)
        if on_new_key is not None:
            on_new_key(host, int(port), self.known[endpoint])

    def reachable(self, host, credentials=None, port=22, timeout=30,
                  on_new_key=None):
        if host in self.unreachable:
            return False
        self._login(host, port, on_new_key)
        return True

    def forget_host(self, host, port=22, key=None):
        self.forgotten.append((host, port))
        endpoint = (host, int(port))
        if endpoint in self.known and key in (None, self.known[endpoint]):
            del self.known[endpoint]
            return True
        return False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close_all()

    def __getitem__(self, host):
        return self.connection(host)

    def close_all(self):
        for conn in self.connections.values():
            conn.close()


class FakeRegistry:
    """Records the Kubernetes VIMs registered; a VIM's id is
    ``vim-<name>``, ``current`` maps names to ``ClusterAccess``."""

    def __init__(self):
        self.calls = []
        self.current = {}

    def check_free(self, context, name, owned_id=None):
        if name in self.current and 'vim-' + name != owned_id:
            raise exceptions.VimNameInUse(param=registry.VIM_NAME_FIELD,
                                          name=name)

    def register(self, context, vnf_instance, access, owned_id=None):
        self.check_free(context, access.name, owned_id)
        self.calls.append(('register', access.name))
        self.current[access.name] = access
        return 'vim-' + access.name

    def unregister(self, context, vnf_instance, vim_id):
        name = vim_id[len('vim-'):]
        self.calls.append(('unregister', name))
        return self.current.pop(name, None) is not None


def joined(argv):
    """The display form of an argv list, as the fake records it."""
    return shlex.join(argv)


class _LbApply:
    """``lb-apply.sh`` on a :class:`FakeConnection`, as the commands it
    runs (see the module's docstring)."""

    def __init__(self, conn, command, stdin):
        self.conn, self.text = conn, stdin
        self.prefix = loadbalancer.sudo_prefix(command)
        words = programs.args_of(command)
        self.path, self.mode = words[:2]
        count = int(words[2])
        self.check = words[3:3 + count]
        self.reload = words[3 + count:]
        self.out = []

    def step(self, argv, name=None):
        if name:
            self.out.append('KL:STEP:%s\n' % name)
        return self.conn.run(self.prefix + argv, check=False)

    def answer(self, exit_code=0, stdout='', stderr=''):
        return ssh.CommandResult(self.conn.host, 'sh -c lb-apply', ''.join(
            self.out) + stdout, stderr, exit_code)

    def result(self, check):
        result = self._play()
        if check and not result.ok:
            raise exceptions.RemoteCommandFailed(result)
        return result

    def _compare(self):
        """Write ``<path>.new``; whether ``<path>`` exists, and ``cmp``'s
        status (0: equal, 1: they differ): as a rule for ``cmp``
        answers (the file exists then), else from :attr:`files`."""
        new = self.path + '.new'
        self.conn.write_file(new, self.text, mode=0o600)
        text = joined(self.prefix + ['cmp', '--', new, self.path])
        rule = self.conn._match(text)
        if rule is None and self.path not in self.conn.files:
            return False, 1
        self.conn.calls.append(('run', text))
        if rule is None:
            return True, int(self.conn.files[self.path] != self.text)
        return True, rule['exit_code']

    def _play(self):
        had, differs = self._compare()
        if differs == 0:
            self.step(['rm', '-f', '--', self.path + '.new'])
            del self.conn.files[self.path + '.new'], \
                self.conn.modes[self.path + '.new']
            return self.answer(stdout='KL:SAME\n')
        if differs != 1:
            return self.answer(differs)
        self.conn.modes[self.path + '.new'] = int(self.mode, 8)
        found = self.step(self.check + [self.path + '.new'], 'check')
        if not found.ok:
            self.step(['rm', '-f', '--', self.path + '.new'])
            return self.answer(90, found.stdout + 'KL:CHECKRC:%d\n' %
                               found.exit_code, found.stderr)
        for argv in ([['cp', '-p', '--', self.path, self.path + '.bak']]
                     if had else []) + [
                         ['mv', '-f', '--', self.path + '.new', self.path]]:
            found = self.step(argv)
            if not found.ok:
                return self.answer(found.exit_code, found.stdout,
                                   found.stderr)
        found = self.step(self.reload, 'reload')
        if found.ok:
            return self.answer()
        self.step(['mv', '-f', '--', self.path + '.bak', self.path] if had
                  else ['rm', '-f', '--', self.path])
        return self.answer(found.exit_code, found.stdout, found.stderr)
