"""A Node as plain, typed data: exactly the parts of the Kubernetes object nodegate reads.

The reconciler parses API objects into `NodeState` once, at the edge; the planner and explain
work on it and never see raw dicts. Anything else on the Node (status.capacity, heartbeats...) is
deliberately absent, so a heartbeat cannot change what the planner sees.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any


@dataclass(frozen=True)
class NodeTaint:
    """A taint as it stands on a Node."""

    key: str
    effect: str
    value: str = ""
    time_added: str | None = None

    @property
    def identity(self) -> tuple[str, str]:
        return (self.key, self.effect)

    def __str__(self) -> str:
        return (
            f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"
        )

    def to_k8s(self) -> dict[str, str]:
        raw = {"key": self.key, "effect": self.effect}
        if self.value:
            raw["value"] = self.value
        if self.time_added:
            raw["timeAdded"] = self.time_added
        return raw

    @classmethod
    def from_k8s(cls, raw: Mapping[str, Any]) -> NodeTaint:
        return cls(
            key=str(raw["key"]),
            effect=str(raw["effect"]),
            value=str(raw.get("value") or ""),
            time_added=_time_text(raw.get("timeAdded") or raw.get("time_added")),
        )


@dataclass(frozen=True)
class NodeCondition:
    """One entry of status.conditions; heartbeat times are left out on purpose."""

    type: str
    status: str
    reason: str = ""
    last_transition_time: datetime | None = None


@dataclass(frozen=True)
class NodeState:
    """What the planner needs to know about one Node."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[NodeTaint, ...] = ()
    conditions: tuple[NodeCondition, ...] = ()
    provider_id: str = ""
    created: datetime | None = None
    resource_version: str = ""
    uid: str = ""
    boot_id: str = ""
    system_uuid: str = ""
    """The machine's SMBIOS UUID as the kubelet reports it: the same across re-registration."""

    def taint(self, identity: tuple[str, str]) -> NodeTaint | None:
        return next((t for t in self.taints if t.identity == identity), None)

    @classmethod
    def from_k8s(
        cls, obj: Mapping[str, Any], keep_annotation: Callable[[str], bool] | None = None
    ) -> NodeState:
        """Parse a Node as the API returns it (camelCase JSON, or the client's snake_case dict).

        `keep_annotation` narrows the annotations kept to those something reads, so a cache of
        thousands of nodes does not hold every other tool's annotations.
        """
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        annotations = meta.get("annotations") or {}
        node_info = status.get("nodeInfo") or status.get("node_info") or {}
        return cls(
            name=str(meta.get("name", "")),
            labels=dict(meta.get("labels") or {}),
            annotations={
                str(k): str(v)
                for k, v in annotations.items()
                if keep_annotation is None or keep_annotation(k)
            },
            taints=tuple(NodeTaint.from_k8s(t) for t in spec.get("taints") or ()),
            conditions=tuple(
                NodeCondition(
                    type=str(c.get("type", "")),
                    status=str(c.get("status", "")),
                    reason=str(c.get("reason") or ""),
                    last_transition_time=parse_time(
                        c.get("lastTransitionTime") or c.get("last_transition_time")
                    ),
                )
                for c in status.get("conditions") or ()
            ),
            provider_id=str(spec.get("providerID") or spec.get("provider_id") or ""),
            created=parse_time(meta.get("creationTimestamp") or meta.get("creation_timestamp")),
            resource_version=str(meta.get("resourceVersion") or meta.get("resource_version") or ""),
            uid=str(meta.get("uid") or ""),
            boot_id=str(node_info.get("bootID") or node_info.get("boot_id") or ""),
            system_uuid=str(node_info.get("systemUUID") or node_info.get("system_uuid") or ""),
        )


def parse_time(value: object) -> datetime | None:
    """RFC 3339 text (or a datetime from the client) to an aware datetime in UTC; ValueError
    when it is not one."""
    if value is None or value == "":
        return None
    moment = (
        value
        if isinstance(value, datetime)
        else datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    )
    # Text without a zone (a node may write its annotations in any form) is read as UTC: a
    # naive time compared with an aware one raises TypeError, and the node's plan would fail.
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError as err:  # e.g. 0001-01-01T00:00:00+14:00: no UTC form to write back
        raise ValueError(f"{value!r} has no UTC form") from err


def format_time(value: datetime) -> str:
    """Kubernetes' RFC 3339 form with second precision and a Z."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_precise_time(value: datetime) -> str:
    """RFC 3339 with microseconds, for nodegate's own records of moments it compares with its
    first sights (a whole second would blur which side of a reboot a sight fell on); a whole
    second is written as such."""
    moment = value.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if moment.microsecond else "%Y-%m-%dT%H:%M:%SZ")


def _time_text(value: object) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return format_time(value)
    return str(value)
