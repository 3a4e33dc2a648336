"""`make release`'s pure parts: the one version, the lock against pyproject.toml, the helm it
packages with, and archives made the same bytes whenever they are built."""

from __future__ import annotations

import gzip
import io
import tarfile
import tomllib
from pathlib import Path

import pytest

from nodegate.release.build import (
    chart_name,
    chart_versions,
    expected_names,
    normalize_tar,
    normalize_tar_gz,
)
from nodegate.release.constraints import pins, read, render, unmet
from nodegate.release.helm import fits, parse_version

ROOT = Path(__file__).resolve().parents[3]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
VERSION = PYPROJECT["project"]["version"]


def test_the_committed_chart_deploys_the_project_version() -> None:
    chart_yaml = (ROOT / "charts" / "nodegate" / "Chart.yaml").read_text(encoding="utf-8")
    assert chart_versions(chart_yaml)[1] == VERSION


def test_the_package_is_named_with_its_version_and_the_chart_with_its_own() -> None:
    assert expected_names("1.2.3") == {
        "sdist": "nodegate-1.2.3.tar.gz",
        "wheel": "nodegate-1.2.3-py3-none-any.whl",
    }
    assert chart_name("0.4.0") == "nodegate-chart-0.4.0.tgz"


def test_the_committed_lock_meets_every_runtime_image_and_build_requirement() -> None:
    # A bound raised in pyproject.toml without `make constraints` fails here, not in the image.
    assert unmet(PYPROJECT, read(ROOT / "constraints.txt")) == []


def test_a_lock_that_contradicts_or_leaves_out_a_requirement_is_named() -> None:
    pyproject = {
        "build-system": {"requires": ["setuptools>=69"]},
        "project": {
            "dependencies": ["typer>=0.29,<0.30", "rich>=13"],
            "optional-dependencies": {"oci": ["oci>=2.164"]},
        },
    }
    pinned = {"typer": "0.30.0", "setuptools": "84.2.1", "oci": "2.189.0"}
    assert unmet(pyproject, pinned) == ["typer<0.30,>=0.29: pinned 0.30.0", "rich>=13: not pinned"]


def test_freeze_lines_become_canonical_pins_without_the_left_out() -> None:
    freeze = "# comment\nruamel.yaml==0.19.1\npip==26.3\nNodegate==0.1.0\n-e git+x#egg=y\n"
    pinned = pins(freeze, leave_out=("pip", "nodegate"))
    assert pinned == {"ruamel-yaml": "0.19.1"}
    assert render(pinned).endswith("\nruamel-yaml==0.19.1\n")


@pytest.mark.parametrize(
    ("printed", "fitting"),
    [
        ("v3.22.0+g1a2b3c4", True),
        ("v3.8.0", True),
        ("v4.3.1+gdeadbee", True),
        ("v3.7.2+g663a896", False),  # before `helm push` to OCI registries was stable
        ("v2.17.0+ga690bad", False),
        ("v5.0.0", False),
        ("not helm", False),
    ],
    ids=["3.22", "3.8", "4.3", "3.7", "2.17", "5.0", "garbage"],
)
def test_a_helm_on_path_fits_from_3_8_through_4(printed: str, fitting: bool) -> None:
    assert fits(parse_version(printed)) is fitting


def _tar_gz(path: Path, mtime: int) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name, body in (("pkg/PKG-INFO", b"Version: 1\n"), ("pkg/a.py", b"x = 1\n")):
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(body), mtime
            info.pax_headers = {"mtime": f"{mtime}.123456"}
            archive.addfile(info, io.BytesIO(body))
    path.write_bytes(gzip.compress(buffer.getvalue(), mtime=mtime))


def test_archives_built_at_two_times_become_the_same_bytes(tmp_path: Path) -> None:
    first, second = tmp_path / "first.tar.gz", tmp_path / "second.tar.gz"
    _tar_gz(first, 1_700_000_000)
    _tar_gz(second, 1_800_000_000)
    assert first.read_bytes() != second.read_bytes()
    for path in (first, second):
        normalize_tar_gz(path, 1_600_000_000)
    assert first.read_bytes() == second.read_bytes()
    with tarfile.open(first) as archive:
        assert [(m.name, m.mtime) for m in archive] == [
            ("pkg/PKG-INFO", 1_600_000_000),
            ("pkg/a.py", 1_600_000_000),
        ]
        handle = archive.extractfile("pkg/a.py")
        assert handle is not None and handle.read() == b"x = 1\n"


def _tar(path: Path, names: list[str], mtime: int) -> None:
    with tarfile.open(path, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name in names:
            info = tarfile.TarInfo(name)
            info.size, info.mtime = 2, mtime
            archive.addfile(info, io.BytesIO(b"{}"))


def test_two_saves_of_one_image_become_the_same_archive(tmp_path: Path) -> None:
    # podman's OCI archive: same manifest and blobs, the save's own file times (and walk order).
    first, second = tmp_path / "first.tar", tmp_path / "second.tar"
    _tar(first, ["oci-layout", "index.json", "blobs/sha256/ab"], 1_700_000_000)
    _tar(second, ["blobs/sha256/ab", "index.json", "oci-layout"], 1_800_000_000)
    for path in (first, second):
        normalize_tar(path, 1_600_000_000)
    assert first.read_bytes() == second.read_bytes()
    with tarfile.open(first) as archive:
        assert archive.getnames() == ["blobs/sha256/ab", "index.json", "oci-layout"]
