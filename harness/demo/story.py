"""The demo's story, played against a real control plane: nodes born tainted, a startup gate
lifted by its init pod, label and condition taints following the node, persisted labels
surviving re-creation, and a bad rules edit refused (a typo by the API server at the door, a
rule nodegate's trust model refuses in the object's status). The rules are a NodeRules object,
as every way in puts them. Each step checks its own outcome, so the same story is an e2e test
(tests/e2e/test_demo.py) and cannot rot.
"""

from __future__ import annotations

import io
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console
from rich.table import Table

from nodegate.bootstrap.kubelet_flags import format_kubelet_flags
from nodegate.cli.live.render import Column, print_table
from nodegate.core.decisions.node_trust import seal_for_registration
from nodegate.core.decisions.persisted_labels import record_name
from nodegate.core.rules.loader import parse_rules
from nodegate.core.rules.model import API_VERSION, CRD_NAME, PLURAL, NodePool, NodeRules
from nodegate.core.rules.registration import registration_labels, registration_taints
from nodegate.core.text.yaml_input import read_yaml
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import (
    SimNode,
    create_node,
    delete_node,
    oci_provider_id,
    set_node_condition,
    wait_crd_established,
    wait_until,
)
from nodegate.localcluster.ports import free_port
from nodegate.manifests.crd import noderules_crd
from nodegate.reconciler.main import run
from nodegate.reconciler.settings import LeaderElectionSettings, ReconcilerSettings

NAMESPACE = "nodegate-system"
GROUP, _, VERSION = API_VERSION.partition("/")
POD_IMAGE = "registry.k8s.io/pause:3.10"
STEP_TIMEOUT = 90.0
ACCELERATOR = {"example.com/accelerator": "nvidia"}
SHOWN_LABEL_PREFIXES = ("example.com/", "persist.example.com/", "node-role.kubernetes.io/")


class StepFailedError(Exception):
    """A step of the story did not do what it says (a check, not an `assert`: `python -O`
    must not turn a failed demo into a passing one)."""


def check(condition: bool, failure: str) -> None:
    """Raise StepFailedError(`failure`) unless `condition` holds."""
    if not condition:
        raise StepFailedError(failure)


@dataclass
class Step:
    title: str
    ok: bool = False
    detail: str = ""


@dataclass
class DemoRun:
    steps: list[Step] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return bool(self.steps) and all(step.ok for step in self.steps)


class Story:
    def __init__(
        self, plane: LocalControlPlane, rules_text: str, console: Console, prefix: str = "demo"
    ) -> None:
        self.plane = plane
        self.rules_text = rules_text
        self.rules: NodeRules = parse_rules(rules_text, "rules")
        self.console = console
        self.prefix = prefix
        self.core = k8s_client.CoreV1Api(plane.client)
        self.apps = k8s_client.AppsV1Api(plane.client)
        self.custom = k8s_client.CustomObjectsApi(plane.client)
        self.port = free_port()
        self.logs = io.StringIO()
        self.nodes: list[str] = []
        self.seen_nodes: list[str] = []
        self._shown: set[tuple[str | None, int | None]] = set()
        self._cleanup: list[Callable[[], object]] = []

    # --- the story -------------------------------------------------------------------------

    def play(self) -> DemoRun:
        result = DemoRun()
        with self._reconciler():
            for title, step in (
                ("Nodes join, born with their pool's taints", self.join),
                ("A workload waits for the startup gate; the init pod lifts it", self.gate),
                ("A label comes and goes; its taint follows", self.label),
                ("A node condition flips; its taint follows after `for`", self.condition),
                ("A node is deleted and re-created; its persisted labels come back", self.recreate),
                ("An invalid rules edit is refused; the rules in force stay", self.invalid),
            ):
                result.steps.append(self._play(title, step))
                if not result.steps[-1].ok:
                    break
            result.metrics = self._metrics()
        self._summary(result)
        return result

    def join(self) -> str:
        for pool_name in ("gpu", "ci"):
            pool = self._pool(pool_name)
            taints = registration_taints(self.rules, pool)
            labels = registration_labels(pool)
            flags = " ".join(format_kubelet_flags(taints, labels))
            self.console.print(f"  [dim]{pool_name} kubelet booted with:[/dim] {flags}")
            self._node(f"{pool_name}-1", pool)
        ci = self._name("ci-1")
        self._wait(lambda: "node-role.kubernetes.io/ci" in self._labels(ci), "ci role label")
        gpu = self._name("gpu-1")
        gate = self.rules.startup_gates[0].taint.key
        check(gate in self._taint_keys(gpu), "the gpu node was born without its gate")
        return "nodes carry their registration taints from their first version"

    def gate(self) -> str:
        gate = self.rules.startup_gates[0]
        gpu = self._name("gpu-1")
        pods = gate.ready_when.pods
        if pods is None:
            raise StepFailedError("the demo's gate waits for an init pod")
        work = self._name("inference")
        self._create_workload(work)
        time.sleep(2.0)
        check(not self._bound(work), "the workload was bound while the gate was up")
        self.console.print("  [dim]workload pending behind the gate; starting the init DaemonSet")
        self._create_init_daemonset(pods.namespace, dict(pods.selector))
        self._wait(lambda: gate.taint.key not in self._taint_keys(gpu), "gate lifted")
        self._wait(lambda: self._bound(work), "workload bound")
        return "gate lifted when the init pod was Ready; only then was the workload bound"

    def label(self) -> str:
        ci = self._name("ci-1")
        self._patch_labels(ci, {"example.com/capacity": "spot"})
        self._wait(lambda: "example.com/spot" in self._taint_keys(ci), "spot taint")
        self._show()
        self._patch_labels(ci, {"example.com/capacity": None})
        self._wait(lambda: "example.com/spot" not in self._taint_keys(ci), "spot taint gone")
        return "label added -> taint added; label removed -> taint removed"

    def condition(self) -> str:
        gpu = self._name("gpu-1")
        rule = next(r for r in self.rules.condition_taints if r.name == "nic-broken")
        kind = rule.conditions[0].type or "NetworkInterfaceCard"
        set_node_condition(self.core, gpu, condition_type=kind, status="Kaput", reason="NicDown")
        hold = int(rule.hold.total_seconds()) if rule.hold else 0
        self.console.print(f"  [dim]{kind}=Kaput; waiting the rule's for: {hold}s[/dim]")
        self._wait(lambda: rule.taint.key in self._taint_keys(gpu), "condition taint", hold + 60)
        added = next(t for t in self._taints(gpu) if t["key"] == rule.taint.key)
        check(bool(added.get("timeAdded")), "a NoExecute taint carries timeAdded")
        self._show()
        set_node_condition(self.core, gpu, condition_type=kind, status="OK", reason="NicUp")
        self._wait(lambda: rule.taint.key not in self._taint_keys(gpu), "condition taint gone")
        return f"taint added {hold}s after the condition, with timeAdded; removed on recovery"

    def recreate(self) -> str:
        old = self._name("gpu-1")
        self._patch_labels(old, {"persist.example.com/owner": "alice"})  # an admin's label
        record = record_name(oci_provider_id(old))
        self._wait(lambda: "alice" in self._record_text(record), "label recorded")
        delete_node(self.core, old)
        self.nodes.remove(old)
        self.console.print("  [dim]gpu-1 deleted; its instance comes back as gpu-1b[/dim]")
        new = self._node("gpu-1b", self._pool("gpu"), provider_id=oci_provider_id(old))
        self._wait(
            lambda: self._labels(new).get("persist.example.com/owner") == "alice",
            "persisted label restored",
        )
        return "the admin's label came back on the re-created node (same providerID)"

    def invalid(self) -> str:
        typo = self.rules_text.replace("effect: NoSchedule", "effect: NoSchedul", 1)
        try:
            self._put_rules(typo)
        except ApiException as err:
            check(err.status == 422, f"the API server answered the typo with {err.status}")
            found = json.loads(err.body or "{}").get("message", "")
            self.console.print(f"  [red]kubectl apply: {found[:300]}[/red]")
        else:
            raise StepFailedError("the API server took a taint effect 'NoSchedul'")
        before = self._metric("nodegate_rules_rejected_total")
        # Valid to the API server, refused by nodegate: a kubelet may change the label it matches.
        self._put_rules(self.rules_text.replace("      nodeMayLift: true\n", "", 1))
        self._wait(lambda: self._metric("nodegate_rules_rejected_total") > before, "refusal")
        ci = self._name("ci-1")
        self._patch_labels(ci, {"example.com/capacity": "spot"})
        self._wait(lambda: "example.com/spot" in self._taint_keys(ci), "old rules still act")
        self._wait(lambda: self._condition("Accepted") is not None, "the refusal in its status")
        accepted = self._condition("Accepted") or {}
        check(accepted.get("status") == "False", "the object says Accepted for refused rules")
        shown = str(accepted.get("message", ""))[:300]
        self.console.print(f"  [red]status Accepted=False: {shown}[/red]")
        self._put_rules(self.rules_text)
        return (
            "the typo was refused at the door with its path; the rule a node could lift was "
            "refused in the object's status with its fix; the old rules kept working"
        )

    # --- plumbing --------------------------------------------------------------------------

    def _play(self, title: str, step: Callable[[], str]) -> Step:
        self.console.rule(f"[bold]{title}")
        try:
            detail = step()
            outcome = Step(title, True, detail)
        except (StepFailedError, TimeoutError, ApiException) as err:
            outcome = Step(title, False, f"{type(err).__name__}: {err}")
        self._show()
        self._new_events()
        mark = "[green]ok[/green]" if outcome.ok else "[red]FAILED[/red]"
        self.console.print(f"  {mark} {outcome.detail}")
        return outcome

    @contextmanager
    def _reconciler(self) -> Iterator[None]:
        try:
            self.core.create_namespace(k8s_client.V1Namespace(metadata={"name": NAMESPACE}))
        except ApiException as err:
            if err.status != 409:
                raise
        self._install_crd()
        self._put_rules(self.rules_text)
        settings = ReconcilerSettings(
            kubeconfig=self.plane.kubeconfig_path,
            rules_objects=True,
            state_namespace=NAMESPACE,
            event_namespace="default",
            http_port=self.port,
            http_address="127.0.0.1",
            resync_seconds=30,
            max_untaint_share=1.0,
            leader_election=LeaderElectionSettings(enabled=False),
        )
        stop = threading.Event()
        thread = threading.Thread(
            target=run, args=(settings, stop, self.logs), name="reconciler", daemon=True
        )
        thread.start()
        try:
            self._wait(lambda: self._http("/readyz")[0] == 200, "reconciler ready")
            yield
        finally:
            stop.set()
            thread.join(timeout=15)
            for undo in reversed(self._cleanup):
                try:
                    undo()
                except ApiException as err:
                    if err.status != 404:
                        raise

    def _pool(self, name: str) -> NodePool:
        pool = self.rules.pool(name)
        if pool is None:
            raise StepFailedError(f"the rules have no pool '{name}'")
        return pool

    def _name(self, suffix: str) -> str:
        return f"{self.prefix}-{suffix}"

    def _node(self, suffix: str, pool: NodePool, provider_id: str = "") -> str:
        name = self._name(suffix)
        taints = [
            {"key": t.key, "value": t.value, "effect": t.effect}
            if t.value
            else {"key": t.key, "effect": t.effect}
            for t in registration_taints(self.rules, pool)
        ]
        labels = registration_labels(pool)
        # The Node admission webhook (not run by the demo) seals the pool the kubelet registers
        # in; the reconciler turns the seal into the label that grants reconcilerLabels.
        seal = seal_for_registration(labels, (), self.rules)
        if seal is not None:
            taints.append({"key": seal.key, "value": seal.value, "effect": seal.effect})
        node = SimNode(
            name=name,
            labels=labels,
            taints=taints,
            kwok=True,
            provider_id=provider_id or oci_provider_id(name),
        )
        create_node(self.core, node)
        self.nodes.append(name)
        self.seen_nodes.append(name)
        self._cleanup.append(lambda: self._delete_node(name))
        return name

    def _delete_node(self, name: str) -> None:
        if name in self.nodes:
            self.core.delete_node(name)

    def _create_init_daemonset(self, namespace: str, labels: dict[str, str]) -> None:
        """The per-node init pod, as a DaemonSet on the gated pool; it tolerates the gate."""
        name = f"{self.prefix}-gpu-node-init"
        init: dict[str, Any] = {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": name},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "nodeSelector": ACCELERATOR,
                        "tolerations": [{"operator": "Exists"}],
                        "containers": [{"name": "init", "image": POD_IMAGE}],
                    },
                },
            },
        }
        self.apps.create_namespaced_daemon_set(namespace, init)  # type: ignore[arg-type]
        self._cleanup.append(lambda: self.apps.delete_namespaced_daemon_set(name, namespace))

    def _create_workload(self, name: str) -> None:
        workload: dict[str, Any] = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {
                        "nodeSelector": ACCELERATOR,
                        # It tolerates the GPU taint, not the gate: only the gate holds it back.
                        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                        "containers": [{"name": "app", "image": POD_IMAGE}],
                    },
                },
            },
        }
        self.apps.create_namespaced_deployment("default", workload)  # type: ignore[arg-type]
        self._cleanup.append(lambda: self.apps.delete_namespaced_deployment(name, "default"))

    def _record_text(self, name: str) -> str:
        try:
            found = self.core.read_namespaced_config_map(name, NAMESPACE)
        except ApiException as err:
            if err.status == 404:
                return ""
            raise
        return str((found.data or {}).get("record.json", ""))

    def _bound(self, app: str) -> bool:
        pods = self.core.list_namespaced_pod("default", label_selector=f"app={app}").items
        return any(p.spec and p.spec.node_name for p in pods)

    def _install_crd(self) -> None:
        """The NodeRules CRD, as every installation ships it, Established before any object."""
        extensions = k8s_client.ApiextensionsV1Api(self.plane.client)
        try:
            extensions.create_custom_resource_definition(noderules_crd())  # type: ignore[arg-type]
        except ApiException as err:
            if err.status != 409:
                raise
        wait_crd_established(self.plane.client, CRD_NAME, STEP_TIMEOUT)

    def _put_rules(self, text: str) -> None:
        """The rules file as the NodeRules object `<prefix>-rules` (kubectl apply's create or
        replace)."""
        body: dict[str, Any] = read_yaml(text, "rules")[0]
        body["metadata"] = {"name": self._name("rules")}
        try:
            current: Any = self.custom.get_cluster_custom_object(
                GROUP, VERSION, PLURAL, self._name("rules")
            )
        except ApiException as err:
            if err.status != 404:
                raise
            self.custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, body)
            self._cleanup.append(
                lambda: self.custom.delete_cluster_custom_object(
                    GROUP, VERSION, PLURAL, self._name("rules")
                )
            )
            return
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        self.custom.replace_cluster_custom_object(GROUP, VERSION, PLURAL, self._name("rules"), body)

    def _condition(self, kind: str) -> dict[str, Any] | None:
        """The rules object's condition `kind` once its status speaks of its current generation."""
        found: Any = self.custom.get_cluster_custom_object(
            GROUP, VERSION, PLURAL, self._name("rules")
        )
        status = found.get("status") or {}
        if status.get("observedGeneration") != found["metadata"]["generation"]:
            return None
        return next((c for c in status.get("conditions", []) if c["type"] == kind), None)

    def _raw_node(self, name: str) -> dict[str, Any]:
        response: Any = self.core.read_node(name, _preload_content=False)
        node: dict[str, Any] = json.loads(response.data)
        return node

    def _labels(self, name: str) -> dict[str, str]:
        return dict(self._raw_node(name)["metadata"].get("labels") or {})

    def _taints(self, name: str) -> list[dict[str, Any]]:
        return list(self._raw_node(name)["spec"].get("taints") or [])

    def _taint_keys(self, name: str) -> set[str]:
        return {t["key"] for t in self._taints(name)}

    def _patch_labels(self, name: str, labels: dict[str, str | None]) -> None:
        self.core.patch_node(
            name, {"metadata": {"labels": labels}}, _content_type="application/merge-patch+json"
        )

    def _wait(self, check: Callable[[], bool], what: str, timeout: float = STEP_TIMEOUT) -> None:
        wait_until(check, timeout, what, interval=0.1)

    def _show(self) -> None:
        rows: list[tuple[str, str, str]] = []
        for name in self.nodes:
            try:
                raw = self._raw_node(name)
            except ApiException:
                continue
            labels = raw["metadata"].get("labels") or {}
            shown = [
                f"{k}={v}" if v else k
                for k, v in sorted(labels.items())
                if k.startswith(SHOWN_LABEL_PREFIXES)
            ]
            taints = [
                f"{t['key']}={t.get('value', '')}:{t['effect']}".replace("=:", ":")
                for t in raw["spec"].get("taints") or []
            ]
            rows.append((name, "\n".join(shown), "\n".join(taints)))
        # Whole taints and labels at any width: a table if it fits, else a block per node.
        columns = (Column("node"), Column("labels (example.com, persist, role)"), Column("taints"))
        print_table(self.console, columns, rows)

    def _new_events(self) -> None:
        """nodegate's Events about the demo's nodes not shown yet (aggregated repeats show once
        more with their count)."""
        events = self.core.list_namespaced_event("default").items
        ours = [
            e
            for e in events
            if (e.reporting_component or "") == "nodegate.dev/reconciler"
            and e.involved_object.name in self.seen_nodes
            and (e.metadata.uid, e.count) not in self._shown
        ]
        for event in sorted(ours, key=lambda e: (e.last_timestamp is None, e.last_timestamp)):
            self._shown.add((event.metadata.uid, event.count))
            repeat = f" (x{event.count})" if (event.count or 1) > 1 else ""
            self.console.print(
                f"  [cyan]event[/cyan] {event.involved_object.name} {event.reason}{repeat}: "
                f"{(event.message or '')[:160]}"
            )

    def _http(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=2) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, ""
        except OSError:
            return 0, ""

    def _metric(self, name: str) -> float:
        return self._metrics().get(name, 0.0)

    def _metrics(self) -> dict[str, float]:
        totals: dict[str, float] = {}
        for family in text_string_to_metric_families(self._http("/metrics")[1]):
            for sample in family.samples:
                if sample.name.startswith("nodegate_") and not sample.name.endswith(
                    ("_bucket", "_created")
                ):
                    totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
        return totals

    def _summary(self, result: DemoRun) -> None:
        self.console.rule("[bold]Summary")
        for step in result.steps:
            mark = "[green]ok[/green]" if step.ok else "[red]FAILED[/red]"
            self.console.print(f"  {mark}  {step.title}")
        shown = (
            "nodegate_node_writes_total",
            "nodegate_node_changes_total",
            "nodegate_write_conflicts_total",
            "nodegate_label_restores_total",
            "nodegate_time_to_ungate_seconds_sum",
            "nodegate_rules_rejected_total",
            "nodegate_errors_total",
        )
        table = Table("metric", "value", box=None)
        for name in shown:
            table.add_row(name, f"{result.metrics.get(name, 0.0):g}")
        self.console.print(table)
