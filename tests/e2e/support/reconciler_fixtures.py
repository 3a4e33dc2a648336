"""Shared pieces of the reconciler e2e tests: rules, a rules ConfigMap, nodes, one reconciler."""

from __future__ import annotations

import json
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from nodegate.core.decisions.persisted_labels import RECORD_LABEL, record_name
from nodegate.core.objects.status_record import STATUS_CONFIGMAP, decode_status
from nodegate.core.rules.node_marks import OWNED_TAINTS_ANNOTATION
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import SimNode, create_node, wait_until
from tests.e2e.support.reconciler_process import ReconcilerProcess, running_reconciler

HEADER = "apiVersion: nodegate.dev/v1\nkind: NodeRules\n"
RULES = HEADER + textwrap.dedent(
    """\
    labelTaints:
      - name: ci-dedicated
        match: {labels: {example.com/dedicated: ci}}
        taint: {key: example.com/dedicated, value: ci, effect: NoSchedule}
        nodeMayLift: true
    conditionTaints:
      - name: nic-broken
        conditions: [{type: NetworkInterfaceCard, status: "Kaput|Ruined"}]
        taint: {key: example.com/nic-broken, value: "true", effect: NoExecute}
    nodePools:
      - name: ci
        provider: oke
        size: 1
        reconcilerLabels: {node-role.kubernetes.io/ci: ""}
    """
)
TIMEOUT = 20.0
FAST_LEASE = (
    "--lease-duration-seconds",
    "4",
    "--renew-deadline-seconds",
    "3",
    "--retry-period-seconds",
    "1",
)
"""Lease timings that make a failover take seconds, not the defaults' quarter minute."""
RECONCILES = "nodegate_reconcile_duration_seconds_count"
"""One sample per node reconcile, empty plans included: a sync point for "nothing happened"."""

Start = Callable[..., ReconcilerProcess]


def read_node(core_v1: k8s_client.CoreV1Api, name: str) -> dict[str, Any]:
    """The Node as raw JSON, as the reconciler itself reads it."""
    response: Any = core_v1.read_node(name, _preload_content=False)  # urllib3 response
    node: dict[str, Any] = json.loads(response.data)
    return node


def taints_of(core_v1: k8s_client.CoreV1Api, name: str) -> dict[tuple[str, str], dict[str, Any]]:
    taints = read_node(core_v1, name)["spec"].get("taints") or []
    return {(t["key"], t["effect"]): t for t in taints}


def wait_for_taints(
    core_v1: k8s_client.CoreV1Api,
    name: str,
    check: Callable[[dict[tuple[str, str], dict[str, Any]]], bool],
    timeout: float = TIMEOUT,
) -> dict[tuple[str, str], dict[str, Any]]:
    def probe() -> dict[tuple[str, str], dict[str, Any]] | None:
        taints = taints_of(core_v1, name)
        return taints if check(taints) else None

    return wait_until(probe, timeout, f"taints on {name}")


def taints_stay(
    core_v1: k8s_client.CoreV1Api,
    name: str,
    check: Callable[[dict[tuple[str, str], dict[str, Any]]], bool],
    seconds: float,
) -> None:
    """The node's taints pass `check` at every look for `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        taints = taints_of(core_v1, name)
        assert check(taints), f"taints on {name} changed: {sorted(taints)}"
        time.sleep(0.1)


def patch_labels(core_v1: k8s_client.CoreV1Api, name: str, labels: dict[str, str | None]) -> None:
    core_v1.patch_node(
        name, {"metadata": {"labels": labels}}, _content_type="application/merge-patch+json"
    )


def node_events(core_v1: k8s_client.CoreV1Api, name: str) -> list[Any]:
    events = core_v1.list_namespaced_event(
        "default", field_selector=f"involvedObject.kind=Node,involvedObject.name={name}"
    )
    return list(events.items)


def wait_for_event(core_v1: k8s_client.CoreV1Api, object_name: str, reason: str) -> list[Any]:
    """The Events with `reason` about the object called `object_name` (waits for one)."""

    def probe() -> list[Any]:
        listed = core_v1.list_namespaced_event(
            "default", field_selector=f"involvedObject.name={object_name}"
        )
        return [e for e in listed.items if e.reason == reason]

    return wait_until(probe, TIMEOUT, f"{reason} event on {object_name}")


@pytest.fixture
def rules_configmap(
    core_v1: k8s_client.CoreV1Api, unique_name: str
) -> Iterator[Callable[..., str]]:
    """Create or replace the rules ConfigMap; returns its `default/<name>` reference."""
    name = f"rules-{unique_name}"[:63]
    yield configmap_putter(core_v1, name)
    core_v1.delete_namespaced_config_map(name, "default")


def configmap_putter(core_v1: k8s_client.CoreV1Api, name: str) -> Callable[..., str]:
    """put(text, annotations=None): create or replace rules ConfigMap `default/<name>`."""

    def put(text: str, annotations: dict[str, str] | None = None) -> str:
        metadata = {"name": name, "annotations": annotations or {}}
        body = k8s_client.V1ConfigMap(metadata=metadata, data={"rules.yaml": text})
        try:
            core_v1.replace_namespaced_config_map(name, "default", body)
        except ApiException as err:
            if err.status != 404:
                raise
            core_v1.create_namespaced_config_map("default", body)
        return f"default/{name}"

    return put


@pytest.fixture
def make_node(core_v1: k8s_client.CoreV1Api, unique_name: str) -> Iterator[Callable[..., str]]:
    created: list[str] = []

    def make(suffix: str = "n", **kwargs: Any) -> str:
        name = f"{unique_name}-{suffix}"[:63].rstrip("-")
        create_node(core_v1, SimNode(name=name, **kwargs))
        created.append(name)
        return name

    yield make
    for name in created:
        try:
            core_v1.delete_node(name)
        except ApiException as err:
            if err.status != 404:
                raise


def alone(rules_ref: str) -> tuple[str, ...]:
    """One replica on the rules ConfigMap `rules_ref`, no Lease, the share check off: tests
    share one cluster of a few nodes, where any rules edit touches "most" of them."""
    return ("--rules-configmap", rules_ref, "--no-leader-elect", "--max-untaint-share", "1")


@pytest.fixture
def reconciler(
    control_plane: LocalControlPlane,
    rules_configmap: Callable[..., str],
    tmp_path: Path,
) -> Iterator[ReconcilerProcess]:
    ref = rules_configmap(RULES)
    # Tests share one cluster of a few nodes, where any rules edit touches "most" of them: the
    # share check is off here; test_a_truncated_rules_configmap_is_held_until_confirmed and the
    # unit tests cover it (empty rules are held whatever the share).
    with running_reconciler(control_plane.kubeconfig_path, tmp_path, *alone(ref)) as process:
        yield process
    print(process.logs()[-4000:])


@pytest.fixture
def start_reconciler_with(
    control_plane: LocalControlPlane, rules_configmap: Callable[..., str], tmp_path: Path
) -> Iterator[Start]:
    """start(rules_text, *flags): the rules into this test's ConfigMap, and a reconciler on them
    (no leader election, share check off, as `reconciler`); all are stopped at the end."""
    started: list[ReconcilerProcess] = []
    with ExitStack() as stack:

        def start(rules: str, *flags: str) -> ReconcilerProcess:
            ref = rules_configmap(rules)
            args = alone(ref)
            started.append(
                stack.enter_context(
                    running_reconciler(control_plane.kubeconfig_path, tmp_path, *args, *flags)
                )
            )
            return started[-1]

        yield start
    for process in started:
        print(process.logs()[-3000:])


def after_a_reconcile(process: ReconcilerProcess, change: Callable[[], object]) -> None:
    """Make `change` and wait until the reconciler has reconciled a node since (in the plain
    control plane only the test touches nodes, so that node is the one changed)."""
    before = process.metric(RECONCILES)
    change()
    wait_until(lambda: process.metric(RECONCILES) > before, TIMEOUT, "a reconcile")


POKE = {"key": "e2e.nodegate.dev/poke", "effect": "PreferNoSchedule"}
"""A taint no rule names: on and off again, it makes the reconciler plan the node as it stands
(every taint is in its watched view; a label no rule reads is not) and changes no plan."""


def settled(process: ReconcilerProcess, core_v1: k8s_client.CoreV1Api, node: str) -> None:
    """The reconciler has planned `node` as it stands now (a taint no rule names put on and
    taken off, a reconcile after each, an empty queue): the sync point for asserting that
    nothing was written."""
    after_a_reconcile(process, lambda: _poke(core_v1, node, on=True))
    after_a_reconcile(process, lambda: _poke(core_v1, node, on=False))
    wait_until(lambda: process.metric("nodegate_queue_depth") == 0, TIMEOUT, "an empty queue")


def _poke(core_v1: k8s_client.CoreV1Api, node: str, on: bool) -> None:
    """JSON patches that touch only the poke taint, checked against the list as read (a taint
    the reconciler writes meanwhile is never lost: the patch is refused and made again)."""
    for _ in range(10):
        taints = read_node(core_v1, node)["spec"].get("taints") or []
        at = next((i for i, t in enumerate(taints) if t.get("key") == POKE["key"]), None)
        ops: list[dict[str, Any]]
        if on and at is None:
            ops = (
                [{"op": "add", "path": "/spec/taints/-", "value": POKE}]
                if taints
                else [{"op": "add", "path": "/spec/taints", "value": [POKE]}]
            )
        elif not on and at is not None:
            ops = [
                {"op": "test", "path": f"/spec/taints/{at}/key", "value": POKE["key"]},
                {"op": "remove", "path": f"/spec/taints/{at}"},
            ]
        else:
            return
        try:
            core_v1.patch_node(node, ops)
            return
        except ApiException as err:
            if err.status not in (409, 422):
                raise
    raise AssertionError(f"could not {'add' if on else 'remove'} the poke taint on {node}")


def wait_for_claim_released(
    process: ReconcilerProcess, core_v1: k8s_client.CoreV1Api, node: str
) -> None:
    """nodegate's ownership claim (`nodegate.dev/owned-taints`) is gone from `node`, and the
    reconciler has settled there: what it released, it left in place."""
    wait_until(
        lambda: (
            OWNED_TAINTS_ANNOTATION
            not in (read_node(core_v1, node)["metadata"].get("annotations") or {})
        ),
        TIMEOUT,
        "the claim released",
    )
    settled(process, core_v1, node)


def own_namespace(core_v1: k8s_client.CoreV1Api, unique_name: str) -> Iterator[str]:
    """A namespace named after the test, deleted after it (yield from it in a fixture)."""
    namespace = unique_name[:63]
    core_v1.create_namespace(k8s_client.V1Namespace(metadata={"name": namespace}))
    yield namespace
    core_v1.delete_namespace(namespace)


@pytest.fixture
def records_namespace(core_v1: k8s_client.CoreV1Api, unique_name: str) -> Iterator[str]:
    """A namespace of the test's own for persisted-label records (`--state-namespace`)."""
    yield from own_namespace(core_v1, unique_name)


def configmaps(
    core_v1: k8s_client.CoreV1Api, namespace: str, selector: str | None = None
) -> list[dict[str, Any]]:
    response: Any = core_v1.list_namespaced_config_map(
        namespace, label_selector=selector, _preload_content=False
    )
    items: list[dict[str, Any]] = json.loads(response.data)["items"]
    return items


def records(core_v1: k8s_client.CoreV1Api, namespace: str) -> dict[str, dict[str, Any]]:
    return {
        cm["metadata"]["name"]: json.loads((cm.get("data") or {}).get("record.json") or "{}")
        for cm in configmaps(core_v1, namespace, RECORD_LABEL)
    }


def record_of(core_v1: k8s_client.CoreV1Api, namespace: str, key: str) -> dict[str, Any]:
    return records(core_v1, namespace).get(record_name(key)) or {}


def wait_for_record(
    core_v1: k8s_client.CoreV1Api, namespace: str, key: str, check: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    return wait_until(
        lambda: (r := record_of(core_v1, namespace, key)) and check(r) and r,
        TIMEOUT,
        f"record of {key}",
    )


PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


def init_daemonset(
    app: str, node_selector: dict[str, str], gate_key: str, requests: dict[str, str] | None = None
) -> dict[str, Any]:
    """The per-node agent a startup gate waits for: it tolerates the gate, as an init or CNI
    agent does, so it runs on gated nodes (kwok runs its pod; the image is never pulled)."""
    container: dict[str, Any] = {"name": "init", "image": PAUSE_IMAGE}
    if requests is not None:
        container["resources"] = {"requests": requests}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": app},
        "spec": {
            "selector": {"matchLabels": {"app": app}},
            "template": {
                "metadata": {"labels": {"app": app}},
                "spec": {
                    "nodeSelector": node_selector,
                    "tolerations": [{"key": gate_key, "operator": "Exists"}],
                    "containers": [container],
                },
            },
        },
    }


# --- a reconciler installation in a namespace of the test's own (tests/e2e/test_restart*.py) ---


def put_rules_in(core_v1: k8s_client.CoreV1Api, namespace: str, text: str) -> None:
    """Create or replace the rules ConfigMap `<namespace>/rules`."""
    body = k8s_client.V1ConfigMap(metadata={"name": "rules"}, data={"rules.yaml": text})
    try:
        core_v1.replace_namespaced_config_map("rules", namespace, body)
    except ApiException as err:
        if err.status != 404:
            raise
        core_v1.create_namespaced_config_map(namespace, body)


def status_in(core_v1: k8s_client.CoreV1Api, namespace: str) -> tuple[int, str | None, str | None]:
    """The status record's generation, digest in force and held digest (0, None, None before
    the first is written)."""
    try:
        raw = core_v1.read_namespaced_config_map(STATUS_CONFIGMAP, namespace)
    except ApiException as err:
        if err.status == 404:
            return 0, None, None
        raise
    status, _ = decode_status(raw.data)
    return status.generation, status.digest, status.held.digest if status.held else None


def gate_init_pod(
    core_v1: k8s_client.CoreV1Api,
    stack: ExitStack,
    node: str,
    app: str,
    gate_key: str,
    name: str | None = None,
) -> str:
    """An init pod of `app` bound to `node` (named `name`, else after the node), tolerating its
    gate; deleted when `stack` closes."""
    pod = name or f"init-{node}"[:63]
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod, "labels": {"app": app}},
        "spec": {
            "nodeName": node,
            "tolerations": [{"key": gate_key, "operator": "Exists"}],
            "containers": [{"name": "init", "image": PAUSE_IMAGE}],
        },
    }
    core_v1.create_namespaced_pod("default", body)  # type: ignore[arg-type]
    stack.callback(core_v1.delete_namespaced_pod, pod, "default", grace_period_seconds=0)
    return pod
