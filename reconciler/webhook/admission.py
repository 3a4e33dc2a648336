"""The Node admission webhook's decision around the wire: an AdmissionReview in, the persisted
labels looked up within budget, `admission_patch` called, an AdmissionReview out.

The decision is `core/decisions/node_admission.py`, the wire format `review.py`; the HTTPS server
and its certificate are `server.py` and `tls.py`. Whatever a request holds, the webhook answers
and stays up: a request it does not handle is answered allowed and unchanged (or HTTP 400/413
when it has no uid to answer), a bug in the patch is logged and answered allowed and unchanged,
a slow record lookup is cut at its budget. It never denies: with `failurePolicy: Ignore` an
outage only means nodes are born without the patch, and the reconciler restores their labels
right after (their gates only with `backfill`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from nodegate.core.decisions.node_admission import admission_patch
from nodegate.core.decisions.persisted_labels import (
    RecordError,
    decode_record,
    key_for,
    record_name,
    restore_refusal,
)
from nodegate.core.rules.model import NO_RULES, NodeRules
from nodegate.core.rules.node import NodeState
from nodegate.reconciler.kit.errors import KubeError
from nodegate.reconciler.webhook.api import RecordReader
from nodegate.reconciler.webhook.review import Refusal, decode_review, error_body, review_response

log = logging.getLogger("nodegate.webhook")


RulesProvider = Callable[[], NodeRules | None]


class WebhookMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.reviews = Counter(
            "nodegate_webhook_reviews",
            "Admission reviews answered, by result (patched, unchanged, refused, error).",
            ["result"],
            registry=registry,
        )
        self.review_seconds = Histogram(
            "nodegate_webhook_review_duration_seconds",
            "Time to answer one admission review, record lookup included.",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
            registry=registry,
        )
        self.refused = Counter(
            "nodegate_webhook_refused",
            "Connections and requests the server refused at one of its limits (connections: "
            "at the cap; deadline: a request not read in time; headers: too large or too many; "
            "body_budget: too many body bytes in flight).",
            ["limit"],
            registry=registry,
        )
        self.open_connections = Gauge(
            "nodegate_webhook_open_connections",
            "Connections the webhook server holds right now (at most its cap).",
            registry=registry,
        )
        self.lookups = Counter(
            "nodegate_webhook_record_lookups",
            "Persisted-label record lookups, by result (found, absent, unreadable, refused: "
            "another live node or another machine, error, timeout).",
            ["result"],
            registry=registry,
        )


class RecordLookup:
    """The persisted labels of a node being created: one GET of its record ConfigMap, within
    a budget. Anything but a readable record of this node's key is no labels (and a log line)."""

    def __init__(
        self, reader: RecordReader, namespace: str, budget_seconds: float, metrics: WebhookMetrics
    ) -> None:
        self._reader = reader
        self._namespace = namespace
        self._budget = budget_seconds
        self._metrics = metrics
        # Calls run on a pool so the budget is a deadline whatever the client's own retries do.
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="webhook-lookup")

    def labels(self, node: Mapping[str, Any], rules: NodeRules) -> Mapping[str, str]:
        config = rules.persistent_labels
        if config is None:
            return {}
        metadata, spec = node.get("metadata"), node.get("spec")
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
        provider_id = spec.get("providerID") if isinstance(spec, Mapping) else None
        key = key_for(
            name if isinstance(name, str) else "",
            provider_id if isinstance(provider_id, str) else "",
            config,
        )
        if not key:
            return {}
        record = record_name(key)
        future = self._pool.submit(self._reader.read_configmap, self._namespace, record)
        context = {"node": name, "key": key, "record": record}
        try:
            raw = future.result(timeout=self._budget)
        except FutureTimeout:
            future.cancel()
            return self._none("timeout", "record lookup over its budget", context)
        except KubeError as err:
            return self._none("error", f"record lookup failed: {err}", context)
        if raw is None:
            self._metrics.lookups.labels("absent").inc()
            return {}
        try:
            stored = decode_record(raw.get("data"))
        except RecordError as err:
            return self._none("unreadable", f"record unreadable: {err}", context)
        if stored.key != key:
            return self._none("unreadable", f"record is for key {stored.key!r}", context)
        # The reconciler's rules: one live node per key, and only the machine the record was
        # kept for. Without a cache of every node, "live" is the record not yet marked gone.
        holder = () if stored.node_gone_at is not None else stored.node_names[-1:] or ("?",)
        refusal = restore_refusal(stored, NodeState.from_k8s(node), config, holder)
        if refusal is not None:
            return self._none("refused", refusal, context)
        self._metrics.lookups.labels("found").inc()
        return stored.labels

    def _none(self, result: str, why: str, context: dict[str, Any]) -> Mapping[str, str]:
        self._metrics.lookups.labels(result).inc()
        log.warning(f"{why}; admitting the node without persisted labels", extra=context)
        return {}


class NodeAdmission:
    """One admission review, body to answer: (HTTP status, body)."""

    def __init__(
        self,
        rules: RulesProvider,
        lookup: RecordLookup,
        metrics: WebhookMetrics,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._rules = rules
        self._lookup = lookup
        self._metrics = metrics
        self._now = clock

    def review(self, body: bytes) -> tuple[int, bytes]:
        with self._metrics.review_seconds.time():
            return self._review(body)

    def _review(self, body: bytes) -> tuple[int, bytes]:
        request = decode_review(body)
        if isinstance(request, Refusal):
            self._metrics.reviews.labels("refused").inc()
            log.warning(
                "admission review not handled; allowed unchanged",
                extra={"reason": request.reason, "uid": request.uid},
            )
            if request.uid is None:
                return 400, error_body(request.reason)
            return 200, review_response(request.uid)
        rules = self._rules()
        if rules is None:
            # No gates or records yet, but the pool the node registers in is sealed all the same.
            log.warning("no rules yet; node admitted without gates", extra={"node": request.name})
            rules = NO_RULES
        try:
            stored = self._lookup.labels(request.node, rules)
            patch = admission_patch(request.node, rules, stored, self._now())
        except Exception:
            # A bug must never stop a node from registering: admit it unchanged, loudly.
            self._metrics.reviews.labels("error").inc()
            log.exception("admission patch failed; node admitted unchanged")
            return 200, review_response(request.uid)
        self._metrics.reviews.labels("patched" if patch.ops else "unchanged").inc()
        log.info(
            "node admitted",
            extra={
                "node": request.name,
                "gates": list(patch.gates),
                "labels": dict(patch.labels),
                "sealed_pool": patch.sealed,
                "skipped": list(patch.skipped),
                "dry_run": request.dry_run,
            },
        )
        return 200, review_response(request.uid, patch.ops)
