"""`python -m nodegate.suite`: run `make test`'s phases in order, time each, print the report.

Run from the clone's root by `make test` (after `make setup`). Exits 0 only when every phase did.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from nodegate.suite import phases, report


def main() -> int:
    bin_dir = Path(sys.executable).parent
    phases.REPORTS.mkdir(parents=True, exist_ok=True)
    for stale in phases.REPORTS.glob("*.xml"):
        stale.unlink()
    started = time.monotonic()
    results: list[report.PhaseResult] = []
    times: list[report.TestTime] = []
    for phase in phases.suite(bin_dir):
        print(f"==> {phase.name}: {' '.join(phase.argv)}", flush=True)
        phase_started = time.monotonic()
        returncode = subprocess.run(phase.argv, check=False).returncode
        seconds = time.monotonic() - phase_started
        tests = None
        if phase.junit is not None and phase.junit.is_file():
            tests, phase_times = report.read_junit(phase.junit)
            times += phase_times
        results.append(report.PhaseResult(phase.name, seconds, returncode, tests))
        if returncode != 0 and not phase.keep_going:
            break
    total = time.monotonic() - started
    print(report.render(results, report.slowest(times), total), end="", flush=True)
    (phases.REPORTS / "phases.json").write_text(
        json.dumps(
            {"total_seconds": round(total, 1)}
            | {result.name: round(result.seconds, 1) for result in results},
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    failed = [result for result in results if result.returncode != 0]
    return failed[0].returncode if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
