"""The dry-run plan as an operator reviews it (issue 31, defect 10):
steps in the order they run, modes as 0700, public files shown and
secret ones not, the uploaded inventory and the RBAC manifest shown, and
what would change on each host."""

import contextlib
import io
import json

import pytest
import yaml
from oslo_config import cfg

from mgmt_driver.adapters import cli
from mgmt_driver.remote import plan
from mgmt_driver.remote import ssh
from tests.unit import params_data

PASSWORD = 'N0de-pa55word'
PROXY_PASSWORD = 'pr0xy-s3cret'
TOPOLOGY = {'masters': [{'ssh_ip': '10.10.0.11'}],
            'workers': [{'ssh_ip': '10.10.0.21'}],
            'external_lb': {'ssh_ip': '10.10.0.30'}}


@pytest.fixture(autouse=True)
def fresh_conf():
    yield
    cfg.CONF([], project='kubespray-mgmt', default_config_files=[])


@pytest.fixture(scope='module')
def dry_run(tmp_path_factory):
    """``run instantiate --dry-run`` of a request with a node password
    and a proxy with credentials: ``(text plan, json plan)``."""
    tmp = tmp_path_factory.mktemp('plan')
    document = params_data.minimal()
    root = document['k8s_cluster_installation_param']
    for role in ('master_node', 'worker_node', 'ansible'):
        root[role]['password'] = PASSWORD
    root['external_lb_param']['ssh_password'] = PASSWORD
    root['external_lb_param']['script_path'] = \
        'Scripts/install_external_lb.sh'
    root['proxy'] = {'http_proxy': 'http://user:%s@proxy.invalid:3128'
                                   % PROXY_PASSWORD}
    (tmp / 'p.json').write_text(json.dumps(document))
    (tmp / 't.yaml').write_text(yaml.safe_dump(TOPOLOGY))
    argv = ['run', 'instantiate', '--params', str(tmp / 'p.json'),
            '--topology', str(tmp / 't.yaml'), '--dry-run']
    outputs = []
    for extra in ([], ['--output', 'json']):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert cli.main(argv + extra) == cli.EXIT_OK
        outputs.append(out.getvalue())
    cfg.CONF([], project='kubespray-mgmt', default_config_files=[])
    return outputs[0], json.loads(outputs[1])


def test_no_secret_reaches_either_plan(dry_run):
    text, document = dry_run
    for secret in (PASSWORD, PROXY_PASSWORD, 'ZHJ5LXJ1bg=='):
        assert secret not in text
        assert secret not in json.dumps(document)


def test_the_uploaded_inventory_is_shown(dry_run):
    text, document = dry_run
    assert '> write /opt/kubespray/inventory/c1/kubespray-mgmt/hosts.yaml ' \
           '(mode 0644)\n    all:\n' in text
    writes = {s['text']: s for s in document['steps']
              if s['kind'] == 'write'}
    hosts = writes['/opt/kubespray/inventory/c1/kubespray-mgmt/hosts.yaml']
    assert 'worker-10-10-0-21' in yaml.safe_load(hosts['content'])['all'][
        'hosts']


def test_the_rbac_manifest_is_shown_after_its_apply(dry_run):
    text, document = dry_run
    lines = text.splitlines()
    apply = next(i for i, line in enumerate(lines)
                 if line.startswith('$ ') and 'apply -f -' in line)
    assert lines[apply + 1] == '< standard input of the command above'
    assert '"kind": "ServiceAccount"' in '\n'.join(lines[apply:apply + 20])
    inputs = [s for s in document['steps'] if s['kind'] == 'input']
    assert any('ClusterRoleBinding' in (s['content'] or '') for s in inputs)


def test_modes_are_octal_and_a_public_script_is_not_secret(dry_run):
    text, _ = dry_run
    assert '0o' not in text
    assert '> write .kubespray-mgmt-install-lb.sh (mode 0700)\n' in text
    assert '> write .kube/config (mode 0600): secret, ' in text


def test_steps_keep_their_order_across_hosts(dry_run):
    text, _ = dry_run
    hosts = [line[3:] for line in text.splitlines()
             if line.startswith('== ')]
    # The Ansible server, the LB, the master (RBAC), the LB again (the
    # kubeconfig is written there last).
    assert hosts == ['10.10.0.50', '10.10.0.30', '10.10.0.11', '10.10.0.30']


def test_the_summary_says_what_changes_on_each_host(dry_run):
    text, _ = dry_run
    summary = text[text.index('\nWhat would change:\n'):]
    assert '  10.10.0.50:\n    - program open-workspace\n' \
           '    - program replace-workspace\n' \
           '    - write /opt/kubespray/inventory/c1/' \
           'kubespray-mgmt/hosts.yaml (mode 0644)\n' in summary
    assert '    - run cluster.yml\n' in summary
    assert '    - install /etc/haproxy/haproxy.cfg (mode 0644, if it ' \
           'differs and passes its check), then sudo -n systemctl reload ' \
           'haproxy\n' in summary
    assert 'get secret' not in summary and 'haproxy -c' not in summary
    assert 'program detect-layout' not in summary  # it only reads


def test_a_shell_program_is_shown_by_its_size_not_whole():
    steps = [plan.Step('h', 'run', 'sh -c ...', argv=[
        'sh', '-c', 'set -e\ncd -- "$1"\ntrue\n', 'sh', '/w s'])]
    assert plan.format_plan(steps).splitlines()[1] == \
        "$ sh -c <3-line program: set -e> sh '/w s'"


def test_secrets_of_a_request_and_a_proxy_url():
    from mgmt_driver.model import params
    document = params_data.minimal()
    document['k8s_cluster_installation_param']['proxy'] = {
        'http_proxy': 'http://proxy.invalid:3128',
        'https_proxy': 'http://u:%s@proxy.invalid:3129' % PROXY_PASSWORD}
    secrets = plan.secrets_of(params.parse_params(document,
                                                  need_cp_names=False))
    assert {'m-pass', 'w-pass', 'a-pass', 'lb-pass', PROXY_PASSWORD} <= \
        secrets
    assert not any('proxy.invalid' in s for s in secrets)


def test_a_pool_hides_what_a_login_gave_it():
    pool = plan.PlanPool()
    conn = pool.connection('h', ssh.Credentials('u', password='l0gin-pw'))
    conn.write_file('/x', 'pw: l0gin-pw\n', mode=0o644)
    conn.write_file('/y', 'nothing\n', mode=0o600)
    assert [s.secret for s in pool.steps] == [True, False]
