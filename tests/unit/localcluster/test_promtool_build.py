"""promtool's cache (the alert tests run it) stands apart from the control plane's."""

from __future__ import annotations

import json
from pathlib import Path

from nodegate.localcluster import build, paths
from nodegate.localcluster.versions import PROMETHEUS_VERSION


def test_a_promtool_build_leaves_the_control_planes_stamp_check_as_it_was(
    cached_control_plane: Path,
) -> None:
    assert not build.promtool_is_built()

    def fill(staging: Path) -> None:
        (staging / paths.PROMTOOL).write_text("")

    paths.promtool_root().mkdir(parents=True)
    build._build_staged(paths.promtool_dir(), build.promtool_stamp(), fill)
    assert build.promtool_is_built()
    assert build.is_built()
    assert json.loads((paths.bin_dir() / paths.STAMP_NAME).read_text()) == build.expected_stamp()
    assert not paths.promtool_dir().is_relative_to(paths.version_dir())


def test_the_promtool_stamp_names_the_prometheus_module_version_so_a_bump_rebuilds_it() -> None:
    assert build.promtool_stamp()["prometheus"] == PROMETHEUS_VERSION
