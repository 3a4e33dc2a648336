"""Run the real `nodegate reconcile` entry point as a process, as the container does."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families

from nodegate.localcluster.ports import free_port
from nodegate.reconciler.kit.client import load_api_client

__all__ = ["ReconcilerProcess", "free_port", "http_get", "metric_total", "running_reconciler"]

_STARTED = '"reconciler starting"'
START_SECONDS = 30.0
"""How long a new reconciler process may take to serve and be ready: interpreter start and
imports take seconds on a loaded 2-core machine, then a Lease a killed leader held expires."""
_log_numbers = itertools.count()
STARTED_IN_THIS_TEST: list[Path] = []
"""The logs of the reconcilers the running test started: attached to its report when it fails
(tests/e2e/conftest.py), so that a failure in CI says what the reconciler did."""


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
    """The port is the one the process bound itself (`--http-port 0`), read from its start line:
    a port picked here and handed over could be taken by another process in between (it was, in
    CI: "Address already in use")."""

    process: subprocess.Popen[bytes]
    log_path: Path
    _port: int | None = None

    @property
    def port(self) -> int:
        deadline = time.monotonic() + START_SECONDS
        while self._port is None:
            self._port = self._bound_port()
            if self._port is not None:
                break
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"reconciler never started serving:\n{self.logs()[-3000:]}")
            time.sleep(0.05)
        return self._port

    def _bound_port(self) -> int | None:
        for line in self.logs().splitlines():
            if _STARTED in line:
                port: int = json.loads(line)["http_port"]
                return port
        return None

    def get(self, path: str) -> tuple[int, str]:
        """(0, "") until the process serves, like a port nobody listens on."""
        self._port = self._port or self._bound_port()
        return (0, "") if self._port is None else http_get(self._port, path)

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


def test_state_namespace(kubeconfig: Path) -> str:
    """A namespace of the current test's own for a reconciler's state (status record, taint
    history, records), made on first use: an installation's state namespace holds one
    installation, and a new leader puts back the rules its status record says were in force, so
    tests sharing a cluster must not share one. Every replica a test starts shares it."""
    test = os.environ.get("PYTEST_CURRENT_TEST", "outside-pytest").rsplit(" ", 1)[0]
    name = "state-" + hashlib.sha256(test.encode()).hexdigest()[:12]
    api = k8s_client.CoreV1Api(load_api_client(str(kubeconfig)))
    try:
        api.create_namespace(k8s_client.V1Namespace(metadata={"name": name}))
    except ApiException as err:
        if err.status != 409:  # made by an earlier replica of the same test
            raise
    finally:
        api.api_client.close()
    return name


@contextmanager
def running_reconciler(
    kubeconfig: Path,
    log_dir: Path,
    *args: str,
    wait_ready: bool = True,
    module: str = "nodegate.cli",
    env: dict[str, str] | None = None,
) -> Iterator[ReconcilerProcess]:
    """`module` and `env`: a wrapper of the CLI and its settings
    (tests.e2e.support.skewed_reconciler)."""
    log_path = log_dir / f"reconciler-{os.getpid()}-{next(_log_numbers)}.log"
    argv = [sys.executable, "-m", module, "reconcile", "--kubeconfig", str(kubeconfig)]
    argv += ["--http-port", "0", *args]
    environ = {**os.environ, **(env or {})}
    if "POD_NAMESPACE" not in environ and not any(
        arg.startswith("--state-namespace") for arg in args
    ):
        environ["POD_NAMESPACE"] = test_state_namespace(kubeconfig)
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT, env=environ)
    reconciler = ReconcilerProcess(process, log_path)
    STARTED_IN_THIS_TEST.append(log_path)
    try:
        if wait_ready:
            deadline = time.monotonic() + START_SECONDS
            while not reconciler.is_ready():
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"reconciler not ready:\n{reconciler.logs()[-3000:]}")
                time.sleep(0.1)
        yield reconciler
    finally:
        reconciler.stop()
        if process.poll() is None:
            process.kill()
