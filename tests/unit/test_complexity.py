"""Issue 13 rule 3: parsing and rendering stay linear in hostile input.

Correctness-of-complexity tests, not benchmarks: each grows a hostile
input 8-fold and checks that the work (bytecode instructions and calls,
counted by :mod:`tests.unit.work`, never timed) grows linearly, not as
a quadratic algorithm's would.
"""

import ipaddress

import hypothesis
from hypothesis import strategies as st

from mgmt_driver.common import exceptions
from mgmt_driver.common import safeyaml
from mgmt_driver.model import core
from mgmt_driver.model import nodes
from mgmt_driver.model import params
from mgmt_driver.model import validation
from mgmt_driver.remote import inventory
from mgmt_driver.remote import kubespray
from tests.unit import params_data
from tests.unit import work

SETTINGS = hypothesis.settings(max_examples=6, deadline=None,
                               derandomize=True)


# -------------------------------------------------------------- recap --

@SETTINGS
@hypothesis.given(unit=st.text(alphabet='ab1=: !\t', min_size=1,
                               max_size=6))
def test_recap_parse_is_linear_in_line_length(unit):
    def make(n):
        return 'PLAY RECAP ***\nh : a=' + unit * n + '\n'
    assert work.growth(kubespray.parse_recap, make, 2000) < work.MAX_GROWTH


@SETTINGS
@hypothesis.given(unit=st.sampled_from(['1111=', 'a=1 ', 'ok=1' * 3]))
def test_recap_parse_is_linear_in_line_count(unit):
    def make(n):
        return 'PLAY RECAP ***\n' + ('h : a=%s!\n' % (unit * 4)) * n
    assert work.growth(kubespray.parse_recap, make, 500) < work.MAX_GROWTH


# ------------------------------------------------- request + inventory --

def _addresses(count):
    base = int(ipaddress.ip_address('10.20.0.0'))
    return [str(ipaddress.ip_address(base + 10 + i)) for i in range(count)]


def _request(workers=2, extra_vars=None, labels=None):
    request = params_data.minimal()
    root = request[core.ROOT]
    master, lb, *rest = _addresses(workers + 2)
    root['nodes'] = [{'role': 'master', 'ssh_ip': master},
                     {'role': 'external_lb', 'ssh_ip': lb}] + [
        {'role': 'worker', 'ssh_ip': ip} for ip in rest]
    if extra_vars is not None:
        root['kubespray'] = {'extra_vars': extra_vars}
    if labels is not None:
        root['worker_node']['labels'] = labels
    return request


def _parse_and_render(request):
    spec = params.parse_params(request, need_cp_names=False,
                               max_size=64 * 1024 * 1024)
    inventory.render_files(spec, nodes.nodes_from_spec(spec))


def _nested(depth, leaf):
    value = leaf
    for level in range(depth):
        value = {'k%d' % level: [value, level]}
    return value


@SETTINGS
# Each level of _nested is two levels of the request (a mapping, a list).
@hypothesis.given(
    depth=st.integers(0, (validation.MAX_REQUEST_DEPTH - 6) // 2),
    leaf=st.sampled_from(['x' * 50, 12345, True, None, '{{ template }}']))
def test_wide_extra_vars_parse_and_render_linearly(depth, leaf):
    def make(n):
        return _request(extra_vars={'var_%d' % i: _nested(depth, leaf)
                                    for i in range(n)})
    assert work.growth(_parse_and_render, make, 5) < work.MAX_GROWTH


@SETTINGS
@hypothesis.given(length=st.integers(1, 60))
def test_long_strings_and_many_labels_parse_linearly(length):
    def make(n):
        labels = {'example.com/l%d' % i: 'v' * length for i in range(n)}
        return _request(extra_vars={'blob': 'b' * (n * 1000)},
                        labels=labels)
    assert work.growth(_parse_and_render, make, 8) < work.MAX_GROWTH


def test_many_nodes_parse_and_render_linearly():
    assert work.growth(_parse_and_render, lambda n: _request(workers=n),
                       10) < work.MAX_GROWTH


@SETTINGS
@hypothesis.given(kind=st.sampled_from(['deep', 'wide']))
def test_hostile_requests_are_refused_in_linear_time(kind):
    def make(n):
        if kind == 'deep':
            value = 'leaf'
            for _ in range(n):
                value = [value]
        else:
            value = ['x' * 100] * (n * 100)
        return _request(extra_vars={'v': value})

    def refuse(request):
        try:
            params.parse_params(request, need_cp_names=False,
                                max_size=64 * 1024)
        except exceptions.ParamsInvalid:
            return
        raise AssertionError('not refused')
    assert work.growth(refuse, make, 200) < work.MAX_GROWTH


# --------------------------------------------------------------- yaml --

@SETTINGS
@hypothesis.given(style=st.sampled_from(['block', 'flow']))
def test_yaml_documents_load_linearly(style):
    def make(n):
        if style == 'flow':
            return '[' + ', '.join(['{a: [1, "x"]}'] * n) + ']'
        return ''.join('k%d:\n  a: [1, x]\n' % i for i in range(n))
    assert work.growth(safeyaml.load, make, 40) < work.MAX_GROWTH
