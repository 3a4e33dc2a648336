"""Match the stack config to the rules' pools, and produce each component's Args directly.

Pure: the validated stack config and rules in, the planned pools (`OkeNodePoolArgs` /
`AksNodePoolArgs` / `KarpenterNodePoolArgs`, each a `PlannedPool`) and `ReconcilerArgs` out (or
a StackConfigError listing every mismatch). The program only reads files through the
`read_text` it passes in, and checks and declares what comes out of here. A provider's stack
settings become its component's Args in one function (`_plan_oke`, `_plan_aks`), found through
`PLANNERS`.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from nodegate.core.rules.autoscaler_checks import MANAGED_CA, autoscaler_findings
from nodegate.core.rules.loader import RulesDocument
from nodegate.core.rules.model import Autoscaler, NodePool, NodeRules
from nodegate.core.rules.providers import Provider
from nodegate.core.text.errors import format_path
from nodegate.infra.aks_pool import AksAutoscalingArgs, AksNodePoolArgs
from nodegate.infra.cloud_inputs import agent_pool_name_problem
from nodegate.infra.karpenter_pool import KarpenterNodePoolArgs
from nodegate.infra.oke_pool import (
    OkeNodeCyclingArgs,
    OkeNodePoolArgs,
    OkePlacementArgs,
    OkePodNetworkArgs,
)
from nodegate.infra.planned_pool import PlannedPool
from nodegate.infra.reconciler import ReconcilerArgs
from nodegate.infra.stack_config import (
    NAMESPACE,
    AksMode,
    AksPoolSettings,
    ConfigProblem,
    OkePoolSettings,
    StackConfig,
    StackConfigError,
    config_problems,
)


@dataclass(frozen=True)
class PoolPlans:
    """Which rules pools this stack declares (as component Args), and which it leaves alone."""

    pools: tuple[PlannedPool, ...]
    """In the rules' order; each checks and declares itself."""
    skipped: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    """What `nodegate validate` would warn about each pool's gates, autoscalers as the stack
    makes them (to be logged, not to stop the program)."""


def _kubeconfig(config: StackConfig, project_dir: Path) -> tuple[str | None, str | None]:
    """The cluster the stack's Kubernetes objects go to: `nodegate:reconciler`'s kubeconfig
    (a path is taken relative to the project directory) and context; None: the ambient one."""
    section = config.reconciler
    if section is None:
        return None, None
    kubeconfig = section.kubeconfig
    if kubeconfig is not None and "\n" not in kubeconfig:  # a path, not the file's contents
        path = Path(kubeconfig).expanduser()
        kubeconfig = str(path if path.is_absolute() else project_dir / path)
    return kubeconfig, section.context


def plan_reconciler(
    document: RulesDocument, config: StackConfig, project_dir: Path
) -> ReconcilerArgs | None:
    """The Reconciler's Args from `nodegate:reconciler`, or None when the stack has none."""
    section = config.reconciler
    if section is None:
        return None
    kubeconfig, context = _kubeconfig(config, project_dir)
    return ReconcilerArgs(rules=document, settings=section, kubeconfig=kubeconfig, context=context)


def plan_pools(
    rules: NodeRules,
    config: StackConfig,
    stack: str,
    read_text: Callable[[str], str],
    project_dir: Path | None = None,
) -> PoolPlans:
    """Match every rules pool to its stack settings and produce its component's Args;
    StackConfigError lists every mismatch. `read_text` reads a configured file (userCloudInit)
    by its configured path; `project_dir` anchors a kubeconfig path (Karpenter NodePools)."""
    problems: list[ConfigProblem] = []
    pools: list[PlannedPool] = []
    skipped: list[str] = []
    kubeconfig, context = _kubeconfig(config, project_dir or Path.cwd())
    names = [p.name for p in rules.node_pools]
    for name in config.skip_pools:
        if name not in names:
            problems.append(_unknown_pool(f"{NAMESPACE}:skipPools", name, names))
    for pool in rules.node_pools:
        section = config.section(pool.provider)
        key = f"{NAMESPACE}:{pool.provider}.pools.{pool.name}"
        configured = section is not None and pool.name in section.pools
        if pool.autoscaler_type == "karpenter":
            if configured:
                problems.append(
                    ConfigProblem(
                        key,
                        f"pool '{pool.name}' is run by Karpenter: it has no {pool.provider} node "
                        f"pool to configure (its Karpenter NodePool comes from the rules); remove "
                        "this entry",
                    )
                )
            elif pool.name in config.skip_pools or _external(pool):
                skipped.append(pool.name)
            else:
                pools.append(
                    KarpenterNodePoolArgs(
                        rules=rules, pool_name=pool.name, kubeconfig=kubeconfig, context=context
                    )
                )
            continue
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
        planned = PLANNERS[pool.provider](rules, pool, config, read_text)
        if isinstance(planned, list):
            problems.extend(planned)
        else:
            pools.append(planned)
    for provider in PLANNERS:
        section = config.section(provider)
        if section is None:
            continue
        ours = [p.name for p in rules.node_pools if p.provider == provider]
        for name in section.pools:
            if name not in ours:
                problems.append(_foreign_pool(rules, provider, name, ours))
    aks = [p for p in pools if isinstance(p, AksNodePoolArgs)]
    problems.extend(_duplicate_agent_pool_names(aks))
    autoscaler_problems, warnings = _autoscaler_checks(rules, aks)
    problems.extend(autoscaler_problems)
    if problems:
        raise StackConfigError(stack, problems)
    return PoolPlans(tuple(pools), tuple(skipped), warnings)


def _autoscaler_checks(
    rules: NodeRules, aks: list[AksNodePoolArgs]
) -> tuple[list[ConfigProblem], tuple[str, ...]]:
    """The gates checked against each pool's autoscaler as the stack makes it: problems for
    AKS pools the stack autoscales, and every warning (`nodegate validate` prints the same)."""
    overrides, problems = _stack_autoscalers(rules, aks)
    warnings: list[str] = []
    for finding in autoscaler_findings(rules, overrides):
        where = f"{format_path(finding.path)}: {finding.message}"
        if finding.severity == "warning":
            warnings.append(f"warning: {where}")
        else:  # only a pool the stack made autoscaled can fail here: the rules loaded
            problems.append(
                ConfigProblem(
                    f"{NAMESPACE}:aks.pools.{finding.pool}.autoscaling",
                    "makes the pool autoscaled by AKS's managed cluster-autoscaler (the rules "
                    f"name no autoscaler for it), and then {where}",
                )
            )
    return problems, tuple(dict.fromkeys(warnings))


def _external(pool: NodePool) -> bool:
    """A Karpenter NodePool nodegate does not render (autoscaler.externalStartupTaints)."""
    return pool.autoscaler is not None and pool.autoscaler.external_startup_taints is not None


def _stack_autoscalers(
    rules: NodeRules, plans: list[AksNodePoolArgs]
) -> tuple[dict[str, Autoscaler], list[ConfigProblem]]:
    """AKS pools the stack autoscales: AKS's managed cluster-autoscaler unless the rules name
    one; and where rules and stack disagree about it."""
    overrides: dict[str, Autoscaler] = {}
    problems: list[ConfigProblem] = []
    for plan in plans:
        pool = rules.pool(plan.pool_name)
        assert pool is not None  # planning made Args only for the rules' own pools
        key = f"{NAMESPACE}:aks.pools.{pool.name}.autoscaling"
        said = pool.autoscaler
        if plan.autoscaling is not None and said is None:
            overrides[pool.name] = MANAGED_CA
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
            and (said.type == "cluster-autoscaler")
        ):
            problems.append(
                ConfigProblem(
                    key,
                    f"is not set, but the rules say pool '{pool.name}' runs AKS's managed "
                    "cluster-autoscaler, which AKS runs only on a pool with autoscaling: set "
                    "it to {minCount, maxCount}",
                )
            )
    return overrides, problems


def _merged(defaults: BaseModel, own: BaseModel) -> dict[str, Any]:
    """`defaults` overridden field by field by the pool's own entry (an explicit null clears)."""
    return {
        **defaults.model_dump(by_alias=True, exclude_unset=True),
        **own.model_dump(by_alias=True, exclude_unset=True),
    }


def _plan_oke(
    rules: NodeRules, pool: NodePool, config: StackConfig, read_text: Callable[[str], str]
) -> OkeNodePoolArgs | list[ConfigProblem]:
    """The pool's OkeNodePool Args from its merged settings, or what is wrong with them: the
    one place OKE stack settings become component inputs."""
    section = config.oke
    assert section is not None  # plan_pools plans only pools whose section is configured
    key = f"{NAMESPACE}:oke.pools.{pool.name}"
    try:
        s = OkePoolSettings.model_validate(_merged(section.defaults, section.pools[pool.name]))
    # Invalid merged settings are reported with the rest, naming the pool's keys.
    except ValidationError as err:
        return config_problems(err, f"{key}.", OkePoolSettings, defaults="oke")
    user_cloud_init = None
    if s.user_cloud_init is not None:
        try:
            user_cloud_init = read_text(s.user_cloud_init)
        # Unreadable user cloud-init is a config mistake: name the key and the path tried.
        except (OSError, UnicodeDecodeError) as err:
            reason = err.strerror if isinstance(err, OSError) else "not UTF-8 text"
            tried = getattr(err, "filename", None) or s.user_cloud_init
            return [ConfigProblem(f"{key}.userCloudInit", f"cannot read '{tried}': {reason}")]
    shape, cycling = s.node_shape_config, s.node_cycling
    return OkeNodePoolArgs(
        rules=rules,
        pool_name=pool.name,
        compartment_id=section.compartment_id,
        cluster_id=section.cluster_id,
        kubernetes_version=s.kubernetes_version,
        node_shape=s.node_shape,
        image_id=s.image_id,
        placements=[
            OkePlacementArgs(
                availability_domain=p.availability_domain,
                subnet_id=p.subnet_id,
                fault_domains=list(p.fault_domains) or None,
            )
            for p in s.placements
        ],
        size=pool.size if s.size is None else s.size,
        ocpus=shape.ocpus if shape else None,
        memory_in_gbs=shape.memory_in_gbs if shape else None,
        boot_volume_size_in_gbs=s.boot_volume_size_in_gbs,
        user_cloud_init=user_cloud_init,
        node_pool_name=s.name,
        image_family=s.image_family or "oracle-linux",
        nsg_ids=list(s.nsg_ids) if s.nsg_ids else None,
        ssh_public_key=s.ssh_public_key,
        kms_key_id=s.kms_key_id,
        pod_network=(
            None
            if s.pod_network is None
            else OkePodNetworkArgs(
                cni_type=s.pod_network.cni_type,
                pod_subnet_ids=list(s.pod_network.pod_subnet_ids) or None,
                pod_nsg_ids=list(s.pod_network.pod_nsg_ids) or None,
                max_pods_per_node=s.pod_network.max_pods_per_node,
            )
        ),
        preemptible=bool(s.preemptible),
        ignore_changes=_ignored(pool, s.ignore_changes or ()),
        node_cycling=(
            OkeNodeCyclingArgs(
                maximum_surge=cycling.maximum_surge,
                maximum_unavailable=cycling.maximum_unavailable,
            )
            if cycling
            else None
        ),
    )


def _ignored(pool: NodePool, configured: tuple[str, ...]) -> tuple[str, ...]:
    """An autoscaled pool's size belongs to its autoscaler: `pulumi up` must not revert it."""
    if pool.autoscaler_type == "cluster-autoscaler" and "size" not in configured:
        return (*configured, "size")
    return configured


def _plan_aks(
    rules: NodeRules, pool: NodePool, config: StackConfig, read_text: Callable[[str], str]
) -> AksNodePoolArgs | list[ConfigProblem]:
    """The pool's AksNodePool Args (derived name, count, mode), or what is wrong with them: the
    one place AKS stack settings become component inputs."""
    section = config.aks
    assert section is not None  # plan_pools plans only pools whose section is configured
    key = f"{NAMESPACE}:aks.pools.{pool.name}"
    try:
        settings = AksPoolSettings.model_validate(
            _merged(section.defaults, section.pools[pool.name])
        )
    # Invalid merged settings are reported with the rest, naming the pool's keys.
    except ValidationError as err:
        return config_problems(err, f"{key}.", AksPoolSettings, defaults="aks")
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
    return AksNodePoolArgs(
        rules=rules,
        pool_name=pool.name,
        resource_group_name=section.resource_group_name,
        cluster_name=section.cluster_name,
        vm_size=settings.vm_size,
        agent_pool_name=name,
        count=count,
        autoscaling=(
            AksAutoscalingArgs(min_count=scaling.min_count, max_count=scaling.max_count)
            if scaling
            else None
        ),
        mode=mode,
        os_sku=settings.os_sku,
        os_type=os_type,
        orchestrator_version=settings.orchestrator_version,
    )


Planner = Callable[
    [NodeRules, NodePool, StackConfig, Callable[[str], str]], PlannedPool | list[ConfigProblem]
]
"""A provider's planning: (rules, pool, stack config, read_text) -> its Args, or problems."""

PLANNERS: dict[Provider, Planner] = {"oke": _plan_oke, "aks": _plan_aks}
"""Each cloud provider's planning, by the rules' `provider` (Karpenter pools are planned apart:
they have no cloud pool)."""


def _duplicate_agent_pool_names(plans: list[AksNodePoolArgs]) -> list[ConfigProblem]:
    seen: dict[str, str] = {}
    problems = []
    for plan in plans:
        agent_pool = plan.agent_pool_name or plan.pool_name
        other = seen.setdefault(agent_pool, plan.pool_name)
        if other != plan.pool_name:
            problems.append(
                ConfigProblem(
                    f"{NAMESPACE}:aks.pools.{plan.pool_name}.agentPoolName",
                    f"'{agent_pool}' is already the agent pool of pool '{other}'",
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
