"""The front door for outside YAML: each limit and each refusal, located, fast, bounded."""

from __future__ import annotations

import codecs
import time
import tracemalloc
from pathlib import Path

import pytest

from nodegate.core.rules.loader import load_rules, parse_rules, rules_from_data
from nodegate.core.text import yaml_input
from nodegate.core.text.errors import Problem, RulesError
from nodegate.core.text.yaml_input import MAX_BYTES, MAX_DEPTH, MAX_NODES, read_yaml

HEADER = "apiVersion: nodegate.dev/v1\nkind: NodeRules\n"
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "rules.yaml"


def refusal(data: str | bytes) -> Problem:
    """The one problem the input is refused with."""
    with pytest.raises(RulesError) as raised:
        read_yaml(data, "rules.yaml")
    assert len(raised.value.problems) == 1, raised.value.problems
    return raised.value.problems[0]


def alias_bomb() -> str:
    """Nine anchors, each a list of nine aliases of the one before: 9**9 values expanded."""
    lines = ["a0: &a0 [lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    return HEADER + "\n".join(lines) + "\nlabelTaints: *a9\n"


# --- alias expansion ----------------------------------------------------------------------


@pytest.mark.timeout(10)  # unbounded, it grows without end: fail, do not hang
def test_alias_bomb_is_refused_at_the_alias_that_crosses_the_bound() -> None:
    problem = refusal(alias_bomb())

    assert (problem.line, problem.column) == (8, 20)  # the 3rd *a4 in a5 crosses 50,000
    assert problem.message.startswith("alias *a4 (13,942 values) takes the document past 50,000")
    assert "write the values out, or use fewer aliases" in problem.message


@pytest.mark.timeout(10)
def test_alias_bomb_is_refused_in_milliseconds_within_bounded_memory() -> None:
    text = alias_bomb()
    tracemalloc.start()
    started = time.perf_counter()
    with pytest.raises(RulesError):
        read_yaml(text, "rules.yaml")
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    assert elapsed < 0.5, f"{elapsed:.3f} s"  # measured: 6-8 ms
    assert peak < 5_000_000, f"{peak:,} bytes"  # measured: 28 KB (before: past 1 GB)


def test_aliases_within_the_bound_are_expanded_and_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(yaml_input, "MAX_NODES", 13)
    text = "a: &a [x, y]\nb: [*a, *a]\n"  # {, a, [x, y]: 3, b, [, *a: 3, *a: 3 = 13 values

    data, _ = read_yaml(text, "rules.yaml")

    assert data == {"a": ["x", "y"], "b": [["x", "y"], ["x", "y"]]}
    problem = refusal(text + "c: x\n")
    assert (problem.line, problem.column) == (3, 1)
    assert problem.message.startswith("more than 13 values (keys, items and scalars)")


def test_alias_inside_its_own_anchor_is_refused() -> None:
    problem = refusal("a: &a [x, *a]\n")

    assert (problem.line, problem.column) == (1, 11)
    assert "alias *a is inside the node its anchor &a names" in problem.message


def test_merge_key_values_are_located_at_their_mapping() -> None:
    data, positions = read_yaml("base: &b {x: 1}\nmerged:\n  <<: *b\n  y: 2\n", "rules.yaml")

    assert data["merged"] == {"y": 2, "x": 1}
    assert positions[("merged", "x")] == (3, 3)  # merged in: the mapping's own place
    assert positions[("merged", "y")] == (4, 3)


# --- nesting depth ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nested", "line"),
    [
        pytest.param("labelTaints: " + "[" * 5000 + "]" * 5000, 3, id="flow-5000"),
        pytest.param("labelTaints:\n  " + "- " * 5000 + "x", 4, id="block-5000"),
    ],
)
def test_5000_levels_are_refused_not_a_recursion_error(nested: str, line: int) -> None:
    started = time.perf_counter()

    problem = refusal(HEADER + nested + "\n")

    assert time.perf_counter() - started < 3  # measured: 0.7 s (flow), 10 ms (block)
    assert problem.line == line
    assert problem.message.startswith(f"nested deeper than {MAX_DEPTH} levels")


def test_depth_limit_is_exactly_max_depth() -> None:
    # The mapping is level 1, so MAX_DEPTH - 2 lists around a scalar reach MAX_DEPTH.
    def nested(lists: int) -> str:
        return "x: " + "[" * lists + "v" + "]" * lists + "\n"

    read_yaml(nested(MAX_DEPTH - 2), "rules.yaml")
    problem = refusal(nested(MAX_DEPTH - 1))

    assert (problem.line, problem.column) == (1, 4 + MAX_DEPTH - 1)  # at the scalar
    assert "nested deeper than" in problem.message


def test_alias_to_a_deep_anchor_counts_the_depth_it_adds() -> None:
    deep = "[" * (MAX_DEPTH - 2) + "v" + "]" * (MAX_DEPTH - 2)
    problem = refusal(f"a: &a {deep}\nb: [*a]\n")

    assert (problem.line, problem.column) == (2, 5)
    assert problem.message.startswith("with alias *a expanded, nested deeper than")


# --- size ---------------------------------------------------------------------------------


@pytest.mark.parametrize("as_type", [bytes, str], ids=["bytes", "text"])
def test_input_over_1_mib_is_refused_before_parsing(as_type: type) -> None:
    text = HEADER + "#" * MAX_BYTES
    data = text.encode() if as_type is bytes else text
    started = time.perf_counter()

    problem = refusal(data)

    assert time.perf_counter() - started < 0.5
    assert (problem.line, problem.column) == (0, 0)
    assert problem.message.startswith("larger than 1,048,576 bytes (1 MiB, the most a ConfigMap")


def test_text_size_is_measured_in_utf8_bytes() -> None:
    text = "# " + "é" * (MAX_BYTES // 2)  # fewer characters than MAX_BYTES, more bytes

    assert len(text) < MAX_BYTES
    assert refusal(text).message.startswith("larger than")


def test_size_limit_is_exactly_max_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yaml_input, "MAX_BYTES", 20)

    read_yaml(b"a: b\n" + b"#" * 15, "rules.yaml")  # 20 bytes
    assert refusal(b"a: b\n" + b"#" * 16).message.startswith("larger than 20 bytes")


@pytest.mark.timeout(10)
def test_a_file_is_read_only_up_to_the_limit() -> None:
    started = time.perf_counter()
    with pytest.raises(RulesError) as raised:
        load_rules("/dev/zero")  # endless: must not be read to the end

    assert time.perf_counter() - started < 1
    assert raised.value.problems[0].message.startswith("larger than 1,048,576 bytes")


# --- encoding -----------------------------------------------------------------------------


def test_bytes_that_are_not_utf8_are_refused_at_their_line() -> None:
    problem = refusal(HEADER.encode() + "# café\n".encode("latin-1"))

    assert (problem.line, problem.column) == (3, 6)
    assert problem.message.startswith("byte 0xE9 (byte offset 49) is not UTF-8")
    assert "save the file as UTF-8" in problem.message


def test_utf8_bom_is_accepted_and_dropped() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    plain = parse_rules(text, "rules.yaml")

    assert parse_rules(codecs.BOM_UTF8 + text.encode(), "rules.yaml") == plain
    assert parse_rules("\ufeff" + text, "rules.yaml") == plain


@pytest.mark.parametrize(
    "data",
    [codecs.BOM_UTF8 + b"a: \x01\n", "\ufeffa: \x01\n", codecs.BOM_UTF8 + b"a: \xff\n"],
    ids=["bytes-control", "text-control", "bytes-not-utf8"],
)
def test_utf8_bom_does_not_shift_the_place_of_a_refusal(data: str | bytes) -> None:
    problem = refusal(data)

    assert (problem.line, problem.column) == (1, 4)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32"])
def test_utf16_and_utf32_are_refused_with_the_fix(encoding: str) -> None:
    problem = refusal(HEADER.encode(encoding))  # Python writes the byte-order mark first

    assert (problem.line, problem.column) == (1, 1)
    assert f"the text is {encoding.upper()}" in problem.message
    assert "save it as UTF-8" in problem.message


@pytest.mark.parametrize(
    ("character", "shown"),
    [("\x00", "U+0000"), ("\x01", "U+0001"), ("\x1b", "U+001B"), ("\x7f", "U+007F")],
)
@pytest.mark.parametrize("as_type", [bytes, str], ids=["bytes", "text"])
def test_control_characters_are_refused_at_their_place(
    character: str, shown: str, as_type: type
) -> None:
    text = HEADER + f"labelTaints: [a{character}]\n"

    problem = refusal(text.encode() if as_type is bytes else text)

    assert (problem.line, problem.column) == (3, 16)
    assert problem.message.startswith(f"character {shown} is not allowed in YAML")


def test_lone_surrogate_in_text_is_refused() -> None:
    assert refusal("a: '\ud800'\n").message.startswith("character U+D800 is not allowed")


# --- YAML errors --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "says"),
    [
        pytest.param("1" * 5000, "as !!int (ValueError: Exceeds the limit", id="int-5000-digits"),
        pytest.param("2001-13-45", "as !!timestamp (ValueError: month", id="month-13"),
        pytest.param("!!set x", "as !!set (AttributeError", id="set-on-scalar"),
        pytest.param("!!bool x", "as !!bool (KeyError", id="bool-not-bool"),
    ],
)
def test_values_the_constructor_cannot_build_are_located(value: str, says: str) -> None:
    problem = refusal(f"a: b\nc: {value}\n")

    assert (problem.line, problem.column) == (2, 4)
    assert f"cannot read this value {says}" in problem.message
    assert problem.message.endswith("fix the value, or quote it to make it a string")


def test_tab_indentation_names_the_fix() -> None:
    problem = refusal("a:\n\tb: c\n")

    assert (problem.line, problem.column) == (2, 1)
    assert problem.message.endswith("indent with spaces: YAML does not allow tabs here")


def test_undefined_alias_names_the_fix() -> None:
    problem = refusal("a: *nowhere\n")

    assert (problem.line, problem.column) == (1, 4)
    assert "found undefined alias 'nowhere'" in problem.message
    assert problem.message.endswith("define the anchor (&name) before the alias (*name) uses it")


# --- data parsed elsewhere (Pulumi structured config) -------------------------------------


def test_deep_plain_data_is_refused_with_its_path_not_a_recursion_error() -> None:
    value: object = "v"
    for _ in range(5000):
        value = [value]

    with pytest.raises(RulesError) as raised:
        rules_from_data({**{"apiVersion": "nodegate.dev/v1"}, "labelTaints": value}, "inline")

    problem = raised.value.problems[0]
    assert problem.path == ("labelTaints", *[0] * (MAX_DEPTH - 1))  # the first value too deep
    assert problem.message.startswith("nested deeper than")


def test_plain_data_with_too_many_values_is_refused() -> None:
    with pytest.raises(RulesError) as raised:
        rules_from_data({"labelTaints": ["x"] * MAX_NODES}, "inline")

    assert raised.value.problems[0].message.startswith(f"more than {MAX_NODES:,} values")


@pytest.mark.parametrize(
    "value", ['!!python/object/apply:os.system ["echo pwned"]', "!!python/object/new:dict {a: 1}"]
)
def test_a_collection_under_an_unknown_tag_is_a_located_problem_not_a_crash(value: str) -> None:
    """ruamel builds such a collection without positions: reading it raised AttributeError
    (a traceback from `nodegate validate`, `plan` and `migrate`; an unlocated refusal in the
    reconciler). The tag is never acted on, and the problem names its place."""
    text = f"apiVersion: nodegate.dev/v1\nkind: NodeRules\nlabelTaints: {value}\n"
    with pytest.raises(RulesError) as refused:
        parse_rules(text, "rules.yaml")
    problem = refused.value.problems[0]
    assert (problem.line, problem.path[:1]) == (3, ("labelTaints",))


# --- repeated keys -------------------------------------------------------------------------


def test_repeated_keys_are_each_refused_at_the_repetition_where_the_reader_cannot_go_on() -> None:
    with pytest.raises(RulesError) as raised:
        read_yaml("a: 1\nb: {x: 1, x: 2}\na: 3\n", "settings.yaml")

    assert [str(p) for p in raised.value.problems] == [
        "settings.yaml:2:11: b.x: duplicate key 'x' (first at line 2); a key may appear once "
        "per mapping: merge the two entries",
        "settings.yaml:3:1: a: duplicate key 'a' (first at line 1); a key may appear once per "
        "mapping: merge the two entries",
    ]


def test_keep_going_reads_on_past_a_repeated_key_keeping_the_first_entry() -> None:
    data, positions = read_yaml("a: 1\nb: 2\na: 3\n", "rules.yaml", keep_going=True)

    assert data == {"a": 1, "b": 2}
    assert [p.message.split(";")[0] for p in positions.problems] == [
        "duplicate key 'a' (first at line 1)"
    ]


def test_a_key_a_merge_overrides_is_not_a_repeated_key() -> None:
    data, positions = read_yaml("b: &b {x: 1}\nm:\n  <<: *b\n  x: 2\n", "r", keep_going=True)

    assert data["m"] == {"x": 2}
    assert positions.problems == ()
