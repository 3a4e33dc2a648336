"""The OCI side of an e2e scene (`tests/e2e/test_oci_instances.py`, and the fence's OCI write in
`test_server_fencing.py`): the reconciler's flags pointing its poller at the local Compute API
(tests/unit/reconciler/nodes/oci_compute_server.py) under an API key it knows, and a Node whose
providerID names an instance of it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from tests.unit.reconciler.nodes.oci_compute_server import OciComputeServer, instance_ocid

COMPARTMENT = "ocid1.compartment.oc1..aaaaaaaae2e"


def oci_flags(server: OciComputeServer, *more: str, config: Path | None = None) -> tuple[str, ...]:
    """Polling `COMPARTMENT` every second (later flags win: `more`, or a shipped argument list
    before these)."""
    return (
        "--oci-compartments",
        COMPARTMENT,
        "--oci-auth",
        "api_key",
        "--oci-config-file",
        str(config or server.api_key_config()),
        "--oci-endpoint",
        server.endpoint,
        "--oci-ca-bundle",
        str(server.ca_file),
        "--oci-poll-seconds",
        "1",
        *more,
    )


def oci_node(make_node: Callable[..., str], suffix: str, **kwargs: object) -> tuple[str, str]:
    """A Node on an instance of its own: its name and the instance's OCID."""
    ocid = instance_ocid(f"e2e{suffix}{datetime.now(UTC).strftime('%H%M%S%f')}")
    return make_node(suffix, provider_id=f"oci://{ocid}", **kwargs), ocid
