"""A number read from a remote answer, a request or a setting is ASCII
digits of a bounded length.

``str.isdigit()`` takes ``'²'`` (and other digits) that ``int()`` then
refuses with a ValueError, and ``int()`` refuses more than 4,300 digits:
each reader below let such a value through to ``int()``, so a hostile
answer ended the hook with a traceback instead of the reader's own
handling (a malformed value dropped, a refusal naming the field).
"""

import pytest
from oslo_config import cfg

from mgmt_driver.adapters import status
from mgmt_driver.common import conf as kconf
from mgmt_driver.common import exceptions
from mgmt_driver.common import untrusted
from mgmt_driver.operations import autoheal
from mgmt_driver.remote import detached
from mgmt_driver.remote import kubespray
from mgmt_driver.remote import loadbalancer
from mgmt_driver.remote import programs
from mgmt_driver.remote import ssh

#: What isdigit() takes and int() refuses.
HOSTILE = ('\u00b2', '1\u00b2', '9' * 5000)
#: An exit status read back: besides those, what int() takes or refuses
#: and no status is (ASCII digits only).
NO_STATUS = HOSTILE + ('', '-1', '+3', '3 3', '\u0663')


def test_whole_number_takes_bounded_ascii_digits_only():
    assert untrusted.whole_number('042', 3) == 42
    for text in HOSTILE + ('', '1234', '-1', ' 1', '\u0663', None):
        assert untrusted.whole_number(text, 3) is None, text


@pytest.mark.parametrize('pid', HOSTILE)
def test_a_run_s_pid_that_is_no_number_is_dropped(pid):
    assert detached.RunInfo.parse(['pid=' + pid, 'operation=heal']).pid \
        is None


@pytest.mark.parametrize('size', HOSTILE)
def test_a_file_whose_size_is_no_number_is_no_file(size):
    assert kubespray._whole_file(size + ':AAAA', 10) is None


@pytest.mark.parametrize('taken', HOSTILE)
def test_a_queue_whose_taken_count_is_no_number_shows_none(taken):
    assert status.parse_queue('KR:TAKEN:%s\n' % taken, '/w')[
        'slots_taken'] is None


@pytest.mark.parametrize('count', HOSTILE)
def test_an_apply_command_whose_check_count_is_no_number_is_none(count):
    argv = programs.command(loadbalancer.APPLY, '/etc/haproxy/haproxy.cfg',
                            '0644', count, 'haproxy', '-c')
    assert loadbalancer.plan_change(argv) is None


@pytest.mark.parametrize('amount', HOSTILE)
def test_an_unhealthy_duration_of_no_number_is_refused_naming_it(amount):
    with pytest.raises(exceptions.ParamsInvalid) as raised:
        autoheal._check_duration(amount + 's')
    assert 'unhealthy_for' in str(raised.value)


@pytest.mark.parametrize('seconds', HOSTILE)
def test_a_hook_deadline_of_no_number_is_refused_naming_it(seconds):
    conf = cfg.ConfigOpts()
    kconf.register_opts(conf)
    conf([], default_config_files=[])
    conf.set_override('hook_deadlines', {'heal_end': seconds},
                      group=kconf.GROUP)
    with pytest.raises(ValueError) as raised:
        kconf.hook_deadline(conf, 'heal_end')
    assert 'hook_deadlines' in str(raised.value)


class Answers:
    """A connection whose every command answers *stdout* with exit
    status *exit_code*."""

    host = '192.0.2.10'

    def __init__(self, stdout, exit_code=0):
        self.stdout, self.exit_code = stdout, exit_code

    def run(self, command, **kwargs):
        return ssh.CommandResult(self.host, 'sh -c ...', self.stdout, '',
                                 self.exit_code)


def _run_end(rc):
    """The :class:`detached.Outcome` of a detached run whose end says
    its exit status is *rc*."""
    conn = Answers('KR:RC:%s\nKR:TAIL\nPLAY RECAP\n' % rc)
    runs = detached.DetachedRuns(conn, '/srv/ws/vnf-1')
    return runs._end('20261123T230501Z-scale_end-scale', 4242, 1e9)


@pytest.mark.parametrize('rc', NO_STATUS + ('123456',))
def test_a_detached_run_whose_exit_status_is_no_number_failed(rc):
    """The reader's own answer to a status it cannot read: 255 (a
    failed run), never a ValueError or a negative status."""
    outcome = _run_end(rc)
    assert (outcome.exit_code, outcome.tail) == (255, 'PLAY RECAP\n')


@pytest.mark.parametrize('rc, code', [('0', 0), ('2', 2), (' 3', 3),
                                      ('3\r', 3), ('124', 124)])
def test_a_detached_run_s_exit_status_is_read(rc, code):
    assert _run_end(rc).exit_code == code


def _refusal(status):
    """The exit status the check's refusal reports when lb-apply's
    check-status mark says *status*."""
    conn = Answers('KL:STEP:check\nKL:CHECKRC:%s\n[ALERT] bad\n'
                   % status, exit_code=loadbalancer._CHECK_REFUSED)
    with pytest.raises(exceptions.LoadBalancerConfigInvalid) as raised:
        loadbalancer.apply_config(conn, 'global\n',
                                  loadbalancer.ApplySettings())
    return raised.value.result.exit_code


@pytest.mark.parametrize('status', NO_STATUS + (' 3', '1000'))
def test_a_check_status_that_is_no_number_is_the_program_s_own(status):
    """lb-apply's own refusal status (90) stands for a check status it
    cannot read, never a ValueError or a negative status."""
    assert _refusal(status) == loadbalancer._CHECK_REFUSED


@pytest.mark.parametrize('status', ['0', '1', '2', '255'])
def test_a_check_status_is_the_check_s(status):
    assert _refusal(status) == int(status)
