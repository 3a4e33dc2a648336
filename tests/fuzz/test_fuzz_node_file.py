"""`nodegate explain --node` on hostile node files: the Nodes are read, or RulesError with
located problems; never another exception. Whatever it returns, the planner can take."""

from __future__ import annotations

from datetime import UTC, datetime

import yaml
from hypothesis import given
from hypothesis import strategies as st

from nodegate.core.decisions.plan import plan
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.loader import load_rules
from nodegate.core.rules.node_file import parse_nodes
from nodegate.core.text.errors import RulesError
from tests.fuzz.located import assert_located
from tests.fuzz.profiles import fuzz
from tests.fuzz.strategies import (
    NODE_SEEDS,
    ROOT,
    dumped,
    grafted,
    mutated,
    plain_data,
    plain_seed,
    seed_bytes,
)

NODE = plain_seed(NODE_SEEDS[0])
NODE_LIST = {"apiVersion": "v1", "kind": "List", "items": [NODE, NODE]}
SEEDS = [*seed_bytes(NODE_SEEDS), yaml.safe_dump(NODE_LIST).encode()]
RULES = load_rules(ROOT / "examples" / "rules.yaml")
FACTS = PlanFacts(now=datetime(2026, 11, 21, 10, 10, tzinfo=UTC))
SOURCE = "node.yaml"


def read_or_located_error(data: bytes) -> None:
    try:
        nodes = parse_nodes(data, SOURCE)
    except RulesError as err:
        assert_located(err, data, SOURCE)
        return
    for node in nodes:
        plan(node, RULES, FACTS)


@fuzz
@given(mutated(SEEDS))
def test_mutated_node_files_read_or_fail_located(data: bytes) -> None:
    read_or_located_error(data)


@fuzz
@given(dumped(st.sampled_from([NODE, NODE_LIST]).flatmap(grafted) | plain_data))
def test_node_files_with_a_subtree_replaced_read_or_fail_located(data: bytes) -> None:
    read_or_located_error(data)
