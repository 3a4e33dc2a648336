"""Sort py-spy's folded stacks of nodegate (`storm.py --profile`) into the stages of a change.

`python -m tests.bench.stacks FILE...` prints, per file, a table: for each stage between the
watch event and the PATCH's answer (where in nodegate a sample was), its share of the samples
and what it was doing there (TLS, JSON, the official client, urllib3, logging, metrics, locks,
nodegate's own code). The stage is the deepest nodegate frame that names one; the kind of work
is the innermost frame below the stage's that names one ("own code" when none does). Pure
text in, text out.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

STAGES: tuple[tuple[str, str], ...] = (
    # (frame substring, stage), looked for from the leaf up: the first match wins.
    ("merge_patch", "write: build the patch"),
    ("describe (", "write: describe the change (Event, log)"),
    ("TokenBucket", "write: write limit"),
    ("QueuedEvents.on_node", "write: queue the Event"),
    ("QueuedEvents._put", "write: queue the Event"),
    ("json_body", "write: decode the answer"),
    ("KubeApi.patch_node", "write: the PATCH (client, HTTP, TLS)"),
    ("FencedApi", "write: fence"),
    ("NodeWriter", "write: metrics, log, Events"),
    ("Informer.put", "write: answer into the cache"),
    ("for_plan", "reconcile: facts"),
    ("plan (", "reconcile: plan"),
    ("NodeReconciler", "reconcile: other"),
    ("Worker.process", "worker: queue bookkeeping, metrics"),
    ("WorkQueue", "queue"),
    ("Worker.run", "queue"),
    ("NodeIntake.slim", "watch: slim the Node"),
    ("NodeIntake.on_event", "watch: is it relevant, enqueue"),
    ("Informer._dispatch", "watch: is it relevant, enqueue"),
    ("KubeApi._events", "watch: read and decode the event"),
    ("Informer", "watch: informer loop"),
    ("QueuedEvents", "Events sender"),
    ("EventRecorder", "Events sender"),
    ("Controller.run", "main loop (resync, records)"),
)
KINDS: tuple[tuple[str, str], ...] = (
    ("ssl.py", "TLS"),
    ("json/decoder.py", "JSON decode"),
    ("json/encoder.py", "JSON encode"),
    ("json/__init__.py", "JSON"),
    ("logging/", "logging"),
    ("kit/logs.py", "logging"),
    ("prometheus_client", "metrics"),
    ("kubernetes/client/api_client.py", "official client"),
    ("kubernetes/client/rest.py", "official client"),
    ("kubernetes/client/api/", "official client"),
    ("pydantic", "official client"),
    ("urllib3", "urllib3"),
    ("http/client.py", "http.client"),
    ("email/", "http.client"),
    ("socket.py", "socket"),
    ("Condition.", "locks, waits"),
    ("Event.wait", "locks, waits"),
    ("Lock", "locks, waits"),
    ("queue.py", "locks, waits"),
)


def classify(stack: str) -> tuple[str, str]:
    """(stage, kind) of one folded stack (frames root first, `;`-separated)."""
    frames = stack.split(";")
    at, stage = next(
        (
            (index, name)
            for index in range(len(frames) - 1, -1, -1)
            for key, name in STAGES
            if key in frames[index]
        ),
        (0, "other"),
    )
    kind = next(
        (name for frame in reversed(frames[at + 1 :]) for key, name in KINDS if key in frame),
        "own code",
    )
    return stage, kind


def tally(lines: Iterable[str]) -> tuple[Counter[str], Counter[tuple[str, str]]]:
    stages: Counter[str] = Counter()
    kinds: Counter[tuple[str, str]] = Counter()
    for line in lines:
        if not line.strip():
            continue
        stack, _, count = line.rstrip("\n").rpartition(" ")
        stage, kind = classify(stack)
        stages[stage] += int(count)
        kinds[(stage, kind)] += int(count)
    return stages, kinds


def table(stages: Counter[str], kinds: Counter[tuple[str, str]]) -> str:
    total = sum(stages.values()) or 1
    rows = [
        "| stage | share of samples | what it was doing (share of the stage) |",
        "|---|---|---|",
    ]
    for stage, count in stages.most_common():
        doing = sorted(((n, k) for (s, k), n in kinds.items() if s == stage), reverse=True)
        parts = ", ".join(f"{k} {100 * n / count:.0f}%" for n, k in doing[:4])
        rows.append(f"| {stage} | {100 * count / total:.1f}% | {parts} |")
    rows.append(f"| (samples) | {total} | |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    for name in argv if argv is not None else sys.argv[1:]:
        print(f"{name}:")
        print(table(*tally(Path(name).read_text().splitlines())))
        print()


if __name__ == "__main__":
    main()
