"""The [kubespray_mgmt] options."""

import pytest
from oslo_config import cfg

from mgmt_driver.common import conf as kconf


def test_list_opts_names_the_group_and_every_option_has_help():
    [(group, opts)] = kconf.list_opts()
    assert group.name == 'kubespray_mgmt'
    names = {opt.name for opt in opts}
    for name in ('ssh_connect_timeout', 'ssh_connect_retries',
                 'ssh_retry_initial_delay', 'ssh_retry_max_delay',
                 'ssh_command_timeout', 'host_key_policy',
                 'known_hosts_file', 'ssh_private_key_file',
                 'playbook_timeout_base', 'playbook_timeout_per_node',
                 'drain_timeout', 'ansible_forks'):
        assert name in names
    for opt in opts:
        assert opt.help and len(opt.help) > 20, opt.name


def test_numeric_options_are_bounded():
    for opt in kconf.ALL_OPTS:
        if isinstance(opt, (cfg.IntOpt, cfg.FloatOpt)):
            assert opt.type.min is not None, opt.name
            assert opt.type.max is not None, opt.name


def test_out_of_bounds_value_is_refused(tmp_path):
    conf = cfg.ConfigOpts()
    kconf.register_opts(conf)
    path = tmp_path / 'k.conf'
    path.write_text('[kubespray_mgmt]\nansible_forks = 0\n'
                    'host_key_policy = accept-new\n')
    conf([], default_config_files=[str(path)])
    with pytest.raises((cfg.ConfigFileValueError, ValueError)):
        conf.kubespray_mgmt.ansible_forks  # noqa: B018 (reading validates)
    assert conf.kubespray_mgmt.host_key_policy == 'accept-new'


def test_register_twice_is_harmless():
    conf = cfg.ConfigOpts()
    kconf.register_opts(conf)
    kconf.register_opts(conf)
    conf([])
    assert conf.kubespray_mgmt.ssh_connect_timeout == 10


def test_overrides_stay_in_their_config_object():
    first = cfg.ConfigOpts()
    kconf.register_opts(first)
    first([])
    first.set_override('kubectl_sudo', 'never', group=kconf.GROUP)
    second = cfg.ConfigOpts()
    kconf.register_opts(second)
    second([])
    assert first.kubespray_mgmt.kubectl_sudo == 'never'
    assert second.kubespray_mgmt.kubectl_sudo == 'auto'
    assert kconf.CONF.kubespray_mgmt.kubectl_sudo == 'auto'


@pytest.mark.parametrize('setting, user, expected', [
    ('auto', 'ubuntu', True), ('auto', 'root', False),
    ('always', 'root', True), ('never', 'ubuntu', False),
])
def test_use_sudo(setting, user, expected):
    assert kconf.use_sudo(setting, user) is expected
