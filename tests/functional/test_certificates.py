"""Control-plane certificates on the local site (127.0.53.x): one
3-master cluster, one scenario.

The double writes real X.509 files for each master at kubeadm
init/join; one master's are signed again to expire in 10 days.
``kubespray-mgmt status`` names them and exits 5.  A Tacker v1 PATCH
(``renew_certificates``) renews every master, one at a time out of
HAProxy, while a prober keeps connecting to the LB's API port: every
attempt is answered, never by a master while its static pods restart.
Status is clean afterwards, and the same PATCH again renews nothing.
"""

import json
import time
import types

import pytest
import yaml
from mgmt_localsite import lab as lab_mod
from mgmt_localsite import pki
from mgmt_localsite import site as site_mod
from oslo_config import cfg

from mgmt_driver.adapters import cli
from mgmt_driver.operations import certificates
from tests.functional import tacker_fakes
from tests.functional import test_faults
from tests.functional.lb_prober import Prober

ANSIBLE = '127.0.53.1'
LB = '127.0.53.2'
MASTERS = ['127.0.53.10', '127.0.53.11', '127.0.53.12']
WORKERS = ['127.0.53.20']
CONTEXT = types.SimpleNamespace(project_id='certs-project')
#: Seconds the double's static pod restart takes: the prober connects
#: several times while each master is out.
RESTART = 0.5

pytestmark = pytest.mark.skipif(site_mod.unavailable() is not None,
                                reason=str(site_mod.unavailable()))


name = tacker_fakes.namer(MASTERS)


@pytest.fixture(scope='module')
def chain(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('certs')
    try:
        with test_faults.running(lab_mod.Lab(
                ANSIBLE, LB, MASTERS, WORKERS)) as lab:
            vnf, hooks = tacker_fakes.instantiated_on(lab, CONTEXT, MASTERS,
                                                      WORKERS, LB)
            yield types.SimpleNamespace(lab=lab, vnf=vnf, hooks=hooks,
                                        files=_cli_inputs(lab, vnf, tmp))
    finally:
        cfg.CONF([], project='kubespray-mgmt', default_config_files=[])


def _cli_inputs(lab, vnf, tmp):
    """A config file (the lab's options), parameters and topology."""
    options = site_mod.driver_options(
        lab.site, lab.haproxy, lab.root / 'known_hosts',
        key_dirs=[lab.sshd.key_dir])
    config = tmp / 'kubespray-mgmt.conf'
    config.write_text(site_mod.config_file_text(options))
    params_file = tmp / 'params.json'
    params_file.write_text(json.dumps(vnf.additional_params))
    topology = tmp / 'topology.yaml'
    topology.write_text(yaml.safe_dump(lab.topology(MASTERS, WORKERS)))
    return [str(config), str(params_file), str(topology)]


def status(chain, capsys):
    config, params_file, topology = chain.files
    code = cli.main(['--config-file', config, 'status', '--params',
                     params_file, '--topology', topology, '--instance-id',
                     chain.vnf.id, '--output', 'json'])
    return code, json.loads(capsys.readouterr().out)


def patch(chain, **metadata):
    chain.vnf.metadata.update(metadata)
    chain.hooks.modify_information_end(CONTEXT, chain.vnf.instance, None,
                                       None, None)


def test_an_expiring_certificate_is_shown_and_renewed_while_served(
        chain, capsys):
    lab, site = chain.lab, chain.lab.site
    old = name(MASTERS[1])
    site.age_certificates(old, 10)
    code, report = status(chain, capsys)
    assert code == cli.EXIT_CERTS_EXPIRING
    section = report['certificates']
    assert section['error'] is None and section['warn_days'] == 30
    assert {e['master'] for e in section['expiring']} == {old}
    # Every leaf it has (super-admin.conf only where kubeadm init ran).
    assert {e['name'] for e in section['expiring']} == set(
        site.certificate_expiry(old)) - set(pki.AUTHORITIES)
    assert len(section['expiring']) >= len(pki.LEAVES) - 1
    assert [m['name'] for m in section['masters']] == [
        name(a) for a in MASTERS]

    site.settings(static_pod_restart=RESTART)
    with Prober(LB, lab.api_port) as prober:
        patch(chain, renew_certificates='2026-11-26')
    site.settings(static_pod_restart=0.0)

    restarts = site.restarts()
    order = list(site_mod.read_inventory(
        lab.workspace(chain.vnf.id))['kube_control_plane'])
    assert sorted(order) == sorted(name(a) for a in MASTERS)
    assert [r['node'] for r in restarts] == order  # the inventory's
    assert all(len(r['pods']) == 3 for r in restarts)
    for address in MASTERS:
        left = site.certificate_expiry(name(address))
        assert min(left.values()) - time.time() > 364 * 86400
    # Every attempt answered; never by a master while it restarted.
    assert len(prober.seen) > 20
    assert [t for t, backend in prober.seen if backend is None] == []
    for restart in restarts:
        address = next(a for a in MASTERS if name(a) == restart['node'])
        during = {backend[0] for t, backend in prober.seen
                  if restart['start'] <= t <= restart['end']}
        assert during and address not in during, restart
    assert lab.check(MASTERS, WORKERS) == []

    code, report = status(chain, capsys)
    assert (code, report['certificates']['expiring']) == (cli.EXIT_OK, [])
    record = lab.workspace(chain.vnf.id) / certificates.RECORD_FILE
    assert certificates.parse_record(record.read_text()) == (
        '2026-11-26', frozenset(name(a) for a in MASTERS))
    patch(chain)  # the same request id again: nothing to renew
    assert len(site.restarts()) == len(MASTERS)
