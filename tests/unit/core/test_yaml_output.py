"""The one YAML writer's output reads back as the same data in YAML 1.1 (PyYAML; kubectl and
helm through go-yaml v2) and in YAML 1.2 (ruamel.yaml, the rules loader)."""

from __future__ import annotations

import string
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st
from ruamel.yaml import YAML

from nodegate.core.text.yaml_output import dump_all

LOOK_LIKE_OTHER_TYPES = [
    "yes", "No", "on", "OFF", "y", "n", "true", "~", "", "1:20", "973e38", "1e3", "0x1F",
    "0o17", "012", "1_000", ".inf", ".NaN", "2001-12-14", "<<", "=",
]  # fmt: skip


def read_back_1_1(text: str) -> Any:
    return yaml.safe_load(text)


def read_back_1_2(text: str) -> Any:
    return YAML(typ="safe", pure=True).load(text)


def test_strings_that_look_like_other_types_read_back_as_strings_in_yaml_1_1() -> None:
    labels = {value or "empty": value for value in LOOK_LIKE_OTHER_TYPES}
    document = {"metadata": {"labels": labels}}
    assert read_back_1_1(dump_all([document])) == document


def test_strings_that_look_like_other_types_read_back_as_strings_in_yaml_1_2() -> None:
    labels = {value or "empty": value for value in LOOK_LIKE_OTHER_TYPES}
    document = {"metadata": {"labels": labels}}
    assert read_back_1_2(dump_all([document])) == document


def test_keys_that_look_like_other_types_stay_string_keys() -> None:
    document = {"y": "a", "on": "b", "1:20": "c"}
    assert read_back_1_1(dump_all([document])) == document


def test_plain_strings_are_written_unquoted() -> None:
    assert dump_all([{"app": "nodegate", "effect": "NoSchedule"}]) == (
        "app: nodegate\neffect: NoSchedule\n"
    )


def test_non_strings_keep_their_type() -> None:
    document = {"replicas": 2, "enabled": True, "ratio": 0.5, "unset": None}
    assert read_back_1_1(dump_all([document])) == document


label_like = st.text(alphabet=string.ascii_letters + string.digits + "-_.:+~=<", max_size=12)


@given(st.dictionaries(label_like, label_like, max_size=6))
def test_any_label_like_strings_read_back_unchanged_in_both_versions(
    labels: dict[str, str],
) -> None:
    text = dump_all([{"labels": labels}])
    assert read_back_1_1(text) == {"labels": labels}
    assert read_back_1_2(text) == {"labels": labels}
