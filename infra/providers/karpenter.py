"""`KarpenterNodePool`: a Karpenter NodePool (AKS node auto-provisioning, or any Karpenter) whose
nodes are born with the rules' taints: gates in `startupTaints`, permanent taints in `taints`.

A pool run by Karpenter has no cloud node pool to declare: Karpenter launches its nodes from the
NodePool, a Kubernetes object, so this component declares that object (rendered by
`nodegate.bootstrap.karpenter`, the same function behind `nodegate render --format
karpenter-nodepool`) on a Kubernetes provider for the cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from nodegate.bootstrap.karpenter import nodepool_notes, render_karpenter_nodepool
from nodegate.core.rules.model import NodePool, NodeRules, Taint
from nodegate.infra.cloud_inputs import stack_owned
from nodegate.infra.providers.base import rules_pool

TYPE_TOKEN = "nodegate:index:KarpenterNodePool"


@dataclass(frozen=True, kw_only=True)
class KarpenterNodePoolArgs:
    """Inputs of one Karpenter NodePool; everything in it comes from `rules`."""

    rules: NodeRules
    """The validated rules; `pool_name` must name a pool whose autoscaler is karpenter."""
    pool_name: str
    kubeconfig: pulumi.Input[str] | None = None
    """Kubeconfig of the cluster (contents or a path); None: the ambient one."""
    context: pulumi.Input[str] | None = None
    """Kubeconfig context; None: the kubeconfig's current one."""
    provider: k8s.Provider | None = None
    """A Kubernetes provider of your own (then kubeconfig and context are ignored)."""

    def check(self) -> tuple[NodePool, dict[str, Any]]:
        """The checked pool and its NodePool rendered (pure: raises before declaring)."""
        pool = rules_pool(self.rules, self.pool_name)
        if pool.autoscaler_type != "karpenter":
            raise ValueError(
                f"pool '{pool.name}' is not run by Karpenter (autoscaler: {pool.autoscaler_type})"
            )
        return pool, render_karpenter_nodepool(self.rules, pool)

    def declare(self, deploys_webhook: bool) -> dict[str, Any]:
        nodepool = KarpenterNodePool(self.pool_name, self)
        return {
            "provider": "karpenter",
            "nodePoolName": nodepool.node_pool_name,
            "taints": nodepool.taints,
            "startupTaints": nodepool.startup_taints,
        }


class KarpenterNodePool(pulumi.ComponentResource):
    """One Karpenter NodePool whose nodes are born with the rules' taints and labels."""

    node_pool: k8s.apiextensions.CustomResource
    node_pool_name: pulumi.Output[str]
    taints: pulumi.Output[list[str]]
    """The NodePool's `taints` (`key=value:Effect`): permanent label taints."""
    startup_taints: pulumi.Output[list[str]]
    """The NodePool's `startupTaints`: the pool's startup gates."""

    def __init__(
        self, name: str, args: KarpenterNodePoolArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        pool, rendered = args.check()
        super().__init__(TYPE_TOKEN, name, None, opts)
        provider = args.provider or k8s.Provider(
            f"{name}-provider",
            kubeconfig=args.kubeconfig,
            context=args.context,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.node_pool = k8s.apiextensions.CustomResource(
            f"{name}-nodepool",
            api_version=rendered["apiVersion"],
            kind=rendered["kind"],
            metadata=stack_owned(rendered["metadata"]),
            spec=rendered["spec"],
            opts=pulumi.ResourceOptions(parent=self, provider=provider),
        )
        spec = rendered["spec"]["template"]["spec"]

        def flags(key: str) -> list[str]:  # the rendered taints, as `key=value:Effect`
            return [Taint.model_construct(**t).flag() for t in spec.get(key, [])]

        for note in nodepool_notes(args.rules, pool):
            pulumi.log.info(note, resource=self)
        self.node_pool_name = pulumi.Output.from_input(rendered["metadata"]["name"])
        self.taints = pulumi.Output.from_input(flags("taints"))
        self.startup_taints = pulumi.Output.from_input(flags("startupTaints"))
        self.register_outputs(
            {
                "nodePoolName": self.node_pool_name,
                "taints": self.taints,
                "startupTaints": self.startup_taints,
            }
        )
