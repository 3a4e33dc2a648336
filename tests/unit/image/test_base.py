"""The offline stand-in for python:X.Y-slim, made with mmdebstrap from Debian packages."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodegate.image.base import DebianBase, debian_base_for, mmdebstrap_argv
from nodegate.image.errors import ImageError


@pytest.mark.parametrize("tag", ["python:3.11-slim", "python:3.11-slim-bookworm"])
def test_python_311_slim_is_made_from_bookworm(tag: str) -> None:
    assert debian_base_for(tag) == DebianBase(
        image=f"docker.io/library/{tag}", release="bookworm", python="3.11"
    )


@pytest.mark.parametrize(
    "tag",
    [
        "python:3.12-slim",  # no Debian release in reach ships it
        "python:3.11-slim-trixie",  # trixie's python3 is 3.13
        "python:3.11",  # not the slim variant
        "python:3.11.9-slim",  # Debian's patch version differs
        "debian:bookworm-slim",
        "ghcr.io/acme/python:3.11-slim",
    ],
)
def test_other_bases_are_refused_with_the_fix(tag: str) -> None:
    with pytest.raises(ImageError, match=rf"cannot make {tag} .*pull {tag} where a registry"):
        debian_base_for(tag)


def test_rootfs_has_what_the_dockerfile_relies_on_and_no_pep668_marker() -> None:
    argv = mmdebstrap_argv(debian_base_for("python:3.11-slim"), Path("/out/rootfs.tar"))
    included = next(a for a in argv if a.startswith("--include=")).split("=", 1)[1].split(",")
    assert {"python3", "python-is-python3", "python3-pip", "python3-venv", "passwd"} <= set(
        included
    )
    assert "--variant=minbase" in argv
    assert any('rm -f "$1"/usr/lib/python3.11/EXTERNALLY-MANAGED' in a for a in argv)
    assert argv[-2:] == ["bookworm", "/out/rootfs.tar"]
