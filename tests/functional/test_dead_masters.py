"""Healing control-plane nodes whose VM is dead, the first one included.

Three masters, each served by an sshd of its own (a twin of the lab's,
see test_faults), so that one VM can die: its sshd and every session are
killed and Ansible cannot reach it any more, as with a crashed VM.  One
cluster serves the whole chain, as Tacker would run it: heal a dead
master that is not kubespray's first control-plane node after the fact
cache expired (its entry cannot be refreshed: the VM is dead), then the
dead first one while a worker is down too (its heal_start failing once
mid-way and retried), then scale out a worker.  After each step:
every master Ready, etcd has exactly the masters, the inventory has
them in kubespray's order, HAProxy serves exactly them, and
``kube-public/cluster-info`` names the load balancer (the double's
joins discover the cluster there and fail when it names a dead or
removed master).
"""

import types

import pytest
from mgmt_localsite import etcd
from mgmt_localsite import site as site_mod

from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from tests.functional import tacker_fakes
from tests.functional.tacker_fakes import heal_request
from tests.functional.tacker_fakes import instantiate_request
from tests.functional.tacker_fakes import scale_request
from tests.functional.test_faults import OPTIONS
from tests.functional.test_faults import FaultLab
from tests.functional.test_faults import kill_vm_sshd
from tests.functional.test_faults import running

ANSIBLE = '127.0.11.1'
LB = '127.0.11.2'
MASTERS = ['127.0.11.10', '127.0.11.11', '127.0.11.12']
WORKERS = ['127.0.11.20', '127.0.11.21']
WORKER = core.ROLE_WORKER
CONTEXT = types.SimpleNamespace(project_id='dead-masters-project')

pytestmark = pytest.mark.skipif(site_mod.unavailable() is not None,
                                reason=str(site_mod.unavailable()))


@pytest.fixture(scope='module')
def lab():
    with running(FaultLab(ANSIBLE, LB, MASTERS, WORKERS, options=OPTIONS,
                          aside=MASTERS + WORKERS[:1])) as lab:
        yield lab


name = tacker_fakes.namer(MASTERS)


class Chain(tacker_fakes.Chain):
    """The VNF instance on the lab and what a step must leave."""

    def order(self):
        """Master addresses in the inventory's control-plane order."""
        inventory = site_mod.read_inventory(
            self.lab.workspace(self.vnf.id))
        return [inventory['hosts'][n]['ansible_host']
                for n in inventory['kube_control_plane']]

    def check(self, masters):
        """*masters* (in kubespray's order) and the workers, everywhere."""
        assert self.lab.check(masters, self.workers) == []
        assert self.order() == masters
        assert self.lab.site.cluster_info_server() == 'https://%s:%d' % (
            LB, self.lab.api_port)

    def die(self, address):
        """The VM stops answering (sshd and sessions gone) and a
        master's etcd member dies with it."""
        kill_vm_sshd(self.lab.aside[address])
        etcd.kill_at(address)

    def heal(self, address, fail_once=None):
        """Tacker's VNFC heal of a dead master: heal_start, a new VM at
        the same address, heal_end.  With *fail_once*, heal_start fails
        at that playbook first and Tacker's retry runs it again."""
        vm = self.vnf.vm(address)
        request = heal_request([vm], 'dead')
        if fail_once:
            self.lab.site.inject_failure(fail_once)
            with pytest.raises(exceptions.MgmtDriverRemoteCommandError):
                self.call('heal_start', request)
            failed = self.lab.site.runs()[-1]
            assert failed['playbook'] == fail_once and not failed['ok']
        self.call('heal_start', request)
        self.vnf.recreate_vm(vm)
        self.lab.aside[address].start()
        return request

    def runs_of(self, playbook, since=0):
        return [r for r in self.lab.site.runs()[since:]
                if r['playbook'] == playbook]


def test_dead_masters_are_healed_first_one_included(lab):
    c = Chain(lab, CONTEXT, MASTERS, WORKERS[:1], LB)
    c.call('instantiate_end', instantiate_request(c.vnf.additional_params))
    order = c.order()
    assert sorted(order) == MASTERS
    c.check(order)

    # 1. A dead master that is not the first, a day after the last
    #    facts run (every cache entry expired): removed ungracefully
    #    (nothing connects to it; the inventory gives its etcd peer
    #    address), re-added at the end by a cluster.yml limited to the
    #    control plane, the worker's facts refreshed for it.
    sick = order[1]
    c.die(sick)
    lab.site.age_fact_cache(lab.site.fact_cache_timeout() + 60)
    request = c.heal(sick)
    run = c.runs_of('remove-node.yml')[-1]
    assert run['ok'] and name(sick) not in run['touched']
    masters = [order[0], order[2]]
    assert lab.check(masters, c.workers) == []
    runs = len(lab.site.runs())
    c.call('heal_end', request)
    masters.append(sick)
    c.check(masters)
    joined = c.runs_of('cluster.yml', runs)
    assert [sorted(r['touched']) for r in joined] == [
        sorted(name(a) for a in masters)]
    assert lab.site.fact_cache_ages()[name(WORKERS[0])] < 600

    # 2. The dead first master, while cluster-info names it (what
    #    kubeadm init writes without a load balancer) and the worker is
    #    down too (its cache entry is still valid): the others move to
    #    the front, the removal is delegated to them, cluster-info is
    #    pointed at the load balancer, and the new VM joins last.
    first = masters[0]
    lab.site.set_cluster_info_server('https://%s:6443' % first)
    assert lab.site.cluster_info_server() == 'https://%s:6443' % first
    c.die(first)
    c.die(WORKERS[0])
    runs = len(lab.site.runs())
    request = c.heal(first, fail_once='remove-node.yml')
    assert c.runs_of('cluster.yml', runs) == []  # not over a dead host
    assert lab.check(masters[1:], c.workers) == []
    assert c.order() == masters[1:]
    assert lab.site.cluster_info_server() == 'https://%s:%d' % (
        LB, lab.api_port)
    c.call('heal_end', request)
    masters = masters[1:] + [first]
    c.check(masters)
    assert all(name(WORKERS[0]) not in r['touched']
               for r in lab.site.runs()[runs:])
    lab.aside[WORKERS[0]].start()

    # 3. A later join discovers the cluster through cluster-info.
    new = c.vnf.add_vm(WORKER, WORKERS[1])
    c.call('scale_end', scale_request('SCALE_OUT'),
           scale_out_id_list=[new.stack_id])
    c.workers = WORKERS
    c.check(masters)

