"""blockyaml writes what PyYAML writes, byte for byte, or gives up
(issue 40 item 5): every document it accepts, with the options the
inventory and the labels record use."""

import string

import hypothesis
import pytest
import yaml
from hypothesis import strategies as st

from mgmt_driver.common import blockyaml
from mgmt_driver.model import core
from mgmt_driver.model import labels
from mgmt_driver.model import nodes
from mgmt_driver.model import params
from mgmt_driver.remote import inventory
from tests.unit import params_data

#: Strings blockyaml writes, and their neighbours that PyYAML quotes,
#: escapes, folds or resolves otherwise (numbers, booleans, null, dates,
#: sexagesimal numbers, a trailing colon, indicators, spaces, non-ASCII).
_TOKENS = st.from_regex(r'\A[A-Za-z0-9][A-Za-z0-9_./=:-]{0,12}\Z')
_TRICKY = st.sampled_from([
    '', '0', '010', '1_000', '0x1f', '1e3', '1.5', '.inf', '1:20', '-1',
    'true', 'Yes', 'no', 'off', 'null', 'Null', '~', '2024-01-02', '=',
    'a:', 'a: b', 'a b', 'a #b', '#a', '-', '- a', '---', '...', 'a,b',
    '{a}', '[a]', "it's", '"q"', 'é', '\u2028', 'a\nb', ' a', 'a ',
    '*a', '&a', '!a', '%a', '@a', '`a', '|', '>', '?', '?a', 'a?b',
    'x' * 127, 'x' * 128, 'x' * 1200, 'a=b:NoSchedule', '10.0.0.1',
    'fd00::1', 'example.com/zone'])
_STRINGS = st.one_of(_TOKENS, _TOKENS, _TRICKY,
                     st.text(max_size=8), st.text(string.printable,
                                                  max_size=8))
_SCALARS = st.one_of(_STRINGS, st.integers(), st.booleans(), st.none(),
                     st.floats(allow_nan=False),
                     st.builds(inventory.Unsafe, _TOKENS))
_KEYS = st.one_of(_TOKENS, _TOKENS, _TRICKY, st.integers())
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(_SCALARS, max_size=4),
        st.lists(inner, max_size=3),
        st.dictionaries(_KEYS, inner, max_size=4)),
    max_leaves=20)
_DOCUMENTS = st.dictionaries(_KEYS, _VALUES, max_size=5)
#: yaml.dump's options: the inventory's (dump_yaml) and the labels
#: record's (safe_dump's defaults; the record is built sorted).
_OPTIONS = [dict(sort_keys=False, allow_unicode=True, width=1000),
            dict(sort_keys=False)]


def _pyyaml(data, options, dumper=yaml.SafeDumper):
    return yaml.dump(data, Dumper=dumper, default_flow_style=False,
                     **options)


@hypothesis.settings(max_examples=400, deadline=None)
@hypothesis.given(_DOCUMENTS)
def test_what_blockyaml_writes_is_what_pyyaml_writes(document):
    text = blockyaml.dump(document)
    if text is not None:
        for options in _OPTIONS:
            assert text == _pyyaml(document, options)


@hypothesis.settings(max_examples=200, deadline=None)
@hypothesis.given(st.dictionaries(_TOKENS, st.recursive(
    st.one_of(_TOKENS, st.integers(), st.booleans(), st.none()),
    lambda inner: st.one_of(st.lists(_TOKENS, max_size=3),
                            st.dictionaries(_TOKENS, inner, max_size=3)),
    max_leaves=12), min_size=1, max_size=4))
def test_plain_documents_are_written(document):
    # The cases above that blockyaml accepts must not be only a few.
    text = blockyaml.dump(document)
    # (a trailing colon is left to PyYAML: it quotes or not by context)
    plain = all(_written_plain(key) and not key.endswith(':')
                for key in _strings(document))
    assert (text is not None) == plain
    if text is not None:
        assert text == _pyyaml(document, _OPTIONS[0])


def _strings(data):
    if isinstance(data, dict):
        for key, value in data.items():
            yield key
            yield from _strings(value)
    elif isinstance(data, list):
        for item in data:
            yield from _strings(item)
    elif isinstance(data, str):
        yield data


def _written_plain(text):
    """Whether PyYAML writes *text* as it is or single-quoted."""
    return yaml.safe_dump([text], default_flow_style=False) in (
        '- %s\n' % text, "- '%s'\n" % text)


@pytest.mark.parametrize('document', [
    {}, [], {'a': 1.5}, {'a': [[1]]}, {'a': [{'b': 1}]}, {'a': 'b c'},
    {'a': inventory.Unsafe('x')}, {'': 'a'}, {'a': "'"}, {1: 'a'},
    {'x' * 123: 'a'}, {'a': ('b',)}, {'a:': 'b'}, {'a': 'a:'}])
def test_what_blockyaml_leaves_to_pyyaml(document):
    assert blockyaml.dump(document) is None


@pytest.mark.parametrize('document', [
    {'x' * 122: 'a'}, {'a': ''}, {'010': '010'}, {'a': ['', 'true', '1:20']},
    {'null': 'null', 'b': {'Off': 'Yes'}}, {'a': 'x' * 1200}])
def test_what_blockyaml_writes_at_the_edges(document):
    text = blockyaml.dump(document)
    assert text is not None
    for options in _OPTIONS:
        assert text == _pyyaml(document, options)


def test_a_list_or_mapping_given_twice_is_left_to_pyyaml():
    shared, empty = ['a'], {}
    # PyYAML writes an anchor and an alias (&id001, *id001) for these.
    assert '*id001' in yaml.safe_dump({'a': shared, 'b': shared})
    assert blockyaml.dump({'a': shared, 'b': shared}) is None
    assert blockyaml.dump({'a': empty, 'b': {'c': empty}}) is None
    assert blockyaml.dump({'a': ['a'], 'b': ['a']}) is not None


def _large():
    """The spec and nodes of a request of 300 workers with labels and
    taints."""
    request = params_data.minimal()
    root = request[core.ROOT]
    root['nodes'] = [{'role': 'master', 'ssh_ip': '10.30.0.1'},
                     {'role': 'external_lb', 'ssh_ip': '10.30.0.2'}] + [
        {'role': 'worker', 'ssh_ip': '10.30.%d.%d' % (1 + i // 200,
                                                      i % 200)}
        for i in range(300)]
    root['worker_node']['labels'] = {'example.com/tier': 'bench',
                                     'zone': 'z-1', 'n': '010'}
    root['worker_node']['taints'] = ['dedicated=db:NoSchedule']
    spec = params.parse_params(request, need_cp_names=False)
    return spec, nodes.nodes_from_spec(spec)


def test_the_inventory_and_labels_record_are_written_by_blockyaml():
    spec, cluster = _large()
    # (host_vars hold passwords, Unsafe: PyYAML writes them, once for
    # all the nodes of a role)
    hosts = inventory._inert(inventory.render_hosts(spec, cluster))
    settings = {n.name: spec.node_settings(n) for n in cluster.k8s_nodes}
    text = blockyaml.dump(hosts)
    assert text is not None
    assert text == _pyyaml(hosts, _OPTIONS[0], inventory._Dumper)
    record = labels.render_record(settings)
    assert record == yaml.safe_dump(
        {'nodes': {name: {'labels': settings[name].label_map,
                          'taints': list(settings[name].taints)}
                   for name in settings}},
        default_flow_style=False, sort_keys=True)
    assert labels.parse_record(record) == settings
