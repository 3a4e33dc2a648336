"""The shipped migration examples and the CLI runner the migrate tests share."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from nodegate.core.text.errors import RulesError
from nodegate.migrate.conversion import Conversion, to_yaml

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "migrate"
runner = CliRunner()


def problems_of(conversion: Conversion) -> list[str]:
    with pytest.raises(RulesError) as caught:
        to_yaml(conversion)
    return [str(p) for p in caught.value.problems]


def env_file(name: str) -> dict[str, str]:
    """KEY=value lines of an example .env file (comments skipped)."""
    lines = (EXAMPLES / name).read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))
