"""The `nodegate` command as users call it: exit codes, stdout and stderr."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from nodegate.cli.main import app

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "examples" / "rules.yaml"
NODE = ROOT / "examples" / "nodes" / "gpu-node.yaml"
runner = CliRunner()


def test_validate_exits_0_for_valid_files() -> None:
    result = runner.invoke(app, ["validate", str(RULES)])
    assert result.exit_code == 0
    assert result.stdout.startswith(f"{RULES}: ok (4 label taints")


def test_validate_exits_1_and_prints_every_problem_to_stderr(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: nodegate.dev/v1\nkind: NodeRules\nlabelTaints:\n"
        "  - name: x\n    match: {labels: {a: b}}\n    taint: {key: a, effect: Nope}\n"
        "    nodeMayLift: true\n"
        "  - name: x\n    match: {labels: {a: b}}\n    taint: {key: b, effect: NoSchedule}\n"
        "    nodeMayLift: true\n"
    )
    result = runner.invoke(app, ["validate", str(RULES), str(bad)])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"{bad}:6:21: labelTaints[0].taint.effect: 'Nope' is not a taint effect: use one of "
        "NoSchedule, PreferNoSchedule, NoExecute",
        f"{bad}:8:5: labelTaints[1].name: rule name 'x' is already used by labelTaints[0]; rule "
        "names are the reason shown in events and metrics and must be unique",
    ]
    assert f"{RULES}: ok" in result.stdout


def test_validate_prints_warnings_to_stderr_and_exits_0(tmp_path: Path) -> None:
    warned = tmp_path / "warned.yaml"
    warned.write_text(
        "apiVersion: nodegate.dev/v1\nkind: NodeRules\nmetadata: {name: team}\nspec:\n"
        "  startupGates:\n"
        "    - name: g\n      match: {labels: {a: b}}\n"
        "      taint: {key: startup-taint.cluster-autoscaler.kubernetes.io/g, effect: NoSchedule}\n"
        "      readyWhen: {annotation: example.com/ready=true}\n      timeout: 20m\n"
        "  nodePools:\n    - name: p\n      provider: oke\n      size: 0\n      labels: {a: b}\n"
        "      autoscaler: {type: cluster-autoscaler}\n"
    )
    result = runner.invoke(app, ["validate", str(warned)])
    assert result.exit_code == 0
    assert result.stdout == (
        f"{warned}: ok (0 label taints, 0 condition taints, 1 startup gates, 0 node agents, "
        "1 pools, 1 warnings)\n"
        f"{warned}: info: the reconciler's Deployment tolerates its gates "
        "(startup-taint.cluster-autoscaler.kubernetes.io/g:NoSchedule, any value) besides the "
        "deploy settings' tolerations\n"
    )
    assert result.stderr.startswith(
        f"{warned}:10:7: warning: spec.startupGates[0].timeout: timeout 20m"
    )


def test_validate_reads_a_file_of_the_old_shape_and_says_how_to_move_it(tmp_path: Path) -> None:
    flat = tmp_path / "flat.yaml"
    flat.write_text(
        "apiVersion: nodegate.dev/v1\nkind: NodeRules\nlabelTaints:\n"
        "  - {name: r, match: {labels: {a: b}}, taint: {key: k, effect: NoSchedule}, "
        "nodeMayLift: true}\n"
    )
    result = runner.invoke(app, ["validate", str(flat)])
    assert result.exit_code == 0, result.stderr
    assert f"{flat}: info: this file has the shape rules had before" in result.stdout
    assert "under `spec:`" in result.stdout


def test_schema_is_json_with_the_rule_sections() -> None:
    result = runner.invoke(app, ["schema"])
    schema = json.loads(result.stdout)
    assert {"labelTaints", "conditionTaints", "startupGates", "nodePools"} <= set(
        schema["properties"]["spec"]["properties"]
    )


def test_explain_names_the_rule_behind_each_change() -> None:
    result = runner.invoke(
        app,
        ["explain", "--rules", str(RULES), "--node", str(NODE), "--now", "2026-11-21T10:10:00Z"],
    )
    assert result.exit_code == 0, result.output
    assert (
        "+ taint nvidia.com/gpu=present:NoSchedule  (gpu-only: node labels match)" in result.stdout
    )
    assert "untouched (not owned by any rule): node.kubernetes.io/not-ready:NoSchedule" in (
        result.stdout
    )


def test_explain_reads_a_node_list_from_kubectl(tmp_path: Path) -> None:
    node = yaml.safe_load(NODE.read_text())
    second = {**node, "metadata": {**node["metadata"], "name": "gpu-pool-1"}}
    listing = tmp_path / "nodes.yaml"
    listing.write_text(
        yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [node, second]})
    )
    result = runner.invoke(app, ["explain", "--rules", str(RULES), "--node", str(listing)])
    assert result.exit_code == 0, result.output
    assert "changes for node gpu-pool-0" in result.stdout
    assert "changes for node gpu-pool-1" in result.stdout


def test_explain_of_a_node_list_says_which_evicting_taints_would_wait_for_the_budget(
    tmp_path: Path,
) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "apiVersion: nodegate.dev/v1\nkind: NodeRules\nconditionTaints:\n"
        "  - {name: net, conditions: [{type: Net, status: 'True'}],"
        " taint: {key: example.com/net, effect: NoExecute}}\n"
    )
    broken = {"status": {"conditions": [{"type": "Net", "status": "True"}]}}
    items = [{"kind": "Node", "metadata": {"name": f"n{i}"}, **broken} for i in range(10)]
    listing = tmp_path / "nodes.json"
    listing.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))

    result = runner.invoke(
        app, ["explain", "--rules", str(rules), "--node", str(listing)], env={"COLUMNS": "200"}
    )

    assert result.exit_code == 0, result.output
    assert result.stdout.count("+ taint example.com/net:NoExecute") == 2
    assert result.stdout.count("no write until the budget allows") == 8
    assert "would wait (net: waiting for the eviction budget: 2 of 10 nodes" in result.stdout


def test_explain_refuses_something_that_is_not_a_node(tmp_path: Path) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
    result = runner.invoke(app, ["explain", "--rules", str(RULES), "--node", str(pod)])
    assert result.exit_code == 2
    assert "expected a Node or a list of Nodes" in result.stderr


def test_explain_with_invalid_rules_exits_1(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: nodegate.dev/v1\nkind: Rules\n")
    result = runner.invoke(app, ["explain", "--rules", str(bad), "--node", str(NODE)])
    assert result.exit_code == 1
    assert f"{bad}:2:1: kind: 'Rules' is not allowed: use 'NodeRules'" in result.stderr


def test_demo_without_the_harness_says_how_to_get_it_and_exits_2(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A None entry makes `import nodegate.demo…` fail as it does where harness/ is not installed.
    monkeypatch.setitem(sys.modules, "nodegate.demo", None)
    monkeypatch.delitem(sys.modules, "nodegate.demo.play", raising=False)
    result = runner.invoke(app, ["demo"])
    assert result.exit_code == 2
    assert "demo harness is not installed" in result.stderr
    assert "make demo" in result.stderr


def test_validate_says_what_each_pool_with_reconciler_labels_needs_on_its_cloud(
    tmp_path: Path,
) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "apiVersion: nodegate.dev/v1\nkind: NodeRules\nnodePools:\n"
        "  - {name: ci, provider: oke, size: 1,\n"
        "     reconcilerLabels: {node-role.kubernetes.io/ci: ''}}\n"
        "  - {name: web, provider: aks, size: 1,\n"
        "     reconcilerLabels: {node-role.kubernetes.io/web: ''}}\n"
        "  - {name: plain, provider: oke, size: 1}\n"
    )
    result = runner.invoke(app, ["validate", str(rules)])
    assert result.exit_code == 0
    info = [line for line in result.stdout.splitlines() if ": info: pool" in line]
    assert len(info) == 2
    assert "node-restriction.kubernetes.io/nodegate-pool=ci" in info[0]
    assert "Node admission webhook" in info[0]
    assert "kubernetes.azure.com/agentpool" in info[1]


def test_explain_with_a_ready_gate_shows_the_lift_on_a_node_file_with_a_creation_time() -> None:
    result = runner.invoke(
        app,
        [
            "explain",
            "--rules",
            str(RULES),
            "--node",
            str(NODE),
            "--now",
            "2026-11-21T10:10:00Z",
            "--ready-gate",
            "gpu-warmup",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "gpu-warmup: init pod is Ready" in " ".join(result.stdout.split())
