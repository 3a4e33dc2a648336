"""A pool run by Karpenter as a NodePool: gates in startupTaints, permanent taints in taints."""

from __future__ import annotations

import pytest

from nodegate.bootstrap.errors import BootstrapError
from nodegate.bootstrap.karpenter import nodepool_notes, render_karpenter_nodepool
from nodegate.core.rules.model import NodeRules
from nodegate.core.text.yaml_output import dump_all
from tests.unit.bootstrap.support import check_golden, karpenter_pool_params, rules_and_pool

KARPENTER_POOLS = karpenter_pool_params()


@pytest.mark.parametrize(("rule_set", "pool"), KARPENTER_POOLS)
def test_karpenter_nodepool_matches_golden(rule_set: str, pool: str) -> None:
    rules, node_pool = rules_and_pool(rule_set, pool)
    rendered = dump_all([render_karpenter_nodepool(rules, node_pool)])
    check_golden(f"{rule_set}/{pool}.karpenter-nodepool.yaml", rendered)


def test_gates_go_to_startup_taints_and_permanent_taints_to_taints() -> None:
    rules, pool = rules_and_pool("autoscaled", "gpu-nap")
    spec = render_karpenter_nodepool(rules, pool)["spec"]["template"]["spec"]
    assert spec["startupTaints"] == [
        {
            "key": "startup-taint.cluster-autoscaler.kubernetes.io/gpu-init",
            "value": "wait",
            "effect": "NoSchedule",
        }
    ]
    assert spec["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]


def test_the_nodepool_is_named_as_configured_and_labels_its_nodes_with_the_pool() -> None:
    rules, pool = rules_and_pool("autoscaled", "gpu-nap")
    rendered = render_karpenter_nodepool(rules, pool)
    assert rendered["metadata"]["name"] == "gpu"
    assert rendered["spec"]["template"]["metadata"]["labels"]["nodegate.dev/pool"] == "gpu-nap"


def test_aks_pools_default_to_node_auto_provisionings_node_class() -> None:
    rules, pool = rules_and_pool("autoscaled", "gpu-nap")
    assert render_karpenter_nodepool(rules, pool)["spec"]["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.azure.com",
        "kind": "AKSNodeClass",
        "name": "default",
    }


def _rules(autoscaler: dict[str, object], provider: str = "aks") -> NodeRules:
    """Typed rules without the loader's cross-checks, to reach the renderer's own refusals."""
    return NodeRules.model_validate(
        {
            "apiVersion": "nodegate.dev/v1",
            "kind": "NodeRules",
            "nodePools": [{"name": "p", "provider": provider, "size": 0, "autoscaler": autoscaler}],
        }
    )


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        pytest.param(_rules({"type": "cluster-autoscaler"}), "is not run by Karpenter", id="ca"),
        pytest.param(
            _rules({"type": "karpenter", "externalStartupTaints": []}),
            "that nodegate does not render",
            id="external",
        ),
        pytest.param(
            _rules({"type": "karpenter"}, provider="oke"), "needs autoscaler.nodeClassRef", id="oke"
        ),
    ],
)
def test_a_nodepool_that_cannot_be_rendered_is_refused(rules: NodeRules, message: str) -> None:
    pool = rules.node_pools[0]
    with pytest.raises(BootstrapError, match=message):
        render_karpenter_nodepool(rules, pool)


PREEMPTIBLE = {
    "key": "oci.oraclecloud.com/oke-is-preemptible",
    "effect": "NoSchedule",
    "value": "present",
}
NRC_GATE = {"key": "readiness.k8s.io/gpu-ready", "effect": "NoSchedule"}


@pytest.mark.parametrize("version", ["v1.6.2", "v1.12.1", "v1.13.0", "v1.14.1"])
def test_an_oracle_nodepool_lists_its_gates_in_startup_taints_whatever_the_karpenter_version(
    version: str,
) -> None:
    """Below v1.13.0 the list is the only way Karpenter knows the gate; from v1.13.0 it would
    know a readiness.k8s.io/ gate anyway, and the list is still what births the node with it."""
    rules = _oracle({"version": version})
    spec = render_karpenter_nodepool(rules, rules.node_pools[0])["spec"]["template"]["spec"]
    assert spec["startupTaints"] == [NRC_GATE]


def _oracle(autoscaler: dict[str, object], requirements: list[object] | None = None) -> NodeRules:
    """One OKE pool run by karpenter-provider-oci, gated by a readiness.k8s.io/ key."""
    return NodeRules.model_validate(
        {
            "apiVersion": "nodegate.dev/v1",
            "kind": "NodeRules",
            "startupGates": [
                {
                    "name": "gpu-ready",
                    "match": {"labels": {"pool": "p"}},
                    "taint": NRC_GATE,
                    "readyWhen": {"pods": {"namespace": "kube-system", "selector": {"app": "i"}}},
                }
            ],
            "nodePools": [
                {
                    "name": "p",
                    "provider": "oke",
                    "size": 0,
                    "labels": {"pool": "p"},
                    "autoscaler": {
                        "type": "karpenter",
                        "nodeClassRef": {
                            "group": "oci.oraclecloud.com",
                            "kind": "OCINodeClass",
                            "name": "default",
                        },
                        **({"requirements": requirements} if requirements is not None else {}),
                        **autoscaler,
                    },
                }
            ],
        }
    )


def _capacity(operator: str, *values: str) -> list[object]:
    requirement: dict[str, object] = {"key": "karpenter.sh/capacity-type", "operator": operator}
    return [{**requirement, "values": list(values)} if values else requirement]


@pytest.mark.parametrize(
    "requirements",
    [
        pytest.param(_capacity("In", "spot"), id="in-spot"),
        pytest.param(_capacity("In", "spot", "on-demand"), id="in-spot-and-on-demand"),
        pytest.param(_capacity("NotIn", "on-demand", "reserved"), id="not-in-others"),
        pytest.param(_capacity("Exists"), id="exists"),
    ],
)
def test_an_oracle_nodepool_that_may_launch_spot_declares_the_preemptible_taint(
    requirements: list[object],
) -> None:
    rules = _oracle({}, requirements)
    spec = render_karpenter_nodepool(rules, rules.node_pools[0])["spec"]["template"]["spec"]
    assert spec["taints"] == [PREEMPTIBLE]


@pytest.mark.parametrize(
    "requirements",
    [
        pytest.param(None, id="no-capacity-type"),
        pytest.param(_capacity("In", "on-demand"), id="on-demand"),
        pytest.param(_capacity("NotIn", "spot"), id="not-spot"),
        pytest.param(_capacity("DoesNotExist"), id="does-not-exist"),
    ],
)
def test_an_oracle_nodepool_without_spot_gets_no_preemptible_taint(
    requirements: list[object] | None,
) -> None:
    rules = _oracle({}, requirements)
    spec = render_karpenter_nodepool(rules, rules.node_pools[0])["spec"]["template"]["spec"]
    assert "taints" not in spec
    assert nodepool_notes(rules, rules.node_pools[0]) == ()


def test_a_spot_nodepool_of_another_provider_gets_no_preemptible_taint() -> None:
    rules = _rules({"type": "karpenter", "requirements": _capacity("In", "spot")}, provider="aks")
    spec = render_karpenter_nodepool(rules, rules.node_pools[0])["spec"]["template"]["spec"]
    assert "taints" not in spec


def test_the_notes_of_an_oracle_spot_nodepool_name_the_toleration_and_the_gates_init_pods() -> None:
    rules = _oracle({}, _capacity("In", "spot"))
    notes = nodepool_notes(rules, rules.node_pools[0])
    assert len(notes) == 2
    assert "oci.oraclecloud.com/oke-is-preemptible:NoSchedule" in notes[0]
    assert (
        "{key: oci.oraclecloud.com/oke-is-preemptible, operator: Exists, effect: NoSchedule}"
        in notes[1]
    )
    assert "kube-system/app=i (gate 'gpu-ready')" in notes[1]


def test_a_mixed_oracle_nodepool_is_told_its_other_nodes_carry_the_taint_too() -> None:
    rules = _oracle({}, _capacity("In", "spot", "on-demand"))
    notes = nodepool_notes(rules, rules.node_pools[0])
    assert len(notes) == 3
    assert "give spot a NodePool (pool) of its own" in notes[2]
