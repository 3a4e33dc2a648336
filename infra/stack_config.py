"""The stack's `nodegate:*` configuration schema, parsed once at the edge into frozen objects.

A stack names its rules (`nodegate:rules` path, or `nodegate:rulesInline`), says how each rules
pool maps onto its cloud (`nodegate:oke`, `nodegate:aks`: cluster-wide settings, `defaults` for
every pool, and `pools.<name>` overrides), and may hand pools to another stack
(`nodegate:skipPools`). Every problem is collected and reported at once, each line naming the
exact key to fix, before the program declares a single resource. Matching this config to the
rules' pools is `planning.py`'s job.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from nodegate.core.rules.providers import Provider
from nodegate.core.text.errors import format_path
from nodegate.core.text.frozen import Frozen
from nodegate.core.text.located_errors import located_errors
from nodegate.manifests.settings import DeploySettings

NAMESPACE = "nodegate"
"""Pulumi config namespace: keys are `nodegate:<key>`, named after the project."""

CONFIG_KEYS = ("rules", "rulesInline", "oke", "aks", "skipPools", "reconciler")
"""Every top-level key the program reads."""

OBJECT_KEYS = ("rulesInline", "oke", "aks", "skipPools", "reconciler")
"""Keys whose value is structured (JSON) config rather than a plain string."""


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong with the stack config: the key to fix and what is wrong with it."""

    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.key}: {self.message}"


class StackConfigError(ValueError):
    """Stack config that must not reach a cloud API. Carries every problem found."""

    def __init__(self, stack: str, problems: Iterable[ConfigProblem]) -> None:
        self.problems = tuple(problems)
        source = f"Pulumi.{stack}.yaml"
        super().__init__("\n".join(f"{source}: {p}" for p in self.problems))


def _prefix(*prefixes: str) -> Any:
    """Validator: an OCID whose resource type is one of `prefixes` (catches swapped OCIDs)."""

    def check(value: object) -> object:
        if isinstance(value, str) and not value.startswith(tuple(f"ocid1.{p}." for p in prefixes)):
            wanted = " or ".join(f"'ocid1.{p}.…'" for p in prefixes)
            raise ValueError(f"'{value}' is not an OCID of the right kind: expected {wanted}")
        return value

    return BeforeValidator(check)


def _empty_if_null(value: object) -> object:
    """`pools: {ci: }` (YAML null) means the same as `ci: {}`: take the defaults."""
    return {} if value is None else value


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
NonEmpty = Annotated[str, Field(min_length=1)]
PoolSize = Annotated[int, Field(ge=0, le=1000)]


# --- OKE -------------------------------------------------------------------------------------


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


OkeImageFamily = Literal["oracle-linux", "ubuntu"]
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
    image_family: OkeImageFamily | None = None
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
    pools: dict[str, Annotated[OkePoolFields, BeforeValidator(_empty_if_null)]] = Field(
        default_factory=dict
    )
    """One entry per rules pool with provider oke (an empty `{}` takes the defaults)."""


# --- AKS -------------------------------------------------------------------------------------

AksMode = Literal["User", "System"]
AksOsSku = Literal[
    "Ubuntu", "Ubuntu2204", "AzureLinux", "AzureLinux3", "Windows2019", "Windows2022"
]
"""The SDK's `OSSKU` values minus the retired CBLMariner (Azure Linux 2.0; use AzureLinux)."""
AksOsType = Literal["Linux", "Windows"]
RETIRED_OS_SKUS = {"CBLMariner": "AzureLinux"}


def _not_retired(value: object) -> object:
    if isinstance(value, str) and value in RETIRED_OS_SKUS:
        raise ValueError(
            f"'{value}' is retired (Azure Linux 2.0 node images are no longer published); use "
            f"'{RETIRED_OS_SKUS[value]}'"
        )
    return value


class AksAutoscaling(Frozen):
    """Cluster autoscaler bounds; `count` (or the rules size) is the initial node count."""

    min_count: PoolSize
    max_count: PoolSize

    @model_validator(mode="after")
    def _ordered(self) -> AksAutoscaling:
        if self.min_count > self.max_count:
            raise ValueError(f"minCount {self.min_count} is above maxCount {self.max_count}")
        return self


class AksPoolFields(Frozen):
    """Per-pool AKS settings; in `defaults` and in `pools.<name>` every field is optional."""

    agent_pool_name: NonEmpty | None = None
    """AKS agent pool name (lowercase, ≤12 chars); default: the rules pool name."""
    vm_size: NonEmpty | None = None
    """VM size, e.g. 'Standard_D4s_v5' (required)."""
    count: PoolSize | None = None
    """Number of nodes; default: the rules pool `size`."""
    autoscaling: AksAutoscaling | None = None
    """Enable the cluster autoscaler between these bounds."""
    mode: AksMode | None = None
    """'User' (default) or 'System'."""
    os_sku: Annotated[AksOsSku, BeforeValidator(_not_retired)] | None = None
    """Node OS, e.g. 'AzureLinux' or 'Ubuntu'; default: AKS's (Ubuntu)."""
    os_type: AksOsType | None = None
    """'Linux' or 'Windows'; default: Windows for a Windows osSku, else Linux."""
    orchestrator_version: NonEmpty | None = None
    """Kubernetes version of the pool, e.g. '1.31'; default: the control plane's."""


class AksPoolSettings(AksPoolFields):
    """One pool's AKS settings after `defaults` and the pool's overrides are merged."""

    vm_size: NonEmpty


class AksConfig(Frozen):
    """`nodegate:aks`: the AKS cluster and the pools this stack manages in it."""

    resource_group_name: NonEmpty
    """Resource group of the AKS cluster."""
    cluster_name: NonEmpty
    """Name of the AKS managed cluster."""
    defaults: AksPoolFields = AksPoolFields()
    """Settings shared by every pool; a pool's own entry overrides them field by field."""
    pools: dict[str, Annotated[AksPoolFields, BeforeValidator(_empty_if_null)]] = Field(
        default_factory=dict
    )
    """One entry per rules pool with provider aks (an empty `{}` takes the defaults)."""


# --- the reconciler --------------------------------------------------------------------------


class ReconcilerStackConfig(DeploySettings):
    """`nodegate:reconciler`: the deployment settings (docs/infra.md), plus the cluster."""

    kubeconfig: NonEmpty | None = None
    """Kubeconfig of the cluster the reconciler runs in: a file path (relative to the project
    directory) or the file's contents; default: the ambient one (KUBECONFIG, ~/.kube/config)."""
    context: NonEmpty | None = None
    """Kubeconfig context; default: the kubeconfig's current context."""


# --- the whole stack -------------------------------------------------------------------------


class StackConfig(Frozen):
    """Everything under `nodegate:` in a stack."""

    rules: NonEmpty | None = None
    """Path of the rules file, relative to the project directory (where Pulumi.yaml is)."""
    rules_inline: Any = None
    """The rules themselves as structured config, instead of `rules`."""
    oke: OkeConfig | None = None
    aks: AksConfig | None = None
    skip_pools: tuple[str, ...] = ()
    """Rules pools this stack deliberately leaves alone (another stack manages them)."""
    reconciler: ReconcilerStackConfig | None = None
    """The reconciler deployment; None: this stack does not deploy the reconciler."""

    def section(self, provider: Provider) -> OkeConfig | AksConfig | None:
        """The `nodegate:<provider>` section (None: the stack has none)."""
        return {"oke": self.oke, "aks": self.aks}[provider]

    @field_validator("rules")
    @classmethod
    def _a_path(cls, value: str | None) -> str | None:
        # Structured config under a string key reaches the program as its JSON text.
        if value is not None and value.lstrip().startswith(("{", "[")):
            raise ValueError(
                "this is the path of a rules file; put the rules themselves under "
                "'nodegate:rulesInline'"
            )
        return value

    @model_validator(mode="after")
    def _one_rules_source(self) -> StackConfig:
        if (self.rules is None) == (self.rules_inline is None):
            raise ValueError(
                "give exactly one of 'nodegate:rules' (path to the rules file, e.g. "
                "examples/rules.yaml) or 'nodegate:rulesInline' (the rules as structured config)"
            )
        return self


# --- parsing ---------------------------------------------------------------------------------


def parse_stack_config(raw: Mapping[str, Any], stack: str) -> StackConfig:
    """Validate the raw `nodegate:*` values (None for unset keys); StackConfigError if wrong."""
    values = {key: value for key, value in raw.items() if value is not None}
    try:
        return StackConfig.model_validate(values)
    # Permanent: the stack file is wrong; report every key at once, in stack-config terms.
    except ValidationError as err:
        raise StackConfigError(stack, config_problems(err, f"{NAMESPACE}:", StackConfig)) from err


def config_problems(
    err: ValidationError, prefix: str, model: type[BaseModel], defaults: str | None = None
) -> list[ConfigProblem]:
    """Every error in `err` as a stack-config key and a fix (the wording is core's, shared with
    the rules loader); `defaults` names the section whose `defaults` may also set a field."""
    problems = []
    for error in located_errors(err, model):
        key = prefix + format_path(error.path) if error.path else prefix.rstrip(".:")
        message = error.message
        if error.kind == "missing":
            where = f" or under {NAMESPACE}:{defaults}.defaults" if defaults else ""
            message = f"{message} (set it here{where})"
        problems.append(ConfigProblem(key, message))
    return problems
