"""Fixtures for the bootstrap tests (helpers live in support.py)."""

from __future__ import annotations

import pytest

from tests.unit.bootstrap.support import FIXTURES


@pytest.fixture
def user_cloud_config() -> str:
    return (FIXTURES / "user-cloud-config.yaml").read_text(encoding="utf-8")


@pytest.fixture
def user_script() -> str:
    return (FIXTURES / "user-script.sh").read_text(encoding="utf-8")
