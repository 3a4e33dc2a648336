"""`OkeNodePool`: an OKE node pool whose nodes register already carrying the rules' taints.

The taints and labels reach kubelet through the pool's user_data (cloud-init running OKE's init
script with `--register-with-taints` / `--node-labels`), rendered by `nodegate.bootstrap.oke`
from the rules. OKE applies node metadata to nodes it creates *after* an update; existing nodes
keep theirs until they are cycled (see docs/infra.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_oci as oci

from nodegate.bootstrap.oke import render_oke_cloud_init
from nodegate.bootstrap.registration import registration_labels, registration_taints
from nodegate.core.model import NodePool, NodeRules
from nodegate.infra.cloud_inputs import encode_user_data, initial_node_labels, sha256_hex

TYPE_TOKEN = "nodegate:index:OkeNodePool"


@dataclass(frozen=True, kw_only=True)
class OkePlacementArgs:
    """One availability domain the pool places nodes in."""

    availability_domain: pulumi.Input[str]
    """e.g. 'Uocm:PHX-AD-1'."""
    subnet_id: pulumi.Input[str]
    """Worker subnet OCID in that availability domain."""
    fault_domains: pulumi.Input[Sequence[pulumi.Input[str]]] | None = None
    """Optional fault domains; None lets OCI choose."""


@dataclass(frozen=True, kw_only=True)
class OkeNodeCyclingArgs:
    """Replace existing nodes when the pool's properties change (OKE enhanced clusters)."""

    maximum_surge: pulumi.Input[str] = "1"
    """Extra nodes during cycling: a count or a percentage such as '25%'."""
    maximum_unavailable: pulumi.Input[str] = "0"
    """Nodes that may be unavailable during cycling: a count or a percentage."""


@dataclass(frozen=True, kw_only=True)
class OkeNodePoolArgs:
    """Inputs of one OKE node pool; the taints and labels come from `rules`, never from here."""

    rules: NodeRules
    """The validated rules; `pool_name` must name one of its pools with provider oke."""
    pool_name: str
    """The rules pool this node pool realises."""
    compartment_id: pulumi.Input[str]
    """Compartment OCID the node pool is created in."""
    cluster_id: pulumi.Input[str]
    """OKE cluster OCID."""
    kubernetes_version: pulumi.Input[str]
    """Kubernetes version of the nodes, e.g. 'v1.31.1'."""
    node_shape: pulumi.Input[str]
    """Compute shape, e.g. 'VM.Standard.E5.Flex'."""
    image_id: pulumi.Input[str]
    """OKE worker image OCID."""
    placements: Sequence[OkePlacementArgs]
    """At least one availability domain + subnet."""
    size: pulumi.Input[int] | None = None
    """Number of nodes; None: the rules pool `size`."""
    ocpus: pulumi.Input[float] | None = None
    """OCPUs per node (flexible shapes only)."""
    memory_in_gbs: pulumi.Input[float] | None = None
    """Memory per node in GB (flexible shapes only)."""
    boot_volume_size_in_gbs: pulumi.Input[int] | None = None
    """Boot volume size in GB; None: the image's."""
    user_cloud_init: pulumi.Input[str] | None = None
    """Cloud-init (`#cloud-config` or `#!` script) to run before nodegate's boot script."""
    node_pool_name: pulumi.Input[str] | None = None
    """OKE display name; None: the rules pool name."""
    node_cycling: OkeNodeCyclingArgs | None = None
    """Opt-in node cycling; None: only new nodes get a changed user_data."""


def _checked_pool(args: OkeNodePoolArgs) -> NodePool:
    """The rules pool, refusing args that could not produce a correct node pool."""
    pool = args.rules.pool(args.pool_name)
    if pool is None:
        names = ", ".join(p.name for p in args.rules.node_pools) or "none"
        raise ValueError(f"pool '{args.pool_name}' is not in the rules (pools: {names})")
    if pool.provider != "oke":
        raise ValueError(f"pool '{pool.name}' has provider {pool.provider}, not oke")
    if not args.placements:
        raise ValueError(f"pool '{pool.name}': give at least one placement (AD + subnet)")
    if isinstance(args.size, int) and not 0 <= args.size <= 1000:
        raise ValueError(f"pool '{pool.name}': size {args.size} is outside 0..1000")
    if args.user_cloud_init is None or isinstance(args.user_cloud_init, str):
        # Known now: render once so a bad rendering (e.g. over OCI's size limit) raises before
        # anything is declared, rather than inside an apply during the deployment.
        render_oke_cloud_init(args.rules, pool, args.user_cloud_init)
    return pool


class OkeNodePool(pulumi.ComponentResource):
    """One OKE node pool whose nodes are born with the rules' taints and labels."""

    node_pool: oci.containerengine.NodePool
    """The OCI node pool resource."""
    node_pool_id: pulumi.Output[str]
    registration_taints: pulumi.Output[list[str]]
    """Taints every node carries from registration (`key=value:Effect`)."""
    registration_labels: pulumi.Output[dict[str, str]]
    """Labels kubelet sets at registration (also OKE's initial node labels)."""
    bootstrap_sha256: pulumi.Output[str]
    """SHA-256 of the rendered cloud-init, to trace which nodes booted with which rendering."""

    def __init__(
        self,
        name: str,
        args: OkeNodePoolArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        pool = _checked_pool(args)
        super().__init__(TYPE_TOKEN, name, None, opts)
        rules = args.rules

        cloud_init = pulumi.Output.from_input(args.user_cloud_init).apply(
            lambda user: render_oke_cloud_init(rules, pool, user)
        )
        labels = registration_labels(pool)
        taints = [t.flag() for t in registration_taints(rules, pool)]
        shape_config = (
            None
            if args.ocpus is None and args.memory_in_gbs is None
            else oci.containerengine.NodePoolNodeShapeConfigArgs(
                ocpus=args.ocpus, memory_in_gbs=args.memory_in_gbs
            )
        )
        cycling = (
            None
            if args.node_cycling is None
            else oci.containerengine.NodePoolNodePoolCyclingDetailsArgs(
                is_node_cycling_enabled=True,
                maximum_surge=args.node_cycling.maximum_surge,
                maximum_unavailable=args.node_cycling.maximum_unavailable,
            )
        )

        self.node_pool = oci.containerengine.NodePool(
            f"{name}-nodepool",
            oci.containerengine.NodePoolArgs(
                compartment_id=args.compartment_id,
                cluster_id=args.cluster_id,
                name=args.node_pool_name if args.node_pool_name is not None else pool.name,
                kubernetes_version=args.kubernetes_version,
                node_shape=args.node_shape,
                node_shape_config=shape_config,
                node_source_details=oci.containerengine.NodePoolNodeSourceDetailsArgs(
                    source_type="IMAGE",
                    image_id=args.image_id,
                    boot_volume_size_in_gbs=(
                        None
                        if args.boot_volume_size_in_gbs is None
                        else pulumi.Output.from_input(args.boot_volume_size_in_gbs).apply(str)
                    ),
                ),
                node_config_details=oci.containerengine.NodePoolNodeConfigDetailsArgs(
                    size=args.size if args.size is not None else pool.size,
                    placement_configs=[
                        oci.containerengine.NodePoolNodeConfigDetailsPlacementConfigArgs(
                            availability_domain=p.availability_domain,
                            subnet_id=p.subnet_id,
                            fault_domains=p.fault_domains,
                        )
                        for p in args.placements
                    ],
                ),
                node_metadata={"user_data": cloud_init.apply(encode_user_data)},
                initial_node_labels=[
                    oci.containerengine.NodePoolInitialNodeLabelArgs(
                        key=label["key"], value=label["value"]
                    )
                    for label in initial_node_labels(labels)
                ],
                node_pool_cycling_details=cycling,
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )

        self.node_pool_id = self.node_pool.id
        self.registration_taints = pulumi.Output.from_input(taints)
        self.registration_labels = pulumi.Output.from_input(labels)
        self.bootstrap_sha256 = cloud_init.apply(sha256_hex)
        self.register_outputs(
            {
                "nodePoolId": self.node_pool_id,
                "registrationTaints": self.registration_taints,
                "registrationLabels": self.registration_labels,
                "bootstrapSha256": self.bootstrap_sha256,
            }
        )
