"""mgmt_driver.remote.programs: shell programs as files, recognised by name."""

import subprocess

import pytest

from mgmt_driver.adapters import doctor
from mgmt_driver.adapters import status
from mgmt_driver.operations import certificates
from mgmt_driver.operations import etcdsnapshots
from mgmt_driver.remote import detached
from mgmt_driver.remote import factcache
from mgmt_driver.remote import kubectl
from mgmt_driver.remote import kubespray
from mgmt_driver.remote import loadbalancer
from mgmt_driver.remote import plan
from mgmt_driver.remote import programs


@pytest.fixture
def scripts(tmp_path, monkeypatch):
    monkeypatch.setattr(programs, 'SCRIPT_DIR', tmp_path)
    programs.program.cache_clear()
    programs.changes_host.cache_clear()
    yield tmp_path
    programs.program.cache_clear()
    programs.changes_host.cache_clear()


def test_a_program_is_sent_without_comments_after_its_name(scripts):
    (scripts / 'say-hi.sh').write_text(
        '#!/bin/sh\n# says hi\n\necho "hi $1"  # to $1\n'
        '  # indented\nexit 0\n')
    sent = programs.program('say-hi')
    assert sent == ('# kubespray-mgmt-script: say-hi\n'
                    'echo "hi $1"  # to $1\nexit 0\n')
    assert programs.name_of(['sh', '-c', sent, 'sh', 'you']) == 'say-hi'
    assert programs.name_of(sent) == 'say-hi'


def test_the_name_not_the_text_is_what_recognises_a_program(scripts):
    (scripts / 'a.sh').write_text('# one comment\ntrue\n')
    first = programs.program('a')
    programs.program.cache_clear()
    (scripts / 'a.sh').write_text('# another comment\ntrue\n')
    assert programs.program('a') == first


@pytest.mark.parametrize('name', ['../etc/passwd', 'A', '', 'a b', '-x'])
def test_only_program_names_are_read(scripts, name):
    with pytest.raises(ValueError):
        programs.program(name)


def test_other_commands_have_no_name():
    assert programs.name_of(['kubectl', 'get', 'nodes']) is None
    assert programs.name_of('echo "# kubespray-mgmt-script: x"') is None
    assert programs.name_of(['sh', '-c', 'true', None]) is None


def test_a_program_takes_shared_functions_from_lib(scripts):
    (scripts / 'lib').mkdir()
    (scripts / 'lib' / 'greet.sh').write_text(
        '#!/bin/sh\n# greet NAME\ngreet() { echo "hi $1"; }\n')
    (scripts / 'say.sh').write_text(
        '#!/bin/sh\n. lib/greet.sh\ngreet "$1"\n')
    sent = programs.program('say')
    assert sent == ('# kubespray-mgmt-script: say\n'
                    'greet() { echo "hi $1"; }\ngreet "$1"\n')
    done = subprocess.run(programs.command('say', 'you'), capture_output=True,
                          text=True, check=True)
    assert done.stdout == 'hi you\n'


SHIPPED = sorted(path.stem for path in programs.SCRIPT_DIR.glob('*.sh'))


@pytest.mark.parametrize('name', SHIPPED)
def test_every_shipped_program_is_sh_that_stands_alone(name):
    path = programs.SCRIPT_DIR / (name + '.sh')
    assert path.read_text().startswith('#!/bin/sh\n')
    sent = programs.program(name)
    assert '. lib/' not in sent
    done = subprocess.run(['sh', '-n', '-c', sent], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr


def test_every_shipped_program_is_sent_by_the_driver():
    # A name without a file, or a file no module sends, is a mistake.
    used = {*detached.PROGRAMS, kubespray.REPLACE, kubespray.DETECT,
            kubespray.OPEN,
            kubespray.SUPPORTED, factcache.PROBE, status._RUNS,
            status._QUEUE,
            certificates.RENEW_PROGRAM, doctor.TOOLS_PROGRAM,
            etcdsnapshots.LIST_PROGRAM, etcdsnapshots.SAVE_PROGRAM,
            loadbalancer.APPLY, kubectl.NODES_PROGRAM, kubectl.DRAIN_PROGRAM,
            'sudo-password'}  # escalation.SCRIPT
    assert used == set(SHIPPED)


# -------------------------------------------------------------- effects --

#: Programs that write, start or stop something on their host: the dry
#: run must list them under "What would change".
WRITERS = {'ensure-workspace', 'open-workspace', 'replace-workspace',
           'remove-workspace', 'lb-apply', 'kubectl-drain',
           'renew-certs', 'etcd-snapshot-save', 'run-start', 'run-stop'}


@pytest.mark.parametrize('name', SHIPPED)
def test_every_shipped_program_declares_whether_it_changes_its_host(name):
    # A new program must choose: an undeclared one raises here.
    assert programs.changes_host(name) in (True, False)


@pytest.mark.parametrize('name', sorted(WRITERS))
def test_a_program_that_writes_is_listed_as_a_change_by_the_dry_run(name):
    step = plan.Step('h', 'run', 'sh -c ...',
                     argv=programs.command(name, '/w'))
    assert plan.summary_lines([step]) == [
        '', 'What would change:', '  h:', '    - program %s' % name]


def test_a_program_that_reads_is_no_change():
    step = plan.Step('h', 'run', 'sh -c ...',
                     argv=programs.command(kubespray.DETECT, '/ks'))
    assert plan.summary_lines([step]) == ['', 'What would change: nothing']


def test_the_dry_run_asks_the_program_not_a_list(scripts):
    (scripts / 'touch-it.sh').write_text(
        '#!/bin/sh\n# kubespray-mgmt-effect: changes\ntouch -- "$1"\n')
    (scripts / 'look.sh').write_text(
        '#!/bin/sh\n# kubespray-mgmt-effect: reads\nls -- "$1"\n')
    steps = [plan.Step('h', 'run', name, argv=programs.command(name, '/x'))
             for name in ('look', 'touch-it')]
    assert plan.summary_lines(steps)[2:] == ['  h:', '    - program touch-it']
    # The declaration is for the driver, not sent.
    assert 'effect' not in programs.program('touch-it')


@pytest.mark.parametrize('text', [
    '#!/bin/sh\ntrue\n',
    '#!/bin/sh\n# kubespray-mgmt-effect: writes\ntrue\n',
    '#!/bin/sh\n# kubespray-mgmt-effect: reads\n'
    '# kubespray-mgmt-effect: changes\ntrue\n'])
def test_a_program_without_one_clear_declaration_is_refused(scripts, text):
    (scripts / 'vague.sh').write_text(text)
    with pytest.raises(ValueError, match='scripts/vague.sh must declare'):
        programs.changes_host('vague')
