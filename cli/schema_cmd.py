"""`nodegate schema`: JSON Schema of the rules file, for editor completion."""

from __future__ import annotations

import json

import typer


def schema() -> None:
    """Print the JSON Schema (use with yaml-language-server's `$schema` modeline)."""
    from nodegate.core.rules.rules_object import (  # noqa: PLC0415  (when it runs)
        rules_file_json_schema,
    )

    typer.echo(json.dumps(rules_file_json_schema(), indent=2, sort_keys=True))
