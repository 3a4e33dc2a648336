"""Kubernetes Events: every change nodegate makes to a node, and every refused rules update."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from nodegate.core.node import format_time
from nodegate.reconciler.kube import KubeApi, KubeError, RawObject

log = logging.getLogger("nodegate.events")

COMPONENT = "nodegate-reconciler"
MESSAGE_LIMIT = 1024  # the API server refuses Event messages longer than this


class EventRecorder:
    def __init__(self, api: KubeApi, node_event_namespace: str, instance: str) -> None:
        self._api = api
        self._node_namespace = node_event_namespace
        self._instance = instance

    def on_node(
        self, raw_node: RawObject, reason: str, message: str, warning: bool = False
    ) -> None:
        meta = raw_node["metadata"]
        involved = {
            "apiVersion": "v1",
            "kind": "Node",
            "name": meta["name"],
            "uid": meta.get("uid", ""),
        }
        self._emit(self._node_namespace, involved, reason, message, warning)

    def on_namespaced(
        self, kind: str, namespace: str, name: str, uid: str, reason: str, message: str
    ) -> None:
        """A Warning on a namespaced object (the rules ConfigMap, or our own Pod)."""
        involved = {
            "apiVersion": "v1",
            "kind": kind,
            "namespace": namespace,
            "name": name,
            "uid": uid,
        }
        self._emit(namespace, involved, reason, message, warning=True)

    def _emit(
        self, namespace: str, involved: dict[str, Any], reason: str, message: str, warning: bool
    ) -> None:
        now = datetime.now(UTC)
        text = message if len(message) <= MESSAGE_LIMIT else message[: MESSAGE_LIMIT - 3] + "..."
        event: RawObject = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{involved['name']}.nodegate.", "namespace": namespace},
            "involvedObject": involved,
            "reason": reason,
            "message": text,
            "type": "Warning" if warning else "Normal",
            "source": {"component": COMPONENT},
            "reportingComponent": "nodegate.dev/reconciler",
            "reportingInstance": self._instance[:128],
            "firstTimestamp": format_time(now),
            "lastTimestamp": format_time(now),
            "count": 1,
        }
        try:
            self._api.create_event(namespace, event)
        except KubeError as err:
            # An Event is a report, not the change itself: losing one must not undo the work.
            log.warning("could not record event", extra={"reason": reason, "error": str(err)})
