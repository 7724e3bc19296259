"""Issue 27 item 2: linear time on tenant-sized and remote-sized data.

The same kind of test as :mod:`tests.unit.test_complexity` (the input
grows 8-fold, the work counted by :mod:`tests.unit.work`, never the
time, must grow linearly), one per function that scanned a list inside a
loop over request or remote data; the taints are counting keys. Each was
shown to fail on the code before the fix. Beside them, the results of
the rewritten functions are checked against the old, quadratic,
definitions (kept here as references) on random inputs: the rewrite
changed the time, not one result or its order.
"""

import ipaddress
import json
import logging
import types

import hypothesis
import pytest
from hypothesis import strategies as st
from oslo_config import cfg

from mgmt_driver.adapters import status
from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.model import labels
from mgmt_driver.model import nodes
from mgmt_driver.model import params
from mgmt_driver.operations import day2
from mgmt_driver.operations import upgrade
from mgmt_driver.remote import factcache
from mgmt_driver.remote import inventory
from mgmt_driver.remote import kubectl
from mgmt_driver.remote import plan
from mgmt_driver.remote import ssh
from mgmt_driver.session import driver
from tests.fakes import FakePool
from tests.unit import params_data
from tests.unit import test_driver
from tests.unit import work
from tests.unit.test_complexity import SETTINGS
from tests.unit.test_driver import LAYOUT
from tests.unit.test_driver import conf  # noqa: F401 (a fixture)

EFFECTS = ('NoSchedule', 'PreferNoSchedule', 'NoExecute')


def _taints(count, kind, prefix='k'):
    """*count* taints (or changes) of one hostile shape, as
    :class:`work.Key` strings: a scan of them is counted."""
    made = []
    for i in range(count):
        key = '%s%d' % (prefix, i)
        made.append({
            'distinct': '%s=v:%s' % (key, EFFECTS[i % 3]),
            'same-key': 'k=v%d:%s' % (i, EFFECTS[i % 3]),
            'removals': '%s:%s-' % (key, EFFECTS[i % 3]) if i % 2
            else '%s=v:NoSchedule' % key,
            'key-removals': '%s-' % key if i % 2
            else '%s=v:NoExecute' % key,
        }[kind])
    return tuple(work.Key(taint) for taint in made)


SHAPES = st.sampled_from(['distinct', 'same-key', 'removals',
                          'key-removals'])


def _addresses(count, base='10.20.0.0'):
    first = int(ipaddress.ip_address(base)) + 10
    return [str(ipaddress.ip_address(first + i)) for i in range(count)]


# ------------------------------------------------------------- labels --

@SETTINGS
@hypothesis.given(kind=SHAPES)
def test_relabel_taints_apply_linearly(kind):
    # The case: a relabel_taints PATCH over recorded taints.
    def make(n):
        present = core.NodeSettings((), _taints(n, 'distinct', 'p'))
        return present, _taints(n, kind)
    assert work.growth(lambda a: labels.apply_change(a[0], (), a[1]), make,
                       150) < work.MAX_GROWTH


@SETTINGS
@hypothesis.given(kind=SHAPES)
def test_taints_to_send_are_chosen_linearly(kind):
    # *present* is what kubectl says the node has: remote data.
    def make(n):
        return _taints(n, kind), _taints(n, 'distinct')
    assert work.growth(lambda a: labels.taints_to_send(*a), make,
                       150) < work.MAX_GROWTH


@SETTINGS
@hypothesis.given(kind=st.sampled_from(['distinct', 'same-key']))
def test_pool_taints_overlay_linearly(kind):
    def make(n):
        return (core.NodeSettings((), _taints(n, 'distinct', 'r')),
                core.NodeSettings((), _taints(n, kind)))
    assert work.growth(lambda a: a[0].overlaid(a[1]), make,
                       300) < work.MAX_GROWTH


@SETTINGS
@hypothesis.given(kind=st.sampled_from(['distinct', 'removals']))
def test_taint_lists_parse_linearly(kind):
    def make(n):
        return ','.join(_taints(n, kind))
    assert work.growth(lambda text: labels.parse_taint_list(
        text, 'relabel_taints', removals=True), make, 2000) < work.MAX_GROWTH


def test_request_taints_parse_linearly():
    def make(n):
        request = params_data.minimal()
        request[core.ROOT]['worker_node']['taints'] = list(
            _taints(n, 'distinct'))
        return request
    assert work.growth(lambda r: params.parse_params(
        r, need_cp_names=False, max_size=64 * 1024 * 1024), make,
        2000) < work.MAX_GROWTH


# -------------------------------------------------------------- status --

@SETTINGS
@hypothesis.given(kind=st.sampled_from(['distinct', 'same-key']))
def test_recorded_and_live_taints_compare_linearly(kind):
    # Both sides come from remote hosts: the record on the Ansible
    # server, the node's taints from kubectl.
    def make(n):
        recorded = {'worker-1': core.NodeSettings(
            (), _taints(n, kind))}
        live = [{'name': 'worker-1', 'ready': 'True', 'labels': {},
                 'taints': list(reversed(_taints(n, kind)))}]
        return recorded, live
    assert work.growth(lambda a: status._settings_differences(*a), make,
                       1000) < work.MAX_GROWTH


# --------------------------------------------------------- node sets --

def test_pools_of_a_node_are_found_as_before():
    # Bounded (64 pools of at most 1000 entries), so no ratio test: the
    # fix made each pool's entries a set and parses the node's address
    # once, not once per pool.
    request = params_data.minimal()
    request[core.ROOT]['node_pools'] = {
        'by-name': {'nodes': ['worker-10-0-0-1']},
        'by-address': {'nodes': ['fd00::2', '10.0.0.3']},
        'both': {'nodes': ['10.0.0.4']},
        'other': {'nodes': ['worker-10-0-0-4']}}
    spec = params.parse_params(request, need_cp_names=False)

    def node(address):
        return nodes.Node.from_address(
            core.NodeAddress('worker', address, address), 22)
    assert [[p.name for p in spec.pools_of(node(a))] for a in (
        '10.0.0.1', 'FD00::2', '10.0.0.3', '10.0.0.4', '10.0.0.5')] == [
        ['by-name'], ['by-address'], ['by-address'], ['both', 'other'],
        []]


def test_nodes_are_looked_up_by_name_linearly():
    def make(n):
        masters = [core.NodeAddress('master', ip, ip)
                   for ip in _addresses(1, '10.30.0.0')]
        workers = [core.NodeAddress('worker', ip, ip)
                   for ip in _addresses(n)]
        spec = params.parse_params(params_data.minimal(),
                                   need_cp_names=False)
        cluster = nodes.build_nodes(spec, masters + workers + [
            core.NodeAddress('external_lb', '10.40.0.1', '10.40.0.1')])
        return cluster, list(reversed(cluster.names))

    def look_up(made):
        cluster, names = made
        return [cluster.get(name) or cluster.gateway(name)
                for name in names]
    assert work.growth(look_up, make, 500) < work.MAX_GROWTH


def test_many_masters_render_linearly():
    def make(n):
        spec = params.parse_params(params_data.minimal(),
                                   need_cp_names=False)
        masters = [core.NodeAddress('master', ip, ip)
                   for ip in _addresses(2 * n + 1)]
        cluster = nodes.ClusterNodes(
            masters=[nodes.Node.from_address(a, 22) for a in masters])
        return spec, cluster
    assert work.growth(lambda a: inventory.render_hosts(*a), make,
                       100) < work.MAX_GROWTH


# ------------------------------------------------- upgrade, plan, facts --

def _node_info(name):
    return kubectl.NodeInfo(name=name, roles=(), ready='True',
                            kubelet_version='v1.30.1', internal_ip='',
                            labels={}, schedulable=True)


def test_upgrade_plan_is_linear_in_the_node_count():
    def make(n):
        masters = ['master-%d' % i for i in range(n)]
        workers = ['worker-%d' % i for i in range(n)]
        return masters, workers, [_node_info(x) for x in masters + workers]

    def plan_all(made):
        masters, workers, infos = made
        return upgrade.plan((1, 31, 0), infos, masters, workers, None,
                            'kube_version')
    assert work.growth(plan_all, make, 1000) < work.MAX_GROWTH


def test_dry_run_plan_formats_linearly():
    def make(n):  # n steps on n / 2 hosts, the hosts interleaved
        hosts = max(n // 2, 1)
        return [plan.Step('10.0.%d.%d' % divmod(i % hosts, 250), 'run',
                          'true') for i in range(n)]
    assert work.growth(plan.format_plan, make, 2000) < work.MAX_GROWTH


class _FactsRunner:
    """Fails the first facts run with *unreachable* hosts (the PLAY
    RECAP: remote data), then succeeds."""

    conn = types.SimpleNamespace(host='ansible')

    def __init__(self, failure):
        self.failure, self.calls = failure, 0

    def facts(self, count, limit=None):
        self.calls += 1
        if self.calls == 1:
            raise self.failure


def test_unreachable_hosts_of_a_facts_run_are_sorted_out_linearly(caplog):
    # One warning per host kept: not what is measured here.
    caplog.set_level(logging.ERROR, logger=factcache.__name__)
    def make(n):
        hosts = ['worker-%d' % i for i in range(n)]
        result = ssh.CommandResult('ansible', 'ansible-playbook', '', '', 2)
        failure = exceptions.PlaybookFailed(
            'facts.yml', result, {h: {'unreachable': 1}
                                  for h in hosts[::2]}, [], '')
        report = factcache.CacheReport(timeout=3600, now=100, entries={
            h: 100 for h in hosts})
        return failure, report, hosts

    def gather(made):
        failure, report, hosts = made
        return factcache._gather(_FactsRunner(failure), report, hosts)
    assert work.growth(gather, make, 2000) < work.MAX_GROWTH


# ------------------------------------------------------ the PATCH path --

def _conf():
    # As test_driver's fixture; hypothesis wants no function-scoped one.
    opts = cfg.ConfigOpts()
    kconf.register_opts(opts)
    opts([])
    opts.set_override('kubectl_sudo', 'never', group='kubespray_mgmt')
    return opts


def _relabel_case(opts, taints, workers=3):
    """A driver's settings, its cluster and one relabel PATCH."""
    request = params_data.minimal()
    spec = params.parse_params(request, need_cp_names=False)
    master = '10.10.0.11'
    cluster = nodes.build_nodes(spec, [
        core.NodeAddress('master', master, master)] + [
        core.NodeAddress('worker', ip, ip)
        for ip in _addresses(workers)] + [
        core.NodeAddress('external_lb', '10.40.0.1', '10.40.0.1')])
    names = [n.name for n in cluster.workers]
    metadata = {labels.METADATA_NODES: ','.join(names),
                labels.METADATA_TAINTS: ','.join(taints)}
    items = [{'metadata': {'name': name, 'labels': {}},
              'spec': {'taints': []}} for name in names]
    return opts, spec, cluster, master, metadata, json.dumps(
        {'items': items})


def _patch(case):
    opts, spec, cluster, master, metadata, listed = case
    pool = FakePool()
    pool.connection(spec.ansible.ip_address).script(r'^program:detect-layout ',
                                                    stdout=LAYOUT)
    pool.connection(master).script(r' get node', stdout=listed)
    relabel = labels.relabel_from_metadata(metadata, 'vnf_metadata')
    drv = driver.ClusterDriver(spec, 'i1', pool, conf=opts)
    assert day2.relabel(drv, cluster, list(relabel.nodes), relabel.labels,
                        relabel.taints) == []


@SETTINGS
@hypothesis.given(kind=SHAPES)
def test_a_relabel_patch_is_linear_in_its_taints(kind):
    opts = _conf()
    assert work.growth(_patch, lambda n: _relabel_case(opts, _taints(n, kind)),
                       40) < work.MAX_GROWTH


# ------------------------------------------- same results as before --

def _old_removes(removal, taint):
    """Whether the removal ``key`` or ``key:Effect`` takes *taint*, as
    the definitions before the fix decided it."""
    key, effect = core.taint_slot(taint)
    if ':' in removal:
        return (key, effect) == core.taint_slot(removal)
    return key == removal


def _old_apply_taints(present, changes):
    """The definition before the fix: filter the list at each change."""
    kept = list(present)
    for taint in changes:
        if taint.endswith('-'):
            kept = [t for t in kept if not _old_removes(taint[:-1], t)]
        else:
            kept = [t for t in kept
                    if core.taint_slot(t) != core.taint_slot(taint)]
            kept.append(taint)
    return tuple(kept)


def _old_to_send(changes, present):
    return [t for t in changes
            if (any(_old_removes(t[:-1], p) for p in present)
                if t.endswith('-') else t not in present)]


def _old_overlaid(base, top):
    replacing = {core.taint_slot(t): t for t in top}
    taints = []
    for taint in [replacing.get(core.taint_slot(t), t) for t in base
                  ] + list(top):
        if taint not in taints:
            taints.append(taint)
    return tuple(taints)


# Few keys, values and effects, so that slots and keys collide often.
_TAINT = st.builds('{}{}:{}'.format, st.sampled_from('abc'),
                   st.sampled_from(['', '=x', '=y']),
                   st.sampled_from(EFFECTS))
_CHANGE = _TAINT | _TAINT.map(lambda t: t.split('=')[0].split(':')[0] +
                              ':' + t.rpartition(':')[2] + '-') | \
    st.sampled_from(['a-', 'b-', 'c-'])
_SAME = hypothesis.settings(max_examples=150, deadline=None,
                            derandomize=True)


@_SAME
@hypothesis.given(present=st.lists(_TAINT, max_size=8),
                  changes=st.lists(_CHANGE, max_size=10))
def test_applied_taints_are_those_of_the_old_definition(present, changes):
    got = labels.apply_change(core.NodeSettings((), tuple(present)), (),
                              tuple(changes)).taints
    assert got == _old_apply_taints(present, changes)


@_SAME
@hypothesis.given(present=st.lists(_TAINT, max_size=8),
                  changes=st.lists(_CHANGE, max_size=10))
def test_taints_sent_are_those_of_the_old_definition(present, changes):
    assert labels.taints_to_send(changes, present) == _old_to_send(
        changes, present)


@_SAME
@hypothesis.given(base=st.lists(_TAINT, max_size=8),
                  top=st.lists(_TAINT, max_size=8))
def test_overlaid_taints_are_those_of_the_old_definition(base, top):
    got = core.NodeSettings((), tuple(base)).overlaid(
        core.NodeSettings((), tuple(top))).taints
    assert got == _old_overlaid(base, top)


def test_the_documented_taint_rules_hold():
    # A relabel's taint of the same key and effect replaces the old one
    # and goes to the end; a removal by key removes every effect.
    settings = core.NodeSettings((), ('a=1:NoSchedule', 'b:NoExecute',
                                      'a=1:NoExecute'))
    assert labels.apply_change(settings, (), ('a=2:NoSchedule',)).taints \
        == ('b:NoExecute', 'a=1:NoExecute', 'a=2:NoSchedule')
    assert labels.apply_change(settings, (), ('a-', 'a=3:NoExecute',
                                              'b:NoExecute-')).taints \
        == ('a=3:NoExecute',)
    # A pool taint takes the role taint's place.
    role = core.NodeSettings((), ('a=1:NoSchedule', 'b:NoExecute'))
    assert role.overlaid(core.NodeSettings(
        (), ('c:NoSchedule', 'a=9:NoSchedule'))).taints == (
        'a=9:NoSchedule', 'b:NoExecute', 'c:NoSchedule')


def test_repeated_request_entries_are_dropped_in_order():
    assert labels.parse_taint_list('b:NoSchedule,a:NoSchedule,b:NoSchedule,'
                                   'a-,a-', 'f', removals=True) == (
        'b:NoSchedule', 'a:NoSchedule', 'a-')
    request = params_data.minimal()
    root = request[core.ROOT]
    root['worker_node']['taints'] = ['b:NoSchedule', 'a:NoSchedule',
                                     'b:NoSchedule']
    root['node_pools'] = {'p': {'nodes': [
        'worker-10-0-0-2', 'fd00::1', 'worker-10-0-0-2', 'FD00:0::1']}}
    spec = params.parse_params(request, need_cp_names=False)
    assert spec.worker.taints == ('b:NoSchedule', 'a:NoSchedule')
    assert spec.pool('p').nodes == ('worker-10-0-0-2', 'fd00::1')


def test_status_names_only_the_recorded_taints_a_node_lacks():
    recorded = {'w': core.NodeSettings((), ('a:NoSchedule', 'b:NoSchedule',
                                            'c:NoExecute'))}
    live = [{'name': 'w', 'ready': 'True', 'labels': {},
             'taints': ['c:NoExecute', 'x:NoSchedule']}]
    found = status._settings_differences(recorded, live)
    assert [d['detail'] for d in found] == [
        'taint(s) a:NoSchedule, b:NoSchedule: not as recorded (relabel '
        'again)']


def test_lookups_by_name_find_what_a_scan_finds():
    spec = params.parse_params(params_data.minimal(), need_cp_names=False)
    cluster = nodes.build_nodes(spec, [
        core.NodeAddress('master', '10.0.0.1', '10.0.0.1'),
        core.NodeAddress('worker', '10.0.0.3', '10.0.0.3'),
        core.NodeAddress('external_lb', '10.0.0.9', '10.0.0.9')])
    for name in cluster.names + ['lb-10-0-0-9', 'nobody']:
        assert cluster.get(name) == next(
            (n for n in cluster.k8s_nodes if n.name == name), None)
        assert cluster.gateway(name) == next(
            (n for n in cluster.gateways if n.name == name), None)
    assert cluster.remove('worker-10-0-0-3').get('worker-10-0-0-3') is None


def test_a_failed_join_lists_the_nodes_once_whatever_their_number(conf):  # noqa: F811,E501
    # Taking a failed join's workers out asked Kubernetes for its node
    # list once per new worker (a remote command each); now once.
    h = test_driver.Harness(conf, k8s_nodes=['master-10-10-0-11',
                                             'worker-10-10-0-21',
                                             'worker-10-10-0-22'])
    h.ansible.script(r'scale\.yml$', stdout='fatal: [worker-10-10-0-24]: '
                     'boom\n' + test_driver.RECAP, exit_code=2)
    h.master.script(r'get node worker-10-10-0-2', first=True,
                    stdout='node/worker-10-10-0-23\n')
    h.master.script(r'get pods', stdout=json.dumps({'items': []}))
    with pytest.raises(exceptions.PlaybookFailed):
        h.hooks.scale_end(None, test_driver._scale_out_instance(h),
                          test_driver._request({}, type='SCALE_OUT'), None,
                          None)
    listings = [c for c in h.master.commands if 'get nodes -o json' in c]
    # The reconcile's listing, then the one of taking two workers out.
    assert len(listings) == 2


@pytest.mark.parametrize('old, new', [
    (lambda a: _old_overlaid(a[0].taints, a[1].taints),
     lambda a: a[0].overlaid(a[1])),
    (lambda a: _old_to_send(a[1].taints, a[0].taints),
     lambda a: labels.taints_to_send(a[1].taints, a[0].taints)),
    (lambda a: _old_apply_taints(a[0].taints, a[1].taints),
     lambda a: labels.apply_change(a[0], (), a[1].taints))])
def test_the_work_count_tells_the_old_definitions_from_the_new(old, new):
    # The measure can fail: the quadratic definitions before the fix
    # (their scans run in C, seen through work.Key) are over the bound.
    def make(n):
        return (core.NodeSettings((), _taints(n, 'distinct', 'p')),
                core.NodeSettings((), _taints(n, 'removals')))
    assert work.growth(old, make, 40) > work.MAX_GROWTH
    assert work.growth(new, make, 40) < work.MAX_GROWTH
