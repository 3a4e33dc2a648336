"""An answer that says when to come back (429 or 503 with Retry-After) is the caller's to wait
for, never urllib3's: on the pool's retries urllib3 slept the header (up to 6 hours) and sent
an idempotent request (GET, PUT, DELETE) again, past every bound the caller set: a write under
the leader fence's `within` (no write outlives the Lease) landed after it, a Lease call after
its cut. A PATCH or a POST was already answered at once (urllib3 does not retry those)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodegate.reconciler.kit.client import load_api_client
from nodegate.reconciler.kit.errors import TemporaryError, ThrottledError
from nodegate.reconciler.kit.kube import KubeApi
from nodegate.reconciler.kit.lease import KubeLeaseApi
from tests.unit.reconciler.kit.test_direct_calls import Recording
from tests.unit.reconciler.kit.test_lease_api import kubeconfig_for

BUSY = {"kind": "Status", "code": 503, "message": "come back later"}


@pytest.fixture
def recording() -> Iterator[Recording]:
    server = Recording()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _kubeconfig(server: Recording, directory: Path) -> str:
    return str(kubeconfig_for(server.server_address[1], directory))


def test_a_fenced_replace_told_to_come_back_is_not_sent_again_past_its_bound(
    recording: Recording, tmp_path: Path
) -> None:
    recording.answer(BUSY, 503, {"Retry-After": "3"})
    recording.answer({"metadata": {"name": "history"}})
    api = KubeApi(load_api_client(_kubeconfig(recording, tmp_path))).within(1.0)
    body = {"metadata": {"name": "history", "resourceVersion": "7"}, "data": {}}

    started = time.monotonic()
    with pytest.raises(TemporaryError) as raised:
        api.replace_configmap("nodegate", "history", body)

    assert time.monotonic() - started < 1.0
    assert [sent["method"] for sent in recording.requests] == ["PUT"]  # not sent again at 3 s
    assert raised.value.retry_after == 3.0  # the caller's to wait for


def test_a_lease_read_told_to_come_back_ends_within_its_cut(
    recording: Recording, tmp_path: Path
) -> None:
    recording.answer({**BUSY, "code": 429}, 429, {"Retry-After": "3"})
    leases = KubeLeaseApi(load_api_client(_kubeconfig(recording, tmp_path)), 2.0)

    started = time.monotonic()
    with pytest.raises(ThrottledError) as raised:
        leases.read_lease("nodegate-system", "nodegate")

    assert time.monotonic() - started < 2.0
    assert len(recording.requests) == 1
    assert raised.value.retry_after == 3.0
