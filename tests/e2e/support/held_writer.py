"""`python -m tests.e2e.support.held_writer reconcile ...`: the real `nodegate reconcile`, which,
once the file named by NODEGATE_TEST_HOLD_FILE exists, stops itself (SIGSTOP) right after its next
Node PATCH has left for the API server and before it reads the answer: a process paused with a write
in flight (GC, a frozen container, a live-migrated VM), made deterministic. It first writes the file
named by NODEGATE_TEST_SENT_FILE, so the test knows the request is on its way.

The PATCH has passed every check of the process's own (its fence among them) when it pauses;
what happens to it is up to the API server.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

from urllib3.connection import HTTPConnection

from nodegate.reconciler.kit.kube import KubeApi

_patching = threading.local()


def _install(hold: Path, sent: Path) -> None:
    patch_node = KubeApi.patch_node
    getresponse = HTTPConnection.getresponse

    def marked_patch(self: KubeApi, *args: Any, **kwargs: Any) -> Any:
        _patching.on = True
        try:
            return patch_node(self, *args, **kwargs)
        finally:
            _patching.on = False

    def paused_answer(self: HTTPConnection, *args: Any, **kwargs: Any) -> Any:
        if getattr(_patching, "on", False) and hold.exists() and not sent.exists():
            sent.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGSTOP)
        return getresponse(self, *args, **kwargs)

    KubeApi.patch_node = marked_patch  # type: ignore[method-assign]
    HTTPConnection.getresponse = paused_answer  # type: ignore[method-assign]


if __name__ == "__main__":
    _install(
        Path(os.environ["NODEGATE_TEST_HOLD_FILE"]), Path(os.environ["NODEGATE_TEST_SENT_FILE"])
    )
    from nodegate.cli.main import app

    app()
