"""promtool's sources (Debian's package where apt answers, else the Go module) and its cache,
which stands apart from the control plane's."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from nodegate.localcluster import build, debpackage, paths
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


POLICY = """prometheus:
  Installed: (none)
  Candidate: 2.42.0+ds-5+deb12u1
  Version table:
     2.42.0+ds-5+deb12u1 500
"""


def test_the_candidate_apt_would_fetch_is_read_from_apt_cache_policy() -> None:
    assert debpackage.parse_candidate(POLICY) == "2.42.0+ds-5+deb12u1"


def test_a_package_debian_does_not_offer_has_no_candidate() -> None:
    assert debpackage.parse_candidate("prometheus:\n  Candidate: (none)\n") is None
    assert debpackage.parse_candidate("") is None


def test_a_debian_version_is_new_enough_by_its_upstream_release_epoch_and_suffix_aside() -> None:
    wanted = build.PROMTOOL_FROM_DEBIAN
    assert debpackage.new_enough("2.42.0+ds-5+deb12u1", wanted)
    assert debpackage.new_enough("1:3.0.1-1", wanted)
    assert not debpackage.new_enough("2.33.5+ds1-2", wanted)
    assert not debpackage.new_enough("unreadable", wanted)


def test_a_cached_debian_promtool_counts_only_with_its_stamp_and_binary(empty_cache: Path) -> None:
    directory = paths.debian_promtool_dir()
    directory.mkdir(parents=True)
    (directory / paths.PROMTOOL).write_text("")
    assert not build.debian_promtool_is_cached()

    stamp = {"debian-package": "prometheus", "version": "2.42.0+ds-5+deb12u1"}
    (directory / paths.STAMP_NAME).write_text(json.dumps(stamp))
    assert build.debian_promtool_is_cached()

    (directory / paths.STAMP_NAME).write_text(json.dumps(stamp | {"version": "2.33.5+ds1-2"}))
    assert not build.debian_promtool_is_cached()


def test_promtool_comes_out_of_debians_package_where_apt_answers(empty_cache: Path) -> None:
    if not debpackage.apt_available():
        pytest.skip("apt-get, apt-cache and dpkg-deb are not on this machine")
    promtool = build.ensure_promtool()

    assert promtool == paths.debian_promtool_dir() / paths.PROMTOOL
    version = subprocess.run(
        [str(promtool), "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert version.startswith("promtool, version ")
