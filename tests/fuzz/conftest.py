"""The fuzz tier: every test here is marked `fuzz` (`pytest -m fuzz` runs only this tier)."""

from __future__ import annotations

from pathlib import Path

import pytest

FUZZ_DIR = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if FUZZ_DIR in item.path.parents:
            item.add_marker(pytest.mark.fuzz)
