"""Run the local `go` tool unattended, with progress lines and a full log.

A cold Kubernetes build runs for many minutes without a word from `go`, which looks like a hang
in CI; `go build -v` names each package as it compiles, so counting those lines gives a
heartbeat without flooding the output.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

Say = Callable[[str], None]

HEARTBEAT_SECONDS = 30.0
_TAIL_LINES = 60


class GoError(RuntimeError):
    """A `go` command failed; the message carries the tail of its output."""


def find_go() -> str:
    """`$GO`, then `go` on PATH, then the standard install location (CI shells may lack it)."""
    configured = os.environ.get("GO")
    if configured:
        return configured
    on_path = shutil.which("go")
    if on_path:
        return on_path
    fallback = Path("/usr/local/go/bin/go")
    if fallback.exists():
        return str(fallback)
    raise GoError("no Go toolchain: install Go or set $GO to the go binary")


def go_environment() -> dict[str, str]:
    """The environment every `go` call gets.

    `GOTOOLCHAIN=local` makes a too-new `go` line fail loudly instead of downloading a toolchain
    (only the module proxy is reachable); `GOWORK=off` and an empty `GOFLAGS` keep a developer's
    own Go settings from changing what gets built.
    """
    env = dict(os.environ)
    env.update(
        {
            "GOTOOLCHAIN": "local",
            "CGO_ENABLED": "0",
            "GOWORK": "off",
            "GOFLAGS": "-buildvcs=false",
        }
    )
    return env


def run_go(
    args: Sequence[str],
    *,
    cwd: Path,
    log_path: Path,
    label: str,
    say: Say,
    env: Mapping[str, str] | None = None,
) -> None:
    """Run `go ARGS` in `cwd`, teeing output to `log_path` and printing a heartbeat (`env`:
    variables added to `go_environment()`, e.g. a `go run` generator's `VERSION`)."""
    command = [find_go(), *args]
    tail: deque[str] = deque(maxlen=_TAIL_LINES)
    counter = [0]
    started = time.monotonic()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w", encoding="utf-8") as log:
        log.write("$ " + " ".join(command) + "\n")
        log.flush()
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env={**go_environment(), **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        done = threading.Event()
        beat = threading.Thread(
            target=_heartbeat, args=(done, label, started, counter, say), daemon=True
        )
        beat.start()
        try:
            assert process.stdout is not None
            for line in process.stdout:
                log.write(line)
                tail.append(line.rstrip("\n"))
                counter[0] += 1
            returncode = process.wait()
        finally:
            done.set()
            beat.join()
            if process.poll() is None:
                process.kill()
                process.wait()
    if returncode != 0:
        raise GoError(
            f"{label}: `{' '.join(command)}` exited {returncode} (full log: {log_path})\n"
            + "\n".join(tail)
        )


def _heartbeat(
    done: threading.Event, label: str, started: float, counter: list[int], say: Say
) -> None:
    """Print one line every HEARTBEAT_SECONDS so long builds visibly make progress."""
    while not done.wait(HEARTBEAT_SECONDS):
        elapsed = time.monotonic() - started
        say(f"  {label}: still running, {elapsed:.0f}s, {counter[0]} output lines (packages)")


def go_output(args: Sequence[str], *, cwd: Path) -> str:
    """Run a quick `go` query (e.g. `go mod download -json`) and return its stdout."""
    result = subprocess.run(
        [find_go(), *args],
        cwd=cwd,
        env=go_environment(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise GoError(f"`go {' '.join(args)}` exited {result.returncode}:\n{result.stderr}")
    return result.stdout
