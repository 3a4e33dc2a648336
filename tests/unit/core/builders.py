"""Small builders for rules and nodes, so each test states only what matters to it."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime

from nodegate.core.loader import parse_rules
from nodegate.core.model import NodeRules
from nodegate.core.node import NodeCondition, NodeState, NodeTaint

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def rules(body: str) -> NodeRules:
    return parse_rules("apiVersion: nodegate.dev/v1\nkind: NodeRules\n" + textwrap.dedent(body))


def node(
    labels: dict[str, str] | None = None,
    taints: tuple[NodeTaint, ...] = (),
    conditions: tuple[NodeCondition, ...] = (),
    annotations: dict[str, str] | None = None,
    created: datetime = NOW,
) -> NodeState:
    return NodeState(
        name="node-a",
        labels=labels or {},
        annotations=annotations or {},
        taints=taints,
        conditions=conditions,
        created=created,
    )
