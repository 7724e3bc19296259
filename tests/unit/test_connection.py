"""Every connection and pool class offers the whole declared interface
(mgmt_driver.remote.connection), with signatures its callers can use."""

import inspect

import pytest
from mgmt_localsite import gateways
from mgmt_localsite import haproxy

from mgmt_driver.remote import connection
from mgmt_driver.remote import plan
from mgmt_driver.remote import ssh
from tests import fakes

#: The classes that must offer each protocol (and any subclass of them
#: found among the classes that name the protocol).
IMPLEMENTATIONS = {
    connection.Connection: [ssh.Connection, plan.PlanConnection,
                            haproxy.LocalConnection,
                            gateways.NetnsConnection,
                            fakes.FakeConnection],
    connection.Pool: [ssh.ConnectionPool, plan.PlanPool, fakes.FakePool],
}


def _methods(protocol):
    return sorted(name for name, value in vars(protocol).items()
                  if inspect.isfunction(value)
                  and (not name.startswith('_') or name in (
                      '__enter__', '__exit__')))


def _subclasses(cls):
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub} | _subclasses(sub)
    return found


def _cases():
    for protocol, listed in IMPLEMENTATIONS.items():
        for cls in sorted(set(listed) | _subclasses(protocol),
                          key=lambda c: c.__module__ + '.' + c.__qualname__):
            yield pytest.param(protocol, cls,
                               id='%s-%s' % (protocol.__name__,
                                             cls.__qualname__))


def incompatibilities(protocol, cls):
    """What keeps *cls* from being used where *protocol* is expected:
    a list of sentences, empty when none."""
    problems = []
    if protocol not in cls.__mro__:
        problems.append('does not name %s' % protocol.__name__)
    for name in _methods(protocol):
        wanted = getattr(protocol, name)
        offered = getattr(cls, name, None)
        if offered is None or offered is wanted:
            problems.append('%s: missing' % name)
            continue
        problems += ['%s: %s' % (name, p) for p in _signature_problems(
            inspect.signature(wanted), inspect.signature(offered))]
    return problems


def _signature_problems(wanted, offered):
    """Whether every call *wanted* allows is a call *offered* takes."""
    kinds = inspect.Parameter
    params = list(offered.parameters.values())
    has_kwargs = any(p.kind == kinds.VAR_KEYWORD for p in params)
    has_args = any(p.kind == kinds.VAR_POSITIONAL for p in params)
    positional = [p.name for p in params if p.kind in (
        kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)]
    problems = []
    for index, want in enumerate(wanted.parameters.values()):
        if want.kind in (kinds.VAR_POSITIONAL, kinds.VAR_KEYWORD):
            if not (has_args if want.kind == kinds.VAR_POSITIONAL
                    else has_kwargs):
                problems.append('does not take %s' % want)
            continue
        got = offered.parameters.get(want.name)
        if got is None:
            if not (has_kwargs and want.default is not want.empty):
                problems.append('has no parameter %r' % want.name)
            continue
        if index < len(positional) and positional[index] != want.name \
                and not has_args:
            problems.append('%r is not argument %d' % (want.name, index))
        if want.default is not want.empty and got.default != want.default:
            problems.append('%r defaults to %r, not %r' % (
                want.name, got.default, want.default))
    for got in params:
        if got.name not in wanted.parameters and got.default is got.empty \
                and got.kind not in (kinds.VAR_POSITIONAL,
                                     kinds.VAR_KEYWORD):
            problems.append('needs %r, which callers do not give' % got.name)
    return problems


@pytest.mark.parametrize('protocol, cls', list(_cases()))
def test_every_implementation_offers_the_whole_interface(protocol, cls):
    assert incompatibilities(protocol, cls) == []


def test_a_missing_or_different_method_is_found():
    class Partial(connection.Connection):
        def run(self, command, timeout=None, check=False):
            pass

        def read_file(self, path, missing_ok=False, *, encoding):
            pass

    assert incompatibilities(connection.Connection, Partial) == [
        'close: missing',
        "read_file: needs 'encoding', which callers do not give",
        "run: 'check' defaults to False, not True",
        "run: has no parameter 'env'",
        "run: has no parameter 'stdin'",
        "run: has no parameter 'on_line'",
        "run: has no parameter 'keep_tail'",
        'write_file: missing']


def test_a_stub_fails_loudly():
    class Forgetful(connection.Connection):
        host = 'h'

    with pytest.raises(NotImplementedError):
        Forgetful().close()
