"""The distribution users install: one `nodegate` namespace, templates and examples included."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )
    [built] = out.glob("nodegate-*.whl")
    return built


@pytest.fixture(scope="module")
def wheel_files(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def test_wheel_claims_only_the_nodegate_namespace(wheel_files: set[str]) -> None:
    top_level = {name.split("/")[0] for name in wheel_files if not name.startswith("nodegate-")}
    assert top_level == {"nodegate"}


def test_wheel_ships_templates_and_examples(wheel_files: set[str]) -> None:
    shipped = {n for n in wheel_files if n.endswith((".j2", ".yaml"))}
    assert {
        "nodegate/templates/oke_bootstrap.sh.j2",
        "nodegate/templates/user_data.mime.j2",
        "nodegate/examples/rules.yaml",
        "nodegate/examples/nodes/gpu-node.yaml",
    } <= shipped


def test_every_package_is_typed(wheel_files: set[str]) -> None:
    packages = {n.rsplit("/", 1)[0] for n in wheel_files if n.endswith("/__init__.py")}
    assert all(f"{p}/py.typed" in wheel_files for p in packages)


def test_wheel_ships_the_grafana_dashboard(wheel_files: set[str]) -> None:
    # `nodegate manifests --dashboard` reads it from the installed package.
    assert "nodegate/manifests/grafana-dashboard.json" in wheel_files


def test_wheel_ships_no_harness(wheel_files: set[str]) -> None:
    # The local control plane, the image builder and the demo story live in harness/, a
    # distribution of their own that the image never installs.
    packages = {n.split("/")[1] for n in wheel_files if n.startswith("nodegate/")}
    assert "core" in packages
    assert not packages & {"localcluster", "image", "demo"}


def test_the_nodegate_command_loads_no_harness_module() -> None:
    # `nodegate reconcile` (the image's entry point) imports the whole CLI: none of it may pull
    # in the harness, which is not in the image.
    program = (
        "import sys, nodegate.cli.main;"
        "print(sorted(m for m in sys.modules if m.startswith("
        "('nodegate.localcluster', 'nodegate.image', 'nodegate.demo'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_the_wheel_installs_the_kubectl_plugin_and_its_completion(wheel: Path) -> None:
    # kubectl finds `kubectl nodegate` by the executable's name, `kubectl-nodegate`, on PATH,
    # and completes it by running `kubectl_complete-nodegate`.
    with zipfile.ZipFile(wheel) as archive:
        [name] = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
        scripts = archive.read(name).decode()
    assert "kubectl-nodegate = nodegate.cli.main:app" in scripts
    assert "kubectl_complete-nodegate = nodegate.cli.main:kubectl_complete" in scripts
