"""`nodegate explain` says what the reconciler does because both decide a node through the one
sequence, `core.decisions.node_decision.decide` (plan, charges, the eviction budget, plan again).

The proof is behavioural: a step of that sequence is changed in its one place (every evicting
taint goes uncharged), and the reconcile, `explain` (live and offline) and `status` all follow.
A caller that decided with a copy of the sequence would not: the budget would still hold the
node there.
"""

from __future__ import annotations

import copy
import textwrap
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

from nodegate.cli.explain_cmd import explain_live
from nodegate.cli.main import app
from nodegate.core.decisions import node_decision
from nodegate.core.decisions.blast_radius import rules_digest
from nodegate.core.reports.cluster_status import RecordsView, status_report
from nodegate.core.rules.loader import parse_rules
from nodegate.core.rules.node import NodeState, format_time
from tests.unit.reconciler.kit.fakes import FakeApi, fake_node
from tests.unit.reconciler.nodes.test_controller import synced, update

RULES = textwrap.dedent(
    """\
    apiVersion: nodegate.dev/v1
    kind: NodeRules
    conditionTaints:
      - name: network-problem
        conditions: [{type: NetworkProblem, status: "True"}]
        taint: {key: example.com/network-problem, effect: NoExecute}
    """
)
TAINT = "example.com/network-problem:NoExecute"
SICK = [{"type": "NetworkProblem", "status": "True"}]
LATE = "n9"
"""The one sick node without the taint: the budget (a fifth of 10 nodes) is spent on two."""


def world() -> FakeApi:
    """Ten sick nodes; two got the evicting taint a moment ago, which spends the budget."""
    api = FakeApi()
    now = format_time(datetime.now(UTC))
    for i in range(10):
        taints = [{"key": "example.com/network-problem", "effect": "NoExecute", "timeAdded": now}]
        node = fake_node(f"n{i}", taints=taints) if i < 2 else fake_node(f"n{i}")
        node["status"]["conditions"] = copy.deepcopy(SICK)
        api.add_node(node)
    return api


class FakeCluster:
    """The live cluster as `explain` reads it (`cli.live.cluster.Cluster`), over the fake API
    server the reconciler writes to: no gates, agents, records or ledger grants."""

    def __init__(self, api: FakeApi) -> None:
        self._api = api

    def node(self, name: str) -> NodeState | None:
        raw = self._api.get_node(name)
        return NodeState.from_k8s(raw) if raw is not None else None

    def nodes(self) -> list[NodeState]:
        return [NodeState.from_k8s(raw) for raw in self._api.nodes.values()]

    def gate_pods(self, *_: object) -> tuple[dict[str, object], dict[str, object]]:
        return {}, {}

    def csi_drivers(self, *_: object) -> dict[str, bool]:
        return {}

    def departures(self) -> dict[str, object]:
        return {}

    def previously_owned(self) -> frozenset[tuple[str, str]]:
        return frozenset()

    def condition_sightings(self, node: NodeState) -> dict[str, object]:
        return {}

    def ledger_grants(self) -> list[object]:
        return []


def reconciled(api: FakeApi) -> bool:
    """Whether the reconcile of the late node writes its evicting taint."""
    controller = synced(api)
    # Held by the blast-radius guard otherwise (it would NoExecute every node): confirmed.
    controller.offer_rules(update(RULES, rules_digest(RULES)))
    controller.process(LATE)
    taints = api.nodes[LATE]["spec"].get("taints") or []
    return any(t["key"] == "example.com/network-problem" for t in taints)


def explained_live(api: FakeApi, rules_file: Path) -> str:
    out = StringIO()
    cluster: Any = FakeCluster(api)
    explain_live(Console(file=out, width=200), cluster, LATE, rules_file, datetime.now(UTC))
    return out.getvalue()


def explained_offline(api: FakeApi, rules_file: Path, tmp_path: Path) -> str:
    nodes = tmp_path / "nodes.yaml"
    items = [copy.deepcopy(raw) for raw in api.nodes.values()]
    for item in items:
        item.setdefault("kind", "Node")
    nodes.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    args = ["explain", "--rules", str(rules_file), "--node", str(nodes)]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output[result.output.index(f"rules on node {LATE}") :]


def adds(text: str) -> bool:
    """Whether an explanation says the evicting taint goes on now (not that it would wait)."""
    return f"+ taint {TAINT}" in text


@pytest.mark.parametrize("changed", [False, True], ids=["as-shipped", "sequence-changed"])
def test_explain_and_the_reconcile_decide_a_node_through_the_one_sequence(
    changed: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(RULES)
    if changed:  # one step of the sequence changed in its one place: nothing is charged
        monkeypatch.setattr(node_decision, "charges", lambda *_: ())
    live = explained_live(world(), rules_file)
    offline = explained_offline(world(), rules_file, tmp_path)
    written = reconciled(world())
    nodes = FakeCluster(world()).nodes()
    report = status_report(
        datetime.now(UTC), nodes, parse_rules(RULES), None, None, None, RecordsView(), ()
    )
    [budget] = report.budgets
    # As shipped the budget holds the late node everywhere; with the step changed, nowhere.
    assert written is changed
    assert adds(live) is changed, live
    assert adds(offline) is changed, offline
    assert budget.waiting == (0 if changed else 8)  # the sick nodes without the taint
    if not changed:
        assert "would wait" in live and "would wait" in offline
