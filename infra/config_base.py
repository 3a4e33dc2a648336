"""What every part of the stack config is built from: its key namespace, the problem it reports,
and the field types its sections share.

Apart from `stack_config.py` because the providers' sections (nodegate.infra.providers) are
built from these pieces, and the whole stack config is built from the providers' sections.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, Field, ValidationError

from nodegate.core.text.errors import format_path
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


def empty_if_null(value: object) -> object:
    """`pools: {ci: }` (YAML null) means the same as `ci: {}`: take the defaults."""
    return {} if value is None else value


NonEmpty = Annotated[str, Field(min_length=1)]
PoolSize = Annotated[int, Field(ge=0, le=1000)]
