"""A pool run by Karpenter as a NodePool: gates in startupTaints, permanent taints in taints."""

from __future__ import annotations

import pytest

from nodegate.bootstrap.errors import BootstrapError
from nodegate.bootstrap.karpenter import render_karpenter_nodepool
from nodegate.core.model import NodeRules
from nodegate.core.yaml_output import dump_all
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
