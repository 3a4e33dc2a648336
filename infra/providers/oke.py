"""OKE in the Pulumi program: `nodegate:oke` and its pool settings, their planning, and
`OkeNodePool`, an OKE node pool whose nodes register already carrying the rules' taints.

The taints and labels reach kubelet through the pool's user_data (cloud-init running OKE's init
script with `--register-with-taints` / `--node-labels`), rendered by `nodegate.bootstrap.oke`
from the rules; the same flags sit in the node metadata `kubelet-extra-args`, where
cluster-autoscaler reads the taints of a pool it scales up from zero. OKE applies node metadata
to nodes it creates *after* an update; existing nodes keep theirs until they are cycled (see
docs/infra.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import pulumi
import pulumi_oci as oci
from pydantic import BeforeValidator, Field, model_validator

from nodegate.bootstrap.oke import (
    ImageFamily,
    oke_node_metadata,
    render_oke_cloud_init,
    user_data_budget,
)
from nodegate.bootstrap.registration import registration_labels, registration_taints
from nodegate.bootstrap.user_data import metadata_payload
from nodegate.core.rules.model import NodePool, NodeRules
from nodegate.core.rules.providers import OKE
from nodegate.core.text.frozen import Frozen
from nodegate.infra.cloud_inputs import sha256_hex
from nodegate.infra.config_base import ConfigProblem, NonEmpty, PoolSize, empty_if_null
from nodegate.infra.providers.base import (
    InfraProvider,
    SettingsArgs,
    pool_key,
    pool_settings,
    rules_pool,
)

TYPE_TOKEN = "nodegate:index:OkeNodePool"


# --- the stack config: `nodegate:oke` --------------------------------------------------------


def _prefix(*prefixes: str) -> Any:
    """Validator: an OCID whose resource type is one of `prefixes` (catches swapped OCIDs)."""

    def check(value: object) -> object:
        if isinstance(value, str) and not value.startswith(tuple(f"ocid1.{p}." for p in prefixes)):
            wanted = " or ".join(f"'ocid1.{p}.…'" for p in prefixes)
            raise ValueError(f"'{value}' is not an OCID of the right kind: expected {wanted}")
        return value

    return BeforeValidator(check)


def _count_text(value: object) -> object:
    """OKE's surge/unavailable accept a count or a percentage; YAML gives ints for counts."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


CompartmentOcid = Annotated[str, _prefix("compartment", "tenancy")]
ClusterOcid = Annotated[str, _prefix("cluster")]
SubnetOcid = Annotated[str, _prefix("subnet")]
ImageOcid = Annotated[str, _prefix("image")]
NsgOcid = Annotated[str, _prefix("networksecuritygroup")]
KeyOcid = Annotated[str, _prefix("key")]
CountOrPercent = Annotated[str, BeforeValidator(_count_text), Field(pattern=r"^\d+%?$")]


class OkePlacement(Frozen):
    """Where a pool's nodes go: one entry per availability domain."""

    availability_domain: NonEmpty
    """Availability domain name as OCI spells it, e.g. 'Uocm:PHX-AD-1'."""
    subnet_id: SubnetOcid
    """Worker subnet OCID in that availability domain."""
    fault_domains: tuple[NonEmpty, ...] = ()
    """Optional fault domains, e.g. ['FAULT-DOMAIN-1']; empty lets OCI choose."""


class OkeShapeConfig(Frozen):
    """Size of a flexible shape (e.g. VM.Standard.E5.Flex); leave unset for fixed shapes."""

    ocpus: float | None = Field(default=None, gt=0)
    """OCPUs per node."""
    memory_in_gbs: float | None = Field(default=None, gt=0)
    """Memory per node, in GB."""


class OkeNodeCycling(Frozen):
    """Opt-in: let OKE replace existing nodes when the pool changes (enhanced clusters only)."""

    maximum_surge: CountOrPercent = "1"
    """Extra nodes OKE may add while cycling: a count ('1') or a percentage ('25%')."""
    maximum_unavailable: CountOrPercent = "0"
    """Nodes that may be unavailable while cycling: a count or a percentage."""


OkeIgnorable = Literal["size", "kubernetesVersion", "image"]


def _ssh_key(value: object) -> object:
    if isinstance(value, str) and not value.startswith(("ssh-", "ecdsa-", "sk-")):
        raise ValueError(
            "not an OpenSSH public key: give the key itself (e.g. the contents of "
            "~/.ssh/id_ed25519.pub, starting 'ssh-ed25519 '), not a path"
        )
    return value


class OkePodNetwork(Frozen):
    """How pods get IP addresses: OCI VCN-native pod networking, or flannel overlay."""

    cni_type: Literal["OCI_VCN_IP_NATIVE", "FLANNEL_OVERLAY"]
    """The cluster's CNI (it must match how the cluster was created)."""
    pod_subnet_ids: tuple[SubnetOcid, ...] = ()
    """Subnets pods take their IPs from (VCN-native only; at least one)."""
    pod_nsg_ids: tuple[NsgOcid, ...] = ()
    """Network security groups of the pods' VNICs (VCN-native only)."""
    max_pods_per_node: int | None = Field(default=None, ge=1, le=110)
    """Cap on pods per node (VCN-native only; also limited by the shape's VNICs)."""

    @model_validator(mode="after")
    def _fits_cni(self) -> OkePodNetwork:
        native = self.cni_type == "OCI_VCN_IP_NATIVE"
        if native and not self.pod_subnet_ids:
            raise ValueError("OCI_VCN_IP_NATIVE needs podSubnetIds (at least one pod subnet)")
        if not native and (self.pod_subnet_ids or self.pod_nsg_ids or self.max_pods_per_node):
            raise ValueError(
                "podSubnetIds, podNsgIds and maxPodsPerNode apply to OCI_VCN_IP_NATIVE only"
            )
        return self


class OkePoolFields(Frozen):
    """Per-pool OKE settings; in `defaults` and in `pools.<name>` every field is optional."""

    name: NonEmpty | None = None
    """OKE node pool display name; default: the rules pool name."""
    kubernetes_version: NonEmpty | None = None
    """Kubernetes version of the nodes, e.g. 'v1.31.1' (required)."""
    node_shape: NonEmpty | None = None
    """Compute shape, e.g. 'VM.Standard.E5.Flex' (required)."""
    node_shape_config: OkeShapeConfig | None = None
    """OCPUs and memory for flexible shapes."""
    image_id: ImageOcid | None = None
    """OKE worker image OCID (required)."""
    boot_volume_size_in_gbs: int | None = Field(default=None, ge=50)
    """Boot volume size in GB; default: the image's."""
    placements: tuple[OkePlacement, ...] | None = Field(default=None, min_length=1)
    """Availability domains and subnets (required, at least one)."""
    size: PoolSize | None = None
    """Number of nodes; default: the rules pool `size`."""
    user_cloud_init: NonEmpty | None = None
    """Path (relative to the project directory) of cloud-init to run before nodegate's."""
    node_cycling: OkeNodeCycling | None = None
    """Replace existing nodes when the pool's properties change; default: new nodes only."""
    image_family: ImageFamily | None = None
    """Family of `imageId`: 'oracle-linux' (default) or 'ubuntu' (OKE Ubuntu images join the
    cluster with `oke bootstrap`, not oke-init.sh)."""
    nsg_ids: tuple[NsgOcid, ...] | None = None
    """Network security groups of the nodes' primary VNICs."""
    ssh_public_key: Annotated[str, BeforeValidator(_ssh_key)] | None = None
    """OpenSSH public key installed on the nodes (the key text, not a path)."""
    kms_key_id: KeyOcid | None = None
    """OCI Vault key that encrypts the nodes' boot volumes."""
    pod_network: OkePodNetwork | None = None
    """Pod networking (VCN-native pod subnets and NSGs, or flannel); default: the cluster's."""
    preemptible: bool | None = None
    """Run the pool on preemptible capacity (terminated when OCI reclaims it)."""
    ignore_changes: tuple[OkeIgnorable, ...] | None = None
    """Properties changed outside Pulumi that `pulumi up` must not revert: 'size' (an
    autoscaler owns it), 'kubernetesVersion' and 'image' (upgraded from the OKE console/CLI)."""


class OkePoolSettings(OkePoolFields):
    """One pool's OKE settings after `defaults` and the pool's overrides are merged."""

    kubernetes_version: NonEmpty
    node_shape: NonEmpty
    image_id: ImageOcid
    placements: tuple[OkePlacement, ...] = Field(min_length=1)


class OkeConfig(Frozen):
    """`nodegate:oke`: the OKE cluster and the pools this stack manages in it."""

    compartment_id: CompartmentOcid
    """Compartment OCID the node pools are created in."""
    cluster_id: ClusterOcid
    """OKE cluster OCID."""
    defaults: OkePoolFields = OkePoolFields()
    """Settings shared by every pool; a pool's own entry overrides them field by field."""
    pools: dict[str, Annotated[OkePoolFields, BeforeValidator(empty_if_null)]] = Field(
        default_factory=dict
    )
    """One entry per rules pool with provider oke (an empty `{}` takes the defaults)."""


# --- the component's Args --------------------------------------------------------------------


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
class OkeShapeConfigArgs:
    """Size of a flexible shape; None for both: a fixed shape."""

    ocpus: pulumi.Input[float] | None = None
    """OCPUs per node."""
    memory_in_gbs: pulumi.Input[float] | None = None
    """Memory per node in GB."""


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
    node_shape_config: OkeShapeConfigArgs | None = None
    """OCPUs and memory per node (flexible shapes only)."""
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

    def check(self) -> NodePool:
        """The rules pool, refusing args that could not produce a correct node pool."""
        pool = rules_pool(self.rules, self.pool_name, OKE.name)
        if not self.placements:
            raise ValueError(f"pool '{pool.name}': give at least one placement (AD + subnet)")
        if isinstance(self.size, int) and not 0 <= self.size <= 1000:
            raise ValueError(f"pool '{pool.name}': size {self.size} is outside 0..1000")
        unknown = [name for name in self.ignore_changes if name not in IGNORABLE]
        if unknown:
            raise ValueError(
                f"pool '{pool.name}': cannot ignore changes of {', '.join(unknown)}; "
                f"use {', '.join(IGNORABLE)}"
            )
        if self.user_cloud_init is None or isinstance(self.user_cloud_init, str):
            # Known now: render once so a bad rendering (e.g. over OCI's size limit) raises before
            # anything is declared, rather than inside an apply during the deployment.
            render_oke_cloud_init(
                self.rules, pool, self.user_cloud_init, image_family=self.image_family
            )
        return pool

    def declare(self, deploys_webhook: bool) -> dict[str, Any]:
        node_pool = OkeNodePool(self.pool_name, self)
        return {
            "provider": OKE.name,
            "nodePoolId": node_pool.node_pool_id,
            "registrationTaints": node_pool.registration_taints,
            "registrationLabels": node_pool.registration_labels,
            "bootstrapSha256": node_pool.bootstrap_sha256,
        }


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
        pool = args.check()
        super().__init__(TYPE_TOKEN, name, None, opts)
        rules = args.rules

        family = args.image_family
        cloud_init = pulumi.Output.from_input(args.user_cloud_init).apply(
            lambda user: render_oke_cloud_init(rules, pool, user, image_family=family)
        )
        labels = registration_labels(pool)
        taints = [t.flag() for t in registration_taints(rules, pool)]
        budget = user_data_budget(rules, pool)
        # The nested Args' fields are named as the SDK's: each passes on as it is.
        shape = args.node_shape_config
        shape_config = (
            None
            if shape is None or (shape.ocpus is None and shape.memory_in_gbs is None)
            else oci.containerengine.NodePoolNodeShapeConfigArgs(**vars(shape))
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
        pod_network = (
            None
            if args.pod_network is None
            else oci.containerengine.NodePoolNodeConfigDetailsNodePoolPodNetworkOptionDetailsArgs(
                **vars(args.pod_network)
            )
        )
        cycling = (
            None
            if args.node_cycling is None
            else oci.containerengine.NodePoolNodePoolCyclingDetailsArgs(
                is_node_cycling_enabled=True, **vars(args.node_cycling)
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
                            **vars(p), preemptible_node_config=preemptible
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
                    # Rendering has already refused user_data that fits the budget neither way.
                    "user_data": cloud_init.apply(
                        lambda text: metadata_payload(pool.name, text, budget)
                    ),
                },
                initial_node_labels=[  # sorted, so the input never reorders
                    oci.containerengine.NodePoolInitialNodeLabelArgs(key=key, value=labels[key])
                    for key in sorted(labels)
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


# --- planning: a rules pool's settings become its Args -----------------------------------------

SETTINGS_ARGS = SettingsArgs(
    settings=OkePoolSettings,
    args=OkeNodePoolArgs,
    nested={
        "node_shape_config": OkeShapeConfigArgs,
        "placements": OkePlacementArgs,
        "pod_network": OkePodNetworkArgs,
        "node_cycling": OkeNodeCyclingArgs,
    },
    renamed={"name": "node_pool_name"},
)


def plan_oke_pool(
    rules: NodeRules, pool: NodePool, section: OkeConfig, read_text: Callable[[str], str]
) -> OkeNodePoolArgs | list[ConfigProblem]:
    """The pool's OkeNodePool Args from its merged settings, or what is wrong with them; the
    user cloud-init is read here, by its configured path, through `read_text`."""
    settings = pool_settings(OkePoolSettings, section, OKE.name, pool.name)
    if isinstance(settings, list):
        return settings
    user_cloud_init = None
    if settings.user_cloud_init is not None:
        try:
            user_cloud_init = read_text(settings.user_cloud_init)
        # Unreadable user cloud-init is a config mistake: name the key and the path tried.
        except (OSError, UnicodeDecodeError) as err:
            reason = err.strerror if isinstance(err, OSError) else "not UTF-8 text"
            tried = getattr(err, "filename", None) or settings.user_cloud_init
            key = f"{pool_key(OKE.name, pool.name)}.userCloudInit"
            return [ConfigProblem(key, f"cannot read '{tried}': {reason}")]
    ignored = settings.ignore_changes or ()
    # An autoscaled pool's size belongs to its autoscaler: `pulumi up` must not revert it.
    if pool.autoscaler_type == "cluster-autoscaler" and "size" not in ignored:
        ignored = (*ignored, "size")
    inputs = SETTINGS_ARGS.inputs(settings, user_cloud_init=user_cloud_init, ignore_changes=ignored)
    return OkeNodePoolArgs(
        **inputs,
        rules=rules,
        pool_name=pool.name,
        compartment_id=section.compartment_id,
        cluster_id=section.cluster_id,
    )


PROVIDER: InfraProvider[OkeConfig, OkeNodePoolArgs] = InfraProvider(
    profile=OKE, section=OkeConfig, settings_args=SETTINGS_ARGS, plan=plan_oke_pool
)
"""OKE, as the registry (nodegate.infra.providers) lists it."""
