"""The rules the Node admission webhook serves: the rules in force, never a held update.

The webhook runs on every replica, the blast-radius guard only on the leader. A node born with
the gate of an update the guard holds has a gate that no rule in force owns: if the update is
then reverted, nothing may lift it. So the leader serves its rules in force, and tells the
standbys their digest on the Lease (`kit.lease.LEADER_NOTE`); a standby serves the valid update
it read with that digest. A standby started after a restart may never have read that text (the
rules source holds a held update, and the leader put its rules in force back from the status
record): it then reads the status record once for that digest, in the background. Until it has
the text (a second or two), it serves the rules it served before; with nothing in force
anywhere, nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from nodegate.core.rules.model import NodeRules
from nodegate.reconciler.nodes.rules.rules_source import RulesUpdate

log = logging.getLogger("nodegate.webhook")

ASK_AGAIN_SECONDS = 1.0
"""How soon the status record is read again for a digest it did not hold yet."""
REMEMBERED = 16
"""Valid updates remembered by digest: a held one, its revert and a few edits in between."""


class ServedRules:
    """Call it for the rules to gate a new node with; `offer` it every valid update read."""

    def __init__(
        self,
        in_force: Callable[[], RulesUpdate | None],
        leader_note: Callable[[], str | None] = lambda: None,
        recorded: Callable[[], tuple[str, NodeRules] | None] = lambda: None,
    ) -> None:
        self._in_force = in_force
        self._leader_note = leader_note
        self._recorded = recorded
        self._recent: OrderedDict[str, NodeRules] = OrderedDict()
        self._served: NodeRules | None = None
        self._asked: dict[str, float] = {}
        """Digest -> when the status record was last read for it (in the background, never on
        the review's path): read again `ASK_AGAIN_SECONDS` later while the record does not
        hold it yet (the leader writes the Lease note before its record write lands)."""
        self._lock = threading.Lock()

    def offer(self, update: RulesUpdate) -> None:
        self._remember(update.digest, update.rules)

    def _remember(self, digest: str, rules: NodeRules) -> None:
        with self._lock:
            self._recent[digest] = rules
            self._recent.move_to_end(digest)
            while len(self._recent) > REMEMBERED:
                self._recent.popitem(last=False)

    def _read_record(self, digest: str) -> None:
        try:
            found = self._recorded()
        except Exception as err:  # any failure: asked again on a later review
            log.warning("status record not read for the webhook", extra={"error": str(err)})
            return
        if found is not None and found[0] == digest:
            self._remember(*found)

    def digest_in_force(self) -> str | None:
        """What the leader writes on the Lease: the digest of its rules in force."""
        update = self._in_force()
        return update.digest if update is not None else None

    def __call__(self) -> NodeRules | None:
        update = self._in_force()
        now = time.monotonic()
        with self._lock:
            if update is not None:
                self._served = update.rules
            elif (note := self._leader_note()) is not None:
                if note in self._recent:
                    self._served = self._recent[note]
                elif now - self._asked.get(note, -ASK_AGAIN_SECONDS) >= ASK_AGAIN_SECONDS:
                    self._asked[note] = now
                    while len(self._asked) > REMEMBERED:
                        del self._asked[next(iter(self._asked))]
                    threading.Thread(target=self._read_record, args=(note,), daemon=True).start()
            return self._served
