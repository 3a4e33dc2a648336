"""The rules loader on hostile documents: it loads them or raises RulesError with located
problems; never another exception, never unbounded time (the profile's deadline).

`parse_rules` is the one front door every rules source uses (CLI, ConfigMap, mounted file,
Pulumi stack file), so these properties cover all of them."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from nodegate.core.rules.loader import parse_rules, rules_from_data
from nodegate.core.text.errors import RulesError
from tests.fuzz.located import assert_located
from tests.fuzz.profiles import fuzz
from tests.fuzz.strategies import (
    RULES_SEEDS,
    dumped,
    grafted,
    mutated,
    plain_data,
    plain_seed,
    seed_bytes,
)

SEEDS = seed_bytes(RULES_SEEDS)
SOURCE = "rules.yaml"


def load_or_located_error(data: bytes) -> None:
    try:
        parse_rules(data, SOURCE)
    except RulesError as err:
        assert_located(err, data, SOURCE)


@fuzz
@given(mutated(SEEDS))
def test_mutated_rules_bytes_load_or_fail_located(data: bytes) -> None:
    load_or_located_error(data)


@fuzz
@given(mutated(SEEDS))
def test_mutated_rules_text_fails_like_its_bytes(data: bytes) -> None:
    """A ConfigMap hands over text, a file bytes: the same input, the same outcome."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return
    outcomes: list[object] = []
    for given_as in (data, text):
        try:
            outcomes.append(parse_rules(given_as, SOURCE))
        except RulesError as err:
            outcomes.append(err.problems)
    assert outcomes[0] == outcomes[1]


@fuzz
@given(dumped(st.sampled_from([plain_seed(p) for p in RULES_SEEDS]).flatmap(grafted)))
def test_rules_with_a_subtree_replaced_load_or_fail_located(data: bytes) -> None:
    load_or_located_error(data)


@fuzz
@given(dumped(st.dictionaries(st.sampled_from(("apiVersion", "kind")), plain_data) | plain_data))
def test_generated_documents_load_or_fail_located(data: bytes) -> None:
    load_or_located_error(data)


@fuzz
@given(plain_data | st.sampled_from([plain_seed(p) for p in RULES_SEEDS]).flatmap(grafted))
def test_rules_as_plain_data_load_or_fail(data: Any) -> None:
    """Pulumi's `nodegate:rulesInline` arrives as data, without positions."""
    try:
        rules_from_data(data, "Pulumi.dev.yaml (nodegate:rulesInline)")
    except RulesError as err:
        assert err.problems
