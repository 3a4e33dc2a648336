"""`RulesDocument`: validated rules with the text the rules ConfigMap holds."""

from __future__ import annotations

from pathlib import Path

import yaml

from nodegate.core.rules.loader import RulesDocument

EXAMPLE_RULES = Path(__file__).resolve().parents[3] / "examples" / "rules.yaml"


def test_inline_rules_become_yaml_that_validates_to_the_same_rules() -> None:
    text = EXAMPLE_RULES.read_text(encoding="utf-8")
    data = yaml.safe_load(text)

    document = RulesDocument.from_data(data, "Pulumi.test.yaml (nodegate:rulesInline)")

    assert RulesDocument.parse(document.text, "again").rules == RulesDocument.parse(text, "x").rules
    assert document.text.startswith("apiVersion: nodegate.dev/v1\nkind: NodeRules\n")
