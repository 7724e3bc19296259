"""``bin/kubectl``: a fake kubectl over the kubespray double's state.

A test double, not a Kubernetes client.  It answers the subset of
kubectl the driver uses, with real kubectl's output shapes, messages and
exit codes (0, or 1 with ``error: ...`` / ``Error from server ...`` on
stderr), against :mod:`clusterstate`::

  version --client [-o json]
  get nodes|pods|secrets|serviceaccounts|clusterrolebindings|...
      [NAME] [-o json|name|wide|jsonpath=...] [-n NS | -A]
      [--field-selector k=v,k!=v] [-l k=v] [--ignore-not-found]
  get --raw=/readyz [--server=URL]
  cordon NAME / uncordon NAME
  drain NAME [--ignore-daemonsets] [--delete-emptydir-data] [--force]
      [--timeout=DURATION] [--grace-period=N] [--disable-eviction]
      [--pod-selector=SEL] [--skip-wait-for-delete-timeout=N]
  delete KIND NAME... [-n NS] [--ignore-not-found] [--wait=BOOL]
  apply -f FILE|-          (JSON; YAML too when PyYAML is importable)

``get --raw /readyz`` (``/livez``, ``/healthz``) answers ``ok``; with the
global ``--server URL`` only when something there greets as the site's
API backends do (:func:`get_raw`).
Global flags ``--kubeconfig PATH`` (accepted, not read), ``-n``,
``--request-timeout``, ``--context`` go anywhere.  The state directory is
``$KUBE_DOUBLE_STATE_DIR`` or ``state/`` next to ``bin/``.

Every command first runs the node lifecycle controller
(:func:`clusterstate.watch_nodes`): a node whose VM's sshd stopped
answering turns NotReady after the grace period, and pods deleted on it
stay Terminating.  Evictions go through the PodDisruptionBudget check of
the eviction API (:func:`clusterstate.eviction_refusal`).
"""

import calendar
import contextlib
import json
import os
import re
import socket
import sys
import time

import clusterstate as cs

#: resource name -> (kind, namespaced, API group suffix for apply output)
RESOURCES = {
    'nodes': ('Node', False, ''),
    'pods': ('Pod', True, ''),
    'secrets': ('Secret', True, ''),
    'serviceaccounts': ('ServiceAccount', True, ''),
    'configmaps': ('ConfigMap', True, ''),
    'namespaces': ('Namespace', False, ''),
    'clusterrolebindings': ('ClusterRoleBinding', False,
                            '.rbac.authorization.k8s.io'),
    'clusterroles': ('ClusterRole', False, '.rbac.authorization.k8s.io'),
    'poddisruptionbudgets': ('PodDisruptionBudget', True, '.policy'),
}
ALIASES = {'no': 'nodes', 'node': 'nodes', 'po': 'pods', 'pod': 'pods',
           'secret': 'secrets', 'sa': 'serviceaccounts',
           'serviceaccount': 'serviceaccounts', 'cm': 'configmaps',
           'configmap': 'configmaps', 'ns': 'namespaces',
           'namespace': 'namespaces',
           'clusterrolebinding': 'clusterrolebindings',
           'clusterrole': 'clusterroles', 'pdb': 'poddisruptionbudgets',
           'poddisruptionbudget': 'poddisruptionbudgets'}
KIND_TO_RESOURCE = {kind: res for res, (kind, _, _) in RESOURCES.items()}
BUILTIN_NAMESPACES = ('default', 'kube-system', 'kube-public',
                      'kube-node-lease')
BUILTIN_CLUSTERROLES = ('cluster-admin', 'admin', 'edit', 'view')

GLOBAL_FLAGS = {'kubeconfig': True, 'namespace': True, 'context': True,
                'request-timeout': True, 'v': True, 'server': True}
SHORT = {'n': 'namespace', 'o': 'output', 'A': 'all-namespaces',
         'f': 'filename', 'l': 'selector', 'v': 'v'}
#: command -> {flag: takes a value}
COMMAND_FLAGS = {
    'version': {'client': False, 'output': True},
    'get': {'output': True, 'all-namespaces': False, 'field-selector': True,
            'selector': True, 'ignore-not-found': False,
            'no-headers': False, 'raw': True},
    'cordon': {}, 'uncordon': {},
    'label': {'overwrite': False}, 'taint': {'overwrite': False},
    'drain': {'ignore-daemonsets': False, 'delete-emptydir-data': False,
              'force': False, 'timeout': True, 'grace-period': True,
              'disable-eviction': False, 'pod-selector': True,
              'skip-wait-for-delete-timeout': True},
    'delete': {'ignore-not-found': False, 'wait': False, 'timeout': True,
               'grace-period': True, 'now': False},
    'apply': {'filename': True},
}
CLIENT_VERSION = 'v1.33.5'
NO_SERVER = ('The connection to the server 127.0.0.1:6443 was refused - '
             'did you specify the right host or port?')


class KubectlError(Exception):
    """Printed as is on stderr; exit status 1."""


def usage(command, message):
    hint = ("See 'kubectl %s --help' for usage." % command if command
            else "See 'kubectl --help' for usage.")
    return KubectlError('error: %s\n%s' % (message, hint))


def not_found(resource, name):
    return KubectlError('Error from server (NotFound): %s "%s" not found'
                        % (resource, name))


# --- argument parsing ------------------------------------------------

def _bool(command, name, value):
    if value in ('true', 'True', '1'):
        return True
    if value in ('false', 'False', '0'):
        return False
    raise usage(command, 'invalid argument "%s" for "--%s" flag: '
                'strconv.ParseBool: parsing "%s": invalid syntax'
                % (value, name, value))


def _split_flag(token):
    if token.startswith('--'):
        name, eq, value = token[2:].partition('=')
        return name, (value if eq else None)
    letter, rest = token[1:2], token[2:]
    if letter not in SHORT:
        raise usage(None, 'unknown shorthand flag: %r in %s' % (letter,
                                                                token))
    return SHORT[letter], (rest[1:] if rest.startswith('=') else
                           rest or None)


def parse(argv):
    """Split *argv* into (command, positional args, flags).

    :raises KubectlError: unknown command or flag, missing flag value.
    """
    command, positional, flags = None, [], {}
    tokens = list(argv)
    while tokens:
        token = tokens.pop(0)
        if token == '--':
            positional.extend(tokens)
            break
        if not token.startswith('-') or token == '-':
            if command is None:
                command = token
                if command not in COMMAND_FLAGS:
                    raise KubectlError('error: unknown command "%s" for '
                                       '"kubectl"' % command)
            else:
                positional.append(token)
            continue
        name, value = _split_flag(token)
        spec = dict(GLOBAL_FLAGS, **COMMAND_FLAGS.get(command, {}))
        if name not in spec:
            raise usage(command, 'unknown flag: --%s' % name)
        if spec[name]:
            if value is None:
                if not tokens:
                    raise usage(command,
                                'flag needs an argument: --%s' % name)
                value = tokens.pop(0)
            flags[name] = value
        else:
            flags[name] = True if value is None else _bool(command, name,
                                                           value)
    if command is None:
        raise KubectlError('error: you must specify a command '
                           '(kubectl --help)')
    return command, positional, flags


_DURATION_UNITS = {'ns': 1e-9, 'us': 1e-6, 'µs': 1e-6, 'ms': 1e-3,
                   's': 1.0, 'm': 60.0, 'h': 3600.0}


def parse_duration(text, flag='timeout'):
    """A Go duration ("360s", "1m30s", "0") in seconds."""
    if text in ('0', ''):
        return 0.0
    parts = re.findall(r'(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)', text)
    if not parts or ''.join(n + u for n, u in parts) != text:
        raise KubectlError(
            'error: invalid argument "%s" for "--%s" flag: time: %s '
            'duration "%s"' % (text, flag, 'missing unit in' if
                               text.isdigit() else 'invalid', text))
    return sum(float(n) * _DURATION_UNITS[u] for n, u in parts)


# --- state access ----------------------------------------------------

def state_dir():
    # The modules sit at the site root, next to bin/ and state/.
    default = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           'state')
    return os.environ.get('KUBE_DOUBLE_STATE_DIR', default)


@contextlib.contextmanager
def cluster():
    """A locked, saved-on-exit view of a running cluster.

    :raises KubectlError: no cluster (connection refused).
    """
    with cs.transaction(state_dir()) as txn:
        if not cs.running(txn.state):
            raise KubectlError(NO_SERVER)
        cs.fill_token_secrets(txn.state)
        cs.watch_nodes(txn.state, kubelet_answers)
        yield txn.state


def kubelet_answers(node):
    """Whether the VM of *node* is up: its sshd accepts a connection
    (a loopback connect is answered or refused at once)."""
    if not node.get('ssh'):
        return True
    host, port = cs.split_endpoint(node['ssh'])
    try:
        socket.create_connection((host, port or 22), 1.0).close()
        return True
    except (OSError, ValueError):
        return False


def resource_of(command, name):
    canonical = ALIASES.get(name, name)
    if canonical not in RESOURCES:
        raise KubectlError('error: the server doesn\'t have a resource '
                           'type "%s"' % name)
    return canonical


def split_names(command, positional):
    """``get nodes a b`` and ``get node/a`` forms -> (resource, names)."""
    if not positional:
        raise KubectlError(
            'error: You must specify the type of resource to %s. Use '
            '"kubectl api-resources" for a complete list of supported '
            'resources.' % command)
    first = positional[0]
    if '/' in first:
        resource = resource_of(command, first.split('/', 1)[0])
        names = [p.split('/', 1)[1] for p in positional]
        return resource, names
    return resource_of(command, first), positional[1:]


def namespace_of(flags):
    return flags.get('namespace', 'default')


def public(obj):
    """A stored object without the double's private (``_``) fields."""
    meta = {k: v for k, v in obj['metadata'].items()
            if not k.startswith('_')}
    return dict(obj, metadata=meta)


# --- reading objects -------------------------------------------------

def all_objects(state, resource):
    kind = RESOURCES[resource][0]
    if resource == 'nodes':
        return [cs.node_object(state['nodes'][n])
                for n in sorted(state['nodes'])]
    if resource == 'pods':
        return [cs.pod_object(p, cs.pod_healthy(state, p))
                for p in state['pods']]
    stored = [public(o) for k, o in sorted(state['objects'].items())
              if o['kind'] == kind]
    if resource == 'poddisruptionbudgets':
        stored = [dict(o, status=cs.budget_status(state, o))
                  for o in stored]
    builtin = {'namespaces': BUILTIN_NAMESPACES,
               'clusterroles': BUILTIN_CLUSTERROLES}.get(resource, ())
    made = [{'apiVersion': 'v1', 'kind': kind, 'metadata': {'name': n}}
            for n in builtin]
    return made + stored


_FIELDS = {
    'pods': ('metadata.name', 'metadata.namespace', 'spec.nodeName',
             'status.phase'),
    'nodes': ('metadata.name', 'spec.unschedulable'),
    'secrets': ('metadata.name', 'metadata.namespace', 'type'),
}


def _field(obj, path):
    value = obj
    for part in path.split('.'):
        value = value.get(part, '') if isinstance(value, dict) else ''
    if isinstance(value, bool):
        return 'true' if value else 'false'
    return str(value)


def _selector_terms(text):
    for term in filter(None, text.split(',')):
        match = re.fullmatch(r'(!?)([^=!]+?)\s*(?:(==|=|!=)\s*(.*))?', term)
        if not match:
            raise KubectlError('error: unable to parse requirement: %r'
                               % term)
        yield match.groups()


def field_filter(resource, text, objs):
    allowed = _FIELDS.get(resource, ('metadata.name', 'metadata.namespace'))
    for _, key, op, value in _selector_terms(text):
        if key not in allowed or op is None:
            raise KubectlError(
                'Error from server (BadRequest): Unable to find {"" "v1" '
                '"%s"} that match label selector "", field selector "%s": '
                'field label not supported: %s' % (resource, text, key))
        want = op != '!='
        objs = [o for o in objs if (_field(o, key) == value) == want]
    return objs


def label_filter(text, objs):
    for neg, key, op, value in _selector_terms(text):
        def keep(obj, neg=neg, key=key, op=op, value=value):
            labels = obj['metadata'].get('labels') or {}
            if op is None:
                return (key in labels) != bool(neg)
            return (labels.get(key) == value) == (op != '!=')
        objs = [o for o in objs if keep(o)]
    return objs


def select(state, resource, names, flags):
    namespaced = RESOURCES[resource][1]
    objs = all_objects(state, resource)
    if namespaced and not flags.get('all-namespaces'):
        namespace = namespace_of(flags)
        objs = [o for o in objs
                if o['metadata'].get('namespace') == namespace]
    if 'field-selector' in flags:
        objs = field_filter(resource, flags['field-selector'], objs)
    if 'selector' in flags:
        objs = label_filter(flags['selector'], objs)
    if not names:
        return objs, []
    by_name = {o['metadata']['name']: o for o in objs}
    missing = [n for n in names if n not in by_name]
    return [by_name[n] for n in names if n in by_name], missing


# --- output ----------------------------------------------------------

def age(timestamp):
    seconds = max(int(time.time() - timestamp), 0)
    for unit, size, below in (('s', 1, 120), ('m', 60, 7200),
                              ('h', 3600, 172800)):
        if seconds < below:
            return '%d%s' % (seconds // size, unit)
    return '%dd' % (seconds // 86400)


def _created(obj):
    stamp = obj['metadata'].get('creationTimestamp')
    if not stamp:
        return time.time()
    return calendar.timegm(time.strptime(stamp, '%Y-%m-%dT%H:%M:%SZ'))


def _node_row(obj, wide):
    labels = obj['metadata']['labels']
    roles = sorted(k.split('/', 1)[1] for k in labels
                   if k.startswith('node-role.kubernetes.io/'))
    ready = obj['status']['conditions'][0]['status'] == 'True'
    status = 'Ready' if ready else 'NotReady'
    if obj['spec'].get('unschedulable'):
        status += ',SchedulingDisabled'
    row = [obj['metadata']['name'], status, ','.join(roles) or '<none>',
           age(_created(obj)), obj['status']['nodeInfo']['kubeletVersion']]
    if wide:
        row.append(obj['status']['addresses'][0]['address'])
    return row


def _pod_row(obj, wide, all_ns):
    meta = obj['metadata']
    row = [meta['namespace']] if all_ns else []
    status = ('Terminating' if meta.get('deletionTimestamp')
              else obj['status']['phase'])
    row += [meta['name'], '1/1' if obj['status']['phase'] == 'Running'
            else '0/1', status, '0', age(_created(obj))]
    if wide:
        row.append(obj['spec'].get('nodeName', '<none>'))
    return row


def table(resource, objs, flags):
    wide = flags.get('output') == 'wide'
    all_ns = bool(flags.get('all-namespaces'))
    if resource == 'nodes':
        head = ['NAME', 'STATUS', 'ROLES', 'AGE', 'VERSION']
        head += ['INTERNAL-IP'] if wide else []
        rows = [_node_row(o, wide) for o in objs]
    elif resource == 'pods':
        head = (['NAMESPACE'] if all_ns else []) + [
            'NAME', 'READY', 'STATUS', 'RESTARTS', 'AGE']
        head += ['NODE'] if wide else []
        rows = [_pod_row(o, wide, all_ns) for o in objs]
    else:
        head = ['NAME', 'AGE']
        rows = [[o['metadata']['name'], age(_created(o))] for o in objs]
    if flags.get('no-headers'):
        head = None
    return _columns(head, rows)


def _columns(head, rows):
    lines = ([head] if head else []) + rows
    widths = [max(len(line[i]) for line in lines)
              for i in range(len(lines[0]))] if lines else []
    return '\n'.join('   '.join(cell.ljust(w) for cell, w in
                                zip(line, widths, strict=True)).rstrip()
                     for line in lines)


def jsonpath(template, data):
    """kubectl's JSONPath subset: ``{.a.b\\.c}``, ``[N]``, ``[*]``,
    string literals ``{"\\n"}`` and plain text between expressions."""
    out = []
    for text, expr in re.findall(r'([^{]*)(?:\{([^}]*)\})?', template):
        out.append(text)
        if expr.startswith('"'):
            out.append(json.loads(expr))
        elif expr.split(' ')[0] in ('range', 'end'):
            raise KubectlError('error: the fake kubectl does not support '
                               'jsonpath range')
        elif expr:
            values = _walk_path([data], _path_tokens(expr))
            out.append(' '.join(_jsonpath_text(v) for v in values))
    return ''.join(out)


def _path_tokens(expr):
    tokens, buf, i = [], '', 0
    expr = expr.strip().lstrip('$')
    while i < len(expr):
        char = expr[i]
        if char == '\\' and i + 1 < len(expr):
            buf, i = buf + expr[i + 1], i + 2
            continue
        if char in '.[':
            if buf:
                tokens.append(buf)
            buf = ''
            if char == '[':
                end = expr.index(']', i)
                tokens.append(('index', expr[i + 1:end]))
                i = end
        else:
            buf += char
        i += 1
    if buf:
        tokens.append(buf)
    return tokens


def _walk_path(values, tokens):
    for token in tokens:
        found = []
        for value in values:
            found.extend(_step(value, token))
        values = found
    return values


def _step(value, token):
    if isinstance(token, tuple):
        index = token[1]
        if index == '*':
            if isinstance(value, dict):
                return list(value.values())
            return list(value) if isinstance(value, list) else []
        if isinstance(value, list) and re.fullmatch(r'-?\d+', index):
            position = int(index)
            return [value[position]] if -len(value) <= position < len(
                value) else []
        return []
    if token == '*' and isinstance(value, dict):
        return list(value.values())
    if isinstance(value, dict) and token in value:
        return [value[token]]
    return []


def _jsonpath_text(value):
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return 'true' if value else 'false'
    return json.dumps(value)


def render(resource, objs, single, flags):
    """Text for ``get`` output in the ``-o`` format asked for."""
    output = flags.get('output', '')
    if output in ('', 'wide'):
        return table(resource, objs, flags)
    if output == 'name':
        kind, _, group = RESOURCES[resource]
        return '\n'.join('%s%s/%s' % (kind.lower(), group,
                                      o['metadata']['name']) for o in objs)
    data = objs[0] if single else {
        'apiVersion': 'v1', 'kind': 'List', 'items': objs,
        'metadata': {'resourceVersion': ''}}
    if output == 'json':
        return json.dumps(data, indent=4)
    if output == 'yaml':
        return _yaml().safe_dump(data, default_flow_style=False).rstrip()
    if output.startswith('jsonpath='):
        return jsonpath(output[len('jsonpath='):], data)
    raise KubectlError('error: unable to match a printer suitable for the '
                       'output format "%s", allowed formats are: json,'
                       'jsonpath,name,wide,yaml' % output)


def _yaml():
    try:
        import yaml
    except ImportError:
        raise KubectlError('error: YAML needs PyYAML on this test site '
                           '(python3-yaml); use JSON') from None
    return yaml


# --- commands --------------------------------------------------------

def cmd_version(positional, flags):
    client = {'major': '1', 'minor': CLIENT_VERSION.split('.')[1],
              'gitVersion': CLIENT_VERSION, 'platform': 'linux/amd64'}
    data = {'clientVersion': client, 'kustomizeVersion': 'v5.4.2'}
    lines = ['Client Version: %s' % CLIENT_VERSION,
             'Kustomize Version: v5.4.2']
    if not flags.get('client'):
        state = cs.read(state_dir())
        if not cs.running(state):
            print('\n'.join(lines))
            raise KubectlError(NO_SERVER)
        server = state['cluster']['kube_version']
        data['serverVersion'] = dict(client, gitVersion=server)
        lines.append('Server Version: %s' % server)
    if flags.get('output') == 'json':
        return json.dumps(data, indent=2)
    return '\n'.join(lines)


#: ``get --raw`` paths answered (the API server's health endpoints).
HEALTH_PATHS = ('/readyz', '/livez', '/healthz')


def get_raw(path, flags):
    """``get --raw /readyz``: "ok" from the API server, reached at
    ``--server`` when given (on the site: through HAProxy, whose
    backends greet a connection; one that closes at once is a frontend
    with no backend up), else at the kubeconfig's (this state)."""
    if path not in HEALTH_PATHS:
        raise KubectlError('Error from server (NotFound): the server could '
                           'not find the requested resource')
    server = flags.get('server')
    if server:
        match = re.fullmatch(r'https?://\[?([^\]/]+?)\]?:(\d+)/?', server)
        if match is None:
            raise KubectlError('error: invalid server %r' % server)
        host, port = match.group(1), int(match.group(2))
        try:
            with socket.create_connection((host, port), timeout=5) as sock:
                if not sock.recv(64):
                    raise KubectlError(
                        'Unable to connect to the server: EOF')
        except OSError:
            raise KubectlError(
                'The connection to the server %s:%d was refused - did you '
                'specify the right host or port?' % (host, port)) from None
    with cluster():
        pass
    return 'ok'


def cmd_get(positional, flags):
    if flags.get('raw'):
        if positional:
            raise usage('get', 'arguments may not be passed when --raw '
                        'is specified')
        return get_raw(flags['raw'], flags)
    resource, names = split_names('get', positional)
    with cluster() as state:
        objs, missing = select(state, resource, names, flags)
    if missing and not flags.get('ignore-not-found'):
        if objs:
            print(render(resource, objs, False, flags))
        raise KubectlError('\n'.join(str(not_found(resource, name))
                                     for name in missing))
    if not objs:
        if not names and flags.get('output', '') in ('', 'wide'):
            scope = ('' if flags.get('all-namespaces') or
                     not RESOURCES[resource][1] else
                     ' in %s namespace' % namespace_of(flags))
            print('No resources found%s.' % scope, file=sys.stderr)
            return ''
        if names:
            return ''
    return render(resource, objs, len(names) == 1, flags)


def _node_or_404(state, name):
    node = state['nodes'].get(name)
    if node is None:
        raise not_found('nodes', name)
    return node


def _one_node(command, positional):
    if len(positional) != 1:
        raise KubectlError("error: USAGE: %s NODE [flags]\nSee 'kubectl %s "
                           "-h' for help and examples" % (command, command))
    return positional[0]


def _set_schedulable(command, positional, schedulable):
    name = _one_node(command, positional)
    with cluster() as state:
        node = _node_or_404(state, name)
        was = node['schedulable']
        node['schedulable'] = schedulable
    verb = 'uncordoned' if schedulable else 'cordoned'
    return 'node/%s %s%s' % (name, 'already ' if was == schedulable else '',
                             verb)


def cmd_cordon(positional, flags):
    return _set_schedulable('cordon', positional, False)


def cmd_uncordon(positional, flags):
    return _set_schedulable('uncordon', positional, True)


def _nodes_and_changes(command, positional, is_change):
    """``kubectl label|taint node NAME... CHANGE...``: (names, changes),
    split as kubectl splits them (*is_change* tells a change)."""
    if not positional or positional[0] not in ('node', 'nodes', 'no'):
        raise KubectlError("error: USAGE: %s node NAME... CHANGE... [flags]"
                           % command)
    names, changes = [], []
    for arg in positional[1:]:
        if is_change(arg):
            changes.append(arg)
        elif changes:
            raise KubectlError('error: all resources must be specified '
                               'before %s changes: %s' % (command, arg))
        else:
            names.append(arg)
    if not names:
        raise KubectlError('error: one or more resources must be specified '
                           'as <resource> <name>')
    if not changes:
        raise KubectlError('error: at least one %s update is required'
                           % command)
    return names, changes


class _Refused(Exception):
    """A node's change fails: kubectl's messages, several at once."""

    def __init__(self, messages):
        super().__init__(messages)
        self.messages = messages


def _failure(errors):
    """kubectl's report (cmdutil.CheckErr) of *errors*, one per node
    (each a list of messages); a lone error is unwrapped."""
    if len(errors) == 1:
        errors = errors[0]
        if len(errors) == 1:
            text = errors[0]
            return KubectlError(text if text.startswith(
                'Error from server') else 'error: ' + text)
        return KubectlError('\n'.join(errors))
    return KubectlError('\n'.join(
        e[0] if len(e) == 1 else '[%s]' % ', '.join(e) for e in errors))


def _each_node(names, change):
    """Run ``change(name, node)`` (a copy of the node; the output line)
    on every node named, as kubectl visits them: a node that is missing
    or refused keeps its state, the others are changed and their lines
    printed, then the errors, exit status 1."""
    out, errors = [], []
    with cluster() as state:
        for name in names:
            if name not in state['nodes']:
                errors.append(['Error from server (NotFound): nodes "%s" '
                               'not found' % name])
                continue
            node = json.loads(json.dumps(state['nodes'][name]))
            try:
                out.append(change(name, node))
            except _Refused as exc:
                errors.append(exc.messages)
                continue
            state['nodes'][name] = node
    if errors:
        if out:
            print('\n'.join(out), flush=True)
        raise _failure(errors)
    return '\n'.join(out)


def _label_changes(changes):
    """``key=value`` to set and ``key-`` to remove, as kubectl parses
    them: (labels, removals)."""
    labels, remove = {}, []
    for change in changes:
        if '=' in change:
            parts = change.split('=')
            if len(parts) != 2:
                raise KubectlError('error: invalid label spec: %s' % change)
            labels[parts[0]] = parts[1]
        else:
            remove.append(change[:-1])
    if any(key in labels for key in remove):
        raise KubectlError('error: can not both modify and remove a label '
                           'in the same command')
    return labels, remove


def cmd_label(positional, flags):
    """Set ``key=value`` labels (an existing other value needs
    ``--overwrite``) and remove ``key-`` ones on one or more nodes, as
    kubectl's: removing a label a node lacks only says so on stdout."""
    names, changes = _nodes_and_changes('label', positional, lambda arg: (
        '=' in arg and arg[0] != '=') or (arg.endswith('-') and arg != '-'))
    labels, remove = _label_changes(changes)
    overwrite = flags.get('overwrite')

    def change(name, node):
        current = node['labels']
        clashes = ["'%s' already has a value (%s), and --overwrite is false"
                   % (key, current[key]) for key, value in labels.items()
                   if current.get(key, value) != value]
        if clashes and not overwrite:
            raise _Refused(clashes)
        notes = ['label "%s" not found.' % key for key in remove
                 if key not in current]
        before = dict(current)
        current.update(labels)
        for key in remove:
            current.pop(key, None)
        # kubectl compares the object's JSON before and after.
        verb = 'labeled'
        if current == before:
            verb = 'not labeled'
        elif not overwrite and len(json.dumps(current)) < len(
                json.dumps(before)):
            verb = 'unlabeled'
        return '\n'.join(notes + ['node/%s %s' % (name, verb)])
    return _each_node(names, change)


def _taint_changes(changes):
    """``key=value:Effect`` to add and ``key:Effect-``/``key-`` to
    remove, as kubectl parses them: (taints, removals)."""
    add, remove = [], []
    for change in changes:
        removal = change.endswith('-')
        taint = cs.parse_taint(change[:-1] if removal else change)
        if taint is None or not (removal or taint['effect']):
            raise KubectlError('error: invalid taint spec: %s' % change)
        if removal:
            remove.append({'key': taint['key'], 'effect': taint['effect']})
        elif (taint['key'], taint['effect']) in [
                (t['key'], t['effect']) for t in add]:
            raise KubectlError('error: duplicated taints with the same key '
                               'and effect: %s' % cs.taint_text(taint))
        else:
            add.append(taint)
    conflicts = ['%s=%s' % (gone['key'], gone['effect']) for taint in add
                 for gone in remove if taint['key'] == gone['key'] and (
                     gone['effect'] in ('', taint['effect']))]
    if conflicts:
        raise KubectlError('error: can not both modify and remove the '
                           'following taint(s) in the same command: %s'
                           % ', '.join(conflicts))
    return add, remove


def _remove_taints(node, remove):
    """Drop the taints *remove* names (a bare key: every effect).

    :returns: kubectl's errors for those the node does not have.
    """
    errors = []
    for gone in remove:
        kept = [t for t in node['taints'] if t['key'] != gone['key'] or (
            gone['effect'] and t['effect'] != gone['effect'])]
        if len(kept) == len(node['taints']):
            errors.append('taint "%s" not found' % cs.taint_text(gone))
        node['taints'] = kept
    return errors


def cmd_taint(positional, flags):
    """Add ``key=value:Effect`` taints (one of the same key and effect
    is replaced only with ``--overwrite``) and remove ``key:Effect-`` or
    ``key-`` ones on one or more nodes, as kubectl's: removing a taint a
    node lacks is an error and leaves that node as it was."""
    names, changes = _nodes_and_changes('taint', positional, lambda arg: (
        '=' in arg or ':' in arg or arg.endswith('-')))
    add, remove = _taint_changes(changes)
    overwrite = flags.get('overwrite')

    def change(name, node):
        same = [t['key'] for t in add for old in node['taints']
                if (t['key'], t['effect']) == (old['key'], old['effect'])]
        if same and not overwrite:
            raise _Refused(['node %s already has %s taint(s) with same '
                            'effect(s) and --overwrite is false'
                            % (name, ','.join(same))])
        added = cs.put_taints(node, add)
        errors = _remove_taints(node, remove)
        if errors:
            raise _Refused(errors)
        if overwrite or (added and remove):
            return 'node/%s modified' % name
        return 'node/%s %s' % (name, 'tainted' if added else 'untainted')
    return _each_node(names, change)


def _movable(pods, flags):
    """The pods drain must evict, and the warnings and errors about the
    rest, as kubectl's drain filters decide."""
    groups = {'daemonset': [], 'bare': [], 'local': []}
    movable = []
    for pod in pods:
        ref = '%s/%s' % (pod['namespace'], pod['name'])
        if pod['owner_kind'] == 'Node':
            continue  # mirror (static) pods are not drained
        if pod['owner_kind'] == 'DaemonSet':
            groups['daemonset'].append(ref)
            continue
        if pod['owner_kind'] is None:
            groups['bare'].append(ref)
        if pod['emptydir']:
            groups['local'].append(ref)
        movable.append(pod)
    errors, warnings = [], []
    checks = (
        ('daemonset', 'ignore-daemonsets',
         'cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to '
         'ignore)', 'ignoring DaemonSet-managed Pods'),
        ('bare', 'force', 'cannot delete Pods that declare no controller '
         '(use --force to override)', 'deleting Pods that declare no '
         'controller'),
        ('local', 'delete-emptydir-data', 'cannot delete Pods with local '
         'storage (use --delete-emptydir-data to override)', None))
    for group, flag, error, warning in checks:
        if not groups[group]:
            continue
        refs = ', '.join(groups[group])
        if not flags.get(flag):
            errors.append('%s: %s' % (error, refs))
        elif warning:
            warnings.append('Warning: %s: %s' % (warning, refs))
    return movable, errors, warnings


def _drain_failed(name, errors):
    joined = errors[0] if len(errors) == 1 else '[%s]' % ', '.join(errors)
    return KubectlError(
        'error: unable to drain node "%s" due to error: %s, continuing '
        'command...\nThere are pending nodes to be drained:\n %s\n%s'
        % (name, joined, name, '\n'.join(errors)))


def _pod_selected(flags):
    """``--pod-selector``: which pods of the node drain considers."""
    text = flags.get('pod-selector')
    if not text:
        return lambda pod: True
    terms = list(_selector_terms(text))

    def selected(pod):
        labels = pod.get('labels') or {}
        return all(((key in labels) != bool(neg)) if op is None else
                   ((labels.get(key) == value) == (op != '!='))
                   for neg, key, op, value in terms)
    return selected


def _drain_candidates(state, name, flags, skip_wait):
    """The pods of node *name* drain looks at: those the pod selector
    picks, minus those deleted longer than --skip-wait-for-delete-timeout
    ago (kubectl's skip filter)."""
    selected = _pod_selected(flags)
    now = time.time()
    return [p for p in cs.pods_on(state, name) if selected(p) and not (
        skip_wait > 0 and p.get('deleting') and
        now - p['deleting'] > skip_wait)]


class _Drain:
    """One ``kubectl drain`` after the cordon: evict (or, with
    --disable-eviction, delete) every movable pod, retry the evictions a
    budget refuses (HTTP 429) every ``eviction_retry`` seconds, and wait
    for each pod asked to go to be gone (kubelet confirmed) or, with
    --skip-wait-for-delete-timeout=N, deleted more than N seconds ago;
    all within --timeout (0: the site's ``max_wait``)."""

    def __init__(self, name, flags, pods, grace, skip_wait):
        self.name, self.flags = name, flags
        self.grace, self.skip_wait = grace, skip_wait
        self.evict = not flags.get('disable-eviction')
        self.pending = [(p['namespace'], p['name']) for p in pods]
        self.waiting = []
        self.errors = []

    def step(self, state, out, err):
        """Ask once for each pending pod; check the waited-for ones.

        :returns: whether the drain has nothing left to do.
        """
        by_ref = {(p['namespace'], p['name']): p for p in state['pods']}
        retry = cs.setting(state, 'eviction_retry')
        still = []
        for ref in self.pending:
            pod = by_ref.get(ref)
            if pod is None:
                continue
            refusal = cs.eviction_refusal(state, pod) if self.evict else None
            if refusal is None:
                if self.evict:
                    out.append('evicting pod %s/%s' % ref)
                cs.delete_pod(state, pod, self.grace)
                self.waiting.append(ref)
            elif refusal[0] == 429:
                err.append('error when evicting pods/"%s" -n "%s" (will '
                           'retry after %ss): %s' % (ref[1], ref[0], retry,
                                                     refusal[1]))
                still.append(ref)
            else:
                self.errors.append('error when evicting pods/"%s" -n "%s": '
                                   '%s' % (ref[1], ref[0], refusal[1]))
        self.pending = still
        by_ref = {(p['namespace'], p['name']): p for p in state['pods']}
        self.waiting = [ref for ref in self.waiting
                        if not self._gone(by_ref.get(ref), ref, out)]
        return not self.pending and not self.waiting

    def _gone(self, pod, ref, out):
        if pod is None:
            out.append('pod/%s %s' % (ref[1], 'evicted' if self.evict
                                      else 'deleted'))
            return True
        if self.skip_wait > 0 and time.time() - pod['deleting'] > \
                self.skip_wait:
            out.append('pod "%s" has DeletionTimestamp older than %d '
                       'seconds, skipping' % (ref[1], self.skip_wait))
            return True
        return False

    def timed_out(self, timeout_text):
        """kubectl's errors for what is left at the global timeout."""
        return self.errors + [
            'error when evicting pods/"%s" -n "%s": global timeout reached: '
            '%s' % (ref[1], ref[0], timeout_text) for ref in self.pending
        ] + ['error when waiting for pod "%s" in namespace "%s" to '
             'terminate: global timeout reached: %s' % (
                 ref[1], ref[0], timeout_text) for ref in self.waiting]


def _skip_wait(flags):
    text = flags.get('skip-wait-for-delete-timeout', '0')
    if not re.fullmatch(r'-?\d+', text):
        raise KubectlError('error: invalid argument "%s" for '
                           '"--skip-wait-for-delete-timeout" flag: '
                           'strconv.ParseInt: parsing "%s": invalid syntax'
                           % (text, text))
    return int(text)


def cmd_drain(positional, flags):
    name = _one_node('drain', positional)
    timeout_text = flags.get('timeout', '0s')
    timeout = parse_duration(timeout_text)
    grace, skip_wait = _grace_period(flags), _skip_wait(flags)
    start = time.monotonic()
    with cluster() as state:
        node = _node_or_404(state, name)
        was = node['schedulable']
        node['schedulable'] = False
    print('node/%s %scordoned' % (name, '' if was else 'already '),
          flush=True)
    with cluster() as state:
        movable, errors, warnings = _movable(
            _drain_candidates(state, name, flags, skip_wait), flags)
        max_wait = cs.setting(state, 'max_wait')
    if errors:
        raise _drain_failed(name, errors)
    if warnings:
        print('\n'.join(warnings), file=sys.stderr, flush=True)
    drain = _Drain(name, flags, movable, grace, skip_wait)
    while True:
        out, err = [], []
        with cluster() as state:
            done = drain.step(state, out, err)
            retry = min(cs.setting(state, 'eviction_retry'), 1.0)
        if out:
            print('\n'.join(out), flush=True)
        if done and not drain.errors:
            return 'node/%s drained' % name
        if drain.errors and not drain.pending and not drain.waiting or \
                time.monotonic() - start >= (timeout or max_wait):
            errors = drain.timed_out(timeout_text)
            print('There are pending pods in node "%s" when an error '
                  'occurred: %s' % (name, errors[0]), file=sys.stderr)
            raise _drain_failed(name, errors)
        if err:
            print('\n'.join(err), file=sys.stderr, flush=True)
        time.sleep(retry)


def _grace_period(flags):
    text = flags.get('grace-period', '-1')
    if not re.fullmatch(r'-?\d+', text):
        raise KubectlError('error: invalid argument "%s" for '
                           '"--grace-period" flag: strconv.ParseInt: '
                           'parsing "%s": invalid syntax' % (text, text))
    return int(text)


def _delete_one(state, resource, name, flags):
    """Delete one object; False if it does not exist."""
    if resource == 'nodes':
        if name not in state['nodes']:
            return False
        cs.node_gone(state, name)
        return True
    if resource == 'pods':
        pods = [p for p in state['pods'] if p['name'] == name and
                p['namespace'] == namespace_of(flags)]
        for pod in pods:
            cs.delete_pod(state, pod, _grace_period(flags))
        return bool(pods)
    kind, namespaced, _ = RESOURCES[resource]
    key = cs.object_key(kind, namespace_of(flags) if namespaced else '',
                        name)
    return state['objects'].pop(key, None) is not None


def cmd_delete(positional, flags):
    resource, names = split_names('delete', positional)
    if not names:
        raise KubectlError('error: resource(s) were provided, but no name '
                           'was specified')
    _grace_period(flags)
    if 'timeout' in flags:
        parse_duration(flags['timeout'])
    out, errors = [], []
    singular = resource[:-1]
    with cluster() as state:
        for name in names:
            if _delete_one(state, resource, name, flags):
                out.append('%s "%s" deleted' % (singular, name))
            elif not flags.get('ignore-not-found'):
                errors.append(str(not_found(resource, name)))
    if errors:
        if out:
            print('\n'.join(out))
        raise KubectlError('\n'.join(errors))
    return '\n'.join(out)


def load_documents(text, source):
    """JSON (one object or a List), or YAML documents with PyYAML."""
    try:
        docs = [json.loads(text)]
    except ValueError:
        try:
            docs = list(_yaml().safe_load_all(text))
        except _yaml().YAMLError as exc:
            raise KubectlError('error: error parsing %s: %s'
                               % (source, exc)) from None
    flat = []
    for doc in docs:
        if isinstance(doc, dict) and doc.get('kind') == 'List':
            flat.extend(doc.get('items') or [])
        elif doc:
            flat.append(doc)
    if not flat:
        raise KubectlError('error: no objects passed to apply')
    return flat


def _namespaces(state):
    return set(BUILTIN_NAMESPACES) | {
        o['metadata']['name'] for o in state['objects'].values()
        if o['kind'] == 'Namespace'}


def _target_namespace(state, doc, flags, source):
    wanted = doc['metadata'].get('namespace')
    given = flags.get('namespace')
    if wanted and given and wanted != given:
        raise KubectlError(
            'error: the namespace from the provided object "%s" does not '
            'match the namespace "%s". You must pass \'--namespace=%s\' to '
            'perform this operation.' % (wanted, given, wanted))
    namespace = wanted or given or 'default'
    if namespace not in _namespaces(state):
        raise KubectlError('Error from server (NotFound): error when '
                           'creating "%s": namespaces "%s" not found'
                           % (source, namespace))
    return namespace


def _validate(doc, source):
    kind = doc.get('kind') if isinstance(doc, dict) else None
    resource = KIND_TO_RESOURCE.get(kind)
    if resource in (None, 'nodes', 'pods'):
        raise KubectlError(
            'error: resource mapping not found for name: "%s" namespace: '
            '"" from "%s": no matches for kind "%s" in version "%s"\n'
            'ensure CRDs are installed first' % (
                (doc.get('metadata') or {}).get('name', ''), source, kind,
                doc.get('apiVersion', '')))
    spec = doc.get('spec') if isinstance(doc.get('spec'), dict) else {}
    if kind == 'PodDisruptionBudget' and 'minAvailable' in spec and \
            'maxUnavailable' in spec:
        raise KubectlError(
            'The PodDisruptionBudget "%s" is invalid: spec: Invalid value: '
            'minAvailable and maxUnavailable cannot be both set'
            % (doc.get('metadata') or {}).get('name', ''))
    if not (doc.get('metadata') or {}).get('name'):
        raise KubectlError('error: error when retrieving current '
                           'configuration of %s from "%s": resource name '
                           'may not be empty' % (kind, source))
    if (kind == 'Secret' and doc.get('type') ==
            'kubernetes.io/service-account-token' and
            'kubernetes.io/service-account.name' not in (
                doc['metadata'].get('annotations') or {})):
        raise KubectlError(
            'The Secret "%s" is invalid: metadata.annotations[kubernetes.io/'
            'service-account.name]: Required value' % doc['metadata']['name'])
    return resource


def _stored(doc, namespace, old):
    manifest = json.dumps(doc, sort_keys=True)
    obj = json.loads(manifest)
    meta = obj['metadata']
    if namespace:
        meta['namespace'] = namespace
    if obj['kind'] == 'Secret':
        obj.setdefault('type', 'Opaque')
        data = obj.setdefault('data', {})
        for key, value in (obj.pop('stringData', None) or {}).items():
            data[key] = cs.b64(value)
        if old and obj['type'] == 'kubernetes.io/service-account-token':
            # The token controller's keys survive a re-apply.
            for key in ('token', 'ca.crt', 'namespace'):
                if key in old.get('data', {}):
                    data.setdefault(key, old['data'][key])
    now = time.time()
    meta['creationTimestamp'] = (old['metadata']['creationTimestamp'] if
                                 old else cs.iso(now))
    meta['uid'] = old['metadata']['uid'] if old else cs.suffix(24)
    meta['_applied'] = old['metadata']['_applied'] if old else now
    meta['_manifest'] = manifest
    return obj


def apply_one(state, doc, flags, source):
    resource = _validate(doc, source)
    kind, namespaced, group = RESOURCES[resource]
    namespace = (_target_namespace(state, doc, flags, source)
                 if namespaced else '')
    key = cs.object_key(kind, namespace, doc['metadata']['name'])
    old = state['objects'].get(key)
    label = '%s%s/%s' % (kind.lower(), group, doc['metadata']['name'])
    if old and old['metadata']['_manifest'] == json.dumps(doc,
                                                          sort_keys=True):
        return label + ' unchanged'
    if old and kind == 'ClusterRoleBinding' and old.get('roleRef') != (
            doc.get('roleRef')):
        raise KubectlError(
            'The ClusterRoleBinding "%s" is invalid: roleRef: Invalid '
            'value: cannot change roleRef' % doc['metadata']['name'])
    state['objects'][key] = _stored(doc, namespace, old)
    return label + (' configured' if old else ' created')


def cmd_apply(positional, flags):
    source = flags.get('filename')
    if not source:
        raise KubectlError('error: must specify one of -f and -k')
    if source == '-':
        text, source = sys.stdin.read(), 'STDIN'
    else:
        try:
            with open(source) as f:
                text = f.read()
        except OSError:
            raise KubectlError('error: the path "%s" does not exist'
                               % source) from None
    docs = load_documents(text, source)
    with cluster() as state:
        out = [apply_one(state, doc, flags, source) for doc in docs]
        cs.fill_token_secrets(state)
    return '\n'.join(out)


COMMANDS = {'version': cmd_version, 'get': cmd_get, 'cordon': cmd_cordon,
            'uncordon': cmd_uncordon, 'drain': cmd_drain,
            'label': cmd_label, 'taint': cmd_taint,
            'delete': cmd_delete, 'apply': cmd_apply}


def main(argv=None):
    """Run one kubectl command line; the exit status."""
    try:
        command, positional, flags = parse(
            sys.argv[1:] if argv is None else argv)
        text = COMMANDS[command](positional, flags)
    except KubectlError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    except cs.StateError as exc:
        print('error: %s' % exc, file=sys.stderr)
        return 1
    if text:
        print(text)
    return 0
