"""What the image's Python holds, compared with what the project needs at run time.

The image must hold the package and its runtime dependencies, and nothing else: no extras
(Pulumi), no test harness. The listing runs inside the image with its own interpreter, so it
sees exactly the environment `python -m nodegate.cli` runs in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypedDict

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

LIST_DISTRIBUTIONS = (
    "import importlib.metadata as m, json;"
    "print(json.dumps({d.metadata['Name']: {'version': d.version, 'requires': d.requires or []}"
    " for d in m.distributions()}))"
)
"""`python -c` program printing {name: {version, requires}} for every installed distribution."""


class Distribution(TypedDict):
    """One entry of the listing."""

    version: str
    requires: list[str]


Listing = Mapping[str, Distribution]


def runtime_closure(project: str, listing: Listing, asked: Sequence[str] = ()) -> set[str]:
    """Canonical names of `project` (with the extras `asked`) and everything its requirements
    pull in, extras followed only where a requirement asks for them (markers evaluated for this
    interpreter)."""
    requires: dict[str, list[str]] = {
        canonicalize_name(name): entry["requires"] for name, entry in listing.items()
    }
    visited: set[tuple[str, frozenset[str]]] = set()
    names: set[str] = set()
    todo: list[tuple[str, frozenset[str]]] = [(canonicalize_name(project), frozenset(asked))]
    while todo:
        item = todo.pop()
        if item in visited:
            continue
        visited.add(item)
        name, extras = item
        names.add(name)
        for text in requires.get(name, []):
            requirement = Requirement(text)
            marker = requirement.marker
            wanted = extras or frozenset({""})
            if marker is not None and not any(marker.evaluate({"extra": e}) for e in wanted):
                continue
            todo.append((canonicalize_name(requirement.name), frozenset(requirement.extras)))
    return names


def versions(listing: Listing) -> dict[str, str]:
    """Name -> version of every distribution in the listing."""
    return {name: entry["version"] for name, entry in listing.items()}
