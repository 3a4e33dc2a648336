"""`OkeNodePool`: an OKE node pool whose nodes register already carrying the rules' taints.

The taints and labels reach kubelet through the pool's user_data (cloud-init running OKE's init
script with `--register-with-taints` / `--node-labels`), rendered by `nodegate.bootstrap.oke`
from the rules; the same flags sit in the node metadata `kubelet-extra-args`, where
cluster-autoscaler reads the taints of a pool it scales up from zero. OKE applies node metadata
to nodes it creates *after* an update; existing nodes keep theirs until they are cycled (see
docs/infra.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_oci as oci

from nodegate.bootstrap.oke import (
    ImageFamily,
    oke_node_metadata,
    render_oke_cloud_init,
    user_data_budget,
)
from nodegate.bootstrap.registration import registration_labels, registration_taints
from nodegate.core.rules.model import NodePool, NodeRules
from nodegate.infra.cloud_inputs import encode_user_data, initial_node_labels, sha256_hex
from nodegate.infra.planned_pool import DeclareContext

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
class OkePodNetworkArgs:
    """Pod networking of the pool (OKE `nodePoolPodNetworkOptionDetails`)."""

    cni_type: pulumi.Input[str]
    """'OCI_VCN_IP_NATIVE' (pods get VCN IPs from pod subnets) or 'FLANNEL_OVERLAY'."""
    pod_subnet_ids: pulumi.Input[Sequence[pulumi.Input[str]]] | None = None
    pod_nsg_ids: pulumi.Input[Sequence[pulumi.Input[str]]] | None = None
    max_pods_per_node: pulumi.Input[int] | None = None


IGNORABLE: dict[str, str] = {
    "size": "nodeConfigDetails.size",
    "kubernetesVersion": "kubernetesVersion",
    "image": "nodeSourceDetails.imageId",
}
"""Names accepted in `ignore_changes`, and the NodePool property each one stands for."""


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
    image_family: ImageFamily = "oracle-linux"
    """Family of `image_id`: how the boot script joins the node (see nodegate.bootstrap.oke)."""
    nsg_ids: pulumi.Input[Sequence[pulumi.Input[str]]] | None = None
    """Network security groups of the nodes' primary VNICs."""
    ssh_public_key: pulumi.Input[str] | None = None
    """OpenSSH public key for the nodes."""
    kms_key_id: pulumi.Input[str] | None = None
    """OCI Vault key encrypting the boot volumes."""
    pod_network: OkePodNetworkArgs | None = None
    """Pod networking; None: the cluster's default."""
    preemptible: bool = False
    """Preemptible capacity in every placement (nodes are terminated when reclaimed)."""
    ignore_changes: Sequence[str] = ()
    """Keys of IGNORABLE that `pulumi up` leaves as they are found (changed outside Pulumi)."""

    def check(self) -> None:
        """What `OkeNodePool` checks and renders before declaring (see `PlannedPool`)."""
        _checked_pool(self)

    def declare(self, context: DeclareContext) -> dict[str, Any]:
        """Declare the `OkeNodePool`; its outputs, as the stack exports them."""
        node_pool = OkeNodePool(self.pool_name, self)
        return {
            "provider": "oke",
            "nodePoolId": node_pool.node_pool_id,
            "registrationTaints": node_pool.registration_taints,
            "registrationLabels": node_pool.registration_labels,
            "bootstrapSha256": node_pool.bootstrap_sha256,
        }


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
    unknown = [name for name in args.ignore_changes if name not in IGNORABLE]
    if unknown:
        raise ValueError(
            f"pool '{pool.name}': cannot ignore changes of {', '.join(unknown)}; "
            f"use {', '.join(IGNORABLE)}"
        )
    if args.user_cloud_init is None or isinstance(args.user_cloud_init, str):
        # Known now: render once so a bad rendering (e.g. over OCI's size limit) raises before
        # anything is declared, rather than inside an apply during the deployment.
        render_oke_cloud_init(
            args.rules, pool, args.user_cloud_init, image_family=args.image_family
        )
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

        family = args.image_family
        cloud_init = pulumi.Output.from_input(args.user_cloud_init).apply(
            lambda user: render_oke_cloud_init(rules, pool, user, image_family=family)
        )
        labels = registration_labels(pool)
        taints = [t.flag() for t in registration_taints(rules, pool)]
        budget = user_data_budget(rules, pool)
        shape_config = (
            None
            if args.ocpus is None and args.memory_in_gbs is None
            else oci.containerengine.NodePoolNodeShapeConfigArgs(
                ocpus=args.ocpus, memory_in_gbs=args.memory_in_gbs
            )
        )
        preemptible = (
            oci.containerengine.NodePoolNodeConfigDetailsPlacementConfigPreemptibleNodeConfigArgs(
                preemption_action=oci.containerengine.NodePoolNodeConfigDetailsPlacementConfigPreemptibleNodeConfigPreemptionActionArgs(
                    type="TERMINATE", is_preserve_boot_volume=False
                )
            )
            if args.preemptible
            else None
        )
        network = args.pod_network
        pod_network = (
            None
            if network is None
            else oci.containerengine.NodePoolNodeConfigDetailsNodePoolPodNetworkOptionDetailsArgs(
                cni_type=network.cni_type,
                pod_subnet_ids=network.pod_subnet_ids,
                pod_nsg_ids=network.pod_nsg_ids,
                max_pods_per_node=network.max_pods_per_node,
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
                            preemptible_node_config=preemptible,
                        )
                        for p in args.placements
                    ],
                    nsg_ids=args.nsg_ids,
                    kms_key_id=args.kms_key_id,
                    node_pool_pod_network_option_details=pod_network,
                ),
                ssh_public_key=args.ssh_public_key,
                node_metadata={
                    **oke_node_metadata(rules, pool),
                    "user_data": cloud_init.apply(
                        lambda text: encode_user_data(pool.name, text, budget)
                    ),
                },
                initial_node_labels=[
                    oci.containerengine.NodePoolInitialNodeLabelArgs(
                        key=label["key"], value=label["value"]
                    )
                    for label in initial_node_labels(labels)
                ],
                node_pool_cycling_details=cycling,
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                ignore_changes=[IGNORABLE[n] for n in args.ignore_changes] or None,
            ),
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
