"""Fixtures of every unit test."""

import pytest


@pytest.fixture(autouse=True)
def private_home(tmp_path_factory, monkeypatch):
    """A HOME of its own: the driver's default files (known_hosts,
    records, kubeconfigs) live under ``~`` and must not land in the real
    one."""
    monkeypatch.setenv('HOME', str(tmp_path_factory.mktemp('home')))


@pytest.fixture
def package(tmp_path):
    """A VNF package directory with the LB script ``run`` checks for."""
    scripts = tmp_path / 'package' / 'Scripts'
    scripts.mkdir(parents=True)
    (scripts / 'install_external_lb.sh').write_text('exit 0\n')
    return str(scripts.parent)
