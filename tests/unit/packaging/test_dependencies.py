"""Every distribution a shipped module imports is declared in pyproject.toml: in [project]
dependencies, or, for the Pulumi program (nodegate.infra, installed as `nodegate[infra]`), in
the `infra` extra. A module that imports a distribution only another dependency brings in works
until that one drops it: the chart generator nodegate had imported PyYAML, which only the
kubernetes client required."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterator
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[3]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
EXTRAS = {"nodegate.infra": ("infra",)}
"""The extras a shipped package runs with, beyond [project] dependencies."""
MODULE_EXTRAS = {"reconciler/nodes/oci/oci_compute.py": ("oci",)}
"""The extras one module runs with: the `oci` SDK, loaded only when the reconciler is
configured for OCI instance conditions (the image installs the extra)."""


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared(package: str) -> set[str]:
    project = PROJECT["project"]
    requirements = list(project["dependencies"])
    for extra in EXTRAS.get(package, ()):
        requirements += project["optional-dependencies"][extra]
    return {_canonical(Requirement(r).name) for r in requirements}


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    """Every top-level name a module imports (at its top, in a function or under a condition)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name.split(".")[0]) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module.split(".")[0]


def undeclared(declared: dict[str, set[str]]) -> list[str]:
    """Each import of a shipped module whose distribution `declared` (by package) lacks."""
    distributions = packages_distributions()
    found: list[str] = []
    for package, folder in PROJECT["tool"]["setuptools"]["package-dir"].items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            extras = MODULE_EXTRAS.get(str(path.relative_to(ROOT)), ())
            allowed = declared[package] | {
                _canonical(Requirement(r).name)
                for extra in extras
                for r in PROJECT["project"]["optional-dependencies"][extra]
            }
            for line, name in _imports(path):
                if name in sys.stdlib_module_names or name == "nodegate":
                    continue  # the harness, nodegate's other distribution, is import-linter's
                providers = {_canonical(d) for d in distributions.get(name, [])}
                if not providers & allowed:
                    where = f"{path.relative_to(ROOT)}:{line}"
                    found.append(f"{where}: {name} (from {sorted(providers) or 'nothing'})")
    return found


def _all_declared() -> dict[str, set[str]]:
    return {p: _declared(p) for p in PROJECT["tool"]["setuptools"]["package-dir"]}


def test_every_distribution_a_shipped_module_imports_is_declared() -> None:
    assert undeclared(_all_declared()) == []


def test_a_distribution_only_another_dependency_brings_in_is_found() -> None:
    # The check proven once: without its own declaration, urllib3 (which the kubernetes client
    # requires too) is reported where the reconciler's API client imports it.
    declared = {p: names - {"urllib3"} for p, names in _all_declared().items()}
    found = undeclared(declared)
    assert found
    assert all(
        f.startswith("reconciler/kit/") and ": urllib3 (from ['urllib3'])" in f for f in found
    )
