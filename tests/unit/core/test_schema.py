"""The JSON Schema shipped for editors is the one the model produces."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from jsonschema import Draft202012Validator

from nodegate.core.rules.loader import parse_rules
from nodegate.core.rules.model import rules_json_schema
from nodegate.core.rules.rules_object import rules_file_json_schema

ROOT = Path(__file__).resolve().parents[3]


def test_committed_schema_is_current() -> None:
    committed = json.loads((ROOT / "docs" / "rules.schema.json").read_text())
    assert committed == rules_file_json_schema(), "run: nodegate schema > docs/rules.schema.json"


def test_shipped_example_satisfies_the_schema() -> None:
    example = yaml.safe_load((ROOT / "examples" / "rules.yaml").read_text())
    Draft202012Validator(rules_file_json_schema()).validate(example)


def test_the_file_schema_refuses_rules_outside_spec() -> None:
    example = yaml.safe_load((ROOT / "examples" / "rules.yaml").read_text())
    example["labelTaints"] = example["spec"].pop("labelTaints")
    assert not Draft202012Validator(rules_file_json_schema()).is_valid(example)


def test_the_schema_takes_the_shorthands_the_model_takes() -> None:
    """`evictionBudget: unlimited` and `autoscaler: karpenter` load, so editors and helm's
    check of a rules map must not refuse them; a misspelt shorthand is refused by both."""
    rules = yaml.safe_load(
        "apiVersion: nodegate.dev/v1\nkind: NodeRules\n"
        "conditionTaints:\n"
        "  - name: spot-preempted\n"
        '    conditions: [{type: Preempted, status: "True"}]\n'
        "    taint: {key: example.com/preempted, effect: NoExecute}\n"
        "    evictionBudget: unlimited\n"
        "nodePools:\n"
        "  - {name: ci, provider: aks, size: 1, autoscaler: karpenter}\n"
    )
    validator = Draft202012Validator(rules_json_schema())
    validator.validate(rules)
    parse_rules(yaml.safe_dump(rules))
    rules["conditionTaints"][0]["evictionBudget"] = "unlimted"
    assert not validator.is_valid(rules)


def test_the_schema_takes_the_top_level_budget_shorthand() -> None:
    """`evictionBudget: unlimited` at the top level turns the budget off (docs/rules.md): the
    model takes it, so editors, helm and the NodeRules CRD (generated from this schema) must."""
    rules = {"apiVersion": "nodegate.dev/v1", "kind": "NodeRules", "evictionBudget": "unlimited"}
    validator = Draft202012Validator(rules_json_schema())
    validator.validate(rules)
    parse_rules(yaml.safe_dump(rules))
    assert not validator.is_valid({**rules, "evictionBudget": "unlimted"})
