"""A parameter left out costs nothing: typer builds its pydantic coercion for a value given.

typer (0.29) coerces every parameter's value through a pydantic `TypeAdapter` it builds the
first time the parameter is processed, given on the command line or not: a TAB, which parses
what is typed so far, imported pydantic (about 0.1 s) to turn an absent value into None or to
convert a default nothing would use. Here a parameter's coercion is built when a value comes
for a command that runs; an absent one (None) is what typer's own coercion makes of it (`()`
for a repeatable option or a variadic argument, else None), through typer's
`RuntimeParam.coerce` and without building anything, and a TAB's parse (click's
`resilient_parsing`) leaves values as they are. `Command` and `Group`
(`nodegate.cli.help_format`) do this to every parameter they process, so every nodegate
command has it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from typer._coercion import PassThroughRuntimeParam, RuntimeParam, build_runtime_param
from typer.core import _TyperParameter

if TYPE_CHECKING:
    from nodegate.cli import click_api as click


@dataclass(frozen=True)
class CoercedWhenGiven(PassThroughRuntimeParam):
    """A parameter's coercion, built from its type the first time a value is given."""

    built: list[RuntimeParam] = field(default_factory=list, compare=False)
    """typer's own coercion once built (a list: the dataclass is frozen, as typer's are)."""

    def coerce(self, value: Any, param: _TyperParameter, ctx: click.Context) -> Any:
        if value is None:  # typer's own answer for an absent value, no adapter needed
            return super().coerce(value, param=param, ctx=ctx)
        if ctx.resilient_parsing:
            # A TAB: click parses the words typed so far only to know where the cursor is;
            # nothing runs on the values (nodegate has no completion callbacks), and click
            # drops one that fails to convert there anyway. Left as typed, or the default.
            return value
        if not self.built:
            self.built.append(build_runtime_param(param.type_descriptor))
        return self.built[0].coerce(value, param=param, ctx=ctx)


def coerce_when_given(params: Iterable[Any]) -> None:
    """Give each typer parameter not yet processed a coercion built when a value comes."""
    for param in params:
        if isinstance(param, _TyperParameter) and param._runtime_param is None:
            descriptor = param.type_descriptor
            param._runtime_param = CoercedWhenGiven(
                parameter_info=descriptor.parameter_info, annotation=descriptor.annotation
            )
