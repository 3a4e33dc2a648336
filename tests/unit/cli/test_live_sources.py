"""The day-2 commands' sources (cli/live/sources.py): what one node's explain reads."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from kubernetes.client import ApiClient

from nodegate.cli.live.cluster import Cluster, Where
from nodegate.cli.live.sources import WorkloadPods
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.loader import parse_rules
from nodegate.core.rules.node import NodeState
from nodegate.reconciler.kit.errors import PermanentError

NOW = datetime(2026, 12, 6, tzinfo=UTC)
BACKFILLED = parse_rules(
    """\
apiVersion: nodegate.dev/v1
kind: NodeRules
startupGates:
  - name: warmup
    match: {labels: {pool: gpu}}
    taint: {key: example.com/warmup, value: wait, effect: NoSchedule}
    readyWhen: {pods: {namespace: default, selector: {app: warmup}}}
    backfill: true
"""
)


class ForbiddenPods(Cluster):
    def workload_pods(self, node: str) -> int:
        raise PermanentError('pods is forbidden: cannot list resource "pods"', 403)


def test_a_user_who_may_not_list_pods_gets_explain_with_the_backfill_unknown(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """As the reconciler treats a failed backfill check: unknown, not a failed explain."""
    node = NodeState(name="n1", labels={"pool": "gpu"})
    source = WorkloadPods(ForbiddenPods(ApiClient(), Where()), node)

    facts = source.facts(node, BACKFILLED, PlanFacts(now=NOW))

    assert facts.workload_pods is None
    assert "workload pods on n1 not read" in capsys.readouterr().err
