"""The one reader of untrusted JSON and YAML: bounded in what it builds,
and the only parser the package calls."""

import ast
import pathlib
import tracemalloc

import pytest
import yaml

from mgmt_driver.common import safeyaml
from mgmt_driver.common import untrusted
from mgmt_driver.model import labels
from mgmt_driver.operations import certificates
from mgmt_driver.operations import gates
from mgmt_driver.operations import upgrade
from mgmt_driver.remote import inventory
from mgmt_driver.remote import kubectl
from mgmt_driver.state import records

PACKAGE = pathlib.Path(untrusted.__file__).parent
MIB = 1024 * 1024
#: Peak memory a reader may use, as a multiple of its text, plus a
#: constant for the entries every document may hold (MIN_ENTRIES).
#: Measured worst shape: about 7x (one-key objects), see
#: benchmarks/hostile_readers.py.
MULTIPLE = 8
CONSTANT = MIB
#: The same for the readers of the records the driver writes itself
#: (untrusted.RECORD_TEXT_PER_ENTRY, about three times as dense):
#: measured worst 17.4x (one-key mappings of two-character values),
#: of at most 2 MiB of text.
RECORD_MULTIPLE = 20

#: Modules (or a module's one call) that may call a parser themselves,
#: with the reason.
ALLOWED = {
    'untrusted.py': 'the one reader',
    'inventory.py: yaml.parse': 'reads the events of a document the '
                                'driver rendered itself, building nothing',
    'safeyaml.py': 'the YAML half of the one reader (untrusted calls it)',
    'csar.py': "the operator's build tool: package sources and packages "
               'it built itself, on its own machine, never in the '
               'conductor (Tacker parses the package again)',
}
#: The simulated site's doubles run on the simulated hosts (they are
#: the remote side), not in the conductor.
ALLOWED_DIRS = ('localsite',)
_PARSERS = {('json', 'loads'), ('json', 'load'), ('yaml', 'load'),
            ('yaml', 'safe_load'), ('yaml', 'safe_load_all'),
            ('yaml', 'load_all'), ('yaml', 'full_load'),
            ('yaml', 'unsafe_load'), ('yaml', 'compose'),
            ('yaml', 'parse'), ('safeyaml', 'load'),
            ('json', 'JSONDecoder')}


def _parser_calls(path):
    """``['line: module.function']`` of each parser *path* names."""
    tree = ast.parse(path.read_text(encoding='utf-8'))
    return ['%d: %s.%s' % (node.lineno, node.value.id, node.attr)
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and
            isinstance(node.value, ast.Name) and
            (node.value.id, node.attr) in _PARSERS]


def test_only_the_reader_parses():
    found = []
    for path in sorted(PACKAGE.rglob('*.py')):
        relative = path.relative_to(PACKAGE)
        if str(relative) in ALLOWED or relative.parts[0] in ALLOWED_DIRS:
            continue
        found += ['%s:%s' % (relative, call) for call in _parser_calls(path)
                  if '%s: %s' % (relative, call.split(' ')[1]) not in ALLOWED]
    assert found == [], \
        'parse untrusted text with mgmt_driver.common.untrusted'


def test_the_guard_sees_a_parser(tmp_path):
    # The guard above must be able to fail.
    probe = tmp_path / 'probe.py'
    probe.write_text('import json\njson.loads("{}")\n'
                     'data = yaml.safe_load(x)\nsafeyaml.load(y)\n')
    assert _parser_calls(probe) == ['2: json.loads', '3: yaml.safe_load',
                                    '4: safeyaml.load']


def _peak(read, text):
    """Peak bytes allocated by ``read(text)`` (the text excluded)."""
    tracemalloc.start()
    try:
        try:
            read(text)
        except Exception:  # noqa: BLE001 -- refusals are measured too
            pass
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _hostile(unit, length):
    """``[unit,unit,...]`` of about *length* characters."""
    return '[' + ','.join([unit] * (length // (len(unit) + 1))) + ']'


def _filled(unit, per, length, per_entry=untrusted.TEXT_PER_ENTRY):
    """``[unit,...]`` holding as many entries as the budget of a text
    of *length* allows, padded to *length*: the most a reader builds."""
    count = (untrusted.entry_budget('x' * length, per_entry) - 2) // per
    body = '[' + ','.join([unit] * count) + ']'
    return body + ' ' * max(0, length - len(body))


def _kubectl(text):
    with kubectl.parsing('10.0.0.1', 'output'):
        kubectl.load_json(text)


def _hosts_yaml(text):
    inventory.parse_recorded(text, '10.0.0.1', 'hosts.yaml')


READERS = {
    'kubectl JSON': _kubectl,
    'etcdctl JSON': lambda text: gates.parse_etcd_health(text, '10.0.0.1'),
    'certificate renewal record': certificates.parse_record,
    'instance record': lambda text: records.InstanceRecord.from_json(
        'i', text),
    'cordon record': upgrade.parse_cordons,
    'hosts.yaml': _hosts_yaml,
    'labels record': labels.parse_record,
    'YAML': untrusted.load_yaml,
}
#: The readers given untrusted.RECORD_TEXT_PER_ENTRY.
RECORD_READERS = ('hosts.yaml', 'labels record')
SHAPES = [('{}', 2), ('[]', 2), ('{"a":0}', 2), ('"ab"', 1), ('1e9', 1)]


@pytest.mark.parametrize('reader', sorted(READERS))
def test_hostile_input_is_refused_within_a_multiple(reader):
    # [{},{},...]: before, 50 bytes of dicts per byte of text (790 MB
    # for 16 MiB), for YAML 350 (730 MB for 2 MiB).
    text = _hostile('{}', MIB // 2 if 'YAML' in reader or 'yaml' in reader
                    or reader in RECORD_READERS else MIB)
    multiple = RECORD_MULTIPLE if reader in RECORD_READERS else MULTIPLE
    assert _peak(READERS[reader], text) < multiple * len(text) + CONSTANT


@pytest.mark.parametrize('unit,per', SHAPES)
def test_the_most_a_json_document_builds_is_a_multiple(unit, per):
    text = _filled(unit, per, MIB)
    assert untrusted.load_json(text) is not None
    assert _peak(untrusted.load_json, text) < \
        MULTIPLE * len(text) + CONSTANT


@pytest.mark.parametrize('unit,per', [('{}', 1), ('a', 1), ('{a: 0}', 3)])
def test_the_most_a_yaml_document_builds_is_a_multiple(unit, per):
    text = _filled(unit, per, MIB // 4)
    assert untrusted.load_yaml(text) is not None
    assert _peak(untrusted.load_yaml, text) < \
        MULTIPLE * len(text) + CONSTANT


@pytest.mark.parametrize('unit,per', [('{}', 1), ('a', 1), ('ab', 1),
                                      ('{a: ab}', 3), ('[]', 1)])
def test_the_most_a_record_builds_is_a_multiple(unit, per):
    text = _filled(unit, per, MIB // 4, untrusted.RECORD_TEXT_PER_ENTRY)

    def read(text):
        return untrusted.load_yaml(
            text, per_entry=untrusted.RECORD_TEXT_PER_ENTRY)

    assert read(text) is not None
    end, extra = text.rindex(']'), (',' + unit) * 2  # too many, as long
    with pytest.raises(safeyaml.Refused, match='more than'):
        read(text[:end] + extra + text[end:len(text) - len(extra)])
    assert _peak(read, text) < RECORD_MULTIPLE * len(text) + CONSTANT


@pytest.mark.parametrize('text', ['[' * 65 + ']' * 65,
                                  '{"a":' * 65 + '0' + '}' * 65])
def test_json_deeper_than_the_limit_is_refused(text):
    with pytest.raises(untrusted.Refused, match='deeper than 64 levels'):
        untrusted.load_json(text)


def test_json_at_the_limit_is_read():
    assert untrusted.load_json('[' * 64 + ']' * 64) is not None


def test_brackets_and_commas_in_strings_are_not_counted():
    text = '{"a": "%s", "b": "\\"[{,"}' % ('[{,' * 100000)
    assert untrusted.load_json(text)['b'] == '"[{,'


def test_a_refusal_names_the_bound_never_the_text():
    secret = 'tok' + 'en' * 10
    with pytest.raises(untrusted.Refused) as caught:
        untrusted.load_json('["%s",%s]' % (secret, '[],' * 10000))
    assert 'entries' in str(caught.value) and secret not in str(caught.value)
    with pytest.raises(untrusted.Refused, match='line 1, column 2'):
        untrusted.load_json('[%s' % secret)


def test_kubectl_names_the_host():
    with pytest.raises(Exception) as caught:
        _kubectl(_hostile('{}', 300000))
    assert '10.0.0.1' in str(caught.value)
    assert 'more than' in str(caught.value)


def test_a_nested_certificate_record_is_a_value_error():
    # Before: RecursionError, which the renewal did not catch.
    with pytest.raises(ValueError, match='deeper'):
        certificates.parse_record('[' * 100000)


@pytest.mark.parametrize('text', [
    '', 'a: 1', '[1, [2, {b: c}]]', 'x', '- a\n- b: [c]\n',
    'a: !unsafe x\nb: 2024-01-01\nc: 1.5\nd: null\ne: yes\nf: "1"\n'])
def test_yaml_means_what_safeyaml_meant(text):
    assert untrusted.load_yaml(text) == safeyaml.load(text)


@pytest.mark.parametrize('text,problem', [
    ('a: 1\na: 2', 'duplicate key'), ('&x a', 'anchors'),
    ('*x', 'aliases'), ('[1]\n---\n[2]', 'more than one document'),
    ('!!set {a}', 'tags on a list'), ('? [a]\n: b', 'a key is a list'),
    ('a: ' + '1' * 200, 'a number longer'),
    ('[' * 33 + ']' * 33, 'deeper than 32'),
    ('[' + '{},' * 30000 + ']', 'nodes for')])
def test_yaml_refusals(text, problem):
    with pytest.raises(yaml.YAMLError) as caught:
        untrusted.load_yaml(text)
    assert problem in safeyaml.describe(caught.value)


def test_a_record_read_back_is_refused_as_a_value_error():
    """One helper for the parsers of workspace records (certificates'
    renewal record, upgrade's cordons), not a copy in each."""
    for parse in (certificates.parse_record, upgrade.parse_cordons,
                  untrusted.load_record):
        with pytest.raises(ValueError, match=r'^not JSON \(') as caught:
            parse('{"a": ' * 100 + '1' + '}' * 100)
        assert type(caught.value) is ValueError


def test_kubectl_load_json_takes_the_expected_kind():
    assert kubectl.load_json('[1]', list) == [1]
    with pytest.raises(kubectl.BadShape, match='not a JSON list'):
        kubectl.load_json('{}', list)
    with pytest.raises(kubectl.BadShape, match='not a JSON object'):
        kubectl.load_json('[]')
