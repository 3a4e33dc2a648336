"""One writer, enforced where writes land: a paused leader's write that reaches the API server
after a standby took over is refused by the fence policy the manifest builder ships.

Each test installs the builder's objects under its own names (namespace, ServiceAccount, RBAC,
policy, binding, Lease) and runs the Deployment's command as local processes under the
ServiceAccount's token (no kubelet here), as tests/e2e/test_deploy_manifests.py does.

The paused leader (issue 44): replica A leads, through a proxy; the proxy starts keeping what A
sends; a label makes A patch a taint onto a node, and A stops itself (SIGSTOP) right after that
PATCH left (tests/e2e/support/held_writer.py), so the request sits in the proxy with A's term on it.
The admin deletes the rule; the standby B takes over and leads under the new rules, which
want no taint. Then the proxy delivers A's PATCH. Without the fence policy it lands: the node
carries the deleted rule's taint (the control case: the hazard is real, the scene reaches it).
With the policy the API server refuses it and the node never carries the taint; A, resumed,
reads the refusal and exits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client
from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException

from nodegate.core.decisions.fencing import (
    Term,
    refusal_term,
)
from nodegate.core.rules.loader import RulesDocument
from nodegate.core.rules.node_marks import FENCE_ANNOTATION, TERMINATING
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import wait_until
from nodegate.manifests.build import build_manifests
from nodegate.manifests.settings import DeploySettings
from tests.e2e.support.oci_scene import COMPARTMENT, oci_flags, oci_node
from tests.e2e.support.reconciler_fixtures import (
    HEADER,
    RULES,
    node_events,
    patch_labels,
    read_node,
)
from tests.e2e.support.reconciler_process import ReconcilerProcess, running_reconciler
from tests.e2e.support.shipped_manifests import (
    apply_all_but_the_deployment,
    service_account_kubeconfig,
    service_account_token,
    the_deployment,
)
from tests.e2e.support.tcp_proxy import partition_proxy
from tests.unit.manifests.support import ON_CONFIGMAP
from tests.unit.reconciler.nodes.oci_compute_server import OciComputeServer, instance

LEASE = ("--lease-duration-seconds=4", "--renew-deadline-seconds=3", "--retry-period-seconds=1")
TAINT = ("example.com/dedicated", "NoSchedule")
RULES_WITHOUT_CI = HEADER + textwrap.dedent(
    """\
    conditionTaints:
      - name: nic-broken
        conditions: [{type: NetworkInterfaceCard, status: "Kaput|Ruined"}]
        taint: {key: example.com/nic-broken, value: "true", effect: NoExecute}
    """
)


@dataclass
class Install:
    """One installation of the builder's objects, and how to run its Deployment's command."""

    namespace: str
    objects: list[dict[str, Any]]
    kubeconfig: Path
    args: list[str]


@pytest.fixture
def install(
    control_plane: LocalControlPlane,
    api_client: k8s_client.ApiClient,
    core_v1: k8s_client.CoreV1Api,
    unique_name: str,
    tmp_path: Path,
) -> Iterator[Callable[..., Install]]:
    made: list[Install] = []

    def make(server_fence: bool, oci: bool = False) -> Install:
        """`oci`: with OCI conditions on, so the ServiceAccount may patch `nodes/status`."""
        variant = "fenced" if server_fence else "client-only"
        name = f"{variant}-{len(made)}-{unique_name}"[:40].rstrip("-")
        settings = DeploySettings.model_validate(
            {
                "image": {"repository": "registry.example.com/nodegate"},
                "namespace": name,
                "name": name,
                "leaderElection": {"serverFence": server_fence},
                **ON_CONFIGMAP,
                **({"oci": {"compartments": "ocid1.compartment.oc1..fence"}} if oci else {}),
            }
        )
        objects = build_manifests(RulesDocument.parse(RULES, "rules.yaml"), settings)
        apply_all_but_the_deployment(api_client, objects)
        token = service_account_token(core_v1, name, name)
        kubeconfig = service_account_kubeconfig(control_plane, token, tmp_path / f"{name}.kube")
        container = the_deployment(objects)["spec"]["template"]["spec"]["containers"][0]
        args = [a for a in container["args"] if not a.startswith("--http-port")]
        made.append(Install(name, objects, kubeconfig, [*args, *LEASE]))
        return made[-1]

    yield make
    for done in made:
        _uninstall(api_client, done)


def _uninstall(api_client: k8s_client.ApiClient, done: Install) -> None:
    """The cluster-scoped objects and the namespace: the control plane is shared (its Lease
    param informer outlives our bindings: tests/e2e/support/lease_params.py)."""
    admission = k8s_client.AdmissionregistrationV1Api(api_client)
    rbac = k8s_client.RbacAuthorizationV1Api(api_client)
    deletes: dict[str, Callable[[str], object]] = {
        "ValidatingAdmissionPolicyBinding": admission.delete_validating_admission_policy_binding,
        "ValidatingAdmissionPolicy": admission.delete_validating_admission_policy,
        "ClusterRoleBinding": rbac.delete_cluster_role_binding,
        "ClusterRole": rbac.delete_cluster_role,
        "Namespace": k8s_client.CoreV1Api(api_client).delete_namespace,
    }
    for obj in done.objects:
        delete = deletes.get(obj["kind"])
        if delete is not None:
            try:
                delete(obj["metadata"]["name"])
            except ApiException as err:
                if err.status != 404:
                    raise


def leads(replica: ReconcilerProcess) -> bool:
    return replica.process.poll() is None and replica.metric("nodegate_is_leader") == 1


def stopped(pid: int) -> bool:
    """Whether the process is stopped by a signal (state T in /proc)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "T"


class TaintWatch:
    """Every version of one node the API server stores, from now on: a taint that lived for
    a millisecond is seen too."""

    def __init__(self, core_v1: k8s_client.CoreV1Api, name: str) -> None:
        self.seen: list[set[tuple[str, str]]] = []
        self.versions: list[k8s_client.V1Node] = []
        self._watch = k8s_watch.Watch()  # type: ignore[no-untyped-call]
        start = read_node(core_v1, name)["metadata"]["resourceVersion"]
        self._thread = threading.Thread(
            target=self._follow, args=(core_v1, name, start), daemon=True
        )
        self._thread.start()

    def _follow(self, core_v1: k8s_client.CoreV1Api, name: str, start: str) -> None:
        with contextlib.suppress(Exception):  # stopped: the stream ends as it may
            self._stream(core_v1, name, start)

    def _stream(self, core_v1: k8s_client.CoreV1Api, name: str, start: str) -> None:
        for event in self._watch.stream(  # type: ignore[no-untyped-call]
            core_v1.list_node,
            field_selector=f"metadata.name={name}",
            resource_version=start,
            timeout_seconds=120,
        ):
            self.versions.append(event["object"])
            taints = event["object"].spec.taints or []
            self.seen.append({(t.key, t.effect) for t in taints})

    def carried(self, taint: tuple[str, str]) -> bool:
        return any(taint in taints for taints in self.seen)

    def stop(self) -> None:
        self._watch.stop()  # type: ignore[no-untyped-call]


def rules_configmap_of(install: Install) -> str:
    return str(
        next(
            o["metadata"]["name"]
            for o in install.objects
            if o["kind"] == "ConfigMap" and "rules.yaml" in o.get("data", {})
        )
    )


@pytest.mark.parametrize("server_fence", [True, False], ids=["fenced", "client-only"])
def test_a_paused_leaders_write_that_lands_after_a_takeover_is_refused_by_the_api_server(
    server_fence: bool,
    install: Callable[[bool], Install],
    control_plane: LocalControlPlane,
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    installed = install(server_fence)
    monkeypatch.setenv("POD_NAMESPACE", installed.namespace)
    hold, sent = tmp_path / "hold", tmp_path / "sent"
    api_port = int(control_plane.server_url.rsplit(":", 1)[1])
    with partition_proxy(api_port) as proxy, ExitStack() as stack:
        via_proxy = tmp_path / "via-proxy.kube"
        config = yaml.safe_load(installed.kubeconfig.read_text())
        for cluster in config["clusters"]:
            cluster["cluster"]["server"] = f"https://127.0.0.1:{proxy.port}"
        via_proxy.write_text(yaml.safe_dump(config))
        first = stack.enter_context(
            running_reconciler(
                via_proxy,
                tmp_path,
                *installed.args,
                module="tests.e2e.support.held_writer",
                env={"NODEGATE_TEST_HOLD_FILE": str(hold), "NODEGATE_TEST_SENT_FILE": str(sent)},
            )
        )
        wait_until(lambda: leads(first), 20, "first replica leads")
        second = stack.enter_context(
            running_reconciler(installed.kubeconfig, tmp_path, *installed.args)
        )
        name = make_node()
        wait_until(
            lambda: first.metric("nodegate_server_fence") == int(server_fence), 20, "fence checked"
        )

        # A writes once more, so its pool holds an open connection for the next write: the
        # proxy keeps what A sends, a TLS handshake of a new connection too.
        warm = make_node("warm", labels={"example.com/dedicated": "ci"})
        wait_until(lambda: TAINT in _taints(core_v1, warm), 20, "A wrote")
        wait_until(  # its Event sent too (after the write), before the proxy keeps what A sends
            lambda: any(e.reason == "NodegateUpdated" for e in node_events(core_v1, warm)),
            20,
            "A's Event of its write",
        )

        # A's next node PATCH leaves, is kept by the proxy, and A pauses.
        proxy.hold()
        hold.write_text("")
        patch_labels(core_v1, name, {"example.com/dedicated": "ci"})
        wait_until(sent.exists, 20, "the leader sent its PATCH")
        wait_until(lambda: stopped(first.process.pid), 20, "the leader paused")
        taints = TaintWatch(core_v1, name)
        try:
            # The admin deletes the rule; the standby takes over under the rules without it.
            core_v1.patch_namespaced_config_map(
                rules_configmap_of(installed),
                installed.namespace,
                {"data": {"rules.yaml": RULES_WITHOUT_CI}},
            )
            paused_at = time.monotonic()
            wait_until(lambda: leads(second), 30, "the standby leads", interval=0.05)
            print(f"takeover {time.monotonic() - paused_at:.2f}s after the leader paused")
            wait_until(
                lambda: second.metric("nodegate_rules_generation") == 2,
                20,
                "the new leader runs the rules without ci",
            )
            time.sleep(1)

            assert proxy.held_bytes > 0  # A's PATCH (and its renewals) wait in the proxy
            proxy.release()  # the paused leader's PATCH reaches the API server
            if server_fence:
                time.sleep(3)
                assert not taints.carried(TAINT), taints.seen
                assert TAINT not in _taints(core_v1, name)
            else:
                wait_until(lambda: taints.carried(TAINT), 20, "the held PATCH landed")
        finally:
            taints.stop()
            os.kill(first.process.pid, signal.SIGCONT)
        first.process.wait(20)
        assert first.process.returncode == 3  # a deposed leader exits
        assert leads(second)
        said = (
            "writes are fenced by the API server"
            if server_fence
            else "writes are fenced on the client only"
        )
        assert said in first.logs()  # said when it started to lead


def _taints(core_v1: k8s_client.CoreV1Api, name: str) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in read_node(core_v1, name)["spec"].get("taints") or []}


def test_every_write_of_the_leader_carries_its_term_and_the_api_server_knows_it(
    install: Callable[[bool], Install],
    core_v1: k8s_client.CoreV1Api,
    api_client: k8s_client.ApiClient,
    make_node: Callable[..., str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    installed = install(True)
    monkeypatch.setenv("POD_NAMESPACE", installed.namespace)
    with running_reconciler(installed.kubeconfig, tmp_path, *installed.args) as leader:
        wait_until(lambda: leads(leader), 20, "leads")
        name = make_node(labels={"example.com/dedicated": "ci"})
        wait_until(lambda: TAINT in _taints(core_v1, name), 20, "tainted")
        lease = k8s_client.CoordinationV1Api(api_client).read_namespaced_lease(
            "nodegate-reconciler", installed.namespace
        )
        assert lease.spec is not None
        term = f"{lease.spec.holder_identity}/{lease.spec.lease_transitions}"
        annotations = read_node(core_v1, name)["metadata"]["annotations"]
        assert annotations[FENCE_ANNOTATION] == term
        # checked in its own thread when the replica starts to lead
        wait_until(lambda: leader.metric("nodegate_server_fence") == 1, 20, "fence checked")
        assert "writes are fenced by the API server" in leader.logs()
        assert leader.metric("nodegate_writes_fenced_total") == 0


def test_a_single_replica_without_leader_election_writes_without_a_term(
    reconciler: ReconcilerProcess,
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
) -> None:
    """No Lease, no term: writes are sent as they were (no policy is shipped for this mode)."""
    name = make_node(labels={"example.com/dedicated": "ci"})
    wait_until(lambda: TAINT in _taints(core_v1, name), 20, "tainted")

    annotations = read_node(core_v1, name)["metadata"].get("annotations") or {}
    assert FENCE_ANNOTATION not in annotations
    assert reconciler.metric("nodegate_server_fence") == 0
    assert "fenced" not in reconciler.logs()


TAKEOVERS = 10


def test_the_api_server_refuses_the_old_term_within_milliseconds_of_a_takeover(
    install: Callable[[bool], Install],
    api_client: k8s_client.ApiClient,
    make_node: Callable[..., str],
) -> None:
    """How long the policy's view of the Lease lags a takeover: the Lease is handed over (as a
    standby's takeover writes it) and, as the reconciler's ServiceAccount, the old term's write
    is sent again and again until refused, then the new term's until accepted. The figures are
    the ones docs/reconciler.md ("One writer") quotes; the refusal is read back as the
    reconciler reads it."""
    installed = install(True)
    leases = k8s_client.CoordinationV1Api(api_client)
    lease = k8s_client.V1Lease(
        metadata={"name": "nodegate-reconciler"},
        spec={"holderIdentity": "a", "leaseTransitions": 0},
    )
    leases.create_namespaced_lease(installed.namespace, lease)
    write = _term_writer(installed, make_node())

    wait_until(lambda: write("z/99") is not None, 20, "the policy in force")  # just created
    wait_until(lambda: write("a/0") is None, 20, "the first term accepted")
    refused_after: list[float] = []
    accepted_after: list[float] = []
    for transitions in range(1, TAKEOVERS + 1):
        old = f"{'ab'[(transitions - 1) % 2]}/{transitions - 1}"
        holder = "ab"[transitions % 2]
        leases.patch_namespaced_lease(
            "nodegate-reconciler",
            installed.namespace,
            {"spec": {"holderIdentity": holder, "leaseTransitions": transitions}},
        )
        taken = time.monotonic()
        while (refusal := write(old)) is None:
            assert time.monotonic() - taken < 1, "the old term still accepted 1 s after a takeover"
        refused_after.append(time.monotonic() - taken)
        assert refusal_term(refusal, f"{installed.namespace}-fence") == Term(holder, transitions)
        while write(f"{holder}/{transitions}") is not None:
            assert time.monotonic() - taken < 1, "the new term still refused 1 s after a takeover"
        accepted_after.append(time.monotonic() - taken)

    print(f"old term refused after (ms): {_ms(refused_after)}")
    print(f"new term accepted after (ms): {_ms(accepted_after)}")


def _ms(seconds: list[float]) -> str:
    return ", ".join(f"{s * 1000:.1f}" for s in seconds)


def test_the_policy_stands_in_no_one_elses_way_even_before_any_lease_exists(
    install: Callable[[bool], Install],
    api_client: k8s_client.ApiClient,
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
) -> None:
    """kube-apiserver looks the binding's param up before it evaluates the match conditions,
    for every request the rules match: with no Lease yet (a fresh install, a deleted Lease),
    a binding that denied on a missing param would refuse every Node update and ConfigMap
    write, whoever sent it."""
    installed = install(True)
    name = make_node()
    leases = k8s_client.CoordinationV1Api(api_client)
    lease = k8s_client.V1Lease(
        metadata={"name": "nodegate-reconciler"}, spec={"holderIdentity": "a"}
    )
    leases.create_namespaced_lease(installed.namespace, lease)
    write = _term_writer(installed, name)
    wait_until(lambda: write("z/9") is not None, 20, "the policy in force")
    leases.delete_namespaced_lease("nodegate-reconciler", installed.namespace)
    wait_until(lambda: write("z/9") is None, 20, "no Lease: even a wrong term passes")

    core_v1.patch_node(name, {"spec": {"unschedulable": True}})  # an admin cordons
    someone_elses = k8s_client.V1ConfigMap(metadata={"name": "someone-elses"}, data={"k": "v"})
    core_v1.create_namespaced_config_map(installed.namespace, someone_elses)

    assert read_node(core_v1, name)["spec"]["unschedulable"] is True


def _term_writer(
    installed: Install, name: str, status: bool = False
) -> Callable[[str], str | None]:
    """write(term): a Node write (`status`: a write of its status, as the OCI conditions are
    written) as the reconciler's ServiceAccount carrying `term`; the refusal's body, or None if
    the API server accepted it."""
    from kubernetes import config as k8s_config

    as_reconciler = k8s_client.CoreV1Api(
        k8s_config.new_client_from_config(str(installed.kubeconfig))  # type: ignore[no-untyped-call]
    )

    def write(term: str) -> str | None:
        stamped: dict[str, Any] = {"metadata": {"annotations": {FENCE_ANNOTATION: term}}}
        try:
            if status:
                condition = {"type": "OCIInstanceTerminating", "status": "False", "reason": term}
                as_reconciler.patch_node_status(
                    name, {**stamped, "status": {"conditions": [condition]}}
                )
            else:
                as_reconciler.patch_node(name, stamped)
        except ApiException as err:
            assert err.status == 403, err.body
            return str(err.body)
        return None

    return write


def test_a_status_write_under_an_old_term_is_refused_and_the_nodes_own_status_writes_are_not(
    install: Callable[..., Install],
    api_client: k8s_client.ApiClient,
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
) -> None:
    """The OCI conditions are written to the Node's status: a deposed leader's late status
    write is refused where it lands, as its Node writes are; anyone else's status writes (the
    kubelet's heartbeat) pass whatever they carry."""
    installed = install(True, oci=True)
    name = make_node()
    leases = k8s_client.CoordinationV1Api(api_client)
    lease = k8s_client.V1Lease(
        metadata={"name": "nodegate-reconciler"},
        spec={"holderIdentity": "b", "leaseTransitions": 1},
    )
    leases.create_namespaced_lease(installed.namespace, lease)
    write_status = _term_writer(installed, name, status=True)

    wait_until(lambda: write_status("a/0") is not None, 20, "the old term refused")
    assert refusal_term(str(write_status("a/0")), f"{installed.namespace}-fence") == Term("b", 1)
    assert write_status("b/1") is None
    stale = {"metadata": {"annotations": {FENCE_ANNOTATION: "a/0"}}}
    heartbeat = {"type": "Ready", "status": "True", "reason": "KubeletReady"}
    core_v1.patch_node_status(name, {**stale, "status": {"conditions": [heartbeat]}})

    conditions = {c["type"]: c for c in read_node(core_v1, name)["status"]["conditions"]}
    assert conditions["OCIInstanceTerminating"]["reason"] == "b/1"


def test_an_oci_only_write_carries_the_leaders_term(
    install: Callable[..., Install],
    api_client: k8s_client.ApiClient,
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The OCI poller writes through the leader's one fenced client, as every writer of the
    leader does: on a node no rule touches, the status write that brings its condition is the
    only write nodegate makes, and it carries the leader's term, which the policy checks (a
    late one under an old term is refused: the test above)."""
    installed = install(True, oci=True)
    monkeypatch.setenv("POD_NAMESPACE", installed.namespace)
    name, ocid = oci_node(make_node, "oci")
    node = TaintWatch(core_v1, name)
    try:
        with OciComputeServer(tmp_path) as oci:
            oci.put(COMPARTMENT, instance(ocid, "TERMINATING"))
            flags = (*installed.args, *oci_flags(oci))  # later flags win: the test's server
            with running_reconciler(installed.kubeconfig, tmp_path, *flags) as leader:
                wait_until(lambda: leads(leader), 20, "leads")
                written = wait_until(lambda: _first_with(node, TERMINATING), 20, "condition")
                lease = k8s_client.CoordinationV1Api(api_client).read_namespaced_lease(
                    "nodegate-reconciler", installed.namespace
                )  # while it leads: a clean stop releases it
    finally:
        node.stop()
    assert lease.spec is not None
    term = f"{lease.spec.holder_identity}/{lease.spec.lease_transitions}"

    assert _term_on(written) == term
    before = node.versions[: node.versions.index(written)]
    assert [_term_on(version) for version in before] == [None] * len(before)  # no other write


def _first_with(node: TaintWatch, condition: str) -> k8s_client.V1Node | None:
    """The first version of the node that carries the condition `condition`."""
    for version in list(node.versions):
        conditions = (version.status.conditions if version.status else None) or []
        if any(c.type == condition for c in conditions):
            return version
    return None


def _term_on(version: k8s_client.V1Node) -> str | None:
    annotations = (version.metadata.annotations if version.metadata else None) or {}
    return annotations.get(FENCE_ANNOTATION)


ANNOTATIONS_LIMIT = 256 * 1024
"""kube-apiserver's limit on the total size of an object's annotations (keys and values)."""


def test_a_node_that_filled_its_annotations_still_gets_its_taints_from_a_fenced_leader(
    install: Callable[[bool], Install],
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A kubelet may fill its own Node's annotations to the limit: the leader's write, which
    adds its owned-taints record and its term, is refused as too long; its taints then go
    alone, without the term (which would grow them too)."""
    installed = install(True)
    monkeypatch.setenv("POD_NAMESPACE", installed.namespace)
    name = make_node(labels={"example.com/dedicated": "ci"})
    present = read_node(core_v1, name)["metadata"].get("annotations") or {}
    used = sum(len(k) + len(v) for k, v in present.items())
    key = "filler.example.com/x"
    core_v1.patch_node(
        name, {"metadata": {"annotations": {key: "x" * (ANNOTATIONS_LIMIT - used - len(key) - 8)}}}
    )

    with running_reconciler(installed.kubeconfig, tmp_path, *installed.args) as leader:
        wait_until(lambda: leads(leader), 20, "leads")
        wait_until(lambda: TAINT in _taints(core_v1, name), 20, "tainted all the same")
        # checked in its own thread when the replica starts to lead
        wait_until(lambda: leader.metric("nodegate_server_fence") == 1, 20, "fence checked")
        assert leader.metric("nodegate_node_writes_split_total") >= 1
