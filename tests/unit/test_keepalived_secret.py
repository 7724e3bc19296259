"""The VRRP password stays out of what ``keepalived -t`` prints, through
the path the driver takes (:func:`keepalived.configure_gateways`, which
must hand the password to the check as a secret), not only when a test
passes the secret to :func:`loadbalancer.apply_config` itself."""

import logging

import pytest

from mgmt_driver.common import exceptions
from mgmt_driver.remote import keepalived
from tests.fakes import FakeConnection
from tests.unit.test_keepalived import GATEWAYS
from tests.unit.test_keepalived import HAPROXY_SETTINGS
from tests.unit.test_keepalived import HAPROXY_TEXT
from tests.unit.test_keepalived import KA_SETTINGS
from tests.unit.test_keepalived import PASSWORD
from tests.unit.test_keepalived import layouts


def test_keepalived_check_output_never_shows_the_vrrp_password(caplog):
    caplog.set_level(logging.DEBUG)
    conns = {name: FakeConnection(name) for name, _ in GATEWAYS}
    # keepalived -t quotes the offending line, password included.
    conns['gw-b'].script('^keepalived -t', exit_code=1, stderr=(
        "(Line 12) Unknown keyword 'auth_pass %s'\n" % PASSWORD))
    with pytest.raises(exceptions.GatewaysFailed) as err:
        keepalived.configure_gateways(conns, HAPROXY_TEXT, layouts(),
                                      HAPROXY_SETTINGS, KA_SETTINGS)
    message = str(err.value)
    assert 'gw-b' in message and "Unknown keyword 'auth_pass ***'" in message
    assert PASSWORD not in message
    assert PASSWORD not in caplog.text
