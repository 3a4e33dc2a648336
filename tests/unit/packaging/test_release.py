"""The wheel `make release` ships installs into a clean venv, at the versions constraints.txt
pins, and its `nodegate` runs from there: `--version` says pyproject.toml's version and
`validate` checks the example rules. Needs PyPI (or pip's cache) for the dependencies, as the
build backend of test_wheel.py's build does; about 30 s."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest

from nodegate.release.build import build_python

ROOT = Path(__file__).resolve().parents[3]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def _clean_env() -> dict[str, str]:
    """The environment without this venv: no PYTHONPATH, no VIRTUAL_ENV, not on PATH."""
    here = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != here)
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the release's wheel and its pinned dependencies: its bin/."""
    scratch = tmp_path_factory.mktemp("release")
    _, wheel = build_python(ROOT, scratch / "dist", epoch="0")
    target = scratch / "venv"
    venv.create(target, with_pip=False)  # this venv's pip installs into it (`--python`)
    bin_dir = target / "bin"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(bin_dir / "python"), "install", "--quiet",
         "--disable-pip-version-check",
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
