"""Reading one of nodegate's own JSON records from a ConfigMap's data (the eviction ledger, the
sightings, the taint history): a record hand-edited, truncated or of a newer format is refused
with an error that names the ConfigMap and key, never half read. Pure."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

Parsed = TypeVar("Parsed")


def read_document(
    data: Mapping[str, Any] | None,
    where: tuple[str, str],
    version: int,
    parse: Callable[[dict[str, Any]], Parsed],
    error: type[ValueError],
) -> Parsed | None:
    """`parse(document)` of the JSON under `where` = (ConfigMap, key) in `data` (None when
    there is none); `error(why)` raised when it cannot be read or is another version."""
    configmap, key = where
    text = (data or {}).get(key)
    if text is None:
        return None
    try:
        document = json.loads(text)
        found = document.get("version")
        if found != version:
            raise error(f"{configmap}/{key}: unknown version {found!r}")
        return parse(document)
    except error:
        raise
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as err:
        raise error(f"{configmap}/{key} is not readable: {type(err).__name__}: {err}") from err
