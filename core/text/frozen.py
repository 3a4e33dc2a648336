"""The one pydantic base of nodegate's documents and settings, the Kubernetes key and value
types they share, and how their readers find the model a field holds (`model_in`: the located
errors, the flags).

The rules (core/rules/model.py), the reconciler's deployment settings (manifests/settings.py) and
the Pulumi stack config (infra/stack_config.py) are all YAML that people write: camelCase keys as
Kubernetes and Pulumi files use, unknown keys refused (with a did-you-mean where the reader
adds one), and frozen once parsed, so nothing inside nodegate can change what was validated.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from nodegate.core.text.k8s_names import label_value_problem, qualified_name_problem


class Frozen(BaseModel):
    """Base of every document model: unknown keys refused, camelCase in YAML, immutable."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
        str_strip_whitespace=False,
    )


def check_key(key: str) -> str:
    """`key` if it is a valid label/annotation/taint key (a qualified name), else ValueError."""
    if problem := qualified_name_problem(key):
        raise ValueError(f"'{key}' is not a valid Kubernetes key: {problem}")
    return key


def check_value(value: str) -> str:
    """`value` if it is a valid label (or taint) value, else ValueError."""
    if problem := label_value_problem(value):
        raise ValueError(f"not a valid Kubernetes label/taint value: {problem}")
    return value


def model_in(annotation: Any) -> type[BaseModel] | None:
    """The model a field's annotation holds (`X`, `X | None`, `tuple[X, ...]`: the first one
    found), or None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = model_in(arg)
        if found is not None:
            return found
    return None


LabelKey = Annotated[str, AfterValidator(check_key)]
"""A label, annotation or taint key (`[prefix/]name`)."""
LabelValue = Annotated[str, AfterValidator(check_value)]
"""A label or taint value (63 characters at most, may be empty)."""
