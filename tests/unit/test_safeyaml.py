"""mgmt_driver.common.safeyaml: the one loader for YAML the driver does not
trust."""

import re

import pytest
import yaml

from mgmt_driver.common import exceptions
from mgmt_driver.common import safeyaml
from mgmt_driver.state import localfiles


def _refusal(text):
    with pytest.raises(yaml.YAMLError) as info:
        safeyaml.load(text)
    return safeyaml.describe(info.value)


def test_plain_documents_load():
    assert safeyaml.load('a: [1, 2.5, true, null, "x"]\nb: {c: d}\n') == {
        'a': [1, 2.5, True, None, 'x'], 'b': {'c': 'd'}}
    assert safeyaml.load('{"json": [1, {"k": "v"}]}') == {
        'json': [1, {'k': 'v'}]}


def test_ansible_unsafe_strings_load_as_text():
    assert safeyaml.load("a: !unsafe '{{ x }}'\n") == {'a': '{{ x }}'}


@pytest.mark.parametrize('text, problem', [
    ('a: &x [1]\nb: *x\n', 'anchors'),
    ('a: *x\n', 'aliases'),
    ('base: &b {k: 1}\nc:\n  <<: *b\n', 'anchors'),
    ('a: 1\na: 2\n', "duplicate key 'a'"),
    ('a: 2024-13-45\n', 'cannot be converted'),
    ('a: 1' + ':0' * 200, 'number longer than 100'),
    ('a: ' + '9' * 5000, 'number longer than 100'),
    ('[' * 40 + ']' * 40, 'nested deeper than 32'),
])
def test_hostile_constructs_are_refused(text, problem):
    assert problem in _refusal(text)


def test_billion_laughs_is_refused_at_the_first_anchor():
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += ['l%d: &l%d [%s]' % (i, i, ', '.join(['*l%d' % (i - 1)] * 9))
              for i in range(1, 10)]
    assert 'line 1, column 5: anchors' in _refusal('\n'.join(lines))


def test_deep_nesting_is_refused_not_recursion_error():
    text = '[' * 100000 + ']' * 100000
    # libyaml's scanner, which reads ahead, may refuse it first (at 1,000
    # levels), before the composer counts 33.
    assert re.search('nested deeper|maximum nesting depth', _refusal(text))


def test_too_long_text_is_refused_before_parsing():
    assert 'longer than' in _refusal('#' * (safeyaml.MAX_CHARS + 1))


def test_errors_never_quote_the_text():
    message = _refusal('password: s3cr3t-value\npassword: again\n')
    assert 's3cr3t' not in message and 'again' not in message
    message = _refusal('key: "unterminated s3cr3t-value\n')
    assert 's3cr3t' not in message


def test_unhashable_keys_give_a_yaml_error():
    assert 'unhashable' in _refusal('? [1]\n: 2\n')


def test_command_line_files_use_the_safe_loader(tmp_path):
    path = tmp_path / 'params.yaml'
    path.write_text('a: &x [1]\nb: *x\n')
    with pytest.raises(exceptions.ParamsInvalid) as info:
        localfiles.load_document(path, 'PARAMS')
    assert 'PARAMS file %s: not valid YAML or JSON at line 1' % path in str(
        info.value)
    assert 'anchors' in str(info.value)
