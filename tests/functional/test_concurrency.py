"""Hooks of two VNF instances at the same time, in threads, on loopback.

Each VNF has its own VMs, LB and kubespray test double (the double keeps
one Kubernetes state per checkout), but both share what a Tacker
conductor shares: the driver's known_hosts file and the Ansible server's
``transferring_inventory_path``, where each instance must get its own
workspace.  The same lifecycle runs once with both VNFs in parallel
threads, then the first VNF's alone; the results must be identical (the
second's follows: both VNFs' documents are the same up to addresses).

Addresses: 127.0.61.x and 127.0.62.x (.1 Ansible, .2 LB, .10 master,
.20 to .23 workers): 127.0.61.1, 127.0.62.1 and the rest are this file's
alone (the block they were in is test_conductor's, which runs in the
other lane at the same time).
"""

import json
import pathlib
import threading
import types

import pytest
from mgmt_localsite import lab as lab_mod
from mgmt_localsite import site as site_mod

from mgmt_driver.adapters import v1
from mgmt_driver.model import core
from mgmt_driver.remote import ssh
from tests.functional import tacker_fakes
from tests.functional.tacker_fakes import instantiate_request
from tests.functional.tacker_fakes import scale_request

CONTEXT = types.SimpleNamespace(project_id='concurrency')
WORKER = core.ROLE_WORKER

pytestmark = pytest.mark.skipif(site_mod.unavailable() is not None,
                                reason=str(site_mod.unavailable()))


def _addresses(subnet):
    return types.SimpleNamespace(
        ansible='127.0.%d.1' % subnet, lb='127.0.%d.2' % subnet,
        masters=['127.0.%d.10' % subnet],
        workers=['127.0.%d.%d' % (subnet, i) for i in range(20, 24)])


class Vnf:
    """One VNF instance on its own lab, with the hooks Tacker would call."""

    def __init__(self, lab, addresses, known_hosts, inventories):
        self.lab = lab
        self.addresses = addresses
        additional = lab.additional_params
        additional[core.ROOT]['ansible'][
            'transferring_inventory_path'] = inventories
        lab.conf.set_override('known_hosts_file', known_hosts,
                              group='kubespray_mgmt')
        self.hooks = v1.LcmHooks(
            lab.conf,
            pool_factory=lambda: ssh.ConnectionPool(
                ssh.SSHSettings.from_conf(lab.conf)),
            heat_factory=lambda *args: self.tacker.heat,
            vim_registry=tacker_fakes.FakeRegistry(),
            package_dir_of=lambda context, instance: None)
        self.tacker = None
        self.inventories = inventories

    def call(self, hook, request, **kwargs):
        getattr(self.hooks, hook)(CONTEXT, self.tacker.instance, request,
                                  None, None, **kwargs)

    def lifecycle(self, results, key):
        """instantiate (2 workers), scale out by 2, scale in by 1; then
        record the results and terminate."""
        a = self.addresses
        self.tacker = tacker_fakes.TackerVnf(self.lab.additional_params,
                                             a.masters, a.workers[:2], a.lb)
        vnf = self.tacker
        self.lab.haproxy.start()
        self.call('instantiate_end', instantiate_request(
            vnf.additional_params))
        new = [vnf.add_vm(WORKER, address) for address in a.workers[2:]]
        self.call('scale_end', scale_request('SCALE_OUT'),
                  scale_out_id_list=[vm.stack_id for vm in new])
        gone = vnf.vm(a.workers[0])
        self.call('scale_start', scale_request('SCALE_IN'),
                  scale_name_list=[gone.member],
                  scale_out_id_list=[gone.stack_id])
        vnf.remove_vm(gone)
        results[key] = self.snapshot()
        self.call('terminate_start', None)
        self.call('terminate_end', None)
        results[key + '-after'] = (
            pathlib.Path(self.inventories) / vnf.id).exists()

    def snapshot(self):
        """What the lifecycle produced, with what differs between runs
        and labs (instance id, paths, ports) replaced by placeholders."""
        lab = self.lab
        replace = [(self.tacker.id, 'ID'), (self.inventories, 'INVENTORIES'),
                   (str(lab.site.root), 'SITE'),
                   (lab.sshd.root, 'SSHD'), (str(lab.sshd.port), 'SSH_PORT'),
                   (str(lab.api_port), 'API_PORT')]
        replace += [(str(p), 'NODEPORT') for p in lab.nodeports]

        def clean(text):
            for old, new in replace:
                text = text.replace(old, new)
            return text
        workspace = pathlib.Path(self.inventories) / self.tacker.id
        files = {}
        for path in sorted(workspace.rglob('*')):
            name = str(path.relative_to(workspace))
            # Run logs and the run lock are records of when things ran.
            if path.is_file() and not name.startswith(('logs/', 'run.')):
                # Each lab has its own client key: compare it by length.
                text = path.read_text()
                if name.startswith('.ansible/facts/'):
                    text = _stable_facts(text)
                files[name] = (path.stat().st_mode & 0o777, 'key of %d bytes'
                               % len(text) if name.startswith('keys/')
                               else clean(text))
        nodes = {name: node['roles']
                 for name, node in lab.site.nodes().items()}
        return {'files': files, 'nodes': nodes,
                'haproxy': clean(lab.haproxy.config.read_text()),
                'problems': lab.check(self.addresses.masters,
                                      self.addresses.workers[1:])}


#: Facts of the machine's network, which other tests change while these
#: run (the gateways' test makes veth pairs, each with a link-local
#: address): not the driver's doing, so not compared.
_HOST_NETWORK_FACTS = ('ansible_all_ipv4_addresses',
                       'ansible_all_ipv6_addresses', 'ansible_interfaces')


def _stable_facts(text):
    """A fact cache entry without :data:`_HOST_NETWORK_FACTS` and the
    per-interface facts (a mapping with a ``macaddress``)."""
    facts = json.loads(text)
    return json.dumps({key: value for key, value in facts.items()
                       if key not in _HOST_NETWORK_FACTS and not (
                           isinstance(value, dict) and
                           'macaddress' in value and
                           key != 'ansible_default_ipv4' and
                           key != 'ansible_default_ipv6')},
                      indent=4, sort_keys=True)


def _run_threads(vnfs, results):
    errors = []

    def target(vnf, key):
        try:
            vnf.lifecycle(results, key)
        except BaseException as exc:  # reported below, not lost
            errors.append((key, exc))
    threads = [threading.Thread(target=target, args=(vnf, key))
               for key, vnf in vnfs.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    assert not errors, errors


def _normalised(snapshot, addresses):
    """Replace one VNF's addresses by role placeholders."""
    text = repr(snapshot)
    mapping = {addresses.ansible: 'ANSIBLE', addresses.lb: 'LB'}
    mapping.update({a: 'M%d' % i for i, a in enumerate(addresses.masters)})
    mapping.update({a: 'W%d' % i for i, a in enumerate(addresses.workers)})
    for address in sorted(mapping, key=len, reverse=True):
        text = text.replace(address, mapping[address])
        text = text.replace(address.replace('.', '-'), mapping[address])
    return text


def test_two_vnfs_in_parallel_equal_one_alone(tmp_path):
    addresses = {'a': _addresses(61), 'b': _addresses(62)}
    labs = {key: lab_mod.Lab(a.ansible, a.lb, a.masters, a.workers)
            for key, a in addresses.items()}
    try:
        for lab in labs.values():
            lab.start()
        shared = labs['a'].site.root / 'inventories'
        shared.mkdir(mode=0o700, exist_ok=True)
        # the Ansible account's (root's as root: a workspace parent must
        # not belong to another account)
        site_mod.chown(shared, labs['a'].sshd.ansible_user)
        known_hosts = str(tmp_path / 'known_hosts')
        vnfs = {key: Vnf(lab, addresses[key], known_hosts, str(shared))
                for key, lab in labs.items()}

        parallel = {}
        _run_threads(vnfs, parallel)
        # The reference: VNF a alone.  VNF b's own run alone would prove
        # nothing more: b in parallel equals a in parallel up to
        # addresses (below), and a in parallel equals a alone, so a
        # crossing that marred both alike is caught too.
        alone = {}
        vnfs['a'].lifecycle(alone, 'a')
    finally:
        for lab in labs.values():
            lab.stop()

    for run, key in ((parallel, 'a'), (parallel, 'b'), (alone, 'a')):
        assert run[key]['problems'] == []
        assert 'hosts.yaml' in run[key]['files']
        assert run[key + '-after'] is False
    assert parallel['a'] == alone['a']
    # Same lifecycle, different VMs: the same documents up to addresses.
    assert _normalised(parallel['a'], addresses['a']) == _normalised(
        parallel['b'], addresses['b'])
    # Both VNFs recorded their hosts in the one shared known_hosts file.
    recorded = site_mod.known_hosts_entries(known_hosts)
    for key, lab in labs.items():
        assert ssh.KnownHosts.entry(addresses[key].ansible,
                                    lab.sshd.port) in recorded
