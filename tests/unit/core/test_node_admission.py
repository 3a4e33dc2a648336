"""The webhook's JSON Patch for a Node being created: adds gates and persisted labels, never
drops or replaces anything. Patches are applied with `jsonpatch` (an independent RFC 6902
implementation), so a test checks the object the API server would store."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodegate.core.decisions.node_admission import admission_patch, pointer_token
from nodegate.core.rules.loader import load_rules
from nodegate.core.rules.node_marks import OWNED_TAINTS_ANNOTATION
from tests.unit.core.builders import NOW, rules

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
GATE = {"key": "startup.example.com/init", "value": "wait", "effect": "NoSchedule"}
RULES = rules(
    """\
    startupGates:
      - name: warmup
        match: {labels: {example.com/pool: gpu}}
        taint: {key: startup.example.com/init, value: wait, effect: NoSchedule}
        readyWhen: {annotation: example.com/ready=true}
      - name: drain-guard
        match: {labels: {persist.example.com/team: ml}}
        taint: {key: startup.example.com/guard, effect: NoExecute}
        readyWhen: {annotation: example.com/ready=true}
    persistentLabels:
      prefixes: ["persist.example.com/"]
      keys: [example.com/rack]
    """
)


def gpu_node(**overrides: Any) -> dict[str, Any]:
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "labels": {"example.com/pool": "gpu"}},
        "spec": {"providerID": "oci://n1"},
    }
    node.update(overrides)
    return node


def admitted(node: dict[str, Any], stored: dict[str, str] | None = None) -> dict[str, Any]:
    """The node as stored after the webhook's patch."""
    patch = admission_patch(node, RULES, stored or {}, NOW)
    result: dict[str, Any] = jsonpatch.apply_patch(copy.deepcopy(node), list(patch.ops))
    return result


def test_a_matching_node_without_taints_gets_the_gate() -> None:
    assert admitted(gpu_node())["spec"]["taints"] == [GATE]


def test_a_node_without_spec_gets_a_spec_holding_the_gate() -> None:
    node = gpu_node()
    del node["spec"]
    assert admitted(node)["spec"] == {"taints": [GATE]}


def test_a_null_taint_list_is_replaced_by_the_gate_list() -> None:
    assert admitted(gpu_node(spec={"taints": None}))["spec"]["taints"] == [GATE]


def test_existing_taints_are_kept_in_place_and_the_gate_appended() -> None:
    foreign = [
        {
            "key": "node.cloudprovider.kubernetes.io/uninitialized",
            "value": "true",
            "effect": "NoSchedule",
        },
        {"key": "example.com/x", "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"},
    ]
    node = gpu_node(spec={"taints": copy.deepcopy(foreign)})
    assert admitted(node)["spec"]["taints"] == [*foreign, GATE]


def test_a_taint_without_an_effect_is_the_api_servers_to_refuse_not_an_error() -> None:
    """A kubelet may register with a malformed taint: the patch is still made (the API server
    refuses the object afterwards), never an exception that would skip the gates."""
    malformed = {"key": "example.com/x"}
    node = gpu_node(spec={"taints": [malformed]})
    assert admitted(node)["spec"]["taints"] == [malformed, GATE]


def test_a_node_already_carrying_the_gate_key_and_effect_is_left_alone() -> None:
    mine = {"key": "startup.example.com/init", "value": "other", "effect": "NoSchedule"}
    patch = admission_patch(gpu_node(spec={"taints": [mine]}), RULES, {}, NOW)
    assert patch.ops == ()


def test_a_node_the_match_excludes_gets_nothing() -> None:
    node = gpu_node(metadata={"name": "n1", "labels": {"example.com/pool": "cpu"}})
    assert admission_patch(node, RULES, {}, NOW).ops == ()


def test_persisted_labels_are_added_without_replacing_the_node_own() -> None:
    node = gpu_node(
        metadata={"name": "n1", "labels": {"example.com/pool": "gpu", "example.com/rack": "r9"}}
    )
    stored = {"persist.example.com/owner": "alice", "example.com/rack": "r1"}
    assert admitted(node, stored)["metadata"]["labels"] == {
        "example.com/pool": "gpu",
        "example.com/rack": "r9",
        "persist.example.com/owner": "alice",
    }


def test_label_keys_with_slash_and_tilde_are_escaped_in_the_pointer() -> None:
    assert pointer_token("persist.example.com/a~b") == "persist.example.com~1a~0b"
    patch = admission_patch(gpu_node(), RULES, {"persist.example.com/owner": "a"}, NOW)
    assert {"op": "add", "path": "/metadata/labels/persist.example.com~1owner", "value": "a"} in (
        patch.ops
    )


def test_a_node_without_labels_gets_a_label_map() -> None:
    node = gpu_node(metadata={"name": "n1"})
    assert admitted(node, {"persist.example.com/team": "ml"})["metadata"]["labels"] == {
        "persist.example.com/team": "ml"
    }


def test_restored_labels_count_for_the_gates_match() -> None:
    node = gpu_node(metadata={"name": "n1", "labels": {}})
    taints = admitted(node, {"persist.example.com/team": "ml"})["spec"]["taints"]
    assert [t["key"] for t in taints] == ["startup.example.com/guard"]
    assert taints[0]["timeAdded"] == "2026-11-21T12:00:00Z"  # NoExecute, as the reconciler


@pytest.mark.parametrize(
    "stored",
    [
        pytest.param({"other.example.com/x": "1"}, id="not-persisted-by-the-rules"),
        pytest.param({"persist.example.com/x": "has space"}, id="invalid-value"),
        pytest.param({"persist.example.com/": "v"}, id="invalid-key"),
        pytest.param({"kubernetes.io/hostname": "evil"}, id="platform-owned"),
    ],
)
def test_stored_labels_the_rules_or_the_api_would_refuse_are_not_restored(
    stored: dict[str, str],
) -> None:
    node = gpu_node(metadata={"name": "n1", "labels": {"example.com/pool": "cpu"}})
    assert admission_patch(node, RULES, stored, NOW).ops == ()


def test_without_persistent_labels_in_the_rules_no_label_is_restored() -> None:
    bare = rules(
        """\
        startupGates:
          - name: warmup
            match: {labels: {example.com/pool: gpu}}
            taint: {key: startup.example.com/init, value: wait, effect: NoSchedule}
            readyWhen: {annotation: example.com/ready=true}
        """
    )
    patch = admission_patch(gpu_node(), bare, {"persist.example.com/team": "ml"}, NOW)
    assert patch.labels == {}


@pytest.mark.parametrize(
    "node",
    [
        pytest.param(gpu_node(spec={"taints": "nope"}), id="taints-not-a-list"),
        pytest.param(gpu_node(spec=["nope"]), id="spec-not-a-map"),
    ],
)
def test_a_spec_not_in_the_api_shape_is_left_alone_and_said(node: dict[str, Any]) -> None:
    patch = admission_patch(node, RULES, {}, NOW)
    assert patch.ops == () and patch.skipped


def test_the_aks_example_gates_user_pools_and_skips_system_pools() -> None:
    aks = load_rules(EXAMPLES / "aks-webhook-rules.yaml")

    def gates(mode: str) -> tuple[str, ...]:
        node = {"metadata": {"name": "aks-1", "labels": {"kubernetes.azure.com/mode": mode}}}
        return admission_patch(node, aks, {}, NOW).gates

    assert gates("user") == ("user-pool-warmup",)
    assert gates("system") == ()


LABELS = st.dictionaries(
    st.sampled_from(["example.com/pool", "persist.example.com/team", "a/b~c", "x"]),
    st.sampled_from(["gpu", "ml", "cpu", ""]),
    max_size=4,
)
TAINTS = st.lists(
    st.fixed_dictionaries(
        {
            "key": st.sampled_from(["startup.example.com/init", "startup.example.com/guard", "k"]),
            "effect": st.sampled_from(["NoSchedule", "NoExecute"]),
            "value": st.sampled_from(["", "v", "wait"]),
        }
    ),
    max_size=4,
)


@given(LABELS, TAINTS, LABELS, st.booleans(), st.booleans())
def test_the_patch_never_drops_or_changes_an_existing_taint_or_label(
    labels: dict[str, str],
    taints: list[dict[str, str]],
    stored: dict[str, str],
    with_labels: bool,
    with_taints: bool,
) -> None:
    metadata: dict[str, Any] = {"name": "n1", **({"labels": labels} if with_labels else {})}
    node = gpu_node(metadata=metadata, spec={"taints": taints} if with_taints else {})
    after = admitted(node, stored)
    after_labels = after["metadata"].get("labels", {})
    assert all(after_labels[k] == v for k, v in metadata.get("labels", {}).items())
    before = node["spec"].get("taints", [])
    now = after["spec"].get("taints", [])
    assert now[: len(before)] == before
    added = [(t["key"], t["effect"]) for t in now[len(before) :]]
    assert len(set(added)) == len(added)
    assert not set(added) & {(t["key"], t["effect"]) for t in before}


def test_the_gate_added_is_claimed_in_the_ownership_annotation() -> None:
    annotations = admitted(gpu_node())["metadata"]["annotations"]
    assert annotations[OWNED_TAINTS_ANNOTATION] == f"{GATE['key']}:{GATE['effect']}"


def test_a_claim_the_node_registered_with_is_joined_never_replaced() -> None:
    metadata = {
        "name": "n1",
        "labels": {"example.com/pool": "gpu"},
        "annotations": {OWNED_TAINTS_ANNOTATION: "example.com/x:NoSchedule", "other": "kept"},
    }
    annotations = admitted(gpu_node(metadata=metadata))["metadata"]["annotations"]
    claimed = f"example.com/x:NoSchedule,{GATE['key']}:{GATE['effect']}"
    assert annotations == {OWNED_TAINTS_ANNOTATION: claimed, "other": "kept"}


def test_no_gate_added_means_no_claim_written() -> None:
    assert "annotations" not in admitted(gpu_node(metadata={"name": "n1"}))["metadata"]


def test_a_dry_run_gate_is_not_added_at_admission() -> None:
    dry = rules(
        """\
        startupGates:
          - name: warmup
            dryRun: true
            match: {labels: {example.com/pool: gpu}}
            taint: {key: startup.example.com/init, value: wait, effect: NoSchedule}
            readyWhen: {annotation: example.com/ready=true}
        """
    )
    patch = admission_patch(gpu_node(), dry, {}, NOW)
    assert (patch.gates, patch.ops) == ((), ())
