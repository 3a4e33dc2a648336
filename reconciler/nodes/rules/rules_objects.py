"""Rules as NodeRules objects: every object watched (through the same informer as Nodes), all
of them merged (`nodegate.core.rules.merge`) into one update for the rules in force.

A refused or conflicting generation of an object is reported once (a Warning Event on the
object, a metric, an error log) and its last good version stays in force; each object's status
says the same (`object_status`). The merge is judged against the versions in force, so it is
done again whenever they change (`remerge`: a restart put the recorded ones back, or the
blast-radius guard let an update through).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace

from nodegate.core.decisions.blast_radius import rules_digest
from nodegate.core.rules.merge import (
    OBJECTS_SOURCE,
    Merged,
    RulesObject,
    Verdict,
    merge,
    object_of_document,
)
from nodegate.reconciler.kit.errors import KubeError
from nodegate.reconciler.kit.events import Recorder
from nodegate.reconciler.kit.informer import Informer
from nodegate.reconciler.kit.kube import ListWatch, RawObject, Selection
from nodegate.reconciler.nodes.metrics import RulesSourceMetrics
from nodegate.reconciler.nodes.rules.rules_source import RulesUpdate
from nodegate.reconciler.settings import ReconcilerSettings

log = logging.getLogger("nodegate.rules")

CONFIRM_SECONDS = 2.0
"""How often, while an update is held, the NodeRules CRD is read for a confirmation."""


class RulesObjects:
    """Watches the NodeRules objects and offers their merge (`on_valid`) when it changes."""

    def __init__(
        self,
        settings: ReconcilerSettings,
        api: ListWatch,
        recorder: Recorder,
        metrics: RulesSourceMetrics,
        on_valid: Callable[[RulesUpdate], None],
        standing: Callable[[], Mapping[str, RulesObject]] = dict,
        leading: Callable[[], bool] = lambda: True,
        confirmed: Callable[[], str | None] = lambda: None,
        held: Callable[[], tuple[RulesUpdate, str] | None] = lambda: None,
    ) -> None:
        """`leading`: whether this replica leads; only the leader reports on the objects (a
        standby merges against no versions in force, and could name another conflict).
        `confirmed`: the digest a cluster admin confirmed on the NodeRules CRD (read when
        asked); `held`: the update the blast-radius guard holds, if any."""
        self._settings = settings
        self._api = api
        self._recorder = recorder
        self._metrics = metrics
        self._on_valid = on_valid
        self._standing = standing
        self._leading = leading
        self._confirmed = confirmed
        self._held = held
        self._next_confirmation = 0.0
        self._lock = threading.Lock()
        self._informer: Informer[RawObject] | None = None
        self._reported: dict[str, tuple[int, str]] = {}
        self._last_offer: str | None = None
        self.merged: Merged | None = None
        """The last merge: each object's verdict (`object_status` reports them)."""
        self.loaded = threading.Event()
        """Set once the objects were listed (even none: no objects is no rules)."""

    def objects(self) -> list[RawObject]:
        informer = self._informer
        return [raw for _, raw in informer.items()] if informer is not None else []

    def run(self, stop: threading.Event) -> None:
        informer: Informer[RawObject] = Informer(
            "rules",
            self._api,
            Selection("NodeRules"),
            lambda raw: raw,
            self._on_event,
            watch_timeout_seconds=self._settings.watch_timeout_seconds,
            on_error=self._metrics.on_informer_error,
            on_synced=self.remerge,
        )
        self._informer = informer
        informer.run(stop)

    def _on_event(self, _key: str, old: RawObject | None, new: RawObject | None) -> None:
        """Merge again, unless only the object's status changed (the leader's own writes:
        one per object and change, each a watch event)."""
        if old is not None and new is not None and _what_merges(old) == _what_merges(new):
            return
        self.remerge()

    def remerge(self) -> None:
        """Merge the objects as they are against the versions in force, and offer the result
        if it differs from the last offered (any thread)."""
        informer = self._informer
        if informer is None or not informer.synced.is_set():
            return
        with self._lock:
            raws = {raw["metadata"]["name"]: raw for _, raw in informer.items()}
            objects = [object_of_document(raw) for raw in raws.values()]
            try:
                merged = merge(objects, self._standing())
            except Exception:  # a bug must not end the watch: the next event merges again
                log.exception("NodeRules objects not merged; the rules in force stay")
                self._metrics.errors.labels("internal").inc()
                return
            self.merged = merged
            for name, verdict in merged.verdicts.items():
                self._report(name, str((raws[name].get("metadata") or {}).get("uid", "")), verdict)
            text = merged.text
            digest = rules_digest(text)
            if text == self._last_offer:
                return
            self._last_offer = text
        self.loaded.set()
        self._metrics.rules_valid.set(int(all(v.accepted for v in merged.verdicts.values())))
        log.info(
            "rules objects merged",
            extra={"digest": digest, "objects": [p.name for p in merged.parts]},
        )
        self._on_valid(
            RulesUpdate(merged.rules, digest, OBJECTS_SOURCE, None, None, text, merged.parts)
        )

    def confirm_when_due(self) -> None:
        """While the guard holds an update of these objects, look (every `CONFIRM_SECONDS`)
        whether a cluster admin confirmed its digest on the NodeRules CRD, and offer it
        confirmed if so (a leader's chore). Not on the objects: a team may annotate its own
        object, and so would approve its own change, or another team's."""
        held = self._held()
        if held is None or held[0].source != OBJECTS_SOURCE:
            return
        now = time.monotonic()
        if now < self._next_confirmation:
            return
        self._next_confirmation = now + CONFIRM_SECONDS
        update = held[0]
        try:
            confirmed = self._confirmed()
        except KubeError as err:
            log.warning("NodeRules CRD not read for a confirmation", extra={"error": str(err)})
            return
        if (confirmed or "").strip() != update.digest:
            return
        log.warning(
            "held rules update confirmed on the NodeRules CRD", extra={"digest": update.digest}
        )
        self._on_valid(replace(update, confirmation=update.digest))

    def _report(self, name: str, uid: str, verdict: Verdict) -> None:
        """A refused or conflicting generation, once per (object, generation, reason)."""
        if not self._leading():
            return
        if verdict.accepted and not verdict.conflicting:
            self._reported.pop(name, None)
            return
        reason = "RulesRejected" if not verdict.accepted else "RulesConflict"
        said = (verdict.generation, reason)
        if self._reported.get(name) == said:
            return
        self._reported[name] = said
        keeping = (
            f"generation {verdict.in_force} of it stays in force"
            if verdict.in_force is not None
            else "none of it is in force"
        )
        why = " | ".join(verdict.problems) if not verdict.accepted else verdict.conflict
        message = f"generation {verdict.generation} not in force ({keeping}): {why}"
        if not verdict.accepted:
            self._metrics.rules_rejected.inc()
        log.error("rules object not in force", extra={"object": name, "reason": reason, "why": why})
        self._recorder.on_rules_object(name, uid, reason, message)


def _what_merges(raw: RawObject) -> tuple[object, ...]:
    """What of an object the merge reads: its generation (the API server moves it with the
    spec, never with the status or the metadata) and its creation."""
    meta = raw.get("metadata") or {}
    return (meta.get("generation"), meta.get("creationTimestamp"))
