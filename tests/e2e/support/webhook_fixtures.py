"""The Node admission webhook registered with a real kube-apiserver, for any e2e test.

The reconciler process serves it (`nodegate reconcile --webhook-port`), makes its own CA and
certificate in the Secret and writes the CA into the MutatingWebhookConfiguration, which is the
one the manifests ship, pointed at `https://127.0.0.1:<port>` instead of the Service. What a
Node is born with is read from the create response itself: the first version of the object.

kube-apiserver runs the MutatingAdmissionWebhook plugin by default (localcluster's
`apiserver_argv` adds NodeRestriction and disables nothing else but, without a signing key,
ServiceAccount); `wait_in_force` proves it is on by a gated canary node. The configuration here
also carries an objectSelector on a test label, which the shipped one does not have, so nodes
of other tests sharing the API server never reach this webhook.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families

from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import SimNode, wait_until
from nodegate.manifests.settings import DeploySettings
from nodegate.manifests.webhook import PATH, mutating_webhook_configuration
from tests.e2e.support.reconciler_process import (
    ReconcilerProcess,
    free_port,
    running_reconciler,
)

SELECTED = "e2e.nodegate.dev/webhook"
"""The label the test configurations select nodes by (their objectSelector)."""
READY_TIMEOUT = 30.0


@dataclass
class Webhook:
    namespace: str
    configuration: str
    port: int
    start: Callable[..., ReconcilerProcess]
    """start(max_untaint_share="1"): a reconciler serving the webhook (stopped when the
    registration ends); a lower share lets its blast-radius guard hold updates."""


def raw_create(core_v1: k8s_client.CoreV1Api, node: SimNode) -> dict[str, Any]:
    """Create the node, selected by the test webhook; the API server's answer as JSON: the
    object's first stored version."""
    body = node.body()
    body["metadata"]["labels"] = {**body["metadata"]["labels"], SELECTED: "yes"}
    response: Any = core_v1.create_node(cast(Any, body), _preload_content=False)
    created: dict[str, Any] = json.loads(response.data)
    return created


def api_server_metric(core_v1: k8s_client.CoreV1Api, metric: str, labels: dict[str, str]) -> float:
    """Sum of kube-apiserver's own samples of `metric` whose labels include `labels`."""
    client = core_v1.api_client
    request = client.param_serialize("GET", "/metrics", auth_settings=["BearerToken"])
    text = client.call_api(*request).read().decode()
    # By family: client_python's parser renames a counter's samples to `<name>_total`, which
    # kube-apiserver's `..._count` counters are not called (Prometheus keeps the name as is).
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == metric
        for sample in family.samples
        if labels.items() <= sample.labels.items()
    )


def taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The node's taints, but for the API server's own `node.kubernetes.io/not-ready`, which
    its TaintNodesByCondition admission plugin adds to every new Node (before webhooks run)."""
    every = (node.get("spec") or {}).get("taints") or []
    return [t for t in every if t["key"] != "node.kubernetes.io/not-ready"]


@contextmanager
def registered_webhook(
    plane: LocalControlPlane,
    rules_ref: str,
    namespace: str,
    log_dir: Path,
    webhook_settings: Mapping[str, Any] | None = None,
) -> Iterator[Webhook]:
    """The shipped configuration (with `webhook_settings`, e.g. a failurePolicy) registered
    for nodes labelled SELECTED, and a namespace for the certificate and records; on exit every
    reconciler started is stopped and the configuration, the selected nodes and the namespace
    are deleted."""
    core_v1 = k8s_client.CoreV1Api(plane.client)
    admission = k8s_client.AdmissionregistrationV1Api(plane.client)
    port = free_port()
    core_v1.create_namespace(k8s_client.V1Namespace(metadata={"name": namespace}))
    core_v1.create_namespaced_secret(
        namespace, k8s_client.V1Secret(metadata={"name": "webhook-tls"}, type="Opaque")
    )
    settings = DeploySettings.model_validate(
        {
            "image": {"repository": "registry.example.com/nodegate"},
            "name": namespace,
            "webhook": dict(webhook_settings or {}),
        }
    )
    configuration = mutating_webhook_configuration(settings, {})
    webhook = configuration["webhooks"][0]
    webhook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{PATH}"}
    webhook["objectSelector"] = {"matchLabels": {SELECTED: "yes"}}
    admission.create_mutating_webhook_configuration(cast(Any, configuration))
    with ExitStack() as stack:

        def start(max_untaint_share: str = "1") -> ReconcilerProcess:
            args = [
                *("--rules-configmap", rules_ref, "--state-namespace", namespace),
                *("--no-leader-elect", "--max-untaint-share", max_untaint_share),
                *("--webhook-port", str(port), "--webhook-host", "127.0.0.1"),
                *("--webhook-configuration", namespace, "--webhook-tls-secret", "webhook-tls"),
            ]
            process: ReconcilerProcess = stack.enter_context(
                running_reconciler(plane.kubeconfig_path, log_dir, *args)
            )
            return process

        try:
            yield Webhook(namespace, namespace, port, start)
        finally:
            admission.delete_mutating_webhook_configuration(namespace)
            listed: Any = core_v1.list_node(
                label_selector=f"{SELECTED}=yes", _preload_content=False
            )
            for node in json.loads(listed.data)["items"]:
                core_v1.delete_node(node["metadata"]["name"])
            core_v1.delete_namespace(namespace)


def gated_canary(
    core_v1: k8s_client.CoreV1Api, name: str, gate: str, labels: dict[str, str] | None = None
) -> bool:
    """Create a canary node; whether it was born with the gate (it is deleted either way)."""
    try:
        created = raw_create(core_v1, SimNode(name=name, labels=labels or {}))
    finally:
        try:
            core_v1.delete_node(name)
        except ApiException as err:
            if err.status != 404:
                raise
    return any(t["key"] == gate for t in taints(created))


def wait_in_force(
    webhook: Webhook,
    core_v1: k8s_client.CoreV1Api,
    canary: str,
    gate: str,
    labels: dict[str, str] | None = None,
) -> float:
    """Wait for the caBundle the reconciler writes and a canary node (`canary-N`, `labels`)
    born with `gate`: the API server calls the webhook. Seconds waited."""
    started = time.monotonic()
    admission = k8s_client.AdmissionregistrationV1Api(core_v1.api_client)

    def ca_bundle() -> bytes | None:
        read: Any = admission.read_mutating_webhook_configuration(
            webhook.configuration, _preload_content=False
        )
        bundle = json.loads(read.data)["webhooks"][0]["clientConfig"].get("caBundle")
        return base64.b64decode(bundle) if bundle else None

    pem = wait_until(ca_bundle, READY_TIMEOUT, "the caBundle written by the reconciler")
    assert pem.startswith(b"-----BEGIN CERTIFICATE-----")
    attempts = iter(range(1000))
    wait_until(
        lambda: gated_canary(core_v1, f"{canary}-{next(attempts)}"[:63], gate, labels),
        READY_TIMEOUT,
        "a canary node born gated (is MutatingAdmissionWebhook on?)",
        interval=0.1,
    )
    return time.monotonic() - started
