"""mgmt_driver.remote.trust: what a tenant's request may use on the
conductor."""

import os
import subprocess
import threading

import pytest
from oslo_config import cfg

from mgmt_driver.adapters import v1
from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.model import params
from mgmt_driver.remote import ssh
from mgmt_driver.remote import trust
from tests.fakes import FakePool
from tests.unit import params_data

ROOT = core.ROOT


@pytest.fixture(scope='module')
def key_text(tmp_path_factory):
    path = tmp_path_factory.mktemp('keygen') / 'id'
    subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-f',
                    str(path)], check=True)
    return path.read_text()


@pytest.fixture
def dirs(tmp_path, key_text):
    keys, package, outside = (tmp_path / n for n in
                              ('keys', 'package', 'outside'))
    for d in (keys, package / 'Files', outside):
        d.mkdir(parents=True)
    for d in (keys, package / 'Files', outside):
        (d / 'id_ed25519').write_text(key_text)
    return keys, package, outside


def _conf(**options):
    conf = cfg.ConfigOpts()
    kconf.register_opts(conf)
    conf([])
    for name, value in options.items():
        conf.set_override(name, value, group=kconf.GROUP)
    return conf


def _spec(**keys):
    """A request where each given section logs in by *keys* [section]."""
    extra = params_data.minimal()
    root = extra[ROOT]
    for section, path in keys.items():
        for field in ('password', 'ssh_password'):
            root[section].pop(field, None)
        if path is not None:
            root[section]['ssh_key_file'] = path
    return params.parse_params(extra, default_key_file=_DEFAULT[0],
                               need_cp_names=False)


_DEFAULT = [None]


def _apply(spec, keys=None, package=None, trusted=False, **options):
    if keys is not None:
        options['ssh_key_dirs'] = [str(keys)]
    return trust.apply(spec, trust.Policy.from_conf(
        _conf(**options), str(package) if package else None, trusted))


def _refusal(callable_):
    with pytest.raises(exceptions.ParamsInvalid) as info:
        callable_()
    return info.value.problems


def test_a_key_in_an_allowed_directory_is_loaded(dirs, key_text):
    keys, _, _ = dirs
    spec = _apply(_spec(master_node=str(keys / 'id_ed25519')), keys)
    assert spec.master.login.key_text == key_text
    assert ssh.credentials_for(spec.master.login).key_text == key_text
    assert spec.worker.login.key_text is None  # password login


def test_a_relative_key_is_read_from_the_vnf_package(dirs, key_text):
    _, package, _ = dirs
    spec = _apply(_spec(ansible='Files/id_ed25519'), package=package)
    assert spec.ansible.login.key_text == key_text


def test_refusals_look_the_same_whether_the_file_exists_or_not(dirs):
    keys, package, outside = dirs
    problems = []
    for path in (str(outside / 'id_ed25519'), str(outside / 'missing'),
                 '/etc/passwd', '/dev/zero', '/proc/self/environ',
                 str(keys / '..' / 'outside' / 'id_ed25519'), str(keys)):
        spec = _spec(worker_node=path)
        [problem] = _refusal(lambda: _apply(spec, keys, package))  # noqa: B023
        problems.append(problem)
    assert len(set(problems)) == 1, problems
    assert problems[0].startswith(ROOT + '.worker_node.ssh_key_file: ')
    assert 'outside' not in problems[0] and '/etc' not in problems[0]


def test_no_key_directory_means_no_absolute_key_files(dirs):
    keys, _, _ = dirs
    assert _refusal(lambda: _apply(_spec(
        master_node=str(keys / 'id_ed25519'))))


def test_links_out_of_the_directory_are_refused(dirs):
    keys, package, outside = dirs
    (keys / 'link').symlink_to(outside / 'id_ed25519')
    (package / 'Files' / 'link').symlink_to(outside / 'id_ed25519')
    assert _refusal(lambda: _apply(_spec(master_node=str(keys / 'link')),
                                   keys))
    assert _refusal(lambda: _apply(_spec(master_node='Files/link'),
                                   package=package))


def test_a_link_inside_the_directory_is_followed(dirs, key_text):
    keys, _, _ = dirs
    (keys / 'alias').symlink_to(keys / 'id_ed25519')
    spec = _apply(_spec(master_node=str(keys / 'alias')), keys)
    assert spec.master.login.key_text == key_text


def _record_refusal(done, spec, keys):
    done.append(_refusal(lambda: _apply(spec, keys)))


def test_fifos_large_files_and_non_keys_are_refused_without_blocking(dirs):
    keys, _, _ = dirs
    os.mkfifo(keys / 'fifo')
    (keys / 'big').write_bytes(b'-' * (trust.MAX_KEY_BYTES + 1))
    (keys / 'tacker.conf').write_text('[DEFAULT]\npassword = s3cret\n')
    for name in ('fifo', 'big', 'tacker.conf'):
        done = []
        spec = _spec(master_node=str(keys / name))
        worker = threading.Thread(target=_record_refusal,
                                  args=(done, spec, keys))
        worker.start()
        worker.join(10)
        assert done, '%s blocked the conductor' % name
        assert 's3cret' not in done[0][0]


def test_the_cli_may_name_any_key_file(dirs, key_text):
    _, _, outside = dirs
    spec = _apply(_spec(master_node=str(outside / 'id_ed25519')),
                  trusted=True)
    assert spec.master.login.key_text == key_text
    assert _refusal(lambda: _apply(_spec(master_node='/etc/passwd'),
                                   trusted=True))


@pytest.fixture
def default_key(dirs):
    _DEFAULT[0] = str(dirs[2] / 'id_ed25519')
    yield _DEFAULT[0]
    _DEFAULT[0] = None


def test_the_default_key_is_not_copied_to_an_unlisted_ansible_server(
        default_key):
    problems = _refusal(lambda: _apply(_spec(master_node=None,
                                             worker_node=None)))
    assert [p.split(':')[0] for p in problems] == [
        ROOT + '.master_node', ROOT + '.worker_node']
    assert 'default_key_ansible_servers' in problems[0]
    assert '10.10.0.50' in problems[0]


def test_the_default_key_goes_to_a_listed_ansible_server(default_key,
                                                         key_text):
    spec = _apply(_spec(master_node=None, worker_node=None),
                  default_key_ansible_servers=['10.10.0.0/24'])
    assert spec.worker.login.key_text == key_text


def _with_nodes(spec, lb='10.20.0.40'):
    return params.parse_params(
        _nodes_request(spec, lb), default_key_file=_DEFAULT[0],
        need_cp_names=False)


def _nodes_request(sections, lb):
    extra = params_data.minimal()
    root = extra[ROOT]
    for section in sections:
        for field in ('password', 'ssh_password'):
            root[section].pop(field, None)
    root['nodes'] = [{'role': 'master', 'ssh_ip': '10.20.0.11'},
                     {'role': 'worker', 'ssh_ip': '10.20.0.21'},
                     {'role': 'external_lb', 'ssh_ip': lb}]
    return extra


def test_the_default_key_logs_in_to_vms_from_heat_and_listed_servers(
        default_key, key_text):
    # Without nodes, the LB comes from Heat: Tacker created it.  The
    # Ansible server the request names must be listed (either option).
    problems = _refusal(lambda: _apply(_spec(ansible=None,
                                             external_lb_param=None)))
    assert problems == [
        ROOT + '.ansible: gives no password and no ssh_key_file, and the '
        'operator\'s default key may not log in to 10.10.0.50, which the '
        'request names (not in [kubespray_mgmt] default_key_login_hosts '
        'or default_key_ansible_servers)']
    for option in ('default_key_login_hosts', 'default_key_ansible_servers'):
        spec = _apply(_spec(ansible=None, external_lb_param=None),
                      **{option: ['10.10.0.50/32']})
        assert spec.ansible.login.key_text == key_text
        assert spec.external_lb.login.key_text == key_text


def test_the_default_key_does_not_log_in_to_addresses_a_request_names(
        default_key):
    # Issue 27 item 6: nodes naming another tenant's VMs.
    spec = _with_nodes(['external_lb_param'])
    problems = _refusal(lambda: _apply(spec))
    assert problems == [
        ROOT + '.external_lb_param: gives no password and no ssh_key_file, '
        'and the operator\'s default key may not log in to 10.20.0.40, '
        'which the request names (not in [kubespray_mgmt] '
        'default_key_login_hosts)']
    listed = _apply(spec, default_key_login_hosts=['10.20.0.0/24'])
    assert listed.external_lb.login.key_text
    # A listed Ansible server may receive the key; the nodes it would
    # log in to must be listed all the same.
    spec = _with_nodes(['master_node', 'worker_node'])
    problems = _refusal(lambda: _apply(
        spec, default_key_ansible_servers=['10.10.0.50'],
        default_key_login_hosts=['10.20.0.21']))
    assert [p.split(':')[0] for p in problems] == [ROOT + '.master_node']
    assert '10.20.0.11' in problems[0]


def test_a_refusal_names_a_bounded_number_of_addresses(default_key):
    extra = _nodes_request(['worker_node'], '10.20.0.40')
    extra[ROOT]['nodes'] += [{'role': 'worker', 'ssh_ip': '10.30.0.%d' % i}
                             for i in range(1, 200)]
    spec = params.parse_params(extra, default_key_file=_DEFAULT[0],
                               need_cp_names=False)
    [problem] = _refusal(lambda: _apply(
        spec, default_key_ansible_servers=['10.10.0.50']))
    assert 'and 195 more' in problem and len(problem) < 400


def test_the_cli_may_log_in_anywhere_with_the_default_key(default_key):
    spec = _apply(_with_nodes(['external_lb_param', 'ansible']),
                  trusted=True)
    assert spec.external_lb.login.key_text and spec.ansible.login.key_text


def test_hooks_refuse_a_default_key_login_before_any_connection(
        default_key, dirs):
    extra = _nodes_request(['master_node', 'worker_node'], '10.20.0.40')
    pool = FakePool()
    conf = _conf(ssh_private_key_file=default_key,
                 default_key_ansible_servers=['10.10.0.50'])
    hooks = v1.LcmHooks(conf, pool_factory=lambda: pool,
                        package_dir_of=lambda c, i: None)
    instance = type('Instance', (), {'id': 'inst-1', 'vnfd_id': 'v'})()
    request = type('Request', (), {'additional_params': extra})()
    with pytest.raises(exceptions.ParamsInvalid) as info:
        hooks.instantiate_end(None, instance, request, None, None)
    assert 'master_node' in str(info.value)
    assert 'default_key_login_hosts' in str(info.value)
    assert pool.connections == {}


def test_operator_denied_extra_vars_are_refused():
    extra = params_data.minimal()
    extra[ROOT]['kubespray'] = {'extra_vars': {
        'kubeconfig_localhost': True, 'artifacts_dir': '/tmp/x',
        'kube_version': 'v1.31.0'}}
    spec = params.parse_params(extra, need_cp_names=False)
    problems = _refusal(lambda: _apply(spec))
    assert sorted(problems) == [
        ROOT + '.kubespray.extra_vars.%s: not allowed by the operator '
               '([kubespray_mgmt] extra_vars_denied)' % name
        for name in ('artifacts_dir', 'kubeconfig_localhost')]
    only = _refusal(lambda: _apply(spec, extra_vars_denied=[],
                                   extra_vars_allowed=['kube_*']))
    assert len(only) == 2 and 'extra_vars_allowed' in only[0]


def test_hooks_refuse_a_foreign_key_file_before_any_connection(dirs):
    keys, _, _ = dirs
    extra = params_data.minimal()
    extra[ROOT]['master_node']['ssh_key_file'] = '/etc/tacker/tacker.conf'
    extra[ROOT]['nodes'] = [
        {'role': 'master', 'ssh_ip': '10.10.0.11'},
        {'role': 'worker', 'ssh_ip': '10.10.0.21'},
        {'role': 'external_lb', 'ssh_ip': '10.10.0.40'}]
    pool = FakePool()
    hooks = v1.LcmHooks(_conf(ssh_key_dirs=[str(keys)]),
                        pool_factory=lambda: pool,
                        package_dir_of=lambda c, i: None)
    instance = type('Instance', (), {'id': 'inst-1', 'vnfd_id': 'v'})()
    request = type('Request', (), {'additional_params': extra})()
    with pytest.raises(exceptions.ParamsInvalid) as info:
        hooks.instantiate_end(None, instance, request, None, None)
    assert 'master_node.ssh_key_file' in str(info.value)
    assert pool.connections == {}


def test_a_bad_ansible_server_entry_is_an_operator_error():
    # Inside Tacker no command checks the config first: the hook says it.
    with pytest.raises(exceptions.MgmtDriverOtherError) as info:
        trust.Policy.from_conf(_conf(default_key_ansible_servers=[
            '10.0.0.0/8', 'nothost']))
    message = str(info.value)
    assert 'default_key_ansible_servers' in message and 'nothost' in message


def test_kubespray_internal_tables_are_denied_by_default():
    # Issue 27: kubespray loops over these and templates their keys;
    # group_mappings runs first in every playbook (dynamic_groups).
    internal = ('group_mappings', 'sysctl_minimum_values', 'cert_files',
                '_openeuler_metalink_repos')
    extra = params_data.minimal()
    extra[ROOT]['kubespray'] = {'extra_vars': dict.fromkeys(
        internal + ('containerd_base_runtime_specs',), {'k': 'v'})}
    spec = params.parse_params(extra, need_cp_names=False)
    assert sorted(_refusal(lambda: _apply(spec))) == sorted(
        ROOT + '.kubespray.extra_vars.%s: not allowed by the operator '
               '([kubespray_mgmt] extra_vars_denied)' % name
        for name in internal)


# Each rule of trust.py has a test that fails when the rule is weakened:
# a string-prefix containment check, a read that follows a final link,
# a read without the size cap.

def test_a_sibling_directory_sharing_the_prefix_is_outside(dirs):
    """``/x/keys`` allows ``/x/keys/...``, never ``/x/keys-evil/...``:
    containment compares path components, not strings."""
    keys, package, _ = dirs
    for sibling in (keys.parent / (keys.name + '-evil'),
                    package.parent / (package.name + 'x') / 'Files'):
        sibling.mkdir(parents=True)
        (sibling / 'id_ed25519').write_text((keys / 'id_ed25519')
                                            .read_text())
    assert _refusal(lambda: _apply(_spec(
        master_node=str(keys) + '-evil/id_ed25519'), keys))
    assert _refusal(lambda: _apply(_spec(
        master_node='../%sx/Files/id_ed25519' % package.name),
        package=package))


def test_a_file_swapped_for_a_link_after_resolving_is_not_followed(
        dirs, monkeypatch):
    """The race the final-link rule closes: the path resolved inside
    the directory is a link by the time it is opened (to a key outside):
    the open refuses it rather than read through it."""
    keys, _, outside = dirs
    resolve = trust._resolve

    def resolve_then_swap(path, policy):
        real = resolve(path, policy)
        os.unlink(real)
        os.symlink(outside / 'id_ed25519', real)
        return real

    monkeypatch.setattr(trust, '_resolve', resolve_then_swap)
    assert _refusal(lambda: _apply(_spec(
        master_node=str(keys / 'id_ed25519')), keys))


def test_a_link_named_directly_is_not_read(dirs, key_text):
    keys, _, outside = dirs
    (keys / 'link').symlink_to(outside / 'id_ed25519')
    assert trust._read_key(str(outside / 'id_ed25519')) == key_text
    assert trust._read_key(str(keys / 'link')) is None


def test_a_real_key_padded_past_the_cap_is_refused(dirs, key_text):
    """A valid key with trailing blank lines and a comment: accepted up to
    64 KiB, refused one byte past it, though it still parses as a key."""
    keys, _, _ = dirs
    padding = trust.MAX_KEY_BYTES - len(key_text) - len('# x\n')
    (keys / 'at_cap').write_text(key_text + '\n' * padding + '# x\n')
    (keys / 'past_cap').write_text(key_text + '\n' * (padding + 1) +
                                   '# x\n')
    assert os.path.getsize(keys / 'at_cap') == trust.MAX_KEY_BYTES
    spec = _apply(_spec(master_node=str(keys / 'at_cap')), keys)
    assert spec.master.login.key_text.startswith(key_text)
    assert _refusal(lambda: _apply(_spec(
        master_node=str(keys / 'past_cap')), keys))
