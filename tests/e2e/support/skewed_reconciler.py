"""`python -m tests.e2e.support.skewed_reconciler reconcile ...`: the real `nodegate reconcile`,
with this process's wall clock steppable and its Lease reads slowed, for the clock-step election
test.

The system clock cannot be stepped in a test (nor for one process), so `time.time()` is
replaced in this process only: it is what the official client's leader election compared. The
step is read from the file named by NODEGATE_TEST_WALL_STEP_FILE (seconds to add; polled every
20 ms, so the test can step a running replica). NODEGATE_TEST_LEASE_READ_DELAY slows every
Lease read by that many seconds before it is sent, as a loaded or far-away API server would.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path
from typing import Any

from kubernetes import client

_real_time = time.time
_step = [0.0]


def _follow_step_file(path: Path) -> None:
    while True:
        with contextlib.suppress(OSError, ValueError):
            _step[0] = float(path.read_text() or 0)
        time.sleep(0.02)


def _install() -> None:
    step_file = os.environ.get("NODEGATE_TEST_WALL_STEP_FILE")
    if step_file:
        threading.Thread(target=_follow_step_file, args=(Path(step_file),), daemon=True).start()
        time.time = lambda: _real_time() + _step[0]
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
