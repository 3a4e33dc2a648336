"""The API calls the Node admission webhook makes, on a client of its own.

Its own connection pool and a short per-call timeout: a persisted-label lookup made while the
API server waits for the admission answer must neither queue behind the controller's node
traffic nor outlive the webhook's `timeoutSeconds`. The certificate calls (one Secret, one
MutatingWebhookConfiguration, both by name) ride on the same client.
"""

from __future__ import annotations

from typing import Any, Protocol, cast

from kubernetes import client

from nodegate.reconciler.kit.kube import KubeApi, RawObject

JSON_PATCH = "application/json-patch+json"


class RecordReader(Protocol):
    """The one call an admission review may make (fakes in unit tests)."""

    def read_configmap(self, namespace: str, name: str) -> RawObject | None: ...


class CertApi(Protocol):
    """The calls that keep the serving certificate and the caBundle (fakes in unit tests)."""

    def read_secret(self, namespace: str, name: str) -> RawObject | None: ...

    def replace_secret(self, namespace: str, name: str, body: RawObject) -> RawObject: ...

    def read_webhook_configuration(self, name: str) -> RawObject | None: ...

    def patch_webhook_configuration(self, name: str, json_patch: list[Any]) -> RawObject: ...


class WebhookKubeApi(KubeApi):
    """`RecordReader` and `CertApi` on the official client (raw JSON, errors as `KubeError`s)."""

    def __init__(self, api_client: client.ApiClient, request_timeout_seconds: float) -> None:
        super().__init__(api_client, request_timeout_seconds)
        self.admission = client.AdmissionregistrationV1Api(api_client)

    def read_secret(self, namespace: str, name: str) -> RawObject | None:
        return self._read_or_none(self.core.read_namespaced_secret, name, namespace)

    def replace_secret(self, namespace: str, name: str, body: RawObject) -> RawObject:
        """PUT with the body's metadata.resourceVersion: a concurrent change answers 409."""
        return self._raw(
            self.core.replace_namespaced_secret,
            name,
            namespace,
            cast(Any, body),
            field_manager="nodegate",
        )

    def read_webhook_configuration(self, name: str) -> RawObject | None:
        return self._read_or_none(self.admission.read_mutating_webhook_configuration, name)

    def patch_webhook_configuration(self, name: str, json_patch: list[Any]) -> RawObject:
        return self._raw(
            self.admission.patch_mutating_webhook_configuration,
            name,
            json_patch,
            field_manager="nodegate",
            _content_type=JSON_PATCH,
        )
