"""The container engine at hand: docker when a daemon answers, else podman (installed if need be).

Flags are built by pure functions (unit-tested); the few functions that run the engine are thin.
Containers, including a build's RUN steps, get an explicit runtime and explicit ulimits: on
hosts with hybrid cgroups crun fails where runc works, and a sandboxed host may refuse the
engine's default of raising the open-files limit.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from nodegate.image.errors import ImageError

Say = Callable[[str], None]
EngineName = Literal["docker", "podman"]

RUNTIME = "runc"
CONTAINER_ULIMITS = {"nofile": 4096, "nproc": 4096}
"""Enough for one Python process; capped at the host's hard limits (see `ulimit_flags`)."""
_RLIMITS = {"nofile": resource.RLIMIT_NOFILE, "nproc": resource.RLIMIT_NPROC}

PODMAN_PACKAGES = {"podman": "podman", "buildah": "buildah", "runc": "runc"}
"""Command -> Debian package installed when podman is the engine and a command is missing."""
BASE_PACKAGES = {"mmdebstrap": "mmdebstrap"}
"""Command -> Debian package needed to make a base image from Debian packages."""

PROBE_TIMEOUT_SECONDS = 15
PULL_TIMEOUT_SECONDS = 120


@dataclass(frozen=True)
class Engine:
    """Which engine's command line to speak."""

    name: EngineName


DOCKER = Engine("docker")
PODMAN = Engine("podman")


# -- pure: command lines -------------------------------------------------------------------


def ulimit_flags(hard_limits: Mapping[str, int]) -> list[str]:
    """`--ulimit name=n:n` for each limit, never above the host's hard limit (-1: unlimited)."""
    flags = []
    for name, wanted in CONTAINER_ULIMITS.items():
        hard = hard_limits.get(name, -1)
        value = wanted if hard < 0 else min(wanted, hard)
        flags.append(f"--ulimit={name}={value}:{value}")
    return flags


def build_argv(
    engine: Engine,
    *,
    context: Path,
    dockerfile: Path,
    tag: str,
    iidfile: Path,
    labels: Mapping[str, str],
    hard_limits: Mapping[str, int],
    pip_home: Path | None = None,
    no_cache: bool = False,
    epoch: int | None = None,
) -> list[str]:
    """`build` with the base already local (`--pull=never`).

    `pip_home` (podman only) is mounted read-only as the RUN steps' HOME (/root): pip reads its
    config from there (`.config/pip/pip.conf`, pointing at a wheelhouse beside it), so the build
    needs no network (`--network=none`) and the Dockerfile stays untouched. /root exists in every
    python image, so no mount-point stub is left in a layer, as one would be for a new path.

    `epoch` (podman only; `make release`) makes the build reproducible: the image's creation
    time and every file time in its layers are that second (`--timestamp`), and the RUN steps
    see it as SOURCE_DATE_EPOCH, so pip compiles bytecode checked by hash, not by a file time.
    """
    argv = [engine.name, "build"]
    if engine.name == "podman":
        argv += ["--pull=never", "--runtime", RUNTIME]
    argv += ulimit_flags(hard_limits)
    if pip_home is not None:
        if engine.name != "podman":
            raise ImageError("a wheelhouse can only be mounted into a podman build")
        argv += ["--network=none", "--volume", f"{pip_home}:/root:ro"]
    if no_cache:
        argv.append("--no-cache")
    if epoch is not None:
        if engine.name != "podman":
            raise ImageError("a reproducible build (--timestamp) needs podman")
        argv += ["--timestamp", str(epoch), "--build-arg", f"SOURCE_DATE_EPOCH={epoch}"]
    for key, value in sorted(labels.items()):
        argv += ["--label", f"{key}={value}"]
    argv += ["--iidfile", str(iidfile), "--tag", tag, "--file", str(dockerfile), str(context)]
    return argv


def import_argv(engine: Engine, tarball: Path, image: str, changes: Sequence[str]) -> list[str]:
    """`import` a root filesystem tarball as `image`, with Dockerfile-style config changes."""
    argv = [engine.name, "import"]
    for change in changes:
        argv += ["--change", change]
    return [*argv, str(tarball), image]


def run_isolation_flags(engine: Engine, hard_limits: Mapping[str, int]) -> list[str]:
    """What every `run` on this host needs, whatever the container."""
    return ["--pull=never", "--runtime", RUNTIME, *ulimit_flags(hard_limits)]


# -- shell: the host and the engine -----------------------------------------------------------


def host_hard_limits() -> dict[str, int]:
    """This process's hard limits, which a container's may not exceed."""
    return {name: resource.getrlimit(limit)[1] for name, limit in _RLIMITS.items()}


def docker_answers() -> bool:
    """True if a docker CLI is installed and its daemon answers."""
    if shutil.which("docker") is None:
        return False
    try:
        done = subprocess.run(
            ["docker", "info"], capture_output=True, timeout=PROBE_TIMEOUT_SECONDS, check=False
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def detect_engine(*, install: bool, say: Say) -> Engine:
    """docker if its daemon answers, else podman (installed with apt if `install` allows)."""
    if docker_answers():
        return DOCKER
    ensure_commands(PODMAN_PACKAGES, install=install, say=say, purpose="podman (no docker daemon)")
    return PODMAN


def find_engine() -> Engine:
    """The engine `make image` used, without installing anything (for tests)."""
    if docker_answers():
        return DOCKER
    if shutil.which("podman") is None:
        raise ImageError("no container engine: no docker daemon answers and podman is missing")
    return PODMAN


def ensure_commands(needed: Mapping[str, str], *, install: bool, say: Say, purpose: str) -> None:
    """Install the Debian packages of missing commands, or say exactly what to install."""
    missing = sorted({package for command, package in needed.items() if not shutil.which(command)})
    if not missing:
        return
    command = f"apt-get install {' '.join(missing)}"
    if not install:
        raise ImageError(f"{purpose} needs {', '.join(missing)}: run `{command}`")
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise ImageError(
            f"{purpose} needs {', '.join(missing)}, which can only be installed here as root "
            f"with apt-get: run `sudo {command}` (or start a docker daemon), then `make image`"
        )
    say(f"installing {', '.join(missing)} with apt-get (for {purpose})")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *missing]):
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise ImageError(f"`{' '.join(argv)}` failed:\n{done.stdout[-2000:]}{done.stderr}")


def inspect_image(engine: Engine, ref: str) -> dict[str, Any] | None:
    """The engine's `image inspect` record of `ref`, or None if it has no such image."""
    done = subprocess.run(
        [engine.name, "image", "inspect", ref], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        return None
    records: list[dict[str, Any]] = json.loads(done.stdout)
    return records[0] if records else None


def try_pull(engine: Engine, ref: str) -> str | None:
    """Pull `ref`; None on success, else the engine's last error line."""
    try:
        done = subprocess.run(
            [engine.name, "pull", ref],
            capture_output=True,
            text=True,
            timeout=PULL_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"no answer in {PULL_TIMEOUT_SECONDS} s"
    if done.returncode == 0:
        return None
    lines = (done.stderr or done.stdout).strip().splitlines()
    return lines[-1] if lines else f"exit status {done.returncode}"


def run_checked(argv: Sequence[str], *, what: str, log: Path | None = None) -> None:
    """Run a long step with its output in `log` (or inherited); fail with the output's tail."""
    if log is None:
        done = subprocess.run(list(argv), check=False)
        if done.returncode != 0:
            raise ImageError(f"{what} failed (exit {done.returncode}): {' '.join(argv)}")
        return
    with log.open("w") as out:
        out.write("$ " + " ".join(argv) + "\n")
        out.flush()
        done = subprocess.run(list(argv), stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-30:])
        raise ImageError(f"{what} failed (exit {done.returncode}); log {log}:\n{tail}")
