"""The wheelhouse fed to the build: the project's requirements at the venv's versions."""

from __future__ import annotations

from pathlib import Path

from nodegate.image.wheelhouse import (
    IMAGE_EXTRAS,
    constraints,
    pip_config,
    requirements,
    wheelhouse_key,
)

PYPROJECT = {
    "build-system": {"requires": ["setuptools>=69", "wheel"]},
    "project": {"dependencies": ["pydantic>=2.7,<3", "kubernetes>=30"]},
}


def test_requirements_are_the_build_backend_and_the_runtime_dependencies_only() -> None:
    with_extras = {**PYPROJECT, "optional-dependencies": {"infra": ["pulumi"]}}
    assert requirements(with_extras) == [
        "setuptools>=69",
        "wheel",
        "pydantic>=2.7,<3",
        "kubernetes>=30",
    ]


def test_constraints_keep_only_pins() -> None:
    freeze = (
        "pydantic==2.14.3\n# comment\nfoo @ file:///tmp/foo\n-e git+https://x#egg=y\nrich==15.0.0\n"
    )
    assert constraints(freeze) == "pydantic==2.14.3\nrich==15.0.0\n"


def test_the_key_changes_with_any_pin_or_the_python() -> None:
    reqs = requirements(PYPROJECT)
    key = wheelhouse_key(reqs, "rich==15.0.0\n", "cp311")
    assert key == wheelhouse_key(reqs, "rich==15.0.0\n", "cp311")
    assert key != wheelhouse_key(reqs, "rich==15.0.1\n", "cp311")
    assert key != wheelhouse_key(reqs, "rich==15.0.0\n", "cp312")
    assert key != wheelhouse_key([*reqs, "typer"], "rich==15.0.0\n", "cp311")


def test_pip_in_the_build_reads_only_the_mounted_wheelhouse() -> None:
    assert pip_config() == "[global]\nno-index = true\nfind-links = /root/wheelhouse\n"


def test_the_image_extras_requirements_are_built_and_no_other_extras() -> None:
    project = {
        **PYPROJECT["project"],
        "optional-dependencies": {"oci": ["oci>=2.164"], "infra": ["pulumi"]},
    }
    reqs = requirements({**PYPROJECT, "project": project})
    assert "oci>=2.164" in reqs and "pulumi" not in reqs


def test_the_dockerfile_installs_exactly_the_image_extras() -> None:
    dockerfile = (Path(__file__).resolve().parents[3] / "Dockerfile").read_text()
    assert f'install --no-cache-dir ".[{",".join(IMAGE_EXTRAS)}]"' in dockerfile
