"""Where the reconciler's rules come from, and the guarantee that bad rules never take effect.

Two sources: a file (a mounted ConfigMap, re-read when its content changes) or a watched
ConfigMap object (through the same informer as Nodes; changes apply within a second). Either
way an update is validated with the same code as `nodegate validate`; a refused update leaves
the last good rules in force and is reported loudly: an Event, a metric and an error log naming
every problem. Whatever one input does, the watcher goes on and applies the next good update.

A valid update is handed to the controller as a `RulesUpdate`; the controller decides when it
takes effect (after the node cache is synced, and past the blast-radius guard).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from nodegate.core.decisions.blast_radius import rules_digest
from nodegate.core.rules.loader import parse_rules
from nodegate.core.rules.merge import RulesObject
from nodegate.core.rules.model import NodeRules
from nodegate.core.text.errors import Problem, RulesError
from nodegate.core.text.yaml_input import read_limited
from nodegate.defaults.names import CONFIRM_ANNOTATION
from nodegate.reconciler.kit.backoff import Backoff
from nodegate.reconciler.kit.events import Recorder
from nodegate.reconciler.kit.informer import Informer
from nodegate.reconciler.kit.kube import ListWatch, RawObject, Selection
from nodegate.reconciler.nodes.metrics import RulesSourceMetrics
from nodegate.reconciler.settings import ReconcilerSettings

log = logging.getLogger("nodegate.rules")


SourceRef = tuple[str, str, str]
"""(namespace, name, uid) of the rules ConfigMap, for Events."""


@dataclass(frozen=True)
class RulesUpdate:
    rules: NodeRules
    digest: str
    source: str
    ref: SourceRef | None = None
    confirmation: str | None = None
    """The digest someone confirmed (annotation or flag); applies only if it equals `digest`."""
    text: str = ""
    """The rules text itself (for the status record: the rules in force, readable by
    `nodegate explain|plan` even while the ConfigMap holds a held update)."""
    parts: tuple[RulesObject, ...] = ()
    """The NodeRules objects merged into these rules (their versions), when the rules are
    objects (`rules_objects`)."""

    def standing(self) -> dict[str, RulesObject]:
        """The version in force of each object, by name."""
        return {part.name: part for part in self.parts}

    @property
    def confirmed(self) -> bool:
        return self.confirmation is not None and self.confirmation.strip() == self.digest


def report_on_source(recorder: Recorder, ref: SourceRef | None, reason: str, message: str) -> None:
    """A Warning Event on the rules ConfigMap, or on our own Pod when the rules are a file."""
    if ref is not None:
        recorder.on_namespaced("ConfigMap", *ref, reason=reason, message=message)
    elif os.environ.get("POD_NAME") and os.environ.get("POD_NAMESPACE"):
        namespace = os.environ["POD_NAMESPACE"]
        recorder.on_namespaced("Pod", namespace, os.environ["POD_NAME"], "", reason, message)


class RulesSource(Protocol):
    """Where the rules come from: a file, a ConfigMap (`RulesWatcher`) or the NodeRules
    objects (`rules_objects.RulesObjects`)."""

    loaded: threading.Event

    def run(self, stop: threading.Event) -> None: ...


class RulesWatcher:
    def __init__(
        self,
        settings: ReconcilerSettings,
        api: ListWatch,
        recorder: Recorder,
        metrics: RulesSourceMetrics,
        on_valid: Callable[[RulesUpdate], None],
        generation_in_force: Callable[[], int] = lambda: 0,
    ) -> None:
        self._settings = settings
        self._api = api
        self._recorder = recorder
        self._metrics = metrics
        self._on_valid = on_valid
        self._generation_in_force = generation_in_force
        self._last_offer: tuple[str | bytes, str | None] | None = None
        self._accepted = 0
        self.loaded = threading.Event()
        """Set once some valid rules were read (they may still be held by the controller)."""

    def run(self, stop: threading.Event) -> None:
        if self._settings.rules_file is not None:
            self._poll_file(self._settings.rules_file, stop)
            return
        namespace, name = (self._settings.rules_configmap or "/").split("/")
        informer: Informer[RawObject] = Informer(
            "rules",
            self._api,
            Selection("ConfigMap", namespace, field_selector=f"metadata.name={name}"),
            lambda raw: raw,
            self._on_configmap,
            watch_timeout_seconds=self._settings.watch_timeout_seconds,
            on_error=self._metrics.on_informer_error,
        )
        informer.on_synced = lambda: None if len(informer) else self._missing()
        informer.run(stop)

    def _poll_file(self, path: Path, stop: threading.Event) -> None:
        backoff = Backoff(initial_seconds=self._settings.rules_poll_seconds)
        while not stop.is_set():
            try:
                self._read_file(path)
                backoff.reset()
                delay = self._settings.rules_poll_seconds
            except Exception:
                # A bug must not end the watcher: later good edits must still apply.
                log.exception("rules file check failed", extra={"path": str(path)})
                self._metrics.errors.labels("internal").inc()
                delay = backoff.next_delay()
            stop.wait(delay)

    def _read_file(self, path: Path) -> None:
        try:
            data = read_limited(path)
        except OSError as err:
            marker = f"<unreadable {err}>"
            if self._last_offer != (marker, None):
                self._last_offer = (marker, None)
                self._refuse(str(path), [Problem(0, 0, str(path), (), f"cannot read: {err}")])
            return
        # Bytes go to the front door as they are: not UTF-8, a BOM, control characters, a
        # bomb... each is a located refusal there.
        self._offer(data, str(path), None, self._settings.confirm_rules)

    def _on_configmap(self, _key: str, _old: RawObject | None, new: RawObject | None) -> None:
        if new is None:
            self._missing()
            return
        meta = new.get("metadata") or {}
        key = self._settings.rules_key
        source = f"configmap {meta.get('namespace')}/{meta.get('name')} key {key}"
        ref = (str(meta.get("namespace")), str(meta.get("name")), str(meta.get("uid", "")))
        text = (new.get("data") or {}).get(key)
        if text is None:
            self._last_offer = None
            problem = Problem(
                0, 0, source, (), f"the ConfigMap has no key '{key}'; put the rules YAML there"
            )
            self._refuse(source, [problem], ref)
            return
        confirmation = (meta.get("annotations") or {}).get(CONFIRM_ANNOTATION)
        self._offer(str(text), source, ref, confirmation)

    def _missing(self) -> None:
        self._last_offer = None
        log.error(
            "rules ConfigMap not found; keeping the last good rules",
            extra={"configmap": self._settings.rules_configmap, "accepted": self._accepted},
        )
        self._metrics.errors.labels("rules").inc()

    def _offer(
        self, data: str | bytes, source: str, ref: SourceRef | None, confirmation: str | None
    ) -> None:
        if (data, confirmation) == self._last_offer:
            return
        self._last_offer = (data, confirmation)
        try:
            rules = parse_rules(data, source)
        except RulesError as err:
            self._refuse(source, list(err.problems), ref)
            return
        except Exception as err:
            # Whatever the text does to the parser, it is a refused update, not a dead watcher.
            log.exception("rules could not be read", extra={"source": source})
            problem = Problem(0, 0, source, (), f"cannot be read ({type(err).__name__}: {err})")
            self._refuse(source, [problem], ref)
            return
        self._metrics.rules_valid.set(1)
        self._accepted += 1
        self.loaded.set()
        digest = rules_digest(data)
        log.info("rules valid", extra={"source": source, "digest": digest})
        text = data if isinstance(data, str) else data.decode("utf-8", errors="replace")
        self._on_valid(RulesUpdate(rules, digest, source, ref, confirmation, text))

    def _refuse(self, source: str, problems: list[Problem], ref: SourceRef | None = None) -> None:
        lines = [str(p) for p in problems]
        generation = self._generation_in_force()
        keeping = (
            f"keeping rules generation {generation}" if generation else "no rules in force yet"
        )
        log.error(f"rules update refused; {keeping}", extra={"source": source, "problems": lines})
        self._metrics.rules_rejected.inc()
        self._metrics.rules_valid.set(0)
        message = f"rules update refused ({keeping}): " + " | ".join(lines)
        report_on_source(self._recorder, ref, "RulesRejected", message)
