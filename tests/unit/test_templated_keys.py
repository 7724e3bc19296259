"""Issue 27 item 1: no Jinja from a request is evaluated, keys included.

Ansible honours ``!unsafe`` on values, but kubespray turns some variables
into items and templates ``item.key`` (``group_mappings`` in the
``dynamic_groups`` role every playbook runs first), so a mapping key from
a request is code.  Requests with a key holding "{" are refused at
validation, at any depth, naming the path but never the key; and
:func:`inventory.check_inert` refuses any rendered document with such a
key or an untagged string with "{" before it can be uploaded.
"""

import dataclasses
import types

import pytest
import yaml

from mgmt_driver.common import exceptions
from mgmt_driver.model import core
from mgmt_driver.model import nodes
from mgmt_driver.model import params
from mgmt_driver.model import validation
from mgmt_driver.remote import inventory
from tests.unit import params_data
from tests.unit import work

P = core.ROOT
EV = P + '.kubespray.extra_vars'
HOSTILE = "{{ lookup('pipe', 'touch /tmp/owned') }}"


def _request(extra_vars):
    request = params_data.minimal()
    request[P]['kubespray'] = {'extra_vars': extra_vars}
    return request


def _problems(extra_vars):
    with pytest.raises(exceptions.ParamsInvalid) as info:
        params.parse_params(_request(extra_vars), need_cp_names=False)
    return info.value.problems


# ------------------------------------------------------------- validation

@pytest.mark.parametrize('extra_vars,where', [
    ({'custom_groups': {HOSTILE: ['kube_node']}},
     'custom_groups (key #1)'),
    ({'a': {'b': {'ok': 1, '{% if x %}y{% endif %}': 2}}},
     'a.b (key #2)'),
    ({'a': [1, {'c': [{'{# c #}': 1}]}]}, 'a[1].c[0] (key #1)'),
    ({'a': {'x{y': 1}}, 'a (key #1)'),
    ({'a': {'b': {'c': {'d': {'e': {'f': {'g': {HOSTILE: None}}}}}}}},
     'a.b.c.d.e.f.g (key #1)'),
])
def test_a_key_holding_a_brace_is_refused_at_any_depth(extra_vars, where):
    problems = _problems(extra_vars)
    assert problems == ['%s.%s: mapping key contains "{": Ansible would '
                        'evaluate it as a Jinja2 template on the Ansible '
                        'server; keys may not contain it (values may)'
                        % (EV, where)]
    # The key itself is never echoed.
    assert 'lookup' not in problems[0] and '%' not in problems[0]


def test_every_templated_key_is_reported_up_to_a_bound():
    hostile = {'k%d{' % index: index for index in range(25)}
    problems = _problems({'good': {'x': 1}, 'bad': hostile})
    assert len(problems) == validation.MAX_KEY_PROBLEMS + 1
    assert problems[0] == EV + '.bad: 15 more mapping keys contain "{"'
    shown = ' '.join(problems)
    assert EV + '.bad (key #10)' in shown and '#11' not in shown


def test_values_with_braces_stay_accepted_and_are_written_unsafe():
    spec = params.parse_params(_request({'custom': {'k': HOSTILE},
                                         'items': [HOSTILE]}),
                               need_cp_names=False)
    files = inventory.render_files(spec, _cluster(spec))
    text = files[inventory.CLUSTER_VARS_FILE].content
    assert text.count('!unsafe') == 2


@pytest.mark.parametrize('name', ['node_labels', 'node_taints'])
def test_per_node_settings_are_not_extra_vars(name):
    assert _problems({name: {}}) == [
        '%s.%s: is set by the driver from %s (master_node, worker_node, '
        'node_pools); set that instead' % (EV, name, name[5:])]


def test_finding_templated_keys_is_linear():
    def make(size):
        return {'k%d' % i: [{'a': {'b': i}}, 'v'] for i in range(size)}

    def check(value):
        assert validation.templated_keys(value, 'x') == ([], 0)

    assert work.growth(check, make, 2000) < \
        work.MAX_GROWTH


# ---------------------------------------------------------- render guard

def _cluster(spec):
    return nodes.build_nodes(spec, [
        core.NodeAddress('master', '10.10.0.11', '10.10.0.11'),
        core.NodeAddress('worker', '10.10.0.21', '10.10.0.21'),
        core.NodeAddress('external_lb', '10.10.0.30', '10.10.0.30')])


def _unchecked(spec, extra_vars):
    """*spec* with extra vars that skipped validation (a bug upstream)."""
    return dataclasses.replace(spec, kubespray=dataclasses.replace(
        spec.kubespray, extra_vars=types.MappingProxyType(extra_vars)))


def test_render_refuses_a_templated_key_that_skipped_validation():
    spec = params.parse_params(params_data.minimal(), need_cp_names=False)
    spec = _unchecked(spec, {'group_mappings': {'kube_node': ['x'],
                                                HOSTILE: ['kube_node']}})
    with pytest.raises(exceptions.TemplatedText) as info:
        inventory.render_files(spec, _cluster(spec))
    assert str(info.value) == (
        'Refusing to upload cluster-vars.yaml: mapping key #2 at '
        'group_mappings holds "{", which Ansible would evaluate as a '
        'Jinja2 template on the Ansible server')


def test_render_refuses_a_templated_recorded_label():
    spec = params.parse_params(params_data.minimal(), need_cp_names=False)
    cluster = _cluster(spec)
    worker = cluster.workers[0]
    settings = {worker.name: core.NodeSettings(labels=((HOSTILE, 'a'),))}
    with pytest.raises(exceptions.TemplatedText) as info:
        inventory.render_files(spec, cluster, settings=settings)
    assert 'hosts.yaml: mapping key #1 at all.hosts.%s.node_labels' % (
        worker.name) in str(info.value)
    assert 'lookup' not in str(info.value)


def test_render_refuses_an_untagged_value(monkeypatch):
    spec = params.parse_params(_request({'custom': [{'k': HOSTILE}]}),
                               need_cp_names=False)
    monkeypatch.setattr(inventory, '_inert', lambda data: data)
    with pytest.raises(exceptions.TemplatedText) as info:
        inventory.render_files(spec, _cluster(spec))
    assert str(info.value).startswith(
        'Refusing to upload cluster-vars.yaml: a string not tagged !unsafe '
        'at custom[0].k holds "{"')


@pytest.mark.parametrize('text,refused', [
    ("a: !unsafe '{{ x }}'\n", None),
    ("a: [1, 'plain', !unsafe '{%']\n", None),
    ("a: '{{ x }}'\n", 'a string not tagged !unsafe at a'),
    ("a: [{b: [x, '{']}]\n", 'a string not tagged !unsafe at a[0].b[1]'),
    ("? !unsafe '{{ x }}'\n: 1\n", 'mapping key #1 at (top)'),
    ("a: {b: 1, '{#': 2}\n", 'mapping key #2 at a'),
    # A key that is not a scalar (the driver never writes one) is read
    # through too, and a document that is a single string.
    ("? [a, '{']\n: 1\n", 'a string not tagged !unsafe at ?[1]'),
    ("'{{ x }}'\n", 'a string not tagged !unsafe at (top)'),
])
def test_check_inert_reads_the_document_as_ansible_does(text, refused):
    if refused is None:
        assert inventory.check_inert('d.yaml', text) == text
        return
    with pytest.raises(exceptions.TemplatedText) as info:
        inventory.check_inert('d.yaml', text)
    assert 'd.yaml: %s holds' % refused in str(info.value)


def test_check_inert_is_linear():
    def make(size):
        return inventory.dump_yaml(inventory._inert(
            {'k%d' % i: {'v': ['{{ x }}', i, 'plain']} for i in range(size)}))

    assert work.growth(
        lambda text: inventory.check_inert('d', text), make, 300) < \
        work.MAX_GROWTH


def test_remove_node_vars_pass_the_guard():
    text = yaml.safe_dump({'node': 'worker-10-10-0-21',
                           'skip_confirmation': True})
    assert inventory.check_inert('remove-node-vars.yaml', text) == text
