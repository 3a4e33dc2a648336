"""Keeping the webhook's certificate: the shared Secret, a concurrent replica, the caBundle.
A fake of the four calls (`CertApi`); the e2e tier runs the same code on a real API server."""

from __future__ import annotations

import base64
import copy
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonpatch
import pytest

from nodegate.reconciler.kit.errors import ConflictError
from nodegate.reconciler.kit.kube import RawObject
from nodegate.reconciler.webhook.certs import CertPolicy, bundle_from_secret_data, renew
from nodegate.reconciler.webhook.tls import CertificateError, FileCertificates, SecretCertificates

T0 = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
HOSTS = ("nodegate-webhook.ns.svc", "127.0.0.1")
POLICY = CertPolicy(ca_lifetime=timedelta(days=100), serving_lifetime=timedelta(days=30))


class FakeCertApi:
    def __init__(self) -> None:
        self.secret: RawObject | None = {
            "metadata": {"name": "tls", "namespace": "ns", "resourceVersion": "1"}
        }
        self.configuration: RawObject | None = {
            "metadata": {"name": "cfg"},
            "webhooks": [{"name": "nodes.nodegate.dev", "clientConfig": {"url": "https://x"}}],
        }
        self.secret_writes = 0
        self.patches: list[list[Any]] = []
        self.before_replace: list[RawObject] = []
        """Secrets another replica writes just before our next replace (then we get 409)."""

    def read_secret(self, namespace: str, name: str) -> RawObject | None:
        return copy.deepcopy(self.secret)

    def replace_secret(self, namespace: str, name: str, body: RawObject) -> RawObject:
        assert self.secret is not None
        if self.before_replace:
            self.secret = self.before_replace.pop(0)
        if body["metadata"]["resourceVersion"] != self.secret["metadata"]["resourceVersion"]:
            raise ConflictError("409")
        self.secret_writes += 1
        version = str(int(self.secret["metadata"]["resourceVersion"]) + 1)
        self.secret = {**body, "metadata": {**body["metadata"], "resourceVersion": version}}
        return copy.deepcopy(self.secret)

    def read_webhook_configuration(self, name: str) -> RawObject | None:
        return copy.deepcopy(self.configuration)

    def patch_webhook_configuration(self, name: str, json_patch: list[Any]) -> RawObject:
        self.patches.append(json_patch)
        self.configuration = jsonpatch.apply_patch(self.configuration, json_patch)
        assert self.configuration is not None
        return self.configuration

    def ca_bundle(self) -> bytes:
        assert self.configuration is not None
        return base64.b64decode(self.configuration["webhooks"][0]["clientConfig"]["caBundle"])


def keeper(api: FakeCertApi, served: list[bytes], now: list[datetime]) -> SecretCertificates:
    return SecretCertificates(
        api,
        "ns",
        "tls",
        "cfg",
        HOSTS,
        lambda cert, _key: served.append(cert),
        policy=POLICY,
        clock=lambda: now[0],
    )


def test_an_empty_secret_gets_a_ca_and_certificate_served_and_trusted() -> None:
    api, served = FakeCertApi(), list[bytes]()
    keeper(api, served, [T0]).sync()
    assert api.secret is not None
    bundle = bundle_from_secret_data(api.secret["data"])
    assert served == [bundle.cert_pem]
    assert api.ca_bundle() == bundle.ca_pem


def test_a_second_round_with_nothing_due_writes_nothing() -> None:
    api, served = FakeCertApi(), list[bytes]()
    certs = keeper(api, served, [T0])
    certs.sync()
    certs.sync()
    assert api.secret_writes == 1 and len(api.patches) == 1 and len(served) == 1


def test_a_replica_that_loses_the_write_race_serves_the_winner_bundle() -> None:
    api, served = FakeCertApi(), list[bytes]()
    winner = renew(None, "ca", HOSTS, T0, POLICY)
    api.before_replace.append(
        {
            "metadata": {"name": "tls", "namespace": "ns", "resourceVersion": "2"},
            "data": winner.to_secret_data(),
        }
    )
    keeper(api, served, [T0]).sync()
    assert served == [winner.cert_pem] and api.secret_writes == 0
    assert api.ca_bundle() == winner.ca_pem


def test_a_replica_adopts_a_certificate_another_replica_renewed() -> None:
    api, served, now = FakeCertApi(), list[bytes](), [T0]
    certs = keeper(api, served, now)
    certs.sync()
    other = keeper(api, [], now)
    now[0] = T0 + timedelta(days=21)
    other.sync()  # renews the serving certificate
    certs.sync()
    assert len(served) == 2 and served[1] != served[0]
    assert api.secret_writes == 2


def test_a_drifted_ca_bundle_is_put_back() -> None:
    api, served = FakeCertApi(), list[bytes]()
    certs = keeper(api, served, [T0])
    certs.sync()
    assert api.configuration is not None
    api.configuration["webhooks"][0]["clientConfig"]["caBundle"] = base64.b64encode(b"x").decode()
    certs.sync()
    assert api.secret is not None
    assert api.ca_bundle() == bundle_from_secret_data(api.secret["data"]).ca_pem


def test_a_ca_renewal_keeps_the_old_ca_in_the_bundle() -> None:
    api, served, now = FakeCertApi(), list[bytes](), [T0]
    certs = keeper(api, served, now)
    certs.sync()
    first = api.ca_bundle()
    now[0] = T0 + timedelta(days=81)
    certs.sync()
    assert api.ca_bundle().endswith(first) and api.ca_bundle() != first


def test_a_missing_secret_is_a_certificate_error_naming_the_fix() -> None:
    api = FakeCertApi()
    api.secret = None
    with pytest.raises(CertificateError, match="create it empty"):
        keeper(api, [], [T0]).sync()


def test_a_missing_configuration_still_serves() -> None:
    api, served = FakeCertApi(), list[bytes]()
    api.configuration = None
    keeper(api, served, [T0]).sync()
    assert len(served) == 1


def test_certificate_files_are_served_and_reloaded_when_they_change(tmp_path: Path) -> None:
    served: list[bytes] = []
    certs = FileCertificates(tmp_path, lambda cert, _key: served.append(cert))
    with pytest.raises(CertificateError):
        certs.sync()
    (tmp_path / "tls.crt").write_bytes(b"one")
    (tmp_path / "tls.key").write_bytes(b"key")
    certs.sync()
    certs.sync()
    (tmp_path / "tls.crt").write_bytes(b"two")
    certs.sync()
    assert served == [b"one", b"two"]
