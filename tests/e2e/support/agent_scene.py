"""The scene of the node-agent tests (`tests/e2e/test_node_agents.py` and the peers' own
scenarios replayed in `test_parity_nidhogg.py` and `test_parity_vigil.py`): one test's
namespace, nodes, DaemonSets and reconciler on the scheduling control plane, and the agent's
NotReady played by patching its pod's status, as its kubelet would."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import SimNode, create_node, delete_node, wait_until
from tests.e2e.support.reconciler_fixtures import (
    HEADER,
    PAUSE_IMAGE,
    TIMEOUT,
    alone,
    configmap_putter,
    taints_of,
)
from tests.e2e.support.reconciler_process import ReconcilerProcess, running_reconciler

AGENT = ("example.com/agent-not-ready", "NoSchedule")
AGENT_TAINT = {"key": AGENT[0], "effect": AGENT[1]}


class Scene:
    """One test's namespace, nodes and reconciler on the scheduling control plane."""

    def __init__(
        self, plane: LocalControlPlane, stack: ExitStack, name: str, tmp_path: Path
    ) -> None:
        self.core = k8s_client.CoreV1Api(plane.client)
        self.apps = k8s_client.AppsV1Api(plane.client)
        self.plane, self.stack, self.name, self.tmp_path = plane, stack, name, tmp_path
        self.namespace = name[:63]
        self.pool = {"example.com/agents": name[:63]}
        self.core.create_namespace({"metadata": {"name": self.namespace}})  # type: ignore[arg-type]
        stack.callback(self._delete_namespace)
        self.rules_configmap = f"rules-{name}"[:63]
        self._put = configmap_putter(self.core, self.rules_configmap)
        stack.callback(self._delete_rules)

    def _delete_rules(self) -> None:
        try:
            self.core.delete_namespaced_config_map(self.rules_configmap, "default")
        except ApiException as err:
            if err.status != 404:
                raise

    def _delete_namespace(self) -> None:
        try:
            self.core.delete_namespace(self.namespace)
        except ApiException as err:
            if err.status != 404:
                raise

    def rules(self, body: str) -> str:
        return HEADER + body.replace("NAMESPACE", self.namespace).replace(
            "POOL", self.pool["example.com/agents"]
        )

    def start(self, body: str) -> ReconcilerProcess:
        return self.start_file(self.rules(body))

    def start_file(self, text: str) -> ReconcilerProcess:
        """A reconciler on the whole rules file `text` (its header included)."""
        ref = self._put(text)
        return self.stack.enter_context(
            running_reconciler(self.plane.kubeconfig_path, self.tmp_path, *alone(ref))
        )

    def node(
        self,
        suffix: str,
        labels: dict[str, str] | None = None,
        tainted: bool = True,
        taints: list[dict[str, str]] | None = None,
        boot_id: str = "",
        system_uuid: str | None = None,
    ) -> str:
        """A kwok node of the test's pool, born with the agent taint (`tainted`) and `taints`,
        reporting the machine `system_uuid` (by default, one of its name) in its boot
        `boot_id`."""
        name = f"{self.name}-{suffix}"[:63]
        born = ([AGENT_TAINT] if tainted else []) + (taints or [])
        labels = {**self.pool, **(labels or {})}
        create_node(
            self.core,
            SimNode(
                name=name,
                labels=labels,
                taints=born,
                kwok=True,
                boot_id=boot_id,
                system_uuid=system_uuid,
            ),
        )
        self.stack.callback(self._delete_node, name)
        return name

    def delete_node(self, name: str) -> None:
        """`kubectl delete node`, waited until the Node is gone (its pods stay bound to the
        name until the pod GC's 40 s grace ends)."""
        delete_node(self.core, name)

    def _delete_node(self, name: str) -> None:
        try:
            self.core.delete_node(name)
        except ApiException as err:
            if err.status != 404:
                raise

    def daemon_set(
        self,
        app: str,
        tolerate: bool = True,
        node_selector: dict[str, str] | None = None,
        max_unavailable: int = 1,
        template: dict[str, Any] | None = None,
        labels: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """A DaemonSet on the test's pool (or `node_selector`), tolerating the agent taint
        (`tolerate`), its pod template spec completed by `template` (affinity, tolerations...),
        the DaemonSet itself labelled `labels`."""
        body = agent_daemon_set(app, node_selector or self.pool, tolerate, max_unavailable)
        spec = body["spec"]["template"]["spec"]
        for key, value in (template or {}).items():
            spec[key] = [*spec.get(key, []), *value] if key == "tolerations" else value
        body["metadata"]["labels"].update(labels or {})
        self.apps.create_namespaced_daemon_set(self.namespace, body)  # type: ignore[arg-type]
        return body

    def pod_of(self, app: str, node: str) -> Any:
        pods: list[Any] = self.core.list_namespaced_pod(
            self.namespace, label_selector=f"app={app}", field_selector=f"spec.nodeName={node}"
        ).items
        live = [p for p in pods if p.metadata.deletion_timestamp is None]
        return live[0] if live else None

    def ready_pod_of(self, app: str, node: str) -> Any:
        def probe() -> Any:
            pod = self.pod_of(app, node)
            ready = pod is not None and any(
                c.type == "Ready" and c.status == "True" for c in pod.status.conditions or ()
            )
            return pod if ready else None

        return wait_until(probe, 60, f"{app}'s pod Ready on {node}")

    def fail(self, pod: Any) -> None:
        """The agent's container stops being ready, as its kubelet reports it."""
        self._set_ready(pod, False)

    def recover(self, pod: Any) -> None:
        self._set_ready(pod, True)

    def _set_ready(self, pod: Any, ready: bool) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = "True" if ready else "False"
        conditions = [
            {"type": kind, "status": status, "lastTransitionTime": now}
            for kind in ("Ready", "ContainersReady")
        ]
        self.core.patch_namespaced_pod_status(
            pod.metadata.name, self.namespace, {"status": {"conditions": conditions}}
        )

    def tainted(self, node: str, taint: tuple[str, str] = AGENT) -> bool:
        return taint in taints_of(self.core, node)

    def wait_tainted(
        self, node: str, on: bool, timeout: float = TIMEOUT, taint: tuple[str, str] = AGENT
    ) -> float:
        """Wait until `taint` (the agent taint) is (`on`) or is not on the node; when,
        monotonic."""
        wait_until(
            lambda: self.tainted(node, taint) == on, timeout, f"taint {taint} {on} on {node}"
        )
        return time.monotonic()

    def stays(self, node: str, on: bool, seconds: float, taint: tuple[str, str] = AGENT) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            assert self.tainted(node, taint) == on, f"taint {taint} changed on {node}"
            time.sleep(0.2)


def agent_daemon_set(
    app: str, node_selector: dict[str, str], tolerate: bool, max_unavailable: int
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "nodeSelector": node_selector,
        "containers": [{"name": "agent", "image": PAUSE_IMAGE}],
    }
    if tolerate:  # as Cilium's agent tolerates its own agent-not-ready taint
        spec["tolerations"] = [{"key": AGENT[0], "operator": "Exists"}]
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": app, "labels": {"app": app}},
        "spec": {
            "selector": {"matchLabels": {"app": app}},
            "updateStrategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": max_unavailable},
            },
            "template": {"metadata": {"labels": {"app": app}}, "spec": spec},
        },
    }


@pytest.fixture
def scene(
    scheduling_control_plane: LocalControlPlane, unique_name: str, tmp_path: Path
) -> Iterator[Scene]:
    """A Scene on the shared scheduling control plane (the DaemonSet controller runs), torn
    down with the test (test modules import it as their `scene` fixture)."""
    with ExitStack() as stack:
        yield Scene(scheduling_control_plane, stack, unique_name, tmp_path)
