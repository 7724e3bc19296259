"""What the progress says while an operation runs (issue 31, defect 13):
each playbook run is named with its limit, its host and its log, and a
worker heal is not called a scale out."""

import pytest
from oslo_config import cfg

from mgmt_driver.common import conf as kconf
from mgmt_driver.model import nodes
from mgmt_driver.model import params
from mgmt_driver.operations import lcm
from mgmt_driver.remote import plan
from mgmt_driver.session import driver
from mgmt_driver.state import localfiles
from mgmt_driver.state import records
from tests.unit import test_cli_run

WORKER = 'worker-10-10-0-22'


def _planning(tmp_path):
    """``(driver, cluster, its progress lines)`` of a dry run."""
    kconf.register_opts(cfg.CONF)
    cfg.CONF([], project='kubespray-mgmt', default_config_files=[])
    document = localfiles.load_document(test_cli_run.PARAMS, 'PARAMS')
    spec = params.parse_params(document['additionalParams'],
                               need_cp_names=False)
    cluster = nodes.build_nodes(spec, nodes.load_topology(
        localfiles.load_document(test_cli_run.TOPOLOGY, 'TOPOLOGY')))
    lines = []
    drv = driver.ClusterDriver(
        spec, 'i1', plan.PlanPool(), progress=lines.append,
        records=plan.PlanRecords(records.RecordStore(str(tmp_path))))
    return drv, cluster, lines


@pytest.fixture
def healed(tmp_path):
    """The progress lines of a (planned) heal of one worker."""
    drv, cluster, lines = _planning(tmp_path)
    lcm.heal_finish(drv, cluster, [WORKER], 'vim',
                    lcm.KubeconfigVims(str(tmp_path),
                                       dry_run=True))
    return lines


def test_a_worker_heal_is_not_called_a_scale_out(healed):
    assert 'heal: joining %s again' % WORKER in healed
    assert not any(line.startswith('scale out') for line in healed)


def test_each_playbook_run_names_its_limit_host_and_log(healed):
    started = [line for line in healed if line.startswith('  running ')]
    assert started[-1].startswith(
        '  running scale.yml on 10.10.0.50: --limit=%s (timeout ' % WORKER)
    after = healed[healed.index(started[-1]) + 1]
    assert after.startswith('  log: /home/ubuntu/kubespray/inventory/'
                            'mycluster/i1/logs/') and \
        after.endswith('.log on 10.10.0.50')


def test_the_doubles_hook_task_does_not_read_like_a_failure():
    import pathlib

    from mgmt_localsite import site
    tasks = pathlib.Path(site.__file__).parent / 'kubespray' / 'roles' / \
        'remove_node' / 'post_remove' / 'tasks' / 'main.yml'
    names = [line.split('name:', 1)[1].strip()
             for line in tasks.read_text().splitlines()
             if line.lstrip('- ').startswith('name:')]
    assert names and not any(name.split('|')[-1].strip().startswith(
        'Failure') for name in names)


def test_a_join_of_no_worker_says_so(tmp_path):
    """Issue 41, low item: "heal: joining nothing again"."""
    from mgmt_driver.operations import membership
    drv, cluster, lines = _planning(tmp_path)
    membership.scale_out(drv, cluster, [], purpose='heal')
    assert lines[0] == 'heal: no worker to join again'
    del lines[:]
    membership.remove_workers(drv, cluster, [])
    assert lines[0] == 'no node to remove'
    assert not any('nothing' in line for line in lines)
