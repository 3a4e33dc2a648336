"""The program `pulumi up` runs: node pools on OKE and AKS born with the rules' taints and labels.

Imperative shell around pure steps. Everything that can be wrong (stack config, rules, files,
rendering) is checked first, and the program stops with one message listing every problem
before a single resource is declared; only then are the pool components declared and their
outputs exported. Rules errors read exactly as `nodegate validate` prints them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pulumi

from nodegate.bootstrap.errors import BootstrapError
from nodegate.core.rules.loader import RulesDocument, load_rules
from nodegate.core.text.errors import RulesError
from nodegate.core.text.yaml_input import decode, read_limited
from nodegate.infra.config_base import NAMESPACE, ConfigProblem, StackConfigError
from nodegate.infra.planning import PoolPlans, plan_pools, plan_reconciler
from nodegate.infra.reconciler import Reconciler, ReconcilerArgs
from nodegate.infra.stack_config import CONFIG_KEYS, StackConfig, parse_stack_config
from nodegate.manifests.build import build_manifests
from nodegate.manifests.settings import SettingsError


class InvalidRulesError(pulumi.RunError):
    """The rules do not validate; the message is exactly what `nodegate validate` prints."""


class InvalidStackConfigError(pulumi.RunError):
    """The stack's `nodegate:*` config is wrong; every line names the key to fix."""


class BootstrapRenderError(pulumi.RunError):
    """A pool's bootstrap cannot be rendered (e.g. user_data over OCI's limit)."""


def main(project_dir: Path | None = None) -> None:
    """Entry point of `infra/__main__.py`; `project_dir` defaults to where Pulumi.yaml is."""
    stack = pulumi.get_stack()
    plans, reconciler_args = prepare(
        read_raw_config(stack), stack, project_dir or find_project_dir()
    )
    if plans.skipped:
        pulumi.log.info(
            f"pools left to other stacks ({NAMESPACE}:skipPools): " + ", ".join(plans.skipped)
        )
    for warning in plans.warnings:
        pulumi.log.warn(warning)
    webhook = reconciler_args is not None and reconciler_args.settings.webhook is not None
    pools = {planned.pool_name: planned.declare(webhook) for planned in plans.pools}
    if reconciler_args is None:
        pulumi.log.warn(
            f"no {NAMESPACE}:reconciler section: this stack does not deploy nodegate's "
            "reconciler, so nothing keeps taints and labels true after registration and "
            "startup gates are never lifted (unless another stack or `nodegate manifests` "
            "deploys it); see docs/infra.md"
        )
    else:
        reconciler = Reconciler("reconciler", reconciler_args)
        pulumi.export(
            "reconciler",
            {
                "namespace": reconciler.namespace,
                "image": reconciler.image,
                "rulesSha256": reconciler.rules_sha256,
            },
        )
    pulumi.export("pools", pools)
    pulumi.export("skippedPools", list(plans.skipped))


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
            # Every key but the rules path is structured (JSON) config.
            raw[key] = config.get(key) if key == "rules" else config.get_object(key)
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


def prepare(
    raw: Mapping[str, Any], stack: str, project_dir: Path
) -> tuple[PoolPlans, ReconcilerArgs | None]:
    """Parse and check everything; raise one RunError listing every problem, or return what
    the program declares (no reconciler: the stack has no `nodegate:reconciler` section), of
    which nothing can fail at declaration time."""
    try:
        config = parse_stack_config(raw, stack)
    # RunError: Pulumi prints the message alone, without a Python traceback.
    except StackConfigError as err:
        raise InvalidStackConfigError(str(err)) from err
    try:
        document = _load_rules(config, stack, project_dir)
    # Same text as `nodegate validate`: the problem lines, nothing added.
    except RulesError as err:
        raise InvalidRulesError(str(err)) from err
    reconciler = plan_reconciler(document, config, project_dir)
    try:
        plans = plan_pools(
            document.rules,
            config,
            stack,
            lambda path: _resolve(project_dir, path).read_text(encoding="utf-8"),
            reconciler,
        )
    # Config that does not fit these rules (unconfigured or unknown pools, bad settings).
    except StackConfigError as err:
        raise InvalidStackConfigError(str(err)) from err

    failures: list[str] = []
    for planned in plans.pools:
        try:
            planned.check()
        # Rendering refuses inputs a node would choke on: report every pool's before declaring
        # any, so no stack is half-declared (each pool checks what its component renders).
        except BootstrapError as err:
            failures.append(str(err))
    if failures:
        raise BootstrapRenderError("\n".join(failures))
    if reconciler is not None:
        try:
            build_manifests(reconciler.rules, reconciler.settings)
        # Settings that cannot serve these rules (an access they read withheld): nothing declared.
        except SettingsError as err:
            raise InvalidStackConfigError(
                f"Pulumi.{stack}.yaml ({NAMESPACE}:reconciler): {err}"
            ) from err
    return plans, reconciler


def _resolve(project_dir: Path, configured: str) -> Path:
    path = Path(configured)
    return path if path.is_absolute() else project_dir / path


def _load_rules(config: StackConfig, stack: str, project_dir: Path) -> RulesDocument:
    """The rules, from the file or inline; file errors name it as configured, as
    `nodegate validate` run from the project directory would."""
    if config.rules is None:
        return RulesDocument.from_data(
            config.rules_inline, f"Pulumi.{stack}.yaml ({NAMESPACE}:rulesInline)"
        )
    resolved = _resolve(project_dir, config.rules)
    try:
        data = read_limited(resolved)
    # Let the loader report the unreadable file, naming the full path that was tried.
    except OSError:
        load_rules(resolved)
        raise
    return RulesDocument.parse(decode(data, config.rules), config.rules)
