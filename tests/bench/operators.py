"""The two operators under test, each run as its own process exactly as a user would run it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tests.bench.procstat import ProcUsage, usage
from tests.bench.scenario import RULES_YAML
from tests.e2e.support.reconciler_process import free_port, http_get, metric_total

OperatorName = Literal["nodegate", "nodegate-unlimited", "kopf"]
# What each one's requests carry as User-Agent, to find its writes in the audit log:
# nodegate uses the official client's default, kopf names itself. The operators run one after
# the other, so the two nodegate runs never share a window.
USER_AGENT: dict[OperatorName, str] = {
    "nodegate": "OpenAPI-Generator/",
    "nodegate-unlimited": "OpenAPI-Generator/",
    "kopf": "kopf/",
}
UNLIMITED_WRITES: tuple[float, int] = (1e9, 10**9)
"""`--write-qps` and `--write-burst` of the run with no client-side limit (issue 33's yardstick:
the storm phases at nodegate's defaults are compared with this run's)."""
KOPF_OPERATOR = Path(__file__).with_name("kopf_operator.py")
REPO_ROOT = Path(__file__).resolve().parents[2]  # kopf imports tests.bench.scenario from here


@dataclass(frozen=True)
class NodegateSettings:
    write_qps: float
    write_burst: int
    resync_seconds: float


@dataclass
class RunningOperator:
    name: OperatorName
    process: subprocess.Popen[bytes]
    log_path: Path
    started: float
    http_port: int | None = None

    def usage(self) -> ProcUsage:
        return usage(self.process.pid)

    def metric(self, name: str, **labels: str) -> float:
        """A nodegate metric (the sum over matching samples); kopf exports none."""
        if self.http_port is None:
            raise ValueError(f"{self.name} exports no metrics")
        return metric_total(http_get(self.http_port, "/metrics")[1], name, **labels)

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            tail = self.log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{self.name} exited with {self.process.returncode}:\n{tail}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_nodegate(
    kubeconfig: Path,
    workdir: Path,
    settings: NodegateSettings,
    name: OperatorName = "nodegate",
) -> RunningOperator:
    rules = workdir / "rules.yaml"
    rules.write_text(RULES_YAML)
    port = free_port()
    argv = [
        sys.executable, "-m", "nodegate.cli", "reconcile",
        "--kubeconfig", str(kubeconfig),
        "--rules-file", str(rules),
        "--no-leader-elect",
        "--http-port", str(port),
        # Every benchmark node changes under these rules at start: the guard would hold them.
        "--max-untaint-share", "1",
        "--write-qps", str(settings.write_qps),
        "--write-burst", str(settings.write_burst),
        "--resync-seconds", str(settings.resync_seconds),
    ]  # fmt: skip
    return _spawn(name, argv, workdir, os.environ.copy(), port)


def start_kopf(kubeconfig: Path, workdir: Path) -> RunningOperator:
    argv = [
        sys.executable, "-m", "kopf", "run", "--standalone", "--all-namespaces", str(KOPF_OPERATOR),
    ]  # fmt: skip
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    return _spawn("kopf", argv, workdir, env, None)


def _spawn(
    name: OperatorName, argv: list[str], workdir: Path, env: dict[str, str], port: int | None
) -> RunningOperator:
    log_path = workdir / f"{name}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=REPO_ROOT,
        )
    return RunningOperator(name, process, log_path, time.monotonic(), port)
