"""Run the real `nodegate reconcile` entry point as a process, as the container does."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def http_get(port: int, path: str) -> tuple[int, str]:
    """Status and body of GET http://127.0.0.1:port/path; (0, "") if nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError:
        return 0, ""


def metric_total(text: str, name: str, **labels: str) -> float:
    """Sum of the samples of `name` whose labels include `labels` (0 if none)."""
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and labels.items() <= sample.labels.items():
                total += sample.value
    return total


@dataclass
class ReconcilerProcess:
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    def get(self, path: str) -> tuple[int, str]:
        return http_get(self.port, path)

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of `name` whose labels include `labels` (0 if none)."""
        return metric_total(self.get("/metrics")[1], name, **labels)

    def is_ready(self) -> bool:
        return self.get("/readyz")[0] == 200

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


@contextmanager
def running_reconciler(
    kubeconfig: Path,
    log_dir: Path,
    *args: str,
    wait_ready: bool = True,
    module: str = "nodegate.cli",
    env: dict[str, str] | None = None,
) -> Iterator[ReconcilerProcess]:
    """`module` and `env`: a wrapper of the CLI and its settings (tests.e2e.skewed_reconciler)."""
    port = free_port()
    log_path = log_dir / f"reconciler-{port}.log"
    argv = [sys.executable, "-m", module, "reconcile", "--kubeconfig", str(kubeconfig)]
    argv += ["--http-port", str(port), *args]
    environ = {**os.environ, **(env or {})}
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT, env=environ)
    reconciler = ReconcilerProcess(process, port, log_path)
    try:
        if wait_ready:
            deadline = time.monotonic() + 30
            while not reconciler.is_ready():
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"reconciler not ready:\n{reconciler.logs()[-3000:]}")
                time.sleep(0.1)
        yield reconciler
    finally:
        reconciler.stop()
        if process.poll() is None:
            process.kill()
