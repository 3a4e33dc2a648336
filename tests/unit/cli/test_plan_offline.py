"""`nodegate plan --nodes FILE`: the plan from files, offline, for a CI job without cluster
credentials. It decides with the live plan's own sequence (`plan_cmd.planned`), and says what
it assumed where files cannot say what the cluster would (the live plan against the same nodes
gives the same answer: tests/e2e/test_day2.py)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner, Result

from nodegate.cli.main import app
from nodegate.cli.plan_cmd import planned
from nodegate.cli.plan_sources import PlanInputs
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.reports.rules_change import rules_change
from nodegate.core.rules.loader import parse_rules
from nodegate.core.rules.node import parse_time
from nodegate.core.rules.node_file import parse_nodes
from tests.unit.cli.test_lazy_commands import among, loaded_by
from tests.unit.core.test_day2_reports import TEAM

runner = CliRunner()
NOW = "2026-11-21T12:00:00Z"
HEADER = "apiVersion: nodegate.dev/v1\nkind: NodeRules\n"
AGENT = """\
nodeAgents:
  - name: cilium
    match: {labels: {example.com/team: a}}
    daemonSets: [{namespace: kube-system, name: cilium}]
    mode: continuous
    for: 0s
    taint: {key: example.com/agent-not-ready, effect: NoSchedule}
"""
NODE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "node-a",
        "uid": "uid-a",
        "creationTimestamp": "2026-11-21T11:00:00Z",
        "labels": {"example.com/team": "a"},
    },
    "spec": {},
    "status": {"conditions": [{"type": "Ready", "status": "True"}]},
}
DAEMON_SET: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "metadata": {"namespace": "kube-system", "name": "cilium", "uid": "uid-cilium"},
    "spec": {"template": {"spec": {"tolerations": [{"operator": "Exists"}]}}},
}


def agent_pod(ready: bool) -> dict[str, Any]:
    status = "True" if ready else "False"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "namespace": "kube-system",
            "name": "cilium-x",
            "uid": "pod-1",
            "labels": {"pod-template-generation": "1"},
            "creationTimestamp": "2026-11-21T11:30:00Z",
            "ownerReferences": [{"kind": "DaemonSet", "uid": "uid-cilium", "controller": True}],
            "managedFields": [{"subresource": "status", "time": "2026-11-21T11:31:00Z"}],
        },
        "spec": {"nodeName": "node-a"},
        "status": {
            "conditions": [{"type": "Ready", "status": status}],
            "containerStatuses": [{"ready": ready}],
        },
    }


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def listed(*items: dict[str, Any]) -> str:
    """As `kubectl get ... -o yaml` prints objects: a List."""
    return yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": list(items)})


def plan(
    tmp_path: Path, new: str, *args: str, nodes: tuple[dict[str, Any], ...] = (NODE,)
) -> Result:
    rules = write(tmp_path / "new.yaml", HEADER + new)
    node_file = write(tmp_path / "nodes.yaml", listed(*nodes))
    return runner.invoke(app, ["plan", "--rules", rules, "--nodes", node_file, "--now", NOW, *args])


def test_offline_plan_lists_the_change_and_exits_2_without_any_cluster(tmp_path: Path) -> None:
    result = plan(tmp_path, TEAM, "--kubeconfig", str(tmp_path / "absent"))

    assert result.exit_code == 2, result.output
    lines = [" ".join(line.split()) for line in result.stdout.splitlines()]
    assert "node-a - + taint example.com/team=a:NoSchedule team" in lines
    assert " ".join(result.stdout.split()).startswith(
        "compared with no rules (offline, no --in-force FILE: every change counts): 1 of 1 "
        "nodes would change"
    )


def test_offline_plan_says_what_it_assumed(tmp_path: Path) -> None:
    result = plan(tmp_path, TEAM)

    text = " ".join(result.stdout.split())
    assert "offline, so assumed: ~ the taint history holds none" in text
    assert "~ the guard's limit is the reconciler's default" in text
    assert "now is this host's clock" not in text  # --now was given


def test_against_the_rules_in_force_the_same_rules_are_no_change_exit_0(tmp_path: Path) -> None:
    in_force = write(tmp_path / "in-force.yaml", HEADER + TEAM)

    result = plan(tmp_path, TEAM, "--in-force", in_force, "-o", "json")

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["verdict"] == "no change"
    assert report["comparedWith"] == f"the rules in {in_force} (--in-force)"
    assert report["assumed"] == [
        "the taint history holds the taints of the rules in force only: a taint that only an "
        "earlier rules generation owned stays in this plan, where the reconciler would remove "
        "it",
        "the guard's limit is the reconciler's default (the running reconciler's is in its "
        "status record; --max-untaint-share sets it)",
    ]


def test_a_rule_removed_from_the_rules_in_force_is_held_past_the_guards_limit(
    tmp_path: Path,
) -> None:
    team = {"key": "example.com/team", "value": "a", "effect": "NoSchedule"}
    owned = {"nodegate.dev/owned-taints": "example.com/team:NoSchedule"}
    tainted = {
        **NODE,
        "metadata": {**NODE["metadata"], "annotations": owned},
        "spec": {"taints": [team]},
    }
    in_force = write(tmp_path / "in-force.yaml", HEADER + TEAM)

    result = plan(
        tmp_path,
        "labelTaints: []\n",
        "--in-force",
        in_force,
        "--max-untaint-share",
        "0",
        "-o",
        "json",
        nodes=(tainted,),
    )

    assert result.exit_code == 3, result.output
    report = json.loads(result.stdout)
    assert report["changes"] == [
        {"node": "node-a", "pool": "-", "changes": ["- taint example.com/team=a:NoSchedule"]}
    ]
    assert report["maxUntaintShare"] == 0.0


def test_offline_plan_decides_as_the_planner_does_with_the_facts_it_reads() -> None:
    """One decision sequence: what `planned` makes of a source is the rules change of its nodes
    with the clock and the taint history the source gives."""
    nodes = tuple(parse_nodes(listed(NODE), "nodes.yaml"))
    new = parse_rules(HEADER + TEAM, "new.yaml")
    at = parse_time(NOW)
    assert at is not None

    result = planned(PlanInputs(None, "none", at, frozenset(), list(nodes)), new, None)

    assert result == rules_change([(n, PlanFacts(now=at)) for n in nodes], new, None, 0.5)


@pytest.mark.parametrize(("ready", "code"), [(False, 2), (True, 0)], ids=["not-ready", "ready"])
def test_a_node_agent_rule_is_planned_with_the_daemon_sets_and_pods_given(
    tmp_path: Path, ready: bool, code: int
) -> None:
    objects = write(tmp_path / "objects.yaml", listed(DAEMON_SET, agent_pod(ready)))

    result = plan(tmp_path, AGENT, "--daemon-sets", objects, "--pods", objects)

    assert result.exit_code == code, result.output
    tainted = "+ taint example.com/agent-not-ready:NoSchedule" in result.stdout
    assert tainted is not ready


def test_a_node_agent_rule_without_its_objects_is_an_error_naming_what_to_give(
    tmp_path: Path,
) -> None:
    result = plan(tmp_path, AGENT)

    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == (
        "nodegate plan: nodeAgents rules (cilium) wait for DaemonSets' pods: offline, give "
        "--daemon-sets FILE and --pods FILE (e.g. `kubectl get ds,pods -A -o yaml > "
        "objects.yaml`, given to both)\n"
    )


def test_offline_inputs_without_nodes_are_an_error_not_a_live_plan(tmp_path: Path) -> None:
    rules = write(tmp_path / "new.yaml", HEADER + TEAM)

    result = runner.invoke(app, ["plan", "--rules", rules, "--in-force", rules, "--now", NOW])

    assert result.exit_code == 1
    assert result.stderr == (
        "nodegate plan: --in-force, --now: for a plan offline, with --nodes FILE\n"
    )


def test_a_time_that_is_not_rfc_3339_is_an_error_saying_how_to_write_one(tmp_path: Path) -> None:
    result = plan(tmp_path, TEAM, "--now", "yesterday")

    assert result.exit_code == 1
    assert result.stderr == (
        "nodegate plan: --now 'yesterday' is not an RFC 3339 time: write e.g. "
        "2026-11-21T12:00:00Z\n"
    )


def test_a_node_file_that_is_not_nodes_exits_1_naming_the_place(tmp_path: Path) -> None:
    rules = write(tmp_path / "new.yaml", HEADER + TEAM)
    nodes = write(tmp_path / "nodes.yaml", textwrap.dedent("kind: List\nitems:\n- kind: Pod\n"))

    result = runner.invoke(app, ["plan", "--rules", rules, "--nodes", nodes])

    assert result.exit_code == 1
    assert result.stderr.startswith(f"{nodes}:3:3: items[0]: not a Node")


def test_an_offline_plan_loads_neither_the_kubernetes_client_nor_the_reconciler(
    tmp_path: Path,
) -> None:
    rules = write(tmp_path / "new.yaml", HEADER + TEAM)
    nodes = write(tmp_path / "nodes.yaml", listed(NODE))

    modules = loaded_by(["plan", "--rules", rules, "--nodes", nodes])

    assert (
        among(modules, ("kubernetes", "nodegate.reconciler.kit", "nodegate.reconciler.nodes")) == []
    )
