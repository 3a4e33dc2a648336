"""`nodegate schema`: JSON Schema of the rules file, for editor completion."""

from __future__ import annotations

import json

import typer


def schema() -> None:
    """Print the JSON Schema (use with yaml-language-server's `$schema` modeline)."""
    from nodegate.core.rules.model import rules_json_schema  # noqa: PLC0415  (when it runs)

    typer.echo(json.dumps(rules_json_schema(), indent=2, sort_keys=True))
