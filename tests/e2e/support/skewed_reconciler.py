"""`python -m tests.e2e.support.skewed_reconciler reconcile ...`: the real `nodegate reconcile`,
with this process's wall clock steppable, its Lease reads slowed, or the API server's `Date` as
it reads it stepped, for the clock-step tests.

The system clock cannot be stepped in a test (nor for one process), so `time.time()` is
replaced in this process only: it is what the official client's leader election compared. The
step is read from the file named by NODEGATE_TEST_WALL_STEP_FILE (seconds to add; polled every
20 ms, so the test can step a running replica). NODEGATE_TEST_LEASE_READ_DELAY slows every
Lease read by that many seconds before it is sent, as a loaded or far-away API server would.

NODEGATE_TEST_DATE_STEP_FILE names a file of seconds added to every `Date` the process reads of
the API server (`KubeApi.server_time`, the one place nodegate reads it): what a proxy rewriting
`Date` would do (the API server's TLS ends in the client, so the shift is made there), as a bad
NTP source, a resumed VM, or one HA replica behind the load balancer running ahead would.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from kubernetes import client

_real_time = time.time
_step = [0.0]
_date_step = [0.0]


def _follow_step_file(path: Path, step: list[float]) -> None:
    while True:
        with contextlib.suppress(OSError, ValueError):
            step[0] = float(path.read_text() or 0)
        time.sleep(0.02)


def _follow(variable: str, step: list[float]) -> bool:
    path = os.environ.get(variable)
    if path:
        threading.Thread(target=_follow_step_file, args=(Path(path), step), daemon=True).start()
    return bool(path)


def _install() -> None:
    if _follow("NODEGATE_TEST_WALL_STEP_FILE", _step):
        time.time = lambda: _real_time() + _step[0]
    if _follow("NODEGATE_TEST_DATE_STEP_FILE", _date_step):
        from nodegate.reconciler.kit.kube import KubeApi

        server_time = KubeApi.server_time

        def stepped(self: KubeApi) -> datetime:
            return server_time(self) + timedelta(seconds=_date_step[0])

        KubeApi.server_time = stepped  # type: ignore[method-assign]
    delay = float(os.environ.get("NODEGATE_TEST_LEASE_READ_DELAY") or 0)
    if delay:
        read = client.CoordinationV1Api.read_namespaced_lease

        def slow_read(self: client.CoordinationV1Api, *args: Any, **kwargs: Any) -> Any:
            time.sleep(delay)
            return read(self, *args, **kwargs)

        client.CoordinationV1Api.read_namespaced_lease = slow_read  # type: ignore[method-assign]


if __name__ == "__main__":
    _install()
    from nodegate.cli.main import app

    app()
