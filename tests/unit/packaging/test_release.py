"""What `make release` ships but the image, built from this tree as it builds a commit's: the
sdist and the wheel pass `twine check --strict`, the chart is packaged, every one carries
pyproject.toml's version; and the wheel installs into a clean venv, at the versions
constraints.txt pins, whose `nodegate` says that version and validates the example rules.
Needs PyPI (or pip's cache) for the dependencies, as the build backend of test_wheel.py's build
does; 25-50 s on 2 busy cores."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest

from nodegate.release.build import artifacts_of, chart_name, chart_versions, expected_names

ROOT = Path(__file__).resolve().parents[3]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def _clean_env() -> dict[str, str]:
    """The environment without this venv: no PYTHONPATH, no VIRTUAL_ENV, not on PATH."""
    here = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != here)
    return env


def _copy_of_the_tree(into: Path) -> Path:
    """The files git would see in this tree (tracked or not ignored, as they are now), copied:
    as `make release`'s export, but of the work in progress, and the build's egg-info is
    written there, not beside test_wheel.py's build in the tree."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    return into


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The sdist, the wheel and the chart, as `make release` builds them (from this tree)."""
    tree = _copy_of_the_tree(tmp_path_factory.mktemp("tree"))
    out = tmp_path_factory.mktemp("dist")
    return artifacts_of(tree, out, epoch="0", bin_dir=Path(sys.executable).parent)


def test_every_artifact_is_named_with_its_version(released: list[Path]) -> None:
    chart_yaml = (ROOT / "charts" / "nodegate" / "Chart.yaml").read_text(encoding="utf-8")
    chart_version, _ = chart_versions(chart_yaml)
    names = expected_names(VERSION)
    assert [p.name for p in released] == [names["sdist"], names["wheel"], chart_name(chart_version)]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, released: list[Path]) -> Path:
    """A fresh venv holding the release's wheel and its pinned dependencies: its bin/."""
    scratch = tmp_path_factory.mktemp("release")
    wheel = released[1]
    target = scratch / "venv"
    venv.create(target, with_pip=False)  # this venv's pip installs into it (`--python`)
    bin_dir = target / "bin"
    subprocess.run(
        # --no-compile: bytecode for the kubernetes client's thousands of modules took 40 of
        # the install's 60 s at load 12; the commands below compile what they import.
        [sys.executable, "-m", "pip", "--python", str(bin_dir / "python"), "install", "--quiet",
         "--no-compile", "--disable-pip-version-check",
         "--constraint", str(ROOT / "constraints.txt"), str(wheel)],
        check=True,
        env=_clean_env(),
        timeout=300,
    )  # fmt: skip
    return bin_dir


def _nodegate(bin_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin_dir / "nodegate"), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_clean_env(),
        check=False,
        timeout=60,
    )


def test_the_installed_nodegate_runs_from_the_clean_venv_not_the_tree(installed: Path) -> None:
    where = subprocess.run(
        [str(installed / "python"), "-c", "import nodegate.cli.main as m; print(m.__file__)"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_clean_env(),
        check=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(installed.parent), where


def test_the_installed_nodegate_says_the_project_version(installed: Path) -> None:
    done = _nodegate(installed, "--version")
    assert (done.returncode, done.stdout.strip()) == (0, f"nodegate {VERSION}"), done.stderr


def test_the_installed_nodegate_validates_the_example_rules(installed: Path) -> None:
    done = _nodegate(installed, "validate", "examples/rules.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("examples/rules.yaml: ok ("), done.stdout
