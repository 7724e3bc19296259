"""Highly available gateways: real HAProxy and keepalived in namespaces.

Two gateways (network namespaces this test creates, on a bridge inside a
LAN namespace it creates too; TEST-NET-1 addresses only) are configured by
the driver's own steps
(:func:`mgmt_driver.remote.keepalived.configure_gateways` over ``ip netns
exec``).  The test stops the MASTER gateway's HAProxy, then deletes its
namespace, and shows that the API port and a NodePort stay reachable through
the VIP; it rebuilds the gateway, shows it rejoins the VRRP group as BACKUP,
and finally loses the other gateway to show the rebuilt one takes the VIP over.
Failover times are printed (``-s``) and recorded in ``benchmarks/README.rst``,
never asserted.
"""

import os
import stat
import subprocess
import time

import pytest
from mgmt_localsite import gateways
from mgmt_localsite import haproxy as site_haproxy

from mgmt_driver.common import exceptions
from mgmt_driver.remote import keepalived

API = ('master-1', gateways.APISERVER_PORT)
NODEPORT = ('worker-1', gateways.NODEPORT)
GW1, GW2 = ('gw-1', '192.0.2.11'), ('gw-2', '192.0.2.12')
GW3 = ('gw-3', '192.0.2.13')
# keepalived's master-down interval is 3 adverts (1 s) plus a skew; a
# failover waits at most this long, a bound (not waited out when all
# goes well) for a loaded 2-core machine: 15 such intervals.
VRRP_SETTLE = 60


def _namespaces():
    out = subprocess.run(['ip', 'netns', 'list'], capture_output=True,
                         text=True, timeout=30).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


@pytest.fixture
def lab(tmp_path):
    reason = gateways.available()
    if reason:
        pytest.skip(reason)
    work = tmp_path / 'gateways'
    work.mkdir(mode=0o700)
    lab = gateways.GatewayLab(str(work), 'ha%d' % (os.getpid() % 10000))
    try:
        lab.start()
        yield lab
    finally:
        lab.close()
        left = {n for n in _namespaces() if n.startswith(lab.prefix)}
        assert not left, left


def _one_holder(lab):
    site_haproxy.wait_for(lambda: len(lab.holders()) == 1, VRRP_SETTLE,
                          interval=0.1, what='one gateway to hold the VIP')
    return lab.holders()[0]


def _served(lab):
    return lab.served() == (API, NODEPORT)


def test_the_vip_survives_the_loss_of_the_master_gateway(lab, capsys):
    for name, address in (GW1, GW2):
        lab.add_gateway(name, address)
    assert lab.configure() == {'gw-1': (True, True), 'gw-2': (True, True)}
    for gateway in lab.gateways.values():
        mode = os.stat(os.path.join(gateway.dir, 'keepalived.conf')).st_mode
        assert stat.S_IMODE(mode) == 0o600
        # The VRRP password went into the file only, never on a command.
        assert not any(gateways.PASSWORD in ' '.join(c)
                       for c in gateway.conn.commands)
    master = _one_holder(lab)
    backup = ({'gw-1', 'gw-2'} - {master}).pop()
    assert _served(lab)

    # 1. The master's HAProxy stops: its health check fails, the VIP moves.
    start = time.monotonic()
    lab.stop_haproxy(master)
    haproxy_down = lab.seconds_until_served(start)
    assert lab.served() == (API, NODEPORT)
    site_haproxy.wait_for(lambda: lab.holders() == [backup], VRRP_SETTLE,
                          what='the VIP on the backup only')

    # 2. The master gateway is lost entirely: nothing changes for clients.
    lab.destroy(master)
    assert _served(lab)
    assert lab.holders() == [backup]

    # 3. Heal: the gateway is rebuilt and configured by the same steps;
    # the survivor's files are already right, the new one joins as BACKUP.
    lab.add_gateway(master, dict([GW1, GW2])[master])
    changed = lab.configure()
    assert changed == {master: (True, True), backup: (False, False)}
    # Once the rebuilt keepalived runs (as BACKUP: a loaded machine may
    # take seconds to start it), a master-down interval passes without
    # it taking the VIP: a sleep from the configure alone could end
    # before keepalived even started, and prove nothing.
    site_haproxy.wait_for(
        lambda: 'Entering BACKUP STATE' in _log(lab, master), VRRP_SETTLE,
        what='the rebuilt gateway in BACKUP state')
    time.sleep(4)  # more than keepalived's master-down interval
    assert lab.holders() == [backup]  # nopreempt: the VIP did not move
    assert _served(lab)

    # 4. Losing the survivor proves the rebuilt gateway really rejoined.
    start = time.monotonic()
    lab.destroy(backup)
    gateway_lost = lab.seconds_until_served(start)
    site_haproxy.wait_for(lambda: lab.holders() == [master], VRRP_SETTLE,
                          what='the VIP on the rebuilt gateway')
    assert _served(lab)
    with capsys.disabled():
        print('\nfailover: HAProxy stopped on the master %.2f s; master '
              'gateway lost %.2f s' % (haproxy_down, gateway_lost))


def test_a_gateway_scale_out_then_a_scale_in_of_the_master(lab, capsys):
    """The driver's scale steps with real keepalived: a third gateway
    joins as BACKUP (the VIP stays); the VIP's holder leaves as
    scale_start takes it out (the staying gateways' peer lists first,
    then its keepalived stops) and a staying gateway takes the VIP over
    before Heat deletes the VM."""
    for name, address in (GW1, GW2):
        lab.add_gateway(name, address)
    lab.configure()
    holder = _one_holder(lab)

    lab.add_gateway(*GW3)
    assert lab.configure() == {'gw-1': (False, True), 'gw-2': (False, True),
                               'gw-3': (True, True)}
    time.sleep(4)  # more than keepalived's master-down interval
    assert lab.holders() == [holder]  # nopreempt: the VIP did not move
    assert 'Entering BACKUP STATE' in _log(lab, 'gw-3')
    assert _served(lab)

    staying = sorted(set(lab.gateways) - {holder})
    assert lab.configure(staying) == {n: (False, True) for n in staying}
    start = time.monotonic()
    lab.leave(holder)
    handover = lab.seconds_until_served(start)
    site_haproxy.wait_for(lambda: len(lab.holders()) == 1 and
                          lab.holders()[0] in staying, VRRP_SETTLE,
                          what='the VIP on a staying gateway')
    [new_holder] = lab.holders()
    lab.destroy(holder)  # Heat deletes the VM
    assert _served(lab)
    assert lab.holders() == [new_holder]
    with capsys.disabled():
        print('\nscale-in of the VIP holder: served again after %.2f s'
              % handover)


def _log(lab, name):
    with open(os.path.join(lab.gateways[name].dir, 'keepalived.log')) as f:
        return f.read()


def test_a_refused_keepalived_file_leaves_the_gateway_serving(lab):
    """A check failure on one gateway changes nothing there; the others
    are configured and the error names the gateway."""
    for name, address in (GW1, GW2):
        lab.add_gateway(name, address)
    lab.configure()
    _one_holder(lab)
    gateway = lab.gateways['gw-2']
    path = os.path.join(gateway.dir, 'keepalived.conf')
    with open(path) as f:
        before = f.read()
    pid = gateway.pid('keepalived')
    # The layouts name an interface gw-2 does not have: keepalived -t on
    # gw-2 refuses its file; gw-1 takes its new one.
    layouts = keepalived.gateway_layouts(
        [GW1, GW2], {'gw-1': ('eth0', 24), 'gw-2': ('eth9', 24)},
        lab.spec(), check_timeout=3)
    with pytest.raises(exceptions.GatewaysFailed) as err:
        keepalived.configure_gateways(
            {n: g.conn for n, g in lab.gateways.items()},
            lab.haproxy_text(), layouts,
            {n: g.settings()[0] for n, g in lab.gateways.items()},
            {n: g.settings()[1] for n, g in lab.gateways.items()})
    message = str(err.value)
    assert message.startswith('1 of 2 gateway(s) could not be configured')
    assert 'gw-2: keepalived refused the new configuration' in message
    assert gateways.PASSWORD not in message
    with open(path) as f:
        assert f.read() == before
    assert not os.path.exists(path + '.new')
    assert gateway.pid('keepalived') == pid
    with open(os.path.join(lab.gateways['gw-1'].dir,
                           'keepalived.conf')) as f:
        assert '\n    timeout 3\n' in f.read()
    site_haproxy.wait_for(lambda: _served(lab), VRRP_SETTLE,
                          what='the VIP to serve')
