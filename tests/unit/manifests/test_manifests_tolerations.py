"""The reconciler's pods tolerate their own gates, whatever the effect, for ever, and any other
NoExecute taint for a bounded time at most (rules from objects: a gate applied after the
installation): a NoExecute gate on every node must not leave them Pending (issue 27), and a
dead node must still evict them."""

from __future__ import annotations

from typing import Any

import pytest

from nodegate.core.rules.loader import RulesDocument
from nodegate.manifests.tolerations import describe_gate_tolerations
from tests.unit.manifests.support import ON_CONFIGMAP, build, one

NETWORK_GATE = ("node.cilium.io/agent-not-ready", "NoExecute")

GATES = f"""\
apiVersion: nodegate.dev/v1
kind: NodeRules
startupGates:
  - name: network
    match: {{labels: {{pool: any}}}}
    taint: {{key: {NETWORK_GATE[0]}, value: "true", effect: {NETWORK_GATE[1]}}}
    readyWhen: {{pods: {{namespace: kube-system, selector: {{k8s-app: cilium}}}}}}
  - name: warmup
    match: {{labels: {{pool: gpu}}}}
    taint: {{key: startup.example.com/warmup, value: wait, effect: PreferNoSchedule}}
    formerKeys: [startup.k8s.io/initializing]
    readyWhen: {{annotation: example.com/ready=true}}
"""


def _document(text: str = GATES) -> RulesDocument:
    return RulesDocument.parse(text, "rules.yaml")


def _tolerations(document: RulesDocument, **overrides: Any) -> list[dict[str, Any]]:
    deployment = one(build(document, **overrides), "Deployment")
    tolerations: list[dict[str, Any]] = deployment["spec"]["template"]["spec"]["tolerations"]
    return tolerations


def tolerates(toleration: dict[str, Any], key: str, value: str, effect: str) -> bool:
    """Kubernetes' `Toleration.ToleratesTaint` (k8s.io/api/core/v1/toleration.go)."""
    if toleration.get("effect") not in (None, effect):
        return False
    if toleration.get("key") not in (None, key):
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return True
    return bool(toleration.get("value", "") == value)


def _first_match(tolerations: list[dict[str, Any]], key: str, effect: str) -> dict[str, Any]:
    return next(t for t in tolerations if tolerates(t, key, "any", effect))


def test_every_gate_taint_is_tolerated_by_key_and_effect_whatever_its_value() -> None:
    tolerations = _tolerations(_document())

    assert tolerations[:3] == [
        {"key": NETWORK_GATE[0], "operator": "Exists", "effect": "NoExecute"},
        {"key": "startup.example.com/warmup", "operator": "Exists", "effect": "PreferNoSchedule"},
        {"key": "startup.k8s.io/initializing", "operator": "Exists", "effect": "PreferNoSchedule"},
    ]
    for value in ("true", "false", ""):
        assert any(tolerates(t, *NETWORK_GATE[:1], value, NETWORK_GATE[1]) for t in tolerations)


@pytest.mark.parametrize(
    "taint",
    [
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("example.com/nic-kaput", "NoExecute"),  # what a condition rule adds to empty a node
    ],
    ids=["unreachable", "not-ready", "condition-taint"],
)
def test_no_other_noexecute_taint_is_tolerated_for_ever_so_a_failing_node_still_evicts(
    taint: tuple[str, str],
) -> None:
    on_objects, on_configmap = _tolerations(_document()), _tolerations(_document(), **ON_CONFIGMAP)

    assert _first_match(on_objects, *taint)["tolerationSeconds"] == 300
    assert not any(tolerates(t, taint[0], "", taint[1]) for t in on_configmap)


def test_on_rules_objects_a_gate_applied_later_is_tolerated_for_a_while_after_all_others() -> None:
    later_gate = ("example.com/team-agent-not-ready", "NoExecute")
    tolerations = _tolerations(_document(), unknownGateSeconds=600)

    assert tolerations[-1] == {
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 600,
    }
    assert _first_match(tolerations, *later_gate) == tolerations[-1]
    assert "tolerationSeconds" not in _first_match(tolerations, *NETWORK_GATE)
    without = _tolerations(_document(), unknownGateSeconds=None)
    assert not any(tolerates(t, *later_gate[:1], "", later_gate[1]) for t in without)


def test_no_tolerations_setting_can_drop_the_gates() -> None:
    tolerations = _tolerations(_document(), tolerations=[])

    assert {(t["key"], t["effect"]) for t in tolerations if "key" in t} == {
        NETWORK_GATE,
        ("startup.example.com/warmup", "PreferNoSchedule"),
        ("startup.k8s.io/initializing", "PreferNoSchedule"),
    }


def test_the_gate_toleration_decides_eviction_before_a_timed_setting() -> None:
    # The taint manager uses the first toleration matching a NoExecute taint: a setting's
    # tolerationSeconds must not time the pods out of a gated node.
    timed = {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}
    tolerations = _tolerations(_document(), tolerations=[timed])

    assert "tolerationSeconds" not in _first_match(tolerations, *NETWORK_GATE)
    assert timed in tolerations


def test_a_setting_equal_to_a_gate_toleration_is_listed_once() -> None:
    same = {"key": NETWORK_GATE[0], "operator": "Exists", "effect": "NoExecute"}
    tolerations = _tolerations(_document(), tolerations=[same])

    assert tolerations.count(same) == 1


def test_rules_without_gates_leave_the_settings_tolerations_alone() -> None:
    no_gates = "apiVersion: nodegate.dev/v1\nkind: NodeRules\n"

    assert _tolerations(_document(no_gates), **ON_CONFIGMAP) == [
        {"operator": "Exists", "effect": "NoSchedule"},
        {"operator": "Exists", "effect": "PreferNoSchedule"},
    ]
    assert describe_gate_tolerations(_document(no_gates).rules) is None


def test_validate_says_which_gates_the_deployment_tolerates() -> None:
    line = describe_gate_tolerations(_document().rules)

    assert line is not None
    assert f"{NETWORK_GATE[0]}:NoExecute" in line
    assert "startup.k8s.io/initializing:PreferNoSchedule" in line
