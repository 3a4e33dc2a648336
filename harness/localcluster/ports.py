"""Ports for components the harness starts, that no other process of the run is handed.

A port must be known before its process starts (a webhook configuration names it, etcd's peers
are given it), so it is picked, then bound later by a child. Asking the OS (`bind(("", 0))`)
draws from the ephemeral range, the same range every outgoing connection and every other
pytest worker's pick draws from, and under four workers a port picked for a webhook was taken
before the reconciler bound it (`Address already in use`, twice in CI). So a port is drawn
below the ephemeral range, where the OS hands out nothing on its own, and is reserved with a
`flock` on a file named after it that the picking process holds: no other process picks it
while the picker lives (a lock dies with its process, so nothing is left over after a crash).
"""

from __future__ import annotations

import fcntl
import random
import socket
import tempfile
from collections import deque
from pathlib import Path
from typing import IO

EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
SPAN = 12_000
"""How many ports below the ephemeral range are drawn from."""
HELD = 512
"""Reservations a process keeps (the oldest is released first): far more than a test holds
between picking a port and its child binding it."""
ATTEMPTS = 500

_held: deque[IO[str]] = deque(maxlen=HELD)
"""Open lock files: one dropped from the deque is closed by the garbage collector, which
releases its lock."""


def _ephemeral_low() -> int:
    try:
        return int(EPHEMERAL_RANGE_FILE.read_text(encoding="ascii").split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _bindable(port: int) -> bool:
    """Nobody listens on it or holds it bound, on any address (a child may bind 0.0.0.0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def _reserve(port: int, directory: Path) -> IO[str] | None:
    lock = (directory / str(port)).open("w", encoding="ascii")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        return None
    return lock


def free_port() -> int:
    """A TCP port nobody listens on, outside the ephemeral range, that no other process of the
    harness is handed while this one runs."""
    high = _ephemeral_low()
    low = max(1024, high - SPAN)
    directory = Path(tempfile.gettempdir()) / "nodegate-ports"
    directory.mkdir(exist_ok=True)
    for _ in range(ATTEMPTS):
        port = random.randrange(low, high)
        lock = _reserve(port, directory)
        if lock is None:
            continue
        if _bindable(port):
            _held.append(lock)
            return port
        lock.close()
    raise RuntimeError(f"no free port in {low}-{high - 1} after {ATTEMPTS} tries")
