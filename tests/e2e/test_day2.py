"""Day-2 commands against the real API server with a running, leader-elected reconciler:
`nodegate explain NODE`, `nodegate status` and `nodegate plan --rules NEW`, run as a user runs
them (the installed `nodegate` executable, and `kubectl nodegate` through a real kubectl).

Each test gets a namespace of its own for the reconciler's Lease, status record and rules
ConfigMap (its `-n`), rules whose keys and labels are the test's own, and a reconciler that holds
any update removing a taint (`--max-untaint-share 0`), so a held update is easy to make.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from nodegate.core.decisions.blast_radius import rules_digest
from nodegate.core.decisions.persisted_labels import record_name
from nodegate.localcluster.build import ensure_kubectl_built
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import wait_until
from tests.e2e.support.reconciler_fixtures import (
    HEADER,
    TIMEOUT,
    gate_init_pod,
    taints_of,
    wait_for_taints,
)
from tests.e2e.support.reconciler_process import ReconcilerProcess, running_reconciler

BIN = Path(sys.executable).parent
GATE_KEY = "startup.day2.example.com/init"


def rules_text(name: str, *, team_rule: bool = True, extra: str = "") -> str:
    """A label rule (the test's own key), a startup gate on `<name>` init pods, `extra` rules."""
    team = textwrap.dedent(
        f"""\
        labelTaints:
          - name: team
            match: {{labels: {{day2.example.com/team: {name}}}}}
            taint: {{key: day2.example.com/team, value: {name}, effect: NoSchedule}}
            nodeMayLift: true
        """
    )
    gate = textwrap.dedent(
        f"""\
        startupGates:
          - name: warmup
            match: {{labels: {{day2.example.com/gated: {name}}}}}
            taint: {{key: {GATE_KEY}, value: wait, effect: NoSchedule}}
            readyWhen:
              pods: {{namespace: default, selector: {{app: init-{name}}}}}
            timeout: 30m
        """
    )
    return HEADER + (team if team_rule else "") + gate + extra


class Day2:
    """The test's reconciler namespace, its rules ConfigMap and the day-2 commands."""

    def __init__(self, core_v1: k8s_client.CoreV1Api, namespace: str, plane: LocalControlPlane):
        self.core_v1 = core_v1
        self.namespace = namespace
        self.kubeconfig = plane.kubeconfig_path
        self.name = namespace

    def put_rules(self, text: str) -> None:
        body = k8s_client.V1ConfigMap(
            metadata={"name": "nodegate-rules"}, data={"rules.yaml": text}
        )
        try:
            self.core_v1.replace_namespaced_config_map("nodegate-rules", self.namespace, body)
        except ApiException as err:
            if err.status != 404:
                raise
            self.core_v1.create_namespaced_config_map(self.namespace, body)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`nodegate ARGS -n NAMESPACE --kubeconfig ...` as a user runs it (not a terminal)."""
        argv = [str(BIN / "nodegate"), *args, "-n", self.namespace]
        argv += ["--kubeconfig", str(self.kubeconfig)]
        env = {**os.environ, "COLUMNS": "160"}
        return subprocess.run(
            argv, check=False, capture_output=True, text=True, timeout=120, env=env
        )

    def status_record(self) -> dict[str, Any]:
        try:
            raw = self.core_v1.read_namespaced_config_map("nodegate-status", self.namespace)
        except ApiException:
            return {}
        return dict(json.loads((raw.data or {}).get("status.json") or "{}"))


@pytest.fixture
def day2(
    control_plane: LocalControlPlane,
    core_v1: k8s_client.CoreV1Api,
    unique_name: str,
    tmp_path: Path,
) -> Iterator[tuple[Day2, ReconcilerProcess]]:
    namespace = unique_name[:63].rstrip("-")
    core_v1.create_namespace(k8s_client.V1Namespace(metadata={"name": namespace}))
    day = Day2(core_v1, namespace, control_plane)
    day.put_rules(rules_text(namespace))
    args = (
        f"--rules-configmap={namespace}/nodegate-rules",
        f"--lease-namespace={namespace}",
        f"--state-namespace={namespace}",
        "--max-untaint-share=0",
    )
    with running_reconciler(control_plane.kubeconfig_path, tmp_path, *args) as process:
        wait_until(lambda: day.status_record().get("generation") == 1, TIMEOUT, "status record")
        yield day, process
        print(process.logs()[-3000:])
    core_v1.delete_namespace(namespace)


@pytest.fixture
def init_pod(core_v1: k8s_client.CoreV1Api) -> Iterator[Callable[[str, str, str], str]]:
    with ExitStack() as stack:
        yield lambda name, node, app: gate_init_pod(core_v1, stack, node, app, GATE_KEY, name)


def gated_node(day: Day2, make_node: Callable[..., str], suffix: str = "gated") -> str:
    return make_node(
        suffix,
        labels={"day2.example.com/gated": day.name, "nodegate.dev/pool": "gpu"},
        taints=[{"key": GATE_KEY, "value": "wait", "effect": "NoSchedule"}],
    )


def team_node(day: Day2, make_node: Callable[..., str]) -> str:
    name = make_node("team", labels={"day2.example.com/team": day.name})
    wait_for_taints(day.core_v1, name, lambda t: ("day2.example.com/team", "NoSchedule") in t)
    return name


def hold_an_update(day: Day2, node: str) -> str:
    """Put rules without the team rule (it would untaint `node`): the reconciler holds them."""
    text = rules_text(day.name, team_rule=False)
    day.put_rules(text)
    digest = rules_digest(text)
    wait_until(
        lambda: (day.status_record().get("held") or {}).get("digest") == digest,
        TIMEOUT,
        "the update held",
    )
    assert ("day2.example.com/team", "NoSchedule") in taints_of(day.core_v1, node)
    return digest


# --- explain ------------------------------------------------------------------------------------


def test_explain_on_a_gated_node_names_the_init_pod_it_waits_for(
    day2: tuple[Day2, ReconcilerProcess],
    make_node: Callable[..., str],
    init_pod: Callable[[str, str, str], str],
) -> None:
    day, _ = day2
    node = gated_node(day, make_node)
    pod = init_pod(f"init-{node}"[:63], node, f"init-{day.name}")

    result = day.run("explain", node)

    assert result.returncode == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert "explained with the rules in force: generation 1" in out
    assert "waiting for:" in out
    assert f"warmup: waits for init pod default/{pod} (Pending, not Ready)" in out
    assert "times out in 29m" in out or "times out in 30m" in out


def test_explain_says_a_foreign_taint_is_not_nodegates(
    day2: tuple[Day2, ReconcilerProcess], make_node: Callable[..., str]
) -> None:
    day, _ = day2
    node = make_node(
        "foreign", taints=[{"key": "other.io/x", "value": "y", "effect": "NoSchedule"}]
    )

    result = day.run("explain", node)

    assert result.returncode == 0, result.stderr
    assert "untouched (not owned by any rule): other.io/x=y:NoSchedule" in result.stdout
    assert "these taints are not nodegate's: it never removes them" in result.stdout


def test_explain_with_a_held_update_uses_the_rules_in_force_and_names_the_hold(
    day2: tuple[Day2, ReconcilerProcess], make_node: Callable[..., str]
) -> None:
    day, _ = day2
    node = team_node(day, make_node)
    digest = hold_an_update(day, node)

    result = day.run("explain", node)

    assert result.returncode == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert "explained with the rules in force: generation 1" in out
    assert f"rules update {digest} held since" in out
    assert "it would remove taints from" in out
    assert "team day2.example.com/team" in out  # the rule in force still wants its taint


def test_explain_with_rules_file_asks_what_if(
    day2: tuple[Day2, ReconcilerProcess], make_node: Callable[..., str], tmp_path: Path
) -> None:
    day, _ = day2
    node = team_node(day, make_node)
    new = tmp_path / "new.yaml"
    new.write_text(rules_text(day.name, team_rule=False))

    result = day.run("explain", node, "--rules", str(new))

    assert result.returncode == 0, result.stderr
    assert "(what if: not the rules in force)" in result.stdout
    assert f"- taint day2.example.com/team={day.name}:NoSchedule" in result.stdout


# --- status -------------------------------------------------------------------------------------


def test_status_shows_the_held_update_and_the_gated_nodes_as_a_table(
    day2: tuple[Day2, ReconcilerProcess], make_node: Callable[..., str]
) -> None:
    day, _ = day2
    gated = gated_node(day, make_node)
    digest = hold_an_update(day, team_node(day, make_node))
    assert gated

    result = day.run("status")

    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "leader" in out and "version 0.1.0" in out
    assert "generation 1" in out
    assert f"update {digest} held for" in out
    assert f"nodegate.dev/confirm-rules={digest}" in out
    gated_rows = [line for line in out.splitlines() if line.strip().startswith("warmup")]
    assert any(" gpu " in f" {row} " and row.split()[2] == "1" for row in gated_rows), out


def test_status_as_json_has_the_leader_rules_held_update_and_gates(
    day2: tuple[Day2, ReconcilerProcess], make_node: Callable[..., str]
) -> None:
    day, _ = day2
    gated_node(day, make_node)
    digest = hold_an_update(day, team_node(day, make_node))

    result = day.run("status", "-o", "json")

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["leader"]["holder"] == day.status_record()["writer"]
    assert report["leader"]["expired"] is False
    assert report["rules"]["generation"] == 1
    assert report["rules"]["inSync"] is False  # the ConfigMap holds the held update
    assert report["held"]["digest"] == digest
    assert "it would remove taints from" in report["held"]["reason"]
    assert {k: v for k, v in report["gates"][0].items() if k != "oldestSeconds"} == {
        "gate": "warmup",
        "pool": "gpu",
        "nodes": 1,
    }
    team = next(t for t in report["taints"] if t["rule"] == "team")
    assert team["nodes"] == 1
    reasons = {e["reason"] for e in report["events"]}
    assert "RulesHeld" in reasons


# --- plan ---------------------------------------------------------------------------------------


def test_plan_of_the_rules_in_force_is_no_change_exit_0(
    day2: tuple[Day2, ReconcilerProcess], make_node: Callable[..., str], tmp_path: Path
) -> None:
    day, _ = day2
    team_node(day, make_node)
    same = tmp_path / "same.yaml"
    same.write_text(rules_text(day.name))

    result = day.run("plan", "--rules", str(same))

    assert result.returncode == 0, result.stdout + result.stderr
    assert "compared with the rules in force (generation 1): 0 of" in result.stdout
    assert "nodes would change" in result.stdout


def test_plan_that_adds_a_taint_lists_the_node_and_exits_2(
    day2: tuple[Day2, ReconcilerProcess], make_node: Callable[..., str], tmp_path: Path
) -> None:
    day, _ = day2
    node = team_node(day, make_node)
    adding = rules_text(day.name).replace(
        "startupGates:",
        textwrap.dedent(
            f"""\
              - name: also
                match: {{labels: {{day2.example.com/team: {day.name}}}}}
                taint: {{key: day2.example.com/also, value: x, effect: NoSchedule}}
                nodeMayLift: true
            startupGates:"""
        ),
    )
    new = tmp_path / "adding.yaml"
    new.write_text(adding)

    result = day.run("plan", "--rules", str(new))

    assert result.returncode == 2, result.stdout + result.stderr
    lines = [" ".join(line.split()) for line in result.stdout.splitlines()]
    assert f"{node} - + taint day2.example.com/also=x:NoSchedule also" in lines
    assert "also - + taint day2.example.com/also=x:NoSchedule 1" in lines
    assert "the blast-radius guard would let them through" in result.stdout


def test_plan_that_removes_a_taint_exits_2_within_the_limit_and_3_past_the_guard(
    day2: tuple[Day2, ReconcilerProcess], make_node: Callable[..., str], tmp_path: Path
) -> None:
    day, _ = day2
    node = team_node(day, make_node)
    new = tmp_path / "removing.yaml"
    new.write_text(rules_text(day.name, team_rule=False))

    held = day.run("plan", "--rules", str(new), "-o", "json")  # the reconciler's limit: 0
    allowed = day.run("plan", "--rules", str(new), "--max-untaint-share", "1")

    assert held.returncode == 3, held.stdout + held.stderr
    report = json.loads(held.stdout)
    assert report["verdict"] == "held"
    assert report["maxUntaintShare"] == 0.0  # as the running reconciler published it
    assert "it would remove taints from" in report["hold"]
    assert {
        "node": node,
        "pool": "-",
        "changes": [f"- taint day2.example.com/team={day.name}:NoSchedule"],
    } in report["changes"]
    assert allowed.returncode == 2, allowed.stdout + allowed.stderr
    assert f"- taint day2.example.com/team={day.name}:NoSchedule" in allowed.stdout


def kubectl_get_nodes(plane: LocalControlPlane, out: Path) -> list[str]:
    """`kubectl get nodes -o yaml > out`, as a CI job would save them; the nodes' names."""
    got = subprocess.run(
        [str(ensure_kubectl_built()), "get", "nodes", "-o", "yaml"],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "KUBECONFIG": str(plane.kubeconfig_path)},
    )
    out.write_text(got.stdout, encoding="utf-8")
    return sorted(item["metadata"]["name"] for item in yaml.safe_load(got.stdout)["items"])


def test_plan_offline_from_kubectls_nodes_gives_the_live_plans_answer(
    day2: tuple[Day2, ReconcilerProcess],
    make_node: Callable[..., str],
    control_plane: LocalControlPlane,
    tmp_path: Path,
) -> None:
    """The same nodes, planned live and offline (`--nodes` from `kubectl get nodes -o yaml`,
    the rules in force given as the file they came from, the reconciler's limit given): the
    same report, but for what each compared with and what the offline one assumed."""
    day, _ = day2
    node = team_node(day, make_node)
    in_force = tmp_path / "in-force.yaml"
    in_force.write_text(rules_text(day.name))  # what the reconciler put in force (generation 1)
    new = tmp_path / "new.yaml"  # the team rule replaced by another: one taint off, one on
    new.write_text(
        rules_text(day.name, team_rule=False).replace(
            "startupGates:",
            textwrap.dedent(
                f"""\
                labelTaints:
                  - name: also
                    match: {{labels: {{day2.example.com/team: {day.name}}}}}
                    taint: {{key: day2.example.com/also, value: x, effect: NoSchedule}}
                    nodeMayLift: true
                startupGates:"""
            ),
        )
    )
    nodes = tmp_path / "nodes.yaml"
    for _ in range(5):  # other tests' nodes come and go: the two must see the same ones
        seen = kubectl_get_nodes(control_plane, nodes)
        live = {
            form: day.run("plan", "--rules", str(new), "-o", form) for form in ("json", "table")
        }
        if kubectl_get_nodes(control_plane, tmp_path / "again.yaml") == seen:
            break
    offline_argv = [str(BIN / "nodegate"), "plan", "--rules", str(new), "--nodes", str(nodes)]
    offline_argv += ["--in-force", str(in_force), "--max-untaint-share", "0"]
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"} | {"COLUMNS": "160"}
    offline = {
        form: subprocess.run(
            [*offline_argv, "-o", form], check=False, capture_output=True, text=True, env=env
        )
        for form in ("json", "table")
    }

    assert live["json"].returncode == 3, live["json"].stdout + live["json"].stderr
    assert offline["json"].returncode == 3, offline["json"].stdout + offline["json"].stderr
    live_report, offline_report = (json.loads(r["json"].stdout) for r in (live, offline))
    assert live_report.pop("comparedWith") == "the rules in force (generation 1)"
    assert offline_report.pop("comparedWith") == f"the rules in {in_force} (--in-force)"
    assert live_report.pop("assumed") == []
    assert offline_report.pop("assumed")  # said, not silently made up
    assert offline_report == live_report
    assert {
        "node": node,
        "pool": "-",
        "changes": [
            "+ taint day2.example.com/also=x:NoSchedule",
            f"- taint day2.example.com/team={day.name}:NoSchedule",
        ],
    } in live_report["changes"]
    tables = [run["table"].stdout.splitlines() for run in (live, offline)]
    live_table, offline_table = (
        t[next(i for i, x in enumerate(t) if "HELD" in x) :] for t in tables
    )
    assert offline_table == live_table  # from the guard's verdict on, line for line


def test_plan_of_bad_rules_exits_1_naming_the_place_and_changes_nothing(
    day2: tuple[Day2, ReconcilerProcess], make_node: Callable[..., str], tmp_path: Path
) -> None:
    day, _ = day2
    node = team_node(day, make_node)
    before = taints_of(day.core_v1, node)
    bad = tmp_path / "bad.yaml"
    bad.write_text(rules_text(day.name).replace("effect: NoSchedule", "effect: NoSchedul", 1))

    result = day.run("plan", "--rules", str(bad))

    assert result.returncode == 1
    assert f"{bad}:6:" in result.stderr and "NoSchedul" in result.stderr
    assert taints_of(day.core_v1, node) == before
    assert day.status_record()["generation"] == 1


# --- kubectl plugin -----------------------------------------------------------------------------


def test_kubectl_runs_nodegate_as_a_plugin(
    day2: tuple[Day2, ReconcilerProcess], make_node: Callable[..., str]
) -> None:
    day, _ = day2
    node = gated_node(day, make_node)
    kubectl = ensure_kubectl_built()
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "KUBECONFIG": str(day.kubeconfig),
    }

    result = subprocess.run(
        [str(kubectl), "nodegate", "explain", node, "-n", day.namespace],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    listed = subprocess.run(
        [str(kubectl), "plugin", "list"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )

    assert result.returncode == 0, result.stderr
    assert "warmup: waits for an init pod in default" in " ".join(result.stdout.split())
    assert str(BIN / "kubectl-nodegate") in listed.stdout


def test_kubectl_completes_the_plugins_commands_and_flags() -> None:
    kubectl = ensure_kubectl_built()
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}

    def complete(*words: str) -> list[str]:
        result = subprocess.run(
            [str(kubectl), "__complete", "nodegate", *words],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        return result.stdout.split()

    assert complete("sta") == ["status", ":4"]
    assert "--summary" in complete("plan", "--su")


def test_explain_and_status_name_a_quarantined_label_record(
    day2: tuple[Day2, ReconcilerProcess], make_node: Callable[..., str]
) -> None:
    day, _ = day2
    persisting = rules_text(day.name) + textwrap.dedent(
        """\
        persistentLabels:
          prefixes: [persist.day2.example.com/]
          keyBy: nodeName
        """
    )
    day.put_rules(persisting)
    wait_until(lambda: day.status_record().get("generation") == 2, TIMEOUT, "generation 2")
    node = make_node("kept")
    copy = f"{record_name(node)}-quarantined-20261124t000000z"
    body = k8s_client.V1ConfigMap(
        metadata={
            "name": copy,
            "labels": {"nodegate.dev/quarantined": "true"},
            "annotations": {"nodegate.dev/quarantine-reason": "record.json is not JSON"},
        },
        data={"record.json": "{"},
    )
    day.core_v1.create_namespaced_config_map(day.namespace, body)

    explained = day.run("explain", node)
    status = day.run("status", "-o", "json")

    assert explained.returncode == 0, explained.stderr
    assert f"persisted labels: record quarantined as {copy}" in " ".join(explained.stdout.split())
    assert [copy, "record.json is not JSON"] in json.loads(status.stdout)["records"]["quarantined"]


def test_explain_looks_only_at_the_init_pods_on_that_node(
    day2: tuple[Day2, ReconcilerProcess],
    make_node: Callable[..., str],
    init_pod: Callable[[str, str, str], str],
) -> None:
    day, _ = day2
    with_pod = gated_node(day, make_node, "with-pod")
    without = gated_node(day, make_node, "without")
    pod = init_pod(f"init-{with_pod}"[:63], with_pod, f"init-{day.name}")

    result = day.run("explain", without)

    out = " ".join(result.stdout.split())
    assert "warmup: waits for an init pod in default with labels" in out
    assert "on this node (none yet)" in out
    assert pod not in out


# --- what nodegate prints, read by kubectl ------------------------------------------------------


def test_kubectl_reads_printed_manifests_with_yes_and_on_values_as_strings(
    control_plane: LocalControlPlane, tmp_path: Path
) -> None:
    """kubectl reads YAML 1.1 (go-yaml v2), where a plain `yes` or `on` is a bool and `973e38` a
    float, which no label or nodeSelector may hold: the one YAML writer quotes them."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(rules_text("yaml"), encoding="utf-8")
    settings = tmp_path / "settings.yaml"
    selector = {"example.com/gpu": "yes", "example.com/spot": "on", "example.com/slot": "973e38"}
    image = {"repository": "registry.example.com/nodegate"}
    settings.write_text(json.dumps({"image": image, "nodeSelector": selector}), encoding="utf-8")
    printed = subprocess.run(
        [str(BIN / "nodegate"), "manifests", "--rules", str(rules), "--settings", str(settings)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert printed.returncode == 0, printed.stderr

    read = subprocess.run(
        [str(ensure_kubectl_built()), "create", "--dry-run=client", "-o", "yaml", "-f", "-"],
        input=printed.stdout,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "KUBECONFIG": str(control_plane.kubeconfig_path)},
    )

    assert read.returncode == 0, read.stderr
    objects = list(yaml.safe_load_all(read.stdout))
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    assert deployment["spec"]["template"]["spec"]["nodeSelector"] == selector
