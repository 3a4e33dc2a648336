"""The leader writes each NodeRules object's status (`core.reports.rules_objects`): whether its
current generation is accepted, conflicting or in force, and its rules' node counts.

One of the leader's frequent chores, paced: the conditions are looked at every
`CONDITIONS_SECONDS`, the node counts (every node against every rule) recomputed as often as
`COUNT_SHARE` of a core allows (every 2 s on a small cluster); an object's status is written
only when it changes, so a quiet cluster costs no write. Only the leader writes (a standby's
informer has the same objects, and a status written twice would flap); a failed write is tried
at the next pass.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.reports.rules_objects import (
    ObjectFacts,
    RuleCount,
    object_status,
    rule_counts,
    unreadable_rules,
)
from nodegate.core.rules.merge import confirm_on_crd
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeState
from nodegate.reconciler.kit.errors import KubeError, NotFoundError
from nodegate.reconciler.kit.kube import RawObject, RulesObjectStatusApi
from nodegate.reconciler.nodes.rules.rules_in_force import RulesInForce
from nodegate.reconciler.nodes.rules.rules_objects import RulesObjects

log = logging.getLogger("nodegate.rules")

CONDITIONS_SECONDS = 1.0
REWRITE_SECONDS = 60.0
COUNT_SHARE = 0.05
"""At most this share of a core goes to counting: every node against every rule costs about
4.5 ms per 1,000 nodes and rule (docs/benchmarks.md), so the counts are refreshed every
cost / COUNT_SHARE seconds, within [MIN_COUNT_SECONDS, MAX_COUNT_SECONDS]."""
MIN_COUNT_SECONDS = 2.0
MAX_COUNT_SECONDS = 60.0


class ObjectStatusWriter:
    def __init__(
        self,
        api: RulesObjectStatusApi,
        objects: RulesObjects,
        in_force: RulesInForce,
        nodes: Callable[[NodeRules], Iterable[tuple[NodeState, PlanFacts]]],
        clock: Callable[[], datetime],
        on_error: Callable[[str], None] = lambda _kind: None,
        refused: Callable[[], Mapping[str, str]] = dict,
    ) -> None:
        self._api = api
        self._objects = objects
        self._in_force = in_force
        self._nodes = nodes
        self._now = clock
        self._on_error = on_error
        self._refused = refused
        """What the API server refuses the reconciler to read, by kind (`Watching.refused`)."""
        self._next_pass = 0.0
        self._next_count = 0.0
        self._counts: dict[str, RuleCount] = {}
        self._counted: NodeRules | None = None
        self._counting = threading.Event()
        self._written: dict[str, tuple[dict[str, Any], float]] = {}
        """What was last written to each object, and when: the cache shows it a moment later,
        and a status the API server stores otherwise is not rewritten more than once a
        `REWRITE_SECONDS`."""

    def write_when_due(self) -> None:
        """One pass if it is time for one (a leader's chore)."""
        now = time.monotonic()
        if now < self._next_pass:
            return
        self._next_pass = now + CONDITIONS_SECONDS
        merged = self._objects.merged
        if merged is None:
            return
        rules = self._in_force.rules
        due = rules is not None and (now >= self._next_count or rules is not self._counted)
        if due and rules is not None and not self._counting.is_set():
            # Off the chores' thread: at 5,000 nodes and many rules it takes seconds.
            self._counting.set()
            threading.Thread(target=self._count, args=(rules,), daemon=True).start()
        applied = self._in_force.applied
        standing = applied.update.standing() if applied is not None else {}
        held = self._in_force.held
        refused = self._refused()
        cannot_read = unreadable_rules(rules, refused) if rules is not None and refused else {}
        for raw in self._objects.objects():
            name = raw["metadata"]["name"]
            part = standing.get(name)
            held_why = None
            if held is not None:
                update, reason = held
                mine = update.standing().get(name)
                if mine is not None and not mine.same_version(part):
                    held_why = (
                        f"the rules update it is in is held: {reason}; to apply it anyway, "
                        f"a cluster admin runs: {confirm_on_crd(update.digest)}"
                    )
            facts = ObjectFacts(
                int(raw["metadata"].get("generation") or 0),
                merged.verdicts.get(name),
                part.spec if part is not None else None,
                part.generation if part is not None else None,
                held_why,
                cannot_read,
            )
            existing = raw.get("status")
            status = object_status(facts, self._counts, existing, self._now())
            last = self._written.get(name)
            if status == existing or (
                last is not None and last[0] == status and now - last[1] < REWRITE_SECONDS
            ):
                continue
            if self._write(name, status):
                self._written[name] = (status, now)

    def _count(self, rules: NodeRules) -> None:
        try:
            started = time.thread_time()
            counts = rule_counts(rules, self._nodes(rules))
            cost = time.thread_time() - started
            pause = min(max(cost / COUNT_SHARE, MIN_COUNT_SECONDS), MAX_COUNT_SECONDS)
            self._counts, self._counted = counts, rules
            self._next_count = time.monotonic() + pause
        except Exception:  # a bug must not stop the counts for good: tried again when due
            log.exception("NodeRules rule counts failed")
            self._next_count = time.monotonic() + MAX_COUNT_SECONDS
        finally:
            self._counting.clear()

    def _write(self, name: str, status: dict[str, Any]) -> bool:
        # A merge patch: a status with no generation in force clears the one stored.
        patch: RawObject = {"status": {"inForceGeneration": None, **status}}
        try:
            self._api.patch_noderules_status(name, patch)
        except NotFoundError:
            return False  # deleted meanwhile: its watch event ends it
        except KubeError as err:
            log.warning("NodeRules status not written", extra={"object": name, "error": str(err)})
            self._on_error("api")
            return False
        return True
