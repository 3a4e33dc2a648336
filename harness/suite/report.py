"""What `make test` prints at its end, from plain data: each phase's time and the slowest tests.

Drift is seen only if every run shows it: a phase that doubles or a test that creeps up is in
the table of the run that made it so, not in a profile somebody has to think of running.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree


@dataclass(frozen=True)
class PhaseResult:
    """One phase as it ran: its name, wall time and exit code, and its tests if it ran any."""

    name: str
    seconds: float
    returncode: int
    tests: TierCount | None = None


@dataclass(frozen=True)
class TierCount:
    """A test tier's outcome, read from its JUnit XML."""

    passed: int
    failed: int
    skipped: int


@dataclass(frozen=True)
class TestTime:
    """One test's time (setup, call and teardown together, as pytest's JUnit XML reports it)."""

    name: str
    seconds: float


def read_junit(path: Path) -> tuple[TierCount, list[TestTime]]:
    """The counts and per-test times of one pytest JUnit XML file."""
    root = ElementTree.parse(path).getroot()
    passed = failed = skipped = 0
    times: list[TestTime] = []
    for case in root.iter("testcase"):
        outcome = {child.tag for child in case}
        if outcome & {"failure", "error"}:
            failed += 1
        elif "skipped" in outcome:
            skipped += 1
        else:
            passed += 1
        module = case.get("classname", "")
        times.append(TestTime(f"{module}::{case.get('name', '')}", float(case.get("time", 0))))
    return TierCount(passed, failed, skipped), times


def slowest(times: Iterable[TestTime], count: int = 20) -> list[TestTime]:
    """The `count` slowest tests, slowest first (ties by name, so the table is stable)."""
    return sorted(times, key=lambda test: (-test.seconds, test.name))[:count]


def _clock(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{rest} s"


def render(phases: Sequence[PhaseResult], slow: Sequence[TestTime], total_seconds: float) -> str:
    """The phase table, the slowest tests, and one closing line of the suite's counts."""
    width = max([len(phase.name) for phase in phases] + [len("total")])
    lines = ["", "make test: time of each phase", ""]
    for phase in phases:
        result = "ok" if phase.returncode == 0 else f"FAILED (exit {phase.returncode})"
        if phase.tests is not None:
            result += f", {phase.tests.passed} passed"
            if phase.tests.failed:
                result += f", {phase.tests.failed} failed"
            if phase.tests.skipped:
                result += f", {phase.tests.skipped} skipped"
        lines.append(f"  {phase.name:<{width}}  {_clock(phase.seconds):>12}  {result}")
    lines.append(f"  {'total':<{width}}  {_clock(total_seconds):>12}")
    if slow:
        lines += ["", f"the {len(slow)} slowest tests (setup, call and teardown)", ""]
        lines += [f"  {test.seconds:8.1f} s  {test.name}" for test in slow]
    counts = [phase.tests for phase in phases if phase.tests is not None]
    passed = sum(count.passed for count in counts)
    failed = sum(count.failed for count in counts)
    skipped = sum(count.skipped for count in counts)
    lines += ["", f"suite: {passed} passed, {failed} failed, {skipped} skipped"]
    return "\n".join(lines) + "\n"
