"""`nodegate migrate TOOL ...`: print the rules that replace another tool, validated.

The conversions are pure (`nodegate.migrate`); this reads their inputs (a file, flags, the
environment the old tool read), prints the YAML, or every problem with the old setting's name.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from nodegate.cli.help_format import Command, typer_app
from nodegate.cli.inputs import exit_on_problems
from nodegate.migrate.defaults import (
    HOLD,
    LABEL_KEY,
    LABEL_VALUE,
    TAINT_EFFECT,
    HandlerSettings,
    OperatorSettings,
)

# The conversions are imported when a command runs (cli/lazy_group.py); the options' defaults
# come from nodegate.migrate.defaults (tests/unit/cli/test_lazy_commands.py).
if TYPE_CHECKING:
    from nodegate.core.text.errors import Problem
    from nodegate.migrate.conversion import Conversion, YamlFile

app = typer_app(
    help="Print the rules that replace another tool's settings (validated; notes on what "
    "behaves differently come first, as comments).",
    no_args_is_help=True,
)
OPERATOR = OperatorSettings()
HANDLER = HandlerSettings()


def _print(convert: Callable[[], Conversion]) -> None:
    from nodegate.migrate.conversion import to_yaml  # noqa: PLC0415  (see the imports)

    with exit_on_problems():
        typer.echo(to_yaml(convert()), nl=False)


@app.command("tainter", cls=Command)
def tainter(
    config: Annotated[Path, typer.Argument(help="Tainter's TOML file (its --config-file).")],
) -> None:
    """Tainter's matchers as conditionTaints."""
    from nodegate.core.text.yaml_input import decode  # noqa: PLC0415  (see the imports)
    from nodegate.migrate.tainter import convert_tainter  # noqa: PLC0415

    _print(lambda: convert_tainter(decode(_read(config), str(config)), str(config)))


@app.command("label-to-taint", cls=Command)
def label_to_taint(
    label_key: Annotated[str, typer.Option(help="Its LABEL_KEY constant.")] = LABEL_KEY,
    label_value: Annotated[str, typer.Option(help="Its LABEL_VALUE constant.")] = LABEL_VALUE,
    effect: Annotated[str, typer.Option(help="Its TAINT_EFFECT constant.")] = TAINT_EFFECT,
) -> None:
    """The label-to-taint operator's constants as a labelTaints rule."""
    from nodegate.migrate.label_to_taint import convert_label_to_taint  # noqa: PLC0415

    _print(lambda: convert_label_to_taint(label_key, label_value, effect))


@app.command("node-label-operator", cls=Command)
def node_label_operator(
    persist_label_prefix: Annotated[
        str, typer.Option(envvar="PERSIST_LABEL_PREFIX", help="Label prefix to persist.")
    ] = OPERATOR.persist_label_prefix,
    operator_namespace: Annotated[
        str, typer.Option(envvar="OPERATOR_NAMESPACE", help="Where its records lived.")
    ] = OPERATOR.operator_namespace,
    resync_interval_seconds: Annotated[
        str, typer.Option(envvar="RESYNC_INTERVAL_SECONDS", help="Its resync period.")
    ] = OPERATOR.resync_interval_seconds,
    log_level: Annotated[
        str, typer.Option(envvar="LOG_LEVEL", help="Its log level.")
    ] = OPERATOR.log_level,
    metrics_port: Annotated[
        str, typer.Option(envvar="METRICS_PORT", help="Its metrics port.")
    ] = OPERATOR.metrics_port,
    key_by: Annotated[
        str, typer.Option(help="nodeName (as the operator) or providerID (stable node IDs).")
    ] = "nodeName",
    forget_after: Annotated[
        str, typer.Option(help="Forget a deleted node's record after this long.")
    ] = "720h",
) -> None:
    """The node-label-operator's settings (flags, else its environment variables) as
    persistentLabels and reconciler flags."""
    from nodegate.migrate.node_label_operator import (  # noqa: PLC0415  (see the imports)
        convert_node_label_operator,
    )

    settings = OperatorSettings(
        persist_label_prefix=persist_label_prefix,
        operator_namespace=operator_namespace,
        resync_interval_seconds=resync_interval_seconds,
        log_level=log_level,
        metrics_port=metrics_port,
    )
    _print(lambda: convert_node_label_operator(settings, key_by, forget_after))


@app.command("nodetaintshandler", cls=Command)
def nodetaintshandler(
    startup_backfill: Annotated[
        str, typer.Option(envvar="STARTUP_BACKFILL", help="Its STARTUP_BACKFILL ('1': on).")
    ] = HANDLER.startup_backfill,
    failure_policy: Annotated[
        str, typer.Option(help="failurePolicy of its MutatingWebhookConfiguration.")
    ] = HANDLER.failure_policy,
    timeout_seconds: Annotated[
        int, typer.Option(help="timeoutSeconds of its MutatingWebhookConfiguration.")
    ] = HANDLER.timeout_seconds,
    autoscaler: Annotated[
        str,
        typer.Option(
            help="What adds the gated nodes: none, cluster-autoscaler or karpenter (then the "
            "gate gets cluster-autoscaler's startup prefix and keeps the old key as former)."
        ),
    ] = "none",
    namespace: Annotated[
        str, typer.Option(help="Namespace of its init DaemonSet.")
    ] = HANDLER.namespace,
    init_selector: Annotated[
        str, typer.Option(help="Labels of its init pods (StartPodLabelKey=StartPodLabelValue).")
    ] = HANDLER.init_selector,
    taint_key: Annotated[str, typer.Option(help="Its TaintKey.")] = HANDLER.taint_key,
    taint_value: Annotated[str, typer.Option(help="Its TaintValue.")] = HANDLER.taint_value,
    taint_effect: Annotated[str, typer.Option(help="Its TaintEffectStr.")] = HANDLER.taint_effect,
) -> None:
    """nodetaintshandler's settings (flags, else STARTUP_BACKFILL from the environment) as a
    startupGates rule, with the webhook settings to deploy it with."""
    from nodegate.migrate.nodetaintshandler import (  # noqa: PLC0415  (see the imports)
        convert_nodetaintshandler,
    )

    settings = HandlerSettings(
        taint_key=taint_key,
        taint_value=taint_value,
        taint_effect=taint_effect,
        init_selector=init_selector,
        namespace=namespace,
        startup_backfill=startup_backfill,
        failure_policy=failure_policy,
        timeout_seconds=timeout_seconds,
    )
    _print(lambda: convert_nodetaintshandler(settings, autoscaler))


@app.command("configmap", cls=Command)
def configmap(
    file: Annotated[
        Path,
        typer.Argument(
            help="The rules ConfigMap as `kubectl get configmap NAME -o yaml` prints it."
        ),
    ],
    key: Annotated[
        str | None, typer.Option(help="Its key holding the rules (default: the one that does).")
    ] = None,
) -> None:
    """nodegate's rules ConfigMap (the rules source before NodeRules objects) as a NodeRules
    object to kubectl apply."""
    from nodegate.migrate.rules_configmap import convert_rules_configmap  # noqa: PLC0415

    _print(lambda: convert_rules_configmap(_read(file), str(file), key))


@app.command("node-readiness-controller", cls=Command)
def node_readiness_controller(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="NodeReadinessRule YAML: one document, several, or the List `kubectl get nrr "
            "-o yaml` prints."
        ),
    ],
    keep_completion_annotation: Annotated[
        bool,
        typer.Option(
            help="Gates also write readiness.k8s.io/bootstrap-completed-<rule uid> when lifted, "
            "as node-readiness-controller did (for tools that read it)."
        ),
    ] = False,
) -> None:
    """node-readiness-controller's NodeReadinessRules as conditionTaints (continuous) and
    startupGates (bootstrap-only)."""
    from nodegate.migrate.node_readiness_controller import (  # noqa: PLC0415  (see the imports)
        convert_node_readiness_controller,
    )

    _print(
        lambda: convert_node_readiness_controller(_yaml_files(files), keep_completion_annotation)
    )


@app.command("nidhogg", cls=Command)
def nidhogg(
    config: Annotated[
        Path, typer.Argument(help="nidhogg's config file, YAML or JSON (its -config-file).")
    ],
    hold: Annotated[
        str,
        typer.Option(
            "--for",
            help="How long a DaemonSet's pod may be not Ready before the taint comes back "
            "(nidhogg: at once; nodegate's default: 2m, which rides out a rollout).",
        ),
    ] = HOLD,
    every_node: Annotated[
        bool,
        typer.Option(
            help="A config without nodeSelector means every node, as uswitch's nidhogg read "
            "it (pelotech's fork used each DaemonSet's own nodeSelector: --daemon-sets)."
        ),
    ] = False,
    daemon_sets: Annotated[
        list[Path] | None,
        typer.Option(
            "--daemon-sets",
            help="For a config without nodeSelector, as pelotech's nidhogg (and its chart's "
            "default) reads it: YAML with the listed DaemonSets (`kubectl get ds -A -o yaml`, "
            "manifests), whose own nodeSelectors become the rules' matches. Repeatable.",
            show_default=False,
        ),
    ] = None,
    ready_annotation: Annotated[
        str | None,
        typer.Option(
            help="Also write nidhogg's annotation of a node's first time without its taints, "
            "for what reads it: pelotech (<taintNamePrefix>/ready-since) or uswitch "
            "(nidhogg.uswitch.com/first-time-ready).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """nidhogg's (uswitch's or pelotech's) DaemonSets as nodeAgents rules, one per DaemonSet,
    each with nidhogg's taint."""
    from nodegate.migrate.nidhogg import convert_nidhogg  # noqa: PLC0415  (see the imports)

    def convert() -> Conversion:
        files = None if daemon_sets is None else _yaml_files(daemon_sets)
        return convert_nidhogg(
            _read(config), str(config), hold, every_node, files, ready_annotation
        )

    _print(convert)


def _yaml_files(paths: list[Path]) -> list[YamlFile]:
    """Every YAML file read, or a RulesError naming each one that cannot be."""
    from nodegate.core.text.errors import RulesError  # noqa: PLC0415  (see the imports)
    from nodegate.core.text.yaml_input import read_yaml_documents  # noqa: PLC0415
    from nodegate.migrate.conversion import YamlFile  # noqa: PLC0415

    read: list[YamlFile] = []
    problems: list[Problem] = []
    for path in paths:
        try:
            documents = read_yaml_documents(_read(path), str(path))
        except RulesError as err:
            problems += err.problems
            continue
        read.append(YamlFile(str(path), tuple(documents)))
    if problems:
        raise RulesError(problems)
    return read


def _read(path: Path) -> bytes:
    """The file's bytes (bounded), or a RulesError naming it."""
    from nodegate.core.text.errors import Problem, RulesError  # noqa: PLC0415  (see the imports)
    from nodegate.core.text.yaml_input import read_limited  # noqa: PLC0415

    try:
        return read_limited(path)
    except OSError as err:
        unreadable = Problem(0, 0, str(path), (), f"cannot read file: {err.strerror}")
        raise RulesError([unreadable]) from err
