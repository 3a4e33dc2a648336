"""The API server's own flow control (API Priority and Fairness) is the brake on a write storm,
not a client-side limit: its 429s are honoured and counted, and every node still gets its taint.

The reconciler runs as a plain user (not `system:masters`, which APF exempts), bound to
cluster-admin by RBAC and matched by a FlowSchema whose priority level has a few seats, borrows
none and rejects what does not fit: the real kube-apiserver answers 429 with Retry-After.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client

from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import wait_until
from nodegate.reconciler.kit.client import load_api_client
from tests.e2e.support.reconciler_fixtures import HEADER, alone, taints_of
from tests.e2e.support.reconciler_process import running_reconciler

NODES = 60
STORM_LABEL = "e2e.nodegate.dev/apf-storm"
TAINT_KEY = "e2e.nodegate.dev/apf-storm"
FLOW_CONTROL_HEADER = "X-Kubernetes-PF-FlowSchema-UID"


def storm_rules(value: str) -> str:
    return HEADER + (
        "labelTaints:\n"
        "  - name: apf-storm\n"
        f"    match: {{labels: {{{STORM_LABEL}: {value}}}}}\n"
        f"    taint: {{key: {TAINT_KEY}, value: {value}, effect: NoSchedule}}\n"
        "    nodeMayLift: true\n"
    )


@pytest.fixture
def throttled_user(
    control_plane: LocalControlPlane, unique_name: str
) -> Iterator[tuple[str, Path]]:
    """A user with cluster-admin rights whose requests APF squeezes into three seats."""
    user = f"nodegate-{unique_name}"[:60]
    rbac = k8s_client.RbacAuthorizationV1Api(control_plane.client)
    flow = k8s_client.FlowcontrolApiserverV1Api(control_plane.client)
    binding: Any = {
        "metadata": {"name": user},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "cluster-admin",
        },
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    rbac.create_cluster_role_binding(binding)
    level: Any = {
        "metadata": {"name": user},
        "spec": {
            "type": "Limited",
            "limited": {
                "nominalConcurrencyShares": 1,
                "lendablePercent": 0,
                "borrowingLimitPercent": 0,
                "limitResponse": {"type": "Reject"},
            },
        },
    }
    flow.create_priority_level_configuration(level)
    schema_body: Any = {
        "metadata": {"name": user},
        "spec": {
            "priorityLevelConfiguration": {"name": user},
            "matchingPrecedence": 50,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [
                {
                    "subjects": [{"kind": "User", "user": {"name": user}}],
                    "resourceRules": [
                        {
                            "verbs": ["*"],
                            "apiGroups": ["*"],
                            "resources": ["*"],
                            "clusterScope": True,
                            "namespaces": ["*"],
                        }
                    ],
                    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                }
            ],
        },
    }
    schema: Any = flow.create_flow_schema(schema_body)
    kubeconfig = control_plane.user_kubeconfig(user)
    try:
        wait_until(
            lambda: classified_by(kubeconfig) == schema.metadata.uid,
            30,
            "the API server to classify the user's requests under the new FlowSchema",
        )
        yield user, kubeconfig
    finally:
        flow.delete_flow_schema(user)
        flow.delete_priority_level_configuration(user)
        rbac.delete_cluster_role_binding(user)


def classified_by(kubeconfig: Path) -> str | None:
    """The FlowSchema the API server put a request of this kubeconfig's user under."""
    api = load_api_client(str(kubeconfig))  # as the reconciler reads its kubeconfig
    try:
        response: Any = k8s_client.CoreV1Api(api).list_namespace(limit=1, _preload_content=False)
        uid: str | None = response.headers.get(FLOW_CONTROL_HEADER)
        return uid
    finally:
        api.close()  # type: ignore[no-untyped-call]  # unannotated in the client


def test_a_write_storm_against_api_priority_and_fairness_is_throttled_counted_and_completes(
    control_plane: LocalControlPlane,
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    rules_configmap: Callable[..., str],
    throttled_user: tuple[str, Path],
    unique_name: str,
    tmp_path: Path,
) -> None:
    _, kubeconfig = throttled_user
    value = unique_name[-40:].strip("-")
    names = [make_node(f"n{i}", labels={STORM_LABEL: value}) for i in range(NODES)]
    ref = rules_configmap(storm_rules(value))
    args = alone(ref)
    with running_reconciler(kubeconfig, tmp_path, *args) as reconciler:
        wait_until(
            lambda: all((TAINT_KEY, "NoSchedule") in taints_of(core_v1, n) for n in names),
            120,
            f"all {NODES} nodes tainted through the throttled priority level",
        )
        throttled = reconciler.metric("nodegate_errors_total", kind="throttled")
        failed = reconciler.metric("nodegate_errors_total", kind="temporary")
    assert throttled > 0, "the API server never answered 429: the test proves nothing"
    assert failed == 0, "a 429 was counted as a failure"
