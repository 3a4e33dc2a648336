"""The harness's ports: picked below the ephemeral range, never handed out twice while the
picker lives, never one somebody listens on."""

from __future__ import annotations

import random
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from nodegate.localcluster import ports


def _draws(monkeypatch: pytest.MonkeyPatch, *candidates: int) -> None:
    """The random draws `free_port` makes, in order."""
    queue: Iterator[int] = iter(candidates)
    monkeypatch.setattr(random, "randrange", lambda low, high: next(queue))


def test_a_port_is_drawn_below_the_ephemeral_range() -> None:
    low = int(ports.EPHEMERAL_RANGE_FILE.read_text().split()[0])

    picked = {ports.free_port() for _ in range(50)}

    assert all(low - ports.SPAN <= port < low for port in picked), picked


def test_a_port_handed_out_is_not_handed_out_again_while_its_picker_lives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = ports.free_port()
    _draws(monkeypatch, first, first, first + 1 if first + 1 < 32768 else first - 1)

    assert ports.free_port() != first


def test_another_process_is_not_handed_a_port_this_one_holds() -> None:
    held = ports.free_port()
    draws = [held, held, held - 1]
    script = (
        "from nodegate.localcluster import ports\n"
        f"ports.random.randrange = lambda low, high, it=iter({draws}): next(it)\n"
        "print(ports.free_port())\n"
    )

    other = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )

    assert int(other.stdout) == held - 1


def test_a_port_somebody_listens_on_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        taken = listener.getsockname()[1]
        _draws(monkeypatch, taken, taken + 1 if taken < 65535 else taken - 1)

        assert ports.free_port() != taken
