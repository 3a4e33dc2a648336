"""Match the stack config to the rules' pools, and produce each component's Args directly.

Pure: the validated stack config and rules in, the planned pools (each provider's component
Args, and `KarpenterNodePoolArgs`, each a `PlannedPool`) and `ReconcilerArgs` out (or a
StackConfigError listing every mismatch). The program only reads files through the `read_text`
it passes in, and checks and declares what comes out of here. Nothing here names a provider: a
pool's provider settings become its component's Args in the provider's module, found through
the registry (`nodegate.infra.providers.PROVIDERS`).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from nodegate.core.rules.autoscaler_checks import autoscaler_findings
from nodegate.core.rules.loader import RulesDocument
from nodegate.core.rules.model import NodePool, NodeRules
from nodegate.core.text.errors import format_path
from nodegate.infra.config_base import NAMESPACE, ConfigProblem, StackConfigError
from nodegate.infra.planned_pool import PlannedPool
from nodegate.infra.providers import PROVIDERS, infra_provider
from nodegate.infra.providers.base import StackAutoscaler, pool_key
from nodegate.infra.providers.karpenter import KarpenterNodePoolArgs
from nodegate.infra.reconciler import ReconcilerArgs
from nodegate.infra.stack_config import StackConfig


@dataclass(frozen=True)
class PoolPlans:
    """Which rules pools this stack declares (as component Args), and which it leaves alone."""

    pools: tuple[PlannedPool, ...]
    """In the rules' order; each checks and declares itself."""
    skipped: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    """What `nodegate validate` would warn about each pool's gates, autoscalers as the stack
    makes them (to be logged, not to stop the program)."""


def plan_reconciler(
    document: RulesDocument, config: StackConfig, project_dir: Path
) -> ReconcilerArgs | None:
    """The Reconciler's Args from `nodegate:reconciler`, or None when the stack has none. Its
    kubeconfig (a path is taken relative to the project directory) and context are the cluster
    every Kubernetes object of the stack goes to; None: the ambient one."""
    section = config.reconciler
    if section is None:
        return None
    kubeconfig = section.kubeconfig
    if kubeconfig is not None and "\n" not in kubeconfig:  # a path, not the file's contents
        path = Path(kubeconfig).expanduser()
        kubeconfig = str(path if path.is_absolute() else project_dir / path)
    return ReconcilerArgs(
        rules=document, settings=section, kubeconfig=kubeconfig, context=section.context
    )


def plan_pools(
    rules: NodeRules,
    config: StackConfig,
    stack: str,
    read_text: Callable[[str], str],
    reconciler: ReconcilerArgs | None,
) -> PoolPlans:
    """Match every rules pool to its stack settings and produce its component's Args;
    StackConfigError lists every mismatch. `read_text` reads a configured file (userCloudInit)
    by its configured path; Karpenter NodePools go to the `reconciler`'s cluster."""
    problems: list[ConfigProblem] = []
    pools: list[PlannedPool] = []
    skipped: list[str] = []
    kubeconfig = None if reconciler is None else reconciler.kubeconfig
    context = None if reconciler is None else reconciler.context
    names = [p.name for p in rules.node_pools]
    for name in config.skip_pools:
        if name not in names:
            problems.append(_unknown_pool(f"{NAMESPACE}:skipPools", name, names))
    planned: dict[str, list[PlannedPool]] = {name: [] for name in PROVIDERS}
    for pool in rules.node_pools:
        provider = infra_provider(pool.provider)
        section = config.section(pool.provider)
        key = pool_key(pool.provider, pool.name)
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
        plan = provider.plan(rules, pool, section, read_text)
        if isinstance(plan, list):
            problems.extend(plan)
        else:
            pools.append(plan)
            planned[provider.name].append(plan)
    problems.extend(_foreign_entries(rules, config))
    across_pools, warnings = _checks_across_pools(rules, planned)
    problems.extend(across_pools)
    if problems:
        raise StackConfigError(stack, problems)
    return PoolPlans(tuple(pools), tuple(skipped), warnings)


def _foreign_entries(rules: NodeRules, config: StackConfig) -> list[ConfigProblem]:
    """Entries of a provider's section that name no rules pool of that provider."""
    problems = []
    for name in PROVIDERS:
        section = config.section(name)
        if section is None:
            continue
        ours = [p.name for p in rules.node_pools if p.provider == name]
        for pool_name in section.pools:
            if pool_name not in ours:
                problems.append(_foreign_pool(rules, name, pool_name, ours))
    return problems


def _checks_across_pools(
    rules: NodeRules, planned: Mapping[str, list[PlannedPool]]
) -> tuple[list[ConfigProblem], tuple[str, ...]]:
    """Each provider's checks across its planned pools, then the gates checked against each
    pool's autoscaler as the stack makes it: problems for pools the stack autoscales, and every
    warning (`nodegate validate` prints the same)."""
    problems: list[ConfigProblem] = []
    autoscalers: dict[str, StackAutoscaler] = {}
    for name, provider in PROVIDERS.items():
        check = provider.check_plans(rules, planned[name])
        problems.extend(check.problems)
        autoscalers.update(check.autoscalers)
    overrides = {pool: made.autoscaler for pool, made in autoscalers.items()}
    warnings: list[str] = []
    for finding in autoscaler_findings(rules, overrides):
        where = f"{format_path(finding.path)}: {finding.message}"
        if finding.severity == "warning":
            warnings.append(f"warning: {where}")
        elif (made := autoscalers.get(finding.pool)) is not None:
            problems.append(ConfigProblem(made.key, f"{made.made_by}, and then {where}"))
        else:  # rules built in code, never loaded (the loader refuses these): still said
            problems.append(ConfigProblem(f"{NAMESPACE}:rules", where))
    return problems, tuple(dict.fromkeys(warnings))


def _external(pool: NodePool) -> bool:
    """A Karpenter NodePool nodegate does not render (autoscaler.externalStartupTaints)."""
    return pool.autoscaler is not None and pool.autoscaler.external_startup_taints is not None


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
    key = pool_key(provider, name)
    other = rules.pool(name)
    if other is not None:
        return ConfigProblem(
            key,
            f"pool '{name}' has provider {other.provider} in the rules; configure it under "
            f"{NAMESPACE}:{other.provider}.pools",
        )
    return _unknown_pool(key, name, ours)
