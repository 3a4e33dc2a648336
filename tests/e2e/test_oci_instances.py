"""OCI instance state as node conditions, end to end: the reconciler (its own process, the real
`oci` SDK) polls a local HTTPS Compute API that checks every request's signature
(tests/unit/reconciler/nodes/oci_compute_server.py), writes its conditions on Nodes of the real
API server, and the OKE recipe's rules act on them through the eviction breaker
(docs/migrating.md)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from kubernetes import client as k8s_client

from nodegate.core.rules.loader import RulesDocument
from nodegate.core.rules.node_marks import MAINTENANCE_REBOOT_DUE, TERMINATING
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import set_node_condition, wait_until
from nodegate.manifests.build import build_manifests
from nodegate.manifests.settings import DeploySettings
from tests.e2e.support.oci_scene import COMPARTMENT, oci_flags, oci_node
from tests.e2e.support.reconciler_fixtures import (
    HEADER,
    TIMEOUT,
    Start,
    read_node,
    taints_of,
    wait_for_event,
    wait_for_taints,
)
from tests.e2e.support.reconciler_process import ReconcilerProcess, running_reconciler
from tests.e2e.support.shipped_manifests import (
    apply_all_but_the_deployment,
    service_account_kubeconfig,
    service_account_token,
    the_deployment,
)
from tests.unit.manifests.support import ON_CONFIGMAP
from tests.unit.reconciler.nodes.oci_compute_server import OciComputeServer, instance, instance_ocid

OUT_OF_SERVICE = ("node.kubernetes.io/out-of-service", "NoExecute")
MAINTENANCE = ("example.com/maintenance-due", "NoSchedule")
OKE_RULES = HEADER + (
    "evictionBudget: {window: 10m, cluster: {maxNodes: 1}}\n"
    "labelTaints:\n"
    "  - name: dedicated\n"
    "    match: {labels: {example.com/dedicated: ci}}\n"
    "    taint: {key: example.com/dedicated, value: ci, effect: NoSchedule}\n"
    "    nodeMayLift: true\n"
    "conditionTaints:\n"
    "  - name: oci-terminating\n"
    "    conditions:\n"
    '      - {type: OCIInstanceTerminating, status: "True"}\n'
    "      - {type: Ready, status: False|Unknown}\n"
    "    taint: {key: node.kubernetes.io/out-of-service, value: nodeshutdown, effect: NoExecute}\n"
    "  - name: oci-maintenance\n"
    '    conditions: [{type: OCIMaintenanceRebootDue, status: "True"}]\n'
    "    taint: {key: example.com/maintenance-due, effect: NoSchedule}\n"
)


@pytest.fixture
def oci_server(tmp_path: Path) -> Iterator[OciComputeServer]:
    with OciComputeServer(tmp_path) as server:
        server.put(COMPARTMENT)
        yield server


def condition(core_v1: k8s_client.CoreV1Api, name: str, kind: str) -> dict[str, str] | None:
    found = read_node(core_v1, name)["status"].get("conditions") or []
    return next((c for c in found if c["type"] == kind), None)


def wait_for_condition(
    core_v1: k8s_client.CoreV1Api, name: str, kind: str, status: str
) -> dict[str, str]:
    def probe() -> dict[str, str] | None:
        found = condition(core_v1, name, kind)
        return found if found is not None and found["status"] == status else None

    return wait_until(probe, TIMEOUT, f"{kind}={status} on {name}")


def not_ready(core_v1: k8s_client.CoreV1Api, name: str) -> None:
    """What the node lifecycle controller writes once the instance's kubelet stops."""
    set_node_condition(
        core_v1, name, condition_type="Ready", status="Unknown", reason="NodeStatusUnknown"
    )


def test_terminating_instances_are_taken_out_of_service_through_the_eviction_breaker(
    start_reconciler_with: Start,
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    oci_server: OciComputeServer,
    unique_name: str,
) -> None:
    first, first_ocid = oci_node(make_node, "a")
    second, second_ocid = oci_node(make_node, "b")
    for name in (first, second):
        not_ready(core_v1, name)
    reconciler = start_reconciler_with(OKE_RULES, *oci_flags(oci_server))
    oci_server.put(COMPARTMENT, instance(first_ocid, "TERMINATING"), instance(second_ocid))
    seen = wait_for_condition(core_v1, first, TERMINATING, "True")
    assert seen["reason"] == "InstanceTerminating" and first_ocid in seen["message"]
    taint = wait_for_taints(core_v1, first, lambda t: OUT_OF_SERVICE in t)[OUT_OF_SERVICE]
    assert taint["value"] == "nodeshutdown" and taint.get("timeAdded")
    assert condition(core_v1, second, TERMINATING) is None  # RUNNING: nothing to write

    # The second preemption: the breaker's budget (one node per window) is spent.
    oci_server.put(
        COMPARTMENT, instance(first_ocid, "TERMINATED"), instance(second_ocid, "TERMINATING")
    )
    wait_for_condition(core_v1, second, TERMINATING, "True")
    wait_for_event(core_v1, f"rules-{unique_name}"[:63], "EvictionBudgetSpent")
    assert OUT_OF_SERVICE not in taints_of(core_v1, second)
    # a: TERMINATING, then TERMINATED (the reason changes); b: TERMINATING.
    wait_until(  # each counted once its PATCH returned: maybe after the test saw it
        lambda: reconciler.metric("nodegate_oci_condition_writes_total", status="True") == 3,
        TIMEOUT,
        "three condition writes counted",
    )
    assert all(seen.verified for seen in oci_server.requests())


def test_a_maintenance_reboot_is_a_condition_with_its_time_and_clears_when_done(
    start_reconciler_with: Start,
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    oci_server: OciComputeServer,
) -> None:
    name, ocid = oci_node(make_node, "m")
    start_reconciler_with(OKE_RULES, *oci_flags(oci_server))
    due = datetime(2026, 12, 24, 2, 0, tzinfo=UTC)
    oci_server.put(COMPARTMENT, instance(ocid, maintenance_due=due))
    seen = wait_for_condition(core_v1, name, MAINTENANCE_REBOOT_DUE, "True")
    assert "2026-12-24T02:00:00Z" in seen["message"]
    wait_for_taints(core_v1, name, lambda t: MAINTENANCE in t)

    oci_server.put(COMPARTMENT, instance(ocid))  # rebooted: nothing due any more
    cleared = wait_for_condition(core_v1, name, MAINTENANCE_REBOOT_DUE, "False")
    assert cleared["reason"] == "NoMaintenanceRebootScheduled"
    wait_for_taints(core_v1, name, lambda t: MAINTENANCE not in t)


def test_instances_are_found_across_pages(
    start_reconciler_with: Start,
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    oci_server: OciComputeServer,
) -> None:
    name, ocid = oci_node(make_node, "p")
    others = [instance(instance_ocid(f"other{i}")) for i in range(4)]
    oci_server.put(COMPARTMENT, *others, instance(ocid, "STOPPED"))  # the last of 3 pages
    start_reconciler_with(OKE_RULES, *oci_flags(oci_server, "--oci-page-size", "2"))
    wait_for_condition(core_v1, name, "OCIInstanceStopped", "True")
    pages = {seen.query.get("page") for seen in oci_server.requests(200)}
    assert len(pages) == 3


def test_throttling_and_a_bad_key_are_reported_counted_retried_and_block_no_node_work(
    start_reconciler_with: Start,
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    oci_server: OciComputeServer,
) -> None:
    name, ocid = oci_node(make_node, "t")
    oci_server.put(COMPARTMENT, instance(ocid, "TERMINATING"))

    # A key OCI does not know: every call is refused (401), and labels still become taints.
    wrong = oci_server.api_key_config(
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    refused = start_reconciler_with(OKE_RULES, *oci_flags(oci_server, config=wrong))
    wait_until(
        lambda: refused.metric("nodegate_oci_errors_total", kind="auth") >= 2, TIMEOUT, "401s"
    )
    ci = make_node("ci", labels={"example.com/dedicated": "ci"})
    wait_for_taints(core_v1, ci, lambda t: ("example.com/dedicated", "NoSchedule") in t)
    assert condition(core_v1, name, TERMINATING) is None
    assert refused.logs().count("OCI ListInstances failed") == 1  # said once
    refused.stop()

    # Throttled three times, then answered: the condition arrives after the backoff.
    oci_server.fail_next(429, "TooManyRequests", times=3)
    throttled = start_reconciler_with(OKE_RULES, *oci_flags(oci_server))
    wait_for_condition(core_v1, name, TERMINATING, "True")
    assert throttled.metric("nodegate_oci_errors_total", kind="throttled") == 3
    assert throttled.metric("nodegate_oci_list_calls_total", outcome="throttled") == 3
    assert "answers again" in throttled.logs()


def test_a_node_faking_or_erasing_its_own_condition_is_set_back(
    start_reconciler_with: Start,
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    oci_server: OciComputeServer,
) -> None:
    liar, liar_ocid = oci_node(make_node, "l")
    doomed, doomed_ocid = oci_node(make_node, "d")
    oci_server.put(COMPARTMENT, instance(liar_ocid), instance(doomed_ocid, "TERMINATING"))
    # One poll an hour: what follows is corrected on the node's own change, not by a poll.
    reconciler = start_reconciler_with(
        OKE_RULES, *oci_flags(oci_server, "--oci-poll-seconds", "3600")
    )
    wait_for_condition(core_v1, doomed, TERMINATING, "True")
    calls = reconciler.metric("nodegate_oci_list_calls_total")
    # Each kubelet writes its own status, as NodeRestriction allows.
    set_node_condition(core_v1, liar, condition_type=TERMINATING, status="True", reason="Fake")
    set_node_condition(core_v1, doomed, condition_type=TERMINATING, status="False", reason="Lie")
    wait_for_condition(core_v1, liar, TERMINATING, "False")
    wait_for_condition(core_v1, doomed, TERMINATING, "True")
    assert reconciler.metric("nodegate_oci_list_calls_total") == calls  # no OCI call for it


def test_an_oci_client_that_cannot_be_set_up_is_said_and_takes_no_node_work_down(
    start_reconciler_with: Start,
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    oci_server: OciComputeServer,
    tmp_path: Path,
) -> None:
    missing = tmp_path / "no-such-oci-config"
    reconciler = start_reconciler_with(OKE_RULES, *oci_flags(oci_server, config=missing))
    wait_until(
        lambda: reconciler.metric("nodegate_oci_errors_total", kind="setup") >= 2,
        TIMEOUT,
        "setup retried",
    )
    ci = make_node("ci", labels={"example.com/dedicated": "ci"})
    wait_for_taints(core_v1, ci, lambda t: ("example.com/dedicated", "NoSchedule") in t)
    assert reconciler.get("/healthz")[0] == 200
    assert reconciler.logs().count("OCI client could not be set up") == 1


def test_only_the_leader_polls_oci_and_a_new_leader_takes_over(
    control_plane: LocalControlPlane,
    rules_configmap: Callable[[str], str],
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    oci_server: OciComputeServer,
    unique_name: str,
    tmp_path: Path,
) -> None:
    name, ocid = oci_node(make_node, "h")
    oci_server.put(COMPARTMENT, instance(ocid, "STOPPED"))
    ref = rules_configmap(OKE_RULES)
    lease = ("--lease-namespace", "default", "--lease-name", f"lease-{unique_name}"[:63])
    timing = ("--lease-duration-seconds", "4", "--renew-deadline-seconds", "3")
    args = ("--rules-configmap", ref, "--max-untaint-share", "1", *lease, *timing)

    def replica() -> AbstractContextManager[ReconcilerProcess]:
        flags = (*args, "--retry-period-seconds", "1", *oci_flags(oci_server))
        return running_reconciler(control_plane.kubeconfig_path, tmp_path, *flags)

    calls = "nodegate_oci_list_calls_total"
    with replica() as leader:
        wait_until(lambda: leader.metric("nodegate_is_leader") == 1, TIMEOUT, "a leader")
        wait_for_condition(core_v1, name, "OCIInstanceStopped", "True")
        with replica() as standby:
            time.sleep(3)  # three polls' worth
            # The leader polls every second (late, on a loaded machine): its third poll is
            # waited for, the standby's silence is judged over the window that took.
            wait_until(lambda: leader.metric(calls) >= 3, TIMEOUT, "the leader's third poll")
            assert standby.metric("nodegate_is_leader") == 0
            assert standby.metric(calls) == 0
            leader.stop()  # a clean stop hands the Lease back
            wait_until(lambda: standby.metric("nodegate_is_leader") == 1, TIMEOUT, "takeover")
            oci_server.put(COMPARTMENT, instance(ocid))
            wait_for_condition(core_v1, name, "OCIInstanceStopped", "False")
            assert standby.metric(calls) >= 1


def test_the_shipped_rbac_and_args_are_enough_to_write_oci_conditions(
    control_plane: LocalControlPlane,
    api_client: k8s_client.ApiClient,
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    oci_server: OciComputeServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An installation of its own (the ClusterRole is cluster-wide; test_deploy_manifests has
    # the default one, without OCI conditions and so without nodes/status).
    settings = DeploySettings.model_validate(
        {
            "image": {"repository": "registry.example.com/nodegate"},
            "namespace": "nodegate-oci",
            "name": "nodegate-oci",
            "oci": {"compartments": COMPARTMENT, "auth": "instance_principal"},
            **ON_CONFIGMAP,
        }
    )
    objects = build_manifests(RulesDocument.parse(OKE_RULES, "rules.yaml"), settings)
    apply_all_but_the_deployment(api_client, objects)
    token = service_account_token(core_v1, "nodegate-oci", "nodegate-oci")
    kubeconfig = service_account_kubeconfig(control_plane, token, tmp_path / "sa")
    container = the_deployment(objects)["spec"]["template"]["spec"]["containers"][0]
    args = [a for a in container["args"] if not a.startswith("--http-port")]
    assert f"--oci-compartments={COMPARTMENT}" in args
    monkeypatch.setenv("POD_NAMESPACE", "nodegate-oci")
    monkeypatch.setenv("POD_NAME", "nodegate-oci-test")
    name, ocid = oci_node(make_node, "r")
    oci_server.put(COMPARTMENT, instance(ocid, "TERMINATING"))
    # The shipped args, with the test server and its key in place of the instance's principal
    # (the later flag wins).
    with running_reconciler(kubeconfig, tmp_path, *args, *oci_flags(oci_server)) as process:
        wait_for_condition(core_v1, name, TERMINATING, "True")
        assert "Forbidden" not in process.logs()
