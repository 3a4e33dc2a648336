"""The stack's `nodegate:*` configuration, parsed once at the edge into frozen, typed objects.

A stack names its rules (`nodegate:rules` path, or `nodegate:rulesInline`), says how each rules
pool maps onto its cloud (`nodegate:oke`, `nodegate:aks`: cluster-wide settings, `defaults` for
every pool, and `pools.<name>` overrides), and may hand pools to another stack
(`nodegate:skipPools`). Every problem is collected and reported at once, each line naming the
exact key to fix, before the program declares a single resource.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails

from nodegate.core.hints import allowed_keys
from nodegate.core.model import NodePool, NodeRules
from nodegate.infra.render import agent_pool_name_problem

NAMESPACE = "nodegate"
"""Pulumi config namespace: keys are `nodegate:<key>`, named after the project."""

CONFIG_KEYS = ("rules", "rulesInline", "oke", "aks", "skipPools", "reconciler")
"""Every top-level key the program reads; `reconciler` is reserved for the reconciler component."""

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


class _Model(BaseModel):
    """Config objects: camelCase keys as Pulumi stack files use, unknown keys refused, frozen."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )


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
CountOrPercent = Annotated[str, BeforeValidator(_count_text), Field(pattern=r"^\d+%?$")]
NonEmpty = Annotated[str, Field(min_length=1)]
PoolSize = Annotated[int, Field(ge=0, le=1000)]


# --- OKE -------------------------------------------------------------------------------------


class OkePlacement(_Model):
    """Where a pool's nodes go: one entry per availability domain."""

    availability_domain: NonEmpty
    """Availability domain name as OCI spells it, e.g. 'Uocm:PHX-AD-1'."""
    subnet_id: SubnetOcid
    """Worker subnet OCID in that availability domain."""
    fault_domains: tuple[NonEmpty, ...] = ()
    """Optional fault domains, e.g. ['FAULT-DOMAIN-1']; empty lets OCI choose."""


class OkeShapeConfig(_Model):
    """Size of a flexible shape (e.g. VM.Standard.E5.Flex); leave unset for fixed shapes."""

    ocpus: float | None = Field(default=None, gt=0)
    """OCPUs per node."""
    memory_in_gbs: float | None = Field(default=None, gt=0)
    """Memory per node, in GB."""


class OkeNodeCycling(_Model):
    """Opt-in: let OKE replace existing nodes when the pool changes (enhanced clusters only)."""

    maximum_surge: CountOrPercent = "1"
    """Extra nodes OKE may add while cycling: a count ('1') or a percentage ('25%')."""
    maximum_unavailable: CountOrPercent = "0"
    """Nodes that may be unavailable while cycling: a count or a percentage."""


class OkePoolFields(_Model):
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


class OkePoolSettings(OkePoolFields):
    """One pool's OKE settings after `defaults` and the pool's overrides are merged."""

    kubernetes_version: NonEmpty
    node_shape: NonEmpty
    image_id: ImageOcid
    placements: tuple[OkePlacement, ...] = Field(min_length=1)


class OkeConfig(_Model):
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
    "Ubuntu", "Ubuntu2204", "AzureLinux", "AzureLinux3", "CBLMariner", "Windows2019", "Windows2022"
]


class AksAutoscaling(_Model):
    """Cluster autoscaler bounds; `count` (or the rules size) is the initial node count."""

    min_count: PoolSize
    max_count: PoolSize

    @model_validator(mode="after")
    def _ordered(self) -> AksAutoscaling:
        if self.min_count > self.max_count:
            raise ValueError(f"minCount {self.min_count} is above maxCount {self.max_count}")
        return self


class AksPoolFields(_Model):
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
    os_sku: AksOsSku | None = None
    """Node OS, e.g. 'AzureLinux' or 'Ubuntu'; default: AKS's (Ubuntu)."""
    orchestrator_version: NonEmpty | None = None
    """Kubernetes version of the pool, e.g. '1.31'; default: the control plane's."""


class AksPoolSettings(AksPoolFields):
    """One pool's AKS settings after `defaults` and the pool's overrides are merged."""

    vm_size: NonEmpty


class AksConfig(_Model):
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


# --- the whole stack -------------------------------------------------------------------------


class StackConfig(_Model):
    """Everything under `nodegate:` in a stack."""

    rules: NonEmpty | None = None
    """Path of the rules file, relative to the project directory (where Pulumi.yaml is)."""
    rules_inline: Any = None
    """The rules themselves as structured config, instead of `rules`."""
    oke: OkeConfig | None = None
    aks: AksConfig | None = None
    skip_pools: tuple[str, ...] = ()
    """Rules pools this stack deliberately leaves alone (another stack manages them)."""
    reconciler: dict[str, Any] | None = None
    """Reserved for the reconciler deployment (next issue); not acted on yet."""

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


@dataclass(frozen=True)
class OkePoolPlan:
    """A rules pool with provider oke and the settings this stack gives it."""

    pool: NodePool
    settings: OkePoolSettings
    size: int


@dataclass(frozen=True)
class AksPoolPlan:
    """A rules pool with provider aks and the settings this stack gives it."""

    pool: NodePool
    settings: AksPoolSettings
    agent_pool_name: str
    count: int
    mode: AksMode


@dataclass(frozen=True)
class PoolPlans:
    """Which rules pools this stack declares, and which it leaves to another stack."""

    oke: tuple[OkePoolPlan, ...]
    aks: tuple[AksPoolPlan, ...]
    skipped: tuple[str, ...]


# --- parsing ---------------------------------------------------------------------------------


def parse_stack_config(raw: Mapping[str, Any], stack: str) -> StackConfig:
    """Validate the raw `nodegate:*` values (None for unset keys); StackConfigError if wrong."""
    values = {key: value for key, value in raw.items() if value is not None}
    try:
        return StackConfig.model_validate(values)
    # Permanent: the stack file is wrong; report every key at once, in stack-config terms.
    except ValidationError as err:
        raise StackConfigError(
            stack, [_problem(e, f"{NAMESPACE}:", StackConfig) for e in err.errors()]
        ) from err


def plan_pools(rules: NodeRules, config: StackConfig, stack: str) -> PoolPlans:
    """Match every rules pool to its stack settings; StackConfigError lists every mismatch."""
    problems: list[ConfigProblem] = []
    oke: list[OkePoolPlan] = []
    aks: list[AksPoolPlan] = []
    skipped: list[str] = []
    names = [p.name for p in rules.node_pools]
    for name in config.skip_pools:
        if name not in names:
            problems.append(_unknown_pool(f"{NAMESPACE}:skipPools", name, names))
    for pool in rules.node_pools:
        section = config.oke if pool.provider == "oke" else config.aks
        key = f"{NAMESPACE}:{pool.provider}.pools.{pool.name}"
        configured = section is not None and pool.name in section.pools
        if pool.name in config.skip_pools:
            if configured:
                problems.append(
                    ConfigProblem(
                        key, f"pool '{pool.name}' is also in nodegate:skipPools; pick one"
                    )
                )
            skipped.append(pool.name)
            continue
        if section is None or not configured:
            problems.append(_unconfigured(pool, section is None))
            continue
        planned = (
            _plan_oke(pool, section) if isinstance(section, OkeConfig) else _plan_aks(pool, section)
        )
        if isinstance(planned, OkePoolPlan):
            oke.append(planned)
        elif isinstance(planned, AksPoolPlan):
            aks.append(planned)
        else:
            problems.extend(planned)
    for provider, section in (("oke", config.oke), ("aks", config.aks)):
        if section is None:
            continue
        ours = [p.name for p in rules.node_pools if p.provider == provider]
        for name in section.pools:
            if name not in ours:
                problems.append(_foreign_pool(rules, provider, name, ours))
    problems.extend(_duplicate_agent_pool_names(aks))
    if problems:
        raise StackConfigError(stack, problems)
    return PoolPlans(tuple(oke), tuple(aks), tuple(skipped))


def _merged(defaults: BaseModel, own: BaseModel) -> dict[str, Any]:
    """`defaults` overridden field by field by the pool's own entry (an explicit null clears)."""
    return {
        **defaults.model_dump(by_alias=True, exclude_unset=True),
        **own.model_dump(by_alias=True, exclude_unset=True),
    }


def _plan_oke(pool: NodePool, section: OkeConfig) -> OkePoolPlan | list[ConfigProblem]:
    """The pool's merged OKE settings, or what is wrong with them."""
    key = f"{NAMESPACE}:oke.pools.{pool.name}"
    try:
        settings = OkePoolSettings.model_validate(
            _merged(section.defaults, section.pools[pool.name])
        )
    # Invalid merged settings are reported with the rest, naming the pool's keys.
    except ValidationError as err:
        return [_problem(e, f"{key}.", OkePoolSettings, defaults="oke") for e in err.errors()]
    size = pool.size if settings.size is None else settings.size
    return OkePoolPlan(pool=pool, settings=settings, size=size)


def _plan_aks(pool: NodePool, section: AksConfig) -> AksPoolPlan | list[ConfigProblem]:
    """The pool's merged AKS settings and derived name/count/mode, or what is wrong with them."""
    key = f"{NAMESPACE}:aks.pools.{pool.name}"
    try:
        settings = AksPoolSettings.model_validate(
            _merged(section.defaults, section.pools[pool.name])
        )
    # Invalid merged settings are reported with the rest, naming the pool's keys.
    except ValidationError as err:
        return [_problem(e, f"{key}.", AksPoolSettings, defaults="aks") for e in err.errors()]
    problems: list[ConfigProblem] = []
    name = settings.agent_pool_name or pool.name
    windows = (settings.os_sku or "").startswith("Windows")
    problem = agent_pool_name_problem(name, windows=windows)
    if problem:
        hint = "" if settings.agent_pool_name else "; set agentPoolName to a valid name"
        problems.append(ConfigProblem(f"{key}.agentPoolName", problem + hint))
    count = pool.size if settings.count is None else settings.count
    mode: AksMode = settings.mode or "User"
    source = "count" if settings.count is not None else f"the rules size of pool '{pool.name}'"
    scaling = settings.autoscaling
    if scaling is not None and not scaling.min_count <= count <= scaling.max_count:
        problems.append(
            ConfigProblem(
                f"{key}.count",
                f"{count} (from {source}) is outside autoscaling "
                f"{scaling.min_count}..{scaling.max_count}; set count inside that range",
            )
        )
    if mode == "System" and (count < 1 or (scaling is not None and scaling.min_count < 1)):
        problems.append(
            ConfigProblem(f"{key}.mode", "a System pool needs at least 1 node (count and minCount)")
        )
    if problems:
        return problems
    return AksPoolPlan(pool=pool, settings=settings, agent_pool_name=name, count=count, mode=mode)


def _duplicate_agent_pool_names(plans: list[AksPoolPlan]) -> list[ConfigProblem]:
    seen: dict[str, str] = {}
    problems = []
    for plan in plans:
        other = seen.setdefault(plan.agent_pool_name, plan.pool.name)
        if other != plan.pool.name:
            problems.append(
                ConfigProblem(
                    f"{NAMESPACE}:aks.pools.{plan.pool.name}.agentPoolName",
                    f"'{plan.agent_pool_name}' is already the agent pool of pool '{other}'",
                )
            )
    return problems


def _unconfigured(pool: NodePool, section_missing: bool) -> ConfigProblem:
    where = f"{NAMESPACE}:{pool.provider}"
    need = f"a '{where}' section with " if section_missing else ""
    return ConfigProblem(
        f"{where}.pools.{pool.name}",
        f"rules pool '{pool.name}' (provider {pool.provider}) has no stack config: add "
        f"{need}'pools: {{{pool.name}: {{}}}}' (an empty entry takes '{where}.defaults'), or "
        f"list '{pool.name}' in {NAMESPACE}:skipPools if another stack manages it",
    )


def _unknown_pool(key: str, name: str, names: list[str]) -> ConfigProblem:
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return ConfigProblem(
        key, f"'{name}' is not a pool in the rules (pools: {', '.join(names) or 'none'}){hint}"
    )


def _foreign_pool(rules: NodeRules, provider: str, name: str, ours: list[str]) -> ConfigProblem:
    key = f"{NAMESPACE}:{provider}.pools.{name}"
    other = rules.pool(name)
    if other is not None:
        return ConfigProblem(
            key,
            f"pool '{name}' has provider {other.provider} in the rules; configure it under "
            f"{NAMESPACE}:{other.provider}.pools",
        )
    return _unknown_pool(key, name, ours)


def _problem(
    err: ErrorDetails, prefix: str, model: type[BaseModel], defaults: str | None = None
) -> ConfigProblem:
    loc = tuple(part for part in err["loc"] if part != "[key]")
    key = prefix + ".".join(str(part) for part in loc) if loc else prefix.rstrip(".:")
    kind = err["type"]
    if kind == "missing":
        where = f" or under {NAMESPACE}:{defaults}.defaults" if defaults else ""
        return ConfigProblem(key, f"required, not set (set it here{where})")
    if kind == "extra_forbidden":
        allowed = allowed_keys(model, loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        return ConfigProblem(
            key, f"unknown key '{loc[-1]}'{hint} (allowed here: {', '.join(allowed)})"
        )
    message = str(err["msg"]).removeprefix("Value error, ")
    given = err.get("input")
    if kind not in ("value_error", "model_type", "dict_type") and given is not None:
        message = f"{message} (got {given!r})"
    return ConfigProblem(key, message)
