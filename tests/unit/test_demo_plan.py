"""The demo's lifecycle plan and summary (no site needed)."""

import io
import pathlib
import re
import types

import mgmt_localsite as localsite
import pytest
import yaml
from mgmt_localsite import demo

from mgmt_driver.operations import upgrade

SAMPLES = pathlib.Path(__file__).parents[2] / 'samples'


@pytest.mark.parametrize('masters', [1, 3])
def test_every_step_leaves_what_the_next_one_starts_from(masters):
    steps = demo.plan_steps(demo.MASTERS[:masters], demo.WORKERS[:4])
    for before, after in zip(steps, steps[1:], strict=False):
        if after.operation == 'scale-out':
            continue  # the new VMs appear for the scale-out itself
        if before.operation == 'scale-out':
            assert set(before.after_workers) == set(after.workers)
        elif after.operation != 'terminate':
            assert after.workers == before.after_workers
    assert steps[-1].operation == 'terminate'
    assert steps[-1].after_masters == steps[-1].after_workers == []
    healed_master = [s for s in steps if s.title == 'heal the first master']
    assert len(healed_master) == (masters > 1)


def test_scale_steps_name_the_nodes_they_change():
    steps = {s.title: s for s in demo.plan_steps(demo.MASTERS[:1],
                                                 demo.WORKERS[:4])}
    out = steps['scale out by 2']
    assert out.names == ['worker-127-0-0-233', 'worker-127-0-0-234']
    assert len(out.after_workers) == 4
    scale_in = steps['scale in by 1']
    assert scale_in.names == ['worker-127-0-0-231']
    assert '127.0.0.231' not in scale_in.after_workers
    assert steps['instantiate'].after_workers == demo.WORKERS[:2]


@pytest.mark.parametrize('masters', [1, 3])
def test_the_upgrade_step_comes_before_terminate_on_the_same_nodes(
        masters):
    plain = demo.plan_steps(demo.MASTERS[:masters], demo.WORKERS[:4])
    steps = demo.plan_steps(demo.MASTERS[:masters], demo.WORKERS[:4],
                            upgrade=True)
    assert [s.operation for s in steps] == (
        [s.operation for s in plain[:-1]] + ['upgrade', 'terminate'])
    step = steps[-2]
    assert step.title == demo.UPGRADE_TITLE and step.names == []
    assert step.workers == step.after_workers == steps[-3].after_workers
    assert step.masters == step.after_masters == demo.MASTERS[:masters]
    assert 'upgrade' not in [s.operation for s in plain]


def test_next_minor_is_the_newest_patch_one_minor_above():
    supported = {(1, 33, 1), (1, 33, 0), (1, 32, 5), (1, 32, 0),
                 (1, 31, 4), (1, 30, 8)}
    assert demo.next_minor((1, 31, 4), supported) == (1, 32, 5)
    assert demo.next_minor((1, 32, 0), supported) == (1, 33, 1)
    assert demo.next_minor((1, 30, 8), supported) == (1, 31, 4)
    for installed, shown in (((1, 33, 1), '1.34.x'), ((0, 99, 0), '0.100.x')):
        with pytest.raises(demo.exceptions.MgmtDriverOtherError,
                           match=r'no %s version' % re.escape(shown)):
            demo.next_minor(installed, supported)
    with pytest.raises(demo.exceptions.MgmtDriverOtherError):
        demo.next_minor((1, 31, 4), None)


def test_the_double_supports_a_version_one_minor_above_its_default():
    # What the demo's upgrade step reads: the double's checksums and
    # the version a cluster.yml run installs.
    lab = types.SimpleNamespace(site=types.SimpleNamespace(
        checkout=localsite.CHECKOUT_SOURCE))
    supported = demo._supported_versions(lab)
    defaults = yaml.safe_load((
        localsite.CHECKOUT_SOURCE / 'roles' / 'kubespray_defaults' /
        'defaults' / 'main' / 'main.yml').read_text())
    installed = upgrade.parse_version(str(defaults['kube_version']), 'x')
    assert installed in supported
    target = demo.next_minor(installed, supported)
    assert target[:2] == (installed[0], installed[1] + 1)
    assert target == max(v for v in supported if v[:2] == target[:2])


def test_the_upgrade_check_names_nodes_at_another_version():
    nodes = {'master-1': {'kubelet_version': 'v1.34.3'},
             'worker-1': {'kubelet_version': 'v1.33.5'}}
    lab = types.SimpleNamespace(site=types.SimpleNamespace(
        nodes=lambda: nodes))
    assert demo._installed_version(lab) == (1, 33, 5)
    assert demo._version_problems(lab, (1, 34, 3)) == [
        'worker-1 runs kubelet v1.33.5, expected v1.34.3']
    nodes['worker-1']['kubelet_version'] = 'v1.34.3'
    assert demo._version_problems(lab, (1, 34, 3)) == []


def test_summary_marks_a_failed_step():
    d = demo.Demo(workers=1, out=io.StringIO())
    d._started = 0.0
    steps = demo.plan_steps(d.masters, d.workers)
    d.outcomes = [demo.Outcome(steps[0], seconds=3.0, playbook_seconds=2.0,
                               playbooks=[('cluster.yml', 3)]),
                  demo.Outcome(steps[1], error='boom')]
    text = d.summary()
    assert 'cluster.yml (3)' in text and '1.0s' in text
    assert 'FAILED' in text.splitlines()[-3]
    assert 'The demo FAILED' in text


@pytest.mark.parametrize('kwargs', [{'masters': 2}, {'workers': 0},
                                    {'workers': demo.MAX_WORKERS + 1}])
def test_bad_sizes(kwargs):
    with pytest.raises(ValueError):
        demo.Demo(**kwargs)


class _StubLab:
    """Stands in for lab.Lab: records that its clean-up ran."""

    stopped = False

    def __init__(self, *args):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        _StubLab.stopped = True


def test_ctrl_c_prints_the_summary_so_far_and_exits_130(monkeypatch):
    monkeypatch.setattr(demo.lab_mod, 'Lab', _StubLab)
    monkeypatch.setattr(demo.lab_mod, 'stop_on_sigterm', lambda: None)
    monkeypatch.setattr(demo.Demo, '_introduce', lambda self, lab: None)
    steps = []

    def run_step(self, lab, step):
        steps.append(step)
        if len(steps) == 2:
            raise KeyboardInterrupt
        return demo.Outcome(step, seconds=1.0)
    monkeypatch.setattr(demo.Demo, '_run_step', run_step)
    out = io.StringIO()
    assert demo.Demo(workers=1, out=out).run() == 130
    text = out.getvalue()
    assert _StubLab.stopped
    rows = text.split('\nSummary\n', 1)[1].splitlines()
    assert rows[1].startswith('instantiate') and ' ok ' in rows[1]
    assert rows[2].startswith('scale out by 2') and 'interrupted' in rows[2]
    assert 'The demo was INTERRUPTED in ' in text


def test_the_command_turns_ctrl_c_into_exit_130(monkeypatch, capsys):
    from mgmt_driver.adapters import cli

    def interrupted(self):
        raise KeyboardInterrupt
    monkeypatch.setattr(demo.Demo, 'run', interrupted)
    assert cli.main(['demo']) == 130
    assert capsys.readouterr().err == 'kubespray-mgmt: interrupted\n'


def test_the_command_passes_upgrade_on(monkeypatch):
    from mgmt_driver.adapters import cli
    monkeypatch.setattr(demo.Demo, 'run',
                        lambda self: 7 if self.upgrade else 8)
    assert cli.main(['demo', '--upgrade']) == 7
    assert cli.main(['demo']) == 8


class _Stop(Exception):
    """Raised by :class:`_NamingLab` once the driver is asked for."""


class _NamingLab:
    """What the demo and the kept site ask of a lab, up to the driver,
    whose operation name it notes (issue 41, item 16: every playbook
    log was named ``operation-*``)."""

    site = types.SimpleNamespace(runs=lambda: [])

    def __init__(self):
        self.operations = []

    def spec(self):
        return None

    def cluster(self, spec, masters, workers):
        return None

    def driver(self, spec, instance_id, progress=None, operation=None):
        self.operations.append(operation)
        raise _Stop


@pytest.mark.parametrize('operation', ['instantiate', 'scale-out', 'heal'])
def test_a_demo_step_names_its_logs_after_its_operation(operation):
    lab = _NamingLab()
    step = next(s for s in demo.plan_steps(demo.MASTERS[:3],
                                           demo.WORKERS[:4])
                if s.operation == operation)
    runner = demo.Demo(out=io.StringIO())
    runner._started = 0.0  # as run() sets it
    with pytest.raises(_Stop):
        runner._run_step(lab, step)
    assert lab.operations == [operation]


def test_the_kept_site_names_its_logs_instantiate():
    from mgmt_localsite import kept
    lab = _NamingLab()
    with pytest.raises(_Stop):
        kept._instantiate(lab, demo.MASTERS[:1], demo.WORKERS[:2],
                          io.StringIO())
    assert lab.operations == ['instantiate']


def test_the_lab_s_driver_logs_under_the_run_name():
    from mgmt_localsite import lab as lab_mod
    from oslo_config import cfg

    from mgmt_driver.common import conf as kconf
    from mgmt_driver.model import params
    from mgmt_driver.state import localfiles
    conf = cfg.ConfigOpts()
    kconf.register_opts(conf)
    conf([])
    lab = object.__new__(lab_mod.Lab)
    lab.conf = conf
    spec = params.parse_params(localfiles.load_document(
        str(SAMPLES / 'instantiate_simple.json'), 'PARAMS')[
            'additionalParams'], need_cp_names=False)
    drv, _ = lab.driver(spec, 'demo', operation='scale-out')
    assert drv.operation == 'scale_out'


def test_a_second_site_on_the_same_loopback_is_refused(monkeypatch,
                                                       tmp_path):
    """Issue 41: it started beside the first, each site answering for
    the other's nodes.  Refused before anything starts, naming the
    running site (found by its API servers' stand-in)."""
    from mgmt_localsite import greeters
    from mgmt_localsite import kept
    from mgmt_localsite import procs
    first = tmp_path / 'first'
    running = ['python3'] + greeters.argv(
        '/tmp/kmgmt-sshd-x/scratch/site-1', ['127.0.52.221'],
        ['127.0.52.231'], [30001], site=first) + ['']
    monkeypatch.setattr(procs, 'parents', lambda: {4242: 1, 4243: 1})
    monkeypatch.setattr(procs, 'cmdline', lambda pid: running if pid == 4242
                        else ['sshd', '--site', 'x'])
    with pytest.raises(kept.SiteError) as raised:
        kept.up(tmp_path / 'second', loopback='127.0.52')
    assert str(raised.value) == (
        '--loopback 127.0.52: the site in %s is up on these addresses; take '
        'it down first (kubespray-mgmt site down --dir %s) or give another '
        '--loopback; %s is left as it was' % (first, first,
                                              tmp_path / 'second'))
    assert not (tmp_path / 'second').exists()
    assert greeters.holder(['127.0.53.221']) is None


def test_a_site_in_another_network_namespace_holds_other_addresses(
        monkeypatch):
    """Two test runs, each in a network namespace of its own, may keep a
    site on the same loopback block at once: those are not the same
    addresses.  A stand-in whose namespace cannot be read still counts."""
    from mgmt_localsite import greeters
    from mgmt_localsite import procs
    running = ['python3'] + greeters.argv(
        '/tmp/kmgmt-sshd-x/scratch/site-1', ['127.0.52.221'],
        ['127.0.52.231'], [30001], site='/tmp/first') + ['']
    spaces = {'self': 'net:[1]', 4242: 'net:[2]'}
    monkeypatch.setattr(procs, 'parents', lambda: {4242: 1})
    monkeypatch.setattr(procs, 'cmdline', lambda pid: running)
    monkeypatch.setattr(procs, 'netns', spaces.get)
    assert greeters.holder(['127.0.52.221']) is None
    spaces[4242] = 'net:[1]'
    assert greeters.holder(['127.0.52.221']) == '/tmp/first'
    del spaces[4242]
    assert greeters.holder(['127.0.52.221']) == '/tmp/first'


def test_site_up_says_which_addresses_it_took(tmp_path):
    from mgmt_localsite import kept
    text = kept.instructions(tmp_path, kept.addresses('127.0.52', 1, 2))
    assert ('The site took 127.0.52.210 (Ansible server), 127.0.52.211 '
            '(load balancer), 127.0.52.221 (masters) and 127.0.52.231, '
            '127.0.52.232 (workers).') in text.splitlines()
