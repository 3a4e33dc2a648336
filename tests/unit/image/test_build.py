"""What `make image` tags and checks: the version tag, and the wheels the image really holds."""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

from nodegate.image.build import image_tag, stale_distributions, wheel_versions

ROOT = Path(__file__).resolve().parents[3]


def test_the_tag_follows_the_package_version() -> None:
    assert image_tag({"project": {"version": "1.2.3"}}) == "nodegate:1.2.3"


def test_the_shipped_deployment_runs_the_tag_make_image_builds() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    docs = [d for d in yaml.safe_load_all((ROOT / "deploy" / "reconciler.yaml").read_text()) if d]
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    repository, _, tag = container["image"].rpartition(":")
    assert (repository.rsplit("/", 1)[-1], tag) == tuple(image_tag(pyproject).split(":"))


def test_wheel_names_give_canonical_names_and_versions() -> None:
    names = [
        "ruamel_yaml-0.19.1-py3-none-any.whl",
        "PyYAML-6.0.3-cp311-cp311-manylinux_2_17_x86_64.whl",
    ]
    assert wheel_versions(names) == {"ruamel-yaml": "0.19.1", "pyyaml": "6.0.3"}


def test_installed_versions_other_than_the_fed_ones_are_stale() -> None:
    fed = {"pydantic": "2.14.3", "ruamel-yaml": "0.19.1"}
    installed = {
        "nodegate": "0.1.0",
        "pydantic": "2.14.2",
        "ruamel.yaml": "0.19.1",
        "pulumi": "3.0",
    }
    assert stale_distributions(installed, fed, "nodegate") == [
        "pulumi 3.0 (fed nothing)",
        "pydantic 2.14.2 (fed 2.14.3)",
    ]
