"""The ``kubespray-mgmt`` command: the driver's work without Tacker.

Each subcommand is a function ``(args) -> int`` registered in
:func:`build_parser`. Errors go to stderr. Exit codes (README.rst, "Exit
codes"; by error: :data:`CODES_BY_ERROR`): 0 done; 1 bad input (Tacker's
ParamInvalid/NotFound, a usage error, a refusal that changed nothing),
nothing done; 2 a remote failure or any other driver error (a playbook
that failed, SSH); 3 ``status`` read everything and the cluster differs
from its inventory; 5 ``status`` read everything and a control-plane
certificate expires within ``cert_warn_days`` (before 3); 4 another
playbook run holds the cluster's lock (nothing done: run the command
again later); 130 interrupted (Ctrl-C); 141 standard output closed early
(``| head``), as a shell reports a command a closed pipe stopped.
"""

import argparse
import contextlib
import dataclasses
import importlib
import io
import json
import logging
import os
import posixpath
import sys
import tempfile
import time

from oslo_config import cfg

from mgmt_driver.adapters import csar
from mgmt_driver.adapters import doctor
from mgmt_driver.adapters import lcm_requests
from mgmt_driver.adapters import listing
from mgmt_driver.adapters import runreport
from mgmt_driver.adapters import status
from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.common import safetext
from mgmt_driver.model import absence
from mgmt_driver.model import core
from mgmt_driver.model import labels
from mgmt_driver.model import nodes
from mgmt_driver.model import params
from mgmt_driver.operations import lcm
from mgmt_driver.operations import upgrade
from mgmt_driver.remote import detached
from mgmt_driver.remote import inventory
from mgmt_driver.remote import loadbalancer
from mgmt_driver.remote import plan
from mgmt_driver.remote import ssh
from mgmt_driver.session import driver
from mgmt_driver.state import follow
from mgmt_driver.state import healfleet
from mgmt_driver.state import localfiles
from mgmt_driver.state import records
from mgmt_driver.state import statestore

EXIT_OK = 0
EXIT_BAD_INPUT = 1
EXIT_REMOTE_FAILURE = 2
#: ``status``: every part was read, and the cluster differs from its
#: inventory (or a backend is down).
EXIT_DIFFERENCES = 3
#: ``run``: another playbook run holds the cluster's lock; nothing done.
EXIT_BUSY = 4
#: ``status``: every part was read, and a control-plane certificate
#: expires within ``cert_warn_days`` (renew-certs renews them).
EXIT_CERTS_EXPIRING = 5
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C
#: Standard output was closed before the command ended (``| head``):
#: 128 + SIGPIPE, as a shell reports a command a closed pipe stopped.
EXIT_BROKEN_PIPE = 141


#: The one table of exit codes by error (README.rst, "Exit codes"): the
#: first class *exc* is an instance of gives its code.  A refusal that
#: changed nothing is bad input (1), whatever Tacker calls it.
CODES_BY_ERROR = (
    (exceptions.ClusterBusy, EXIT_BUSY),
    (exceptions.InstanceBusy, EXIT_BUSY),
    (exceptions.Refusal, EXIT_BAD_INPUT),
    (exceptions.MgmtDriverParamInvalid, EXIT_BAD_INPUT),
    (exceptions.MgmtDriverNotFound, EXIT_BAD_INPUT),
    (exceptions.MgmtDriverOtherError, EXIT_REMOTE_FAILURE),
    (exceptions.MgmtDriverRemoteCommandError, EXIT_REMOTE_FAILURE),
    (exceptions.MgmtDriverRemoteCommandTimeOut, EXIT_REMOTE_FAILURE))


#: What :func:`_call` turns into a message and :func:`exit_code` (the
#: mixins of the table are not exception classes of their own).
_DRIVER_ERRORS = tuple(kind for kind, _ in CODES_BY_ERROR
                       if issubclass(kind, BaseException))


def exit_code(exc):
    """The exit code of the driver error *exc* (:data:`CODES_BY_ERROR`), or
    None for any other exception."""
    for kind, code in CODES_BY_ERROR:
        if isinstance(exc, kind):
            return code
    return None


class _Parser(argparse.ArgumentParser):
    """argparse, with its usage errors (an unknown option or command, a
    bad value) exiting 1, bad input, instead of its own 2, which the
    command reserves for remote failures."""

    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(EXIT_BAD_INPUT, '%s: error: %s\n' % (self.prog, message))


def terminal_safe(text):
    """*text* with every character that a terminal could obey written
    as an escape (``\\x1b``, ``\\u202e``...); tabs and newlines stay.

    Playbook logs, progress lines, error messages and status reports
    carry bytes from the Ansible server and the nodes, which may be the
    tenant's own hosts: they are shown, never obeyed (no cursor moves,
    window titles or hidden text on the operator's terminal).  The one
    escaping of the command: :func:`safetext.for_terminal`.
    """
    return safetext.for_terminal(text)


def _say(text, file=None):
    """Print *text* (from anywhere, remote hosts included) as
    :func:`terminal_safe` shows it."""
    safetext.say(text, file=file or sys.stdout)


def _version():
    from mgmt_driver.common import version
    return version.version_text()


# Each entry adds one command group (``params``, ``render``, ...) to the
# subparsers; a command sets ``func`` with ``set_defaults``.
_COMMAND_GROUPS = []
_COMMAND_GROUPS.append(csar.add_commands)


# --- params check, render inventory ----------------------------------------

def _usage(parser):
    """A command group named without its subcommand: the group's help."""
    parser.print_help(sys.stderr)
    return EXIT_BAD_INPUT


def _problems_of(exc):
    return getattr(exc, 'problems', None) or [str(exc)]


def _print_problems(exc):
    for problem in _problems_of(exc):
        _say('kubespray-mgmt: %s' % problem, file=sys.stderr)
    return EXIT_BAD_INPUT


def _read_spec(path, need_cp_names):
    """PARAMS holds additionalParams, or a whole SOL003 request body."""
    document = localfiles.load_document(path, 'PARAMS')
    if isinstance(document, dict) and 'additionalParams' in document:
        document = document['additionalParams']
    return params.parse_params(
        document, need_cp_names=need_cp_names,
        default_key_file=cfg.CONF.kubespray_mgmt.ssh_private_key_file,
        max_size=cfg.CONF.kubespray_mgmt.max_request_size)


def _read_nodes(spec, topology_path, need_vip=True):
    """The node set of the topology file (or of the request's nodes).

    :param need_vip: refuse a VIP named by its Heat port
        (``vip_cp_name``): only Tacker reads Heat.
    """
    lb = spec.external_lb
    if need_vip and lb is not None and lb.vip is None and lb.vip_cp_name:
        raise exceptions.ParamsInvalid([
            '%s.external_lb_param.vip_cp_name: names a Heat port, which '
            'only Tacker reads; without Tacker give external_lb_param.vip '
            '(the address the gateways share) instead' % core.ROOT])
    if topology_path is None:
        return nodes.nodes_from_spec(spec)
    document = localfiles.load_document(topology_path, 'TOPOLOGY')
    return nodes.build_nodes(spec, nodes.load_topology(document),
                             path='topology')


def _check_request(args):
    document = localfiles.load_document(args.params, 'PARAMS')
    kind = args.kind or lcm_requests.detect_kind(document)
    if args.instantiated and kind in (lcm_requests.INSTANTIATE,
                                      lcm_requests.MODIFY):
        raise exceptions.ParamsInvalid([
            '--instantiated: only for scale, heal and terminate requests '
            '(PARAMS is %s %s request)' % (
                'an' if kind == lcm_requests.INSTANTIATE else 'a', kind)])
    instantiated = args.instantiated and localfiles.load_document(
        args.instantiated, 'INSTANTIATED')
    return lcm_requests.check(
        document, kind=kind, instantiated=instantiated,
        default_key_file=cfg.CONF.kubespray_mgmt.ssh_private_key_file)


def _request_summary(checked):
    summary = lcm_requests.describe(checked)
    if checked.spec is not None and checked.spec.nodes is not None:
        found = nodes.nodes_from_spec(checked.spec)
        summary += ' (%d master(s), %d worker(s))' % (
            len(found.masters), len(found.workers))
    return summary


def _print_json(document):
    print(json.dumps(document, indent=2, sort_keys=True))


def _check_report(checked=None, problems=()):
    """``params check --output json``: the same keys whatever the outcome."""
    return {'valid': checked is not None,
            'kind': checked and checked.kind,
            'summary': checked and _request_summary(checked),
            'overrides': checked.overrides if checked else [],
            'merged': bool(checked and checked.merged),
            'problems': list(problems),
            'warnings': checked.warnings if checked else []}


def _params_check(args):
    try:
        checked = _check_request(args)
        summary = _request_summary(checked)
    except (exceptions.ParamsInvalid, exceptions.ParamsNotFound) as exc:
        if args.output != 'json':
            return _print_problems(exc)
        _print_json(_check_report(problems=_problems_of(exc)))
        return EXIT_BAD_INPUT
    if args.output == 'json':
        _print_json(_check_report(checked))
    else:
        _say(summary)
        for warning in checked.warnings:
            _say('kubespray-mgmt: warning: %s' % warning, file=sys.stderr)
    return EXIT_OK


def _render_inventory(args):
    if args.mtu is not None and not \
            inventory.MIN_MTU <= args.mtu <= inventory.MAX_MTU:
        _say('kubespray-mgmt: --mtu: must be an integer from %d to %d' % (
            inventory.MIN_MTU, inventory.MAX_MTU), file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        spec = _read_spec(args.params, need_cp_names=False)
        cluster = _read_nodes(spec, args.topology)
        key_paths = args.key_dir and inventory.remote_key_paths(
            spec, cluster, args.key_dir)
        files = inventory.render_files(spec, cluster, key_paths, args.mtu)
        localfiles.write_tree(args.output, files)
    except (exceptions.ParamsInvalid, exceptions.ParamsNotFound) as exc:
        return _print_problems(exc)
    _say('wrote %s: %d file(s) for %d master(s) and %d worker(s)' % (
        args.output, len(files), len(cluster.masters), len(cluster.workers)))
    return EXIT_OK


def _add_params_commands(subparsers):
    group = subparsers.add_parser(
        'params', help="check a request's additionalParams")
    group.set_defaults(func=lambda args: _usage(group))
    commands = group.add_subparsers(dest='params_command', metavar='COMMAND')
    check = commands.add_parser(
        'check', help='validate PARAMS; print a summary or every problem')
    check.add_argument('params', metavar='PARAMS',
                       help='JSON/YAML request body (instantiate, scale, '
                            'heal, terminate or modify: a PATCH) or its '
                            'additionalParams; - reads standard input')
    check.add_argument('--kind', choices=lcm_requests.KINDS,
                       help='the kind of request (default: told by the '
                            "body's fields: type/aspectId scale, "
                            'vnfcInstanceId/cause heal, terminationType '
                            'terminate, flavourId instantiate, metadata/'
                            'vnfInstanceName/vnfdId modify, else '
                            'instantiate)')
    check.add_argument('--instantiated', metavar='FILE',
                       help='for scale, heal and terminate: the '
                            'instantiate request (or its additionalParams) '
                            'the overrides are merged with, as Tacker '
                            'does; default: the overrides are checked over '
                            'a placeholder instantiation')
    _add_output(check, 'valid, kind, summary, overrides, merged, '
                       'problems, warnings')
    check.set_defaults(func=_params_check)


def _add_output(parser, keys):
    """``-o/--output text|json``: the one output option of every command
    that prints a report (README.rst, "Output")."""
    parser.add_argument('-o', '--output', choices=OUTPUT_FORMATS,
                        default='text',
                        help='json: one JSON object on standard output '
                             '(keys: %s; samples/README.rst)' % keys)


#: ``-o/--output`` of the commands that print a report.
OUTPUT_FORMATS = ('text', 'json')


def _add_inputs(parser, topology_note='', required=True):
    """The --params and --topology arguments every rendering command takes.

    :param required: False for the commands that read the instance's
        record without them (``status``: :mod:`mgmt_driver.state.follow`).
    """
    parser.add_argument('--params', required=required, metavar='PARAMS',
                        help='JSON/YAML additionalParams, or a whole '
                             'InstantiateVnfRequest body; - reads standard '
                             'input' + ('' if required else
                                        '; default: the instance\'s record '
                                        '(--instance-id, in the records_dir '
                                        'of --config-file)'))
    parser.add_argument('--topology', metavar='TOPOLOGY',
                        help="YAML/JSON topology file (default: the "
                             "request's explicit nodes list)" + topology_note)


def _add_render_inventory(commands):
    render = commands.add_parser(
        'inventory', help='write the kubespray inventory directory')
    _add_inputs(render)
    render.add_argument('-o', '--output', '--output-file', dest='output',
                        required=True, type=localfiles.output_path,
                        metavar='DIR',
                        help='directory to create, or to replace whole')
    render.add_argument('--mtu', type=int,
                        help='cluster network MTU; sets the Calico MTU')
    render.add_argument('--key-dir', metavar='REMOTE_DIR',
                        help='name private keys REMOTE_DIR/ssh-key-ROLE '
                             '(where you copy them) instead of their '
                             'local paths')
    render.set_defaults(func=_render_inventory)


# --- render haproxy ----------------------------------------------------------

def _write_text(path, text):
    """Write *path* whole or not at all (temp file, then rename)."""
    if path == '-':
        sys.stdout.write(text)
        return
    target = os.path.abspath(path)
    try:
        fd, temp = tempfile.mkstemp(prefix='.%s.' % os.path.basename(target),
                                    dir=os.path.dirname(target))
        try:
            with os.fdopen(fd, 'w', encoding='utf-8') as f:
                f.write(text)
            os.chmod(temp, 0o644)  # no secrets in it
            os.replace(temp, target)
        except BaseException:
            os.unlink(temp)
            raise
    except OSError as exc:
        raise exceptions.MgmtDriverOtherError(
            error_message='cannot write %s: %s' % (path, exc.strerror))


def _render_haproxy(args):
    try:
        spec = _read_spec(args.params, need_cp_names=False)
        cluster = _read_nodes(spec, args.topology)
    except (exceptions.ParamsInvalid, exceptions.ParamsNotFound) as exc:
        return _print_problems(exc)
    options = loadbalancer.layout_options(cfg.CONF)
    if args.worker_check_port is not None:
        options['worker_check_port'] = args.worker_check_port
    layout = loadbalancer.layout_for(spec.external_lb, cluster, **options)
    _write_text(args.output, loadbalancer.render_haproxy_config(layout))
    if args.output != '-':
        _say('wrote %s: API port %d to %d master(s), NodePorts %d-%d to '
             '%d worker(s)' % (args.output, layout.api_port,
                               len(layout.control_plane),
                               layout.nodeport_range[0],
                               layout.nodeport_range[1],
                               len(layout.workers)))
    return EXIT_OK


def _add_render_haproxy(commands):
    render = commands.add_parser(
        'haproxy', help="write the external load balancer's haproxy.cfg")
    _add_inputs(render)
    render.add_argument('-o', '--output', '--output-file', dest='output',
                        required=True, type=localfiles.output_path,
                        metavar='FILE',
                        help='file to write (replaced whole), or - for '
                             'standard output')
    render.add_argument('--worker-check-port', type=int, metavar='PORT',
                        help='TCP health check of each worker on PORT '
                             '(e.g. 10256, kube-proxy); default: none')
    render.set_defaults(func=_render_haproxy)


# Each entry adds one ``render`` subcommand (``inventory``, ``haproxy``...).
_RENDER_COMMANDS = [_add_render_inventory, _add_render_haproxy]


def _add_render_commands(subparsers):
    group = subparsers.add_parser('render', help='render files locally')
    group.set_defaults(func=lambda args: _usage(group))
    commands = group.add_subparsers(dest='render_command', metavar='WHAT')
    for add_command in _RENDER_COMMANDS:
        add_command(commands)


# --- run ---------------------------------------------------------------------

def _node_list(text, cluster, operation):
    """The names of ``--nodes``, checked against the topology.

    :raises ParamsInvalid: ``--nodes`` for an operation that takes
        none, or a name the topology lacks (a gateway only where the
        operation takes one).
    """
    if text is not None and operation not in lcm.TAKES_NODES:
        raise exceptions.ParamsInvalid(
            ['--nodes: only for run %s (not %s)' % (
                ', '.join(sorted(lcm.TAKES_NODES)), operation)])
    names = [n for n in (text or '').split(',') if n]
    gateways = operation in _GATEWAY_OPERATIONS
    unknown = [n for n in names if cluster.get(n) is None and not (
        gateways and cluster.gateway(n) is not None)]
    if unknown:
        raise exceptions.ParamsInvalid(
            ['--nodes: %s not in the topology (nodes: %s)' % (
                ', '.join(unknown), ', '.join(
                    cluster.names + ([g.name for g in cluster.gateways]
                                     if gateways else [])))])
    masters = [n.name for n in cluster.masters if n.name in set(names)]
    if masters and operation == 'scale-in':
        raise exceptions.ParamsInvalid(
            ['--nodes: %s: control-plane node(s); scale-in removes '
             'workers and gateways' % ', '.join(masters)])
    if not names and operation == 'scale-in':
        raise exceptions.ParamsNotFound(
            ['--nodes: missing (which nodes to %s?)' % operation])
    return names


#: Operations whose ``--nodes`` may name gateways (external_lb VMs).
_GATEWAY_OPERATIONS = ('scale-out', 'scale-in', 'heal')


class _ProgressPrinter:
    """Progress lines on *file* (standard output; standard error when
    standard output carries JSON), remembered for an interruption's
    message.

    A reader gone (``run ... | head``) mutes them: progress output never
    decides whether an operation finishes (the summary at the end then
    meets the closed pipe: exit 141).
    """

    def __init__(self, file=None):
        self.file = file
        self.start = time.monotonic()
        self.count = 0
        self.last = None
        self.muted = False

    def __call__(self, line):
        if not line.startswith(('warning: ', 'WARNING: ')):
            self.count += 1
            self.last = line
        if self.muted:
            return
        try:
            _say('[%7.1fs] %s' % (time.monotonic() - self.start, line),
                 file=self.file)
        except (BrokenPipeError, ValueError):  # ValueError: closed file
            self.muted = True

    def done_text(self):
        """What an interruption says was done, or None (nothing yet)."""
        if self.last is None:
            return None
        return ('%d step(s) were done or begun, the last: "%s"; what they '
                'changed stays changed' % (self.count, self.last))


def _progress_printer(file=None):
    """:returns: a :class:`_ProgressPrinter` on *file*."""
    return _ProgressPrinter(file)


class _InterruptedAfter(KeyboardInterrupt):
    """Ctrl-C of a ``run`` after its first step: says what was done."""


@contextlib.contextmanager
def _warnings_shown(progress, debug):
    """While running, print the driver's warnings through *progress*
    (SSH retries...: ``warning: ...`` progress lines), instead of the
    command's stderr handler (:func:`_terminal_log`)."""
    logger = logging.getLogger('mgmt_driver')
    if progress is None or debug:  # --debug: the log goes to stderr
        yield
        return
    handler = safetext.EscapingHandler(progress, logging.WARNING,
                                       'warning: %(message)s')
    # ClusterDriver.warn shows its own, without the instance id prefix.
    handler.addFilter(_not_shown_yet)
    muted = [h for h in logging.getLogger().handlers
             if isinstance(h, _StderrLog)]
    logger.addHandler(handler)
    for stderr_log in muted:
        stderr_log.addFilter(_not_the_drivers)
    try:
        yield
    finally:
        for stderr_log in muted:
            stderr_log.removeFilter(_not_the_drivers)
        logger.removeHandler(handler)


def _not_shown_yet(record):
    return not getattr(record, driver.SHOWN_AS_PROGRESS, False)


def _not_the_drivers(record):
    return not record.name.startswith('mgmt_driver')


#: ``kubespray-mgmt run`` OPERATION -> the composition it runs
#: (:mod:`mgmt_driver.operations.lcm`, shared with Tacker's hooks).
OPERATIONS = lcm.COMMANDS


def _operation_args(args):
    """The options of upgrade or relabel, checked; {} otherwise.

    :raises ParamsInvalid, ParamsNotFound: a bad or missing option.
    """
    relabel = _relabel_args(args)
    extra = relabel if relabel is not None else _upgrade_args(args)
    extra.update(_heal_args(args))
    extra['absent'] = absence.parse_names(args.absent, '--absent')
    return extra


def _heal_args(args):
    """``{phase}`` for a heal split in two; {} otherwise.

    :raises ParamsInvalid: ``--phase`` for another operation, or for the
        whole VNF.
    """
    if args.phase is None:
        return {}
    if args.operation != 'heal':
        _only_for('heal', ('--phase', args.phase))
    if not args.nodes:
        raise exceptions.ParamsInvalid([
            '--phase: needs --nodes (the whole VNF heals in one run)'])
    return {'phase': args.phase}


def _only_for(operation, *options):
    """Refuse any of *options* (``(name, value)``) that was given."""
    for option, value in options:
        if value is not None:
            raise exceptions.ParamsInvalid(
                ['%s: only for run %s' % (option, operation)])


def _relabel_args(args):
    """``{labels, taints}`` for relabel; None for another operation."""
    if args.operation != 'relabel':
        _only_for('relabel', ('--labels', args.labels),
                  ('--taints', args.taints), ('--pools', args.pools))
        return None
    missing = [] if args.nodes or args.pools else [
        '--nodes, --pools: missing (which nodes to relabel?)']
    extra, invalid = {}, []
    for key, parse in (('labels', labels.parse_label_list),
                       ('taints', labels.parse_taint_list)):
        try:  # every bad option at once, not the first one only
            extra[key] = parse(getattr(args, key), '--' + key,
                               removals=True)
        except exceptions.ParamsInvalid as exc:
            invalid += exc.problems
    if not (invalid or extra['labels'] or extra['taints']):
        missing.append('--labels, --taints: missing (what to set?)')
    if invalid:
        raise exceptions.ParamsInvalid(missing + invalid)
    if missing:
        raise exceptions.ParamsNotFound(missing)
    extra['pools'] = [p for p in (args.pools or '').split(',') if p]
    return extra


def _upgrade_args(args):
    """``{kube_version, serial}`` for upgrade, checked; {} otherwise.

    :raises ParamsInvalid, ParamsNotFound: a bad or missing option.
    """
    if args.operation != 'upgrade':
        _only_for('upgrade', ('--kube-version', args.kube_version),
                  ('--serial', args.serial), ('--excuse', args.excuse))
        return {}
    if args.kube_version is None:
        raise exceptions.ParamsNotFound(
            ['--kube-version: missing (the version to upgrade to)'])
    upgrade.parse_version(args.kube_version, '--kube-version')
    return {'kube_version': args.kube_version,
            'serial': upgrade.parse_serial(args.serial, '--serial'),
            'excused': absence.parse_names(args.excuse, '--excuse')}


def _lb_script(spec, cluster, args):
    """The local LB install script, or None; see ``--package-dir``.

    :raises ParamsNotFound: ``--package-dir`` is not a directory.
    """
    if args.package_dir is not None and not os.path.isdir(
            args.package_dir):
        raise exceptions.ParamsNotFound([
            '--package-dir %s: no such directory' % args.package_dir])
    script = spec.external_lb.script_path
    if not script or not _installs_lb(args, cluster):
        return None
    local = csar.packaged_file(args.package_dir, script)
    if local is None:
        raise exceptions.ParamsNotFound([
            '--package-dir: missing: %s.external_lb_param.script_path names '
            '%s, which only a VNF package holds (without --package-dir '
            'only %s is known: the script csar build packages)' % (
                core.ROOT, script, csar.LB_SCRIPT_ARTIFACT)])
    return str(local)


def _installs_lb(args, cluster):
    """Whether the operation sets a gateway up: instantiate, the
    whole-VNF heal, and a heal or scale-out naming a gateway."""
    if args.operation == 'instantiate':
        return True
    names = [n for n in (args.nodes or '').split(',') if n]
    if args.operation == 'heal' and not names:
        return True
    return args.operation in ('heal', 'scale-out') and any(
        cluster.gateway(n) is not None for n in names)


def _check_instance(args, cluster, store):
    """Refuse a run on another instance's nodes, or one that needs a
    record *store* lacks (a forgotten ``--instance-id`` would otherwise
    "add 0 workers" to a second record claiming the same VMs, or reset
    them at terminate); a dry run says so and plans on.

    :raises ParamsInvalid, ParamsNotFound: the real run is refused.
    """
    try:
        _check_owners(args, cluster, store)
        _check_record(args, store)
    except (exceptions.ParamsInvalid, exceptions.ParamsNotFound) as exc:
        if not args.dry_run:
            raise
        for problem in _problems_of(exc):
            _say('kubespray-mgmt: warning: without --dry-run this run is '
                 'refused: %s' % problem, file=sys.stderr)


def _check_owners(args, cluster, store):
    """:raises ParamsInvalid: another instance's record lists nodes of
    *cluster*."""
    owners = store.owners({(n.ssh_address, int(n.ssh_port))
                           for n in cluster.k8s_nodes}, args.instance_id)
    if owners:
        raise exceptions.ParamsInvalid([
            '--instance-id %s: %s of the topology belong to instance %r '
            '(its record in %s); nothing was done. Give --instance-id %s '
            'to %s that cluster' % (
                args.instance_id, _endpoints_text(endpoints), other,
                store.directory, other, args.operation)
            for other, endpoints in sorted(owners.items())])


def _endpoints_text(endpoints, shown=5):
    text = ', '.join('%s:%d' % e for e in endpoints[:shown])
    more = len(endpoints) - shown
    return 'node(s) %s%s' % (text, ' and %d more' % more if more > 0
                             else '')


def _check_record(args, store):
    """:raises ParamsNotFound: the operation needs what an instantiate
    of ``--instance-id`` recorded, and *store* has no such record (a
    terminated instance may be terminated again: that finishes it)."""
    if args.operation == 'instantiate':
        return
    state = store.state(args.instance_id)
    if state == records.PRESENT or (state == records.RELEASED and
                                    args.operation == 'terminate'):
        return
    raise exceptions.ParamsNotFound([
        '--instance-id %s: %s in %s, so there is nothing to %s; nothing '
        'was done. Give the --instance-id the cluster was instantiated '
        'with ("kubespray-mgmt list" shows those with a record here), or '
        'run instantiate first' % (
            args.instance_id, 'was terminated (its record is released)'
            if state == records.RELEASED else 'has no record',
            store.directory, args.operation)])


def _cluster_driver(args, spec, lb_script, progress):
    """The context of the operation (a dry run's records nothing)."""
    pool = plan.PlanPool(spec.kubespray.version, plan.secrets_of(spec)) \
        if args.dry_run else ssh.ConnectionPool()
    store = records.RecordStore.from_conf()
    # Trusted paths: whoever runs this wrote the parameter file.
    return driver.ClusterDriver(
        spec, args.instance_id, pool, package_dir=args.package_dir,
        progress=progress, trusted_paths=True, lb_script=lb_script,
        records=plan.PlanRecords(store) if args.dry_run else store,
        operation=lcm.log_name(args.operation))


def _run(args):
    try:
        spec = _read_spec(args.params, need_cp_names=False)
        cluster = _read_nodes(spec, args.topology)
        names = _node_list(args.nodes, cluster, args.operation)
        extra = _operation_args(args)
        names += labels.pool_members(spec, cluster, extra.pop('pools', ()),
                                     '--pools')
        progress = None if args.dry_run else _progress_printer(
            sys.stderr if args.output == 'json' else None)
        if args.no_etcd_snapshot:
            cfg.CONF.set_override('etcd_snapshot_before_risky', False,
                                  group=kconf.GROUP)
        _check_instance(args, cluster, records.RecordStore.from_conf())
        drv = _cluster_driver(args, spec, _lb_script(spec, cluster, args),
                              progress)
    except (exceptions.ParamsInvalid, exceptions.ParamsNotFound) as exc:
        return _print_problems(exc)
    name = spec.vim_name or args.instance_id
    if not args.dry_run:
        return _run_for_real(args, drv, cluster, names, name, extra,
                             progress)
    with drv.pool:
        summary = OPERATIONS[args.operation](drv, cluster, names, name,
                                             **extra)
    if args.output == 'json':
        _print_json(runreport.planned(args.operation, args.instance_id,
                                      names, summary, drv.pool.steps))
        return EXIT_OK
    sys.stdout.write(terminal_safe(plan.format_plan(drv.pool.steps)))
    _say('dry run, nothing done: ' + summary)
    return EXIT_OK


def _run_for_real(args, drv, cluster, names, name, extra, progress):
    """Run the operation holding the instance's state lock, as a hook
    does (:func:`statestore.locked_operation`), its result noted in the
    record; ``--output json``: :mod:`mgmt_driver.adapters.runreport`."""
    operation = 'run ' + args.operation
    report = runreport.RunReport(drv.records, args.instance_id,
                                 args.operation, names)
    try:
        with statestore.locked_operation(cfg.CONF, drv.records,
                                         args.instance_id, operation), \
                statestore.recorded(drv.records, args.instance_id,
                                    operation), \
                report.collecting(), drv.pool, \
                _warnings_shown(progress, args.debug):
            summary = OPERATIONS[args.operation](drv, cluster, names, name,
                                                 **extra)
    except KeyboardInterrupt as exc:
        done = progress.done_text()
        if not isinstance(exc, detached.Interrupted) and done is not None:
            exc = _InterruptedAfter(done)
        if args.output == 'json':
            _print_json(report.document(drv.playbook_runs, error=exc))
            args.reported = True
        raise exc from None
    except Exception as exc:
        if args.output == 'json':
            _print_json(report.document(drv.playbook_runs, error=exc))
        raise
    if args.output == 'json':
        _print_json(report.document(drv.playbook_runs, summary))
    else:
        _say(summary)
    return EXIT_OK


def _add_instance_id(parser):
    parser.add_argument('--instance-id', default='kubespray-mgmt',
                        help='names the workspace on the Ansible server '
                             '(default: %(default)s)')


def _add_run_commands(subparsers):
    run = subparsers.add_parser(
        'run', help='run an LCM operation on VMs listed in a topology')
    run.add_argument('operation', choices=sorted(OPERATIONS))
    _add_inputs(run, '; for scale-in and heal it still lists the nodes '
                     'being removed or healed')
    run.add_argument('--nodes', metavar='NAME[,NAME...]',
                     help='node names added (scale-out; default: every '
                          'worker Kubernetes lacks), removed (scale-in) '
                          'or healed (heal; default: the whole VNF, as '
                          "Tacker's heal without vnfcInstanceId: terminate "
                          'then instantiate again on the same VMs), or '
                          'relabelled (relabel)')
    _add_instance_id(run)
    run.add_argument('--package-dir', metavar='DIR',
                     help='VNF package holding the LB install script named '
                          'by external_lb_param.script_path: a package '
                          'source (vnf_packages/NAME) or an extracted CSAR. '
                          'Without it, and for a source that lacks it, %s '
                          'is the script csar build packages; any other '
                          'script_path needs DIR' % csar.LB_SCRIPT_ARTIFACT)
    _add_day2_options(run)
    run.add_argument('--no-etcd-snapshot', action='store_true',
                     help='upgrade, heal of a control-plane node: go on '
                          'without the etcd snapshot taken first (as '
                          'etcd_snapshot_before_risky = false)')
    run.add_argument('--dry-run', action='store_true',
                     help='print every remote command and document '
                          '(secrets hidden) without connecting')
    _add_output(run, 'operation, instance_id, dry_run, result, summary, '
                     'error, nodes, playbooks, warnings; with --dry-run: '
                     'operation, instance_id, dry_run (true), summary, '
                     'nodes (would_add, would_remove, named), steps')
    run.set_defaults(func=_run)


def _add_day2_options(run):
    """``run``'s options of the day-2 operations: upgrade, absent
    workers, relabel, a heal in two phases."""
    run.add_argument('--kube-version', metavar='X.Y.Z',
                     help='upgrade: the Kubernetes version to upgrade to '
                          '(one minor release at most, listed by the '
                          'kubespray checkout)')
    run.add_argument('--serial', metavar='N|N%',
                     help='upgrade: workers upgraded at once (kubespray\'s '
                          'serial; default: its 20%%)')
    run.add_argument('--excuse', metavar='NAME[,NAME...]',
                     help='upgrade: nodes the preflight accepts not Ready '
                          'or cordoned (kubespray upgrades them where they '
                          'stand, undrained)')
    run.add_argument('--absent', metavar='NAME[,NAME...]',
                     help='workers that are dead on purpose: left out of '
                          'every playbook run of the operation (kubespray '
                          'cannot --limit around a dead host whose cached '
                          'facts expired); the summary names them')
    run.add_argument('--labels', metavar='KEY=VALUE|KEY-[,...]',
                     help='relabel: node labels set (KEY-: removed) on '
                          'the nodes, checked as master_node.labels are; '
                          'kept for later runs and re-joins')
    run.add_argument('--pools', metavar='POOL[,...]',
                     help='relabel: every node of these node_pools too')
    run.add_argument('--taints', metavar='KEY=VALUE:EFFECT|KEY:EFFECT-|'
                                         'KEY-[,...]',
                     help='relabel: node taints set (or removed) on '
                          'the nodes, checked as master_node.taints are; '
                          'kept for later runs and re-joins')
    run.add_argument('--phase', choices=(lcm.PHASE_OUT, lcm.PHASE_IN),
                     help='heal --nodes in two runs, the VMs re-created '
                          'in between (e.g. with a new image): out '
                          '(drained, disruption budgets honoured, out of '
                          'HAProxy; a control-plane node out of etcd), '
                          'then in (joins under the same name, its labels '
                          'and taints back); default: both at once')


# --- status ------------------------------------------------------------------

def _status(args):
    try:
        spec, cluster = _status_inputs(args)
        pool = ssh.ConnectionPool(status.read_only_settings())
        # Trusted paths: whoever runs this wrote the parameter file.
        reader = status.StatusReader(spec, args.instance_id, pool,
                                     trusted_paths=True)
    except (exceptions.ParamsInvalid, exceptions.ParamsNotFound) as exc:
        return _print_problems(exc)
    with pool:
        report = reader.collect(cluster)
    gone = _gone(report, args.instance_id)
    if args.output == 'json':
        print(status.to_json(report))
    elif not gone:
        sys.stdout.write(terminal_safe(status.format_text(report)))
    if gone:
        _say('kubespray-mgmt: %s' % gone, file=sys.stderr)
    if any(report[name]['error'] for name in status.SECTIONS):
        return EXIT_REMOTE_FAILURE
    if (report.get('certificates') or {}).get('expiring'):
        return EXIT_CERTS_EXPIRING
    return EXIT_OK if report['ok'] else EXIT_DIFFERENCES


def _status_inputs(args):
    """``(spec, cluster)`` of ``--params``/``--topology``, or of the
    instance's record without them (:mod:`mgmt_driver.state.follow`)."""
    if args.params is None:
        if args.topology is not None:
            raise exceptions.ParamsInvalid([
                '--topology: only with --params (without them the '
                'instance\'s record gives both)'])
        return _recorded_inputs(args.instance_id)
    spec = _read_spec(args.params, need_cp_names=False)
    return spec, _read_nodes(spec, args.topology, need_vip=False)


def _recorded_inputs(instance_id):
    """The spec and nodes the record of *instance_id* gives
    (:func:`follow.recorded_inputs`)."""
    return follow.recorded_inputs(
        records.RecordStore.from_conf(), instance_id,
        cfg.CONF.kubespray_mgmt.ssh_private_key_file)


#: The parts of a status read on the cluster's own VMs.
_CLUSTER_SECTIONS = ('nodes', 'etcd', 'load_balancer')


def _gone(report, instance_id):
    """Why the cluster is gone, or None: the driver keeps no record of
    the instance here, none of its VMs could be read, and its workspace
    holds no inventory (``run terminate`` leaves exactly that; its host
    keys are forgotten, so each VM's section would only say that its
    key is unknown)."""
    differences = report.get('differences') or {}
    if any((report.get(name) or {}).get('ok') for name in _CLUSTER_SECTIONS):
        return None
    store = records.RecordStore.from_conf()
    if store.state(instance_id) == records.RELEASED:
        # Whatever the workspace still holds (terminate may have failed
        # to remove it): the VMs' keys went with the record.
        return ('no cluster: instance %r has no record in %s: it was '
                'terminated (its record is released), so none of its VMs '
                'was read; --output json shows what was tried'
                % (instance_id, store.directory))
    if differences.get('ok', True) or not (
            differences['error'] or '').startswith('no inventory'):
        return None
    record = store.load(instance_id)
    if record.hosts or record.keys or record.vims:
        return None
    return ('no cluster: instance %r has no record in %s and its workspace '
            '%s on %s holds no inventory: it was terminated (or never '
            'instantiated from this host); --output json shows what was '
            'tried' % (instance_id, store.directory, report['workspace'],
                       report['playbook_runs']['host']))


def _add_status_command(subparsers):
    command = subparsers.add_parser(
        'status', help="show the cluster as it is (read only): nodes, "
                       "etcd, certificate expiry, HAProxy backends, last "
                       "playbook runs, etcd snapshots kept, differences "
                       "from the inventory")
    _add_inputs(command, required=False)
    _add_instance_id(command)
    _add_output(command, 'instance_id, workspace, ok, nodes, etcd, '
                         'certificates, load_balancer, playbook_runs, '
                         'etcd_snapshots, differences; exit 0 all well, '
                         '2 a part unreadable, 5 a certificate expires '
                         'within cert_warn_days, 3 differences')
    command.set_defaults(func=_status)


# --- logs --------------------------------------------------------------------

def _logs(args):
    if args.run is not None and args.run.endswith('.log'):
        args.run = args.run[:-len('.log')]  # the file name status shows
    try:
        if args.run is not None and detached.parse_stem(args.run) is None:
            raise exceptions.ParamsInvalid([
                '--run: %s is not the name of a run (a log name, such as '
                '20261123T230501Z-scale_end-scale.log; status lists '
                'them)' % safetext.clip(repr(args.run), 80)])
        spec = _read_spec(args.params, need_cp_names=False) \
            if args.params is not None else \
            _recorded_inputs(args.instance_id)[0]
    except (exceptions.ParamsInvalid, exceptions.ParamsNotFound) as exc:
        return _print_problems(exc)
    login = spec.ansible.login
    workspace = posixpath.join(spec.ansible.transferring_inventory_path,
                               args.instance_id)
    with ssh.ConnectionPool(status.read_only_settings()) as pool:
        conn = pool.connection(spec.ansible.ip_address,
                               ssh.credentials_for(login), login.port)
        path = detached.show_log(conn, workspace, _say, stem=args.run,
                                 follow=args.follow)
        if args.follow and args.run is None:
            path = _follow_operation(conn, workspace, args.instance_id, path)
    _say('# log: %s on %s' % (path, spec.ansible.ip_address),
         file=sys.stderr)
    return EXIT_OK


def _operation_running(store, instance_id):
    """The instance's running operation (its record's last one), or
    None: no record, or its last operation ended."""
    if store.state(instance_id) != records.PRESENT:
        return None
    try:
        last = store.load(instance_id).last_operation or {}
    except exceptions.InstanceRecordInvalid:
        return None
    return last.get('operation') \
        if last.get('result') == statestore.RUNNING else None


def _follow_operation(conn, workspace, instance_id, path):
    """After the run of *path* ended: follow the next runs of the
    operation (a heal or a scale-in runs several playbooks in turn) while
    the instance's record says it runs, waiting ``logs_follow_poll``
    between looks and at most ``logs_follow_next_wait`` for each run.

    :returns: the last followed run's log path.
    """
    group = cfg.CONF[kconf.GROUP]
    store = records.RecordStore.from_conf()
    followed = posixpath.basename(path)[:-len('.log')]
    operation = running = _operation_running(store, instance_id)
    began = time.monotonic()
    while operation:
        # *running* is read before the runs: a run that started and
        # ended between two looks, the operation's last, is still shown.
        info = detached.last_run(conn, workspace)
        if info.stem and info.stem != followed:
            _say('# %s goes on: next run %s' % (operation, info.stem),
                 file=sys.stderr)
            path = detached.show_log(conn, workspace, _say, follow=True)
            followed = posixpath.basename(path)[:-len('.log')]
            began = time.monotonic()
        elif not running:
            break
        elif time.monotonic() - began >= group.logs_follow_next_wait:
            _say('# %s still runs, but started no playbook for %d s '
                 '(logs_follow_next_wait): stopped following' % (
                     operation, group.logs_follow_next_wait),
                 file=sys.stderr)
            break
        else:
            time.sleep(group.logs_follow_poll)
        running = _operation_running(store, instance_id)
    return path


def _add_logs_command(subparsers):
    command = subparsers.add_parser(
        'logs', help="print the log of the cluster's last playbook run (or "
                     "of --run NAME), kept on the Ansible server")
    command.add_argument('--params', metavar='PARAMS',
                         help='the parameters the cluster was built with '
                              '(they name the Ansible server and the '
                              'workspace); - reads standard input; '
                              "default: the instance's record "
                              '(--instance-id, in the records_dir of '
                              '--config-file)')
    _add_instance_id(command)
    command.add_argument('--run', metavar='NAME',
                         help='a run listed by "status" (its log name, '
                              'with or without .log); default: the last '
                              'run')
    command.add_argument('-f', '--follow', action='store_true',
                         help='go on printing until the run ends, and '
                              '(without --run) the next runs of the '
                              'operation until its record says it ended')
    command.set_defaults(func=_logs)


# --- doctor (mgmt_driver.adapters.doctor)
# --------------------------------------------

#: doctor's last finding when the config files cannot be used.
_CONFIG_UNUSABLE = ('nothing else checked: the checks need a configuration '
                    'they can use')


def _doctor(args):
    spec = cluster = None
    try:
        if args.params:
            spec = _read_spec(args.params, need_cp_names=False)
            if args.topology or spec.nodes is not None:
                cluster = _read_nodes(spec, args.topology, need_vip=False)
    except (exceptions.ParamsInvalid, exceptions.ParamsNotFound) as exc:
        return _print_problems(exc)
    with ssh.ConnectionPool(doctor.doctor_settings(cfg.CONF)) as pool:
        findings = doctor.check_all(cfg.CONF, spec, cluster, pool,
                                    foreign_sections=True)
    return _doctor_report(args, findings)


def _doctor_report(args, findings):
    """Print *findings* (doctor's and state check's format); :returns:
    their exit code."""
    if args.output == 'json':
        _print_json({'exit_code': doctor.exit_code(findings),
                     'findings': [dataclasses.asdict(f) for f in findings]})
    else:
        for finding in findings:
            _say(finding.line())
        counts = [sum(f.level == level for f in findings)
                  for level in (doctor.PROBLEM, doctor.WARNING)]
        _say('%d problem(s), %d warning(s)' % tuple(counts))
    return doctor.exit_code(findings)


def _add_doctor_command(subparsers):
    command = subparsers.add_parser(
        'doctor', help='preflight, read only: the config files (unknown '
                       'keys too), this host\'s directories and, with '
                       '--params, the Ansible server and the load '
                       'balancers; one line per finding; exit 0 no '
                       'problem, 1 a problem here, 2 on a remote host, '
                       '3 both')
    command.add_argument('--params', metavar='PARAMS',
                         help='the parameters of a cluster (instantiate '
                              'body or additionalParams): check the hosts '
                              'they name; - reads standard input')
    command.add_argument('--topology', metavar='TOPOLOGY',
                         help='YAML/JSON topology file: check its load '
                              'balancer too (default: the request\'s '
                              'nodes list, if any)')
    _add_output(command, 'exit_code, findings (level, where, text)')
    command.set_defaults(func=_doctor)


# --- list --------------------------------------------------------------------

def _list(args):
    found = listing.entries(records.RecordStore.from_conf())
    # A conductor whose shared store is not mounted lists its own, often
    # empty, directory: "no instance" must not read as "no cluster".
    not_shared = statestore.identity_problems(only=('records_dir',))
    for problem in not_shared:
        _say('kubespray-mgmt: warning: not the shared state store, this '
             'list may miss instances: %s' % problem, file=sys.stderr)
    if args.output == 'json':
        _print_json({'records_dir': records.default_directory(),
                     'not_shared': not_shared, 'instances': found})
    elif found:
        sys.stdout.write(terminal_safe(listing.format_text(found)))
    else:
        _say('kubespray-mgmt: no instance has a record in %s (%s of the '
             'config files given)' % (records.default_directory(),
                                      statestore.RECORDS_OPTION),
             file=sys.stderr)
    return EXIT_REMOTE_FAILURE if any(e['error'] for e in found) \
        else EXIT_OK


def _add_list_command(subparsers):
    command = subparsers.add_parser(
        'list', help='list the instances the driver owns here (records_dir '
                     'of --config-file; reads no host): VIM, Ansible '
                     'server, node counts, last operation and its result')
    _add_output(command, 'records_dir, not_shared (why the state store '
                         'is not the shared one: [text], empty when it '
                         'is), instances: [{instance_id, vims, '
                         'ansible_server, masters, workers, gateways, '
                         'workspace, last_operation, error, reason}]; exit 2 '
                         'when a record cannot be read')
    command.set_defaults(func=_list)


_COMMAND_GROUPS.append(_add_list_command)


# --- completion --------------------------------------------------------------

#: Arguments whose value is a local file or directory, by metavar.
_FILE_METAVARS = ('FILE', 'PARAMS', 'TOPOLOGY', 'PATH', 'OUT.zip')
_DIR_METAVARS = ('DIR', 'SRC_DIR')


def _mark_paths(parser, shtab):
    """Tell shtab which arguments complete as files or directories."""
    for action in parser._actions:
        if action.metavar in _FILE_METAVARS:
            action.complete = shtab.FILE
        elif action.metavar in _DIR_METAVARS:
            action.complete = shtab.DIRECTORY
        if isinstance(action, argparse._SubParsersAction):
            for subparser in set(action.choices.values()):
                _mark_paths(subparser, shtab)
    return parser


def _completion(args):
    try:
        import shtab  # only here: nothing else needs it
    except ImportError:
        print('kubespray-mgmt: completion needs the shtab package (pip '
              'install shtab)', file=sys.stderr)
        return EXIT_BAD_INPUT
    parser = _mark_paths(build_parser(), shtab)
    sys.stdout.write(shtab.complete(parser, shell=args.shell))
    return EXIT_OK


def _add_completion_command(subparsers):
    command = subparsers.add_parser(
        'completion', help='print a shell completion script (e.g. '
                           'source <(kubespray-mgmt completion bash); zsh: '
                           'save it as _kubespray-mgmt in a directory of '
                           '$fpath)')
    command.add_argument('shell', choices=('bash', 'zsh'),
                         help='the shell to complete in (shtab writes both; '
                              'fish has no generator there)')
    command.set_defaults(func=_completion)


# --- demo --------------------------------------------------------------------

#: demo.MAX_WORKERS, without importing the local site to build the parser
#: (test_cli_basics keeps the two equal).
DEMO_MAX_WORKERS = 22

#: The local site is a distribution of its own (setup.py says why).
SITE_MISSING = (
    'kubespray-mgmt: %s: the local test site is not installed here: it is '
    'the distribution mgmt-driver-kubespray-localsite (from a clone: pip '
    "install '.[demo]' ./localsite-dist; tools/demo does that)")


def _site_module(name, command):
    """``mgmt_localsite.<name>`` (the site is not needed
    elsewhere), or None, said on stderr, when its distribution is not
    installed."""
    try:
        importlib.import_module('mgmt_localsite')  # the package
        return importlib.import_module('mgmt_localsite.' + name)
    except ModuleNotFoundError as exc:
        if exc.name not in ('mgmt_localsite',
                            'mgmt_localsite.' + name):
            raise
        print(SITE_MISSING % command, file=sys.stderr)
        return None


def _demo(args):
    if args.keep:
        return _site_up(args)
    demo = _site_module('demo', 'demo')
    if demo is None:
        return EXIT_BAD_INPUT
    return demo.Demo(args.masters, args.workers,
                     tasks=not args.no_tasks, upgrade=args.upgrade).run()


# --- site up / site down (mgmt_localsite.kept) ----------------------

def _site_up(args):
    kept = _site_module('kept', 'site up')
    if kept is None:
        return EXIT_BAD_INPUT
    try:
        return kept.up(args.dir, args.masters, args.workers,
                       loopback=getattr(args, 'loopback',
                                        kept.DEFAULT_LOOPBACK))
    except kept.SiteError as exc:
        _say('kubespray-mgmt: %s' % exc, file=sys.stderr)
        return EXIT_BAD_INPUT


def _site_down(args):
    kept = _site_module('kept', 'site down')
    if kept is None:
        return EXIT_BAD_INPUT
    try:
        kept.down(args.dir)
    except kept.SiteError as exc:
        _say('kubespray-mgmt: %s' % exc, file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_OK


#: kept.DEFAULT_DIR, without importing the local site to build the parser.
SITE_DIR = '~/.kubespray-mgmt/demo-site'


def _add_site_dir(parser):
    parser.add_argument('--dir', default=SITE_DIR, metavar='DIR',
                        help='where the kept site\'s parameters, topology, '
                             'config file and process list are (default: '
                             '%(default)s)')


def _add_site_commands(subparsers):
    group = subparsers.add_parser(
        'site', help='keep a local demo site up (a cluster instantiated '
                     'on it) to try status, logs, run and doctor by hand; '
                     'take it down')
    group.set_defaults(func=lambda args: _usage(group))
    commands = group.add_subparsers(dest='site_command', metavar='COMMAND')
    start = commands.add_parser(
        'up', help='start the site, instantiate a cluster, print the '
                   'commands to try; the processes stay')
    start.add_argument('--masters', type=int, choices=(1, 3), default=1,
                       help='control-plane nodes (default: %(default)s)')
    start.add_argument('--workers', type=_demo_workers, default=2,
                       metavar='N', help='workers (default: %(default)s)')
    start.add_argument('--loopback', default='127.0.0', metavar='127.X.Y',
                       help='the /24 of its addresses (default: '
                            '%(default)s, the demo\'s .210 to .254)')
    _add_site_dir(start)
    start.set_defaults(func=_site_up)
    stop = commands.add_parser(
        'down', help='stop every process the kept site left (by PID), '
                     'remove its files and the test account it created')
    _add_site_dir(stop)
    stop.set_defaults(func=_site_down)


_COMMAND_GROUPS.append(_add_site_commands)


def _add_demo_command(subparsers):
    command = subparsers.add_parser(
        'demo', help='run the whole lifecycle on a local site (real sshd, '
                     'ansible-playbook and HAProxy on 127.0.0.x, kubespray '
                     'test double)')
    command.add_argument('--masters', type=int, choices=(1, 3), default=1,
                         help='control-plane nodes (default: %(default)s)')
    command.add_argument('--workers', type=_demo_workers, default=2,
                         metavar='N',
                         help='workers to instantiate, 1 to %d; scale-out '
                              'adds two (default: %%(default)s)'
                              % DEMO_MAX_WORKERS)
    command.add_argument('--no-tasks', action='store_true',
                         help='print plays but not every task')
    command.add_argument('--upgrade', action='store_true',
                         help='before terminating, upgrade Kubernetes by '
                              'one minor release (run upgrade)')
    command.add_argument('--keep', action='store_true',
                         help='instantiate only and keep the site up to '
                              'try commands by hand (as site up; site '
                              'down takes it down)')
    _add_site_dir(command)
    command.set_defaults(func=_demo)


def _demo_workers(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= DEMO_MAX_WORKERS:
        raise argparse.ArgumentTypeError(
            'must be a whole number from 1 to %d' % DEMO_MAX_WORKERS)
    return value


# --- state check (several conductors: mgmt_driver.state.statestore)
# --------------

def _state_check(args):
    # doctor's findings, in doctor's format (doctor checks these too).
    return _doctor_report(args, doctor.state_findings(cfg.CONF))


def _fleet_path():
    statestore.check_identity(cfg.CONF)
    return healfleet.path_in(records.default_directory(cfg.CONF))


def _state_heals(args):
    path = _fleet_path()
    lines = healfleet.report(
        path, healfleet.fleet_nodes(records.RecordStore.from_conf(cfg.CONF)),
        healfleet.limits(cfg.CONF), time.time())
    for kind, text in lines:
        _say('%s: %s' % (kind, text))
    return EXIT_BAD_INPUT if any(k == 'problem' for k, _ in lines) \
        else EXIT_OK


def _state_resume_heals(args):
    lifted = healfleet.resume(_fleet_path(), time.time())
    _say('automatic heals resumed' if lifted is not None else
         'automatic heals were not paused')
    return EXIT_OK


def _add_state_commands(subparsers):
    group = subparsers.add_parser(
        'state', help="the driver's state on this host (records, kept v2 "
                      "parameters, kubeconfigs, known_hosts)")
    group.set_defaults(func=lambda args: _usage(group))
    commands = group.add_subparsers(dest='state_command', metavar='COMMAND')
    check = commands.add_parser(
        'check', help='is this conductor\'s state store the one shared by '
                      'every tacker-conductor ([kubespray_mgmt] '
                      'state_store_id), private and writable? one line '
                      'per finding, as doctor prints them; exit 0 yes, '
                      '1 a problem')
    _add_output(check, 'exit_code, findings (level, where, text)')
    check.set_defaults(func=_state_check)
    heals = commands.add_parser(
        'heals', help='automatic heals in flight across the fleet, the '
                      'not-Ready share recent checks saw, and whether '
                      'automatic heals are paused; exit 0, or 1 when '
                      'paused')
    heals.set_defaults(func=_state_heals)
    resume = commands.add_parser(
        'resume-heals', help='lift the fleet\'s pause of automatic heals '
                             '([kubespray_mgmt] auto_heal_fleet_pause_'
                             'percent) and forget the checks that set it')
    resume.set_defaults(func=_state_resume_heals)


_COMMAND_GROUPS.append(_add_state_commands)


_COMMAND_GROUPS += [_add_params_commands, _add_render_commands,
                    _add_run_commands, _add_status_command,
                    _add_logs_command, _add_doctor_command,
                    _add_demo_command, _add_completion_command]


def build_parser():
    """Return the argument parser with every subcommand registered."""
    parser = _Parser(
        prog='kubespray-mgmt',
        description='Build and run Kubernetes clusters with kubespray, '
                    'as the Tacker MgmtDriver does, without Tacker.')
    parser.add_argument('--version', action='version',
                        version='%(prog)s ' + _version())
    parser.add_argument('--config-file', action='append', default=[],
                        metavar='FILE',
                        help='oslo.config file with a [kubespray_mgmt] '
                             'section (may be repeated); default: the '
                             'comma-separated files of $%s; may also '
                             'follow the subcommand' % CONFIG_ENV)
    parser.add_argument('--debug', action='store_true',
                        help='log at DEBUG level to standard error (may '
                             'also follow the subcommand)')
    subparsers = parser.add_subparsers(dest='command', metavar='COMMAND')
    for add_commands in _COMMAND_GROUPS:
        add_commands(subparsers)
    return parser


#: The config files of a command given no --config-file (comma
#: separated), as the v2 script reads them (:data:`v2.CONFIG_ENV`).
CONFIG_ENV = 'KUBESPRAY_MGMT_CONFIG_FILES'


def _config_files(given):
    """--config-file, else the files $KUBESPRAY_MGMT_CONFIG_FILES names."""
    if given:
        return given
    return [f.strip() for f in os.environ.get(CONFIG_ENV, '').split(',')
            if f.strip()]


def _load_config(files):
    """Load and check the config files; :returns: problems, one a line."""
    kconf.register_opts(cfg.CONF)
    missing = [path for path in files if not os.path.isfile(path)]
    if missing:
        return ['--config-file %s: %s' % (
            path, 'a directory, not a file' if os.path.isdir(path)
            else 'no such file') for path in missing]
    try:
        cfg.CONF([], project='kubespray-mgmt', default_config_files=files)
    except cfg.ConfigFileParseError as exc:
        return ['--config-file %s: cannot parse it: %s' % (
            exc.config_file, exc.msg)]
    except cfg.Error as exc:
        return ['--config-file: %s' % exc]
    return kconf.check(cfg.CONF)


def _to_stderr(text):
    print(text, file=sys.stderr, flush=True)


def _log_to_stderr():
    """``--debug``: every log record, DEBUG and up, to standard error,
    escaped (:class:`safetext.EscapingHandler`)."""
    root = logging.getLogger()
    root.addHandler(safetext.EscapingHandler(
        _to_stderr, logging.DEBUG,
        '%(asctime)s %(levelname)s %(name)s: %(message)s'))
    root.setLevel(logging.DEBUG)


class _StderrLog(safetext.EscapingHandler):
    """The command's own stderr handler (see :func:`_terminal_log`)."""


def _the_drivers(record):
    return record.name.split('.', 1)[0] == 'mgmt_driver'


@contextlib.contextmanager
def _terminal_log(debug):
    """While a command runs: warnings and errors logged by the driver on
    standard error, escaped; a library's (paramiko's tracebacks of a
    host that never answers SSH, one ``ERROR:`` line each) only with
    ``--debug``: the driver's own error names the host and the cause.

    Without a handler Python's last-resort one would print them raw,
    and a master's kubectl stderr quoted in a warning could retitle the
    terminal or hide lines.  With ``--debug``, :func:`_log_to_stderr`
    already shows them.
    """
    if debug:
        yield
        return
    root = logging.getLogger()
    handler = _StderrLog(
        _to_stderr, logging.WARNING,
        'kubespray-mgmt: %(levelname)s: %(message)s')
    handler.addFilter(_the_drivers)
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)


def _take_debug(argv):
    """*argv* without ``--debug`` (anywhere before ``--``), and whether it
    was there: argparse takes an option of the top level only before the
    subcommand."""
    end = argv.index('--') if '--' in argv else len(argv)
    kept = [a for a in argv[:end] if a != '--debug'] + list(argv[end:])
    return kept, len(kept) != len(argv)


def _config_first(argv):
    """*argv* with each ``--config-file FILE`` (or ``=FILE``) given after
    the subcommand moved to the front, where argparse takes a top-level
    option (the other global option, ``--debug``: :func:`_take_debug`)."""
    end = argv.index('--') if '--' in argv else len(argv)
    moved, kept, i = [], [], 0
    while i < end:
        word = argv[i]
        if word == '--config-file' and i + 1 < end:
            moved += argv[i:i + 2]
            i += 2
            continue
        (moved if word.startswith('--config-file=') else kept).append(word)
        i += 1
    return moved + kept + list(argv[end:])


def main(argv=None):
    """Entry point of the ``kubespray-mgmt`` console script."""
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, not at exit, where a closed pipe
        return code         # would be reported as "Exception ignored"
    except BrokenPipeError:
        return _stdout_closed()


def _stdout_closed():
    """The reader of standard output went away (``| head``): stop
    quietly, as ``cat`` and ``git log`` do, and keep Python from failing
    again on the buffered rest when it exits."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass  # not a real file (a test's capture): nothing is left to flush
    return EXIT_BROKEN_PIPE


def _main(argv):
    parser = build_parser()
    argv, debug = _take_debug(sys.argv[1:] if argv is None else argv)
    argv = _config_first(argv)
    args = parser.parse_args(argv)
    args.debug = args.debug or debug
    if args.debug:
        _log_to_stderr()
    if not getattr(args, 'func', None):
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    problems = _load_config(_config_files(args.config_file))
    if problems and args.command == 'doctor':
        return _doctor_report(args, [
            doctor.Finding(doctor.PROBLEM, doctor.LOCAL, text)
            for text in problems] + [
            doctor.Finding(doctor.NOTE, doctor.LOCAL, _CONFIG_UNUSABLE)])
    for problem in problems:
        _say('kubespray-mgmt: %s' % problem, file=sys.stderr)
    if problems:
        return EXIT_BAD_INPUT
    if args.command != 'doctor':  # doctor lists them as problems
        for ignored in kconf.unknown_options(cfg.CONF):
            _say('kubespray-mgmt: warning: %s' % ignored, file=sys.stderr)
    with _terminal_log(args.debug):
        return _call(args)


def _call(args):
    """Run the command; an error becomes its message and exit code."""
    try:
        return args.func(args)
    except KeyboardInterrupt as exc:
        message = 'interrupted%s' % (
            '; %s. Run the same command again to follow and finish it' % exc
            if isinstance(exc, detached.Interrupted) else
            '; %s. Run the same command again to finish the operation' % exc
            if isinstance(exc, _InterruptedAfter) else '')
        _say('kubespray-mgmt: ' + message, file=sys.stderr)
        if getattr(args, 'output', None) == 'json' and \
                not getattr(args, 'reported', False):
            # The command's own object was not printed: this one, so
            # that standard output holds one object whatever the outcome.
            _print_json({'result': 'interrupted', 'error': message,
                         'exit_code': EXIT_INTERRUPTED})
        return EXIT_INTERRUPTED
    except _DRIVER_ERRORS as exc:
        _say('kubespray-mgmt: %s' % exceptions.plain_message(exc),
             file=sys.stderr)
        return exit_code(exc)


if __name__ == '__main__':  # pragma: no cover
    sys.exit(main())
