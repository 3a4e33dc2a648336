"""The one module that speaks to OCI: the `oci` SDK's Compute client, made from the settings'
auth choice, listing a compartment's instances page by page, its errors mapped to our kinds.

The SDK's own retries and circuit breaker are off (`NoneRetryStrategy`, `NoCircuitBreakerStrategy`):
a throttled or failing call must come back to the poller at once, to be counted, said once and
retried with the poller's backoff, not slept on inside the SDK (eight attempts by default) while
the next poll waits. The SDK is imported when the poller is made, not with the reconciler: a
reconciler without `--oci-compartments` never loads it (the `oci` extra, which the image has).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nodegate.core.decisions.oci_instances import InstanceRecord
from nodegate.reconciler.nodes.oci.oci_instances import ErrorKind, OciError
from nodegate.reconciler.settings import OciSettings

MAX_PAGES = 1000
"""Pages of one compartment's listing before it is taken for a loop (100,000 instances at
the default page size)."""


@dataclass
class ComputeLister:
    """`InstanceLister` on the SDK's ComputeClient. `on_call(outcome)`: each page's call."""

    client: Any
    page_size: int
    on_call: Callable[[str], None] = lambda _outcome: None

    def list_instances(self, compartment_id: str) -> list[InstanceRecord]:
        """Every page, following `opc-next-page`: ceil(instances / limit) calls. Paged here
        rather than with `oci.pagination.list_call_get_all_results`, which wraps each page's
        call in the SDK's default retry strategy (8 attempts) whatever the client says."""
        records: list[InstanceRecord] = []
        page: str | None = None  # None: the SDK sends no page (the first page)
        seen: set[str] = set()
        while True:
            try:
                response = self.client.list_instances(
                    compartment_id, limit=self.page_size, page=page
                )
            except Exception as err:  # every SDK and transport failure becomes one of our kinds
                failed = _error(err)
                self.on_call(failed.kind)
                raise failed from err
            self.on_call("ok")
            records.extend(_record(instance) for instance in response.data)
            page = response.next_page
            if not page:
                return records
            # A token seen before, or more pages than instances a compartment may hold, would
            # hold the poller (and call OCI) for ever: the listing fails, and is tried again.
            if page in seen or len(seen) >= MAX_PAGES:
                raise OciError("other", f"ListInstances paging does not end (page {page!r})")
            seen.add(page)


def _record(instance: Any) -> InstanceRecord:
    return InstanceRecord(
        id=str(instance.id),
        lifecycle_state=str(instance.lifecycle_state or ""),
        time_maintenance_reboot_due=instance.time_maintenance_reboot_due,
    )


SERVICE_KINDS: dict[int, ErrorKind] = {401: "auth", 404: "not_found", 429: "throttled"}
"""A refusal's kind by its HTTP status (any other 5xx: server; the rest: other)."""


def _error(err: Exception) -> OciError:
    import oci  # noqa: PLC0415

    if isinstance(err, oci.exceptions.ServiceError):
        status = int(err.status or 0)
        kind = SERVICE_KINDS.get(status, "server" if status >= 500 else "other")
        return OciError(kind, f"{err.status} {err.code}: {err.message}", str(err.request_id or ""))
    text = f"{type(err).__name__} {err}".lower()
    timed_out = isinstance(err, oci.exceptions.RequestException | TimeoutError) and (
        "timeout" in text or "timed out" in text
    )
    return OciError("timeout" if timed_out else "other", f"{type(err).__name__}: {err}"[:500])


def compute_client(settings: OciSettings) -> Any:
    """The SDK's ComputeClient for the settings' auth, region and endpoint, without the SDK's
    own retries and circuit breaker."""
    import oci  # noqa: PLC0415

    config, signer = _auth(settings)
    kwargs: dict[str, Any] = {
        "retry_strategy": oci.retry.NoneRetryStrategy(),
        "circuit_breaker_strategy": oci.circuit_breaker.NoCircuitBreakerStrategy(),
        "timeout": (settings.timeout_seconds, settings.timeout_seconds),
        "service_endpoint": settings.endpoint or None,  # None: the region's, as when not given
    }
    if signer is not None:  # a signer given, even None, is the one used
        kwargs["signer"] = signer
    client = oci.core.ComputeClient(config, **kwargs)
    if settings.ca_bundle is not None:
        _trust(client.base_client.session, str(settings.ca_bundle))
    return client


def _trust(session: Any, ca_bundle: str) -> None:
    """Check the endpoint's certificate against `ca_bundle`. Setting `session.verify` is not
    enough: requests prefers REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE from the environment over it
    (`merge_environment_settings`); proxies from the environment are still honoured."""
    session.verify = ca_bundle
    merge = session.merge_environment_settings

    def merged(*args: Any, **kwargs: Any) -> dict[str, Any]:
        settings: dict[str, Any] = merge(*args, **kwargs)
        settings["verify"] = ca_bundle
        return settings

    session.merge_environment_settings = merged


def _auth(settings: OciSettings) -> tuple[dict[str, Any], Any]:
    """(config, signer): the API key's config file (its signer is made by the client), or a
    principal's signer with the region it names unless the settings name one."""
    import oci  # noqa: PLC0415

    if settings.auth == "api_key":
        config = oci.config.from_file(str(settings.config_file.expanduser()), settings.profile)
        if settings.region:
            config["region"] = settings.region
        return config, None
    if settings.auth == "instance_principal":
        signer = oci.auth.signers.InstancePrincipalsSecurityTokenSigner()
    else:
        # The signer reads its region from the environment (OKE's documented variable); the
        # setting wins, so the token and the client are of one region.
        if settings.region:
            os.environ["OCI_RESOURCE_PRINCIPAL_REGION"] = settings.region
        signer = oci.auth.signers.get_oke_workload_identity_resource_principal_signer()
    region = settings.region or getattr(signer, "region", "") or ""
    return {"region": region}, signer
