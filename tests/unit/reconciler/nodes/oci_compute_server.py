"""A local HTTPS server that speaks the part of the OCI Compute API nodegate calls, and checks
every request's signature as OCI does. No OCI endpoint is reachable here; a server that did not
check signatures would test nothing of the SDK's auth.

* `GET /20160918/instances?compartmentId=...&limit=...&page=...` (ListInstances): a JSON array
  of Instance objects (camelCase, as documented), `opc-next-page` when more follow,
  `opc-request-id` on every answer; an unknown compartment answers 404
  `NotAuthorizedOrNotFound`, as OCI does for a compartment the caller may not see.
* Signatures (OCI's "Request Signatures", draft-cavage HTTP Signatures): `Authorization:
  Signature version="1",keyId="<tenancy>/<user>/<fingerprint>",algorithm="rsa-sha256",
  headers="date (request-target) host",signature="<base64>"`; a body also signs
  `content-length content-type x-content-sha256`, and x-content-sha256 must be the body's hash.
  The signature is verified with the public half of the test key; a missing, malformed or
  wrong signature, another keyId, a header not signed or a `date` more than 5 minutes off
  answers 401 `NotAuthenticated`.
* `fail_next(status, code, times)` answers the next requests with an error (429
  `TooManyRequests`, 500 `InternalServerError`...), and `stall_next(seconds)` answers late, to
  test what the caller does with them.

The TLS certificate is self-signed, made at start with `cryptography`; `ca_file` is what a
client must trust. `api_key_config` writes an OCI config file for the SDK (`oci.config.from_file`).
"""

from __future__ import annotations

import base64
import datetime as dt
import email.utils
import functools
import hashlib
import ipaddress
import json
import re
import ssl
import sys
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

API_VERSION = "/20160918"
TENANCY = "ocid1.tenancy.oc1..aaaaaaaatestenancy"
USER = "ocid1.user.oc1..aaaaaaaatestuser"
REGION = "eu-frankfurt-1"
CLOCK_SKEW_SECONDS = 300
GENERIC_HEADERS = ("date", "(request-target)", "host")
BODY_HEADERS = ("content-length", "content-type", "x-content-sha256")
_PARAM = re.compile(r'(\w+)="([^"]*)"')


def instance_ocid(suffix: str) -> str:
    return f"ocid1.instance.oc1.{REGION}.{suffix}"


def instance(
    ocid: str,
    state: str = "RUNNING",
    compartment: str = "",
    maintenance_due: dt.datetime | None = None,
) -> dict[str, Any]:
    """An Instance as ListInstances documents it (the fields the SDK's model reads)."""
    body: dict[str, Any] = {
        "id": ocid,
        "compartmentId": compartment,
        "availabilityDomain": "Uocm:EU-FRANKFURT-1-AD-1",
        "displayName": ocid.rsplit(".", 1)[-1],
        "lifecycleState": state,
        "region": REGION,
        "shape": "VM.Standard.E4.Flex",
        "timeCreated": "2026-11-01T00:00:00.000Z",
    }
    if maintenance_due is not None:
        body["timeMaintenanceRebootDue"] = maintenance_due.astimezone(dt.UTC).strftime(
            "%Y-%m-%dT%H:%M:%S.000Z"
        )
    return body


@dataclass
class Seen:
    """One request as the server saw it."""

    method: str
    path: str
    query: dict[str, str]
    status: int
    verified: bool


@dataclass
class ComputeState:
    """What the server answers; change it from the test while the server runs."""

    compartments: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    failures: deque[tuple[int, str]] = field(default_factory=deque)
    stalls: deque[float] = field(default_factory=deque)
    """Seconds the next requests wait before they are answered (a slow or stuck endpoint)."""
    seen: list[Seen] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    check_signatures: bool = True
    """Off only to prove a test fails without the check (never in a committed test)."""


@functools.cache
def _key(purpose: str) -> rsa.RSAPrivateKey:
    """One RSA key per purpose and test process (made at test time; 2048-bit keys take a
    while to make, and every server of a run may share them)."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _fingerprint(public_key: rsa.RSAPublicKey) -> str:
    """OCI's key fingerprint: MD5 of the DER SubjectPublicKeyInfo, colon-separated hex."""
    der = public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    digest = hashlib.md5(der).hexdigest()
    return ":".join(digest[i : i + 2] for i in range(0, len(digest), 2))


def _self_signed(key: rsa.RSAPrivateKey) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )


class OciComputeServer:
    """Start with `with OciComputeServer(tmp_path) as server:`; `server.endpoint` is its URL."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.state = ComputeState()
        self.api_key = _key("api")
        self.fingerprint = _fingerprint(self.api_key.public_key())
        self.key_id = f"{TENANCY}/{USER}/{self.fingerprint}"
        tls_key = _key("tls")
        self.ca_file = directory / "oci-ca.pem"
        self.ca_file.write_bytes(_self_signed(tls_key).public_bytes(serialization.Encoding.PEM))
        tls_key_file = directory / "oci-tls-key.pem"
        tls_key_file.write_bytes(
            tls_key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.ca_file, tls_key_file)
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.endpoint = f"https://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self) -> OciComputeServer:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # --- what tests set up and read ------------------------------------------------------------

    def put(self, compartment: str, *instances: dict[str, Any]) -> None:
        """The compartment's instances, replacing what it had (created if new)."""
        with self.state.lock:
            self.state.compartments[compartment] = [
                {**i, "compartmentId": compartment} for i in instances
            ]

    def fail_next(self, status: int, code: str, times: int = 1) -> None:
        with self.state.lock:
            self.state.failures.extend([(status, code)] * times)

    def stall_next(self, seconds: float, times: int = 1) -> None:
        with self.state.lock:
            self.state.stalls.extend([seconds] * times)

    def requests(self, status: int | None = None) -> list[Seen]:
        with self.state.lock:
            return [s for s in self.state.seen if status is None or s.status == status]

    def api_key_config(self, key: rsa.RSAPrivateKey | None = None) -> Path:
        """An OCI config file (profile DEFAULT) for the SDK, signing with `key` (default: the
        test key whose public half the server checks)."""
        key_file = self.directory / f"oci-api-key-{uuid.uuid4().hex[:6]}.pem"
        key_file.write_bytes(
            (key or self.api_key).private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        config = self.directory / f"oci-config-{uuid.uuid4().hex[:6]}"
        config.write_text(
            "[DEFAULT]\n"
            f"user={USER}\nfingerprint={self.fingerprint}\ntenancy={TENANCY}\n"
            f"region={REGION}\nkey_file={key_file}\n"
        )
        return config

    # --- the server ----------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                server._serve(self, b"")

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                server._serve(self, self.rfile.read(length))

        return Handler

    def _serve(self, request: BaseHTTPRequestHandler, body: bytes) -> None:
        parts = urlsplit(request.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        problem = self._signature_problem(request, body)
        verified = problem is None
        if problem is not None and self.state.check_signatures:
            self._answer(request, parts.path, query, 401, _error("NotAuthenticated", problem))
            return
        with self.state.lock:
            stall = self.state.stalls.popleft() if self.state.stalls else 0.0
        time.sleep(stall)
        with self.state.lock:
            failure = self.state.failures.popleft() if self.state.failures else None
        if failure is not None:
            status, code = failure
            self._answer(request, parts.path, query, status, _error(code, f"{code} (on demand)"))
            return
        if request.command != "GET" or parts.path != f"{API_VERSION}/instances":
            self._answer(request, parts.path, query, 404, _error("NotFound", "no such path"))
            return
        self._list_instances(request, parts.path, query, verified)

    def _list_instances(
        self, request: BaseHTTPRequestHandler, path: str, query: dict[str, str], verified: bool
    ) -> None:
        compartment = query.get("compartmentId", "")
        with self.state.lock:
            instances = self.state.compartments.get(compartment)
        if instances is None:
            message = "Authorization failed or requested resource not found."
            self._answer(request, path, query, 404, _error("NotAuthorizedOrNotFound", message))
            return
        limit = int(query.get("limit") or 1000)
        start = int(base64.urlsafe_b64decode(query["page"]).decode()) if "page" in query else 0
        page = instances[start : start + limit]
        headers = {}
        if start + limit < len(instances):
            headers["opc-next-page"] = base64.urlsafe_b64encode(
                str(start + limit).encode()
            ).decode()
        self._answer(request, path, query, 200, page, headers, verified)

    def _answer(
        self,
        request: BaseHTTPRequestHandler,
        path: str,
        query: dict[str, str],
        status: int,
        payload: Any,
        headers: dict[str, str] | None = None,
        verified: bool = False,
    ) -> None:
        with self.state.lock:
            self.state.seen.append(Seen(request.command, path, query, status, verified))
        data = json.dumps(payload).encode()
        request.send_response(status)
        request.send_header("content-type", "application/json")
        request.send_header("content-length", str(len(data)))
        request.send_header("opc-request-id", uuid.uuid4().hex.upper())
        if status == 429:
            request.send_header("retry-after", "1")
        for name, value in (headers or {}).items():
            request.send_header(name, value)
        request.end_headers()
        request.wfile.write(data)

    def _signature_problem(self, request: BaseHTTPRequestHandler, body: bytes) -> str | None:
        """Why the request's signature does not hold (None: it does)."""
        authorization = request.headers.get("authorization") or ""
        if not authorization.startswith("Signature "):
            return "no Signature authorization"
        params = dict(_PARAM.findall(authorization))
        if params.get("keyId") != self.key_id:
            return f"unknown keyId {params.get('keyId')!r}"
        if params.get("algorithm") != "rsa-sha256" or params.get("version", "1") != "1":
            return "algorithm must be rsa-sha256, version 1"
        signed = params.get("headers", "date").split()
        required = GENERIC_HEADERS + (BODY_HEADERS if request.command in ("POST", "PUT") else ())
        missing = [h for h in required if h not in signed]
        if missing:
            return f"headers not signed: {', '.join(missing)}"
        if body or request.command in ("POST", "PUT"):
            digest = base64.b64encode(hashlib.sha256(body).digest()).decode()
            if request.headers.get("x-content-sha256") != digest:
                return "x-content-sha256 does not match the body"
        try:
            date = email.utils.parsedate_to_datetime(request.headers.get("date") or "")
        except (TypeError, ValueError):
            return "no readable date header"
        if abs((dt.datetime.now(dt.UTC) - date).total_seconds()) > CLOCK_SKEW_SECONDS:
            return "date too far from now"
        lines = []
        for name in signed:
            if name == "(request-target)":
                lines.append(f"(request-target): {request.command.lower()} {request.path}")
            else:
                value = request.headers.get(name)
                if value is None:
                    return f"signed header {name} absent"
                lines.append(f"{name}: {value}")
        try:
            signature = base64.b64decode(params.get("signature", ""), validate=True)
            self.api_key.public_key().verify(
                signature, "\n".join(lines).encode(), padding.PKCS1v15(), hashes.SHA256()
            )
        except (InvalidSignature, ValueError):
            return "signature does not verify"
        return None


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (a timed-out call, a closed pool) is no server error."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


def _error(code: str, message: str) -> dict[str, str]:
    return {"code": code, "message": message}
