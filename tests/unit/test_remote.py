"""mgmt_driver.remote: shell programs as files, recognised by name."""

import pytest

from mgmt_driver import remote


@pytest.fixture
def scripts(tmp_path, monkeypatch):
    monkeypatch.setattr(remote, 'SCRIPT_DIR', tmp_path)
    remote.program.cache_clear()
    yield tmp_path
    remote.program.cache_clear()


def test_a_program_is_sent_without_comments_after_its_name(scripts):
    (scripts / 'say-hi.sh').write_text(
        '#!/bin/sh\n# says hi\n\necho "hi $1"  # to $1\n'
        '  # indented\nexit 0\n')
    sent = remote.program('say-hi')
    assert sent == ('# kubespray-mgmt-script: say-hi\n'
                    'echo "hi $1"  # to $1\nexit 0\n')
    assert remote.name_of(['sh', '-c', sent, 'sh', 'you']) == 'say-hi'
    assert remote.name_of(sent) == 'say-hi'


def test_the_name_not_the_text_is_what_recognises_a_program(scripts):
    (scripts / 'a.sh').write_text('# one comment\ntrue\n')
    first = remote.program('a')
    remote.program.cache_clear()
    (scripts / 'a.sh').write_text('# another comment\ntrue\n')
    assert remote.program('a') == first


@pytest.mark.parametrize('name', ['../etc/passwd', 'A', '', 'a b', '-x'])
def test_only_program_names_are_read(scripts, name):
    with pytest.raises(ValueError):
        remote.program(name)


def test_other_commands_have_no_name():
    assert remote.name_of(['kubectl', 'get', 'nodes']) is None
    assert remote.name_of('echo "# kubespray-mgmt-script: x"') is None
    assert remote.name_of(['sh', '-c', 'true', None]) is None
