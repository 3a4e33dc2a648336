"""The real kubelet's pure parts: its cache stands apart from the control plane's, and how it is
started keeps it off the host (private mounts, no iptables on its PATH)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from nodegate.localcluster import build, kubelet, paths
from nodegate.localcluster.kubelet import (
    KUBELET_OWN_DIRS,
    PRIVATE_TMPFS,
    path_without_iptables,
    private_namespace_argv,
)


def test_a_kubelet_build_leaves_the_control_planes_stamp_check_as_it_was(
    cached_control_plane: Path,
) -> None:
    assert not build.kubelet_is_built()

    def fill(staging: Path) -> None:
        for name in paths.KUBELET_BINARIES:
            (staging / name).write_text("")

    build._build_staged(paths.kubelet_dir(), build.kubelet_stamp(), fill)
    assert build.kubelet_is_built()
    assert build.is_built()
    assert json.loads((paths.bin_dir() / paths.STAMP_NAME).read_text()) == build.expected_stamp()
    assert not paths.kubelet_dir().is_relative_to(paths.bin_dir())


def test_the_kubelet_stamp_names_the_fake_cri_source_so_an_edit_rebuilds_it() -> None:
    stamp = build.kubelet_stamp()
    assert set(stamp) == {"kubelet", "fakecri"}
    assert len(stamp["fakecri"]) == 64  # a sha256 of fakecri/main.go


def test_kubelets_path_drops_every_directory_holding_an_iptables_tool(tmp_path: Path) -> None:
    sbin, bin_ = tmp_path / "sbin", tmp_path / "bin"
    sbin.mkdir()
    bin_.mkdir()
    (sbin / "ip6tables").write_text("")
    (bin_ / "mount").write_text("")
    assert path_without_iptables(f"{sbin}:{bin_}:") == str(bin_)


def test_kubelet_execs_in_a_private_mount_namespace_after_hiding_its_own_paths() -> None:
    argv = private_namespace_argv(["/x/kubelet", "--v=2"])
    assert argv[1:5] == ["--mount", "--propagation", "private", "--"]
    script = argv[7]
    for target in PRIVATE_TMPFS:
        assert f"mount -t tmpfs nodegate-kubelet {target}" in script
    assert all(path in script for path in KUBELET_OWN_DIRS)
    assert script.endswith('exec "$0" "$@"')
    assert argv[-2:] == ["/x/kubelet", "--v=2"]


def test_without_root_or_unshare_the_reason_a_kubelet_cannot_run_is_said(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "needs root" in str(kubelet.why_no_kubelet())
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert "unshare" in str(kubelet.why_no_kubelet())
