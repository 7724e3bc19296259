"""``samples/modify_upgrade.json`` and ``modify_relabel.json``, v1 PATCH
bodies, against Tacker 16's own schema for them.

Tacker 16 defines ``tacker.api.schemas.vnf_lcm.update`` for ``PATCH
/vnflcm/v1/vnf_instances/{id}`` but its controller does not apply it
(``update`` has no ``validation.schema``): the body is checked here the
way Tacker validates its other v1 requests.  The conductor test sends the
same file through ``Conductor.update``.
"""

import json

import pytest

pytest.importorskip('tacker')

from tests import packages  # noqa: E402

SAMPLES = ('modify_upgrade.json', 'modify_relabel.json',
           'modify_renew_certificates.json')


def _validate(body):
    from tacker.api.schemas import vnf_lcm
    from tacker.api.validation import validators

    validators._SchemaValidator(vnf_lcm.update).validate(body)


@pytest.mark.parametrize('sample', SAMPLES)
def test_v1_modify_sample_passes_tackers_update_schema(sample):
    body = json.loads((packages.SAMPLES_DIR / sample).read_text())
    _validate(body)
    # Tacker keeps vnf_metadata as strings: the sample's values are.
    assert all(isinstance(v, str) for v in body['metadata'].values())


def test_the_schema_refuses_metadata_that_is_not_an_object():
    from tacker.common import exceptions

    with pytest.raises(exceptions.ValidationError):
        _validate({'metadata': ['kube_version', '1.34.3']})
