"""The throw-away PKI a local control plane needs.

kube-apiserver only serves TLS, authenticates its clients by certificate here (an admin in
`system:masters`, so RBAC never gets in a test's way) and refuses to start without a
service-account signing key. Everything is generated fresh per control plane; EC P-256 keys
keep generation in the milliseconds.
"""

from __future__ import annotations

import datetime
import ipaddress
import warnings
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ADMIN_USER = "nodegate-e2e-admin"
ADMIN_GROUP = "system:masters"
# The first address of --service-cluster-ip-range: the in-cluster `kubernetes` Service.
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
KUBERNETES_SERVICE_IP = "10.0.0.1"

_VALIDITY = datetime.timedelta(days=7)


@dataclass(frozen=True)
class ControlPlanePKI:
    """File paths of every PEM the components are started with."""

    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    service_account_key: Path
    service_account_public_key: Path


def create_pki(directory: Path) -> ControlPlanePKI:
    """Write a CA, an apiserver serving cert, an admin client cert and the SA keypair."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = _new_key()
    ca_name = _name("nodegate-e2e-ca")
    ca_cert = (
        _builder(ca_name, ca_name, ca_key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )

    serving_key = _new_key()
    serving_cert = _leaf(
        _name("kube-apiserver"),
        serving_key,
        ca_cert,
        ca_key,
        usage=ExtendedKeyUsageOID.SERVER_AUTH,
        san=x509.SubjectAlternativeName(
            [
                x509.DNSName("localhost"),
                x509.DNSName("kubernetes"),
                x509.DNSName("kubernetes.default"),
                x509.DNSName("kubernetes.default.svc"),
                x509.DNSName("kubernetes.default.svc.cluster.local"),
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                x509.IPAddress(ipaddress.ip_address(KUBERNETES_SERVICE_IP)),
            ]
        ),
    )

    admin_key = _new_key()
    admin_cert = _leaf(
        _name(ADMIN_USER, organization=ADMIN_GROUP),
        admin_key,
        ca_cert,
        ca_key,
        usage=ExtendedKeyUsageOID.CLIENT_AUTH,
    )

    sa_key = _new_key()
    pki = ControlPlanePKI(
        ca_cert=directory / "ca.crt",
        ca_key=directory / "ca.key",
        serving_cert=directory / "apiserver.crt",
        serving_key=directory / "apiserver.key",
        admin_cert=directory / "admin.crt",
        admin_key=directory / "admin.key",
        service_account_key=directory / "sa.key",
        service_account_public_key=directory / "sa.pub",
    )
    _write_cert(pki.ca_cert, ca_cert)
    _write_key(pki.ca_key, ca_key)
    _write_cert(pki.serving_cert, serving_cert)
    _write_key(pki.serving_key, serving_key)
    _write_cert(pki.admin_cert, admin_cert)
    _write_key(pki.admin_key, admin_key)
    _write_key(pki.service_account_key, sa_key)
    pki.service_account_public_key.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return pki


@dataclass(frozen=True)
class ClientIdentity:
    """A client certificate and key on disk, as a kubeconfig or ApiClient names them."""

    user: str
    cert: Path
    key: Path


NODES_GROUP = "system:nodes"


def issue_node_identity(pki: ControlPlanePKI, node_name: str, directory: Path) -> ClientIdentity:
    """A kubelet's credentials for `node_name`: CN `system:node:<name>`, O `system:nodes`.

    This is what a compromised node holds; the Node authorizer and NodeRestriction decide what
    it may write, exactly as on a real cluster.
    """
    user = f"system:node:{node_name}"
    return issue_client_identity(pki, user, NODES_GROUP, directory)


def issue_client_identity(
    pki: ControlPlanePKI, user: str, group: str | None, directory: Path
) -> ClientIdentity:
    """A client certificate for `user` (optionally in `group`), signed by the cluster's CA."""
    ca_cert = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{pki.ca_key}: expected an EC private key")
    key = _new_key()
    cert = _leaf(
        _name(user, organization=group), key, ca_cert, ca_key, usage=ExtendedKeyUsageOID.CLIENT_AUTH
    )
    directory.mkdir(parents=True, exist_ok=True)
    stem = user.replace(":", "_")
    identity = ClientIdentity(
        user=user, cert=directory / f"{stem}.crt", key=directory / f"{stem}.key"
    )
    _write_cert(identity.cert, cert)
    _write_key(identity.key, key)
    return identity


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    # RFC 5280's 64-character bound on a CN is not one the API server applies, and
    # `system:node:<name>` exceeds it for long node names (names may be 253 characters):
    # cryptography warns and builds it all the same, which is what a kubelet's CSR gets too.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Attribute's length must be", UserWarning)
        attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name, _validate=False)]
    if organization:
        attributes.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey
) -> x509.CertificateBuilder:
    """Common fields; backdated a minute so a slightly skewed clock never rejects them."""
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + _VALIDITY)
    )


def _leaf(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    *,
    usage: x509.ObjectIdentifier,
    san: x509.SubjectAlternativeName | None = None,
) -> x509.Certificate:
    builder = (
        _builder(subject, ca_cert.subject, key)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if san is not None:
        builder = builder.add_extension(san, critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)
