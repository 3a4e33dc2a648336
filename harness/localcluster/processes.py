"""Child processes that are always stopped, with their output kept in a log file.

A leaked etcd or kube-apiserver keeps ports and CPU busy long after a test run, and a failing
e2e test is only debuggable with the components' logs, so every component goes through this.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

STOP_TIMEOUT_SECONDS = 10.0


class ManagedProcess:
    """One component: started in its own session, logs to `log_path`, stoppable exactly once."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = None if env is None else {**os.environ, **env}
        """The environment: ours plus `env` (some components read settings only from it)."""
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The OS pid, or None before start."""
        return self._process.pid if self._process else None

    def start(self) -> None:
        """Spawn it; its own session means a Ctrl-C to pytest does not race our shutdown,
        and the parent-death signal kills it even if pytest itself is SIGKILLed."""
        with self.log_path.open("ab") as log:
            log.write(("$ " + " ".join(self.argv) + "\n").encode())
            log.flush()
            self._process = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
                # Only one pre-resolved libc call runs between fork and exec.
                preexec_fn=_die_with_parent if _LIBC is not None else None,  # noqa: PLW1509
            )

    def is_alive(self) -> bool:
        """True while the OS process has not exited (it is reaped if it has)."""
        return self._process is not None and self._process.poll() is None

    def returncode(self) -> int | None:
        """The exit status once it exited, else None."""
        return self._process.poll() if self._process else None

    def stop(self, timeout: float = STOP_TIMEOUT_SECONDS) -> None:
        """SIGTERM, then SIGKILL after `timeout`; always waits so no zombie is left."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout)

    def kill(self) -> None:
        """SIGKILL and reap (no graceful shutdown), to simulate a crash."""
        process = self._process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT_SECONDS)

    def tail(self, lines: int = 40) -> str:
        """The last `lines` lines of its log, for printing when something failed."""
        try:
            with self.log_path.open("r", encoding="utf-8", errors="replace") as log:
                return "".join(deque(log, maxlen=lines))
        except OSError as error:
            return f"(no log: {error})\n"


_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def _die_with_parent() -> None:
    """Runs in the child before exec: ask Linux to SIGKILL it when its parent exits.

    Teardown normally stops every component; this covers a harness killed by a CI timeout.
    Linux ties this to the thread that started the process, so start components from the
    main thread (pytest fixtures do).
    """
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def pid_exists(pid: int) -> bool:
    """True if a process with this pid still exists (zombies included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class StartedWhileUsed:
    """`with X(...) as x:` starts x and always stops it: the harness's process owners (control
    plane, kubelet, Karpenter) are context managers by this one definition."""

    def start(self) -> object:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
