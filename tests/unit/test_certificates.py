"""Control-plane certificates: kubeadm's expiry output read as untrusted
data, the status section and its exit code, the PATCH key, and the
renewal one master at a time (day2.renew_certificates over the
recording SSH fake)."""

import json
import pathlib

import pytest

from mgmt_driver.adapters import cli
from mgmt_driver.adapters import lcm_requests
from mgmt_driver.adapters import status
from mgmt_driver.common import exceptions
from mgmt_driver.operations import certificates
from mgmt_driver.operations import day2
from mgmt_driver.operations import lcm
from mgmt_driver.operations import upgrade
from mgmt_driver.remote import programs
from mgmt_driver.session import driver
from tests.fakes import FakePool
from tests.unit.test_driver import LAYOUT
from tests.unit.test_driver import conf  # noqa: F401 (a fixture)
from tests.unit.test_inventory import _cluster
from tests.unit.test_inventory import _spec

DAY = 86400
M1, M2, M3 = '10.10.0.11', '10.10.0.12', '10.10.0.13'
N1, N2, N3 = 'master-10-10-0-11', 'master-10-10-0-12', 'master-10-10-0-13'
LB = '192.168.1.30'


def kubeadm_output(days=300, ca_days=3000, missing=('super-admin.conf',)):
    """``kubeadm certs check-expiration -o json`` as kubeadm prints it."""
    def entry(name, left, ca=None):
        item = {'name': name, 'expirationDate': '2027-09-22T10:00:00Z',
                'residualTime': int(left * DAY), 'externallyManaged': False,
                'missing': False}
        if ca:
            item['caName'] = ca
        if name in missing:
            item.update(missing=True, residualTime=0,
                        expirationDate='0001-01-01T00:00:00Z')
        return item
    leaves = ['admin.conf', 'apiserver', 'super-admin.conf']
    return json.dumps({
        'kind': 'CertificateExpirationInfo',
        'apiVersion': 'output.kubeadm.k8s.io/v1alpha3',
        'certificates': [entry(n, days if isinstance(days, (int, float))
                               else days.get(n, 300), 'ca')
                         for n in leaves],
        'certificateAuthorities': [entry('ca', ca_days)]})


def test_kubeadm_output_is_read_certificates_first():
    certs = certificates.parse_expiration(kubeadm_output(12.5), 'm1')
    assert [(c.name, c.authority, c.days_left, c.missing) for c in certs] \
        == [('admin.conf', False, 12.5, False),
            ('apiserver', False, 12.5, False),
            ('super-admin.conf', False, 0.0, True),
            ('ca', True, 3000.0, False)]
    assert certs[0].expires == '2027-09-22T10:00:00Z'
    assert certs[2].expires is None


def test_expiring_skips_missing_and_external_ones():
    certs = certificates.parse_expiration(
        kubeadm_output({'admin.conf': 40, 'apiserver': 29.9}), 'm1')
    assert [c.name for c in certificates.expiring(certs, 30)] == [
        'apiserver']
    assert certificates.expiring(certs, 0) == []
    expired = certificates.parse_expiration(kubeadm_output(0), 'm1')
    assert [c.name for c in certificates.expiring(expired, 0)] == [
        'admin.conf', 'apiserver']


@pytest.mark.parametrize('text, problem', [
    ('not json', 'no valid JSON'),
    ('[]', 'not a JSON object'),
    ('{"certificates": {}}', 'the output.certificates must be a list'),
    ('{"certificates": [{"name": "a b", "residualTime": 1}]}',
     'certificates[0].name is not a certificate name'),
    ('{"certificates": [{"name": "a", "residualTime": "1"}]}',
     'certificates[0].residualTime must be a number'),
    ('{"certificates": [{"name": "a", "residualTime": 1, '
     '"expirationDate": "\\u001b[2Jsoon"}]}',
     'certificates[0].expirationDate must be an RFC 3339 time'),
    ('{"certificates": [{"name": "a", "residualTime": 1, "missing": "no",'
     '"expirationDate": "2027-01-01T00:00:00Z"}]}',
     'certificates[0].missing must be true or false'),
    (json.dumps({'certificates': [{'name': 'a%d' % i, 'residualTime': 1}
                                  for i in range(201)]}),
     'more than 200 certificates'),
])
def test_hostile_output_is_refused_naming_the_field(text, problem):
    with pytest.raises(exceptions.RemoteDataInvalid) as caught:
        certificates.parse_expiration(text, 'm1')
    message = str(caught.value)
    assert problem in message and 'm1' in message
    assert '\x1b' not in message


def _masters(*days):
    return [certificates.master_entry(
        'm%d' % i, 'h%d' % i, certificates.parse_expiration(
            kubeadm_output(d), 'h%d' % i)) for i, d in enumerate(days)]


def test_section_lists_what_expires_within_the_window():
    section = certificates.section(_masters(300, 10), 30)
    assert section['ok'] is False and section['error'] is None
    assert [(e['master'], e['name'], e['days_left'])
            for e in section['expiring']] == [
        ('m1', 'admin.conf', 10.0), ('m1', 'apiserver', 10.0)]
    text = certificates.format_section(section)
    assert 'warning within 30 days' in text
    assert 'EXPIRING: m1 apiserver on 2027-09-22T10:00:00Z (10.0 days ' \
        'left)' in text
    assert certificates.section(_masters(300), 30)['ok'] is True


def test_a_master_not_read_is_named_and_the_others_shown():
    masters = _masters(300) + [certificates.master_entry(
        'm9', 'h9', error='SSH to h9 failed')]
    section = certificates.section(masters, 30)
    assert section['error'] == 'm9: SSH to h9 failed'
    assert 'm0' in certificates.format_section(section)


def _report(section):
    report = {name: {'ok': True, 'error': None} for name in status.SECTIONS}
    return dict(report, certificates=section, ok=section['ok'])


@pytest.mark.parametrize('days, code', [(300, cli.EXIT_OK),
                                        (10, cli.EXIT_CERTS_EXPIRING)])
def test_status_exits_5_when_a_certificate_is_inside_the_window(
        monkeypatch, capsys, days, code):
    class Reader:
        def __init__(self, *args, **kwargs):
            pass

        def collect(self, cluster):
            return _report(certificates.section(_masters(days), 30))
    monkeypatch.setattr(cli.status, 'StatusReader', Reader)
    monkeypatch.setattr(cli.status, 'format_text', lambda report: 'x\n')
    monkeypatch.setattr(cli, '_read_spec', lambda *a, **k: None)
    monkeypatch.setattr(cli, '_read_nodes', lambda *a, **k: None)
    assert cli.main(['status', '--params', 'p', '--topology', 't']) == code


def test_metadata_key_is_a_request_id():
    wanted = upgrade.check_metadata({'renew_certificates': '2026-11-26'},
                                    'vnf_metadata')
    assert wanted.renew == '2026-11-26' and not wanted.empty
    for bad in ('', 'a b', 'x' * 65, 5, True, '$(id)'):
        with pytest.raises(exceptions.ParamsInvalid) as caught:
            upgrade.check_metadata({'renew_certificates': bad}, 'metadata')
        assert caught.value.problems[0].startswith(
            'metadata.renew_certificates: must be a request id')
    checked = lcm_requests.check({'metadata': {
        'renew_certificates': 'r1'}})
    assert 'renews the control-plane certificates (request r1)' in \
        lcm_requests.describe(checked)


def test_record_round_trip_and_tampering():
    text = certificates.render_record('r1', {N2, N1})
    assert certificates.parse_record(text) == ('r1', frozenset({N1, N2}))
    assert certificates.parse_record(None) is None
    for bad in ('[', '{"request": "r1"}', '{"request": "a b", "done": []}',
                '{"request": "r1", "done": [1]}'):
        with pytest.raises(ValueError):
            certificates.parse_record(bad)


# ------------------------------------------------------------ renewal --

class Events:
    """What the driver did, in order, across hosts: each API backend
    set HAProxy got, each remote program and each readiness probe."""

    def __init__(self, monkeypatch, pool):
        self.seen = []
        real_update = day2.gateways.update

        def update(drv, cluster):
            self.seen.append(('lb', tuple(n.name for n in cluster.masters)))
            return real_update(drv, cluster)
        monkeypatch.setattr(day2.gateways, 'update', update)
        for host in (M1, M2, M3):
            self._wrap(pool.connection(host))

    def _wrap(self, conn):
        real_run = conn.run

        def run(command, *args, **kwargs):
            name = programs.name_of(command)
            if name:
                self.seen.append((name, conn.host))
            elif '--raw' in command:
                self.seen.append(('ready', command[command.index(
                    '--server') + 1]))
            return real_run(command, *args, **kwargs)
        conn.run = run


def _renewal(conf, monkeypatch, ready='ok\n'):  # noqa: F811
    spec = _spec()
    pool = FakePool()
    pool.connection(spec.ansible.ip_address).script(r'KS:MISSING',
                                                    stdout=LAYOUT)
    for host in (M1, M2, M3):
        pool.connection(host).script(r'get --raw /readyz', stdout=ready)
    events = Events(monkeypatch, pool)
    drv = driver.ClusterDriver(spec, 'i1', pool, conf=conf)
    return drv, _cluster(spec, masters=(M1, M2, M3)), events, pool


def test_masters_are_renewed_one_at_a_time_out_of_haproxy(
        conf, monkeypatch):  # noqa: F811
    drv, cluster, events, pool = _renewal(conf, monkeypatch)
    assert day2.renew_certificates(drv, cluster) == [N1, N2, N3]
    every = (N1, N2, N3)
    expected = []
    for host, name in ((M1, N1), (M2, N2), (M3, N3)):
        expected += [('lb', tuple(n for n in every if n != name)),
                     ('renew-certs', host),
                     ('ready', 'https://%s:6443' % host), ('lb', every)]
    assert events.seen == expected + [
        ('ready', drv.discovery_server(cluster))]
    renew = [c for c in pool.connection(M1).commands if 'renew all' in c]
    assert len(renew) == 1 and renew[0].endswith(
        "sh /usr/local/bin/kubeadm /usr/local/bin/crictl")


def test_a_lone_master_is_never_taken_out_of_haproxy(
        conf, monkeypatch):  # noqa: F811
    # HAProxy without a backend is a dead API for the whole renewal;
    # with the master kept, only its own restart.
    drv, _, events, _ = _renewal(conf, monkeypatch)
    cluster = _cluster(drv.spec, masters=(M1,))
    assert day2.renew_certificates(drv, cluster) == [N1]
    assert [e for e in events.seen if e[0] == 'lb'] == [('lb', (N1,))]
    assert events.seen.index(('renew-certs', M1)) < events.seen.index(
        ('lb', (N1,)))


def test_a_request_id_is_done_once_and_resumed_after_a_failure(
        conf, monkeypatch):  # noqa: F811
    drv, cluster, events, pool = _renewal(conf, monkeypatch)
    pool.connection(M2).script('renew all', exit_code=1,
                               stderr='kubeadm: boom', times=1)
    with pytest.raises(exceptions.MgmtDriverRemoteCommandError):
        day2.renew_certificates(drv, cluster, 'r1')
    assert events.seen[-1] == ('renew-certs', M2)  # M2 stays out
    assert day2.renew_certificates(drv, cluster, 'r1') == [N2, N3]
    assert day2.renew_certificates(drv, cluster, 'r1') == []
    assert day2.renew_certificates(drv, cluster, 'r2') == [N1, N2, N3]


def test_an_api_server_that_does_not_answer_stops_the_renewal(
        conf, monkeypatch):  # noqa: F811
    conf.set_override('cert_renew_timeout', 10, group='kubespray_mgmt')
    conf.set_override('poll_max_delay', 0.1, group='kubespray_mgmt')
    conf.set_override('poll_initial_delay', 0.1, group='kubespray_mgmt')
    clock = iter(range(0, 1000, 5))
    monkeypatch.setattr(day2.kubectl, 'poll', _fake_poll(clock))
    drv, cluster, events, pool = _renewal(conf, monkeypatch,
                                          ready='not ok\n')
    with pytest.raises(exceptions.MgmtDriverOtherError) as caught:
        day2.renew_certificates(drv, cluster)
    assert 'did not answer /readyz within 10 s' in str(caught.value)
    assert ('renew-certs', M2) not in events.seen


def _fake_poll(clock):
    real = day2.kubectl.poll

    def poll(probe, timeout, settings):
        return real(probe, timeout, settings, sleep=lambda s: None,
                    clock=lambda: next(clock))
    return poll


def test_the_command_and_the_patch_compose_the_same_operation(
        conf, monkeypatch):  # noqa: F811
    calls = []
    monkeypatch.setattr(lcm.day2, 'renew_certificates',
                        lambda drv, cluster, request, planned:
                        calls.append(request))
    monkeypatch.setattr(driver.ClusterDriver, 'claim', lambda self: None)
    drv, cluster, _, _ = _renewal(conf, monkeypatch)
    summary = lcm.COMMANDS['renew-certs'](drv, cluster, [], 'c1',
                                          vims=object())
    lcm.modify(drv, cluster, renew='r7')
    assert calls == [None, 'r7']
    assert summary.startswith('renewed the control-plane certificates')
    with pytest.raises(exceptions.ParamsInvalid):
        lcm.COMMANDS['renew-certs'](drv, cluster, ['x'], 'c1',
                                    vims=object())


def test_a_v1_patch_passes_the_request_id_to_the_operation(
        conf, monkeypatch):  # noqa: F811
    from tests.unit import test_driver as td
    calls = []
    monkeypatch.setattr(lcm, 'modify',
                        lambda *args, **kwargs: calls.append(
                            (args, kwargs)))
    h = td.Harness(conf)
    instance = h.instance(td._instantiate_params())
    instance.vnf_metadata = {'renew_certificates': 'r1', 'owner': 'ops'}
    h.hooks.modify_information_end(None, instance, None, None, None)
    [((_, _, relabel, target, *_), kwargs)] = calls
    assert (relabel, target, kwargs['renew']) == (None, None, 'r1')
    instance.vnf_metadata = {'renew_certificates': 'a b'}
    with pytest.raises(exceptions.MgmtDriverParamInvalid,
                       match='vnf_metadata.renew_certificates'):
        h.hooks.modify_information_end(None, instance, None, None, None)


def test_a_v2_patch_runs_the_hook(conf):  # noqa: F811
    from tests.unit import test_v2 as tv
    h = tv.Harness(conf)
    h.instantiate()
    [((_, view, _, _, _), kwargs)] = tv._modify(
        h, {'renew_certificates': '2026-11-26'})
    assert kwargs == {'metadata_field': 'metadata'}
    assert view.vnf_metadata == {'renew_certificates': '2026-11-26'}


def test_a_dry_run_plans_each_master_and_waits_for_nothing(capsys):
    samples = pathlib.Path(__file__).parents[2] / 'samples'
    code = cli.main(['run', 'renew-certs', '--dry-run', '--params',
                     str(samples / 'instantiate_ha.json'), '--topology',
                     str(samples / 'topology_ha.yaml')])
    out = capsys.readouterr().out
    assert code == cli.EXIT_OK
    # Nothing was renewed: the summary says what a real run would do.
    assert out.rstrip().splitlines()[-1] == (
        'dry run, nothing done: would renew the control-plane certificates '
        'of kubernetes_vim_ha, one master at a time; the API would answer '
        'through the load balancer')
    assert out.count('<program renew-certs, ') == 3
    assert out.count('get --raw /readyz') == 4  # 3 masters, then the LB
    assert out.count('version --client') == 1


def test_a_renewal_shows_its_waits_as_it_goes(conf, monkeypatch):  # noqa: F811
    """Issue 41, item 6: renew-certs printed nothing while it waited up
    to cert_renew_timeout per step."""
    clock = iter(range(0, 10000, 30))
    monkeypatch.setattr(day2, '_clock', lambda: next(clock), raising=False)
    monkeypatch.setattr(day2.kubectl, 'poll', _fake_poll(iter(range(
        0, 10000, 5))))
    drv, cluster, events, pool = _renewal(conf, monkeypatch)
    pool.connection(M1).script(r'get --raw /readyz', stdout='not ok\n',
                               times=3, first=True)
    lines = []
    drv._progress = lines.append
    day2.renew_certificates(drv, cluster)
    about = 'the API server of %s (https://%s:6443) to answer /readyz' % (
        N1, M1)
    waits = [line for line in lines if about in line]
    assert waits == ['waiting up to 300 s for ' + about,
                     'still waiting for %s: 60 s of 300 s' % about,
                     about + ': answered after 90 s']
    assert any(line.startswith('renewing the certificates of %s (' % N1)
               and 'up to 300 s' in line for line in lines)
