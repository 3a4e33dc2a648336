"""Which rules are in force: a valid update takes effect once the node cache is synced and the
blast-radius guard lets it (or a human confirmed its digest); otherwise it is held and said so.

The decision is `nodegate.core.decisions.blast_radius`; this keeps the offered, held and applied
updates, records every taint the rules ever owned before they act, and reports a hold once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from nodegate.core.decisions.blast_radius import BlastRadius, blast_radius, hold_reason
from nodegate.core.decisions.dry_run import live_owned_taints
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.merge import OBJECTS_SOURCE, RulesObject, confirm_on_crd
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState
from nodegate.defaults.names import CONFIRM_ANNOTATION
from nodegate.reconciler.kit.events import Recorder
from nodegate.reconciler.nodes.metrics import RulesInForceMetrics
from nodegate.reconciler.nodes.records.taint_history import TaintHistory
from nodegate.reconciler.nodes.rules.rules_source import RulesUpdate, report_on_source
from nodegate.reconciler.nodes.rules.status_publisher import StatusPublisher

log = logging.getLogger("nodegate.controller")


@dataclass(frozen=True)
class Applied:
    """The rules in force and their generation (1 = the first rules applied)."""

    update: RulesUpdate
    generation: int

    @property
    def rules(self) -> NodeRules:
        return self.update.rules


class RulesInForce:
    """Offered, held and applied rules; `on_applied` is told each update that takes effect."""

    def __init__(
        self,
        history: TaintHistory,
        recorder: Recorder,
        metrics: RulesInForceMetrics,
        max_untaint_share: float,
        on_applied: Callable[[RulesUpdate], None],
        status: StatusPublisher,
        clock: Callable[[], datetime],
    ) -> None:
        self._history = history
        self._recorder = recorder
        self._metrics = metrics
        self._max_untaint_share = max_untaint_share
        self._on_applied = on_applied
        self._status = status
        self._clock = clock
        self._lock = threading.Lock()
        self._considering = threading.RLock()
        """One `consider` at a time (re-entered from its own callbacks: a remerge offers anew),
        so none judges an update against nothing while another puts the recovered rules back."""
        self._offered: RulesUpdate | None = None
        self._held: RulesUpdate | None = None
        self._held_reason = ""
        self._recovered: Applied | None = None
        self.on_standing: Callable[[], None] = lambda: None
        """Told (after `on_applied`) whenever the versions in force of the rules objects may
        have changed (`standing`): the objects' merge is judged against them."""
        self.applied: Applied | None = None

    @property
    def rules(self) -> NodeRules | None:
        applied = self.applied
        return applied.rules if applied is not None else None

    @property
    def update(self) -> RulesUpdate | None:
        """The update in force (its rules, source and digest)."""
        applied = self.applied
        return applied.update if applied is not None else None

    @property
    def generation(self) -> int:
        applied = self.applied
        return applied.generation if applied is not None else 0

    @property
    def held(self) -> tuple[RulesUpdate, str] | None:
        """The update the guard holds, and why."""
        with self._lock:
            return (self._held, self._held_reason) if self._held is not None else None

    def standing(self) -> dict[str, RulesObject]:
        """The version in force of each rules object (those a restart recovered, until they
        are put back in force)."""
        with self._lock:
            in_force = self.applied or self._recovered
        return in_force.update.standing() if in_force is not None else {}

    def offer(self, update: RulesUpdate) -> None:
        """A valid update (any thread); `consider` decides whether it takes effect."""
        with self._lock:
            self._offered = update

    def consider(self, nodes: Callable[[NodeRules], Iterable[tuple[NodeState, PlanFacts]]]) -> None:
        """Apply the offered update if the guard lets it, given every cached node with the facts
        gathered for the rules judged (`nodes(rules)`: their node agents' readiness). The rules
        a restart recovered are what it is judged against, and go back in force only if it
        does not take effect now: no node is planned under rules an update already replaced
        (the rule an admin deleted while the leader was away would be written, evicting if its
        taint is NoExecute, and taken off a moment later)."""
        with self._considering:
            self._consider(nodes)

    def _consider(
        self, nodes: Callable[[NodeRules], Iterable[tuple[NodeState, PlanFacts]]]
    ) -> None:
        with self._lock:
            recovered, self._recovered = self._recovered, None
            if self.applied is not None:
                recovered = None
            update, applied = self._offered, self.applied or recovered
            radius, reason, took_effect = None, None, False
            if update is not None and (applied is None or applied.update.digest != update.digest):
                before = applied.rules if applied else None
                radius = blast_radius(nodes(update.rules), update.rules, before)
                reason = hold_reason(radius, update.rules, self._max_untaint_share, before)
                if reason is None or update.confirmed:
                    self._history.record(
                        live_owned_taints(update.rules)
                        | (live_owned_taints(before) if before is not None else frozenset()),
                        self._clock(),
                    )
                    self.applied = Applied(update, (applied.generation if applied else 0) + 1)
                    self._held, took_effect = None, True
        if recovered is not None:
            self._put_back(recovered, in_force=not took_effect)
        if update is None:
            return
        if radius is None:
            self._same_text(update)
        elif took_effect:
            self._applied(update, radius)
        else:
            assert reason is not None
            with self._lock:
                self._hold(update, reason)

    def _same_text(self, update: RulesUpdate) -> None:
        """The update offered is the text in force (`applied`)."""
        with self._lock:
            applied = self.applied
            assert applied is not None
            if applied.update != update:  # the same text from its source: adopt the source
                self.applied = Applied(update, applied.generation)
            superseded, self._held = self._held, None
        if superseded is not None:
            self._superseded(superseded, update)
        else:  # a hold recorded before a restart, reverted since
            self._status.released()

    def _applied(self, update: RulesUpdate, radius: BlastRadius) -> None:
        self._metrics.rules_held.set(0)
        self._metrics.rules_generation.set(self.generation)
        self._status.applied(update, self.generation)
        log.info(
            "rules in force",
            extra={
                "source": update.source,
                "digest": update.digest,
                "generation": self.generation,
                "untainting_nodes": radius.untainted_nodes,
                "evicting_nodes": radius.evicted_nodes,
                "confirmed": update.confirmed,
            },
        )
        self._on_applied(update)
        self.on_standing()

    def restore(self, update: RulesUpdate, generation: int) -> None:
        """The rules a former leader (or this process before a restart) had in force, as the
        status record holds them. The first `consider`, once the node cache is synced (nothing is
        planned before), judges the offered update against them, not against nothing (they
        passed the guard when they were applied), and puts them back in force unless it takes
        effect."""
        with self._lock:
            if self.applied is not None:
                return
            self._recovered = Applied(update, generation)
        self.on_standing()

    def _put_back(self, recovered: Applied, in_force: bool) -> None:
        """The rules a restart recovered: back in force (`in_force`), or said replaced at once
        by the update judged against them (their taints were recorded with it)."""
        log.info(
            "rules in force recovered" if in_force else "rules recovered, replaced at once",
            extra={
                "source": recovered.update.source,
                "digest": recovered.update.digest,
                "generation": recovered.generation,
            },
        )
        if not in_force:
            return
        with self._lock:
            self._history.record(live_owned_taints(recovered.rules), self._clock())
            self.applied = recovered
        self._metrics.rules_generation.set(recovered.generation)
        self._on_applied(recovered.update)
        self.on_standing()

    def _superseded(self, held: RulesUpdate, by: RulesUpdate) -> None:
        """The held update was reverted (the source is back to the rules in force): nothing is
        held any more, so the gauge and its alert clear, and offering it again holds it anew."""
        self._metrics.rules_held.set(0)
        message = (
            f"held rules update {held.digest} superseded by {by.digest}, the rules in force "
            f"(generation {self.generation}); nothing is held any more"
        )
        log.warning("held rules update superseded", extra={"held": held.digest, "by": by.digest})
        report_on_source(self._recorder, by.ref, "RulesHoldCleared", message)
        self._status.released()

    def _hold(self, update: RulesUpdate, reason: str) -> None:
        self._metrics.rules_held.set(1)
        if self._held == update:
            return
        self._held, self._held_reason = update, reason
        self._status.held(update, reason)
        in_force = (
            f"generation {self.generation} stays in force"
            if self.applied
            else "no rules are in force"
        )
        if update.source == OBJECTS_SOURCE:
            how = f"a cluster admin runs: {confirm_on_crd(update.digest)}"
        elif update.ref is not None:
            how = f"annotate the ConfigMap {CONFIRM_ANNOTATION}={update.digest}"
        else:
            how = f"restart with --confirm-rules {update.digest}"
        message = f"rules update held: {reason}; {in_force}. To apply it anyway, {how}."
        log.error("rules update held", extra={"source": update.source, "reason": reason})
        report_on_source(self._recorder, update.ref, "RulesHeld", message)
