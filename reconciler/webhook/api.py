"""The API calls the Node admission webhook makes, on a client of its own.

Its own connection pool and a short per-call timeout: a persisted-label lookup made while the
API server waits for the admission answer must neither queue behind the controller's node
traffic nor outlive the webhook's `timeoutSeconds`. The certificate calls (one Secret, one
MutatingWebhookConfiguration, both by name) ride on the same client.
"""

from __future__ import annotations

from typing import Any, Protocol

from nodegate.reconciler.kit.kube import MANAGED, KubeApi, RawObject, path_of


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
    """`RecordReader` and `CertApi` on the official client's configuration and pool, sent as
    `KubeApi`'s calls are (raw JSON, errors as `KubeError`s)."""

    def read_secret(self, namespace: str, name: str) -> RawObject | None:
        return self._read_or_none(path_of("Secret", namespace, name))

    def replace_secret(self, namespace: str, name: str, body: RawObject) -> RawObject:
        """PUT with the body's metadata.resourceVersion: a concurrent change answers 409."""
        return self._raw("PUT", path_of("Secret", namespace, name), query=MANAGED, body=body)

    def read_webhook_configuration(self, name: str) -> RawObject | None:
        return self._read_or_none(path_of("MutatingWebhookConfiguration", name=name))

    def patch_webhook_configuration(self, name: str, json_patch: list[Any]) -> RawObject:
        return self._raw(
            "PATCH",
            path_of("MutatingWebhookConfiguration", name=name),
            query=MANAGED,
            body=json_patch,
            content_type="application/json-patch+json",
        )
