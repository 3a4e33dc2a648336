"""Fixtures for the Pulumi program tests; the runner itself is in harness.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.pulumi.harness import REPO, stack_file_config


@pytest.fixture
def oke_example() -> dict[str, Any]:
    """The oke-example stack's config, to run as is or to break one key at a time."""
    return stack_file_config("oke-example")


@pytest.fixture
def aks_example() -> dict[str, Any]:
    """The aks-example stack's config, to run as is or to break one key at a time."""
    return stack_file_config("aks-example")


@pytest.fixture
def example_rules_text() -> str:
    return (REPO / "examples" / "rules.yaml").read_text(encoding="utf-8")


@pytest.fixture
def project(tmp_path: Path, example_rules_text: str) -> Iterator[Path]:
    """A scratch project directory: the example rules as rules.yaml, and the example user
    cloud-init at the path the oke-example stack names."""
    (tmp_path / "rules.yaml").write_text(example_rules_text, encoding="utf-8")
    user_cloud_init = Path("examples/user-data/gpu-cloud-init.yaml")
    (tmp_path / user_cloud_init).parent.mkdir(parents=True)
    (tmp_path / user_cloud_init).write_bytes((REPO / user_cloud_init).read_bytes())
    yield tmp_path
