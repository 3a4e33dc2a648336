"""`nodegate reconcile`: the in-cluster controller (the same entry point is the image's command).

Its options are not declared here: each is a field of `ReconcilerSettings` (name, default and
help), turned into a typer option by `_option`; this module only parses, validates and runs.
"""

from __future__ import annotations

import inspect
from typing import Annotated, Any, Literal

import typer
from pydantic import ValidationError

from nodegate.core.text.flags import FlagSpec, flags, values_from_flags
from nodegate.reconciler.settings import ReconcilerSettings

FLAGS = flags(ReconcilerSettings)
"""Every `nodegate reconcile` flag, from the settings model."""


def reconcile(**given: Any) -> None:
    """Keep every node's labels and taints what the rules want, for the life of the node."""
    by_name = {spec.name.replace("-", "_"): spec.name for spec in FLAGS}
    values = values_from_flags(
        ReconcilerSettings, {by_name[param]: value for param, value in given.items()}
    )
    try:
        settings = ReconcilerSettings.model_validate(values)
    # Bad values are the user's to fix: say which flag and why, exit 2 as click does.
    except ValidationError as err:
        for error in err.errors():
            typer.echo(f"nodegate reconcile: {_problem(error['loc'], error['msg'])}", err=True)
        raise typer.Exit(2) from err
    raise typer.Exit(run(settings))


def run(settings: ReconcilerSettings) -> int:
    """Run the reconciler until it stops (its exit code).

    Its entry point (the Kubernetes client, the webhook, the controller) is imported here, when
    it runs: `nodegate reconcile --help` or a bad flag needs the settings model only."""
    from nodegate.reconciler.main import run as run_reconciler  # noqa: PLC0415

    return run_reconciler(settings)


def _problem(loc: tuple[int | str, ...], message: str) -> str:
    """The flag the error is about, then the message (checks across fields name their flags)."""
    message = message.removeprefix("Value error, ")
    spec = next((s for s in FLAGS if s.path == loc), None)
    return f"--{spec.name}: {message}" if spec else message


def _option(spec: FlagSpec) -> inspect.Parameter:
    """The typer option of one flag: its type, default and help come from the field."""
    decl = f"--{spec.name}/--no-{spec.name}" if spec.switch else f"--{spec.name}"
    kind: Any = spec.kind
    if spec.choices:  # typer offers a Literal's values as the flag's choices
        kind = Literal.__getitem__(spec.choices)
    if spec.repeatable:
        kind = list[kind] | None
    elif spec.default is None and not spec.switch:
        kind = kind | None
    option = typer.Option(decl, help=spec.help + (" (repeatable)" if spec.repeatable else ""))
    return inspect.Parameter(
        spec.name.replace("-", "_"),
        inspect.Parameter.KEYWORD_ONLY,
        default=spec.default,
        annotation=Annotated[kind, option],
    )


# typer reads a command's options from its signature: give `reconcile` one option per flag.
reconcile.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [_option(spec) for spec in FLAGS], return_annotation=None
)
