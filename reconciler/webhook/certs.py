"""The webhook's own PKI: a self-signed CA and a serving certificate, and when to renew them.

Pure apart from key generation: the time is an argument, so renewal is unit-tested with a
clock. The same scheme as open-policy-agent/cert-controller (Gatekeeper's): one CA and one
serving certificate kept in a Secret that every replica reads, the CA written into the
MutatingWebhookConfiguration's caBundle (`tls.py` does the API side).

* The serving certificate is renewed under the same CA when a third of its life is left, or
  when the names it must carry change: the caBundle does not change, nothing can fail.
* The CA is renewed when a fifth of its life is left; the old CA stays in the caBundle, next to
  the new one, until it expires, so a replica still serving a certificate of the old CA (it
  re-reads the Secret every few minutes) is trusted meanwhile.

EC P-256 keys: generated in milliseconds, accepted by every API server.
"""

from __future__ import annotations

import base64
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import astuple, dataclass, replace
from datetime import datetime, timedelta
from typing import Literal

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_FILE, CA_KEY_FILE = "ca.crt", "ca.key"
CERT_FILE, KEY_FILE = "tls.crt", "tls.key"
PREVIOUS_CA_FILE = "previous-ca.crt"
"""Keys of the Secret's data (tls.crt/tls.key as in a kubernetes.io/tls Secret)."""
FILES = (CA_FILE, CA_KEY_FILE, CERT_FILE, KEY_FILE, PREVIOUS_CA_FILE)
"""The Secret's keys in the order of `ServingBundle`'s fields."""

BACKDATE = timedelta(minutes=5)
"""Certificates start a little in the past, so a peer with a skewed clock accepts them."""


@dataclass(frozen=True)
class CertPolicy:
    """Lifetimes (defaults: a 5-year CA, 90-day serving certificates)."""

    ca_lifetime: timedelta = timedelta(days=5 * 365)
    serving_lifetime: timedelta = timedelta(days=90)


@dataclass(frozen=True)
class ServingBundle:
    """Everything the Secret holds, as PEM."""

    ca_pem: bytes
    ca_key_pem: bytes
    cert_pem: bytes
    key_pem: bytes
    previous_ca_pem: bytes = b""

    @property
    def ca(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.ca_pem)

    @property
    def cert(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)

    def ca_bundle(self, now: datetime) -> bytes:
        """What the webhook configuration must trust: the CA, and the previous CA until it
        expires."""
        bundle = self.ca_pem
        if self.previous_ca_pem:
            previous = x509.load_pem_x509_certificate(self.previous_ca_pem)
            if previous.not_valid_after_utc > now:
                bundle += self.previous_ca_pem
        return bundle

    def to_secret_data(self) -> dict[str, str]:
        """Every part, base64-encoded, under its key (no previous CA: no key for it)."""
        pems = zip(FILES, astuple(self), strict=True)
        return {key: base64.b64encode(pem).decode("ascii") for key, pem in pems if pem}


class BundleError(ValueError):
    """The Secret's data is not a usable bundle (empty, hand-edited, truncated)."""


def bundle_from_secret_data(data: Mapping[str, object] | None) -> ServingBundle:
    """The bundle a Secret's data holds; BundleError if any part is missing or unreadable."""
    pems: dict[str, bytes] = {}
    for key in FILES:
        value = (data or {}).get(key)
        if value is None and key == PREVIOUS_CA_FILE:
            pems[key] = b""
            continue
        if not isinstance(value, str) or not value:
            raise BundleError(f"no '{key}'")
        try:
            pems[key] = base64.b64decode(value, validate=True)
        except ValueError as err:  # binascii.Error among them
            raise BundleError(f"'{key}' is not base64: {err}") from err
    bundle = ServingBundle(*(pems[key] for key in FILES))
    try:
        ca, cert = bundle.ca, bundle.cert
        if bundle.previous_ca_pem:
            x509.load_pem_x509_certificate(bundle.previous_ca_pem)
        cert.verify_directly_issued_by(ca)
        if not _pairs(ca, bundle.ca_key_pem) or not _pairs(cert, bundle.key_pem):
            raise ValueError("a key does not belong to its certificate")
        if cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca:
            raise ValueError("tls.crt is a CA certificate, not a serving one")
    except (ValueError, TypeError, InvalidSignature, x509.ExtensionNotFound) as err:
        raise BundleError(f"unreadable or inconsistent certificates: {err}") from err
    return bundle


def _pairs(cert: x509.Certificate, key_pem: bytes) -> bool:
    return _load_key(key_pem).public_key() == cert.public_key()


Renewal = Literal["none", "serving", "ca"]


def renewal_due(
    bundle: ServingBundle, hosts: Sequence[str], now: datetime, policy: CertPolicy
) -> Renewal:
    """What must be renewed now: nothing, the serving certificate (a third of its life left,
    or other names), or the CA (a fifth of its life left; and with it the serving
    certificate)."""
    if now >= bundle.ca.not_valid_after_utc - policy.ca_lifetime / 5:
        return "ca"
    cert = bundle.cert
    expiring = now >= cert.not_valid_after_utc - policy.serving_lifetime / 3
    if expiring or sorted(names_of(cert)) != sorted(set(hosts)):
        return "serving"
    return "none"


def renew(
    bundle: ServingBundle | None,
    what: Renewal,
    hosts: Sequence[str],
    now: datetime,
    policy: CertPolicy,
) -> ServingBundle:
    """The bundle after `what` is renewed; a new CA and certificate when there is no bundle."""
    if bundle is None or what == "ca":
        ca_pem, ca_key_pem = new_ca(now, policy)
        cert_pem, key_pem = new_serving(ca_pem, ca_key_pem, hosts, now, policy)
        previous = bundle.ca_pem if bundle is not None else b""
        return ServingBundle(ca_pem, ca_key_pem, cert_pem, key_pem, previous)
    if what == "serving":
        cert_pem, key_pem = new_serving(bundle.ca_pem, bundle.ca_key_pem, hosts, now, policy)
        return replace(bundle, cert_pem=cert_pem, key_pem=key_pem)
    return bundle


def names_of(cert: x509.Certificate) -> list[str]:
    """The DNS names and IP addresses a certificate is valid for."""
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [*san.get_values_for_type(x509.DNSName)] + [
        str(ip) for ip in san.get_values_for_type(x509.IPAddress)
    ]


def _san(hosts: Sequence[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in sorted(set(hosts)):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def _load_key(pem: bytes) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise TypeError("not an EC private key")
    return key


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _builder(
    subject: str, issuer: x509.Name | None, key: ec.EllipticCurvePrivateKey, now: datetime
) -> x509.CertificateBuilder:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer or name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
    )


def new_ca(now: datetime, policy: CertPolicy) -> tuple[bytes, bytes]:
    """A self-signed CA: (certificate PEM, key PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    usage = x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    cert = (
        _builder(f"nodegate-webhook-ca-{stamp}", None, key, now)
        .not_valid_after(now + policy.ca_lifetime)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def new_serving(
    ca_pem: bytes, ca_key_pem: bytes, hosts: Sequence[str], now: datetime, policy: CertPolicy
) -> tuple[bytes, bytes]:
    """A serving certificate for `hosts` (DNS names or IP addresses) signed by the CA; it never
    outlives the CA."""
    if not hosts:
        raise ValueError("a serving certificate needs at least one DNS name or IP address")
    ca = x509.load_pem_x509_certificate(ca_pem)
    ca_key = _load_key(ca_key_pem)
    key = ec.generate_private_key(ec.SECP256R1())
    not_after = min(now + policy.serving_lifetime, ca.not_valid_after_utc)
    cert = (
        _builder(sorted(hosts)[0][:64], ca.subject, key, now)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(_san(hosts), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)
