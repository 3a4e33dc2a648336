"""Which keys a pydantic model accepts at a place in a document, for did-you-mean hints.

Shared by the rules loader and the Pulumi stack-config parser, so both explain an unknown key
the same way.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


def allowed_keys(model: type[BaseModel], path: tuple[int | str, ...]) -> list[str]:
    """The (alias) keys accepted at `path` in `model`; indexes and dict keys are stepped over."""
    current: type[BaseModel] | None = model
    for part in path:
        if current is None:
            return []
        field = next((f for n, f in current.model_fields.items() if (f.alias or n) == part), None)
        if field is None:
            continue  # a list index or a free-form dict key: the value type stays the same
        current = _model_in(field.annotation)
    if current is None:
        return []
    return [f.alias or n for n, f in current.model_fields.items()]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None
