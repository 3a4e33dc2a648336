"""One file out of a Debian package, cached: a tool's cheapest honest source where Debian ships it.

promtool from Debian's `prometheus` package arrives in seconds where the Go module build takes
about 11 minutes on 2 cores. The package is never installed (that would also install and, under
systemd, start a Prometheus server): `apt-get download` fetches the .deb and `dpkg-deb -x`
unpacks it in a scratch directory, from which only the wanted file is kept.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from nodegate.localcluster.gotool import Say

_CANDIDATE = re.compile(r"^\s*Candidate:\s*(\S+)\s*$", re.MULTILINE)
_UPSTREAM = re.compile(r"^(?:\d+:)?(\d+)\.(\d+)")


class DebianPackageError(RuntimeError):
    """The package could not be had; the message says what was run and what it answered."""


@dataclass(frozen=True)
class DebianFile:
    """A file inside a Debian package, and the oldest upstream release whose copy will do."""

    package: str
    path_in_package: str
    minimum: tuple[int, int]


def apt_available() -> bool:
    """True on a machine where Debian's package tools answer (apt-get, apt-cache, dpkg-deb)."""
    return all(shutil.which(tool) for tool in ("apt-get", "apt-cache", "dpkg-deb"))


def upstream_release(debian_version: str) -> tuple[int, int] | None:
    """`(2, 42)` for `2.42.0+ds-5+deb12u1` (an epoch such as `1:` skipped); None if unreadable."""
    match = _UPSTREAM.match(debian_version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def candidate_version(package: str, *, refresh: bool) -> str | None:
    """The version `apt-get` would fetch, `refresh`ing the package lists first (root only)."""
    if refresh:
        _run(["apt-get", "update", "-qq"], "refresh Debian's package lists")
    return parse_candidate(_run(["apt-cache", "policy", package], f"ask apt-cache about {package}"))


def parse_candidate(policy: str) -> str | None:
    """The `Candidate:` of `apt-cache policy` output; None when there is none."""
    match = _CANDIDATE.search(policy)
    if match is None or match.group(1) == "(none)":
        return None
    return match.group(1)


def resolve(wanted: DebianFile, *, is_root: bool) -> str:
    """The package version to take: apt's candidate, new enough for `wanted`. Lists never
    refreshed (a new machine's) are refreshed once with `apt-get update`, which only root may run.
    """
    version = candidate_version(wanted.package, refresh=False)
    if (version is None or not new_enough(version, wanted)) and is_root:
        version = candidate_version(wanted.package, refresh=True)
    if version is None:
        raise DebianPackageError(f"Debian offers no package {wanted.package!r} here")
    if not new_enough(version, wanted):
        least = ".".join(map(str, wanted.minimum))
        raise DebianPackageError(
            f"Debian's {wanted.package} {version} is older than {least}, which the tests need"
        )
    return version


def extract(wanted: DebianFile, version: str, target: Path, say: Say) -> None:
    """Copy `wanted` out of its package at `version` into `target`, installing nothing."""
    say(f"  fetching {wanted.package} {version} from Debian for {wanted.path_in_package}")
    with tempfile.TemporaryDirectory(prefix="nodegate-deb-") as scratch:
        _run(
            ["apt-get", "download", "-qq", f"{wanted.package}={version}"],
            f"download {wanted.package} {version}",
            cwd=Path(scratch),
        )
        debs = sorted(Path(scratch).glob("*.deb"))
        if len(debs) != 1:
            raise DebianPackageError(f"apt-get download left {len(debs)} .deb files, not 1")
        unpacked = Path(scratch) / "root"
        _run(["dpkg-deb", "-x", str(debs[0]), str(unpacked)], f"unpack {debs[0].name}")
        source = unpacked / wanted.path_in_package.lstrip("/")
        if not source.is_file():
            raise DebianPackageError(f"{debs[0].name} holds no {wanted.path_in_package}")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


def new_enough(version: str, wanted: DebianFile) -> bool:
    """True when the package's upstream release is at least `wanted.minimum`."""
    release = upstream_release(version)
    return release is not None and release >= wanted.minimum


def _run(argv: list[str], what: str, cwd: Path | None = None) -> str:
    result = subprocess.run(
        argv, cwd=cwd, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL
    )
    if result.returncode != 0:
        raise DebianPackageError(
            f"could not {what}: `{' '.join(argv)}` exited {result.returncode}:\n"
            f"{result.stderr.strip() or result.stdout.strip()}"
        )
    return result.stdout
