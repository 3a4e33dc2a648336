"""The helm that packages the chart: the one on PATH when its version fits, else the pinned one
the harness builds from its Go module (`make helm`).

`python -m nodegate.release.helm` prints its path (what it did goes to stderr), for `make chart`
and `make release`. Fits: helm 3.8 or later (the release `helm push` to an OCI registry became
stable in), or helm 4; the chart is `apiVersion: v2` with a values schema, which both read.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from nodegate.localcluster.build import ensure_helm_built

OLDEST_FITTING = (3, 8)
NEWEST_MAJOR = 4


def parse_version(text: str) -> tuple[int, int, int] | None:
    """`v3.22.0+g1a2b3c4` (what `helm version --short` prints) -> (3, 22, 0)."""
    found = re.search(r"v?(\d+)\.(\d+)\.(\d+)", text)
    if found is None:
        return None
    major, minor, patch = (int(part) for part in found.groups())
    return major, minor, patch


def fits(version: tuple[int, int, int] | None) -> bool:
    """True for helm 3.8+ and 4.x."""
    return version is not None and version[:2] >= OLDEST_FITTING and version[0] <= NEWEST_MAJOR


def on_path() -> tuple[Path, str] | None:
    """The helm on PATH and what it says its version is, if there is one that answers."""
    found = shutil.which("helm")
    if found is None:
        return None
    done = subprocess.run(
        [found, "version", "--short"], capture_output=True, text=True, check=False, timeout=30
    )
    if done.returncode != 0:
        return None
    return Path(found), done.stdout.strip()


def helm_for_packaging() -> Path:
    """A helm on PATH that fits, else the harness's pinned helm (built first if not cached)."""

    def tell(line: str) -> None:
        print(f"helm: {line}", file=sys.stderr, flush=True)

    found = on_path()
    if found is not None:
        path, version = found
        if fits(parse_version(version)):
            tell(f"using {path} ({version}) from PATH")
            return path
        tell(f"{path} on PATH is {version}, not 3.8+ or 4.x: using the pinned helm instead")
    return ensure_helm_built(tell)


def main() -> None:
    print(helm_for_packaging())


if __name__ == "__main__":
    main()
