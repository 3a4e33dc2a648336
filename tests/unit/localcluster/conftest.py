"""Caches of the harness's own, in a temporary directory (`$NODEGATE_CACHE`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodegate.localcluster import build, paths


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache with nothing built in it."""
    monkeypatch.setenv("NODEGATE_CACHE", str(tmp_path))
    return tmp_path


@pytest.fixture
def cached_control_plane(empty_cache: Path) -> Path:
    """A cache holding a stamped control plane (empty files stand for its binaries): what a
    tool cached apart from it must leave as it is."""
    paths.bin_dir().mkdir(parents=True)
    for name in paths.ALL_BINARIES:
        (paths.bin_dir() / name).write_text("")
    (paths.bin_dir() / paths.STAMP_NAME).write_text(json.dumps(build.expected_stamp()))
    assert build.is_built()
    return empty_cache
