"""Lease calls on the official client end within their cut, even on a path that drops
connects silently (urllib3 tries a connect up to four times)."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from nodegate.reconciler.kit.client import load_api_client
from nodegate.reconciler.kit.errors import KubeError
from nodegate.reconciler.kit.lease import KubeLeaseApi

CUT_SECONDS = 2.0


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A loopback port whose accept queue is full: the kernel drops further SYNs unanswered,
    as a dead load balancer or a lost NAT entry does."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port: int = listener.getsockname()[1]
    queued = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):  # the handshake completes in the queue
            filler.connect(("127.0.0.1", port))
        queued.append(filler)
    time.sleep(0.2)
    yield port
    for filler in queued:
        filler.close()
    listener.close()


def kubeconfig_for(port: int, directory: Path) -> Path:
    path = directory / "kubeconfig"
    cluster = {"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}
    context = {"name": "c", "context": {"cluster": "c", "user": "u"}}
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "contexts": [context],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "current-context": "c",
    }
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def test_a_lease_call_on_a_path_dropping_connects_ends_within_its_cut(
    silent_server: int, tmp_path: Path
) -> None:
    api = KubeLeaseApi(load_api_client(str(kubeconfig_for(silent_server, tmp_path))), CUT_SECONDS)

    started = time.monotonic()
    with pytest.raises(KubeError):
        api.read_lease("default", "nodegate")
    elapsed = time.monotonic() - started

    assert elapsed < CUT_SECONDS, f"{elapsed:.1f} s for a {CUT_SECONDS} s cut"
