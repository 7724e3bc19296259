"""Hostile values in every string field of ``additionalParams`` (issue 8).

Every string field of ``k8s_cluster_installation_param`` that reaches a
remote command, a file name or a configuration file (table FIELDS, with
how a payload is placed in the request) gets every payload of table
PAYLOADS.  One (field, payload) pair is a *cell*; it passes when either

* **refused**: the hook raises ParamsInvalid or ParamsNotFound naming the
  field, and the pool factory, which raises if called, was never called;
  a secret field's value is not in the message either; or
* **harmless**: it is accepted and the hooks run, as Tacker calls them,
  on the local site (real sshd on 127.0.4.x, real HAProxy, the kubespray
  test double): ``instantiate_end``; ``scale_end`` (no new VM) when a
  field is given in a scale request's override; ``terminate_end``.  Then

  - the cell's canary file (a fresh path in this module's temp dir,
    named by the payload) never appears, checked once all runs are done;
  - nothing appears or disappears in the watched trees except where the
    driver, Ansible or the site write by design (:func:`_by_design`);
  - the value arrives intact: the VIM registered and the kubeconfig on
    the LB carry the literal ``vim_name``; fields rendered for Ansible
    are found literally in the parsed files of the workspace;
  - a Jinja payload is inert: wherever it occurs in the vars or inventory
    files on the Ansible server it is tagged ``!unsafe``, and where the
    double uses the variable (``cluster_name``) it recorded the literal
    text;
  - YAML payloads did not break out: the workspace files load with a safe
    loader and hold no ``evil`` key.

Watched trees: recursively, the sshd root (the site root with checkout,
state, LB directory and inventories; the site homes of the SSH users;
sshd's own files) and this module's temp dir (canaries, traversal
targets, materials); at top level only, ``/tmp`` and the working
directory, where other processes come and go all the time, so only new
names holding this module's token (every canary path has it) or a shell
or YAML metacharacter count there.

Runs (a request holds one payload per field, so cells are batched):

* one **real** batch: ``instantiate_end`` runs the real ansible-playbook
  on the double and builds the cluster.  It holds a payload of every
  field that can run there, Jinja ones first, so that the double really
  uses the Jinja payload of ``cluster_name``;
* **stub** batches: the same hooks with ``ansible_playbook_command`` set
  to ``true``: every command, upload, HAProxy step, kubectl call and the
  LB kubeconfig are real, only the 7-30 s playbook run is skipped (its
  inputs are the rendered files checked above);
* **solo** runs: a path no file system can hold (a component over 255
  bytes) makes the hook fail; such a cell runs alone (no terminate) and
  passes when the hook raises one of the driver's own errors.

To let the hooks go on past a hostile path, the test first *materialises*
it: a key file copied to the (normalised) ``ssh_key_file`` path, a
symlink to the checkout at ``kubespray_root_path``, a harmless LB script
at ``script_path`` in the VNF package directory.  An absolute path with
``..`` names the directory it normalises to (``params`` normalises it):
the driver must write there and nowhere else.

Cells failing because of a known driver bug would be listed in
KNOWN_BUGS (none now); the matrix test fails on any other problem.  Run
with ``-s`` to see the matrix and its counts.

Not covered: aspect and connection point names (Heat lookups only),
ports, forks and booleans (not strings), the ``nodes`` entries (parsed as
IP addresses like ``ansible.ip_address``, which is covered).
"""

import collections
import copy
import dataclasses
import os
import pathlib
import posixpath
import shutil
import tempfile
import time
import types

import pytest
import yaml
from mgmt_localsite import lab as lab_mod
from mgmt_localsite import site as site_mod

from mgmt_driver.adapters import v1
from mgmt_driver.common import exceptions
from mgmt_driver.operations import gateways
from mgmt_driver.remote import detached
from mgmt_driver.remote import ssh
from mgmt_driver.state import records
from tests.functional import tacker_fakes
from tests.functional.tacker_fakes import instantiate_request
from tests.functional.tacker_fakes import scale_request

ROOT = 'k8s_cluster_installation_param'
ANSIBLE = '127.0.4.1'
LB = '127.0.4.2'
PROXY = 'http://127.0.4.3:3128'  # nothing listens; nothing connects
MASTERS = ['127.0.4.10']
WORKERS = ['127.0.4.20']
CONTEXT = types.SimpleNamespace(project_id='injection')
TRUE = shutil.which('true') or '/bin/true'
DRIVER_ERRORS = (exceptions.MgmtDriverOtherError,
                 exceptions.MgmtDriverParamInvalid,
                 exceptions.MgmtDriverNotFound,
                 exceptions.MgmtDriverRemoteCommandError,
                 exceptions.MgmtDriverRemoteCommandTimeOut)

pytestmark = pytest.mark.skipif(site_mod.unavailable() is not None,
                                reason=str(site_mod.unavailable()))


# ---------------------------------------------------------------- payloads

@dataclasses.dataclass(frozen=True)
class Payload:
    """A hostile value: ``@CANARY@`` becomes the cell's canary path,
    ``@TRAVERSE@`` a ``../`` chain from anywhere to ``<canary>-x``."""

    name: str
    template: str

    @property
    def jinja(self):
        return '{{' in self.template or '{%' in self.template


PAYLOADS = (
    # Jinja first (and first in each field's queue, see matrix()).
    Payload('jinja', "{{ lookup('pipe','touch @CANARY@') }}"),
    Payload('jinja-statement',
            "{% set x = lookup('pipe','touch @CANARY@') %}"),
    Payload('jinja-no-space', "{{lookup('pipe','touch${IFS}@CANARY@')}}"),
    Payload('semicolon', ';touch @CANARY@;'),
    Payload('subshell', '$(touch @CANARY@)'),
    Payload('backticks', '`touch @CANARY@`'),
    Payload('no-space', ';touch${IFS}@CANARY@;'),
    Payload('single-quote', "x';touch @CANARY@;'"),
    Payload('double-quote', 'x";touch @CANARY@;"'),
    Payload('newline', 'x\ntouch @CANARY@'),
    Payload('nul', 'x\x00;touch @CANARY@'),
    Payload('traversal', '@TRAVERSE@'),
    Payload('long', 'A' * 10000 + ';touch @CANARY@'),
    Payload('yaml-item', 'x\n- evil: 1'),
    Payload('yaml-tag', "!!python/object/apply:os.system ['touch @CANARY@']"),
)


# ------------------------------------------------------------------ fields

@dataclasses.dataclass(frozen=True)
class Field:
    """Where a payload goes in the request.

    :param path: the field path below ``k8s_cluster_installation_param``,
        as the driver names it in its messages.
    :param wrap: ``(payload text, materials) -> value`` (a prefix keeps
        the rest of the value valid).
    :param put: ``(k8s_cluster_installation_param, [values]) -> None``.
    :param slots: values one request can hold (a mapping or a list).
    :param path_kind: None, ``'local'`` (a file on the conductor),
        ``'remote'`` (an absolute path on the Ansible server) or
        ``'package'`` (a file in the VNF package).
    :param materialise: ``(value, materials) -> None``, so the hooks can
        go on past the value.
    :param rendered: the value lands in the workspace's files.
    :param secret: never to be echoed in a message.
    :param real: ``payload -> bool``: may run in the real batch (no:
        the playbook would stop before it used the other fields).
    :param via: ``'instantiate'`` (in the instantiate request) or
        ``'scale'`` (in the override of a scale request that follows it).
    """

    path: str
    wrap: object
    put: object
    slots: int = 1
    path_kind: str = None
    materialise: object = None
    rendered: bool = False
    secret: bool = False
    real: object = lambda payload: True
    via: str = 'instantiate'


def _raw(text, materials):
    return text


def _prefixed(prefix):
    return lambda text, materials: prefix(materials) + text


def _under(attribute):
    return lambda text, materials: '%s/%s' % (getattr(materials, attribute),
                                              text)


def _setter(*keys):
    def put(root, values):
        section = root
        for key in keys[:-1]:
            section = section.setdefault(key, {})
        section[keys[-1]] = values[0]
    return put


def _put_worker_password(root, values):
    # Without a key the password is what Ansible logs in with (host_vars
    # ansible_password); with one, the key wins.  Given in a scale
    # request, so that worker_node.ssh_key_file keeps its own cells.
    root['worker_node'] = {'password': values[0], 'ssh_key_file': None}


def _put_label_key(role):
    return lambda root, values: root[role].__setitem__(
        'labels', {values[0]: 'v1'})


def _put_label_value(role):
    return lambda root, values: root[role].__setitem__(
        'labels', {'inj': values[0]})


#: Extra var names for the payloads of one request: the double passes
#: the first to ``kube-double``, which records it in its state.  Not
#: ``kube_version``: kubespray v2.31.0 (and the double) compare it with
#: the oldest version they support in their first play, so a payload
#: there stops the run before it reaches anything.
EXTRA_VAR_SLOTS = ('cluster_name',) + tuple(
    'inj_%d' % i for i in range(len(PAYLOADS)))


def _put_extra_values(root, values):
    root['kubespray']['extra_vars'] = dict(zip(EXTRA_VAR_SLOTS, values,
                                               strict=False))


def _put_no_proxy(root, values):
    root['proxy']['no_proxy'] = list(values)


def _copy_key(value, materials):
    _place(value, lambda path: shutil.copy(materials.client_key, path))


def _link_checkout(value, materials):
    _place(value, lambda path: os.symlink(materials.checkout, path))


def _write_script(value, materials):
    _place(os.path.join(materials.package, value),
           lambda path: pathlib.Path(path).write_text(
               '#!/bin/sh\n# test_injection: a harmless LB script\n'))


def _place(value, make):
    path = os.path.normpath(value)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if not os.path.lexists(path):
        make(path)


def _user(materials):
    return materials.user


FIELDS = (
    Field('vim_name', _raw, _setter('vim_name')),
    Field('script_path', _raw, _setter('script_path')),  # read by no one
    Field('external_lb_param.script_path', _raw,
          _setter('external_lb_param', 'script_path'),
          path_kind='package', materialise=_write_script),
    Field('master_node.username', _prefixed(_user),
          _setter('master_node', 'username')),
    Field('worker_node.username', _prefixed(_user),
          _setter('worker_node', 'username')),
    Field('ansible.username', _prefixed(_user),
          _setter('ansible', 'username')),
    Field('external_lb_param.ssh_username', _prefixed(_user),
          _setter('external_lb_param', 'ssh_username')),
    # With ssh_key_file also given the key wins: validated and carried.
    Field('master_node.password', _raw, _setter('master_node', 'password'),
          secret=True),
    Field('worker_node.password', _raw, _put_worker_password,
          rendered=True, secret=True, via='scale'),
    Field('ansible.password', _raw, _setter('ansible', 'password'),
          secret=True),
    Field('external_lb_param.ssh_password', _raw,
          _setter('external_lb_param', 'ssh_password'), secret=True),
    Field('master_node.ssh_key_file', _under('keys'),
          _setter('master_node', 'ssh_key_file'), path_kind='local',
          materialise=_copy_key),
    Field('worker_node.ssh_key_file', _under('keys'),
          _setter('worker_node', 'ssh_key_file'), path_kind='local',
          materialise=_copy_key),
    Field('ansible.ssh_key_file', _under('keys'),
          _setter('ansible', 'ssh_key_file'), path_kind='local',
          materialise=_copy_key),
    Field('external_lb_param.ssh_key_file', _under('keys'),
          _setter('external_lb_param', 'ssh_key_file'), path_kind='local',
          materialise=_copy_key),
    Field('ansible.kubespray_root_path', _under('checkouts'),
          _setter('ansible', 'kubespray_root_path'), path_kind='remote',
          materialise=_link_checkout),
    # Jinja here is evaluated by Ansible (a known bug, below): the key
    # path becomes '', no host can be reached, the real run would stop.
    Field('ansible.transferring_inventory_path', _under('inventories'),
          _setter('ansible', 'transferring_inventory_path'),
          path_kind='remote', rendered=True,
          real=lambda payload: not payload.jinja),
    Field('ansible.ip_address', _prefixed(lambda m: ANSIBLE),
          _setter('ansible', 'ip_address')),
    Field('proxy.http_proxy', _prefixed(lambda m: PROXY + '/'),
          _setter('proxy', 'http_proxy'), rendered=True, secret=True),
    # With credentials: into secret-vars.yaml, not the LB script's env.
    Field('proxy.https_proxy',
          _prefixed(lambda m: PROXY.replace('//', '//inj:pw@') + '/'),
          _setter('proxy', 'https_proxy'), rendered=True, secret=True),
    Field('proxy.no_proxy', _raw, _put_no_proxy, slots=len(PAYLOADS),
          rendered=True),
    Field('proxy.k8s_node_cidr', _prefixed(lambda m: '10.10.0.0/24'),
          _setter('proxy', 'k8s_node_cidr')),
    Field('master_node.labels', _prefixed(lambda m: 'inj'),
          _put_label_key('master_node')),
    Field('master_node.labels.inj', _prefixed(lambda m: 'v'),
          _put_label_value('master_node')),
    Field('worker_node.labels', _prefixed(lambda m: 'inj'),
          _put_label_key('worker_node')),
    Field('worker_node.labels.inj', _prefixed(lambda m: 'v'),
          _put_label_value('worker_node')),
    Field('kubespray.extra_vars', _prefixed(lambda m: 'inj'),
          lambda root, values: root['kubespray'].__setitem__(
              'extra_vars', {values[0]: 'x'})),
    Field('kubespray.extra_vars.*', _raw, _put_extra_values,
          slots=len(EXTRA_VAR_SLOTS), rendered=True),
    Field('master_node.pod_cidr', _prefixed(lambda m: '10.233.64.0/18'),
          _setter('master_node', 'pod_cidr')),
    Field('master_node.cluster_cidr', _prefixed(lambda m: '10.233.0.0/18'),
          _setter('master_node', 'cluster_cidr')),
    Field('external_lb_param.nodeport_range',
          _prefixed(lambda m: '%d-%d' % m.nodeports),
          _setter('external_lb_param', 'nodeport_range')),
    Field('kubespray.version', _prefixed(lambda m: '2.24.0'),
          _setter('kubespray', 'version')),
)

# ---------------------------------------------------------- known bugs

JINJA_IN_VARS = 'a Jinja payload in an Ansible vars file is not !unsafe'


@dataclasses.dataclass(frozen=True)
class Bug:
    """A driver bug some cells show today.

    :param signs: how their problems start; any other problem of such a
        cell still fails the matrix test.
    """

    summary: str
    signs: tuple


#: Cells that fail because of a known driver bug, with the Bug that
#: explains them.  None now: the matrix found two, both fixed (Jinja in
#: request values templated by Ansible on the Ansible server: every string
#: holding "{" is now !unsafe in the inventory; an unreadable LB script
#: path escaped as OSError: now MgmtDriverNotFound naming the field).
KNOWN_BUGS = {}


# ------------------------------------------------------------------- cells

@dataclasses.dataclass(eq=False)
class Cell:
    field: Field
    payload: Payload
    text: str          # the payload with the canary filled in
    value: str         # as placed in the request
    canary: pathlib.Path
    outcome: str = ''  # refused | real | stub | solo
    problems: list = dataclasses.field(default_factory=list)

    @property
    def key(self):
        return self.field.path, self.payload.name

    @property
    def passed(self):
        return not self.problems

    def literal(self):
        """The text the rendered files must hold: the payload, or for a
        remote path the normalised path the driver uses."""
        if self.field.path_kind == 'remote':
            return posixpath.normpath(self.value)
        return self.text

    def too_long(self):
        """No file system holds this path (a component over 255 bytes)."""
        if not self.field.path_kind:
            return False
        parts = os.path.normpath(self.value).split('/')
        return any(len(p.encode('utf-8')) > 255 for p in parts)


def _make_cells(materials):
    cells = []
    for fi, field in enumerate(FIELDS):
        for pi, payload in enumerate(PAYLOADS):
            canary = materials.canaries / ('CANARY-%s-%d-%d' % (
                materials.token, fi, pi))
            traverse = '../' * 16 + str(canary).lstrip('/') + '-x'
            text = payload.template.replace('@TRAVERSE@', traverse) \
                .replace('@CANARY@', str(canary))
            cells.append(Cell(field, payload, text,
                              field.wrap(text, materials), canary))
    return cells


def request_params(base, cells, via='instantiate'):
    """``additionalParams`` with each cell's value in its field: *base*
    for an instantiate request, an override of a scale request."""
    params = copy.deepcopy(base) if via == 'instantiate' else {ROOT: {}}
    by_field = collections.defaultdict(list)
    for cell in cells:
        if cell.field.via == via:
            by_field[cell.field].append(cell.value)
    for field, values in by_field.items():
        assert len(values) <= field.slots, field.path
        field.put(params[ROOT], values)
    return params


def call_hooks(hooks, world, cells, params):
    """``instantiate_end``, then ``scale_end`` (no new VM) if a cell
    goes in a scale request."""
    world.vnf.additional_params = world.base
    hooks.instantiate_end(CONTEXT, world.vnf.instance,
                          instantiate_request(params), None, None)
    world.vnf.additional_params = params
    override = request_params(world.base, cells, via='scale')
    if override[ROOT]:
        hooks.scale_end(CONTEXT, world.vnf.instance,
                        scale_request('SCALE_OUT', override), None, None,
                        scale_out_id_list=[])


# -------------------------------------------------------------- validation

class WouldConnect(Exception):
    """The pool factory of the validation hooks was called."""


def validate(cell, world):
    """Refused before any SSH (naming the field), or accepted."""
    calls = []

    def no_pool():
        calls.append(1)
        raise WouldConnect()
    hooks = v1.LcmHooks(
        world.conf, pool_factory=no_pool,
        heat_factory=lambda c, i, r: world.vnf.heat,
        vim_registry=tacker_fakes.FakeRegistry(),
        package_dir_of=lambda c, i: None)
    world.vnf.additional_params = world.base
    try:
        if cell.field.via == 'scale':
            override = request_params(world.base, [cell], via='scale')
            hooks.scale_end(CONTEXT, world.vnf.instance,
                            scale_request('SCALE_OUT', override), None, None,
                            scale_out_id_list=[])
        else:
            hooks.instantiate_end(
                CONTEXT, world.vnf.instance,
                instantiate_request(request_params(world.base, [cell])),
                None, None)
    except WouldConnect:
        return False
    except (exceptions.ParamsInvalid, exceptions.ParamsNotFound) as exc:
        path = '%s.%s' % (ROOT, cell.field.path.rstrip('.*'))
        if not any(p.startswith(path) for p in exc.problems):
            cell.problems.append('refused, but not naming %s: %s'
                                 % (path, exc))
        if calls:
            cell.problems.append('refused after asking for SSH')
        if cell.field.secret and (cell.canary.name in str(exc) or
                                  str(world.tmp) in str(exc)):
            cell.problems.append('refusal echoes the secret value')
        return True
    cell.problems.append('neither refused nor run: the hook returned '
                         'without SSH')
    return True


# ------------------------------------------------------------ observations

class _Unsafe(str):
    """A scalar tagged ``!unsafe`` (Ansible never templates it)."""


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_constructor(
    '!unsafe', lambda loader, node: _Unsafe(loader.construct_scalar(node)))


def _strings(data):
    """Every string of a parsed document, mapping keys included."""
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for key, value in data.items():
            yield from _strings(key)
            yield from _strings(value)
    elif isinstance(data, list):
        for item in data:
            yield from _strings(item)


def _has_key(data, name):
    if isinstance(data, dict):
        return name in data or any(_has_key(v, name) for v in data.values())
    if isinstance(data, list):
        return any(_has_key(item, name) for item in data)
    return False


def read_workspace(workspace):
    """``{relative file: parsed document}`` of every YAML file there."""
    docs = {}
    for path in sorted(pathlib.Path(workspace).rglob('*.yaml')):
        docs[str(path.relative_to(workspace))] = yaml.load(
            path.read_text(), Loader=_Loader)
    return docs


def snapshot(roots):
    """Every path under *roots* (symlinks not followed)."""
    found = set()
    for root in roots:
        for directory, dirs, files in os.walk(root):
            found.update(os.path.join(directory, n) for n in dirs + files)
    return found


#: Besides this module's token (in every canary path), a new name in
#: /tmp or the working directory is ours if it holds one of these: other
#: processes create and delete entries there all the time.
FRAGMENTS = (';', '$', '`', "'", '"', '{', '\n')


def top_level(directory, token):
    return {name for name in os.listdir(directory)
            if token in name or any(f in name for f in FRAGMENTS)}


def _by_design(path, world, workspaces, removed=False):
    """True if the driver, Ansible or the site writes *path* by design.

    The instance's workspace (``transferring_inventory_path/<instance
    id>``) and, when created, the directories ``mkdir -p`` made for it;
    the double's fact cache, runs log, state and the masters' etcd
    members; the LB directory
    (HAProxy's config, backup, log); the driver's known_hosts file, its
    lock and the driver's records;
    compiled plugins of the checkout; in the site homes, each user's home
    itself, Ansible's ``~/.ansible`` and the account's playbook slots
    (``detached.SLOT_DIR``), and on the LB the kubeconfig and
    install script the driver puts there.
    """
    p = pathlib.Path(path)
    for w in workspaces:
        if p == w or w in p.parents or (not removed and p in w.parents):
            return True
    site = world.lab.site
    owned = (site.checkout / '.double', site.state_dir, site.root / 'lb',
             site.etcd_dir)
    if any(p == d or d in p.parents for d in owned):
        return True
    known_hosts = site.root / 'known_hosts'
    records_dir = pathlib.Path(records.default_directory(world.lab.conf))
    if p in (known_hosts, known_hosts.with_name('known_hosts.lock')) or \
            p == records_dir or records_dir in p.parents:
        return True
    if site.checkout in p.parents and '__pycache__' in p.parts:
        return True
    homes = pathlib.Path(world.lab.sshd.homes)
    if homes not in p.parents:
        return False
    user, *rest = p.relative_to(homes).parts
    if not rest or rest[0] == '.ansible':
        return True
    # The account's playbook slots (max_parallel_playbooks_per_server).
    slots = pathlib.PurePosixPath(detached.SLOT_DIR).parts
    if tuple(rest[:len(slots)]) == slots[:len(rest)]:
        return True
    return user == world.lab.sshd.user and rest[0] in (
        '.kube', gateways.LB_SCRIPT)


# ------------------------------------------------------------------- world

@pytest.fixture(scope='module')
def world():
    """The local site on 127.0.4.x, the VNF, materials and canaries."""
    tmp = pathlib.Path(tempfile.mkdtemp(prefix='kmgmt-inj-'))
    os.chmod(tmp, 0o755)
    lab = lab_mod.Lab(ANSIBLE, LB, MASTERS, WORKERS, nodeports=1,
                      backends=False)
    try:
        lab.start()
    except lab_mod.LabError as exc:
        shutil.rmtree(tmp)
        pytest.skip(str(exc))
    try:
        yield _world(lab, tmp)
    finally:
        lab.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _world(lab, tmp):
    materials = types.SimpleNamespace(
        canaries=tmp / 'canaries', keys=tmp / 'keys',
        checkouts=tmp / 'checkouts', package=tmp / 'package',
        inventories=lab.root / 'inventories', checkout=lab.site.checkout,
        client_key=lab.sshd.client_key, user=lab.sshd.user,
        token=tmp.name.rsplit('-', 1)[-1],
        nodeports=(lab.nodeports[0], lab.nodeports[-1]))
    for directory in (materials.canaries, materials.keys,
                      materials.checkouts, materials.package):
        directory.mkdir(mode=0o755)
    base = copy.deepcopy(lab.additional_params)
    base[ROOT]['proxy'] = {'http_proxy': PROXY}
    # The operator allows the cells' key files (ssh_key_dirs).
    key_dirs = [lab.sshd.key_dir, str(materials.keys)]
    lab.conf.set_override('ssh_key_dirs', key_dirs, group='kubespray_mgmt')
    stub_conf = site_mod.make_conf(
        lab.site, lab.haproxy, lab.root / 'known_hosts', key_dirs=key_dirs,
        kubeconfig_dir=str(lab.root / 'kubeconfigs'),
        ansible_playbook_command=TRUE, **lab.options)
    vnf = tacker_fakes.TackerVnf(base, MASTERS, WORKERS, LB)
    # Scale cells are validated before any instantiate: the instance has
    # the record a completed instantiate leaves (statestore refuses a
    # scale of an instance without one).
    records.RecordStore.from_conf(lab.conf).save(
        records.InstanceRecord(vnf.id))
    return types.SimpleNamespace(
        lab=lab, tmp=tmp, materials=materials, base=base, vnf=vnf,
        conf=lab.conf, stub_conf=stub_conf,
        registry=tacker_fakes.FakeRegistry(), timings=[])


def _hooks(world, conf):
    def pool():
        return ssh.ConnectionPool(ssh.SSHSettings.from_conf(conf))
    return v1.LcmHooks(
        conf, pool_factory=pool,
        heat_factory=lambda c, i, r: world.vnf.heat,
        vim_registry=world.registry,
        package_dir_of=lambda c, i: str(world.materials.package))


# ----------------------------------------------------------------- batches

def plan_batches(accepted):
    """``[(kind, [cells])]``: the real batch, stub batches, solo runs."""
    by_field = collections.defaultdict(list)
    solo = []
    for cell in accepted:
        (solo if cell.too_long() else by_field[cell.field]).append(cell)
    real = []
    for field, cells in by_field.items():
        chosen = [c for c in cells if field.real(c.payload)][:field.slots]
        real += chosen
        cells[:] = [c for c in cells if c not in chosen]
    stubs = []
    while any(by_field.values()):
        batch = []
        for field, cells in by_field.items():
            batch += cells[:field.slots]
            del cells[:field.slots]
        stubs.append(batch)
    return ([('real', real)] + [('stub', b) for b in stubs] +
            [('solo', [c]) for c in solo])


def run_batch(world, kind, cells):
    """Run one batch on the site; record each cell's problems."""
    for cell in cells:
        cell.outcome = kind
        if cell.field.materialise and not cell.too_long():
            cell.field.materialise(cell.value, world.materials)
    params = request_params(world.base, cells)
    workspaces = _workspaces(world, params)
    roots = [world.lab.sshd.root, world.tmp]
    before = snapshot(roots)
    token = world.materials.token
    tops = {d: top_level(d, token) for d in ('/tmp', os.getcwd())}
    hooks = _hooks(world, world.conf if kind == 'real' else world.stub_conf)
    problems = []
    started = time.monotonic()
    try:
        call_hooks(hooks, world, cells, params)
    except Exception as exc:  # noqa: BLE001 (judged below)
        problems += _judge_failure(kind, exc)
    else:
        if kind == 'solo':
            problems.append('the hook did not fail')
        problems += _check_outputs(world, kind, cells, params, workspaces)
    if kind != 'solo':  # a solo run failed before it built anything
        world.vnf.additional_params = params
        try:
            hooks.terminate_end(CONTEXT, world.vnf.instance, None, None,
                                None)
        except Exception as exc:  # noqa: BLE001
            problems += _judge_failure(kind, exc, 'terminate_end')
    world.timings.append((kind, len(cells), time.monotonic() - started))
    problems += _check_trees(world, roots, before, tops, workspaces)
    for cell in cells:
        cell.problems += problems


def _workspaces(world, params):
    inventory = params[ROOT]['ansible']['transferring_inventory_path']
    path = posixpath.normpath(inventory)
    return [pathlib.Path(path) / world.vnf.id]


def _judge_failure(kind, exc, hook='instantiate_end/scale_end'):
    if kind == 'solo' and isinstance(exc, DRIVER_ERRORS):
        return []
    return ['%s raised %s: %s' % (hook, type(exc).__name__,
                                  str(exc)[:300])]


def _check_outputs(world, kind, cells, params, workspaces):
    """The values arrived literally; Jinja is inert; no YAML breakout."""
    problems = []
    docs = read_workspace(workspaces[0])
    for name, doc in docs.items():
        if _has_key(doc, 'evil'):
            problems.append('%s has a key "evil"' % name)
    strings = [s for doc in docs.values() for s in _strings(doc)]
    for cell in cells:
        found = [s for s in strings if cell.literal() in s]
        if cell.field.rendered and not found:
            cell.problems.append('not found literally in the workspace')
        if cell.payload.jinja:
            plain = [s for s in found if not isinstance(s, _Unsafe)]
            if plain:
                cell.problems.append(JINJA_IN_VARS)
    vim_name = params[ROOT].get('vim_name')
    if vim_name is not None:
        problems += _check_vim_name(world, vim_name)
    if kind == 'real':
        _check_double_records(world, cells)
    return problems


def _check_vim_name(world, name):
    problems = []
    if name not in world.registry.current:
        problems.append('the VIM was not registered under the literal '
                        'vim_name')
    kubeconfig = world.lab.sshd.home() / '.kube' / 'config'
    doc = yaml.safe_load(kubeconfig.read_text())
    if doc.get('current-context') != name:
        problems.append('the LB kubeconfig does not carry the literal '
                        'vim_name')
    return problems


def _check_double_records(world, cells):
    """``cluster_name``, as the double recorded it."""
    state = world.lab.site.state() or {}
    recorded = {'cluster_name': {(state.get('cluster') or {}).get('name')}}
    extra = [c for c in cells if c.field.path == 'kubespray.extra_vars.*']
    for name, cell in zip(EXTRA_VAR_SLOTS, extra, strict=False):
        if name in recorded and recorded[name] != {cell.text}:
            cell.problems.append('the double recorded %s %r, not the '
                                 'literal text' % (name, recorded[name]))


def _check_trees(world, roots, before, tops, workspaces):
    after = snapshot(roots)
    problems = []
    # A canary is reported on its own cell (see matrix()).
    for path in sorted(after - before - world.canary_paths):
        if not _by_design(path, world, workspaces):
            problems.append('new path outside the workspace: %r' % path)
    for path in sorted(before - after):
        if not _by_design(path, world, workspaces, removed=True):
            problems.append('path removed outside the workspace: %r' % path)
    for directory, names in tops.items():
        token = world.materials.token
        for name in sorted(top_level(directory, token) - names):
            problems.append('new entry %r in %s' % (name, directory))
    return problems


# ----------------------------------------------------------------- matrix

@pytest.fixture(scope='module')
def matrix(world):
    """Every cell, validated, then run in batches; canaries checked last."""
    cells = _make_cells(world.materials)
    world.canary_paths = {str(c.canary) for c in cells}
    started = time.monotonic()
    accepted = [c for c in cells if not validate(c, world)]
    world.timings.append(('validation', len(cells),
                          time.monotonic() - started))
    for cell in cells:
        if cell not in accepted:
            cell.outcome = 'refused'
    # Jinja payloads first, so that the real batch gets them.
    accepted.sort(key=lambda c: not c.payload.jinja)
    started = time.monotonic()
    for kind, batch in plan_batches(accepted):
        run_batch(world, kind, batch)
        if kind == 'real' and not world.lab.site.nodes():
            # The stub batches need a cluster for kubectl; the real
            # batch's cells already carry its failure.
            world.lab.site.seed(
                [(site_mod.name_of('master', a), a) for a in MASTERS],
                [(site_mod.name_of('worker', a), a) for a in WORKERS])
    world.timings.append(('all', len(accepted), time.monotonic() - started))
    for cell in cells:
        if cell.canary.exists():
            cell.problems.append('CANARY %s appeared' % cell.canary)
    return cells


def _print_matrix(cells, world):
    marks = {'refused': '-', 'real': 'R', 'stub': 'S', 'solo': 'E'}
    width = max(len(f.path) for f in FIELDS)
    lines = ['', 'Injection matrix (- refused before SSH; R real playbook '
             'batch, S stub batch, E alone, expected driver error; '
             '! failed, k known bug)', '']
    for i, payload in enumerate(PAYLOADS):
        lines.append('  %2d %s' % (i, payload.name))
    lines.append('%s  %s' % (' ' * width, ''.join(
        '%3d' % i for i in range(len(PAYLOADS)))))
    by_key = {c.key: c for c in cells}
    for field in FIELDS:
        row = []
        for payload in PAYLOADS:
            cell = by_key[field.path, payload.name]
            mark = marks[cell.outcome]
            if not cell.passed:
                mark = 'k' if cell.key in KNOWN_BUGS else '!'
            row.append('%3s' % mark)
        lines.append('%-*s  %s' % (width, field.path, ''.join(row)))
    count = _counts(cells)
    lines.append('')
    lines.append('fields %(fields)d x payloads %(payloads)d = %(cells)d '
                 'cells: %(refused)d refused at validation, %(run)d run on '
                 'the site, %(passed)d of them passed' % count)
    lines.append('runs: ' + ', '.join('%s(%d cells) %.1fs' % t
                                      for t in world.timings))
    for cell in cells:
        if not cell.passed:
            lines.append('  %s x %s: %s' % (cell.key + (
                '; '.join(cell.problems)[:400],)))
    print('\n'.join(lines))


def _counts(cells):
    run = [c for c in cells if c.outcome != 'refused']
    return {'fields': len(FIELDS), 'payloads': len(PAYLOADS),
            'cells': len(cells),
            'refused': len(cells) - len(run), 'run': len(run),
            'passed': sum(c.passed for c in run)}


# ------------------------------------------------------------------ tests

def test_every_cell_is_refused_or_harmless(matrix, world):
    _print_matrix(matrix, world)
    count = _counts(matrix)
    assert count['fields'] >= 10 and count['payloads'] >= 8
    assert count['refused'] >= 100 and count['run'] >= 50
    assert {c.outcome for c in matrix} >= {'refused', 'real', 'stub'}
    failed = ['%s x %s: %s' % (c.key + ('; '.join(_unexplained(c)),))
              for c in matrix if _unexplained(c)]
    assert not failed, '\n'.join(failed)


def _unexplained(cell):
    """The cell's problems that no known bug explains."""
    bug = KNOWN_BUGS.get(cell.key)
    signs = bug.signs if bug else ()
    return [p for p in cell.problems if not p.startswith(signs)]


def test_the_real_batch_built_the_cluster(matrix, world):
    """The site really ran kubespray's double: the checks are not void."""
    runs = world.lab.site.runs()
    assert [r['playbook'] for r in runs] == ['cluster.yml']
    assert runs[0]['ok']
    assert sorted(world.lab.site.nodes()) == sorted(
        site_mod.name_of(role, a) for role, addresses in (
            ('master', MASTERS), ('worker', WORKERS)) for a in addresses)
