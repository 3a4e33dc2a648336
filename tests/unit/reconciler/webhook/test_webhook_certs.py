"""The webhook's own PKI: what is issued, and when each part is renewed (a clock, no waiting)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509

from nodegate.reconciler.webhook.certs import (
    BundleError,
    CertPolicy,
    ServingBundle,
    bundle_from_secret_data,
    names_of,
    renew,
    renewal_due,
)

T0 = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
POLICY = CertPolicy(ca_lifetime=timedelta(days=100), serving_lifetime=timedelta(days=30))
HOSTS = ("nodegate-webhook.nodegate-system.svc", "127.0.0.1")


def fresh() -> ServingBundle:
    return renew(None, "ca", HOSTS, T0, POLICY)


def test_a_new_bundle_serves_the_hosts_and_is_signed_by_its_ca() -> None:
    bundle = fresh()
    assert sorted(names_of(bundle.cert)) == sorted(HOSTS)
    bundle.cert.verify_directly_issued_by(bundle.ca)
    ca_constraints = bundle.ca.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert ca_constraints.ca is True
    assert bundle.ca_bundle(T0) == bundle.ca_pem


def test_a_fresh_bundle_needs_nothing() -> None:
    assert renewal_due(fresh(), HOSTS, T0 + timedelta(days=1), POLICY) == "none"


def test_the_serving_certificate_is_renewed_with_a_third_of_its_life_left_under_the_same_ca() -> (
    None
):
    bundle = fresh()
    assert renewal_due(bundle, HOSTS, T0 + timedelta(days=19), POLICY) == "none"
    later = T0 + timedelta(days=21)
    assert renewal_due(bundle, HOSTS, later, POLICY) == "serving"
    renewed = renew(bundle, "serving", HOSTS, later, POLICY)
    assert renewed.ca_pem == bundle.ca_pem and renewed.cert_pem != bundle.cert_pem
    assert renewed.ca_bundle(later) == bundle.ca_bundle(later)  # the caBundle does not move
    renewed.cert.verify_directly_issued_by(bundle.ca)


def test_a_change_of_names_renews_the_serving_certificate() -> None:
    assert renewal_due(fresh(), (*HOSTS, "other.svc"), T0, POLICY) == "serving"


def test_the_ca_is_renewed_at_a_fifth_of_its_life_and_the_old_one_trusted_until_expiry() -> None:
    bundle = fresh()
    assert renewal_due(bundle, HOSTS, T0 + timedelta(days=79), POLICY) != "ca"
    later = T0 + timedelta(days=81)
    assert renewal_due(bundle, HOSTS, later, POLICY) == "ca"
    renewed = renew(bundle, "ca", HOSTS, later, POLICY)
    assert renewed.ca_pem != bundle.ca_pem and renewed.previous_ca_pem == bundle.ca_pem
    assert renewed.ca_bundle(later) == renewed.ca_pem + bundle.ca_pem
    assert renewed.ca_bundle(T0 + timedelta(days=101)) == renewed.ca_pem
    renewed.cert.verify_directly_issued_by(renewed.ca)


def test_a_serving_certificate_never_outlives_its_ca() -> None:
    bundle = fresh()
    late = renew(bundle, "serving", HOSTS, T0 + timedelta(days=95), POLICY)
    assert late.cert.not_valid_after_utc <= bundle.ca.not_valid_after_utc


def test_a_bundle_survives_the_secret_round_trip() -> None:
    bundle = renew(fresh(), "ca", HOSTS, T0, POLICY)
    assert bundle_from_secret_data(bundle.to_secret_data()) == bundle


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda d: {}, id="empty"),
        pytest.param(lambda d: {**d, "tls.key": "not base64!"}, id="bad-base64"),
        pytest.param(lambda d: {**d, "tls.crt": d["ca.crt"]}, id="cert-is-the-ca"),
        pytest.param(lambda d: {**d, "ca.crt": fresh().to_secret_data()["ca.crt"]}, id="other-ca"),
        pytest.param(lambda d: {**d, "ca.key": "aGVsbG8="}, id="key-not-pem"),
        pytest.param(lambda d: {**d, "tls.key": d["ca.key"]}, id="key-of-another-cert"),
    ],
)
def test_an_unusable_secret_is_a_bundle_error(change: object) -> None:
    data = fresh().to_secret_data()
    with pytest.raises(BundleError):
        bundle_from_secret_data(change(data))  # type: ignore[operator]
