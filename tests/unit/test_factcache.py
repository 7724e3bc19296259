"""Facts only where missing or stale (mgmt_driver.remote.factcache)."""

import os
import subprocess
import time

import pytest

from mgmt_driver.common import exceptions
from mgmt_driver.remote import factcache
from mgmt_driver.remote import kubespray
from mgmt_driver.remote import programs
from tests.fakes import FakeConnection

ROOT = '/opt/kubespray'
WS = '/var/lib/kubespray-mgmt/vnf-1'
NOW = 1_800_000_000
DAY = 86400
HEAD = 'FC:TIMEOUT:86400\nFC:NOW:%d\n' % NOW
RECAP_DOWN = ('PLAY RECAP ***\nw1 : ok=0 changed=0 unreachable=1 '
              'failed=0\nw2 : ok=1 changed=0 unreachable=0 failed=0\n')


def entries(**ages):
    return ''.join('FC:ENTRY:%s:%d\n' % (h, NOW - age)
                   for h, age in ages.items())


def make_runner(probe_stdout):
    conn = FakeConnection('ansible')
    conn.script(r'^program:fact-cache-probe ', stdout=probe_stdout)
    layout = kubespray.Layout('playbooks/facts.yml', True, 'v2.31.0')
    return kubespray.Runner(conn, ROOT, layout,
                            kubespray.Workspace(conn, WS))


def facts_runs(runner):
    return [c.split(' --forks 10')[1].strip() for c in runner.conn.commands
            if 'ansible-playbook -i' in c]


# ------------------------------------------------------------------ parse --

def test_parse_reads_timeout_clock_and_entries():
    report = factcache.parse_probe(HEAD + entries(w1=100, w2=DAY - 10))
    assert report.doubts == ()
    assert report.remaining('w1') == DAY - 100
    assert report.remaining('w2') == 10
    assert report.remaining('w3') is None
    assert report.stale(['w1', 'w2', 'w3'], 3600) == ['w2', 'w3']


def test_parse_expired_entry_counts_as_missing():
    report = factcache.parse_probe(HEAD + entries(w1=DAY + 1))
    assert report.remaining('w1') is None
    assert report.stale(['w1'], 0) == ['w1']


def test_margin_is_at_most_half_the_timeout():
    # kubespray <= v2.19: 7200 s; a 3 h margin would refresh everything.
    report = factcache.parse_probe(
        HEAD.replace('86400', '7200') + entries(w1=1000, w2=4000))
    assert report.stale(['w1', 'w2'], 3 * 3600) == ['w2']


def test_timeout_zero_never_expires():
    report = factcache.parse_probe(
        HEAD.replace('TIMEOUT:86400', 'TIMEOUT:0') + entries(w1=10 * DAY))
    assert report.stale(['w1'], 3600) == []


@pytest.mark.parametrize('text, why', [
    (HEAD + 'FC:DOUBT:ANSIBLE_CONFIG\n', 'ANSIBLE_CONFIG'),
    (HEAD + 'FC:DOUBT:environment\n', 'environment'),
    (HEAD.replace('FC:NOW:%d' % NOW, 'FC:NOW:soon'), 'no clock'),
    ('garbage\n' * 3, 'no clock'),
])
def test_doubt_makes_every_host_stale(text, why):
    report = factcache.parse_probe(text + entries(w1=5))
    assert any(why in d for d in report.doubts), report.doubts
    assert report.stale(['w1', 'w2'], 60) == ['w1', 'w2']


def test_parse_ignores_malformed_lines():
    text = HEAD + 'FC:ENTRY:w1:12x\nFC:ENTRY::5\nFC:TIMEOUT:9' + '9' * 40
    report = factcache.parse_probe(text + '\n' + entries(w2=1))
    assert report.entries == {'w2': NOW - 1}
    assert report.timeout == DAY


# ------------------------------------------------------------------ probe --

def _probe_on_a_real_shell(tmp_path, environment=()):
    checkout = tmp_path / 'kubespray'
    shared = tmp_path / 'shared'
    cache = tmp_path / 'ws' / '.ansible' / 'facts'
    checkout.mkdir()
    shared.mkdir()
    cache.mkdir(parents=True)
    (checkout / 'ansible.cfg').write_text(
        '[defaults]\nfact_caching = jsonfile\n'
        'fact_caching_connection = %s\nfact_caching_timeout = 7200\n'
        % shared)
    old = time.time() - 5000
    (cache / 'w1').write_text('{}')
    (cache / 's1_w2').write_text('{}')
    os.utime(cache / 's1_w2', (old, old))
    # Another cluster's fresh entry in the checkout's shared directory.
    (shared / 'w3').write_text('{}')
    env = {k: v for k, v in os.environ.items()
           if not k.startswith('ANSIBLE_')}
    env.update(environment)
    out = subprocess.run(['sh', '-c', programs.program(factcache.PROBE), 'sh',
                          str(checkout), str(cache), 'w1', 'w2', 'w3'],
                         env=env, capture_output=True, text=True,
                         check=True).stdout
    return factcache.parse_probe(out)


def test_probe_reads_the_workspace_cache_not_the_shared_one(tmp_path):
    report = _probe_on_a_real_shell(tmp_path)
    assert report.doubts == ()
    assert report.timeout == 7200
    assert sorted(report.entries) == ['w1', 'w2']
    assert report.stale(['w1', 'w2', 'w3'], 3600) == ['w2', 'w3']


def test_probe_doubts_a_cache_timeout_in_the_environment(tmp_path):
    report = _probe_on_a_real_shell(
        tmp_path, {'ANSIBLE_CACHE_PLUGIN_TIMEOUT': '60'})
    assert report.doubts == ('environment',)


def test_refresh_probes_the_workspace_cache():
    runner = make_runner(HEAD)
    factcache.refresh_facts(runner, ['w1'], 3600)
    probe = runner.conn.commands[0]
    assert probe.split()[-2:] == [WS + '/.ansible/facts', 'w1'], probe


# ---------------------------------------------------------------- refresh --

def test_fresh_cache_runs_no_playbook():
    runner = make_runner(HEAD + entries(m1=60, w1=60, w2=DAY - 7200))
    assert factcache.refresh_facts(runner, ['m1', 'w1', 'w2'], 3600) == []
    assert facts_runs(runner) == []
    assert len(runner.conn.commands) == 1  # the probe


def test_stale_and_missing_hosts_only():
    runner = make_runner(HEAD + entries(m1=60, w1=DAY - 60))
    assert factcache.refresh_facts(runner, ['m1', 'w1', 'w2'], 3600) == [
        'w1', 'w2']
    assert facts_runs(runner) == ['--limit=w1,w2 playbooks/facts.yml']


def test_doubt_refreshes_every_host_without_limit():
    runner = make_runner('')
    assert factcache.refresh_facts(runner, ['m1', 'w1'], 3600) == [
        'm1', 'w1']
    assert facts_runs(runner) == ['playbooks/facts.yml']


def test_no_hosts_no_command():
    runner = make_runner(HEAD)
    assert factcache.refresh_facts(runner, [], 3600) == []
    assert runner.conn.commands == []


def test_unreachable_host_with_a_valid_entry_is_kept():
    # w1 expires in 30 min (inside the margin) and is down.
    runner = make_runner(HEAD + entries(w1=DAY - 1800))
    runner.conn.script(r'--limit=w1,w2 ', stdout=RECAP_DOWN, exit_code=2)
    assert factcache.refresh_facts(runner, ['w1', 'w2'], 3600) == ['w2']
    assert facts_runs(runner) == ['--limit=w1,w2 playbooks/facts.yml',
                                  '--limit=w2 playbooks/facts.yml']


def test_unreachable_host_without_a_valid_entry_is_named():
    runner = make_runner(HEAD + entries(w1=DAY + 5))
    runner.conn.script(r'--limit=w1,w2 ', stdout=RECAP_DOWN, exit_code=2)
    with pytest.raises(exceptions.FactsUnavailable) as info:
        factcache.refresh_facts(runner, ['w1', 'w2'], 3600)
    assert 'w1 unreachable' in str(info.value)
    assert 'w2' not in str(info.value).split('server')[0]
    assert len(facts_runs(runner)) == 1


def test_other_failures_propagate():
    runner = make_runner(HEAD)
    runner.conn.script(r'ansible-playbook', stdout='PLAY RECAP ***\nw1 : '
                       'ok=0 changed=0 unreachable=0 failed=1\n',
                       exit_code=2)
    with pytest.raises(exceptions.PlaybookFailed):
        factcache.refresh_facts(runner, ['w1'], 3600)
