"""Where the webhook's serving certificate comes from, and keeping the API server's trust in it.

Two sources, one interface (`sync` once, kept syncing by `keep_syncing`, `on_certificate`
called with (cert PEM, key PEM) whenever what must be served changes):

* `SecretCertificates` (default, self-signed): the CA and serving certificate live in one
  Secret of the reconciler's namespace that every replica reads, so all replicas serve
  certificates of one CA and the caBundle names it. The first replica to find the Secret empty
  (or due for renewal, see `certs.py`) writes a new bundle with the resourceVersion it
  read; a concurrent replica gets 409 and adopts the winner's. Every replica then makes the
  MutatingWebhookConfiguration's caBundle what the bundle says (a JSON Patch guarded by a
  `test` of the webhook's name), so a hand-edited or re-applied configuration heals within a
  check. RBAC: get/update on that one Secret, get/patch on that one configuration.
* `FileCertificates` (`--webhook-cert-dir`): tls.crt and tls.key of a mounted Secret, e.g. made
  by cert-manager, whose CA injector then fills the caBundle; re-read when the files change.
"""

from __future__ import annotations

import base64
import logging
import os
import ssl
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nodegate.reconciler.kit.backoff import Backoff
from nodegate.reconciler.kit.errors import ConflictError, KubeError
from nodegate.reconciler.webhook.api import CertApi
from nodegate.reconciler.webhook.certs import (
    CERT_FILE,
    KEY_FILE,
    BundleError,
    CertPolicy,
    ServingBundle,
    bundle_from_secret_data,
    renew,
    renewal_due,
)

log = logging.getLogger("nodegate.webhook")

OnCertificate = Callable[[bytes, bytes], None]
MAX_CONFLICTS = 3


class CertificateError(Exception):
    """No certificate can be served yet (the Secret is missing, forbidden, unreadable...)."""


class SecretCertificates:
    """Self-signed certificates shared by the replicas through one Secret."""

    def __init__(
        self,
        api: CertApi,
        namespace: str,
        secret: str,
        configuration: str,
        hosts: tuple[str, ...],
        on_certificate: OnCertificate,
        *,
        policy: CertPolicy | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._api = api
        self._namespace = namespace
        self._secret = secret
        self._configuration = configuration
        self._hosts = hosts
        self._on_certificate = on_certificate
        self._policy = policy or CertPolicy()
        self._now = clock
        self._served: bytes | None = None

    def sync(self) -> None:
        """One round: the Secret's bundle (renewed if due), served, and trusted by the
        configuration. Raises CertificateError or KubeError; the next round retries."""
        bundle = self._settled_bundle()
        if bundle.cert_pem != self._served:
            self._on_certificate(bundle.cert_pem, bundle.key_pem)
            self._served = bundle.cert_pem
            log.info(
                "webhook serving certificate loaded",
                extra={
                    "not_after": bundle.cert.not_valid_after_utc.isoformat(),
                    "ca_not_after": bundle.ca.not_valid_after_utc.isoformat(),
                },
            )
        self._trust(bundle.ca_bundle(self._now()))

    def _settled_bundle(self) -> ServingBundle:
        """The Secret's bundle after any renewal due now, written with the version read."""
        for _ in range(MAX_CONFLICTS):
            secret = self._api.read_secret(self._namespace, self._secret)
            if secret is None:
                raise CertificateError(
                    f"Secret {self._namespace}/{self._secret} not found: create it empty (the "
                    "manifests do) or serve certificates from files (--webhook-cert-dir)"
                )
            now = self._now()
            try:
                bundle: ServingBundle | None = bundle_from_secret_data(secret.get("data"))
            except BundleError as err:
                if secret.get("data"):
                    log.warning(
                        "webhook certificate Secret unusable; writing a new CA and certificate",
                        extra={"secret": self._secret, "error": str(err)},
                    )
                bundle = None
            due = "ca" if bundle is None else renewal_due(bundle, self._hosts, now, self._policy)
            if bundle is not None and due == "none":
                return bundle
            renewed = renew(bundle, due, self._hosts, now, self._policy)
            body = {**secret, "data": renewed.to_secret_data()}
            try:
                self._api.replace_secret(self._namespace, self._secret, body)
            except ConflictError:
                # Another replica renewed at the same moment: adopt what it wrote.
                continue
            what = "CA and certificate issued" if bundle is None else f"{due} certificate renewed"
            log.info(f"webhook {what}", extra={"secret": self._secret})
            return renewed
        raise CertificateError(f"Secret {self._secret} kept changing while being renewed")

    def _trust(self, ca_bundle: bytes) -> None:
        """Make every webhook of the configuration trust `ca_bundle` (no write if it does)."""
        configuration = self._api.read_webhook_configuration(self._configuration)
        if configuration is None:
            log.warning(
                "MutatingWebhookConfiguration not found; its caBundle cannot be kept",
                extra={"configuration": self._configuration},
            )
            return
        wanted = base64.b64encode(ca_bundle).decode("ascii")
        patch: list[Any] = []
        for index, webhook in enumerate(configuration.get("webhooks") or []):
            client_config = webhook.get("clientConfig") or {}
            if client_config.get("caBundle") == wanted:
                continue
            patch += [
                {"op": "test", "path": f"/webhooks/{index}/name", "value": webhook.get("name")},
                {"op": "add", "path": f"/webhooks/{index}/clientConfig/caBundle", "value": wanted},
            ]
        if patch:
            self._api.patch_webhook_configuration(self._configuration, patch)
            log.info("webhook caBundle written", extra={"configuration": self._configuration})


class FileCertificates:
    """tls.crt/tls.key from a directory (a mounted Secret, e.g. cert-manager's)."""

    def __init__(self, directory: Path, on_certificate: OnCertificate) -> None:
        self._directory = directory
        self._on_certificate = on_certificate
        self._served: tuple[bytes, bytes] | None = None

    def sync(self) -> None:
        try:
            pair = (
                (self._directory / CERT_FILE).read_bytes(),
                (self._directory / KEY_FILE).read_bytes(),
            )
        except OSError as err:
            raise CertificateError(f"cannot read the certificate files: {err}") from err
        if pair != self._served:
            self._on_certificate(*pair)
            self._served = pair
            log.info("webhook serving certificate loaded", extra={"dir": str(self._directory)})


def keep_syncing(sync: Callable[[], None], interval: float, stop: threading.Event) -> None:
    """Call `sync` every `interval` until `stop`; failures back off and never end the loop."""
    backoff = Backoff(initial_seconds=1.0, cap_seconds=min(60.0, interval))
    while not stop.is_set():
        try:
            sync()
            backoff.reset()
            delay = interval
        except (CertificateError, KubeError) as err:
            log.error("webhook certificate check failed", extra={"error": str(err)})
            delay = backoff.next_delay()
        except Exception:
            # A bug must not end the loop: a later round may still serve and renew.
            log.exception("webhook certificate check failed")
            delay = backoff.next_delay()
        stop.wait(delay)


@contextmanager
def _pem_path(data: bytes) -> Iterator[str]:
    """A path holding `data`, for `SSLContext.load_cert_chain` (which reads only files).

    An anonymous in-memory file on Linux (the image's root filesystem is read-only, and the
    key never touches a disk); a private temporary file elsewhere.
    """
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("nodegate-webhook-pem", os.MFD_CLOEXEC)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "pem"
        path.write_bytes(data)
        path.chmod(0o600)
        yield str(path)


def server_context(cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    with _pem_path(cert_pem) as cert_file, _pem_path(key_pem) as key_file:
        context.load_cert_chain(cert_file, key_file)
    return context
