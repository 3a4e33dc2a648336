"""`nodegate migrate tainter`: a Tainter TOML file is outside input. Hostile TOML, or TOML whose
values have the wrong types, ends in rules YAML or a RulesError naming the TOML place; never
another exception."""

from __future__ import annotations

import datetime
import tomllib

from hypothesis import given
from hypothesis import strategies as st

from nodegate.core.text.yaml_input import decode
from nodegate.migrate.tainter import convert_tainter, convert_tainter_config
from tests.fuzz.located import rules_or_refusal
from tests.fuzz.profiles import fuzz
from tests.fuzz.strategies import ROOT, mutated, paths_of, plain_data, replaced, seed_bytes

SEED = ROOT / "examples" / "migrate" / "tainter.toml"
CONFIG = tomllib.loads(SEED.read_text(encoding="utf-8"))
TOML_VALUES = st.one_of(
    plain_data,
    st.datetimes(),
    st.dates(),
    st.times(),
    st.datetimes(timezones=st.just(datetime.UTC)),
)
"""What tomllib builds: tables, arrays, strings, numbers, booleans, and four kinds of time."""


@fuzz
@given(mutated(seed_bytes((SEED,))))
def test_a_mutated_tainter_file_converts_or_is_refused(data: bytes) -> None:
    rules_or_refusal(
        lambda: convert_tainter(decode(data, "tainter.toml"), "tainter.toml"), "tainter"
    )


@fuzz
@given(st.data())
def test_a_tainter_config_with_any_value_anywhere_converts_or_is_refused(
    data: st.DataObject,
) -> None:
    path = data.draw(st.sampled_from(paths_of(CONFIG)[1:]))
    config = replaced(CONFIG, path, data.draw(TOML_VALUES))
    rules_or_refusal(lambda: convert_tainter_config(config, "tainter.toml"), "tainter")
