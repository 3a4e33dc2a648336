"""Which images a Dockerfile builds FROM, and the names the engine gives them."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodegate.image.dockerfile import external_bases, qualified
from nodegate.image.errors import ImageError

ROOT = Path(__file__).resolve().parents[3]


def test_the_repository_dockerfile_builds_from_python_slim_only() -> None:
    assert external_bases((ROOT / "Dockerfile").read_text()) == ["python:3.11-slim"]


def test_stage_names_and_scratch_are_not_external_bases() -> None:
    text = "FROM python:3.11-slim AS build\nFROM build AS test\nFROM scratch\nFROM test\n"
    assert external_bases(text) == ["python:3.11-slim"]


def test_build_args_and_platform_flags_are_resolved() -> None:
    text = "ARG PY=3.11\nFROM --platform=$BUILDPLATFORM python:${PY}-slim AS b\nFROM b\n"
    assert external_bases(text) == ["python:3.11-slim"]


def test_a_dockerfile_without_from_is_refused_naming_the_file() -> None:
    with pytest.raises(ImageError, match=r"^my/Dockerfile: no FROM line"):
        external_bases("RUN true\n", source="my/Dockerfile")


@pytest.mark.parametrize(
    ("short", "full"),
    [
        ("python:3.11-slim", "docker.io/library/python:3.11-slim"),
        ("python", "docker.io/library/python:latest"),
        ("bitnami/kubectl:1.30", "docker.io/bitnami/kubectl:1.30"),
        ("ghcr.io/org/img:1", "ghcr.io/org/img:1"),
        ("localhost/nodegate:0.1.0", "localhost/nodegate:0.1.0"),
        ("registry:5000/img", "registry:5000/img:latest"),
        ("python@sha256:abc", "docker.io/library/python@sha256:abc"),
    ],
    ids=lambda value: value,
)
def test_short_names_are_qualified_as_docker_does(short: str, full: str) -> None:
    assert qualified(short) == full
