"""mgmt_driver.model.validation: the kit every request check shares."""

import ast
import pathlib

import pytest

from mgmt_driver.common import exceptions
from mgmt_driver.model import validation

PACKAGE = pathlib.Path(validation.__file__).parent


def _raise_invalid(*messages):
    raise exceptions.ParamsInvalid(list(messages))


def test_gathered_keeps_every_check_s_problems_sorted_by_field():
    problems = validation.Problems()
    with problems.gathered():
        _raise_invalid('b.field: is wrong', 'a.field: is: odd')
    with problems.gathered():
        pass  # a check that passes adds nothing
    problems.invalid('c', 'also wrong')
    with pytest.raises(exceptions.ParamsInvalid) as caught:
        problems.raise_if_any()
    assert caught.value.problems == [
        'a.field: is: odd', 'b.field: is wrong', 'c: also wrong']


def test_gathered_missing_fields_stay_missing():
    problems = validation.Problems()
    with problems.gathered():
        raise exceptions.ParamsNotFound(['a: missing'])
    with pytest.raises(exceptions.ParamsNotFound):
        problems.raise_if_any()
    problems.invalid('b', 'is wrong')
    with pytest.raises(exceptions.ParamsInvalid) as caught:
        problems.raise_if_any()
    assert caught.value.problems == ['a: missing', 'b: is wrong']


def test_gathered_lets_other_errors_through():
    problems = validation.Problems()
    with pytest.raises(KeyError), problems.gathered():
        raise KeyError('x')
    assert not problems


@pytest.mark.parametrize('value, ok', [
    ('worker-10-0-0-1', True), ('a', True), ('a' * 63, True),
    ('a' * 64, False), ('-a', False), ('A', False), ('a_b', False),
    ('', False), (None, False), (7, False)])
def test_is_dns_label(value, ok):
    assert validation.is_dns_label(value) is ok


def _package_imports(name):
    """The modules of the package that model module *name* imports."""
    tree = ast.parse((PACKAGE / ('%s.py' % name)).read_text())
    return {alias.name for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and
            node.module.startswith('mgmt_driver.') for alias in node.names}


def test_the_spec_and_the_kit_sit_below_the_request_rules():
    # params, merging and labels build on these two, never the reverse:
    # the spec and the kit import nothing that reads a request.
    assert _package_imports('core') <= {'exceptions'}
    assert _package_imports('validation') <= {'conf', 'exceptions'}
    assert 'merging' not in _package_imports('params')
