"""`nodegate manifests`: the reconciler's objects as YAML, for `kubectl apply -f -`.

The shell around `nodegate.manifests.build.build_manifests`: read the rules (and optionally a
settings file with the same schema as the Pulumi stack's `nodegate:reconciler`), let flags
override the settings, print. Exit codes: 0 printed; 1 the rules or the settings are invalid
(every problem on stderr, each naming the file and the place); 2 no `--rules` with rulesSource
configmap (there are no implicit rules: the example rules taint nodes under disk pressure,
among others). With rulesSource objects (the default) the rules are NodeRules objects applied
apart, and `--rules` only adds their gates to the pods' tolerations.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from nodegate.cli.inputs import exit_on_problems, read_or_exit
from nodegate.manifests.version import package_version

# What the command runs on is imported when it runs (in each function below): a TAB on its
# options reads them from this module and converts no value (cli/lazy_coercion.py).
if TYPE_CHECKING:
    from nodegate.core.rules.loader import RulesDocument
    from nodegate.manifests.settings import DeploySettings

EXAMPLE_RULES = "examples/rules.yaml"
_INVALID = 1
_USAGE = 2


def manifests(
    rules: Annotated[
        Path | None,
        typer.Option(
            "--rules",
            help="A NodeRules file (YAML): its gates are tolerated by the reconciler's pods. "
            "With rulesSource objects (the default) optional, and applied apart (kubectl apply "
            "-f FILE); with configmap required, and in the ConfigMap: there are no default rules "
            f"(nodegate's example: --rules {EXAMPLE_RULES}).",
            show_default=False,
        ),
    ] = None,
    image_repository: Annotated[
        str | None,
        typer.Option(
            "--image-repository",
            envvar="NODEGATE_IMAGE_REPOSITORY",
            help="Where you pushed the reconciler image, without tag, e.g. "
            "iad.ocir.io/<tenancy-namespace>/nodegate or <registry>.azurecr.io/nodegate. "
            "Required (here or in --settings).",
            show_default=False,
        ),
    ] = None,
    image_tag: Annotated[
        str | None,
        typer.Option(
            "--image-tag", help="Image tag. Default: this nodegate's version.", show_default=False
        ),
    ] = None,
    image_digest: Annotated[
        str | None,
        typer.Option("--image-digest", help="Pin the image to sha256:…", show_default=False),
    ] = None,
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace", help="Namespace. Default: nodegate-system.", show_default=False
        ),
    ] = None,
    settings_file: Annotated[
        Path | None,
        typer.Option(
            "--settings",
            help="YAML with the deployment settings (the schema of the Pulumi stack's "
            "nodegate:reconciler, see docs/infra.md); flags override it.",
            show_default=False,
        ),
    ] = None,
    dashboard: Annotated[
        bool | None,
        typer.Option(
            "--dashboard/--no-dashboard",
            help="Include the Grafana dashboard ConfigMap.",
            show_default=False,
        ),
    ] = None,
    prometheus_rule: Annotated[
        bool | None,
        typer.Option(
            "--prometheus-rule/--no-prometheus-rule",
            help="Include the PrometheusRule with the alerts (needs the Prometheus Operator).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Print the reconciler's Kubernetes objects as YAML: nodegate manifests | kubectl apply -f -"""
    from nodegate.core.rules.model import CRD_NAME  # noqa: PLC0415  (see the imports)
    from nodegate.core.text.yaml_output import dump_all  # noqa: PLC0415
    from nodegate.manifests.build import build_manifests  # noqa: PLC0415
    from nodegate.manifests.settings import SettingsError  # noqa: PLC0415

    options: dict[str, Any] = {
        "--rules": rules,
        "--settings": settings_file,
        "--image-repository": image_repository,
        "--image-tag": image_tag,
        "--image-digest": image_digest,
        "--namespace": namespace,
        "dashboard": dashboard,
        "prometheus-rule": prometheus_rule,
    }
    settings = _settings(settings_file, options)
    objects = settings.rules_source == "objects"
    if rules is None and not objects:
        # Nothing a user deploys takes rules they did not name (the example's would taint
        # their nodes): say what to give.
        typer.echo(
            "nodegate manifests: give --rules FILE, the NodeRules the reconciler enforces "
            f"(there are no default rules; for nodegate's example: --rules {EXAMPLE_RULES}, "
            "after reading what it taints)",
            err=True,
        )
        raise typer.Exit(_USAGE)
    document = None if rules is None else load_rules(rules)
    then = (
        "\nThen the rules, NodeRules objects (the rules file is one), once the CRD is "
        f"Established: kubectl apply -f {rules or 'rules.yaml'}"
        if objects
        else ""
    )
    header = (
        f"nodegate {package_version()} reconciler, generated by:\n"
        f"  {_command_line(options)}\n"
        "Regenerate it rather than editing it. Apply: kubectl apply -f <this file>"
        f"{then}\nImage: {settings.image.reference} (push it there first: docs/infra.md)"
    )
    try:
        built = build_manifests(document, settings)
    # Settings that cannot serve the rules given (access withheld that they read): say the fix.
    except SettingsError as err:
        typer.echo(f"{settings_file or 'nodegate manifests'}: {err}", err=True)
        raise typer.Exit(_INVALID) from err
    if objects and rules is not None:
        # Before NodeRules objects this printed the rules ConfigMap: say where they went now.
        typer.echo(
            f"nodegate manifests: the rules of {rules} are not in this output (rulesSource "
            "objects: only their gates' tolerations are); apply them after it: kubectl wait "
            f"--for condition=Established crd/{CRD_NAME} && kubectl apply -f {rules}. To keep "
            "an installation on the rules ConfigMap: --settings with rulesSource: configmap "
            "(or move it: nodegate migrate configmap)",
            err=True,
        )
    typer.echo(dump_all(built, header), nl=False)


def load_rules(path: Path) -> RulesDocument:
    from nodegate.core.rules.loader import RulesDocument  # noqa: PLC0415  (see the imports)
    from nodegate.core.text.yaml_input import decode  # noqa: PLC0415

    # An unreadable file is reported as `nodegate validate` reports it.
    data = read_or_exit(path, _INVALID)
    with exit_on_problems(_INVALID):
        return RulesDocument.parse(decode(data, str(path)), str(path))


def _settings(path: Path | None, options: dict[str, Any]) -> DeploySettings:
    """The settings file (if any) with the flags laid over it."""
    from pydantic import ValidationError  # noqa: PLC0415  (see the imports)

    from nodegate.core.text.errors import format_path  # noqa: PLC0415
    from nodegate.core.text.located_errors import located_errors  # noqa: PLC0415
    from nodegate.manifests.settings import DeploySettings  # noqa: PLC0415

    source = str(path) if path else "nodegate manifests"
    data: dict[str, Any] = _settings_data(path) if path else {}
    image = dict(data.get("image") or {})
    for key in ("repository", "tag", "digest"):
        if options[f"--image-{key}"] is not None:
            image[key] = options[f"--image-{key}"]
    data["image"] = image
    if options["--namespace"] is not None:
        data["namespace"] = options["--namespace"]
    for key, flag in (("grafanaDashboard", "dashboard"), ("prometheusRule", "prometheus-rule")):
        if options[flag] is True:
            data[key] = data.get(key) or {}
        elif options[flag] is False:
            data[key] = None
    try:
        return DeploySettings.model_validate(data)
    # Permanent: wrong settings; name each place and the fix, then stop.
    except ValidationError as err:
        for located in located_errors(err, DeploySettings):
            place = format_path(located.path)
            if place == "image.repository" and located.kind == "missing":
                message = (
                    "required: give --image-repository (or NODEGATE_IMAGE_REPOSITORY, or "
                    "image.repository in --settings): where you pushed the nodegate image"
                )
            else:
                message = located.message
            typer.echo(f"{source}: {place}: {message}", err=True)
        raise typer.Exit(_INVALID) from err


def _settings_data(path: Path) -> dict[str, Any]:
    from nodegate.core.text.yaml_input import read_yaml  # noqa: PLC0415

    # Unreadable file: say which and why, as for rules files.
    raw = read_or_exit(path, _INVALID, what="settings")
    # Broken YAML (or not UTF-8, too large, an alias bomb): every problem with its place.
    with exit_on_problems(_INVALID):
        data, _ = read_yaml(raw, str(path))
    if data is None:
        return {}
    if not isinstance(data, dict):
        typer.echo(
            f"{path}: expected a mapping of settings, found a {type(data).__name__}", err=True
        )
        raise typer.Exit(_INVALID)
    return data


def _command_line(options: dict[str, Any]) -> str:
    """The command that reproduces this output (recorded in its header)."""
    argv = ["nodegate", "manifests"]
    for flag, value in options.items():
        if isinstance(value, bool):
            argv.append(f"--{flag}" if value else f"--no-{flag}")
        elif value is not None:
            argv += [flag, str(value)]
    return shlex.join(argv)
