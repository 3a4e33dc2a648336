"""The Node admission webhook registered with the real kube-apiserver
(tests/e2e/support/webhook_fixtures.py says how): what a Node is born with, read from the create
response, the failure policies, the latency, and the shipped RBAC."""

from __future__ import annotations

import json
import textwrap
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from nodegate.core.decisions.blast_radius import rules_digest
from nodegate.core.decisions.persisted_labels import (
    RECORD_LABEL,
    RECORD_LABEL_VALUE,
    LabelRecord,
    encode_record,
    record_name,
)
from nodegate.core.rules.loader import RulesDocument
from nodegate.core.rules.model import POOL_LABEL, TRUSTED_POOL_LABEL
from nodegate.core.rules.node_marks import REGISTRATION_SEAL_KEY
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import SimNode, oci_provider_id, wait_until
from nodegate.manifests.build import build_manifests
from nodegate.manifests.settings import DeploySettings
from nodegate.manifests.webhook import PATH, WEBHOOK_NAME
from tests.e2e.support.node_identity import AsNode
from tests.e2e.support.reconciler_fixtures import read_node, wait_for_event, wait_for_taints
from tests.e2e.support.reconciler_process import ReconcilerProcess, free_port, running_reconciler
from tests.e2e.support.shipped_manifests import (
    apply_all_but_the_deployment,
    service_account_kubeconfig,
    service_account_token,
    the_deployment,
)
from tests.e2e.support.webhook_fixtures import (
    READY_TIMEOUT,
    SELECTED,
    Webhook,
    api_server_metric,
    gated_canary,
    raw_create,
    registered_webhook,
    taints,
    wait_in_force,
)
from tests.unit.manifests.support import API_SERVER_METRICS, EXAMPLE_RULES, ON_CONFIGMAP

GATE = {"key": "startup.example.com/initializing", "value": "wait", "effect": "NoSchedule"}
FOREIGN = {
    "key": "node.cloudprovider.kubernetes.io/uninitialized",
    "value": "true",
    "effect": "NoSchedule",
}
OWNER = "persist.example.com/owner"
RULES = "apiVersion: nodegate.dev/v1\nkind: NodeRules\n" + textwrap.dedent(
    f"""\
    startupGates:
      - name: warmup
        match:
          labels: {{{SELECTED}: "yes"}}
          expressions: [{{key: kubernetes.azure.com/mode, operator: NotIn, values: [system]}}]
        taint: {{key: {GATE["key"]}, value: {GATE["value"]}, effect: {GATE["effect"]}}}
        readyWhen: {{annotation: example.com/ready=true}}
    persistentLabels:
      prefixes: ["persist.example.com/"]
    nodePools:
      - {{name: payments, provider: oke, size: 1}}
    """
)


@pytest.fixture
def webhook(
    control_plane: LocalControlPlane,
    rules_configmap: Callable[..., str],
    unique_name: str,
    tmp_path: Path,
) -> Iterator[Webhook]:
    ref = rules_configmap(RULES)
    with registered_webhook(control_plane, ref, unique_name[:63], tmp_path) as hook:
        yield hook


@pytest.fixture
def webhook_ready(
    webhook: Webhook, core_v1: k8s_client.CoreV1Api, unique_name: str
) -> Iterator[tuple[Webhook, ReconcilerProcess]]:
    """The reconciler serving, its CA in the configuration, and the API server calling it."""
    started = time.monotonic()
    process = webhook.start()
    wait_in_force(webhook, core_v1, f"{unique_name}-canary", GATE["key"])
    print(f"webhook in force {time.monotonic() - started:.2f}s after the reconciler started")
    yield webhook, process
    print(process.logs()[-3000:])


def put_record(
    core_v1: k8s_client.CoreV1Api, namespace: str, provider_id: str, labels: dict[str, str]
) -> None:
    """The record a deleted node left behind (as the reconciler writes it)."""
    now = datetime.now(UTC)
    record = LabelRecord(provider_id, "uid-of-the-old-node", labels, now, ("old",), now)
    body = k8s_client.V1ConfigMap(
        metadata={"name": record_name(provider_id), "labels": {RECORD_LABEL: RECORD_LABEL_VALUE}},
        data=encode_record(record),
    )
    core_v1.create_namespaced_config_map(namespace, body)


def test_a_node_created_without_taints_is_born_with_its_gate_and_persisted_labels(
    webhook_ready: tuple[Webhook, ReconcilerProcess],
    core_v1: k8s_client.CoreV1Api,
    unique_name: str,
) -> None:
    webhook, _ = webhook_ready
    provider_id = oci_provider_id(f"{unique_name}-a")
    put_record(core_v1, webhook.namespace, provider_id, {OWNER: "alice"})
    node = SimNode(
        name=f"{unique_name}-a"[:63],
        provider_id=provider_id,
        labels={"kubernetes.azure.com/mode": "user"},
    )

    started = time.monotonic()
    created = raw_create(core_v1, node)
    elapsed = time.monotonic() - started

    assert taints(created) == [GATE]
    assert created["metadata"]["labels"][OWNER] == "alice"
    print(f"create with the webhook's patch answered in {elapsed * 1000:.0f} ms")


def test_a_node_registering_with_taints_and_labels_keeps_every_one(
    webhook_ready: tuple[Webhook, ReconcilerProcess],
    core_v1: k8s_client.CoreV1Api,
    unique_name: str,
) -> None:
    webhook, _ = webhook_ready
    provider_id = oci_provider_id(f"{unique_name}-b")
    put_record(
        core_v1, webhook.namespace, provider_id, {OWNER: "alice", "persist.example.com/x": "1"}
    )
    node = SimNode(
        name=f"{unique_name}-b"[:63],
        provider_id=provider_id,
        labels={OWNER: "bob"},
        taints=[FOREIGN],
    )

    created = raw_create(core_v1, node)

    assert taints(created) == [FOREIGN, GATE]
    labels = created["metadata"]["labels"]
    assert labels[OWNER] == "bob" and labels["persist.example.com/x"] == "1"
    assert all(labels[k] == v for k, v in node.body()["metadata"]["labels"].items())


def test_a_node_the_gates_match_excludes_gets_nothing(
    webhook_ready: tuple[Webhook, ReconcilerProcess],
    core_v1: k8s_client.CoreV1Api,
    unique_name: str,
) -> None:
    node = SimNode(name=f"{unique_name}-sys"[:63], labels={"kubernetes.azure.com/mode": "system"})
    created = raw_create(core_v1, node)

    assert taints(created) == []
    assert created["metadata"]["labels"] == {**node.body()["metadata"]["labels"], SELECTED: "yes"}


def test_with_the_webhook_stopped_nodes_still_register_unless_the_policy_is_fail(
    webhook_ready: tuple[Webhook, ReconcilerProcess],
    core_v1: k8s_client.CoreV1Api,
    unique_name: str,
) -> None:
    webhook, process = webhook_ready
    assert process.stop() == 0
    # What the alerts read (manifests/observability.py API_SERVER_METRICS): only the API server
    # sees these calls fail; the reconciler is not there to count them.
    failed_open, refused = API_SERVER_METRICS
    refused_labels = {"name": WEBHOOK_NAME, "error_type": "calling_webhook_error"}
    open_before = api_server_metric(core_v1, failed_open, {"name": WEBHOOK_NAME})
    refused_before = api_server_metric(core_v1, refused, refused_labels)

    started = time.monotonic()
    created = raw_create(core_v1, SimNode(name=f"{unique_name}-down"[:63]))
    elapsed = time.monotonic() - started
    assert taints(created) == []  # born ungated: what Ignore trades for availability
    print(f"create with the webhook down (Ignore) answered in {elapsed * 1000:.0f} ms")
    assert api_server_metric(core_v1, failed_open, {"name": WEBHOOK_NAME}) == open_before + 1

    admission = k8s_client.AdmissionregistrationV1Api(core_v1.api_client)
    admission.patch_mutating_webhook_configuration(
        webhook.configuration,
        [{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Fail"}],
    )
    attempts = iter(range(1000))

    def refusal() -> str | None:
        name = f"{unique_name}-fail-{next(attempts)}"[:63]
        try:
            raw_create(core_v1, SimNode(name=name))
        except ApiException as err:
            return str(err.body)
        core_v1.delete_node(name)
        return None

    message = wait_until(refusal, READY_TIMEOUT, "node creation refused under Fail")
    assert "failed calling webhook" in message and "nodes.nodegate.dev" in message
    assert api_server_metric(core_v1, refused, refused_labels) > refused_before


def test_the_webhook_answers_well_inside_its_timeout(
    webhook_ready: tuple[Webhook, ReconcilerProcess],
    core_v1: k8s_client.CoreV1Api,
    unique_name: str,
) -> None:
    """Node creates through the webhook (a record lookup each) against creates the webhook's
    objectSelector skips; printed, and bounded by half the 2 s timeoutSeconds."""

    def create_seconds(name: str, selected: bool) -> float:
        body = SimNode(name=name[:63]).body()
        if selected:
            body["metadata"]["labels"][SELECTED] = "yes"
        started = time.monotonic()
        core_v1.create_node(cast(Any, body), _preload_content=False)
        elapsed = time.monotonic() - started
        core_v1.delete_node(name[:63])
        return elapsed

    through = sorted(create_seconds(f"{unique_name}-w{i}", True) for i in range(15))
    around = sorted(create_seconds(f"{unique_name}-p{i}", False) for i in range(15))
    print(
        f"node create, median/max of 15: through the webhook {through[7] * 1000:.0f}/"
        f"{through[-1] * 1000:.0f} ms, without it {around[7] * 1000:.0f}/{around[-1] * 1000:.0f} ms"
    )
    assert through[7] < 1.0


def test_the_shipped_rbac_is_enough_for_the_webhook_and_no_more(
    control_plane: LocalControlPlane,
    api_client: k8s_client.ApiClient,
    core_v1: k8s_client.CoreV1Api,
    unique_name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The manifests' objects with `webhook: {}` applied (the configuration pointed at
    127.0.0.1 and limited to this test's nodes), the Deployment's command run under its
    ServiceAccount's token: certificate issued into the Secret, caBundle patched, a node born
    gated with its record's labels, and nothing refused on the way."""
    name = f"ng-rbac-{unique_name[-6:]}"
    settings = DeploySettings.model_validate(
        {
            "image": {"repository": "registry.example.com/nodegate"},
            "namespace": name,
            "name": name,
            "webhook": {},
            **ON_CONFIGMAP,
        }
    )
    document = RulesDocument.parse(EXAMPLE_RULES.read_text(encoding="utf-8"), "rules.yaml")
    objects = build_manifests(document, settings)
    port = free_port()
    configuration = next(o for o in objects if o["kind"] == "MutatingWebhookConfiguration")
    hook = configuration["webhooks"][0]
    hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{PATH}"}
    hook["objectSelector"] = {"matchLabels": {SELECTED: "yes"}}
    admission = k8s_client.AdmissionregistrationV1Api(api_client)
    rbac = k8s_client.RbacAuthorizationV1Api(api_client)
    try:
        apply_all_but_the_deployment(api_client, objects)
        token = service_account_token(core_v1, name, name)
        kubeconfig = service_account_kubeconfig(control_plane, token, tmp_path / "sa")
        container = the_deployment(objects)["spec"]["template"]["spec"]["containers"][0]
        args = [a for a in container["args"] if not a.startswith(("--http-port", "--webhook-port"))]
        args += ["--webhook-port", str(port), "--webhook-host", "127.0.0.1"]
        monkeypatch.setenv("POD_NAMESPACE", name)
        monkeypatch.setenv("POD_NAME", f"{name}-pod")
        provider_id = oci_provider_id(f"{unique_name}-rbac")
        put_record(core_v1, name, provider_id, {"persist.example.com/team": "ml"})
        with running_reconciler(kubeconfig, tmp_path, *args) as process:
            attempts = iter(range(1000))
            wait_until(
                lambda: gated_canary(
                    core_v1,
                    f"{unique_name}-c{next(attempts)}"[:63],
                    document.rules.startup_gates[0].taint.key,
                    {"example.com/accelerator": "nvidia"},
                ),
                READY_TIMEOUT,
                "a canary node born gated under the shipped RBAC",
                interval=0.1,
            )
            created = raw_create(
                core_v1,
                SimNode(
                    name=f"{unique_name}-rbac"[:63],
                    provider_id=provider_id,
                    labels={"example.com/accelerator": "nvidia"},
                ),
            )
            assert created["metadata"]["labels"]["persist.example.com/team"] == "ml"
            # (Not "403": log timestamps hold milliseconds such as ".403".)
            assert "Forbidden" not in process.logs()
            assert process.metric("nodegate_webhook_record_lookups_total", result="found") >= 1
            secret = core_v1.read_namespaced_secret(f"{name}-webhook-tls", name)
            assert set(secret.data or {}) >= {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    finally:
        admission.delete_mutating_webhook_configuration(name)
        rbac.delete_cluster_role_binding(name)
        rbac.delete_cluster_role(name)
        core_v1.delete_namespace(name)


def test_a_kubelet_registering_in_a_pool_is_sealed_and_cannot_change_the_pool_after(
    webhook_ready: tuple[Webhook, ReconcilerProcess],
    as_node: AsNode,
    core_v1: k8s_client.CoreV1Api,
    unique_name: str,
) -> None:
    """The webhook seals the claimed pool in a taint at creation (NodeRestriction re-checks
    labels after webhooks, so not a label), the reconciler records it in the label no kubelet
    may set and lifts the seal; from then on the kubelet can change neither."""
    name = f"{unique_name}-kubelet"[:63]
    kubelet = as_node(name)
    node = SimNode(name=name, labels={POOL_LABEL: "payments", SELECTED: "yes"})
    response: Any = kubelet.create_node(cast(Any, node.body()), _preload_content=False)
    seal = {"key": REGISTRATION_SEAL_KEY, "value": "payments", "effect": "PreferNoSchedule"}
    assert seal in taints(json.loads(response.data))

    def recorded() -> dict[str, Any] | None:
        current = read_node(core_v1, name)
        labels = current["metadata"].get("labels") or {}
        unsealed = seal not in taints(current)
        return current if labels.get(TRUSTED_POOL_LABEL) == "payments" and unsealed else None

    wait_until(recorded, READY_TIMEOUT, "the seal recorded as the trusted pool label")
    for change in (
        {"metadata": {"labels": {TRUSTED_POOL_LABEL: "ci"}}},
        {"spec": {"taints": [{**seal, "value": "ci"}]}},
    ):
        with pytest.raises(ApiException) as refused:
            kubelet.patch_node(name, change)
        assert refused.value.status == 403


LATE = {"key": "startup.example.com/late", "value": "wait", "effect": "NoSchedule"}


def held_rules(unique_name: str) -> tuple[str, str]:
    """(in force, held): the held update drops a label taint from this test's node (the guard,
    at share 0, holds it) and adds a gate `late`."""
    warmup = f"""\
    startupGates:
      - name: warmup
        match: {{labels: {{{SELECTED}: "yes", example.com/kind: canary}}}}
        taint: {{key: {GATE["key"]}, value: wait, effect: NoSchedule}}
        readyWhen: {{annotation: example.com/ready=true}}
    """
    late = f"""\
      - name: late
        match: {{labels: {{{SELECTED}: "yes", example.com/kind: late}}}}
        taint: {{key: {LATE["key"]}, value: wait, effect: NoSchedule}}
        readyWhen: {{annotation: example.com/ready=true}}
    """
    label_taint = f"""\
    labelTaints:
      - name: held
        match: {{labels: {{example.com/held: {unique_name[:63]}}}}}
        taint: {{key: example.com/held, value: x, effect: NoSchedule}}
        nodeMayLift: true
    """
    header = "apiVersion: nodegate.dev/v1\nkind: NodeRules\n"
    in_force = header + textwrap.dedent(label_taint) + textwrap.dedent(warmup)
    held = header + textwrap.dedent(warmup.rstrip(" ") + late)
    return in_force, held


def test_a_held_update_births_no_node_with_its_gate_and_a_revert_clears_the_hold(
    control_plane: LocalControlPlane,
    core_v1: k8s_client.CoreV1Api,
    rules_configmap: Callable[..., str],
    make_node: Callable[..., str],
    unique_name: str,
    tmp_path: Path,
) -> None:
    in_force, held = held_rules(unique_name)
    ref = rules_configmap(in_force)
    configmap = ref.split("/")[1]
    with registered_webhook(control_plane, ref, unique_name[:63], tmp_path) as hook:
        process = hook.start(max_untaint_share="0")
        wait_in_force(
            hook, core_v1, f"{unique_name}-c", GATE["key"], {"example.com/kind": "canary"}
        )
        owner = make_node(labels={"example.com/held": unique_name[:63]})
        wait_for_taints(core_v1, owner, lambda t: ("example.com/held", "NoSchedule") in t)

        rules_configmap(held)
        wait_for_event(core_v1, configmap, "RulesHeld")
        assert process.metric("nodegate_rules_held") == 1
        born = raw_create(core_v1, SimNode(f"{unique_name}-late"[:63], labels=LATE_LABELS))
        assert LATE not in taints(born)  # the held update's gate: no rule in force owns it

        rules_configmap(in_force)  # reverted instead of confirmed
        [cleared] = wait_for_event(core_v1, configmap, "RulesHoldCleared")
        assert rules_digest(held) in (cleared.message or "")
        assert process.metric("nodegate_rules_held") == 0

        rules_configmap(held)  # offered again: held again, and said so again
        wait_until(
            lambda: sum(e.count or 1 for e in wait_for_event(core_v1, configmap, "RulesHeld")) == 2,
            READY_TIMEOUT,
            "a second RulesHeld",
        )
        assert process.metric("nodegate_rules_held") == 1

        rules_configmap(held, annotations={"nodegate.dev/confirm-rules": rules_digest(held)})
        attempts = iter(range(1000))
        wait_until(
            lambda: gated_canary(
                core_v1, f"{unique_name}-l{next(attempts)}"[:63], LATE["key"], LATE_LABELS
            ),
            READY_TIMEOUT,
            "confirmed: nodes born with the late gate",
            interval=0.1,
        )
        assert process.metric("nodegate_rules_held") == 0


LATE_LABELS = {"example.com/kind": "late"}
CANARY_LABELS = {"example.com/kind": "canary"}
