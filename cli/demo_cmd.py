"""`nodegate demo`: nodegate on the embedded default rules, with nothing to set up."""

from __future__ import annotations

from datetime import UTC, datetime
from importlib.resources import files

from rich.console import Console
from ruamel.yaml import YAML

from nodegate.cli.explain_cmd import print_explanation
from nodegate.core.loader import parse_rules
from nodegate.core.node import NodeState
from nodegate.core.plan import PlanFacts, plan


def demo() -> None:
    """Validate the shipped example rules and explain them on the shipped example node."""
    console = Console()
    examples = files("nodegate.examples")
    rules_text = examples.joinpath("rules.yaml").read_text(encoding="utf-8")
    rules = parse_rules(rules_text, "examples/rules.yaml")
    console.print(
        f"[bold]examples/rules.yaml[/bold] is valid: {len(rules.label_taints)} label taints, "
        f"{len(rules.condition_taints)} condition taints, {len(rules.startup_gates)} startup "
        f"gates, {len(rules.node_pools)} pools"
    )
    node_data = YAML(typ="safe").load(
        examples.joinpath("nodes", "gpu-node.yaml").read_text("utf-8")
    )
    node = NodeState.from_k8s(node_data)
    print_explanation(console, node, rules, plan(node, rules, PlanFacts(now=datetime.now(UTC))))
