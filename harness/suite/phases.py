"""The phases of `make test`, in order, as plain data: one place says what the suite runs.

Checks and tools are the Makefile's own targets (their commands are declared there once); the
test tiers are pytest runs with a JUnit XML each, so the report can name the slowest tests.
Tiers that start control planes spread their files over pytest-xdist workers, each with its own
control planes: those tests mostly wait (for a Lease, a `for:`, a watch), so more workers than
cores still finish sooner, while the CPU-bound tiers get one worker per core.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPORTS = Path("build/test-reports")
"""Where each tier's JUnit XML and the run's phase times are written (inside the clone)."""


@dataclass(frozen=True)
class Phase:
    """One step of the suite: a name for the report and the command that runs it."""

    name: str
    argv: tuple[str, ...]
    junit: Path | None = None
    """The tier's JUnit XML, for a phase that runs tests."""
    keep_going: bool = False
    """A failed test tier lets the other tiers run (the report then has all of them); a failed
    check or tool stops the suite, since what follows would fail for its reason."""


def _make(target: str) -> tuple[str, ...]:
    return ("make", "--no-print-directory", target)


def cluster_workers() -> int:
    """Workers for the tiers that wait on control planes: `NODEGATE_TEST_WORKERS`, else twice
    the cores (measured on 2 cores: see docs/controlplane.md, "Measured times")."""
    configured = os.environ.get("NODEGATE_TEST_WORKERS", "")
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return 2 * (os.cpu_count() or 1)


def _tier(name: str, paths: tuple[str, ...], bin_dir: Path, workers: int) -> Phase:
    junit = REPORTS / f"{'-'.join(path.removeprefix('tests/') for path in paths)}.xml"
    argv = (str(bin_dir / "pytest"), *paths, f"--junitxml={junit}")
    if workers > 1:
        argv += ("-n", str(workers), "--dist", "worksteal")
    return Phase(f"tests: {name}", argv, junit, keep_going=True)


def suite(bin_dir: Path) -> tuple[Phase, ...]:
    """Every phase of `make test`, in the order they run."""
    cores = os.cpu_count() or 1
    cluster = cluster_workers()
    return (
        Phase("lint and contracts", _make("lint")),
        Phase("types", _make("typecheck")),
        Phase("tools: control plane", _make("controlplane")),
        Phase("tools: kubelet", _make("kubelet")),
        Phase("tools: kubectl", _make("kubectl")),
        Phase("tools: promtool", _make("promtool")),
        Phase("tools: helm, helm-unittest, ct", _make("helm")),
        Phase("tools: karpenter", _make("karpenter")),
        Phase("tools: pulumi engine, python host, kubernetes provider", _make("pulumi-tools")),
        Phase("image", _make("image")),
        _tier("unit, fuzz, pulumi", ("tests/unit", "tests/fuzz", "tests/pulumi"), bin_dir, cores),
        _tier(
            "e2e, ansible, bench smoke",
            ("tests/e2e", "tests/ansible", "tests/bench"),
            bin_dir,
            cluster,
        ),
    )
