"""Issue 13 rule 4: what hosts send back is parsed defensively.

Each malformed or hostile answer must give a MgmtDriver* error naming the
host and what was wrong, never a KeyError, TypeError, AttributeError,
RecursionError or UnicodeDecodeError, and never the hostile bytes in bulk.
"""

import base64
import json

import pytest
import yaml
from oslo_config import cfg

from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.remote import inventory
from mgmt_driver.remote import kubectl
from tests.fakes import FakeConnection
from tests.unit.test_driver import ANSIBLE
from tests.unit.test_driver import Harness
from tests.unit.test_driver import _instantiate_params


@pytest.fixture
def conf():
    conf = cfg.ConfigOpts()
    kconf.register_opts(conf)
    conf([])
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


# ------------------------------------------------------------- kubectl --

TOKEN = 'eyJhbGciOiJSUzI1NiJ9.c2VjcmV0LXRva2Vu.SIGNATURE-xyz'
PEM = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n'


def _client(command, stdout):
    conn = FakeConnection('10.0.0.11')
    conn.script(command, stdout=stdout)
    return kubectl.KubectlClient(conn, settings=kubectl.KubectlSettings(),
                                 sleep=lambda s: None)


def _b64(data):
    return base64.b64encode(
        data if isinstance(data, bytes) else data.encode()).decode()


@pytest.mark.parametrize('stdout, problem', [
    ('', 'no valid JSON'),
    ('[1, 2]', 'not a JSON object'),
    ('{"items": {"a": 1}}', 'the output.items must be a list, not dict'),
    ('{"items": ["node-1"]}', 'items[0] must be an object, not str'),
    ('{"items": [{"metadata": []}]}',
     'items[0].metadata must be an object, not list'),
    ('{"items": [{"metadata": {}}]}',
     'items[0].metadata.name must be a string, not NoneType'),
    ('{"items": [{"metadata": {"name": 7}}]}',
     'items[0].metadata.name must be a string, not int'),
    ('{"a": ' * 100 + '1' + '}' * 100, 'nested deeper than 64'),
    ('[' * 100000 + ']' * 100000, 'nested deeper than 64'),
    ('{"items": ' + '[' * 70 + ']' * 70 + '}', 'nested deeper than 64'),
])
@pytest.mark.parametrize('method', ['node_names', 'node_list'])
def test_hostile_node_lists(stdout, problem, method):
    client = _client('get nodes', stdout)
    with pytest.raises(exceptions.RemoteDataInvalid) as info:
        getattr(client, method)()
    message = str(info.value)
    assert 'output of kubectl get nodes from 10.0.0.11' in message
    assert problem in message and len(message) < 300


def test_a_node_list_with_a_node_of_odd_fields_keeps_the_names_only():
    stdout = json.dumps({'items': [
        {'metadata': {'name': 'm1'}},
        {'metadata': {'name': 'w1', 'labels': {'a': 1}}}]})
    listed = _client('get nodes', stdout).node_list()
    assert listed == kubectl.NodeList(['m1', 'w1'])
    listed = _client('get nodes', stdout.replace('1}', '"1"}')).node_list()
    assert listed.names == ['m1', 'w1'] and sorted(listed.infos) == [
        'm1', 'w1'] and listed.infos['w1'].labels == {'a': '1'}


def _pods(*pods):
    return json.dumps({'items': list(pods)})


@pytest.mark.parametrize('pod, problem', [
    ({'metadata': {'name': 'p', 'namespace': 3}},
     'items[0].metadata.namespace must be a string'),
    ({'metadata': {'name': 'p', 'ownerReferences': {'kind': 'x'}}},
     'ownerReferences must be a list'),
    ({'metadata': {'name': 'p', 'ownerReferences': ['DaemonSet']}},
     'ownerReferences[] must be an object'),
    ({'metadata': {'name': 'p', 'annotations': ['a']}},
     'annotations must be an object'),
    ({'metadata': {'name': 'p'}, 'status': 'Running'},
     'items[0].status must be an object'),
])
def test_hostile_pod_lists(pod, problem):
    client = _client('get pods', _pods(pod))
    with pytest.raises(exceptions.RemoteDataInvalid) as info:
        client.pods_left('worker-1')
    assert '10.0.0.11' in str(info.value) and problem in str(info.value)


def test_pods_with_optional_fields_absent_or_null_are_fine():
    client = _client('get pods', _pods(
        {'metadata': {'name': 'a', 'namespace': None,
                      'ownerReferences': None}, 'status': None},
        {'metadata': {'name': 'b', 'namespace': 'ns'}}))
    assert client.pods_left('worker-1') == ['/a', 'ns/b']


GOOD_TOKEN = _b64(TOKEN)
GOOD_CA = _b64(PEM)


def _secret(token=GOOD_TOKEN, ca=GOOD_CA):
    return json.dumps({'data': {'token': token, 'ca.crt': ca}})


@pytest.mark.parametrize('stdout, problem', [
    ('{"data": ["x"]}', 'the Secret.data must be an object'),
    ('"just a string"', 'not a JSON object'),
    (_secret(token=12345), 'data.token must be a string, not int'),
    (_secret(token=['a']), 'data.token must be a string, not list'),
    (_secret(token='not base64!'), 'data.token is not base64 of ASCII'),
    (_secret(token='t\u00f6ken'), 'data.token is not base64 of ASCII'),
    (_secret(token=_b64('t\u00f6ken'.encode())),
     'data.token is not base64 of ASCII'),
    (_secret(token=_b64(b'\xff\xfe')), 'data.token is not base64 of ASCII'),
    (_secret(token=_b64(TOKEN + '\nInjected: header')),
     'data.token is not a printable ASCII token'),
    (_secret(token=_b64('x' * 20000)), 'data.token is longer than 16384'),
    (_secret(ca=_b64('not a certificate')),
     'data.ca.crt is not a PEM certificate'),
    (_secret(ca=_b64('\u00e9' + PEM)), 'data.ca.crt is not base64 of ASCII'),
])
def test_hostile_secrets(stdout, problem):
    client = _client('get secret', stdout)
    with pytest.raises(exceptions.RemoteDataInvalid) as info:
        client.admin_credentials(timeout=1)
    message = str(info.value)
    assert 'Secret kube-system/tacker-admin-token from 10.0.0.11' in message
    assert problem in message
    assert TOKEN not in message and _b64(TOKEN) not in message
    assert 'x' * 50 not in message


def test_good_secret_still_gives_credentials():
    client = _client('get secret', _secret())
    creds = client.admin_credentials(timeout=1)
    assert (creds.token, creds.ca_cert) == (TOKEN, PEM)
