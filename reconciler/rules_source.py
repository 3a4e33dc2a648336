"""Where the reconciler's rules come from, and the guarantee that bad rules never take effect.

Two sources: a file (a mounted ConfigMap, re-read when its content changes) or a watched
ConfigMap object (changes apply within a second). Either way an update is validated with the
same code as `nodegate validate`; a refused update leaves the last good rules in force and is
reported loudly: an Event, a metric and an error log naming every problem.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

from nodegate.core.errors import Problem, RulesError
from nodegate.core.loader import parse_rules
from nodegate.core.model import NodeRules
from nodegate.reconciler.events import EventRecorder
from nodegate.reconciler.kube import GoneError, KubeApi, KubeError, RawObject
from nodegate.reconciler.metrics import Metrics
from nodegate.reconciler.settings import ReconcilerSettings

log = logging.getLogger("nodegate.rules")


class RulesInForce:
    """The last good rules, shared by the watcher (writer) and the workers (readers)."""

    def __init__(self) -> None:
        self._rules: NodeRules | None = None
        self.generation = 0
        self.loaded = threading.Event()

    @property
    def rules(self) -> NodeRules | None:
        return self._rules

    def replace(self, rules: NodeRules) -> bool:
        """Install new rules; False if they equal the rules already in force."""
        if rules == self._rules:
            return False
        self._rules = rules
        self.generation += 1
        self.loaded.set()
        return True


class RulesWatcher:
    def __init__(
        self,
        settings: ReconcilerSettings,
        api: KubeApi,
        recorder: EventRecorder,
        metrics: Metrics,
        in_force: RulesInForce,
        on_change: Callable[[NodeRules], None],
    ) -> None:
        self._settings = settings
        self._api = api
        self._recorder = recorder
        self._metrics = metrics
        self.in_force = in_force
        self._on_change = on_change
        self._last_text: str | None = None

    def run(self, stop: threading.Event) -> None:
        if self._settings.rules_file is not None:
            self._poll_file(self._settings.rules_file, stop)
        else:
            namespace, name = (self._settings.rules_configmap or "/").split("/")
            self._watch_configmap(namespace, name, stop)

    def _poll_file(self, path: Path, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as err:
                if self._last_text != f"<unreadable {err}>":
                    self._last_text = f"<unreadable {err}>"
                    self._refuse(str(path), [Problem(0, 0, str(path), (), f"cannot read: {err}")])
            else:
                self._offer(text, str(path), None)
            stop.wait(self._settings.rules_poll_seconds)

    def _watch_configmap(self, namespace: str, name: str, stop: threading.Event) -> None:
        resource_version = ""
        while not stop.is_set():
            try:
                if not resource_version:
                    raw = self._api.read_configmap(namespace, name)
                    if raw is None:
                        self._missing(namespace, name)
                        stop.wait(self._settings.rules_poll_seconds)
                        continue
                    self._offer_configmap(raw)
                    resource_version = raw["metadata"]["resourceVersion"]
                for kind, event_raw in self._api.watch_configmap(
                    namespace, name, resource_version, 240
                ):
                    if stop.is_set():
                        return
                    resource_version = event_raw["metadata"].get(
                        "resourceVersion", resource_version
                    )
                    if kind in ("ADDED", "MODIFIED"):
                        self._offer_configmap(event_raw)
                    elif kind == "DELETED":
                        self._missing(namespace, name)
            except GoneError:
                resource_version = ""
            except (KubeError, OSError, ValueError) as err:
                # Temporary API trouble: the last good rules stay in force; try again shortly.
                log.warning("rules ConfigMap watch failed", extra={"error": str(err)})
                resource_version = ""
                stop.wait(1.0)

    def _missing(self, namespace: str, name: str) -> None:
        log.error(
            "rules ConfigMap not found; keeping the last good rules",
            extra={"configmap": f"{namespace}/{name}", "generation": self.in_force.generation},
        )
        self._metrics.errors.labels("rules").inc()

    def _offer_configmap(self, raw: RawObject) -> None:
        meta = raw["metadata"]
        key = self._settings.rules_key
        source = f"configmap {meta['namespace']}/{meta['name']} key {key}"
        text = (raw.get("data") or {}).get(key)
        ref = (meta["namespace"], meta["name"], meta.get("uid", ""))
        if text is None:
            self._last_text = None
            problem = Problem(
                0, 0, source, (), f"the ConfigMap has no key '{key}'; put the rules YAML there"
            )
            self._refuse(source, [problem], ref)
            return
        self._offer(text, source, ref)

    def _offer(self, text: str, source: str, ref: tuple[str, str, str] | None) -> None:
        if text == self._last_text:
            return
        self._last_text = text
        try:
            rules = parse_rules(text, source)
        except RulesError as err:
            self._refuse(source, list(err.problems), ref)
            return
        self._metrics.rules_valid.set(1)
        if self.in_force.replace(rules):
            self._metrics.rules_generation.set(self.in_force.generation)
            log.info(
                "rules accepted", extra={"source": source, "generation": self.in_force.generation}
            )
            self._on_change(rules)

    def _refuse(
        self, source: str, problems: list[Problem], ref: tuple[str, str, str] | None = None
    ) -> None:
        lines = [str(p) for p in problems]
        in_force = self.in_force.generation
        keeping = f"keeping rules generation {in_force}" if in_force else "no rules in force yet"
        log.error(
            f"rules update refused; {keeping}",
            extra={"source": source, "problems": lines, "generation": in_force},
        )
        self._metrics.rules_rejected.inc()
        self._metrics.rules_valid.set(0)
        message = f"rules update refused ({keeping}): " + " | ".join(lines)
        if ref is not None:
            self._recorder.on_namespaced("ConfigMap", *ref, reason="RulesRejected", message=message)
        elif os.environ.get("POD_NAME") and os.environ.get("POD_NAMESPACE"):
            namespace = os.environ["POD_NAMESPACE"]
            pod = os.environ["POD_NAME"]
            self._recorder.on_namespaced("Pod", namespace, pod, "", "RulesRejected", message)
