"""Wheels built on the host and fed to the build, so a podman build needs no network at all.

The wheels are the runtime dependencies (and the build backend) at the versions the committed
lock, constraints.txt, pins (`make constraints`); `make setup` installs the same versions into
the venv that runs the test suite, so the image runs what the tests ran, and two builds of one
commit are fed the same wheels. They reach the build as pip configuration in the RUN steps'
HOME (see `engine.build_argv`), so the Dockerfile stays a normal one that `docker build` runs
with PyPI.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from nodegate.image.engine import Say
from nodegate.image.errors import ImageError

HOME_IN_BUILD = "/root"
WHEELHOUSE_DIR = "wheelhouse"
PIP_CONF = Path(".config") / "pip" / "pip.conf"
KEY_FILE = "wheelhouse.key"


IMAGE_EXTRAS = ("oci",)
"""The extras the Dockerfile installs (`pip install ".[oci]"`): the reconciler can be configured
to read OCI instance state, so its image carries the `oci` SDK."""


def requirements(pyproject: Mapping[str, Any]) -> list[str]:
    """What a build of the project installs: its build backend, its runtime dependencies and
    those of the image's extras."""
    project = pyproject.get("project", {})
    build: list[str] = list(pyproject.get("build-system", {}).get("requires", []))
    runtime: list[str] = list(project.get("dependencies", []))
    optional = project.get("optional-dependencies", {})
    extras = [req for extra in IMAGE_EXTRAS for req in optional.get(extra, [])]
    return [*build, *runtime, *extras]


def constraints(freeze_output: str) -> str:
    """`pip freeze` (or constraints.txt) lines usable as constraints: name==version pins only."""
    pins = [line.strip() for line in freeze_output.splitlines()]
    return "".join(f"{pin}\n" for pin in pins if "==" in pin and not pin.startswith("#"))


def pip_config() -> str:
    """pip.conf for the build's RUN steps: the mounted wheelhouse and nothing else."""
    return f"[global]\nno-index = true\nfind-links = {HOME_IN_BUILD}/{WHEELHOUSE_DIR}\n"


def wheelhouse_key(reqs: Sequence[str], pins: str, python_tag: str) -> str:
    """Changes exactly when the wheels would: requirements, pinned versions, Python."""
    digest = hashlib.sha256("\n".join([python_tag, *reqs, pins]).encode())
    return digest.hexdigest()[:16]


def pip_wheel_argv(
    python: str, wheel_dir: Path, constraints_file: Path, reqs: Sequence[str]
) -> list[str]:
    """Wheels for `reqs` and everything they need, at the pinned versions."""
    return [
        python,
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--wheel-dir",
        str(wheel_dir),
        "--constraint",
        str(constraints_file),
        *reqs,
    ]


def prepare_pip_home(
    home: Path, pyproject: Mapping[str, Any], lock: str, image_python: str, say: Say
) -> str:
    """Fill `home` with the wheelhouse and pip.conf unless its key is current; return the key.

    `lock`: constraints.txt's text. Runs under the venv's interpreter; wheels built for its
    Python must suit the image's.
    """
    host_python = f"{sys.version_info.major}.{sys.version_info.minor}"
    if host_python != image_python:
        raise ImageError(
            f"the image runs python {image_python} but wheels would be built with {host_python} "
            f"({sys.executable}): recreate the venv with python{image_python} "
            f"(`make clean && make PYTHON=python{image_python} image`)"
        )
    reqs = requirements(pyproject)
    pins = constraints(lock)
    key = wheelhouse_key(reqs, pins, f"cp{host_python.replace('.', '')}")
    key_file = home.parent / KEY_FILE
    if key_file.is_file() and key_file.read_text().strip() == key and (home / PIP_CONF).is_file():
        return key
    say(f"building the wheelhouse for {len(reqs)} requirements at constraints.txt's versions")
    key_file.unlink(missing_ok=True)
    shutil.rmtree(home, ignore_errors=True)
    (home / PIP_CONF).parent.mkdir(parents=True)
    constraints_file = home.parent / "constraints.txt"
    constraints_file.write_text(pins)
    done = subprocess.run(
        pip_wheel_argv(sys.executable, home / WHEELHOUSE_DIR, constraints_file, reqs),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise ImageError(f"pip wheel failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
    (home / PIP_CONF).write_text(pip_config())
    key_file.write_text(key + "\n")
    return key
