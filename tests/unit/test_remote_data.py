"""Issue 13 rule 4: what hosts send back is parsed defensively.

Each malformed or hostile answer must give a MgmtDriver* error naming the
host and what was wrong, never a KeyError, TypeError, AttributeError,
RecursionError or UnicodeDecodeError, and never the hostile bytes in bulk.
"""

import pytest
import yaml
from oslo_config import cfg

from mgmt_driver import conf as kconf
from mgmt_driver import exceptions
from mgmt_driver import inventory
from tests.unit.test_driver import ANSIBLE
from tests.unit.test_driver import Harness
from tests.unit.test_driver import _instantiate_params


@pytest.fixture
def conf():
    conf = cfg.ConfigOpts()
    kconf.register_opts(conf)
    conf([])
    conf.set_override('kubectl_sudo', 'never', group='kubespray_mgmt')
    return conf


HOSTS = '/home/ubuntu/kubespray/inventory/mycluster/inst-1/hosts.yaml'
GOOD = {'all': {
    'hosts': {'master-1': {'ansible_host': '192.168.10.11',
                           'ansible_port': 2222},
              'worker-1': {'ansible_host': '192.168.10.21'},
              'worker-2': None},
    'children': {'kube_control_plane': {'hosts': {'master-1': {}}}}}}


def _parse(doc):
    text = doc if isinstance(doc, str) else yaml.safe_dump(doc)
    return inventory.parse_recorded(text, '10.0.0.50', '/ws/hosts.yaml')


def test_recorded_inventory_is_read():
    recorded = _parse(GOOD)
    assert recorded.masters == ('master-1',)
    assert recorded.hosts == (('master-1', '192.168.10.11', 2222),
                              ('worker-1', '192.168.10.21', None),
                              ('worker-2', None, None))


@pytest.mark.parametrize('text', [None, '', '# empty\n', 'all:\n'])
def test_no_recorded_inventory_is_empty(text):
    assert inventory.parse_recorded(text, 'h', 'p') == \
        inventory.RecordedInventory()


@pytest.mark.parametrize('doc, problem', [
    (['all'], '(document) must be a mapping, not list'),
    ('just text', '(document) must be a mapping, not str'),
    ({'all': ['a']}, 'all must be a mapping, not list'),
    ({'all': {'hosts': ['m']}}, 'all.hosts must be a mapping, not list'),
    ({'all': {'hosts': {7: {}}}}, 'all.hosts has a name that is not a'),
    ({'all': {'hosts': {'m': 'x'}}}, "all.hosts['m'] must be a mapping"),
    ({'all': {'hosts': {'m': {'ansible_host': ['a']}}}},
     "all.hosts['m'].ansible_host must be a host address"),
    ({'all': {'hosts': {'m': {'ansible_port': 'ssh'}}}},
     "all.hosts['m'].ansible_port must be a port number"),
    ({'all': {'hosts': {'m': {'ansible_port': True}}}},
     'ansible_port must be a port number'),
    ({'all': {'hosts': {'m': {'ansible_port': 70000}}}},
     'ansible_port must be a port number'),
    ({'all': {'children': []}}, 'all.children must be a mapping'),
    ({'all': {'children': {'kube_control_plane': 'm'}}},
     'all.children.kube_control_plane must be a mapping'),
    ({'all': {'children': {'kube_control_plane': {'hosts': ['m']}}}},
     'all.children.kube_control_plane.hosts must be a mapping'),
    ({'all': {'children': {'kube_control_plane': {'hosts': {'': 1}}}}},
     'kube_control_plane.hosts has a name that is not a string'),
    ('all: &a {hosts: {}}\nother: *a\n', 'not valid YAML at line 1'),
    ('all: {hosts: [}', 'not valid YAML at line 1'),
])
def test_tampered_inventory_is_a_driver_error(doc, problem):
    with pytest.raises(exceptions.RemoteDataInvalid) as info:
        _parse(doc)
    message = str(info.value)
    assert isinstance(info.value, exceptions.MgmtDriverOtherError)
    assert 'inventory /ws/hosts.yaml from 10.0.0.50' in message
    assert problem in message


def test_long_hostile_names_are_not_echoed():
    name = 'x' * 200
    with pytest.raises(exceptions.RemoteDataInvalid) as info:
        _parse({'all': {'hosts': {name: 'not a mapping'}}})
    assert name not in str(info.value) and '...' in str(info.value)


def test_terminate_with_tampered_inventory_names_the_ansible_server(conf):
    h = Harness(conf)
    extra = _instantiate_params()
    extra['k8s_cluster_installation_param']['kubespray'] = {
        'reset_on_terminate': True}
    h.ansible.files[HOSTS] = yaml.safe_dump(['not', 'an', 'inventory'])
    with pytest.raises(exceptions.RemoteDataInvalid) as info:
        h.hooks.terminate_start(None, h.instance(extra), None, None, None)
    assert ANSIBLE in str(info.value) and HOSTS in str(info.value)
