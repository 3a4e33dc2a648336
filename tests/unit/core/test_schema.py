"""The JSON Schema shipped for editors is the one the model produces."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from jsonschema import Draft202012Validator

from nodegate.core.rules.model import rules_json_schema

ROOT = Path(__file__).resolve().parents[3]


def test_committed_schema_is_current() -> None:
    committed = json.loads((ROOT / "docs" / "rules.schema.json").read_text())
    assert committed == rules_json_schema(), "run: nodegate schema > docs/rules.schema.json"


def test_shipped_example_satisfies_the_schema() -> None:
    example = yaml.safe_load((ROOT / "examples" / "rules.yaml").read_text())
    Draft202012Validator(rules_json_schema()).validate(example)
