"""kubespray-mgmt doctor (mgmt_driver.adapters.doctor), the warnings about
config keys oslo.config ignores, $KUBESPRAY_MGMT_CONFIG_FILES and --version."""

import contextlib
import io
import json
import logging
import os

import pytest
from oslo_config import cfg

from mgmt_driver.adapters import cli
from mgmt_driver.adapters import doctor
from mgmt_driver.adapters import v1
from mgmt_driver.common import conf as kconf
from mgmt_driver.model import core
from mgmt_driver.model import nodes
from mgmt_driver.model import params
from tests import fakes
from tests.unit import params_data

TYPO = '[kubespray_mgmt]\nhost_key_polcy = reject\nssh_connect_timeout = 5\n'
ANSIBLE = '10.10.0.50'
LB = '10.10.0.9'


@pytest.fixture(autouse=True)
def fresh_conf():
    yield
    cfg.CONF([], project='kubespray-mgmt', default_config_files=[])


def _main(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


def _conf(tmp_path, text=TYPO, **overrides):
    path = tmp_path / 'k.conf'
    path.write_text(text)
    conf = cfg.ConfigOpts()
    kconf.register_opts(conf)
    conf([], project='kubespray-mgmt', default_config_files=[str(path)])
    for name, value in overrides.items():
        conf.set_override(name, value, group=kconf.GROUP)
    return conf, path


# ------------------------------------------------------ config keys --

def test_a_misspelt_option_is_named_with_the_one_meant(tmp_path):
    conf, path = _conf(tmp_path)
    assert conf.kubespray_mgmt.host_key_policy == 'accept-new'  # lost
    assert kconf.unknown_options(conf) == [
        '%s: [kubespray_mgmt] host_key_polcy: no such option (did you mean '
        'host_key_policy?); it is ignored' % path]


def test_a_misspelt_section_and_a_foreign_one(tmp_path):
    conf, path = _conf(tmp_path, '[kubespray-mgmt]\nhost_key_policy = '
                                 'reject\n[DEFAULT]\ndebug = true\n'
                                 '[keystone_authtoken]\nx = 1\n')
    assert kconf.unknown_options(conf) == [
        '%s: [kubespray-mgmt]: no such section; did you mean '
        '[kubespray_mgmt]? its keys are ignored' % path]
    assert kconf.unknown_options(conf, foreign_sections=True)[1:] == [
        '%s: [keystone_authtoken]: not read by kubespray-mgmt (only '
        '[kubespray_mgmt])' % path]


def test_doctor_reports_the_typo_and_exits_1(tmp_path):
    path = tmp_path / 'k.conf'
    path.write_text(TYPO)
    code, out, err = _main(['--config-file', str(path), 'doctor'])
    assert code == doctor.EXIT_LOCAL, err
    assert ('problem: local: %s: [kubespray_mgmt] host_key_polcy: no such '
            'option (did you mean host_key_policy?)' % path) in out
    assert out.splitlines()[-1] == '1 problem(s), 0 warning(s)'
    assert err == ''  # listed once, as a problem, not also as a warning


def test_doctor_json_has_every_finding(tmp_path):
    path = tmp_path / 'k.conf'
    path.write_text(TYPO)
    code, out, _ = _main(['--config-file', str(path), 'doctor', '--output',
                          'json'])
    report = json.loads(out)
    assert report['exit_code'] == code == 1
    assert {'level', 'where', 'text'} == set(report['findings'][0])
    assert [f['level'] for f in report['findings']].count('problem') == 1


def test_a_clean_config_exits_0(tmp_path):
    path = tmp_path / 'k.conf'
    path.write_text('[kubespray_mgmt]\nhost_key_policy = reject\n')
    code, out, _ = _main(['--config-file', str(path), 'doctor'])
    assert code == 0, out
    assert 'ok: local: configuration: %s' % path in out


def test_other_commands_warn_about_ignored_keys(tmp_path):
    path = tmp_path / 'k.conf'
    path.write_text(TYPO)
    sample = params_data.SAMPLES / 'instantiate_simple.json'
    code, _, err = _main(['--config-file', str(path), 'params', 'check',
                          str(sample)])
    assert code == 0
    assert ('kubespray-mgmt: warning: %s: [kubespray_mgmt] host_key_polcy: '
            'no such option' % path) in err


def test_the_config_file_default_comes_from_the_environment(
        tmp_path, monkeypatch):
    path = tmp_path / 'k.conf'
    path.write_text(TYPO)
    monkeypatch.setenv(cli.CONFIG_ENV, ' %s ,' % path)
    code, out, _ = _main(['doctor'])
    assert code == 1
    assert 'host_key_polcy' in out
    monkeypatch.setenv(cli.CONFIG_ENV, str(tmp_path / 'missing.conf'))
    code, out, _ = _main(['doctor'])  # a finding, as the others
    assert code == 1 and 'missing.conf: no such file' in out


def test_the_driver_warns_at_load(tmp_path, caplog):
    conf, path = _conf(tmp_path)
    with caplog.at_level(logging.WARNING, logger='mgmt_driver.session.driver'):
        v1.LcmHooks(conf=conf, vim_registry=fakes.FakeRegistry())
        v1.LcmHooks(conf=conf, vim_registry=fakes.FakeRegistry())
    warned = [r.getMessage() for r in caplog.records
              if 'host_key_polcy' in r.getMessage()]
    assert warned == ['%s: [kubespray_mgmt] host_key_polcy: no such option '
                      '(did you mean host_key_policy?); it is ignored'
                      % path]  # once a process


def test_version_names_the_package_and_the_checkout():
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exc:
        cli.main(['--version'])
    assert exc.value.code == 0
    text = out.getvalue().strip()
    assert text.startswith('kubespray-mgmt ')
    assert text != 'kubespray-mgmt unknown'
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(
        doctor.__file__)))
    if os.path.exists(os.path.join(checkout, '.git')):
        assert '(git ' in text


# ------------------------------------------------------ directories --

def test_unwritable_and_missing_directories(tmp_path, monkeypatch):
    locked = tmp_path / 'locked'
    locked.mkdir(mode=0o500)
    key = tmp_path / 'key'
    key.write_text('k')
    key.chmod(0o644)
    conf, _ = _conf(tmp_path, '[kubespray_mgmt]\n',
                    kubeconfig_dir=str(locked / 'clusters'),
                    ssh_key_dirs=[str(tmp_path / 'nokeys')],
                    ssh_private_key_file=str(key))
    if os.access(locked, os.W_OK):
        # Root may write anywhere: the account's view, as another user's.
        real_access = os.access
        monkeypatch.setattr(doctor.os, 'access', lambda path, mode: (
            real_access(path, mode) and
            (str(path) != str(locked) or not mode & os.W_OK)))
    lines = [f.line() for f in doctor.check_directories(conf)]
    assert ('problem: local: [kubespray_mgmt] kubeconfig_dir: %s cannot be '
            'created: %s is not writable by this account'
            % (locked / 'clusters', locked)) in lines


def test_key_dirs_and_key_file(tmp_path):
    key = tmp_path / 'key'
    key.write_text('k')
    key.chmod(0o644)
    conf, _ = _conf(tmp_path, '[kubespray_mgmt]\n',
                    ssh_key_dirs=[str(tmp_path / 'nokeys')],
                    ssh_private_key_file=str(key))
    lines = [f.line() for f in doctor.check_directories(conf)]
    assert ('problem: local: [kubespray_mgmt] ssh_key_dirs: %s is not a '
            'directory' % (tmp_path / 'nokeys')) in lines
    assert ('warning: local: [kubespray_mgmt] ssh_private_key_file: %s is '
            'readable by other accounts (mode 0644; want 0600)' % key) in lines


# ----------------------------------------------------------- remote --

def _spec_and_cluster(**kubespray):
    document = params_data.minimal()
    if kubespray:
        document[core.ROOT]['kubespray'] = kubespray
    spec = params.parse_params(document, need_cp_names=False)
    topology = nodes.load_topology({
        'masters': [{'ssh_ip': '10.10.0.11'}], 'workers': [],
        'external_lb': {'ssh_ip': LB}})
    return spec, nodes.build_nodes(spec, topology)


def _server(pool, tools_out, layout_out):
    conn = pool.connection(ANSIBLE)
    conn.script('kubespray-mgmt-script: doctor-tools', stdout=tools_out)
    conn.script('KS:MISSING', stdout=layout_out)
    return conn


_LAYOUT = ('KS:FILE:cluster.yml\nKS:FILE:scale.yml\nKS:FILE:remove-node.yml\n'
           'KS:FILE:playbooks/facts.yml\nKS:SKIP_CONFIRMATION\n'
           'KS:GIT:v2.27.0\nKS:minimal_ansible_version:2.16.4\n'
           'KS:maximal_ansible_version:2.17.0\n')


def test_remote_checks_name_each_missing_tool_and_the_ansible_range(
        tmp_path):
    conf, _ = _conf(tmp_path, '[kubespray_mgmt]\n', haproxy_sudo='auto')
    spec, cluster = _spec_and_cluster(version='2.28')
    pool = fakes.FakePool()
    _server(pool, 'KD:HAVE:flock\nKD:MISSING:setsid\nKD:HAVE:timeout\n'
                  'KD:MISSING:sha256sum\nKD:HAVE:tar\nKD:HAVE:mktemp\n'
                  'KD:HAVE:ansible-playbook\nKD:DONE\n',
            _LAYOUT + 'KS:ANSIBLE:ansible-playbook [core 2.18.1]\n')
    lb = pool.connection(LB)
    lb.script('sudo -n sh -c', stdout='', stderr='sudo: a password is '
              'required', exit_code=1)
    findings = doctor.check_ansible_server(spec, pool, conf) + \
        doctor.check_load_balancers(spec, cluster, pool, conf)
    problems = [f.line() for f in findings if f.level == doctor.PROBLEM]
    assert problems[:2] == [
        'problem: %s: setsid not found on the PATH of ubuntu' % ANSIBLE,
        'problem: %s: sha256sum not found on the PATH of ubuntu' % ANSIBLE]
    assert 'asks for kubespray 2.28' in problems[2]
    assert len(problems) == 4
    assert problems[3] == (
        "problem: %s: the load balancer's commands run under sudo -n, "
        'which failed: sudo -n exited 1: sudo: a password is required' % LB)
    assert doctor.exit_code(findings) == doctor.EXIT_REMOTE


def test_remote_checks_pass_and_say_what_they_found(tmp_path):
    conf, _ = _conf(tmp_path, '[kubespray_mgmt]\n', haproxy_sudo='never')
    spec, cluster = _spec_and_cluster()
    pool = fakes.FakePool()
    _server(pool, ''.join('KD:HAVE:%s\n' % t for t in
                          doctor.ANSIBLE_SERVER_TOOLS + (
                              'ansible-playbook',)) + 'KD:DONE\n',
            _LAYOUT + 'KS:ANSIBLE:ansible-playbook [core 2.16.14]\n')
    pool.connection(LB).script('doctor-tools', stdout='KD:HAVE:haproxy\n'
                                                      'KD:HAVE:cmp\n'
                                                      'KD:DONE\n')
    findings = doctor.check_ansible_server(spec, pool, conf) + \
        doctor.check_load_balancers(spec, cluster, pool, conf)
    assert doctor.exit_code(findings) == doctor.EXIT_OK
    lines = [f.line() for f in findings]
    assert ('ok: %s: ansible-playbook 2.16.14, in the range the checkout '
            'accepts (2.16.4 <= version < 2.17.0)' % ANSIBLE) in lines
    assert ('ok: %s: logged in as ubuntu; haproxy, cmp found without sudo '
            '([kubespray_mgmt] haproxy_sudo)' % LB) in lines
    # No sudo where haproxy_sudo = never; the tools as arguments, quoted.
    assert not any('sudo' in c.split()[0] for c in
                   pool.connection(LB).commands)


def test_a_load_balancer_without_cmp_is_a_problem_naming_it(tmp_path):
    """lb-apply compares each new file with cmp (diffutils): before, the
    doctor asked the gateway for haproxy alone and said all was well."""
    conf, _ = _conf(tmp_path, '[kubespray_mgmt]\n', haproxy_sudo='always')
    spec, cluster = _spec_and_cluster()
    pool = fakes.FakePool()
    lb = pool.connection(LB)
    lb.script('doctor-tools', stdout='KD:HAVE:haproxy\nKD:MISSING:cmp\n'
                                     'KD:DONE\n')
    findings = doctor.check_load_balancers(spec, cluster, pool, conf)
    assert [f.line() for f in findings] == [
        'problem: %s: cmp not found under sudo -n: the driver compares '
        'each new load balancer configuration with the installed one with '
        'it (install diffutils)' % LB]
    assert doctor.exit_code(findings) == doctor.EXIT_REMOTE
    assert lb.commands[0].startswith('sudo -n sh -c ')
    assert lb.commands[0].endswith(' haproxy cmp')


def test_an_ansible_outside_the_checkouts_range_is_a_problem(tmp_path):
    conf, _ = _conf(tmp_path, '[kubespray_mgmt]\n')
    spec, _ = _spec_and_cluster()
    pool = fakes.FakePool()
    _server(pool, 'KD:DONE\n', _LAYOUT +
            'KS:ANSIBLE:ansible-playbook [core 2.18.1]\n')
    problems = [f.text for f in doctor.check_ansible_server(spec, pool, conf)
                if f.level == doctor.PROBLEM]
    assert len(problems) == 8  # every tool missing, and the version
    assert 'accepts Ansible 2.16.4 <= version < 2.17.0' in problems[-1]
    assert '2.18.1' in problems[-1]


def test_exit_codes_add_up():
    local = doctor.Finding(doctor.PROBLEM, doctor.LOCAL, 'x')
    remote = doctor.Finding(doctor.PROBLEM, '10.0.0.1', 'y')
    warning = doctor.Finding(doctor.WARNING, doctor.LOCAL, 'z')
    assert doctor.exit_code([warning]) == 0
    assert doctor.exit_code([local, warning]) == 1
    assert doctor.exit_code([remote]) == 2
    assert doctor.exit_code([remote, local]) == 3
