"""Every write the leader makes (Nodes, its own ConfigMaps) through the fence: started only while
the client-side fence holds, counted in flight, stamped with the term of leadership it is made
under (the API's write deadline cuts it before the Lease could pass to another replica), and,
when the API server's fence policy refuses it, read for who is behind (core/decisions/fencing.py).
Reads, watches and Events go straight through.

A refusal is never retried by a deposed process: its fence is dropped at once (no write starts;
the main loop sees the fence down and exits, as on any lost leadership), once the Lease itself
confirms it (the numbers restart when someone deletes the Lease). A refusal while the API
server has not yet seen this replica's own takeover is a TemporaryError like any other, retried
with backoff; its view lags by milliseconds, so one that still lags after `STALE_VIEW_SECONDS`
is stuck (kube-apiserver stops a built-in param kind's informer for good once no binding used
it for a second, kubernetes/kubernetes#130887): said once as an error, counted as
`stale_view`, and the writes keep waiting, since only the API server can let them land.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Literal, TypeVar

from nodegate.core.decisions.fencing import Term, deposed, refusal_term, stamped
from nodegate.reconciler.kit.errors import PermanentError, TemporaryError
from nodegate.reconciler.kit.fence import LeaderFence, LeaseTerm
from nodegate.reconciler.kit.kube import Api, RawObject
from nodegate.reconciler.kit.reads_through import ReadsThrough

log = logging.getLogger("nodegate.fence")

T = TypeVar("T")
Verdict = Literal["deposed", "lagging", "stale_view"]
STALE_VIEW_SECONDS = 10.0


class FencedError(TemporaryError):
    """The API server's fence refused a write: its term of leadership is not the Lease's."""


class FencedApi(ReadsThrough):
    """`Api` whose writes go through the fence. `policy`: the fence policy's name, whose
    refusals are read (None: none are); `confirm(term)`: whether the Lease, read now, is still
    held under `term` (an error: the refusal's word stands)."""

    def __init__(
        self,
        inner: Api,
        fence: LeaderFence,
        on_refused: Callable[[Verdict], None],
        policy: str | None = None,
        confirm: Callable[[LeaseTerm], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(inner)
        self._policy = policy
        self._confirm = confirm
        self._fence = fence
        self._on_refused = on_refused
        self._clock = clock
        self._lock = threading.Lock()
        self._said: set[tuple[Term, Verdict]] = set()
        self._lagging_since: tuple[Term, float] | None = None
        """The term whose writes the API server refuses as from the future, and since when."""

    # --- writes ----------------------------------------------------------------------------------

    def patch_node(self, name: str, merge_patch: RawObject) -> None:
        self._fenced(lambda api, term: api.patch_node(name, _on(merge_patch, term)))

    def patch_node_status(self, name: str, patch: RawObject) -> RawObject:
        """Stamped like a Node write: a status write keeps the metadata it sends (Node status
        resets only the spec), and the fence policy matches `nodes/status` too, so a deposed
        leader's late condition write is refused where it lands."""
        return self._fenced(lambda api, term: api.patch_node_status(name, _on(patch, term)))

    def patch_noderules_status(self, name: str, merge_patch: RawObject) -> RawObject:
        """Not stamped: a write to a status subresource keeps none of the metadata it sends."""
        return self._fenced(lambda api, _term: api.patch_noderules_status(name, merge_patch))

    def create_configmap(self, namespace: str, body: RawObject) -> RawObject:
        return self._fenced(lambda api, term: api.create_configmap(namespace, _on(body, term)))

    def replace_configmap(self, namespace: str, name: str, body: RawObject) -> RawObject:
        return self._fenced(
            lambda api, term: api.replace_configmap(namespace, name, _on(body, term))
        )

    def patch_configmap(self, namespace: str, name: str, merge_patch: RawObject) -> RawObject:
        return self._fenced(
            lambda api, term: api.patch_configmap(namespace, name, _on(merge_patch, term))
        )

    def delete_configmap(self, namespace: str, name: str, resource_version: str) -> None:
        """The policy checks a delete against the term the object was last written under, so
        the object is first marked with this one (a patch of the version that was read: a
        change in between is a conflict, as for the delete itself), then deleted."""

        def mark(api: Api, term: Term | None) -> str:
            if term is None:
                return resource_version
            stamp = {"metadata": {"resourceVersion": resource_version}}
            marked = api.patch_configmap(namespace, name, _on(stamp, term))
            return str((marked.get("metadata") or {}).get("resourceVersion"))

        version = self._fenced(mark)
        # Its own pass through the fence: the delete is not sent once the fence has lapsed.
        self._fenced(lambda api, _term: api.delete_configmap(namespace, name, version))

    def _fenced(self, send: Callable[[Api, Term | None], T]) -> T:
        """`send(api, term)` while the fence holds, on an API whose writes end before a
        standby could lead (no write this process waits for outlives its Lease); a refusal by
        the fence policy is judged once the write is no longer in flight (the judging may read
        the Lease: a hand-back must not wait for that)."""
        with self._fence.writing() as lease_term:
            term = Term(*lease_term) if lease_term is not None else None
            left = self._fence.time_left()
            api = self._inner if left is None else self._inner.within(left)
            try:
                sent = send(api, term)
            except PermanentError as err:
                leases = None
                if err.status == 403 and self._policy is not None:  # its refusals are Forbidden
                    # The API server's whole answer, a Status: the error's text is cut at 500.
                    whole = str(getattr(err.__cause__, "body", None) or "")
                    leases = refusal_term(whole, self._policy)
                if term is None or leases is None:
                    raise
                refusal = (term, leases, err)
            else:
                with self._lock:
                    self._lagging_since = None  # the API server's view has caught up
                return sent
        raise self._refused(*refusal) from refusal[2]

    def _refused(self, term: Term, leases: Term, err: PermanentError) -> FencedError:
        verdict = self._verdict(term, leases)
        if verdict == "deposed":
            self._fence.deposed((term.holder, term.transitions))
        self._on_refused(verdict)
        with self._lock:
            first = (term, verdict) not in self._said
            self._said.add((term, verdict))
        if first:
            _say(verdict, {"write_term": term.token(), "lease_term": leases.token()})
        return FencedError(f"fenced ({verdict}): {err}")

    def _verdict(self, term: Term, leases: Term) -> Verdict:
        """Deposed when the Lease, read now, is held under another term; when it cannot be
        read, when the refusal's numbers say so."""
        ours = self._still_ours(term)
        if ours is False or (ours is None and deposed(term, leases)):
            return "deposed"
        now = self._clock()
        with self._lock:
            if self._lagging_since is None or self._lagging_since[0] != term:
                self._lagging_since = (term, now)
            since = self._lagging_since[1]
        return "stale_view" if now - since >= STALE_VIEW_SECONDS else "lagging"

    def within(self, seconds: float) -> FencedApi:
        """Its writes are already bounded, by the fence (`_fenced`)."""
        return self

    def _still_ours(self, term: Term) -> bool | None:
        """Whether the Lease, read now, is still held under `term` (the API server's view
        then lags: it has not seen the takeover, or still holds a Lease someone deleted, whose
        numbers were higher); None if it cannot be read."""
        if self._confirm is None:
            return None
        try:
            return self._confirm((term.holder, term.transitions))
        except Exception as err:  # any failure: the refusal's word stands
            log.warning("could not read the Lease to judge a refusal", extra={"error": str(err)})
            return None


def _say(verdict: Verdict, fields: dict[str, str]) -> None:
    """Once per term and verdict: what the refusal means and what follows."""
    if verdict == "deposed":
        log.error(
            "the API server refused a write: this replica no longer leads; it stops writing "
            "(logged once)",
            extra=fields,
        )
    elif verdict == "lagging":
        log.warning(
            "the API server refused a write: it has not seen this replica's takeover yet; "
            "retrying (logged once)",
            extra=fields,
        )
    else:
        log.error(
            f"the API server's view of the Lease has not caught up in {STALE_VIEW_SECONDS:.0f}s: "
            "its param informer is stopped (kubernetes/kubernetes#130887, after the fence "
            "binding was deleted and created again); writes wait until kube-apiserver "
            "restarts, or until the fence binding is deleted (writes then fenced on the client "
            "only); docs/reconciler.md, 'One writer' (logged once)",
            extra=fields,
        )


def _on(body: RawObject, term: Term | None) -> RawObject:
    """`body` stamped with `term` (as is without one)."""
    return body if term is None else {**body, "metadata": stamped(body.get("metadata"), term)}
