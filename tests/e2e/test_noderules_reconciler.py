"""Rules as NodeRules objects on the real API server: the reconciler (`--rules-objects`) merges
every object, keeps an object's last good generation in force when a new one is refused or
conflicts, takes only its own taints with a deleted object, and says all of it in each object's
status (Accepted, Conflicting, Degraded; the generation in force; its rules' node counts).

The CRD is installed from the manifest builder's own (`manifests/crd.py`) and left installed:
NodeRules objects are cluster-scoped, so each test deletes those it made.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from nodegate.core.objects.status_record import STATUS_CONFIGMAP, HeldUpdate, decode_status
from nodegate.core.rules.model import CRD_NAME
from nodegate.defaults.names import CONFIRM_ANNOTATION
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import wait_crd_established, wait_until
from nodegate.manifests.crd import noderules_crd
from nodegate.reconciler.kit.client import load_api_client
from tests.e2e.support.reconciler_fixtures import (
    FAST_LEASE,
    TIMEOUT,
    settled,
    taints_of,
    taints_stay,
    wait_for_taints,
)
from tests.e2e.support.reconciler_process import (
    ReconcilerProcess,
    running_reconciler,
)
from tests.e2e.support.reconciler_process import (
    test_state_namespace as state_namespace_of,
)

GROUP, VERSION, PLURAL = "nodegate.dev", "v1", "noderules"
ROOT = Path(__file__).resolve().parents[2]
Put = Callable[..., dict[str, Any]]


@pytest.fixture(scope="module")
def custom(control_plane: LocalControlPlane) -> k8s_client.CustomObjectsApi:
    """The CRD installed (once; left for the rest of the session) and a client for its objects."""
    api_client = load_api_client(str(control_plane.kubeconfig_path))
    extensions = k8s_client.ApiextensionsV1Api(api_client)
    crd = noderules_crd()
    try:
        extensions.create_custom_resource_definition(cast(Any, crd))
    except ApiException as err:
        if err.status != 409:
            raise
    wait_crd_established(api_client, crd["metadata"]["name"])
    return k8s_client.CustomObjectsApi(api_client)


@pytest.fixture
def put_rules(custom: k8s_client.CustomObjectsApi, unique_name: str) -> Iterator[Put]:
    """put(suffix, spec): create or replace the NodeRules object `<test>-<suffix>`."""
    made: set[str] = set()

    def put(suffix: str, spec: dict[str, Any]) -> dict[str, Any]:
        name = f"{unique_name}-{suffix}"[:63].rstrip("-")
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "NodeRules", "metadata": {"name": name}}
        made.add(name)
        try:
            current = custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
        except ApiException as err:
            if err.status != 404:
                raise
            created = custom.create_cluster_custom_object(
                GROUP, VERSION, PLURAL, {**body, "spec": spec}
            )
            return cast(dict[str, Any], created)
        replaced = {**cast(dict[str, Any], current), "spec": spec}
        return cast(
            dict[str, Any],
            custom.replace_cluster_custom_object(GROUP, VERSION, PLURAL, name, replaced),
        )

    yield put
    for name in made:
        try:
            custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
        except ApiException as err:
            if err.status != 404:
                raise


@pytest.fixture
def put_rule(put_rules: Put, unique_name: str) -> Put:
    """put(suffix, label, key=label): the object `<test>-<suffix>` with one label taint rule of
    that name, tainting `e2e.nodegate.dev/<key>` where `e2e.nodegate.dev/<label>: yes`."""

    def put(suffix: str, label: str, key: str | None = None) -> dict[str, Any]:
        name = f"{unique_name}-{suffix}"[:63].rstrip("-")
        rule = label_rule(name, f"e2e.nodegate.dev/{label}", f"e2e.nodegate.dev/{key or label}")
        return put_rules(suffix, {"labelTaints": [rule]})

    return put


def label_rule(name: str, label: str, key: str) -> dict[str, Any]:
    return {
        "name": name,
        "match": {"labels": {label: "yes"}},
        "taint": {"key": key, "effect": "NoSchedule"},
        "nodeMayLift": True,
    }


@pytest.fixture
def on_objects(
    control_plane: LocalControlPlane, tmp_path: Path
) -> Iterator[Callable[[], ReconcilerProcess]]:
    """start(): a reconciler on the NodeRules objects (one replica, the share check off: the
    tests share a cluster of a few nodes); stopped at the end."""
    with ExitStack() as stack:

        def start() -> ReconcilerProcess:
            args = ("--rules-objects", "--no-leader-elect", "--max-untaint-share", "1")
            plane = control_plane.kubeconfig_path
            return stack.enter_context(running_reconciler(plane, tmp_path, *args))

        yield start


def status_of(custom: k8s_client.CustomObjectsApi, name: str) -> dict[str, Any]:
    found = cast(dict[str, Any], custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, name))
    return dict(found.get("status") or {})


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c["type"] == kind), {})


def wait_for_status(
    custom: k8s_client.CustomObjectsApi,
    name: str,
    check: Callable[[dict[str, Any]], bool],
    what: str,
) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        status = status_of(custom, name)
        return status if check(status) else None

    try:
        return wait_until(probe, TIMEOUT, what)
    except TimeoutError as err:
        raise AssertionError(f"{what}: status is {status_of(custom, name)}") from err


def in_force(generation: int) -> Callable[[dict[str, Any]], bool]:
    return lambda status: (
        status.get("inForceGeneration") == generation
        and condition(status, "Accepted").get("status") == "True"
        and condition(status, "Degraded").get("reason") == "InForce"
    )


def test_two_teams_objects_are_in_force_together_and_each_says_so(
    custom: k8s_client.CustomObjectsApi,
    put_rule: Put,
    make_node: Callable[..., str],
    core_v1: k8s_client.CoreV1Api,
    on_objects: Callable[[], ReconcilerProcess],
    unique_name: str,
) -> None:
    gpu = put_rule("gpu", "gpu")
    net = put_rule("net", "net")
    node = make_node(labels={"e2e.nodegate.dev/gpu": "yes", "e2e.nodegate.dev/net": "yes"})
    on_objects()
    wait_for_taints(
        core_v1,
        node,
        lambda t: (
            ("e2e.nodegate.dev/gpu", "NoSchedule") in t
            and ("e2e.nodegate.dev/net", "NoSchedule") in t
        ),
    )
    for obj in (gpu, net):
        status = wait_for_status(custom, obj["metadata"]["name"], in_force(1), "in force")
        assert status["observedGeneration"] == 1
        assert condition(status, "Conflicting")["status"] == "False"
        assert status["ruleCount"] == 1
    counted = wait_for_status(
        custom, gpu["metadata"]["name"], lambda s: s.get("nodesTainted", 0) >= 1, "counted"
    )
    [row] = counted["rules"]
    assert (row["name"], row["kind"], row["tainted"] >= 1) == (
        f"{unique_name}-gpu",
        "labelTaints",
        True,
    )


def test_an_edit_only_nodegate_refuses_is_reported_and_the_last_good_generation_stays(
    custom: k8s_client.CustomObjectsApi,
    put_rules: Put,
    put_rule: Put,
    make_node: Callable[..., str],
    core_v1: k8s_client.CoreV1Api,
    on_objects: Callable[[], ReconcilerProcess],
    unique_name: str,
) -> None:
    rule = label_rule(f"{unique_name}-r", "e2e.nodegate.dev/team", "e2e.nodegate.dev/team")
    team = put_rules("team", {"labelTaints": [rule]})
    name = team["metadata"]["name"]
    # Another team's object: with it, dropping this one would not leave the rules empty (which
    # the blast-radius guard holds whatever the share).
    put_rule("other", "o")
    node = make_node(labels={"e2e.nodegate.dev/team": "yes"})
    process = on_objects()
    wait_for_status(custom, name, in_force(1), "in force")
    # A regular expression that does not compile: the API server has no way to know.
    broken = {
        "labelTaints": [rule],
        "conditionTaints": [
            {
                "name": f"{unique_name}-c",
                "conditions": [{"type": "Broken", "status": "(("}],
                "taint": {"key": "e2e.nodegate.dev/c", "effect": "NoSchedule"},
            }
        ],
    }
    assert put_rules("team", broken)["metadata"]["generation"] == 2
    status = wait_for_status(
        custom, name, lambda s: condition(s, "Accepted").get("status") == "False", "refused"
    )
    assert status["observedGeneration"] == 2
    assert (
        "spec.conditionTaints[0].conditions[0].status" in condition(status, "Accepted")["message"]
    )
    settled(process, core_v1, node)
    assert process.metric("nodegate_rules_generation") == 1
    assert ("e2e.nodegate.dev/team", "NoSchedule") in taints_of(core_v1, node)
    status = wait_for_status(
        custom, name, lambda s: condition(s, "Degraded").get("reason") == "NotInForce", "reported"
    )
    assert status["inForceGeneration"] == 1


def test_a_later_object_claiming_a_taint_key_conflicts_and_the_earlier_stands(
    custom: k8s_client.CustomObjectsApi,
    put_rule: Put,
    make_node: Callable[..., str],
    core_v1: k8s_client.CoreV1Api,
    on_objects: Callable[[], ReconcilerProcess],
    unique_name: str,
) -> None:
    first = put_rule("first", "a", "shared")
    process = on_objects()
    wait_for_status(custom, first["metadata"]["name"], in_force(1), "in force")
    later = put_rule("later", "b", "shared")
    status = wait_for_status(
        custom,
        later["metadata"]["name"],
        lambda s: condition(s, "Conflicting").get("status") == "True",
        "conflicting",
    )
    assert (
        f"belongs to NodeRules {first['metadata']['name']}"
        in condition(status, "Conflicting")["message"]
    )
    assert "inForceGeneration" not in status
    node = make_node(labels={"e2e.nodegate.dev/b": "yes"})
    other = make_node("a", labels={"e2e.nodegate.dev/a": "yes"})
    wait_for_taints(core_v1, other, lambda t: ("e2e.nodegate.dev/shared", "NoSchedule") in t)
    settled(process, core_v1, node)
    assert ("e2e.nodegate.dev/shared", "NoSchedule") not in taints_of(core_v1, node)
    assert (
        condition(status_of(custom, first["metadata"]["name"]), "Conflicting")["status"] == "False"
    )


def test_deleting_an_object_takes_only_its_own_taints(
    custom: k8s_client.CustomObjectsApi,
    put_rule: Put,
    make_node: Callable[..., str],
    core_v1: k8s_client.CoreV1Api,
    on_objects: Callable[[], ReconcilerProcess],
    unique_name: str,
) -> None:
    put_rule("keep", "k")
    gone = put_rule("gone", "g")
    node = make_node(labels={"e2e.nodegate.dev/k": "yes", "e2e.nodegate.dev/g": "yes"})
    on_objects()
    both = {("e2e.nodegate.dev/k", "NoSchedule"), ("e2e.nodegate.dev/g", "NoSchedule")}
    wait_for_taints(core_v1, node, lambda t: both <= t.keys())
    custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, gone["metadata"]["name"])
    taints = wait_for_taints(core_v1, node, lambda t: ("e2e.nodegate.dev/g", "NoSchedule") not in t)
    assert ("e2e.nodegate.dev/k", "NoSchedule") in taints


def test_after_a_restart_what_was_in_force_stands_against_an_edit_made_meanwhile(
    custom: k8s_client.CustomObjectsApi,
    put_rules: Put,
    put_rule: Put,
    make_node: Callable[..., str],
    core_v1: k8s_client.CoreV1Api,
    on_objects: Callable[[], ReconcilerProcess],
    unique_name: str,
) -> None:
    """The older object is edited to claim the younger one's taint key while no reconciler
    runs. Judged afresh, the older would win it and the younger's nodes would lose their taint;
    the restarted reconciler puts the versions in force back from its status record first, so
    the edit is the conflict."""
    older = put_rule("older", "o")
    younger = put_rule("younger", "y")
    node = make_node(labels={"e2e.nodegate.dev/y": "yes"})
    first = on_objects()
    wait_for_taints(core_v1, node, lambda t: ("e2e.nodegate.dev/y", "NoSchedule") in t)
    wait_for_status(custom, younger["metadata"]["name"], in_force(1), "in force")
    first.stop()
    grab = label_rule(f"{unique_name}-g", "e2e.nodegate.dev/g", "e2e.nodegate.dev/y")
    put_rules("older", {"labelTaints": [older["spec"]["labelTaints"][0], grab]})
    second = on_objects()
    status = wait_for_status(
        custom,
        older["metadata"]["name"],
        lambda s: (
            s.get("observedGeneration") == 2 and condition(s, "Conflicting").get("status") == "True"
        ),
        "the edit conflicting",
    )
    assert (
        f"belongs to NodeRules {younger['metadata']['name']}"
        in condition(status, "Conflicting")["message"]
    )
    settled(second, core_v1, node)
    assert ("e2e.nodegate.dev/y", "NoSchedule") in taints_of(core_v1, node)
    assert (
        condition(status_of(custom, younger["metadata"]["name"]), "Conflicting")["status"]
        == "False"
    )


def test_nodegate_status_and_explain_read_the_objects_the_reconciler_merged(
    control_plane: LocalControlPlane,
    custom: k8s_client.CustomObjectsApi,
    put_rules: Put,
    make_node: Callable[..., str],
    core_v1: k8s_client.CoreV1Api,
    on_objects: Callable[[], ReconcilerProcess],
    unique_name: str,
) -> None:
    rule = label_rule(f"{unique_name}-s", "e2e.nodegate.dev/s", "e2e.nodegate.dev/s")
    good = put_rules("good", {"labelTaints": [rule]})
    node = make_node(labels={"e2e.nodegate.dev/s": "yes"})
    on_objects()
    wait_for_status(custom, good["metadata"]["name"], in_force(1), "in force")
    broken = put_rules("broken", {"labelTaints": [{**rule, "name": f"{unique_name}-b"}]})
    wait_for_status(
        custom,
        broken["metadata"]["name"],
        lambda s: condition(s, "Conflicting").get("status") == "True",
        "conflicting",
    )
    namespace = state_namespace_of(control_plane.kubeconfig_path)
    status = _nodegate(control_plane, "status", "-n", namespace)
    assert status.returncode == 0, status.stderr
    [line] = [line for line in status.stdout.splitlines() if line.lstrip().startswith("objects")]
    assert "= in force; not in force: NodeRules " + broken["metadata"]["name"] in line
    explained = _nodegate(control_plane, "explain", node, "-n", namespace)
    assert explained.returncode == 0, explained.stderr
    assert f"{unique_name}-s" in explained.stdout


def _nodegate(plane: LocalControlPlane | None, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it, on the cluster's kubeconfig when `plane` is given."""
    on = ("--kubeconfig", str(plane.kubeconfig_path)) if plane is not None else ()
    argv = [sys.executable, "-m", "nodegate.cli", *args, *on]
    env = {**os.environ, "COLUMNS": "400"}
    return subprocess.run(argv, check=False, capture_output=True, text=True, timeout=120, env=env)


def test_an_installation_on_the_rules_configmap_switches_to_objects_with_its_taints_kept(
    control_plane: LocalControlPlane,
    custom: k8s_client.CustomObjectsApi,
    core_v1: k8s_client.CoreV1Api,
    rules_configmap: Callable[..., str],
    make_node: Callable[..., str],
    tmp_path: Path,
    unique_name: str,
) -> None:
    """The rules ConfigMap's reconciler stops; the reconciler on objects starts before the
    converted object exists (its rules in force come back from the status record, and no
    rules at all are held, not applied), then `nodegate migrate configmap` output is applied:
    the node keeps its taint at every look, and the object is in force."""
    taint = ("e2e.nodegate.dev/switch", "NoSchedule")
    text = (
        "apiVersion: nodegate.dev/v1\nkind: NodeRules\nlabelTaints:\n"
        f"  - name: {unique_name}-w\n    match: {{labels: {{e2e.nodegate.dev/switch: 'yes'}}}}\n"
        "    taint: {key: e2e.nodegate.dev/switch, effect: NoSchedule}\n    nodeMayLift: true\n"
    )
    ref = rules_configmap(text)
    node = make_node(labels={"e2e.nodegate.dev/switch": "yes"})
    plane = control_plane.kubeconfig_path
    flags = ("--no-leader-elect", "--max-untaint-share", "1")
    with running_reconciler(plane, tmp_path, "--rules-configmap", ref, *flags):
        wait_for_taints(core_v1, node, lambda t: taint in t)
    exported = tmp_path / "cm.yaml"
    namespace, name = ref.split("/")
    exported.write_text(
        yaml.safe_dump(
            core_v1.read_namespaced_config_map(name, namespace).to_dict()
            | {"apiVersion": "v1", "kind": "ConfigMap"}
        )
    )
    converted = _nodegate(None, "migrate", "configmap", str(exported))
    assert converted.returncode == 0, converted.stderr
    obj = yaml.safe_load(converted.stdout)
    obj["metadata"]["name"] = f"{unique_name}-switched"[:63]
    with running_reconciler(plane, tmp_path, "--rules-objects", *flags) as process:
        settled(process, core_v1, node)
        assert taint in taints_of(core_v1, node)
        assert process.metric("nodegate_rules_held") == 1  # no objects: no rules, held
        try:
            custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, obj)
            wait_for_status(custom, obj["metadata"]["name"], in_force(1), "in force")
            taints_stay(core_v1, node, lambda t: taint in t, seconds=1.0)
        finally:
            custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, obj["metadata"]["name"])


def test_a_failover_mid_edit_keeps_what_was_in_force_against_the_edit(
    control_plane: LocalControlPlane,
    custom: k8s_client.CustomObjectsApi,
    put_rules: Put,
    put_rule: Put,
    make_node: Callable[..., str],
    core_v1: k8s_client.CoreV1Api,
    tmp_path: Path,
    unique_name: str,
) -> None:
    """Two replicas; the older object is edited to claim the younger one's taint key and the
    leader is killed at once. The standby, which merged the objects against nothing in force,
    leads: it judges the edit against the versions in force the record keeps, as the leader
    would have, so the younger object's node keeps its taint and the edit is the conflict."""
    older = put_rule("older", "fo")
    younger = put_rule("younger", "fy")
    node = make_node(labels={"e2e.nodegate.dev/fy": "yes"})
    lease = (
        "--lease-namespace",
        "default",
        "--lease-name",
        f"lease-{unique_name}"[:63],
        *FAST_LEASE,
    )
    args = ("--rules-objects", "--max-untaint-share", "1", *lease)
    plane = control_plane.kubeconfig_path
    with ExitStack() as stack:
        first = stack.enter_context(running_reconciler(plane, tmp_path, *args))
        wait_until(lambda: first.metric("nodegate_is_leader") == 1, TIMEOUT, "first leads")
        second = stack.enter_context(running_reconciler(plane, tmp_path, *args))
        wait_for_taints(core_v1, node, lambda t: ("e2e.nodegate.dev/fy", "NoSchedule") in t)
        wait_for_status(custom, younger["metadata"]["name"], in_force(1), "in force")
        grab = label_rule(f"{unique_name}-g", "e2e.nodegate.dev/fg", "e2e.nodegate.dev/fy")
        put_rules("older", {"labelTaints": [older["spec"]["labelTaints"][0], grab]})
        first.stop(signal.SIGKILL)
        wait_until(lambda: second.metric("nodegate_is_leader") == 1, 30, "the standby leads")
        status = wait_for_status(
            custom,
            older["metadata"]["name"],
            lambda s: (
                s.get("observedGeneration") == 2
                and condition(s, "Conflicting").get("status") == "True"
            ),
            "the edit conflicting",
        )
        assert younger["metadata"]["name"] in condition(status, "Conflicting")["message"]
        settled(second, core_v1, node)
        assert ("e2e.nodegate.dev/fy", "NoSchedule") in taints_of(core_v1, node)


def test_a_held_update_is_confirmed_on_the_crd_by_an_admin_never_on_an_object(
    control_plane: LocalControlPlane,
    custom: k8s_client.CustomObjectsApi,
    put_rules: Put,
    make_node: Callable[..., str],
    core_v1: k8s_client.CoreV1Api,
    on_objects: Callable[[], ReconcilerProcess],
    unique_name: str,
) -> None:
    """Deleting the object with the only rules leaves no rules: the guard holds it. A team
    annotating its own object with the digest confirms nothing (it could approve its own
    change); the annotation on the CRD, which only cluster admins may write, does."""
    taint = ("e2e.nodegate.dev/held", "NoSchedule")
    rule = label_rule(f"{unique_name}-h", "e2e.nodegate.dev/held", "e2e.nodegate.dev/held")
    holder = put_rules("holder", {"labelTaints": [rule]})
    bystander = put_rules("bystander", {})
    node = make_node(labels={"e2e.nodegate.dev/held": "yes"})
    process = on_objects()
    wait_for_taints(core_v1, node, lambda t: taint in t)
    # The guard judges the nodes as the reconciler's cache has them: let it see its own write.
    settled(process, core_v1, node)
    custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, holder["metadata"]["name"])
    wait_until(lambda: process.metric("nodegate_rules_held") == 1, TIMEOUT, "the update held")
    namespace = state_namespace_of(control_plane.kubeconfig_path)

    def recorded_hold() -> HeldUpdate | None:
        record = core_v1.read_namespaced_config_map(STATUS_CONFIGMAP, namespace)
        return decode_status(record.data)[0].held

    # The gauge is set before the record's write lands.
    held = wait_until(recorded_hold, TIMEOUT, "the hold in the status record")
    confirm = {"metadata": {"annotations": {CONFIRM_ANNOTATION: held.digest}}}
    custom.patch_cluster_custom_object(
        GROUP, VERSION, PLURAL, bystander["metadata"]["name"], confirm
    )
    time.sleep(3 * 2.0)  # three of the leader's looks for a confirmation
    settled(process, core_v1, node)
    assert taint in taints_of(core_v1, node)
    assert process.metric("nodegate_rules_held") == 1
    extensions = k8s_client.ApiextensionsV1Api(load_api_client(str(control_plane.kubeconfig_path)))
    try:
        extensions.patch_custom_resource_definition(CRD_NAME, confirm)
        wait_for_taints(core_v1, node, lambda t: taint not in t)
    finally:
        unset = {"metadata": {"annotations": {CONFIRM_ANNOTATION: None}}}
        extensions.patch_custom_resource_definition(CRD_NAME, unset)


def test_the_shipped_team_policy_keeps_a_team_object_to_its_own_keys(
    control_plane: LocalControlPlane,
    custom: k8s_client.CustomObjectsApi,
    api_client: k8s_client.ApiClient,
) -> None:
    """examples/noderules-team-policy.yaml on the real API server: team-gpu's object may taint
    with its own keys; another team's key, an evicting taint or a cluster-wide setting is
    refused at admission, naming why."""
    policy = ROOT / "examples" / "noderules-team-policy.yaml"
    documents = [d for d in yaml.safe_load_all(policy.read_text()) if d]
    registration = k8s_client.AdmissionregistrationV1Api(api_client)
    registration.create_validating_admission_policy(documents[0])
    registration.create_validating_admission_policy_binding(documents[1])
    own = {"labelTaints": [label_rule("gpu-only", "gpu.example.com/gpu", "gpu.example.com/gpu")]}
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "NodeRules",
        "metadata": {"name": "team-gpu"},
    }
    try:

        def refusal(spec: dict[str, Any]) -> str:
            try:
                custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, {**body, "spec": spec})
            except ApiException as err:
                return str(err.body)
            custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, "team-gpu")
            return ""

        # The policy takes effect once the API server's policy informer has it.
        wait_until(
            lambda: refusal({"evictionBudget": "unlimited"}), TIMEOUT, "the policy in effect"
        )
        assert refusal(own) == ""
        foreign = {"labelTaints": [label_rule("grab", "gpu.example.com/x", "net.example.com/x")]}
        assert "keys under gpu.example.com/" in refusal(foreign)
        evicting = label_rule("evict", "gpu.example.com/e", "gpu.example.com/e")
        evicting["taint"]["effect"] = "NoExecute"
        assert "never NoExecute" in refusal({"labelTaints": [evicting]})
        unlimited = {**own["labelTaints"][0], "evictionBudget": "unlimited"}
        assert "shared eviction budget" in refusal({"labelTaints": [unlimited]})
        assert "platform team's" in refusal({"persistentLabels": {"prefixes": ["a.example.com/"]}})
    finally:
        registration.delete_validating_admission_policy_binding("noderules-team-gpu")
        registration.delete_validating_admission_policy("noderules-team-gpu")


def test_nodegate_plan_of_one_object_merges_it_with_the_others(
    control_plane: LocalControlPlane,
    custom: k8s_client.CustomObjectsApi,
    put_rule: Put,
    make_node: Callable[..., str],
    core_v1: k8s_client.CoreV1Api,
    on_objects: Callable[[], ReconcilerProcess],
    unique_name: str,
    tmp_path: Path,
) -> None:
    """A team plans its own object's edit: the plan is the edit merged with the other objects
    (the other team's taint stays), and an edit the merge would not take fails, naming why."""
    gpu = put_rule("gpu", "pg")
    put_rule("net", "pn")
    node = make_node(labels={"e2e.nodegate.dev/pg": "yes", "e2e.nodegate.dev/pn": "yes"})
    on_objects()
    both = {("e2e.nodegate.dev/pg", "NoSchedule"), ("e2e.nodegate.dev/pn", "NoSchedule")}
    wait_for_taints(core_v1, node, lambda t: both <= t.keys())
    wait_for_status(custom, gpu["metadata"]["name"], in_force(1), "in force")
    namespace = state_namespace_of(control_plane.kubeconfig_path)
    emptied = tmp_path / "gpu.yaml"
    emptied.write_text(yaml.safe_dump({**_object_file(gpu), "spec": {}}))
    plan = _nodegate(control_plane, "plan", "--rules", str(emptied), "-n", namespace, "-o", "json")
    assert plan.returncode == 2, plan.stderr
    changed = {n["node"]: n for n in json.loads(plan.stdout)["changes"]}
    assert node in changed, plan.stdout
    assert "e2e.nodegate.dev/pg" in json.dumps(changed[node])
    assert "e2e.nodegate.dev/pn" not in json.dumps(changed[node])
    grab = {
        "labelTaints": [label_rule(f"{unique_name}-g", "e2e.nodegate.dev/x", "e2e.nodegate.dev/pn")]
    }
    grabbing = tmp_path / "grab.yaml"
    grabbing.write_text(yaml.safe_dump({**_object_file(gpu), "spec": grab}))
    refused = _nodegate(control_plane, "plan", "--rules", str(grabbing), "-n", namespace)
    assert refused.returncode == 1
    assert "would not take effect" in refused.stderr
    assert "the taint key e2e.nodegate.dev/pn belongs to NodeRules" in refused.stderr


def _object_file(found: dict[str, Any]) -> dict[str, Any]:
    """The object as its team's file holds it."""
    return {
        "apiVersion": found["apiVersion"],
        "kind": found["kind"],
        "metadata": {"name": found["metadata"]["name"]},
    }
