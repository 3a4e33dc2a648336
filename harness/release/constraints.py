"""`make constraints`: constraints.txt, the runtime lock, from a clean install of the package.

What the image runs and what `make setup` installs beside the development tools must be the same
versions, and two builds of one commit must install the same ones: so the runtime closure of
`nodegate[oci]` (the image's extra) and the build backend are pinned in a committed file. It is
written by installing them into a fresh venv at the versions the development venv holds (the
versions the tests ran; `pip freeze` of that venv is the constraint), then freezing that venv:
only what a user's install needs is pinned, not the development tools.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

CONSTRAINTS_FILE = "constraints.txt"
IMAGE_EXTRAS = ("oci",)
"""The extras the image installs (Dockerfile: `.[oci]`); their closure is pinned too."""
HEADER = """\
# The runtime lock: every distribution `pip install "nodegate[oci]"` installs on CPython 3.11
# (Linux), and the build backend, pinned. Written by `make constraints` (harness/release/
# constraints.py) from a clean venv at the versions the development venv ran the tests with;
# edit pyproject.toml, then regenerate. Used by the image build (Dockerfile, make image),
# `make setup` and `make release` (`pip install -c constraints.txt ...`).
"""


def pins(freeze_output: str, *, leave_out: Sequence[str]) -> dict[str, str]:
    """Canonical name -> version from `pip freeze` lines (`name==version`), without `leave_out`."""
    out: dict[str, str] = {}
    skip = {canonicalize_name(name) for name in leave_out}
    for line in freeze_output.splitlines():
        name, sep, version = line.strip().partition("==")
        if sep and not line.startswith("#") and canonicalize_name(name) not in skip:
            out[canonicalize_name(name)] = version.strip()
    return out


def render(pinned: Mapping[str, str]) -> str:
    """The file: the header, then one `name==version` a line, sorted."""
    return HEADER + "".join(f"{name}=={pinned[name]}\n" for name in sorted(pinned))


def read(path: Path) -> dict[str, str]:
    """The pins of a constraints file."""
    return pins(path.read_text(encoding="utf-8"), leave_out=())


def unmet(pyproject: Mapping[str, Any], pinned: Mapping[str, str]) -> list[str]:
    """Each runtime, image-extra or build requirement the pins leave out or contradict."""
    project = pyproject["project"]
    wanted = [*project["dependencies"], *pyproject["build-system"]["requires"]]
    for extra in IMAGE_EXTRAS:
        wanted += project["optional-dependencies"][extra]
    problems = []
    for text in wanted:
        requirement = Requirement(text)
        version = pinned.get(canonicalize_name(requirement.name))
        if version is None:
            problems.append(f"{requirement}: not pinned")
        elif not requirement.specifier.contains(version, prereleases=True):
            problems.append(f"{requirement}: pinned {version}")
    return problems


def generate(repo: Path) -> str:
    """constraints.txt's text, from a fresh venv (see the module's docstring)."""
    pyproject = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))
    tested = subprocess.run(
        [sys.executable, "-m", "pip", "freeze", "--exclude-editable"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    with tempfile.TemporaryDirectory(prefix="nodegate-constraints-") as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        python = str(venv / "bin" / "python")
        tested_file = Path(tmp) / "tested.txt"
        tested_file.write_text(tested, encoding="utf-8")
        extras = ",".join(IMAGE_EXTRAS)
        subprocess.run(
            [python, "-m", "pip", "install", "--quiet", "--constraint", str(tested_file),
             *pyproject["build-system"]["requires"], f"{repo}[{extras}]"],
            check=True,
        )  # fmt: skip
        frozen = subprocess.run(
            [python, "-m", "pip", "freeze", "--all"], capture_output=True, text=True, check=True
        ).stdout
    pinned = pins(frozen, leave_out=("pip", pyproject["project"]["name"]))
    problems = unmet(pyproject, pinned)
    if problems:
        raise SystemExit("the pins do not meet pyproject.toml: " + "; ".join(problems))
    return render(pinned)


def main() -> None:
    repo = Path.cwd()
    text = generate(repo)
    (repo / CONSTRAINTS_FILE).write_text(text, encoding="utf-8")
    count = sum(1 for line in text.splitlines() if "==" in line and not line.startswith("#"))
    print(f"{CONSTRAINTS_FILE}: {count} pins")


if __name__ == "__main__":
    main()
