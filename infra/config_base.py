"""What every part of the stack config is built from: its key namespace, the problem it reports,
and the field types its sections share.

Apart from `stack_config.py` because the providers' sections (nodegate.infra.providers) are
built from these pieces, and the whole stack config is built from the providers' sections.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, Field, ValidationError

from nodegate.core.text.errors import DocPath, format_path
from nodegate.core.text.located_errors import located_errors

NAMESPACE = "nodegate"
"""Pulumi config namespace: keys are `nodegate:<key>`, named after the project."""


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong with the stack config: the key to fix and what is wrong with it."""

    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.key}: {self.message}"


class StackConfigError(ValueError):
    """Stack config that must not reach a cloud API. Carries every problem found."""

    def __init__(self, stack: str, problems: Iterable[ConfigProblem]) -> None:
        self.problems = tuple(problems)
        source = f"Pulumi.{stack}.yaml"
        super().__init__("\n".join(f"{source}: {p}" for p in self.problems))


def config_problems(
    err: ValidationError, prefix: str, model: type[BaseModel], defaults: str | None = None
) -> list[ConfigProblem]:
    """Every error in `err` as a stack-config key and a fix (the wording is core's, shared with
    the rules loader); `defaults` names the section whose `defaults` may also set a field."""
    problems = []
    for error in located_errors(err, model):
        key = prefix + format_path(error.path) if error.path else prefix.rstrip(".:")
        message = error.message
        if error.kind == "missing":
            where = f" or under {NAMESPACE}:{defaults}.defaults" if defaults else ""
            message = f"{message} (set it here{where})"
        problems.append(ConfigProblem(key, message))
    return problems


_ENGINE_TIME = re.compile(r"(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2}(?:\.\d+)?) ([+-]\d{4}) \S+")
"""Go's `time.Time.String()`: what Pulumi's engine hands the program for an unquoted YAML date
or timestamp in the stack file (it reads `2024-01-01` as a time and passes it on as text)."""


def engine_date_problems(raw: Mapping[str, Any]) -> list[ConfigProblem]:
    """Each key or value of the `nodegate:*` config that Pulumi's engine turned from a date
    into Go's time text, with the quoted text to write instead.

    The engine reads the stack file as YAML 1.2 with timestamps, so `example.com/since:
    2024-01-01`, a string to `nodegate validate` and kubectl, reaches the program as
    '2024-01-01 00:00:00 +0000 UTC': refused as a label value with no word of why, or,
    where any text goes (a condition's reason regex), meaning something else. Walked without
    recursion, as the rules' own bounds are checked after this."""
    problems: list[ConfigProblem] = []
    stack: list[tuple[Any, DocPath]] = [(value, (key,)) for key, value in raw.items()]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                key_match = _ENGINE_TIME.fullmatch(key) if isinstance(key, str) else None
                if key_match:
                    problems.append(_engine_date((*path, key), key_match, "key"))
                stack.append((item, (*path, str(key))))
        elif isinstance(value, list):
            stack.extend((item, (*path, index)) for index, item in enumerate(value))
        elif isinstance(value, str) and (value_match := _ENGINE_TIME.fullmatch(value)):
            problems.append(_engine_date(path, value_match, "value"))
    return sorted(problems, key=lambda p: p.key)


def _engine_date(path: DocPath, match: re.Match[str], what: str) -> ConfigProblem:
    text = match.group()
    day, time, offset = match.groups()
    written = day if (time, offset) == ("00:00:00", "+0000") else None
    fix = f'quote it: "{written}"' if written else "quote it as you wrote it"
    return ConfigProblem(
        f"{NAMESPACE}:{format_path(path)}",
        f"{text!r} is how Pulumi's engine passes an unquoted YAML date or time in the stack "
        f"file; to give this {what} as text, {fix}",
    )


def empty_if_null(value: object) -> object:
    """`pools: {ci: }` (YAML null) means the same as `ci: {}`: take the defaults."""
    return {} if value is None else value


NonEmpty = Annotated[str, Field(min_length=1)]
PoolSize = Annotated[int, Field(ge=0, le=1000)]
