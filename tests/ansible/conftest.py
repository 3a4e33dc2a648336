"""Fixtures for the Ansible tier: the collection installed once per session, and the real
control plane of the e2e tier for the reconciler role (the same session fixture, imported)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ansible.playbooks import install_collection
from tests.e2e.conftest import control_plane

__all__ = ["control_plane"]  # the e2e tier's session fixture, reused here

ANSIBLE_DIR = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test here `ansible`."""
    del config
    for item in items:
        if ANSIBLE_DIR in item.path.parents:
            item.add_marker(pytest.mark.ansible)


@pytest.fixture(scope="session")
def collections(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The collection, built into a tarball and installed with ansible-galaxy."""
    return install_collection(tmp_path_factory.mktemp("ansible-collection"))
