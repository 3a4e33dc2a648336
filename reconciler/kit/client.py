"""The transport under every API call: deadlines, TCP keepalive, the client and its pool, and
what each failure is as one of our error kinds (why each bound exists: `kube.py`'s docstring).
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, urlencode

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.utils.keepalive import tcp_keepalive_socket_options

from nodegate.reconciler.kit.errors import (
    ConflictError,
    GoneError,
    KubeError,
    NotFoundError,
    PermanentError,
    TemporaryError,
    ThrottledError,
    TimedOutError,
)

CONNECT_TIMEOUT_SECONDS = 5.0
REQUEST_TIMEOUT_SECONDS = 30.0
WATCH_SILENCE_SLACK_SECONDS = 5.0
KEEPALIVE_IDLE_SECONDS = 15
KEEPALIVE_INTERVAL_SECONDS = 5
KEEPALIVE_PROBES = 3
"""TCP keepalive: an idle connection whose peer is gone is closed by the kernel within
15 + 3 x 5 = 30 s, so the pool never hands it out (client-go asks for 30 s idle, Go's 15 s x 9)."""


TRANSPORT_ERRORS = (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError)


def _retry_after(err: ApiException) -> float | None:
    try:
        return float((err.headers or {})["Retry-After"])
    except (KeyError, ValueError):
        return None


def classify(err: ApiException) -> KubeError:
    """Our kind for an HTTP error answer (also used for ERROR events inside a watch)."""
    status = int(err.status or 0)
    text = f"{status} {err.reason}: {str(err.body or '')[:500]}"
    known = {404: NotFoundError, 409: ConflictError, 410: GoneError}.get(status)
    if known is not None:
        return known(text)
    if status == 429:
        return ThrottledError(text, _retry_after(err))
    # 401: a rotated token is picked up on the next call; 0: no HTTP answer at all.
    if status in (0, 401) or status >= 500:
        return TemporaryError(text, _retry_after(err))
    return PermanentError(text, status, _status_message(err.body))


def _status_message(body: object) -> str | None:
    """The `message` of the API server's Status answer, if the body is one."""
    try:
        found = json.loads(str(body or ""))
    except ValueError:
        return None
    message = found.get("message") if isinstance(found, dict) else None
    return str(message) if message else None


def timed_out(err: BaseException) -> bool:
    """A read that waited past its deadline (also when urllib3 wraps it in MaxRetryError)."""
    reason = getattr(err, "reason", None)
    return isinstance(err, urllib3.exceptions.ReadTimeoutError) or isinstance(
        reason, urllib3.exceptions.ReadTimeoutError
    )


def call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run one client call, mapping every failure to a `KubeError` kind."""
    try:
        return function(*args, **kwargs)
    except ApiException as err:
        raise classify(err) from err
    except TRANSPORT_ERRORS as err:
        kind = TimedOutError if timed_out(err) else TemporaryError
        raise kind(f"{type(err).__name__}: {err}") from err


Query = Mapping[str, str | int | bool]
"""A request's query parameters, spelled as the API server reads them (`labelSelector`,
`resourceVersion`, `fieldManager`, ...); a bool is sent as `true`/`false`, as the client did."""


class Direct:
    """Every request the reconciler makes, sent straight to urllib3 on the official client's own
    pool (its connections, TLS, proxy, retries and keepalive), with its headers (User-Agent) and
    its credentials as it would send them (`auth_settings`, which re-reads a rotated
    service-account token): the official client stays the source of configuration (kubeconfig
    or in-cluster, `load_api_client`), its generated API classes are not used at all. Two
    measured costs:

    * a start: kubernetes 37's generated API modules import, at their top, the pydantic model of
      every object their calls name, so building a reconciler's parts (its clients, the
      election, the controller) took 0.40-0.44 s of CPU with the classes it made (core,
      coordination), 0.005-0.006 s without, on a quiet 2-core machine: about half a start
      before it talks to the cluster (issue 61; docs/benchmarks.md, "The reconciler's restart
      at 1,000 nodes");
    * a call: the generated methods validate every argument with pydantic and walk the body to
      sanitise it, about a third of a write's CPU in a condition storm (docs/benchmarks.md,
      "The condition storm").

    An answer outside 2xx raises `ApiException` as the client's would (status, reason, body,
    headers), so `call` and `classify` read it the same way; a 2xx that is not JSON is refused
    (status 0: a transport fault)."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self._api_client = api_client
        self._base = str(api_client.configuration.host).rstrip("/")
        self._headers = {**api_client.default_headers, "Accept": "application/json"}

    def request(
        self,
        method: str,
        path: str,
        timeout: tuple[float, float],
        *,
        query: Query | None = None,
        body: object = None,
        content_type: str = "application/json",
    ) -> Any:
        """The urllib3 response to `method path?query`, with `body` as JSON if there is one (a
        GET sends none); its body not read yet. `timeout`: (connect, read) seconds."""
        url = self._base + path
        if query:
            text = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in query.items()}
            url += "?" + urlencode(text, quote_via=quote)
        headers = dict(self._headers)
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body, separators=(",", ":")).encode()
        for auth in self._api_client.configuration.auth_settings().values():
            if auth["in"] == "header" and auth["value"]:
                headers[auth["key"]] = str(auth["value"])
        response = self._api_client.rest_client.pool_manager.request(
            method,
            url,
            body=data,
            headers=headers,
            timeout=urllib3.Timeout(connect=timeout[0], read=timeout[1]),
            preload_content=False,
        )
        if not 200 <= response.status <= 299:
            # The body is read here, where a stall or a reset is a transport error `call` maps
            # (ApiException's own read would swallow it, and a fence refusal's words with it);
            # past its first `REFUSAL_BODY_LIMIT` bytes the connection is closed instead.
            said = _read_all(response, timeout, keep=True, limit=REFUSAL_BODY_LIMIT)
            refusal = ApiException(
                response.status, response.reason, body=said.decode(errors="replace")
            )
            refusal.headers = response.headers
            raise refusal
        if not str(response.headers.get("Content-Type", "")).startswith("application/json"):
            response.close()  # a proxy's login page is not the API server's answer
            raise ApiException(0, f"answer is not JSON ({response.headers.get('Content-Type')})")
        return response


DRAIN_CHUNK = 64 * 1024


REFUSAL_BODY_LIMIT = 64 * 1024
"""The most of a refusal's body kept: the API server's Status is well under it, and an answer
that is not one (a proxy's page, a hostile peer's endless body) must not fill the memory."""


def _read_all(
    response: Any, timeout: tuple[float, float], keep: bool, limit: int | None = None
) -> bytes:
    """The answer's body (`keep`; else read and dropped), read to its end within the read
    timeout as a whole: urllib3's is per read, and an answer trickling a byte at a time would
    hold the caller past every deadline. Past it, the connection is closed; past `limit`
    bytes kept, too, and what was read is the answer."""
    deadline = time.monotonic() + timeout[1]
    chunks: list[bytes] = []
    kept = 0
    while chunk := response.read1(DRAIN_CHUNK):  # what has come, not a full chunk
        if keep:
            chunks.append(chunk)
            kept += len(chunk)
            if limit is not None and kept >= limit:
                response.close()
                return b"".join(chunks)[:limit]
        if time.monotonic() > deadline:
            response.close()
            raise TimedOutError(f"answer still arriving after its {timeout[1]:.0f} s read deadline")
    response.release_conn()
    return b"".join(chunks)


def drain(response: Any, timeout: tuple[float, float]) -> None:
    """Read an answer nothing needs to its end, undecoded, so its connection goes back to the
    pool, within `timeout`'s read deadline as a whole (a body broken off or too slow closes the
    connection instead; the 2xx head already said the request was carried out)."""
    try:
        _read_all(response, timeout, keep=False)
    except (TimedOutError, *TRANSPORT_ERRORS):
        response.close()


def json_body(response: Any, timeout: tuple[float, float]) -> dict[str, Any]:
    """Body of an answer whose head `call` returned, as the JSON object every API answer is,
    read as `_read_all` reads it. A connection reset or stalled in the middle of the body
    raises urllib3's `ProtocolError` or `ReadTimeoutError` here, not in `call`, so it is mapped
    here too, or it would leave as a bare urllib3 error that loops catching `KubeError` do not
    expect (the controller's ended on one, at start, with a 200 KiB taint history cut
    mid-answer). A body that is not a JSON object (a proxy's page, a list, a number) is a
    transport fault."""
    try:
        data = _read_all(response, timeout, keep=True)
    except TRANSPORT_ERRORS as err:
        response.close()
        kind = TimedOutError if timed_out(err) else TemporaryError
        raise kind(f"answer broke off: {type(err).__name__}: {err}") from err
    try:
        found = json.loads(data)
    except ValueError as err:
        raise TemporaryError(f"answer is not JSON: {err}") from err
    if not isinstance(found, dict):
        raise TemporaryError(f"answer is not a JSON object: {data[:200]!r}")
    return found


def load_api_client(
    kubeconfig: str | None, connections: int | None = None, context: str | None = None
) -> client.ApiClient:
    """An ApiClient from a kubeconfig file, or the in-cluster service account.

    Its connection pool carries a default timeout, so calls made by library code that passes
    none (the generated API classes the CLI calls) cannot hang on a dead connection either.
    `connections`: how many requests may be in flight at once (the client's default is 5 per
    core, 10 on 2 cores; a request beyond the pool opens a connection, with its TLS handshake,
    and drops it afterwards), so the pool is sized to the workers and open watches that share
    it.
    `context`: a kubeconfig context other than the current one (the day-2 commands' --context).
    """
    if kubeconfig or context:
        api_client: client.ApiClient = config.new_client_from_config(
            config_file=kubeconfig, context=context
        )
    else:
        config.load_incluster_config()
        api_client = client.ApiClient()
    pool = api_client.rest_client.pool_manager
    if connections is not None:
        pool.connection_pool_kw["maxsize"] = connections
    pool.connection_pool_kw["timeout"] = urllib3.Timeout(
        connect=CONNECT_TIMEOUT_SECONDS, read=REQUEST_TIMEOUT_SECONDS
    )
    # A read that timed out is the caller's to retry (on a new connection), never urllib3's; so
    # is an answer saying when to come back (429, 503 with Retry-After): urllib3 would sleep it
    # (up to 6 h) and send a GET, PUT or DELETE again, past every bound the caller set (a fenced
    # write's, a Lease call's cut). The caller's error kind carries it (`retry_after`).
    pool.connection_pool_kw["retries"] = urllib3.Retry(
        total=3, read=0, redirect=0, respect_retry_after_header=False
    )
    pool.connection_pool_kw["socket_options"] = tcp_keepalive_socket_options(
        KEEPALIVE_IDLE_SECONDS, KEEPALIVE_INTERVAL_SECONDS, KEEPALIVE_PROBES
    )
    return api_client
