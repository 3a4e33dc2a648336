"""One translation of pydantic's validation errors into messages a person can act on.

pydantic reports *where* (a `loc` tuple) and *what* (an error type and a terse message). The
rules loader, the Pulumi stack config and the reconciler deployment settings all need the same
thing from it: the place as a document path, and a sentence that says how to fix it (a
did-you-mean for an unknown field, a hint to quote YAML scalars read as other types). Each of
them turns the place into its own coordinates (file:line:column, a stack-config key); the
wording lives here, once.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from nodegate.core.text.errors import DocPath
from nodegate.core.text.frozen import model_in
from nodegate.core.text.k8s_names import name_form_problem


@dataclass(frozen=True)
class LocatedError:
    """One validation failure: the path in the document, pydantic's error type, the message."""

    path: DocPath
    kind: str
    message: str


def located_errors(
    err: ValidationError, model: type[BaseModel], written: Mapping[DocPath, str] | None = None
) -> list[LocatedError]:
    """Every root cause in `err` (raised validating `model`), with a path and a fix.

    `written`: the document's `yaml_input.Positions.written`, so "quote it" names the text to
    quote (None for data another program parsed: Pulumi's engine, Ansible)."""
    located = []
    for details in _root_causes(err):
        path = doc_path(details["loc"])
        text = (written or {}).get(tuple(details["loc"]))
        located.append(LocatedError(path, details["type"], _message(details, path, model, text)))
    return located


def doc_path(loc: tuple[int | str, ...]) -> DocPath:
    """pydantic marks a failing dict *key* with a trailing '[key]'; the key itself is the place.

    Only a trailing marker after a key is pydantic's: a user's own key may be named '[key]'."""
    return tuple(loc[:-1]) if len(loc) > 1 and loc[-1] == "[key]" else tuple(loc)


def _root_causes(err: ValidationError) -> list[ErrorDetails]:
    """Drop "list too short" errors that only exist because an item inside it failed."""
    details = err.errors()
    failing = [d["loc"] for d in details]
    return [
        d
        for d in details
        if d["type"] != "too_short"
        or not any(len(loc) > len(d["loc"]) and loc[: len(d["loc"])] == d["loc"] for loc in failing)
    ]


def _message(
    err: ErrorDetails, path: DocPath, model: type[BaseModel], written: str | None = None
) -> str:
    kind = err["type"]
    given = err.get("input")
    if kind == "extra_forbidden":
        allowed = _allowed_keys(model, path[:-1])
        close = difflib.get_close_matches(str(path[-1]), allowed, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        return f"unknown field '{path[-1]}'{hint} (allowed here: {', '.join(allowed)})"
    if kind == "missing":
        return f"required field '{path[-1]}' is missing" if path else "required, not set"
    if kind == "value_error":
        return str(err["msg"]).removeprefix("Value error, ")
    if kind == "string_type" and isinstance(given, bool | int | float):
        # Only the text as written is the fix: 012 is read as 12, 1e3 as 1000.0, and a YAML 1.1
        # reader (Ansible's) reads yes and on as True; quoting what was read changes the value.
        if written is not None:
            return (
                f"expected a string, got {given!r}; YAML reads unquoted true/false/numbers as "
                f'other types, so quote it: "{written}"'
            )
        return (
            f"expected a string, got {given!r}; YAML reads unquoted true/false/numbers (and, "
            "in YAML 1.1 as Ansible reads it, yes/no/on/off) as other types, so quote the "
            "value as you wrote it"
        )
    if kind == "string_type" and given is None:
        shown = f" ({written})" if written else ""
        return (
            f"expected a string, got null{shown}; YAML reads an unquoted ~, null or nothing "
            'as null: write "" for an empty string, or quote the value'
        )
    if kind == "string_pattern_mismatch" and isinstance(given, str):
        pattern = str((err.get("ctx") or {}).get("pattern", ""))
        return name_form_problem(given, pattern) or (
            f"'{given}' does not have the form this field takes (the regular expression {pattern})"
        )
    if kind == "literal_error":
        return f"{given!r} is not allowed: {err['msg'].replace('Input should be', 'use')}"
    if given is not None and kind != "dict_type":
        return f"{err['msg']} (got {given!r})"
    return err["msg"]


def _allowed_keys(model: type[BaseModel], path: DocPath) -> list[str]:
    """The (alias) keys accepted at `path` in `model`, for did-you-mean hints; indexes and dict
    keys are stepped over."""
    current: type[BaseModel] | None = model
    for part in path:
        if current is None:
            return []
        field = next((f for n, f in current.model_fields.items() if (f.alias or n) == part), None)
        if field is None:
            continue  # a list index or a free-form dict key: the value type stays the same
        current = model_in(field.annotation)
    if current is None:
        return []
    return [f.alias or n for n, f in current.model_fields.items()]
