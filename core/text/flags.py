"""Command-line flags bound to a settings model: every flag declared once, by its field.

Karpenter's `options.go` binds each flag to its Options field in one `AddFlags` call; here the
field *is* the declaration. A flag's name is its field's name in kebab case (after its group's
prefix, or as a `Flag` marker names it), its default is the field's default, and its help is
the field's attribute docstring (the model sets `use_attribute_docstrings`). The CLI builds its
options from `flags(model)`, the Deployment writes its arguments with `flag_argv(model, values)`
and the CLI turns what it parsed back into settings with `values_from_flags`, so the three
cannot disagree about a name or a default.

Pure: pydantic models in, plain data out; no parser is imported here.
"""

from __future__ import annotations

import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from nodegate.core.text.frozen import model_in

_M = TypeVar("_M")


@dataclass(frozen=True)
class Flag:
    """Field marker (`Annotated[T, Flag("name")]`): the flag's name when it is not the field's
    name in kebab case (still after the group's prefix)."""

    name: str


@dataclass(frozen=True)
class FlagGroup:
    """Field marker for a nested settings model: its fields are flags too, named after `prefix`.

    `enabled_by` names a field of an optional group (`X | None = None`) whose flag turns the
    group on: without that flag the group is None and its other flags are not read."""

    prefix: str = ""
    enabled_by: str | None = None


@dataclass(frozen=True)
class FlagSpec:
    """One flag, as derived from its field."""

    name: str
    """Without the dashes, e.g. 'lease-name'."""
    path: tuple[str, ...]
    """Field names from the model down to the field, e.g. ('leader_election', 'lease_name')."""
    kind: type
    """The value's type, None and the tuple stripped (str, int, float, bool, Path; str for a
    `Literal` of strings)."""
    default: Any
    """The field's default; None where the field has a factory or the flag enables a group."""
    help: str
    """The field's attribute docstring, on one line."""
    repeatable: bool = False
    """A tuple field: the flag is given once per item."""
    switch: bool = False
    """A bool field: `--name` / `--no-name`."""
    enables_group: bool = False
    """Giving this flag turns its optional group on."""
    group_default: Any = None
    """An enabling flag's field default: what `flag_argv` gives a group that does not name it."""
    choices: tuple[str, ...] = ()
    """The values a `Literal[...]` field allows, in its order (empty: any value of `kind`)."""


class FlagDeclarationError(TypeError):
    """A settings field that cannot be a flag (a programming error, caught by the tests)."""


def flags(model: type[BaseModel]) -> tuple[FlagSpec, ...]:
    """Every flag of `model`, in field order (a group's flags where the group's field is)."""
    return tuple(_specs(model, (), ""))


def values_from_flags(model: type[BaseModel], given: Mapping[str, Any]) -> dict[str, Any]:
    """The settings values (field names, groups nested) for parsed flags (flag name -> value,
    None where a flag was not given and has no default of its own). Validate the result with
    `model.model_validate`."""
    values: dict[str, Any] = {}
    for spec in flags(model):
        value = given.get(spec.name)
        if spec.repeatable:
            value = tuple(value) if value else None
        if value is not None:
            _put(values, spec.path, value)
    for name, field in model.model_fields.items():
        group = _marker(field, FlagGroup)
        if group is not None and group.enabled_by is not None:
            section = values.get(name)
            if section is None or group.enabled_by not in section:
                values.pop(name, None)  # not enabled: its other flags are not read
    return values


def flag_argv(model: type[BaseModel], values: Mapping[str, Any]) -> list[str]:
    """`--flag=value` for every value given (field names, groups nested as mappings), in field
    order; booleans as `--flag` / `--no-flag`, tuples once per item. An optional group that is
    given carries its enabling flag, at its default when the group does not name it."""
    argv: list[str] = []
    for spec in flags(model):
        value = _get(values, spec.path)
        if value is None and spec.enables_group and _get(values, spec.path[:-1]) is not None:
            value = spec.group_default
        if value is None:
            continue
        if spec.switch:
            argv.append(f"--{spec.name}" if value else f"--no-{spec.name}")
        elif spec.repeatable:
            argv += [f"--{spec.name}={item}" for item in value]
        else:
            argv.append(f"--{spec.name}={value}")
    return argv


def _specs(model: type[BaseModel], path: tuple[str, ...], prefix: str) -> Iterator[FlagSpec]:
    for name, field in model.model_fields.items():
        group = _marker(field, FlagGroup)
        if group is not None:
            nested = model_in(field.annotation)
            if nested is None or field.annotation not in (nested, nested | None):
                raise FlagDeclarationError(f"{model.__name__}.{name}: FlagGroup on a non-model")
            enabling = (*path, name, group.enabled_by)
            for spec in _specs(nested, (*path, name), prefix + group.prefix):
                if spec.path != enabling:
                    yield spec
                else:  # its own default becomes the group's, and not giving it is seen
                    yield replace(
                        spec, default=None, enables_group=True, group_default=spec.default
                    )
            continue
        yield _spec(model, name, field, path, prefix)


def _spec(
    model: type[BaseModel], name: str, field: FieldInfo, path: tuple[str, ...], prefix: str
) -> FlagSpec:
    marker = _marker(field, Flag)
    flag = prefix + (marker.name if marker else name.replace("_", "-"))
    kind, repeatable, choices = _kind(field.annotation)
    if kind not in (str, int, float, bool, Path):
        raise FlagDeclarationError(f"{model.__name__}.{name}: {field.annotation} as a flag")
    if not field.description:
        raise FlagDeclarationError(f"{model.__name__}.{name}: no docstring for --{flag}'s help")
    default = None if field.default is PydanticUndefined else field.default
    return FlagSpec(
        name=flag,
        path=(*path, name),
        kind=kind,
        default=None if repeatable else default,
        help=" ".join(field.description.split()),
        repeatable=repeatable,
        switch=kind is bool,
        choices=choices,
    )


def _kind(annotation: Any) -> tuple[type, bool, tuple[str, ...]]:
    """(the value type, whether it is a tuple of them, the values of a `Literal` of strings),
    None stripped."""
    if get_origin(annotation) in (Union, types.UnionType):
        present = [a for a in get_args(annotation) if a is not type(None)]
        if len(present) == 1:
            return _kind(present[0])
    values = get_args(annotation) if get_origin(annotation) is Literal else ()
    if values and all(isinstance(v, str) for v in values):
        return str, False, values
    if get_origin(annotation) is tuple and get_args(annotation)[1:] == (Ellipsis,):
        kind, _, choices = _kind(get_args(annotation)[0])
        if not choices:  # a tuple of choices is no flag (falls through to the refusal)
            return kind, True, ()
    if isinstance(annotation, type):
        return annotation, False, ()
    raise FlagDeclarationError(f"{annotation} cannot be a flag")


def _marker(field: FieldInfo, kind: type[_M]) -> _M | None:
    return next((m for m in field.metadata if isinstance(m, kind)), None)


def _get(values: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    current: Any = values
    for name in path:
        if not isinstance(current, Mapping):
            return None
        current = current.get(name)
    return current


def _put(values: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for name in path[:-1]:
        values = values.setdefault(name, {})
    values[path[-1]] = value
