"""A stand-in for `python:X.Y-slim` made from Debian packages, for machines with no registry.

The official image is Debian's slim root filesystem plus a Python built from source. Where it
cannot be pulled, `mmdebstrap` builds the same Debian release with Debian's python3 of the same
minor version, and the engine imports it under the official name, so the unchanged Dockerfile
builds with `--pull=never`. What the stand-in provides is what a Dockerfile built on
`python:X.Y-slim` may rely on: `python` and `pip` on PATH, pip installing into the system
(no PEP 668 marker, as in the official image), `python -m venv`, `useradd`, CA certificates,
`LANG=C.UTF-8` and `/usr/local/bin` first on PATH.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from nodegate.image.dockerfile import qualified
from nodegate.image.errors import ImageError

DEBIAN_RELEASE_FOR_PYTHON = {"3.11": "bookworm"}
"""Debian release whose python3 has that minor version; only pairs verified here are listed."""

PACKAGES = (
    "python3",
    "python-is-python3",  # `python`
    "python3-pip",  # `pip`
    "python3-venv",  # `python -m venv` with ensurepip
    "passwd",  # `useradd`
    "ca-certificates",
)
DROPPED_PATHS = ("/usr/share/man/*", "/usr/share/doc/*", "/usr/share/locale/*")
"""Left out of the root filesystem, as Debian's slim images do (copyright files are kept)."""

IMAGE_CONFIG = (
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
    'CMD ["python3"]',
)
"""The official image's config, applied with `import --change`."""

_SLIM = re.compile(r"(?P<python>\d+\.\d+)-slim(?:-(?P<release>[a-z]+))?")


@dataclass(frozen=True)
class DebianBase:
    """The stand-in for one official tag."""

    image: str
    """Fully qualified name it is tagged with, e.g. docker.io/library/python:3.11-slim."""
    release: str
    """Debian release, e.g. bookworm."""
    python: str
    """Python minor version, e.g. 3.11."""


def debian_base_for(image: str) -> DebianBase:
    """The stand-in for `image`, or an error saying which names can be made offline."""
    name = qualified(image)
    repository, _, tag = name.rpartition(":")
    match = _SLIM.fullmatch(tag)
    supported = ", ".join(f"python:{v}-slim[-{r}]" for v, r in DEBIAN_RELEASE_FOR_PYTHON.items())
    fix = f"pull {image} where a registry is reachable, or build FROM one of: {supported}"
    if repository != "docker.io/library/python" or match is None:
        raise ImageError(f"cannot make {image} from Debian packages: {fix}")
    python = match["python"]
    release = DEBIAN_RELEASE_FOR_PYTHON.get(python)
    if release is None or match["release"] not in (None, release):
        raise ImageError(
            f"cannot make {image} from Debian packages: no Debian release in reach ships "
            f"python {python} as {match['release'] or 'its python3'}; {fix}"
        )
    return DebianBase(image=name, release=release, python=python)


def mmdebstrap_argv(base: DebianBase, tarball: Path) -> list[str]:
    """The root filesystem as a tarball: Debian's minbase (what debian:*-slim is built from),
    merged /usr set up as debootstrap does (no usrmerge package and the perl it pulls in)."""
    argv = [
        "mmdebstrap",
        "--variant=minbase",
        "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
        f"--include={','.join(PACKAGES)}",
    ]
    for path in DROPPED_PATHS:
        argv.append(f"--dpkgopt=path-exclude={path}")
    argv.append("--dpkgopt=path-include=/usr/share/doc/*/copyright")
    argv.append(
        f'--customize-hook=rm -f "$1"/usr/lib/python{base.python}/EXTERNALLY-MANAGED'
        ' && rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*'
    )
    argv += [base.release, str(tarball)]
    return argv
