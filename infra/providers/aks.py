"""AKS in the Pulumi program: `nodegate:aks` and its pool settings, their planning, and
`AksNodePool`, an AKS agent pool whose nodes register already carrying the rules' taints.

AKS has no boot script to edit: the pool's `nodeTaints` and `nodeLabels` are the bootstrap.
AKS reconciles `nodeTaints` onto every node and they cannot be changed through the Kubernetes
API, so a startup gate placed there could never be lifted: only permanent, label-derived taints
go there. The AgentPool API of pulumi-azure-native 3.x (Azure API 2025-09-01) has no
`nodeInitializationTaints`, so startup gates are added by nodegate's Node admission webhook at
registration; the component says so in its `startupGatesVia` output.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import pulumi
import pulumi_azure_native as azure_native
from pydantic import BeforeValidator, Field, model_validator

from nodegate.bootstrap.aks import AksPoolSpec, render_aks_pool
from nodegate.bootstrap.registration import registration_taints
from nodegate.core.rules.autoscaler_checks import MANAGED_CA
from nodegate.core.rules.model import NodePool, NodeRules
from nodegate.core.rules.providers import AKS
from nodegate.core.text.frozen import Frozen
from nodegate.infra.cloud_inputs import agent_pool_name_problem, sha256_hex, taint_identity
from nodegate.infra.config_base import ConfigProblem, NonEmpty, PoolSize, empty_if_null
from nodegate.infra.providers.base import (
    InfraProvider,
    PlansCheck,
    SettingsArgs,
    StackAutoscaler,
    pool_key,
    pool_settings,
    rules_pool,
)

TYPE_TOKEN = "nodegate:index:AksNodePool"


# --- the stack config: `nodegate:aks` --------------------------------------------------------

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
    pools: dict[str, Annotated[AksPoolFields, BeforeValidator(empty_if_null)]] = Field(
        default_factory=dict
    )
    """One entry per rules pool with provider aks (an empty `{}` takes the defaults)."""


# --- the component's Args --------------------------------------------------------------------

INITIALIZATION_TAINTS_SUPPORTED = False
"""Whether the AgentPool API used here has `nodeInitializationTaints`. The default API of
pulumi-azure-native 3.x does not; see docs/infra.md for using a preview API version."""


@dataclass(frozen=True, kw_only=True)
class AksAutoscalingArgs:
    """Cluster autoscaler bounds for the pool."""

    min_count: pulumi.Input[int]
    max_count: pulumi.Input[int]


@dataclass(frozen=True, kw_only=True)
class AksNodePoolArgs:
    """Inputs of one AKS agent pool; the taints and labels come from `rules`, never from here."""

    rules: NodeRules
    """The validated rules; `pool_name` must name one of its pools with provider aks."""
    pool_name: str
    """The rules pool this agent pool realises."""
    resource_group_name: pulumi.Input[str]
    """Resource group of the AKS cluster."""
    cluster_name: pulumi.Input[str]
    """Name of the AKS managed cluster."""
    vm_size: pulumi.Input[str]
    """VM size, e.g. 'Standard_D4s_v5'."""
    agent_pool_name: str | None = None
    """AKS agent pool name (lowercase letters and digits, ≤12); None: the rules pool name."""
    count: pulumi.Input[int] | None = None
    """Node count (initial count under autoscaling); None: the rules pool `size`."""
    autoscaling: AksAutoscalingArgs | None = None
    """Enable the cluster autoscaler; `count` is then ignored after creation."""
    mode: pulumi.Input[str] = "User"
    """'User' or 'System'."""
    os_sku: pulumi.Input[str] | None = None
    """Node OS, e.g. 'AzureLinux'; None: AKS's default."""
    os_type: pulumi.Input[str] | None = None
    """'Linux' or 'Windows'; a Windows os_sku needs 'Windows' (AKS defaults to Linux)."""
    orchestrator_version: pulumi.Input[str] | None = None
    """Kubernetes version, e.g. '1.31'; None: the control plane's."""

    def check(self) -> tuple[NodePool, str, AksPoolSpec]:
        """The rules pool, agent pool name and rendered taints and labels, refusing args AKS or
        nodegate would reject: what the component declares from, or the error it would raise."""
        pool = rules_pool(self.rules, self.pool_name, AKS.name)
        agent_pool_name = self.agent_pool_name or pool.name
        windows_sku = isinstance(self.os_sku, str) and self.os_sku.startswith("Windows")
        if windows_sku and self.os_type != "Windows":
            raise ValueError(
                f"pool '{pool.name}': os_sku {self.os_sku} needs os_type 'Windows' (AKS would "
                "create a Linux pool otherwise)"
            )
        windows = windows_sku or self.os_type == "Windows"
        problem = agent_pool_name_problem(agent_pool_name, windows=windows)
        if problem:
            raise ValueError(f"pool '{pool.name}': {problem}")
        if isinstance(self.count, int) and not 0 <= self.count <= 1000:
            raise ValueError(f"pool '{pool.name}': count {self.count} is outside 0..1000")
        spec = _checked_spec(
            render_aks_pool(
                self.rules, pool, initialization_taints_supported=INITIALIZATION_TAINTS_SUPPORTED
            )
        )
        return pool, agent_pool_name, spec

    def declare(self, deploys_webhook: bool) -> dict[str, Any]:
        """Also says out loud when its gates depend on a webhook the stack does not deploy (its
        `nodegate:reconciler` has no `webhook` section)."""
        agent_pool = AksNodePool(self.pool_name, self)

        def warn(args: list[Any]) -> None:
            via, gates = args
            if via == "webhook" and not deploys_webhook:
                pulumi.log.warn(
                    f"pool '{self.pool_name}': startup gates ({', '.join(gates)}) are not AKS "
                    "node taints; nodegate's Node admission webhook adds them at registration. "
                    "Until that webhook is deployed (nodegate:reconciler webhook: {}), new nodes "
                    "of this pool register without them.",
                    resource=agent_pool,
                )

        pulumi.Output.all(agent_pool.startup_gates_via, agent_pool.startup_gate_taints).apply(warn)
        return {
            "provider": AKS.name,
            "agentPoolId": agent_pool.agent_pool_id,
            "registrationTaints": agent_pool.registration_taints,
            "registrationLabels": agent_pool.node_labels,
            "nodeTaints": agent_pool.node_taints,
            "startupGateTaints": agent_pool.startup_gate_taints,
            "startupGatesVia": agent_pool.startup_gates_via,
            "bootstrapSha256": agent_pool.bootstrap_sha256,
        }


def _checked_spec(spec: AksPoolSpec) -> AksPoolSpec:
    """A startup gate in nodeTaints would be locked on by AKS forever: refuse, never declare."""
    gates = {taint_identity(t) for t in spec.startup_gate_taints}
    locked = [t for t in spec.node_taints if taint_identity(t) in gates]
    wrong = locked or list(spec.node_initialization_taints)
    if wrong:
        raise ValueError(
            f"pool '{spec.pool}': startup gates must not reach nodeTaints or (with this API "
            f"version) nodeInitializationTaints: {', '.join(wrong)}"
        )
    return spec


class AksNodePool(pulumi.ComponentResource):
    """One AKS agent pool whose nodes are born with the rules' permanent taints and labels."""

    agent_pool: azure_native.containerservice.AgentPool
    """The AKS agent pool resource."""
    agent_pool_id: pulumi.Output[str]
    node_taints: pulumi.Output[list[str]]
    """The pool's `nodeTaints`: permanent label-derived taints only."""
    node_labels: pulumi.Output[dict[str, str]]
    """The pool's `nodeLabels`."""
    registration_taints: pulumi.Output[list[str]]
    """Every taint a node must carry from registration: nodeTaints plus startup gates."""
    startup_gate_taints: pulumi.Output[list[str]]
    """Startup gates of the pool, applied as `startup_gates_via` says."""
    startup_gates_via: pulumi.Output[str]
    """'webhook' (gates added by nodegate's Node admission webhook) or 'none' (no gates)."""
    note: pulumi.Output[str]
    """How the gates reach the nodes, in words."""
    bootstrap_sha256: pulumi.Output[str]
    """SHA-256 of the pool's taint and label fields, to trace which rendering nodes got."""

    def __init__(
        self,
        name: str,
        args: AksNodePoolArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        pool, agent_pool_name, spec = args.check()
        super().__init__(TYPE_TOKEN, name, None, opts)
        labels = dict(sorted(spec.node_labels.items()))  # so the inputs never reorder

        scaling = args.autoscaling
        # Keyword form, not AgentPoolArgs: the args class's `resource_name` (the cluster) clashes
        # with the resource's own name parameter; the SDK takes it as `resource_name_`.
        self.agent_pool = azure_native.containerservice.AgentPool(
            f"{name}-agentpool",
            opts=pulumi.ResourceOptions(
                parent=self,
                # Under autoscaling the autoscaler owns the node count; `count` is the initial one.
                ignore_changes=["count"] if scaling is not None else None,
            ),
            resource_group_name=args.resource_group_name,
            resource_name_=args.cluster_name,
            agent_pool_name=agent_pool_name,
            vm_size=args.vm_size,
            count=args.count if args.count is not None else pool.size,
            enable_auto_scaling=scaling is not None,
            min_count=None if scaling is None else scaling.min_count,
            max_count=None if scaling is None else scaling.max_count,
            mode=args.mode,
            os_sku=args.os_sku,
            os_type=args.os_type,
            orchestrator_version=args.orchestrator_version,
            node_taints=list(spec.node_taints),
            node_labels=labels,
        )

        self.agent_pool_id = self.agent_pool.id
        self.node_taints = pulumi.Output.from_input(list(spec.node_taints))
        self.node_labels = pulumi.Output.from_input(labels)
        self.registration_taints = pulumi.Output.from_input(
            [t.flag() for t in registration_taints(args.rules, pool)]
        )
        self.startup_gate_taints = pulumi.Output.from_input(list(spec.startup_gate_taints))
        self.startup_gates_via = pulumi.Output.from_input(spec.startup_gates_via)
        self.note = pulumi.Output.from_input(spec.note)
        # AKS has no boot script: the pool's "bootstrap" is its taint and label fields.
        fields = {
            "nodeInitializationTaints": list(spec.node_initialization_taints),
            "nodeLabels": labels,
            "nodeTaints": list(spec.node_taints),
        }
        self.bootstrap_sha256 = pulumi.Output.from_input(
            sha256_hex(json.dumps(fields, sort_keys=True, separators=(",", ":")))
        )
        self.register_outputs(
            {
                "agentPoolId": self.agent_pool_id,
                "nodeTaints": self.node_taints,
                "nodeLabels": self.node_labels,
                "registrationTaints": self.registration_taints,
                "startupGateTaints": self.startup_gate_taints,
                "startupGatesVia": self.startup_gates_via,
                "note": self.note,
                "bootstrapSha256": self.bootstrap_sha256,
            }
        )


# --- planning: a rules pool's settings become its Args -----------------------------------------

SETTINGS_ARGS = SettingsArgs(
    settings=AksPoolSettings, args=AksNodePoolArgs, nested={"autoscaling": AksAutoscalingArgs}
)


def plan_aks_pool(
    rules: NodeRules, pool: NodePool, section: AksConfig, read_text: Callable[[str], str]
) -> AksNodePoolArgs | list[ConfigProblem]:
    """The pool's AksNodePool Args (derived name, count, mode, OS type), or what is wrong with
    them."""
    settings = pool_settings(AksPoolSettings, section, AKS.name, pool.name)
    if isinstance(settings, list):
        return settings
    key = pool_key(AKS.name, pool.name)
    problems: list[ConfigProblem] = []
    name = settings.agent_pool_name or pool.name
    windows_sku = (settings.os_sku or "").startswith("Windows")
    os_type = settings.os_type or ("Windows" if windows_sku else None)
    if (
        settings.os_sku is not None
        and os_type is not None
        and windows_sku != (os_type == "Windows")
    ):
        problems.append(
            ConfigProblem(
                f"{key}.osType",
                f"osType {os_type} does not fit osSku {settings.os_sku}; leave osType out "
                "(it follows the osSku) or make them agree",
            )
        )
    windows = os_type == "Windows"
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
    if mode == "System" and windows:
        problems.append(
            ConfigProblem(f"{key}.mode", "AKS runs System pools on Linux only; use mode User")
        )
    if problems:
        return problems
    inputs = SETTINGS_ARGS.inputs(
        settings, agent_pool_name=name, count=count, mode=mode, os_type=os_type
    )
    return AksNodePoolArgs(
        **inputs,
        rules=rules,
        pool_name=pool.name,
        resource_group_name=section.resource_group_name,
        cluster_name=section.cluster_name,
    )


def check_aks_plans(rules: NodeRules, plans: Sequence[AksNodePoolArgs]) -> PlansCheck:
    """Agent pool names unique in the cluster; and the pools the stack autoscales: AKS's
    managed cluster-autoscaler unless the rules name one, and where rules and stack disagree."""
    autoscalers: dict[str, StackAutoscaler] = {}
    problems = _duplicate_agent_pool_names(plans)
    for plan in plans:
        pool = rules.pool(plan.pool_name)
        assert pool is not None  # planning made Args only for the rules' own pools
        key = f"{pool_key(AKS.name, pool.name)}.autoscaling"
        said = pool.autoscaler
        if plan.autoscaling is not None and said is None:
            autoscalers[pool.name] = StackAutoscaler(
                MANAGED_CA,
                key,
                "makes the pool autoscaled by AKS's managed cluster-autoscaler (the rules "
                "name no autoscaler for it)",
            )
        elif plan.autoscaling is not None and said is not None and said.type == "none":
            problems.append(
                ConfigProblem(
                    key,
                    f"enables AKS's cluster-autoscaler on pool '{pool.name}', whose autoscaler "
                    "the rules say is none; remove one of the two",
                )
            )
        elif (
            plan.autoscaling is None
            and said is not None
            and said.is_managed
            and said.type == "cluster-autoscaler"
        ):
            problems.append(
                ConfigProblem(
                    key,
                    f"is not set, but the rules say pool '{pool.name}' runs AKS's managed "
                    "cluster-autoscaler, which AKS runs only on a pool with autoscaling: set "
                    "it to {minCount, maxCount}",
                )
            )
    return PlansCheck(tuple(problems), autoscalers)


def _duplicate_agent_pool_names(plans: Sequence[AksNodePoolArgs]) -> list[ConfigProblem]:
    seen: dict[str, str] = {}
    problems = []
    for plan in plans:
        agent_pool = plan.agent_pool_name or plan.pool_name
        other = seen.setdefault(agent_pool, plan.pool_name)
        if other != plan.pool_name:
            problems.append(
                ConfigProblem(
                    f"{pool_key(AKS.name, plan.pool_name)}.agentPoolName",
                    f"'{agent_pool}' is already the agent pool of pool '{other}'",
                )
            )
    return problems


PROVIDER: InfraProvider[AksConfig, AksNodePoolArgs] = InfraProvider(
    profile=AKS,
    section=AksConfig,
    settings_args=SETTINGS_ARGS,
    plan=plan_aks_pool,
    check_plans=check_aks_plans,
)
"""AKS, as the registry (nodegate.infra.providers) lists it."""
