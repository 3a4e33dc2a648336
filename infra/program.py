"""The program `pulumi up` runs: node pools on OKE and AKS born with the rules' taints and labels.

Imperative shell around pure steps. Everything that can be wrong (stack config, rules, files,
rendering) is checked first, and the program stops with one message listing every problem
before a single resource is declared; only then are the pool components declared and their
outputs exported. Rules errors read exactly as `nodegate validate` prints them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi

from nodegate.bootstrap.aks import render_aks_pool
from nodegate.bootstrap.errors import BootstrapError
from nodegate.bootstrap.oke import render_oke_cloud_init
from nodegate.core.errors import RulesError
from nodegate.core.loader import load_rules, parse_rules, rules_from_data
from nodegate.core.model import NodeRules
from nodegate.core.yaml_input import read_limited
from nodegate.infra.aks_pool import (
    INITIALIZATION_TAINTS_SUPPORTED,
    AksAutoscalingArgs,
    AksNodePool,
    AksNodePoolArgs,
)
from nodegate.infra.config import (
    CONFIG_KEYS,
    NAMESPACE,
    OBJECT_KEYS,
    AksConfig,
    AksPoolPlan,
    ConfigProblem,
    OkeConfig,
    OkePoolPlan,
    PoolPlans,
    StackConfig,
    StackConfigError,
    parse_stack_config,
    plan_pools,
)
from nodegate.infra.oke_pool import (
    OkeNodeCyclingArgs,
    OkeNodePool,
    OkeNodePoolArgs,
    OkePlacementArgs,
)


class InvalidRulesError(pulumi.RunError):
    """The rules do not validate; the message is exactly what `nodegate validate` prints."""


class InvalidStackConfigError(pulumi.RunError):
    """The stack's `nodegate:*` config is wrong; every line names the key to fix."""


class BootstrapRenderError(pulumi.RunError):
    """A pool's bootstrap cannot be rendered (e.g. user_data over OCI's limit)."""


@dataclass(frozen=True)
class Prepared:
    """Everything the program declares, checked: nothing here can fail at declaration time."""

    config: StackConfig
    rules: NodeRules
    plans: PoolPlans
    user_cloud_init: Mapping[str, str | None]
    """The user cloud-init text of each OKE pool, by pool name (None: none given)."""


def main(project_dir: Path | None = None) -> None:
    """Entry point of `infra/__main__.py`; `project_dir` defaults to where Pulumi.yaml is."""
    stack = pulumi.get_stack()
    prepared = prepare(read_raw_config(stack), stack, project_dir or find_project_dir())
    if prepared.config.reconciler is not None:
        pulumi.log.warn(
            f"{NAMESPACE}:reconciler is reserved for the reconciler deployment, which this "
            "program does not deploy yet; the key is ignored"
        )
    if prepared.plans.skipped:
        pulumi.log.info(
            f"pools left to other stacks ({NAMESPACE}:skipPools): "
            + ", ".join(prepared.plans.skipped)
        )
    pools = declare_pools(prepared)

    # Reconciler component comes next (issue: deploy the reconciler).
    # It takes `prepared.rules` and the reserved `nodegate:reconciler` settings (docs/infra.md)
    # and deploys the in-cluster reconciler with its Node admission webhook, which is what adds
    # the startup gates of AKS pools whose `startupGatesVia` is "webhook".

    pulumi.export("pools", pools)
    pulumi.export("skippedPools", list(prepared.plans.skipped))


def find_project_dir() -> Path:
    """The directory of Pulumi.yaml: relative paths in stack config are relative to it.

    Pulumi runs the program from `main` (infra/), not from the project directory, and older
    CLIs leave `get_root_directory()` unset, so fall back to searching upwards for Pulumi.yaml.
    """
    root: str | None = pulumi.get_root_directory()
    if root:
        return Path(root)
    here = Path.cwd().resolve()
    return next((d for d in (here, *here.parents) if (d / "Pulumi.yaml").is_file()), here)


def read_raw_config(stack: str) -> dict[str, Any]:
    """The `nodegate:*` values as Pulumi hands them over (structured values JSON-decoded)."""
    config = pulumi.Config(NAMESPACE)
    raw: dict[str, Any] = {}
    problems: list[ConfigProblem] = []
    for key in CONFIG_KEYS:
        try:
            raw[key] = config.get_object(key) if key in OBJECT_KEYS else config.get(key)
        # A structured key set as a plain string (e.g. `pulumi config set nodegate:oke x`).
        except pulumi.ConfigTypeError:
            problems.append(
                ConfigProblem(
                    f"{NAMESPACE}:{key}",
                    "must be structured config: a YAML mapping/list in the stack file, or set "
                    f"with `pulumi config set --path '{NAMESPACE}:{key}.<field>' <value>`",
                )
            )
    if problems:
        raise InvalidStackConfigError(str(StackConfigError(stack, problems)))
    return raw


def prepare(raw: Mapping[str, Any], stack: str, project_dir: Path) -> Prepared:
    """Parse and check everything; raise one RunError listing every problem, or return."""
    try:
        config = parse_stack_config(raw, stack)
    # RunError: Pulumi prints the message alone, without a Python traceback.
    except StackConfigError as err:
        raise InvalidStackConfigError(str(err)) from err
    try:
        rules = _load_rules(config, stack, project_dir)
    # Same text as `nodegate validate`: the problem lines, nothing added.
    except RulesError as err:
        raise InvalidRulesError(str(err)) from err
    try:
        plans = plan_pools(rules, config, stack)
    # Config that does not fit these rules (unconfigured or unknown pools, bad settings).
    except StackConfigError as err:
        raise InvalidStackConfigError(str(err)) from err

    user_cloud_init: dict[str, str | None] = {}
    problems: list[ConfigProblem] = []
    for oke in plans.oke:
        path = oke.settings.user_cloud_init
        user_cloud_init[oke.pool.name] = None
        if path is None:
            continue
        resolved = _resolve(project_dir, path)
        try:
            user_cloud_init[oke.pool.name] = resolved.read_text(encoding="utf-8")
        # Unreadable user cloud-init is a config mistake: name the key and the path tried.
        except (OSError, UnicodeDecodeError) as err:
            reason = err.strerror if isinstance(err, OSError) else "not UTF-8 text"
            problems.append(
                ConfigProblem(
                    f"{NAMESPACE}:oke.pools.{oke.pool.name}.userCloudInit",
                    f"cannot read '{resolved}': {reason}",
                )
            )
    if problems:
        raise InvalidStackConfigError(str(StackConfigError(stack, problems)))

    failures: list[str] = []
    for oke in plans.oke:
        try:
            render_oke_cloud_init(rules, oke.pool, user_cloud_init[oke.pool.name])
        # Rendering refuses inputs a node would choke on; report them all before declaring.
        except BootstrapError as err:
            failures.append(str(err))
    for aks in plans.aks:
        try:
            render_aks_pool(
                rules, aks.pool, initialization_taints_supported=INITIALIZATION_TAINTS_SUPPORTED
            )
        # Same: a pool whose lists cannot be rendered must not be half-declared.
        except BootstrapError as err:
            failures.append(str(err))
    if failures:
        raise BootstrapRenderError("\n".join(failures))
    return Prepared(config=config, rules=rules, plans=plans, user_cloud_init=user_cloud_init)


def declare_pools(prepared: Prepared) -> dict[str, dict[str, Any]]:
    """Declare one component per planned pool; return the per-pool outputs to export."""
    config, rules = prepared.config, prepared.rules
    outputs: dict[str, dict[str, Any]] = {}
    if config.oke is not None:
        for oke in prepared.plans.oke:
            user = prepared.user_cloud_init[oke.pool.name]
            outputs[oke.pool.name] = _declare_oke(rules, config.oke, oke, user)
    if config.aks is not None:
        for aks in prepared.plans.aks:
            outputs[aks.pool.name] = _declare_aks(rules, config.aks, aks)
    return outputs


def _declare_oke(
    rules: NodeRules, section: OkeConfig, plan: OkePoolPlan, user_cloud_init: str | None
) -> dict[str, Any]:
    s = plan.settings
    shape = s.node_shape_config
    cycling = s.node_cycling
    node_pool = OkeNodePool(
        plan.pool.name,
        OkeNodePoolArgs(
            rules=rules,
            pool_name=plan.pool.name,
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
            size=plan.size,
            ocpus=shape.ocpus if shape else None,
            memory_in_gbs=shape.memory_in_gbs if shape else None,
            boot_volume_size_in_gbs=s.boot_volume_size_in_gbs,
            user_cloud_init=user_cloud_init,
            node_pool_name=s.name,
            node_cycling=(
                OkeNodeCyclingArgs(
                    maximum_surge=cycling.maximum_surge,
                    maximum_unavailable=cycling.maximum_unavailable,
                )
                if cycling
                else None
            ),
        ),
    )
    return {
        "provider": "oke",
        "nodePoolId": node_pool.node_pool_id,
        "registrationTaints": node_pool.registration_taints,
        "registrationLabels": node_pool.registration_labels,
        "bootstrapSha256": node_pool.bootstrap_sha256,
    }


def _declare_aks(rules: NodeRules, section: AksConfig, plan: AksPoolPlan) -> dict[str, Any]:
    s = plan.settings
    scaling = s.autoscaling
    agent_pool = AksNodePool(
        plan.pool.name,
        AksNodePoolArgs(
            rules=rules,
            pool_name=plan.pool.name,
            resource_group_name=section.resource_group_name,
            cluster_name=section.cluster_name,
            vm_size=s.vm_size,
            agent_pool_name=plan.agent_pool_name,
            count=plan.count,
            autoscaling=(
                AksAutoscalingArgs(min_count=scaling.min_count, max_count=scaling.max_count)
                if scaling
                else None
            ),
            mode=plan.mode,
            os_sku=s.os_sku,
            orchestrator_version=s.orchestrator_version,
        ),
    )
    _warn_about_gates(plan.pool.name, agent_pool)
    return {
        "provider": "aks",
        "agentPoolId": agent_pool.agent_pool_id,
        "registrationTaints": agent_pool.registration_taints,
        "registrationLabels": agent_pool.node_labels,
        "nodeTaints": agent_pool.node_taints,
        "startupGateTaints": agent_pool.startup_gate_taints,
        "startupGatesVia": agent_pool.startup_gates_via,
        "bootstrapSha256": agent_pool.bootstrap_sha256,
    }


def _warn_about_gates(pool: str, agent_pool: AksNodePool) -> None:
    """Say out loud that an AKS pool's gates depend on a webhook this program does not deploy."""

    def warn(args: list[Any]) -> None:
        via, gates = args
        if via == "webhook":
            pulumi.log.warn(
                f"pool '{pool}': startup gates ({', '.join(gates)}) are not AKS node taints; "
                "nodegate's Node admission webhook adds them at registration. Until the "
                "reconciler and its webhook are deployed, new nodes of this pool register "
                "without them.",
                resource=agent_pool,
            )

    pulumi.Output.all(agent_pool.startup_gates_via, agent_pool.startup_gate_taints).apply(warn)


def _resolve(project_dir: Path, configured: str) -> Path:
    path = Path(configured)
    return path if path.is_absolute() else project_dir / path


def _load_rules(config: StackConfig, stack: str, project_dir: Path) -> NodeRules:
    """The rules, from the file or inline; file errors name it as configured, as
    `nodegate validate` run from the project directory would."""
    if config.rules is None:
        return rules_from_data(
            config.rules_inline, f"Pulumi.{stack}.yaml ({NAMESPACE}:rulesInline)"
        )
    resolved = _resolve(project_dir, config.rules)
    try:
        data = read_limited(resolved)
    # Let the loader report the unreadable file, naming the full path that was tried.
    except OSError:
        return load_rules(resolved)
    return parse_rules(data, config.rules)
