"""Text from remote hosts reaches an error message bounded and escaped
(safetext): a master printing megabytes of pod names with newlines and
ESC sequences, a hundred masters each failing with a megabyte of
output, or any exception of the package filled with hostile text."""

import ast
import inspect
import json
import logging
import pathlib
import re

import pytest

from mgmt_driver.common import exceptions
from mgmt_driver.common import safetext
from mgmt_driver.remote import kubectl
from mgmt_driver.remote import ssh
from tests.unit.test_kubectl import DownConnection
from tests.unit.test_kubectl import RecordingConnection
from tests.unit.test_kubectl import make_client

#: A window title, a screen clear, an 8-bit CSI, a right-to-left
#: override, a forged log line after a newline, a NUL and a DEL.
HOSTILE = ('\x1b]0;pwned\x07\x1b[2J\x9b31m\u202e\n2026-11-26 00:00:00 '
           'ERROR forged\r\x00\x7f')
#: What no message may contain (a newline only where the driver joins
#: lines of an output tail).
CONTROL = re.compile('[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e'
                     '\u2066-\u2069]')


def _obeyable(text, newlines=False):
    found = set(CONTROL.findall(text))
    if newlines and '\n' in text:
        found.add('\n')
    return sorted(found)


# ------------------------------------------------------------- safetext --

@pytest.mark.parametrize('text, shown', [
    ('plain text', 'plain text'),
    ('a\nb\tc', 'a\\x0ab\\x09c'),
    ('\x1b]0;t\x07', '\\x1b]0;t\\x07'),
    ('\u202eevil', '\\u202eevil'),
    ('Grüße 日本', 'Grüße 日本'),
])
def test_clip_escapes_a_short_line(text, shown):
    assert safetext.clip(text) == shown


def test_clip_bounds_an_escaped_line_and_keeps_both_ends():
    # Each ESC becomes 4 characters: the bound is on what is shown.
    line = 'start ' + '\x1b' * 100000 + ' end'
    shown = safetext.clip(line, width=1000)
    assert len(shown) <= 1000 + len(' [...] ')
    assert shown.startswith('start \\x1b') and shown.endswith('\\x1b end')
    assert _obeyable(shown) == []


def test_clip_bounds_a_short_line_that_grows_when_escaped():
    # Shorter than the width before escaping, 4 times longer after.
    line = 'a' + '\x1b' * 90 + 'z'
    shown = safetext.clip(line, width=100)
    assert len(shown) <= 100 + len(' [...] ')
    assert shown.startswith('a\\x1b') and shown.endswith('\\x1bz')


def test_clip_never_cuts_an_escape_in_two():
    shown = safetext.clip('\u202e' * 5000, width=100)
    head, tail = shown.split(' [...] ')
    assert re.fullmatch(r'(\\u202e)+', head)
    assert re.fullmatch(r'(\\u202e)+', tail)


def test_clip_list_shows_the_first_items_and_counts_the_rest():
    shown = safetext.clip_list(['a\nb', 'c' * 50, 'd', 'e'], count=2,
                               width=10)
    assert shown == 'a\\x0ab, cc [...] cccccccc, ... and 2 more'
    assert safetext.clip_list([]) == ''


def test_clip_lines_keeps_the_last_lines_each_clipped():
    text = 'one\ntwo\x1b\n' + 'x' * 5000 + '\n'
    shown = safetext.clip_lines(text, lines=2, width=100)
    first, second = shown.split('\n')
    assert first == 'two\\x1b' and len(second) <= 107


def test_the_terminal_printer_keeps_newlines_and_tabs_only(capsys):
    safetext.say('a\tb\n' + HOSTILE)
    out = capsys.readouterr().out
    assert out.startswith('a\tb\n') and _obeyable(out) == ['\t']


# ---------------------------------------------------------- drain timeout

def _hostile_pods(count, name_length):
    """A ``kubectl get pods -o json`` of *count* pods whose names hold
    HOSTILE, padded to *name_length* characters."""
    pad = 'p' * (name_length - len(HOSTILE) - 6)
    return json.dumps({'kind': 'List', 'items': [
        {'metadata': {'name': '%s%s%06d' % (HOSTILE, pad, index),
                      'namespace': 'default'},
         'status': {'phase': 'Running'}} for index in range(count)]})


def test_a_drain_timeout_quotes_a_10_mb_pod_list_bounded_and_escaped():
    client = make_client()
    stdout = _hostile_pods(40000, 250)
    assert len(stdout) > 10 * 1000 * 1000
    client.conn.script(r'get pods', stdout=stdout)
    with pytest.raises(exceptions.WaitTimedOut) as info:
        client.wait_evacuated('worker-1', timeout=1)
    message = str(info.value)
    assert len(message) < (kubectl.SHOWN_PODS + 1) * (
        kubectl.SHOWN_POD_WIDTH + 9) + 200
    assert _obeyable(message, newlines=True) == []
    assert '40000 pod(s) left: default/\\x1b]0;pwned\\x07' in message
    assert message.endswith('... and %d more'
                            % (40000 - kubectl.SHOWN_PODS))


# --------------------------------------------------- no reachable host --

class HostileConnection(RecordingConnection):
    """A master whose kubectl fails with a megabyte of hostile stderr."""

    def __init__(self, host):
        super().__init__(host)
        self.script(r'kubectl', exit_code=1,
                    stderr=(HOSTILE * 20000 + '\n') * 2)


def test_no_reachable_host_among_100_hostile_masters_is_bounded():
    masters = [HostileConnection('10.0.%d.%d' % divmod(i, 250))
               for i in range(100)]
    with pytest.raises(exceptions.NoReachableHost) as info:
        kubectl.first_reachable(masters)
    message = str(info.value)
    assert len(message) < kubectl.SHOWN_HOSTS * (
        kubectl.SHOWN_HOST_WIDTH + 9) + 200
    assert _obeyable(message, newlines=True) == []
    assert message.startswith('No host could run kubectl version '
                              '--client; tried 10.0.0.0 (Command')
    assert message.endswith('... and 95 more')


def test_no_reachable_host_still_names_each_of_a_few_hosts():
    hosts = [DownConnection('10.0.0.%d' % i) for i in range(1, 4)]
    with pytest.raises(exceptions.NoReachableHost) as info:
        kubectl.first_reachable(hosts)
    assert str(info.value).count('(SSH connection to 10.0.0.') == 3


# ------------------------------------- every exception of the package --

BIG = HOSTILE * 50000  # about 1.6 MB


def _result(text=BIG):
    return ssh.CommandResult(host=BIG, command=BIG, stdout=text,
                             stderr=text, exit_code=1)


#: Classes whose constructor is not the template's keywords.
CUSTOM = {
    'RemoteCommandFailed': lambda cls: cls(_result()),
    'RemoteCommandTimedOut': lambda cls: cls(_result(), BIG),
    'DrainBlocked': lambda cls: cls(_result(), BIG, BIG),
    'LoadBalancerConfigInvalid': lambda cls: cls(_result(), BIG, BIG),
    'GatewaysFailed': lambda cls: cls(
        {'g%d' % i: ValueError(BIG) for i in range(50)}, 50),
    'PlaybookFailed': lambda cls: cls(
        BIG, _result(), {BIG: {'failed': 1}}, [BIG] * 50, BIG, log=BIG),
    'ParamsInvalid': lambda cls: cls([BIG] * 60),
    'ParamsNotFound': lambda cls: cls([BIG] * 60),
}


def _classes():
    return sorted((name, cls) for name, cls in vars(exceptions).items()
                  if inspect.isclass(cls) and issubclass(cls, Exception))


def _hostile_instance(name, cls):
    if name in CUSTOM:
        return CUSTOM[name](cls)
    fields = set(re.findall(r'%\((\w+)\)', cls.message))
    return cls(**{field: BIG for field in fields})


@pytest.mark.parametrize('name, cls', _classes())
def test_every_exception_message_is_bounded_and_escaped(name, cls):
    exc = _hostile_instance(name, cls)
    message = str(exc)
    fields = max(len(re.findall(r'%\((\w+)\)', cls.message)), 1)
    assert len(message) <= fields * (exceptions.FIELD_WIDTH + 7) + 1000
    assert _obeyable(message) == []


def test_every_class_with_its_own_constructor_is_tried():
    own = {name for name, cls in _classes()
           if '__init__' in vars(cls) and cls is not exceptions._Bounded}
    assert own - set(CUSTOM) == set()


def test_a_bounded_field_keeps_the_lines_of_a_tail():
    exc = exceptions.RemoteCommandFailed(ssh.CommandResult(
        host='10.0.0.5', command='kubectl drain w1', stdout='',
        stderr='error: one\x1b[8m\nerror: two\n', exit_code=1))
    assert str(exc).endswith('error: one\\x1b[8m\nerror: two')


def test_a_message_given_whole_is_bounded_too():
    exc = exceptions.MgmtDriverParamInvalid(message=BIG)
    assert len(str(exc)) <= exceptions.FIELD_WIDTH + 7
    assert _obeyable(str(exc)) == []


# ------------------------------------------------- playbooks and SSH --

def test_a_playbook_error_lists_at_most_50_failed_hosts():
    from mgmt_driver.remote import kubespray
    recap = {'node-%05d' % i: {'failed': 1} for i in range(10000)}
    result = ssh.CommandResult(host='10.0.0.5', command='ansible-playbook',
                               stdout='', stderr='', exit_code=2)
    exc = exceptions.PlaybookFailed('cluster.yml', result, recap, [],
                                    'tail')
    message = str(exc)
    assert 'node-00049, ... and 9950 more' in message
    assert len(message) < 8000
    assert len(exc.failed_hosts) == 10000
    assert kubespray.LOGGED_LINE_WIDTH <= 1000


def test_playbook_task_lines_reach_the_conductor_log_escaped(caplog):
    from mgmt_driver.remote import kubespray
    progress = kubespray._Progress('10.0.0.5', 'cluster.yml')
    with caplog.at_level('INFO', logger='mgmt_driver.remote.kubespray'):
        progress('TASK [x : ' + HOSTILE + 'y' * 100000 + '] ***')
    logged = caplog.records[-1].getMessage()
    assert _obeyable(logged, newlines=True) == []
    assert len(logged) < kubespray.LOGGED_LINE_WIDTH + 100


def test_an_ssh_banner_quoted_by_paramiko_is_clipped_and_escaped():
    exc = ValueError('Indecipherable protocol version "' + HOSTILE * 1000
                     + '"')
    described = ssh._describe(exc)
    assert _obeyable(described, newlines=True) == []
    assert described.startswith('ValueError: Indecipherable protocol')
    assert len(described) < 600


def _figures():
    """Sizes for the README: ``python -m tests.unit.test_remote_text``."""
    import time
    client = make_client()
    pods = _hostile_pods(40000, 250)
    client.conn.script(r'get pods', stdout=pods)
    start = time.monotonic()
    with pytest.raises(exceptions.WaitTimedOut) as info:
        client.wait_evacuated('worker-1', timeout=1)
    print('drain timeout, a pod list of %d bytes: a message of %d '
          'characters, %.2f s' % (len(pods), len(str(info.value)),
                                  time.monotonic() - start))
    masters = [HostileConnection('10.0.%d.%d' % divmod(i, 250))
               for i in range(100)]
    start = time.monotonic()
    with pytest.raises(exceptions.NoReachableHost) as info:
        kubectl.first_reachable(masters)
    print('no reachable host, 100 masters printing %d bytes each: a '
          'message of %d characters, %.2f s' % (
              len(masters[0]._rules[0]['stderr'].encode()),
              len(str(info.value)), time.monotonic() - start))


if __name__ == '__main__':
    import logging
    logging.disable(logging.WARNING)
    _figures()


# ----------------------------------------------- remote text in logs --
# Issue 39 item 5: the checkout's version and the fact-cache probe's
# doubts reached oslo.log raw (one INFO line of 4.2 MB with escapes).

class _Answering:
    host = '10.0.0.7'

    def __init__(self, stdout):
        self.stdout = stdout

    def run(self, argv, **kwargs):
        return ssh.CommandResult(host=self.host, command=' '.join(argv),
                                 stdout=self.stdout, stderr='', exit_code=0)


def test_the_checkouts_version_is_escaped_where_it_is_read():
    from mgmt_driver.remote import kubespray
    found = kubespray._markers('KS:GIT:v2.31.0' + HOSTILE + 'x' * 10 ** 6)
    assert _obeyable(found['git']) == [] and len(found['git']) < 80


def test_fact_cache_doubts_reach_the_log_bounded_and_escaped(caplog):
    from mgmt_driver.remote import factcache
    stdout = ('FC:DOUBT:' + HOSTILE + '\n') * 100000
    with caplog.at_level('INFO'):
        factcache.probe(_Answering(stdout), '/k', '/c', ['h'])
    lines = [r.getMessage() for r in caplog.records]
    assert lines and all(_obeyable(line) == [] and len(line) < 1000
                         for line in lines)


# ------------------------------- every log line of the package (issue 39)

PACKAGE = pathlib.Path(safetext.__file__).resolve().parents[1]


def test_every_module_logger_bounds_its_arguments():
    """The one way a module gets its logger is safetext.logger: a module
    calling getLogger(__name__) itself would log remote text raw."""
    raw = sorted(str(path.relative_to(PACKAGE)) for path in
                 PACKAGE.rglob('*.py')
                 for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.Call) and
                 getattr(node.func, 'attr', None) == 'getLogger' and
                 any(isinstance(arg, ast.Name) and arg.id == '__name__'
                     for arg in node.args))
    assert raw == []


def test_a_4_mb_remote_line_reaches_the_log_bounded_and_escaped(caplog):
    # Any module's logger: the filter sits on each of them.
    from mgmt_driver.remote import kubespray
    hostile = '\x1b[2J' + 'v' * 4 * 1024 * 1024 + '\x1b]0;owned\x07'
    caplog.set_level(logging.INFO, logger='mgmt_driver.remote.kubespray')
    kubespray.LOG.info('checkout version %s (%d bytes)', hostile,
                       len(hostile))
    message = caplog.records[-1].getMessage()
    assert len(message) < safetext.LINE_WIDTH + 100
    assert '\x1b' not in message and '\\x1b' in message
    assert message.endswith('(%d bytes)' % len(hostile))
