"""The Ansible collection ships with the package it calls: same version, nothing in the image."""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]


def test_the_collection_version_is_the_package_version() -> None:
    # The lookups import nodegate: a collection and package of different releases disagree.
    galaxy = yaml.safe_load((ROOT / "ansible/nodegate/galaxy.yml").read_text(encoding="utf-8"))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert galaxy["version"] == project["version"]


def test_ansible_is_an_extra_and_stays_out_of_the_image_build_context() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert not any(d.startswith("ansible") for d in project["dependencies"])
    assert any(d.startswith("ansible") for d in project["optional-dependencies"]["ansible"])
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    assert "ansible" in ignored
