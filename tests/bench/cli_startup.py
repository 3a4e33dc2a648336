"""How long the `nodegate` command takes to start: a user's `--help`, a TAB, a `validate`.

`python -m tests.bench.cli_startup` (`make bench-cli`, also part of `make bench`): runs each
command below `--runs` times (10) as a user's shell does, a new process each time, round-robin
so a burst of load elsewhere spreads over every command alike, and prints the wall clock from
process start to exit (min, median, max) and the median CPU time (user + system, which moves
less with the machine's load) beside `python -c pass` and issue 61's targets. `--nodegate PATH`
times another executable (a script running another tree's CLI: a before and after). The
targets are measured here, never asserted: a shared machine's load moves them, so the load
average at start and during the run is printed with the table. What the commands must not
import is a test (tests/unit/cli/test_lazy_commands.py), not a timing.

Also timed: importing the reconciler's entry point (`nodegate.reconciler.main`, with the
Kubernetes client; the webhook's server is imported only when the webhook is on), part of a
restart's time to ready (the client's API classes load their models later, as it builds).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "examples" / "rules.yaml"
NODE = ROOT / "examples" / "nodes" / "gpu-node.yaml"


@dataclass(frozen=True)
class Case:
    """One command line, timed from process start to exit."""

    name: str
    argv: tuple[str, ...]
    target: float | None = None
    """Issue 61's target in seconds, if it sets one."""
    env: Mapping[str, str] = field(default_factory=dict)


def completion(*words: str) -> Mapping[str, str]:
    """The environment bash's completion function gives `nodegate` for `nodegate WORDS<TAB>`."""
    line = ["nodegate", *words]
    return {
        "_NODEGATE_COMPLETE": "complete_bash",
        "COMP_WORDS": " ".join(line),
        "COMP_CWORD": str(len(line) - 1),
    }


def cases(python: str, nodegate: str) -> tuple[Case, ...]:
    return (
        Case("python -c pass", (python, "-c", "pass")),
        Case("nodegate --help", (nodegate, "--help"), 0.25),
        Case("nodegate <TAB>", (nodegate,), 0.25, completion("")),
        Case("nodegate validate --<TAB>", (nodegate,), 0.25, completion("validate", "--")),
        Case("nodegate render --<TAB>", (nodegate,), 0.25, completion("render", "--")),
        Case("nodegate explain --<TAB>", (nodegate,), 0.25, completion("explain", "--")),
        Case("nodegate plan --<TAB>", (nodegate,), 0.25, completion("plan", "--")),
        Case("nodegate status --<TAB>", (nodegate,), 0.25, completion("status", "--")),
        Case("nodegate --version", (nodegate, "--version")),
        Case("nodegate validate examples/rules.yaml", (nodegate, "validate", str(RULES)), 0.35),
        Case(
            "nodegate render --pool gpu",
            (nodegate, "render", "--rules", str(RULES), "--pool", "gpu"),
        ),
        Case(
            "nodegate explain --node FILE",
            (nodegate, "explain", "--node", str(NODE), "--rules", str(RULES)),
        ),
        Case("nodegate reconcile --help", (nodegate, "reconcile", "--help")),
        Case(
            "import nodegate.reconciler.main",
            (python, "-c", "import nodegate.reconciler.main"),
        ),
    )


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(case: Case) -> tuple[float, float]:
    """(wall clock, CPU time: user + system) of one run, in seconds. The CPU time moves less
    with the machine's load than the wall clock, which includes waiting for a core."""
    env = {**os.environ, **case.env}
    cpu, started = _children_cpu(), time.monotonic()
    done = subprocess.run(case.argv, env=env, capture_output=True, check=False, timeout=120)
    seconds, cpu = time.monotonic() - started, _children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"{case.name}: exit {done.returncode}\n{done.stderr.decode()}")
    return seconds, cpu


def table(results: list[tuple[Case, list[tuple[float, float]]]]) -> str:
    lines = [
        "| command | min s | median s | max s | median CPU s | target s |",
        "|---|---|---|---|---|---|",
    ]
    for case, runs in results:
        seconds = [wall for wall, _ in runs]
        cpu = statistics.median(used for _, used in runs)
        target = f"< {case.target:.2f}" if case.target is not None else ""
        lines.append(
            f"| `{case.name}` | {min(seconds):.3f} | {statistics.median(seconds):.3f} "
            f"| {max(seconds):.3f} | {cpu:.3f} | {target} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--max-load", type=float, default=2.0)
    parser.add_argument("--load-wait-minutes", type=float, default=10.0)
    parser.add_argument(
        "--nodegate",
        help="the nodegate executable to time (default: the one beside this Python), e.g. a "
        "script running another tree's CLI, for a before/after",
    )
    args = parser.parse_args(argv)
    from tests.bench.run import LoadSampler, wait_for_quiet  # its imports are for `make bench`

    python = sys.executable
    nodegate = args.nodegate or str(Path(python).parent / "nodegate")
    load, quiet = wait_for_quiet(args.max_load, args.load_wait_minutes * 60)
    loads = LoadSampler()
    loads.start()
    started = time.monotonic()
    runs = cases(python, nodegate)
    for case in runs:  # once untimed: the byte-code caches are written, as on a user's second run
        timed(case)
    results: list[tuple[Case, list[tuple[float, float]]]] = [(case, []) for case in runs]
    for _ in range(args.runs):
        for case, measured in results:
            measured.append(timed(case))
    loads.stop()
    mean, peak = loads.summary()
    during = (
        f"during the run {mean:.1f} mean, {peak:.1f} max (every 10 s)"
        if loads.samples
        else "not sampled during the run (shorter than 10 s)"
    )
    print(table(results))
    print()
    print(
        f"* {args.runs} runs of each, round-robin; {os.cpu_count()} cores; 1-minute load "
        f"average at start {load[0]:.2f} ({'quiet' if quiet else 'CONTENDED'}), {during}; "
        f"whole run {time.monotonic() - started:.0f} s; Python {sys.version.split()[0]}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
