"""libyaml writes and reads the inventory as PyYAML's pure-Python code
does (issue 40 item 5): ``inventory.dump_yaml`` and ``safeyaml.load``
use libyaml when PyYAML has it, and a document must not depend on that.
"""

import re

import hypothesis
import pytest
import yaml
from hypothesis import strategies as st

from mgmt_driver.common import safeyaml
from mgmt_driver.model import core
from mgmt_driver.model import nodes
from mgmt_driver.model import params
from mgmt_driver.remote import inventory
from tests.unit import params_data

pytestmark = pytest.mark.skipif(
    getattr(yaml, 'CSafeDumper', None) is None,
    reason='PyYAML without libyaml')
P = core.ROOT
_SURROGATE = re.compile(r'[\ud800-\udfff]|\\u[dD][89a-fA-F]')


def _pure(data):
    return yaml.dump(data, Dumper=inventory._Dumper,
                     default_flow_style=False, sort_keys=False,
                     allow_unicode=True, width=1000)


def _libyaml(data):
    return yaml.dump(data, Dumper=inventory._CDumper,
                     default_flow_style=False, sort_keys=False,
                     allow_unicode=True, width=1000)


def _request():
    request = params_data.minimal()
    root = request[P]
    root['nodes'] = [{'role': 'master', 'ssh_ip': '10.10.0.11'},
                     {'role': 'external_lb', 'ssh_ip': '10.10.0.30'}] + [
        {'role': 'worker', 'ssh_ip': '10.10.0.%d' % i} for i in (21, 22)]
    root['worker_node']['labels'] = {'example.com/tier': 'front-end',
                                     'zone': 'z-1'}
    root['worker_node']['password'] = 'p{{ w }}"\'#: x'
    root['kubespray'] = {'extra_vars': {
        'custom': {'text': 'a long text ' * 200, 'list': [1, 2.5, True,
                                                          None, 'x: y']},
        'multi': 'line one\nline two\n', 'templated': '{{ not run }}',
        'unicode': 'Grüße, 東京', 'quoted': "it's \"so\"",
        'empty': '', 'number_text': '010', 'yes_text': 'yes'}}
    root['proxy'] = {'http_proxy': 'http://u:p@proxy:3128',
                     'https_proxy': 'http://proxy:3128',
                     'no_proxy': 'a.example,b.example'}
    return request


def test_every_inventory_document_is_the_same_from_libyaml():
    spec = params.parse_params(_request(), need_cp_names=False)
    cluster = nodes.nodes_from_spec(spec)
    documents = {
        inventory.HOSTS_FILE: inventory.render_hosts(spec, cluster),
        inventory.CLUSTER_VARS_FILE: inventory.render_cluster_vars(
            spec, cluster),
        inventory.SECRET_VARS_FILE: inventory.render_secret_vars(spec)}
    documents.update(inventory.render_credentials(spec, cluster))
    for name, data in documents.items():
        data = inventory._inert(data)
        assert inventory._libyaml_writes_the_same(data), name
        assert _libyaml(data) == _pure(data), name


def test_render_files_uses_libyaml_and_writes_what_pure_python_does(
        monkeypatch):
    spec = params.parse_params(_request(), need_cp_names=False)
    cluster = nodes.nodes_from_spec(spec)
    fast = inventory.render_files(spec, cluster)
    used, dump = [], yaml.dump
    monkeypatch.setattr(yaml, 'dump', lambda *a, **k: used.append(
        k['Dumper']) or dump(*a, **k))
    inventory.render_files(spec, cluster)
    assert set(used) == {inventory._CDumper}
    monkeypatch.undo()
    monkeypatch.setattr(inventory, '_CDumper', None)
    slow = inventory.render_files(spec, cluster)
    assert fast == slow


_TEXT = st.one_of(
    st.text(alphabet=st.one_of(st.characters(), st.sampled_from(
        ' :-#{}[],?\'"\n\r\t&*!|>%@`')), max_size=40),
    # Long texts with spaces: both fold lines past the width (1000).
    st.lists(st.sampled_from(['a', 'bb', ' ', '  ', '\n', 'x:', '-', 'é',
                              '#', '{', "'", '\t']),
             max_size=1600).map(''.join))
_SCALARS = st.one_of(_TEXT, _TEXT.map(inventory.Unsafe), st.integers(),
                     st.booleans(), st.none(), st.floats(allow_nan=False))
_DATA = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(_TEXT, inner, max_size=4)),
    max_leaves=12)
_DOCUMENTS = st.dictionaries(_TEXT, _DATA, max_size=4)


@hypothesis.settings(max_examples=400, deadline=None, database=None,
                     suppress_health_check=list(hypothesis.HealthCheck))
@hypothesis.given(_DOCUMENTS)
def test_dump_yaml_writes_what_pure_python_does(document):
    # dump_yaml falls back to the pure emitter where libyaml differs;
    # where it does not, libyaml's text is the pure one's.
    assert inventory.dump_yaml(document) == _pure(document)
    if inventory._libyaml_writes_the_same(document):
        assert _libyaml(document) == _pure(document)


@pytest.mark.parametrize('document, why', [
    ({'': 1}, 'empty key'), ({'\r': 1}, 'a key libyaml breaks'),
    ({'k' * 128: 1}, 'a long key'), ({'é' * 65: 1}, 'long in bytes'),
    ({'k': 'smile \U0001F600'}, 'beyond the BMP'), ({'k': 'a\x85b'}, 'NEL'),
])
def test_what_libyaml_writes_otherwise_is_found(document, why):
    assert _libyaml(document) != _pure(document), why
    assert not inventory._libyaml_writes_the_same(document), why
    assert inventory.dump_yaml(document) == _pure(document), why


@hypothesis.settings(max_examples=300, deadline=None, database=None,
                     suppress_health_check=list(hypothesis.HealthCheck))
@hypothesis.given(_DOCUMENTS)
def test_safeyaml_reads_with_libyaml_what_pure_python_reads(document):
    text = inventory.dump_yaml(document)
    # A lone surrogate: no text the driver writes holds one, and libyaml
    # refuses its escape (a YAMLError) where PyYAML reads it.
    hypothesis.assume(not _SURROGATE.search(text))
    assert safeyaml.LOADER is not safeyaml._Loader
    assert yaml.load(text, Loader=safeyaml.LOADER) == yaml.load(
        text, Loader=safeyaml._Loader)


@pytest.mark.parametrize('text, problem', [
    ('a: &x 1\nb: *x\n', 'anchors'), ('a: 1\na: 2\n', 'duplicate key'),
    ('[' * 40 + ']' * 40, 'nested deeper'), ('a: %s\n' % ('1' * 101),
                                             'a number longer'),
])
def test_safeyaml_refuses_with_libyaml_what_it_refuses_without(
        text, problem):
    for loader in (safeyaml.LOADER, safeyaml._Loader):
        with pytest.raises(safeyaml.Refused, match=problem):
            yaml.load(text, Loader=loader)
