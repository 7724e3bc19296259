"""The package sources agree with themselves, with Tacker and the samples.

Heat and Tacker are not run here; these tests check the names that tie
the VNFD, the BaseHOT, the user data and the request samples together,
which nothing else would notice until a real deployment.
"""

import ast
import json
import pathlib

import pytest
import yaml

from mgmt_driver import DRIVER_NAME
from mgmt_driver.adapters import csar
from mgmt_driver.model import core
from mgmt_driver.model import merging
from tests import packages

NAMES = sorted(packages.FLAVOURS)
ASPECT_VDUS = {'master_instance': 'masterNode',
               'worker_instance': 'workerNode',
               'lb_instance': 'externalLB'}
#: package -> its scaling aspects (the gateways scale in kubespray_ha_lb).
ASPECTS = {'kubespray_simple': {'master_instance', 'worker_instance'},
           'kubespray_ha': {'master_instance', 'worker_instance'},
           'kubespray_ha_lb': set(ASPECT_VDUS)}
MASTERS = {'kubespray_simple': 1, 'kubespray_ha': 3, 'kubespray_ha_lb': 3}
USER_DATA = './UserData/k8s_userdata.py'
USER_DATA_CLASS = 'KubesprayUserData'


def _load(path):
    return yaml.safe_load(pathlib.Path(path).read_text())


class Package:
    """One package source, parsed."""

    def __init__(self, name):
        self.name = name
        self.root = packages.PACKAGES_DIR / name
        self.flavour_id = packages.FLAVOURS[name]
        self.df = _load(self.root / 'Definitions' / (name + '_df.yaml'))
        self.top_vnfd = _load(self.root / 'Definitions' /
                              (name + '_top.vnfd.yaml'))
        self.types = _load(self.root / 'Definitions' / (name + '_types.yaml'))
        hot_dir = self.root / 'BaseHOT' / self.flavour_id
        tops = sorted(hot_dir.glob('*.yaml'))
        assert len(tops) == 1, 'Tacker reads one top HOT per flavour'
        self.hot = _load(tops[0])
        self.nested = {p.name: _load(p)
                       for p in sorted((hot_dir / 'nested').glob('*.yaml'))}

    @property
    def nodes(self):
        return self.df['topology_template']['node_templates']

    def nodes_of(self, node_type):
        return {k: v for k, v in self.nodes.items()
                if v['type'] == node_type}

    def policies_of(self, policy_type):
        found = {}
        for policy in self.df['topology_template']['policies']:
            for name, body in policy.items():
                if body['type'] == policy_type:
                    found[name] = body
        return found

    def all_hot_resources(self):
        resources = dict(self.hot['resources'])
        for tpl in self.nested.values():
            resources.update(tpl['resources'])
        return resources


@pytest.fixture(scope='module', params=NAMES)
def pkg(request):
    return Package(request.param)


def _aspects(pkg):
    (policy,) = pkg.policies_of('tosca.policies.nfv.ScalingAspects').values()
    return policy['properties']['aspects']


def _initial(pkg, vdu):
    for body in pkg.policies_of('tosca.policies.nfv.VduInitialDelta').values():
        if vdu in body['targets']:
            return body['properties']['initial_delta']['number_of_instances']
    raise AssertionError('no initial delta for %s' % vdu)


def _delta(pkg, aspect):
    deltas = pkg.policies_of('tosca.policies.nfv.VduScalingAspectDeltas')
    for body in deltas.values():
        if body['properties']['aspect'] == aspect:
            (value,) = body['properties']['deltas'].values()
            return body['targets'], value['number_of_instances']
    raise AssertionError('no deltas for %s' % aspect)


# ------------------------------------------------------------ VNFD


def test_flavour_and_descriptor_ids(pkg):
    mapping = pkg.df['topology_template']['substitution_mappings']
    assert mapping['properties']['flavour_id'] == pkg.flavour_id
    props = pkg.types['node_types'][mapping['node_type']]['properties']
    assert props['flavour_id']['default'] == pkg.flavour_id
    descriptor_id = packages.DESCRIPTOR_IDS[pkg.name]
    assert props['descriptor_id']['default'] == descriptor_id
    top_vnf = pkg.top_vnfd['topology_template']['node_templates']['VNF']
    assert top_vnf['properties']['descriptor_id'] == descriptor_id
    assert top_vnf['type'] == mapping['node_type']
    assert pkg.nodes['VNF']['type'] == mapping['node_type']


def test_top_vnfd_imports_sol001_types_and_flavour(pkg):
    imports = pkg.top_vnfd['imports']
    assert imports[:2] == list(csar.SOL001_FILES)
    assert pkg.name + '_types.yaml' in imports
    assert pkg.name + '_df.yaml' in imports
    for name in imports[2:]:
        assert (pkg.root / 'Definitions' / name).is_file()
    # The build adds the SOL001 files; the sources must not carry them.
    for name in csar.SOL001_FILES:
        assert not (pkg.root / 'Definitions' / name).exists()


def test_requirements_declare_occurrences(pkg):
    (node_type,) = pkg.types['node_types'].values()
    for requirement in node_type['requirements']:
        (body,) = requirement.values()
        assert body['occurrences'][0] == 0


def test_vnflcm_interface_maps_the_driver_hooks(pkg):
    vnf = pkg.nodes['VNF']
    hooks = vnf['interfaces']['Vnflcm']
    assert sorted(hooks) == sorted(packages.DRIVER_HOOKS)
    assert {h['implementation'] for h in hooks.values()} == {DRIVER_NAME}
    assert vnf['artifacts'] == {DRIVER_NAME: {
        'description': vnf['artifacts'][DRIVER_NAME]['description'],
        'type': 'tosca.artifacts.Implementation.Python',
        'file': csar.DRIVER_ARTIFACT}}


def test_every_level_scales_every_aspect(pkg):
    """Tacker reads scale_info[aspect] of the level for every aspect."""
    (levels,) = pkg.policies_of(
        'tosca.policies.nfv.InstantiationLevels').values()
    aspects = set(_aspects(pkg))
    assert aspects == ASPECTS[pkg.name]
    for level in levels['properties']['levels'].values():
        assert set(level['scale_info']) == aspects


def test_control_plane_is_fixed(pkg):
    masters = MASTERS[pkg.name]
    assert _aspects(pkg)['master_instance']['max_scale_level'] == 0
    assert _initial(pkg, 'masterNode') == masters
    profile = pkg.nodes['masterNode']['properties']['vdu_profile']
    assert profile == {'min_number_of_instances': masters,
                       'max_number_of_instances': masters}


def test_vdu_instantiation_levels_match_the_aspects(pkg):
    (levels,) = pkg.policies_of(
        'tosca.policies.nfv.InstantiationLevels').values()
    per_vdu = pkg.policies_of('tosca.policies.nfv.VduInstantiationLevels')
    counts = {body['targets'][0]: body['properties']['levels']
              for body in per_vdu.values()}
    for level_id, level in levels['properties']['levels'].items():
        for aspect, info in level['scale_info'].items():
            vdus, step = _delta(pkg, aspect)
            for vdu in vdus:
                expected = _initial(pkg, vdu) + step * info['scale_level']
                assert counts[vdu][level_id]['number_of_instances'] == \
                    expected


# ------------------------------------------------------------ BaseHOT


def test_scaling_groups_follow_the_aspects(pkg):
    resources = pkg.hot['resources']
    for aspect, body in _aspects(pkg).items():
        vdus, step = _delta(pkg, aspect)
        assert vdus == [ASPECT_VDUS[aspect]]
        group = resources[aspect]
        assert group['type'] == 'OS::Heat::AutoScalingGroup'
        initial = _initial(pkg, vdus[0])
        props = group['properties']
        assert props['min_size'] == initial
        assert props['max_size'] == initial + step * body['max_scale_level']
        profile = pkg.nodes[vdus[0]]['properties']['vdu_profile']
        assert profile['min_number_of_instances'] == props['min_size']
        assert profile['max_number_of_instances'] == props['max_size']
        capacity = aspect + '_desired_capacity'
        assert props['desired_capacity'] == {'get_param': capacity}
        assert pkg.hot['parameters'][capacity]['default'] == initial
        for action, sign in (('out', 1), ('in', -1)):
            policy = resources['%s_scale_%s' % (aspect, action)]
            assert policy['type'] == 'OS::Heat::ScalingPolicy'
            assert policy['properties']['auto_scaling_group_id'] == {
                'get_resource': aspect}
            assert policy['properties']['scaling_adjustment'] == sign * step


def test_nested_templates_get_exactly_their_parameters(pkg):
    for aspect in ASPECTS[pkg.name]:
        member = pkg.hot['resources'][aspect]['properties']['resource']
        nested = pkg.nested[member['type']]
        assert set(member['properties']) == set(nested['parameters'])
        servers = [k for k, v in nested['resources'].items()
                   if v['type'] == 'OS::Nova::Server']
        assert servers == [ASPECT_VDUS[aspect]]


def test_get_param_names_are_declared(pkg):
    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == 'get_param':
                    yield value[0] if isinstance(value, list) else value
                else:
                    yield from walk(value)
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)

    for tpl in [pkg.hot] + list(pkg.nested.values()):
        for name in walk(tpl['resources']):
            assert name in tpl['parameters']


def test_servers_ports_and_floating_ips_match_the_vnfd(pkg):
    resources = pkg.all_hot_resources()
    vdus = pkg.nodes_of('tosca.nodes.nfv.Vdu.Compute')
    cps = pkg.nodes_of('tosca.nodes.nfv.VduCp')
    for vdu in vdus:
        assert resources[vdu]['type'] == 'OS::Nova::Server'
    for cp_name, cp in cps.items():
        requirements = {k: v for r in cp['requirements'] for k, v in r.items()}
        vdu = requirements['virtual_binding']
        assert resources[cp_name]['type'] == 'OS::Neutron::Port'
        networks = resources[vdu]['properties']['networks']
        assert {'port': {'get_resource': cp_name}} in networks
        if 'virtual_link' not in requirements:
            # External CP: Tacker fills its network from extVirtualLinks.
            fip = resources[vdu + '_FloatingIP']
            assert fip['type'] == 'OS::Neutron::FloatingIP'
            assert fip['properties']['port_id'] == {'get_resource': cp_name}
    names = set(pkg.nodes_of('tosca.nodes.nfv.VnfVirtualLink'))
    assert names == {'internalVL1'}
    assert pkg.hot['resources']['internalVL1']['type'] == 'OS::Neutron::Net'


def test_external_cp_networks_come_from_the_request(pkg):
    external = {name for name, cp in
                pkg.nodes_of('tosca.nodes.nfv.VduCp').items()
                if not any('virtual_link' in r for r in cp['requirements'])}
    assert external == {'masterNode_CP1', 'workerNode_CP2', 'externalLB_CP3'}
    text = json.dumps(pkg.hot['resources'])
    for cp in external:
        assert json.dumps({'get_param': ['nfv', 'CP', cp, 'network']}) in text
    for vdu in pkg.nodes_of('tosca.nodes.nfv.Vdu.Compute'):
        for key in ('flavor', 'image'):
            assert json.dumps({'get_param': ['nfv', 'VDU', vdu, key]}) in text


def test_ha_spreads_the_control_plane(pkg):
    if pkg.name not in ('kubespray_ha', 'kubespray_ha_lb'):
        pytest.skip('optional: HA flavour only')
    group = pkg.hot['resources']['master_server_group']
    assert group['type'] == 'OS::Nova::ServerGroup'
    member = pkg.hot['resources']['master_instance']['properties']['resource']
    assert member['properties']['server_group'] == {
        'get_resource': 'master_server_group'}
    server = pkg.nested[member['type']]['resources']['masterNode']
    assert server['properties']['scheduler_hints'] == {
        'group': {'get_param': 'server_group'}}


def test_ha_lb_gateways_share_a_vip_port():
    pkg = Package('kubespray_ha_lb')
    resources = pkg.hot['resources']
    # The VIP is a port of its own on the gateways' external network ...
    vip = resources['externalLB_VIP_CP']
    assert vip['type'] == 'OS::Neutron::Port'
    assert vip['properties']['network'] == {
        'get_param': ['nfv', 'CP', 'externalLB_CP3', 'network']}
    assert 'externalLB_VIP_CP' not in pkg.nodes  # no VDU binds it
    # ... whose address every gateway's port lets through.
    member = resources['lb_instance']['properties']['resource']
    address = {'get_attr': ['externalLB_VIP_CP', 'fixed_ips', 0,
                            'ip_address']}
    assert member['properties']['vip_address'] == address
    gateway = pkg.nested[member['type']]['resources']
    assert gateway['externalLB_CP3']['properties'][
        'allowed_address_pairs'] == [
            {'ip_address': {'get_param': 'vip_address'}}]
    assert 'allowed_address_pairs' not in gateway[
        'externalLB_internal_CP']['properties']
    assert member['properties']['server_group'] == {
        'get_resource': 'lb_server_group'}
    assert gateway['externalLB']['properties']['scheduler_hints'] == {
        'group': {'get_param': 'server_group'}}
    # Two gateways at least: one may fail.
    assert _initial(pkg, 'externalLB') >= 2


def test_user_data_class_exists(pkg):
    path = pkg.root / USER_DATA
    tree = ast.parse(path.read_text())
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    methods = {n.name for n in classes[USER_DATA_CLASS].body
               if isinstance(n, ast.FunctionDef)}
    assert 'instantiate' in methods
    assert (pkg.root / 'UserData' / '__init__.py').is_file()


def test_user_data_is_the_same_in_both_packages():
    texts = {(packages.PACKAGES_DIR / n / USER_DATA).read_text()
             for n in NAMES}
    assert len(texts) == 1


# ------------------------------------------------------------ samples


def _sample(name):
    path = packages.SAMPLES_DIR / name
    if not path.is_file():
        pytest.skip('%s is not written yet' % path)
    return json.loads(path.read_text())


@pytest.mark.parametrize('sample, name', [
    ('instantiate_simple.json', 'kubespray_simple'),
    ('instantiate_ha.json', 'kubespray_ha'),
    ('instantiate_keyauth.json', 'kubespray_simple'),
    ('instantiate_ha_lb.json', 'kubespray_ha_lb'),
])
def test_instantiate_samples_fit_the_package(sample, name):
    body = _sample(sample)
    pkg = Package(name)
    assert body['flavourId'] == pkg.flavour_id
    params = body['additionalParams']
    assert params['lcm-operation-user-data'] == USER_DATA
    assert params['lcm-operation-user-data-class'] == USER_DATA_CLASS
    cpds = {cp['cpdId'] for vl in body['extVirtualLinks']
            for cp in vl['extCps']}
    assert cpds >= {'masterNode_CP1', 'workerNode_CP2', 'externalLB_CP3'}
    resources = pkg.all_hot_resources()
    install = params['k8s_cluster_installation_param']
    for role in ('master_node', 'worker_node'):
        assert install[role]['aspect_id'] in _aspects(pkg)
    lb = install['external_lb_param']
    if 'lb_instance' in _aspects(pkg):
        assert lb['aspect_id'] == 'lb_instance'
        assert lb['vip_cp_name'] in resources
    else:
        assert 'aspect_id' not in lb and 'vip_cp_name' not in lb
    for role in ('master_node', 'worker_node', 'external_lb_param'):
        for key in ('ssh_cp_name', 'nic_cp_name'):
            if key in install[role]:
                assert install[role][key] in resources


@pytest.mark.parametrize('sample, kind', [
    ('scale_out.json', 'SCALE_OUT'), ('scale_in.json', 'SCALE_IN')])
def test_scale_samples(sample, kind):
    body = _sample(sample)
    assert body['type'] == kind
    assert body['aspectId'] == 'worker_instance'
    assert body['numberOfSteps'] >= 1
    overrides = body.get('additionalParams', {}).get(core.ROOT, {})
    assert set(overrides) <= set(merging.OVERRIDABLE_SECTIONS)


def test_gateway_scale_sample_names_the_gateway_aspect():
    body = _sample('scale_out_lb.json')
    assert body['type'] == 'SCALE_OUT'
    assert body['aspectId'] in _aspects(Package('kubespray_ha_lb'))
    assert body['aspectId'] == _sample('instantiate_ha_lb.json')[
        'additionalParams']['k8s_cluster_installation_param'][
            'external_lb_param']['aspect_id']


def test_heal_samples():
    vnfc = _sample('heal_vnfc.json')
    assert vnfc['vnfcInstanceId'] and 'additionalParams' not in vnfc
    whole = _sample('heal_vnf.json')
    assert 'vnfcInstanceId' not in whole
    overrides = whole['additionalParams'][core.ROOT]
    assert set(overrides) <= set(merging.OVERRIDABLE_SECTIONS)


def test_terminate_sample():
    body = _sample('terminate.json')
    assert body['terminationType'] in ('GRACEFUL', 'FORCEFUL')


def test_tacker_conf_sample_names_real_options(tmp_path):
    import configparser
    import re

    from oslo_config import cfg

    from mgmt_driver.common import conf

    text = (packages.SAMPLES_DIR / 'tacker.conf').read_text()
    # Commented-out options ("#name = value") count too.
    text = re.sub(r'(?m)^#(\w+ = )', r'\1', text)
    parser = configparser.ConfigParser()
    parser.read_string(text)
    assert parser['tacker']['vnflcm_mgmt_driver'] == (
        'vnflcm_noop,' + DRIVER_NAME)
    names = {o.name for o in conf.ALL_OPTS}
    listed = set(parser['kubespray_mgmt'])
    assert listed, 'the [kubespray_mgmt] example is empty'
    assert listed <= names, 'not options: %s' % sorted(listed - names)

    # Every value is valid for its option (type, bounds, choices).
    path = tmp_path / 'tacker.conf'
    path.write_text(text)
    opts = cfg.ConfigOpts()
    conf.register_opts(opts)
    opts([], project='test', default_config_files=[str(path)])
    for name in listed:
        getattr(opts.kubespray_mgmt, name)
