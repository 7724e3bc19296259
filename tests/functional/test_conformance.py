"""The test double against the real kubespray v2.31.0 (conformance).

One compact lifecycle chain on the local site (127.0.47.0/24), through
Tacker v1's hooks: instantiate (three masters, two workers), scale out,
scale in, heal a worker, heal the dead first master, a rolling upgrade,
heal the whole VNF, terminate with kubespray's reset.  The double
records every ``ansible-playbook`` invocation the driver makes
(``Site.record_invocations``).  Each is then replayed with the real
release (:mod:`tests.functional.kubespray_release`): the same playbook,
inventory text, ``-e`` files, ``--limit`` and flags, every host reached
through a connection that fails before anything is sent.

* ``--list-hosts``: each double play targets the hosts of the real
  play(s) it stands for (``PLAY_MAP`` there says which), in the real
  order, and the whole run the same hosts as the real one;
* the controller-side guards accept what the driver sends: the Ansible
  version check and the inventory validation of boilerplate.yml,
  remove-node's ``node`` assertion and confirmation (a full real run
  until the first task that needs a host), and, in plays of their own
  with the real tasks, reset's confirmation and the fact-cache check of
  ``--limit`` runs (seeded with the hosts the double's run had cached).

Under CI a missing archive fails (tests/conftest.py).  See
doc/source/contributor/conformance.rst.
"""

import collections
import json
import types

import pytest
from mgmt_localsite import site as site_mod

from mgmt_driver.model import core
from tests.functional import kubespray_release as real
from tests.functional import tacker_fakes
from tests.functional.tacker_fakes import heal_request
from tests.functional.tacker_fakes import instantiate_request
from tests.functional.tacker_fakes import scale_request
from tests.functional.test_faults import OPTIONS
from tests.functional.test_faults import FaultLab
from tests.functional.test_faults import kill_vm_sshd
from tests.functional.test_faults import running

ANSIBLE = '127.0.47.1'
LB = '127.0.47.2'
MASTERS = ['127.0.47.10', '127.0.47.11', '127.0.47.12']
WORKERS = ['127.0.47.20', '127.0.47.21', '127.0.47.22']
MASTER, WORKER = core.ROLE_MASTER, core.ROLE_WORKER
CONTEXT = types.SimpleNamespace(project_id='conformance-project')
#: (playbook, what the chain must have run it for): the chain covers
#: every way the driver runs kubespray.
COVERED = {('cluster.yml', 'all'), ('cluster.yml', 'limit'),
           ('playbooks/facts.yml', 'limit'), ('scale.yml', 'limit'),
           ('remove-node.yml', 'reachable'), ('remove-node.yml', 'dead'),
           ('upgrade-cluster.yml', 'limit'), ('reset.yml', 'all')}

pytestmark = pytest.mark.skipif(site_mod.unavailable() is not None,
                                reason=str(site_mod.unavailable()))


class Chain:
    """The VNF instance on the lab, every VM able to die."""

    def __init__(self, lab):
        self.lab = lab
        self.vnf, _, self.hooks = tacker_fakes.vnf_on_lab(
            lab, MASTERS, WORKERS[:2], LB)

    def call(self, hook, request=None, **kwargs):
        getattr(self.hooks, hook)(CONTEXT, self.vnf.instance, request, None,
                                  None, **kwargs)

    def first_master(self):
        inventory = site_mod.read_inventory(self.lab.workspace(self.vnf.id))
        return inventory['hosts'][inventory['kube_control_plane'][0]][
            'ansible_host']

    def heal(self, address, dead=False):
        vm = self.vnf.vm(address)
        if dead:
            kill_vm_sshd(self.lab.aside[address])
        self.call('heal_start', heal_request([vm], 'conformance'))
        self.vnf.recreate_vm(vm)
        if dead:
            self.lab.aside[address].start()
        self.call('heal_end', heal_request([vm], 'conformance'))


def run_chain(lab):
    """The lifecycle; every step must succeed."""
    c = Chain(lab)
    c.call('instantiate_end', instantiate_request(c.vnf.additional_params))
    new = c.vnf.add_vm(WORKER, WORKERS[2])
    # A day later: every cached fact expired, so the scale-out gathers
    # facts for the hosts its --limit leaves out.
    lab.site.age_fact_cache(lab.site.fact_cache_timeout() + 60)
    c.call('scale_end', scale_request('SCALE_OUT'),
           scale_out_id_list=[new.stack_id])
    gone = c.vnf.vm(WORKERS[1])
    c.call('scale_start', scale_request('SCALE_IN'),
           scale_name_list=[gone.member], scale_out_id_list=[gone.stack_id])
    c.vnf.remove_vm(gone)
    c.heal(WORKERS[0])
    c.heal(c.first_master(), dead=True)
    c.vnf.metadata.update(kube_version='1.34.3')
    c.call('modify_information_end')
    workers = [WORKERS[0], WORKERS[2]]
    assert lab.check(MASTERS, workers) == []
    c.call('heal_start', heal_request(cause='conformance'))
    c.vnf.build(MASTERS, workers, LB)
    site_mod.forget_cluster(lab.site)
    lab.haproxy.start()
    c.call('heal_end', heal_request(cause='conformance'))
    assert lab.check(MASTERS, workers) == []
    c.call('terminate_start', None)
    c.call('terminate_end', None)


def kind(invocation):
    """What an invocation was for (see :data:`COVERED`)."""
    if playbook(invocation) in ('remove-node.yml', 'remove_node.yml'):
        dead = any(values.get('reset_nodes') is False
                   for _, values in invocation['extra_vars'])
        return 'dead' if dead else 'reachable'
    return 'limit' if invocation['limit'] else 'all'


def playbook(invocation):
    return invocation['argv'][-1]


def report(problems):
    """Every problem, under the invocation it belongs to."""
    return '\n'.join('%s:\n  %s' % (where, '\n  '.join(found))
                     for where, found in problems.items() if found)


@pytest.fixture(scope='module')
def release(tmp_path_factory):
    try:
        return real.Release(tmp_path_factory.mktemp('kubespray-real'))
    except real.ReleaseUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope='module')
def invocations():
    lab = FaultLab(ANSIBLE, LB, MASTERS, WORKERS, options=OPTIONS,
                   aside=MASTERS)
    with running(lab) as started:
        started.site.record_invocations()
        run_chain(started)
        return started.site.invocations()


@pytest.fixture(scope='module')
def replayed(release, invocations, tmp_path_factory):
    directory = tmp_path_factory.mktemp('replays')
    # What was replayed, for a failure's post-mortem.
    (directory / 'invocations.json').write_text(json.dumps(invocations))
    return real.replay_all(release, invocations, directory)


def test_the_chain_runs_every_kind_of_invocation(invocations):
    seen = {(playbook(i), kind(i)) for i in invocations}
    assert COVERED <= seen, sorted(COVERED - seen)
    assert all(not i['failed'] and not i['unreachable'] for i in invocations
               if kind(i) != 'dead')
    # What the driver gives ansible-playbook: vars files only (typed
    # values), never an inline -e.
    assert all(source.startswith('@') for i in invocations
               for source, _ in i['extra_vars'])


def test_every_play_targets_the_hosts_of_the_real_play(replayed):
    problems = collections.defaultdict(list)
    for index, (invocation, real_plays, _) in enumerate(replayed):
        where = '#%d %s --limit=%s' % (index, playbook(invocation),
                                       invocation['limit'])
        problems[where] += real.compare_plays(
            playbook(invocation), invocation['plays'], real_plays)
    assert not any(problems.values()), report(problems)


def test_the_real_guards_accept_what_the_driver_sends(replayed):
    problems = {'#%d %s --limit=%s' % (index, playbook(invocation),
                                       invocation['limit']): guards
                for index, (invocation, _, guards) in enumerate(replayed)}
    assert not any(problems.values()), report(problems)
