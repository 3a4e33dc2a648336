"""docs/benchmarks.md and its plot, from measured results only."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
from pathlib import Path

from nodegate.localcluster.versions import KUBERNETES_VERSION, KWOK_VERSION
from tests.bench.breakdown import SEGMENTS
from tests.bench.results import LATENCY_CASES, OperatorResult, SizeResult, StormPhase, section_key
from tests.bench.stats import ratio

TARGETS = {
    "steady": "p99 ≤ 100 ms at 5,000 nodes",
    "burst": "p99 ≤ 500 ms at 5,000 nodes, or ≤ 1.5x the floor for the burst",
    "resync": "0 writes",
    "per change": "exactly 1",
    "rss": "≤ 150 MiB at 5,000 nodes",
    "race": "0 with registration taints",
    "ratio p99": "≥ 3x",
    "ratio rss": "≥ 5x",
    "storm": "≤ 1.5x the run with no write limit (1,000 nodes); ≤ 2x the floor (5,000 nodes)",
}
STORM_COLUMNS = ("nodegate", "nodegate-unlimited", "kopf")


def environment() -> dict[str, str]:
    """Machine and versions, as they were when the run ended."""
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    memory_kib = int(Path("/proc/meminfo").read_text().split()[1])
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "machine": f"{os.cpu_count()} cores ({cpu}), {memory_kib / 2**20:.0f} GiB, shared",
        "python": platform.python_version(),
        "nodegate": f"{importlib.metadata.version('nodegate')} (commit {commit or '?'})",
        "kopf": importlib.metadata.version("kopf"),
        "kubernetes client": importlib.metadata.version("kubernetes"),
        "control plane": f"kube-apiserver {KUBERNETES_VERSION}, kwok {KWOK_VERSION}",
    }


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f} ms"


def _p99(result: OperatorResult | None, case: str) -> float | None:
    latency = result.latencies.get(case) if result else None
    return latency.p(99) if latency and latency.samples else None


def _full_gc(result: OperatorResult | None) -> str:
    if result is None or result.full_gc_pauses is None or result.full_gc_seconds is None:
        return "-"
    return f"{result.full_gc_pauses} ({result.full_gc_seconds * 1000:.0f} ms)"


def _race(result: OperatorResult | None, variant: str) -> str:
    race = result.race.get(variant) if result else None
    if race is None:
        return "-"
    return f"{race.bound_before_taint} of {race.joined} ({race.pods_bound} bound)"


def _latency_cell(size: SizeResult, result: OperatorResult | None, case: str) -> str:
    """p50 / p95 / p99, and its p99 as a ratio to the API server's floor: for a burst the
    floor's time for the burst, for a steady change one patch's round trip p99."""
    if result is None:
        return ""
    text = result.latencies[case].cell()
    p99 = _p99(result, case)
    if case.endswith("burst") and p99 is not None and size.burst_floor:
        text += f" ({_times(p99, size.burst_floor)} floor)"
    elif (
        case.endswith("steady") and p99 is not None and size.round_trip and size.round_trip.samples
    ):
        text += f" ({_times(p99, size.round_trip.p(99))} round trip)"
    return text


def size_table(size: SizeResult) -> str:
    ours, theirs = size.operators.get("nodegate"), size.operators.get("kopf")

    def cell(result: OperatorResult | None, text: str) -> str:
        return text if result else "-"

    rows: list[tuple[str, str, str, str, str]] = []
    for case in LATENCY_CASES:
        rows.append(
            (
                f"change → taint, {case}: p50 / p95 / p99 ms",
                cell(ours, _latency_cell(size, ours, case)),
                cell(theirs, _latency_cell(size, theirs, case)),
                ratio(_p99(ours, case), _p99(theirs, case)) + " (p99)",
                TARGETS[case.split(", ")[1]] + "; " + TARGETS["ratio p99"],
            )
        )
    if size.round_trip is not None and size.round_trip.samples:
        rows.append(
            (
                "API server floor: one taint patch's round trip at the steady rate, "
                "p50 / p95 / p99 ms",
                size.round_trip.cell(),
                "",
                "",
                "the steady figures' yardstick: a change takes 2 round trips and 2 watches",
            )
        )
    if size.burst_floor:
        rows.append(
            (
                f"API server floor: {size.burst} taint patches at once, 16 threads",
                _ms(size.burst_floor),
                "",
                "",
                "the bursts' yardstick",
            )
        )
    rows += [
        (
            "cold converge: all N tainted (writes)",
            cell(ours, f"{ours.converge_seconds:.1f} s ({ours.converge_writes})" if ours else ""),
            cell(
                theirs,
                f"{theirs.converge_seconds:.1f} s ({theirs.converge_writes})" if theirs else "",
            ),
            ratio(
                ours.converge_seconds if ours else None,
                theirs.converge_seconds if theirs else None,
            ),
            "",
        ),
        (
            "no-op full resync: wall time (writes)",
            cell(
                ours,
                f"{_ms(ours.resync_seconds)} ({ours.resync_writes})" if ours else "",
            ),
            "n/a: kopf has no periodic resync",
            "",
            TARGETS["resync"],
        ),
        (
            "API writes per real change (409s)",
            cell(ours, _per_change(ours)),
            cell(theirs, _per_change(theirs)),
            ratio(
                ours.writes_per_change if ours else None,
                theirs.writes_per_change if theirs else None,
            ),
            TARGETS["per change"],
        ),
        (
            "peak RSS",
            cell(ours, f"{ours.peak_rss_mib:.0f} MiB" if ours else ""),
            cell(theirs, f"{theirs.peak_rss_mib:.0f} MiB" if theirs else ""),
            ratio(ours.peak_rss_mib if ours else None, theirs.peak_rss_mib if theirs else None),
            TARGETS["rss"] + "; " + TARGETS["ratio rss"],
        ),
        (
            "CPU seconds, whole run (of which cold converge)",
            cell(ours, f"{ours.cpu_seconds:.1f} ({ours.converge_cpu_seconds:.1f})" if ours else ""),
            cell(
                theirs,
                f"{theirs.cpu_seconds:.1f} ({theirs.converge_cpu_seconds:.1f})" if theirs else "",
            ),
            ratio(ours.cpu_seconds if ours else None, theirs.cpu_seconds if theirs else None),
            "",
        ),
        (
            "full garbage collections, whole run: count (pauses in all)",
            _full_gc(ours),
            "n/a: kopf exports no metrics",
            "",
            "each one stops every thread of the operator",
        ),
        (
            "race control: pods bound on joining nodes no rule taints",
            _race(ours, "untainted"),
            "n/a (same nodes)",
            "",
            "all (the race can be seen)",
        ),
        (
            "race: pods bound before the taint, registration taints",
            _race(ours, "registration"),
            "n/a (same node-side taints)",
            "",
            TARGETS["race"],
        ),
        (
            "race: pods bound before the taint, tainted after joining",
            _race(ours, "reconciler"),
            _race(theirs, "reconciler"),
            "",
            "",
        ),
    ]
    header = "| measure | nodegate | kopf baseline | nodegate vs kopf | target |\n"
    header += "| --- | --- | --- | --- | --- |\n"
    body = "".join(f"| {' | '.join(row)} |\n" for row in rows)
    load = " ".join(f"{v:.2f}" for v in size.load_at_start)
    quiet = "quiet" if size.quiet else "**CONTENDED: above the limit after waiting**"
    notes = [n for r in size.operators.values() for n in (f"{r.operator}: {x}" for x in r.notes)]
    lines = [
        f"### {size.nodes:,} nodes{f' ({size.tag})' if size.tag else ''}\n",
        f"Started {size.started}; load average at start {load} ({quiet}); 1-minute load "
        f"average during the run {size.load_during[0]:.1f} mean, {size.load_during[1]:.1f} max "
        "(2 cores; the benchmark's own processes included); "
        f"{size.node_kib:.1f} KiB per Node as returned by the API server; "
        f"background churn {size.heartbeat_events_per_second:.1f} Node status updates/s from "
        f"kwok heartbeats; nodegate `--write-qps {size.write_qps:g} --write-burst "
        f"{size.write_burst}`.\n",
        header + body,
        *(f"* {n}\n" for n in notes),
        f"* nodes tainted not-ready/unreachable by the node-lifecycle controller after all were "
        f"Ready (late kwok heartbeats): {size.lifecycle_tainted_nodes}\n",
        "* control plane over the whole run (peak RSS, CPU seconds): "
        + ", ".join(
            f"{name} {u[0]:.0f} MiB {u[1]:.0f} s" if u else f"{name} gone"
            for name, u in size.control_plane.items()
        )
        + "\n",
    ]
    return "\n".join(lines)


def floor_seconds(size: SizeResult, phase: str) -> float | None:
    """The API server's floor for a storm phase: its fastest plain-client time."""
    times = size.floor.get(phase, {})
    return min(times.values()) if times else None


def _times(seconds: float | None, reference: float | None) -> str:
    """`2.4x` of a reference (how many times as long), or nothing when either is missing."""
    if seconds is None or reference is None or reference <= 0:
        return ""
    return f"{seconds / reference:.1f}x"


def _storm_cell(size: SizeResult, name: str, phase: str) -> str:
    result = size.operators.get(name)
    storm: StormPhase | None = result.storm.get(phase) if result else None
    if storm is None:
        return "-"
    unlimited = size.operators.get("nodegate-unlimited")
    limitless = unlimited.storm.get(phase) if unlimited else None
    parts = [f"{_times(storm.seconds, floor_seconds(size, phase))} floor"]
    if name == "nodegate" and limitless is not None:
        parts.append(f"{_times(storm.seconds, limitless.seconds)} no limit")
    return f"{storm.seconds:.1f} s ({'; '.join(parts)})"


def storm_table(size: SizeResult) -> str:
    """The storm phases beside the API server's own time for the same writes."""
    if not any(r.storm for r in size.operators.values()):
        return ""
    header = (
        f"| storm over {size.nodes:,} nodes | nodegate, defaults | nodegate, no write limit | "
        "kopf baseline | API server floor (" + " / ".join(
            f"{t} threads" for t in sorted(next(iter(size.floor.values()), {}))
        ) + ") | target |\n| --- | --- | --- | --- | --- | --- |\n"
    )  # fmt: skip
    rows = []
    for phase, what in (("taint", "all flipped bad → all tainted"),
                        ("untaint", "all flipped good → all untainted")):  # fmt: skip
        floor = " / ".join(f"{s:.2f} s" for _, s in sorted(size.floor.get(phase, {}).items()))
        rows.append(
            (f"{phase}ing phase: {what}", *(_storm_cell(size, n, phase) for n in STORM_COLUMNS),
             floor or "-", TARGETS["storm"])
        )  # fmt: skip
        alone = size.flips_alone.get(phase)
        rows.append(
            (f"{phase}ing phase: of which sending the flips",
             *(_storm_send(size, n, phase) for n in STORM_COLUMNS),
             f"{alone:.2f} s with no operator" if alone else "", "")
        )  # fmt: skip
        rows.append(
            (f"{phase}ing phase: per node p50 / p90 / p99 ms",
             *(_storm_latency(size, n, phase) for n in STORM_COLUMNS), "", "")
        )  # fmt: skip
    kopf = size.operators.get("kopf")
    ours = size.operators.get("nodegate")
    versus = [
        f"{phase}ing: nodegate {ratio(ours.storm[phase].seconds, kopf.storm[phase].seconds)} "
        "faster than kopf"
        for phase in ("taint", "untaint")
        if ours and kopf and phase in ours.storm and phase in kopf.storm
    ]
    body = "".join(f"| {' | '.join(row)} |\n" for row in rows)
    return header + body + "".join(f"* {v}\n" for v in versus)


def split_table(size: SizeResult) -> str:
    """Where a steady change's time goes (breakdown.py): each stretch per operator."""
    names = [n for n in ("nodegate", "kopf") if size.operators.get(n, None) is not None]
    names = [n for n in names if size.operators[n].steady_split]
    if not names:
        return ""
    header = (
        f"| steady change → taint at {size.nodes:,} nodes, split at the API server (audit log): "
        f"p50 / p95 / p99 ms | {' | '.join(names)} | whose time |\n"
        f"| --- | {' | '.join('---' for _ in names)} | --- |\n"
    )
    rows = [
        (segment, *(size.operators[n].steady_split[segment].cell() for n in names), meaning)
        for segment, meaning in SEGMENTS.items()
    ]
    body = "".join(f"| {' | '.join(row)} |\n" for row in rows)
    return header + body


def _storm_send(size: SizeResult, name: str, phase: str) -> str:
    result = size.operators.get(name)
    storm = result.storm.get(phase) if result else None
    return f"{storm.send_seconds:.1f} s" if storm else "-"


def _storm_latency(size: SizeResult, name: str, phase: str) -> str:
    result = size.operators.get(name)
    storm = result.storm.get(phase) if result else None
    return storm.latency.cell((50, 90, 99)) if storm else "-"


def _per_change(result: OperatorResult | None) -> str:
    if result is None or result.writes_per_change is None:
        return "-"
    return (
        f"{result.writes_per_change:.2f} ({result.change_writes} for {result.changes}; "
        f"{result.change_conflicts} 409s)"
    )


def plot(size: SizeResult, path: Path) -> None:
    """Latency distributions (empirical CDFs) of one size, one panel per kind of change."""
    import matplotlib  # only the report needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"nodegate": "tab:blue", "nodegate-unlimited": "tab:green", "kopf": "tab:orange"}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, kind in zip(axes, ("label", "condition"), strict=True):
        for name, result in size.operators.items():
            for case, style in ((f"{kind}, steady", "-"), (f"{kind}, burst", "--")):
                if case not in result.latencies:  # the no-limit run measures the storm only
                    continue
                samples = sorted(result.latencies[case].samples)
                if not samples:
                    continue
                ys = [(i + 1) / len(samples) for i in range(len(samples))]
                label = f"{name}, {case.split(', ')[1]} (n={len(samples)})"
                ax.step(samples, ys, style, where="post", color=colours[name], label=label)
        ax.axvline(0.5, color="grey", linewidth=0.8, linestyle=":")
        ax.set_xscale("log")
        ax.set_ylim(0, 1.01)
        ax.set_title(f"{size.nodes:,} nodes: {kind} flip → taint seen by a watcher")
        ax.set_xlabel("seconds, log scale (dotted: 500 ms target)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    axes[0].set_ylabel("share of changes at or below")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def section(size: SizeResult, env: dict[str, str], plot_name: str) -> str:
    """One size's section of docs/benchmarks.md: how it was run, the table, the plot."""
    machine = "".join(f"* {key}: {value}\n" for key, value in env.items())
    storm = storm_table(size)
    steady = split_table(size)
    return (
        f"{size_table(size)}\n{steady + chr(10) if steady else ''}"
        f"{storm + chr(10) if storm else ''}{machine}"
        f"* command: `{size.command}`\n\n"
        f"![latency distributions at {size.nodes:,} nodes]({plot_name})\n"
    )


def artefact_path(doc: Path, key: str, suffix: str) -> Path:
    """Where a run's plot or raw results go: docs/benchmarks/benchmarks-1000.png for
    docs/benchmarks.md, a folder of their own beside the document."""
    return doc.parent / doc.stem / f"{doc.stem}-{key}.{suffix}"


def update_document(doc: Path, size: SizeResult, env: dict[str, str]) -> str:
    """Write this size's plot in the artefacts folder beside `doc` (`artefact_path`) and replace
    its section (between markers) in it, keeping everything else (the hand-written analysis) as
    it is. Returns the section."""
    key = section_key(size)
    plot_path = artefact_path(doc, key, "png")
    plot_path.parent.mkdir(parents=True, exist_ok=True)
    plot(size, plot_path)
    text = section(size, env, plot_path.relative_to(doc.parent).as_posix())
    begin, end = f"<!-- bench:{key}:begin -->", f"<!-- bench:{key}:end -->"
    current = doc.read_text() if doc.exists() else HEADER
    if begin in current and end in current:
        head, rest = current.split(begin, 1)
        tail = rest.split(end, 1)[1]
        updated = f"{head}{begin}\n{text}{end}{tail}"
    else:
        updated = f"{current.rstrip()}\n\n{begin}\n{text}{end}\n"
    doc.write_text(updated)
    return text


HEADER = """# Benchmarks: nodegate and a kopf operator on the same nodes

Generated by `make bench` (`tests/bench/`, README there); each size's section is rewritten by
its run, every figure in it measured in that run.
"""
