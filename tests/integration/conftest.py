"""Fixtures for the tests against the real ``tacker`` package.

``tox -e tacker`` installs tacker from PyPI next to this package.  Every
test module starts with ``pytest.importorskip('tacker')``, so the
directory skips cleanly where tacker is absent; this file imports tacker
only inside fixtures for the same reason.

Nothing here needs a database, a message queue or a cloud: Tacker's own
functions are called the way tacker-conductor calls them, with the one
database lookup (package id -> extracted package directory) patched.
"""

import ipaddress
import json
import logging
import shutil
import socket
import uuid

import pytest

from mgmt_driver import DRIVER_NAME
from mgmt_driver.adapters import csar
from tests import packages

NOOP_DRIVER = packages.NOOP_DRIVER
MGMT_NAMESPACE = packages.MGMT_NAMESPACE


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch):
    """Refuse any connection outside 127.0.0.0/8.

    The sample requests name real-looking hosts (10.10.0.50, ...); a hook
    that starts doing remote work must fail here, not send traffic.
    """
    real_connect = socket.socket.connect

    def connect(sock, address):
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            try:
                loopback = ipaddress.ip_address(address[0]).is_loopback
            except ValueError:  # a host name: never resolved here
                loopback = address[0] == 'localhost'
            if not loopback:
                raise OSError('test refused a connection to %s' %
                              (address,))
        return real_connect(sock, address)

    monkeypatch.setattr(socket.socket, 'connect', connect)


@pytest.fixture(scope='session', autouse=True)
def tacker_logging_bug():
    """Let logging errors pass, as they do in tacker-conductor.

    tacker 16.0.0 logs ``"No SOL001 def file found '%'"`` on every CSAR
    load (its wheel lacks ``etc/etsi-nfv``); the format string is broken.
    The logging module reports such an error and carries on, but pytest's
    log capture raises it, which would abort ``load_csar_data``.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(logging, 'raiseExceptions', False)
        yield


@pytest.fixture(scope='session')
def tacker_conf(tmp_path_factory):
    """Tacker's global config, initialised as tacker-conductor does.

    The mgmt driver list is the one the README tells operators to set.
    """
    import tacker.conf  # noqa: F401  (registers [vnf_package])
    from oslo_config import cfg
    from tacker.vnflcm import vnflcm_driver  # noqa: F401  ([tacker] opts)

    conf = cfg.CONF
    conf([], project='tacker', default_config_files=[])
    csar_dir = tmp_path_factory.mktemp('vnf_packages')
    conf.set_override('vnf_package_csar_path', str(csar_dir),
                      group='vnf_package')
    conf.set_override('vnflcm_mgmt_driver', [NOOP_DRIVER, DRIVER_NAME],
                      group='tacker')
    yield conf
    conf.clear_override('vnf_package_csar_path', group='vnf_package')
    conf.clear_override('vnflcm_mgmt_driver', group='tacker')


@pytest.fixture(scope='session')
def mgmt_manager(tacker_conf):
    """Tacker's DriverManager over the configured mgmt drivers."""
    from tacker.common import driver_manager

    return driver_manager.DriverManager(
        MGMT_NAMESPACE, tacker_conf.tacker.vnflcm_mgmt_driver)


@pytest.fixture(scope='session')
def objects():
    from tacker import objects as tacker_objects

    tacker_objects.register_all()
    return tacker_objects


@pytest.fixture(scope='session')
def admin_context():
    from tacker import context

    return context.get_admin_context()


@pytest.fixture(scope='session')
def built_csars(tmp_path_factory):
    """Both packages, built with the SOL001 files of the installed tacker."""
    tmp = tmp_path_factory.mktemp('csars')
    lb = packages.lb_script(tmp)
    return {name: csar.build(packages.PACKAGES_DIR / name,
                             tmp / (name + '.zip'), lb_script=lb).path
            for name in packages.FLAVOURS}


@pytest.fixture(scope='session')
def onboarded(tacker_conf, built_csars):
    """``{name: (vnf_data, flavours, artifacts, package dir)}``.

    Loaded by Tacker's own ``csar_utils.load_csar_data``, which extracts
    the package where tacker-conductor keeps onboarded packages.
    """
    from tacker.common import csar_utils

    result = {}
    for name, zip_path in built_csars.items():
        package_id = str(uuid.uuid4())
        vnf_data, flavours, artifacts = csar_utils.load_csar_data(
            None, package_id, str(zip_path))
        package_dir = tacker_conf.vnf_package.vnf_package_csar_path
        result[name] = (vnf_data, flavours, artifacts,
                        '%s/%s' % (package_dir, package_id))
    return result


@pytest.fixture
def package_dirs(onboarded, tmp_path, monkeypatch):
    """A private copy of each onboarded package, found by VNFD id.

    Patches ``vnflcm.utils._get_vnf_package_path`` (a database lookup in
    Tacker) so that Tacker's VNFD readers and hash check find the copy.
    Returns ``{name: copy dir}``; tests may modify the copies.
    """
    from tacker.vnflcm import utils as vnflcm_utils

    copies = {name: shutil.copytree(entry[3], tmp_path / name)
              for name, entry in onboarded.items()}
    by_vnfd = {packages.DESCRIPTOR_IDS[name]: str(path)
               for name, path in copies.items()}
    monkeypatch.setattr(vnflcm_utils, '_get_vnf_package_path',
                        lambda context, vnfd_id: by_vnfd[vnfd_id])
    return copies


@pytest.fixture
def lcm_driver(mgmt_manager):
    """Tacker's VnfLcmDriver with only its mgmt-driver parts set up.

    Its constructor also starts RPC and loads the VNFM plugin; the mgmt
    driver code only needs the manager and the hashes computed at start.
    """
    from tacker.vnflcm import vnflcm_driver

    driver = object.__new__(vnflcm_driver.VnfLcmDriver)
    driver._mgmt_manager = mgmt_manager
    driver._mgmt_driver_hash = driver._init_mgmt_driver_hash()
    return driver


def load_sample(name):
    """A request body from ``samples/``."""
    return json.loads((packages.SAMPLES_DIR / name).read_text())


@pytest.fixture
def request_from_sample(objects, admin_context):
    """Build a Tacker request object from a sample, as the API does."""
    from tacker.common import utils

    def build(cls_name, sample):
        body = utils.convert_camelcase_to_snakecase(load_sample(sample))
        cls = getattr(objects, cls_name)
        if cls_name == 'HealVnfRequest':  # the API builds it like this
            return cls(context=admin_context, **body)
        return cls.obj_from_primitive(body, admin_context)

    return build


@pytest.fixture
def vnf_instance(objects, admin_context, request_from_sample):
    """An INSTANTIATED simple-flavour VnfInstance with one worker VNFC."""
    instantiate = request_from_sample('InstantiateVnfRequest',
                                      'instantiate_simple.json')
    vnfc = objects.VnfcResourceInfo(
        id=str(uuid.uuid4()), vdu_id='workerNode',
        compute_resource=objects.ResourceHandle(
            resource_id=str(uuid.uuid4()),
            vim_level_resource_type='OS::Nova::Server'))
    info = objects.InstantiatedVnfInfo(
        flavour_id='simple', instance_id=str(uuid.uuid4()),
        additional_params=instantiate.additional_params,
        vnfc_resource_info=[vnfc],
        scale_status=[objects.ScaleInfo(aspect_id='worker_instance',
                                        scale_level=0)])
    return objects.VnfInstance(
        context=admin_context, id=str(uuid.uuid4()),
        vnfd_id=packages.DESCRIPTOR_IDS['kubespray_simple'],
        vnf_pkg_id=str(uuid.uuid4()), instantiation_state='INSTANTIATED',
        vim_connection_info=[objects.VimConnectionInfo(
            id=str(uuid.uuid4()), vim_id=str(uuid.uuid4()),
            vim_type='openstack', access_info={'region': 'RegionOne'})],
        instantiated_vnf_info=info)
