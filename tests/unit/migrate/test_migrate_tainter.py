"""`nodegate migrate tainter`: Tainter's TOML matchers as condition taints."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodegate.cli.main import app
from nodegate.core.rules.loader import load_rules, parse_rules
from nodegate.core.text.errors import RulesError
from nodegate.migrate.conversion import to_yaml
from nodegate.migrate.tainter import convert_tainter
from tests.unit.migrate.support import EXAMPLES, ROOT, runner

MATCHER = """\
[[reconciler.matchers]]
[reconciler.matchers.taint]
effect = "{effect}"
key = "{key}"
value = "memory"

[[reconciler.matchers.conditions]]
type = "{type}"
status = "{status}"
"""


def tainter_toml(
    effect: str = "NoExecute", key: str = "pressure", type: str = "NIC", status: str = "Kaput"
) -> str:
    return MATCHER.format(effect=effect, key=key, type=type, status=status)


def problems_of(text: str) -> list[str]:
    with pytest.raises(RulesError) as caught:
        to_yaml(convert_tainter(text, "tainter.toml"))
    return [str(p) for p in caught.value.problems]


def test_the_documented_example_converts_to_the_shipped_rules_file() -> None:
    """examples/migrate/tainter.toml is Tainter's README example plus its out-of-service use."""
    source = "examples/migrate/tainter.toml"
    converted = to_yaml(convert_tainter((ROOT / source).read_text(), source))
    assert converted == (EXAMPLES / "tainter.yaml").read_text()


def test_the_shipped_rules_file_keeps_every_matcher_as_tainter_applied_it() -> None:
    pressure, shutdown = load_rules(EXAMPLES / "tainter.yaml").condition_taints
    assert [(c.type, c.status) for c in pressure.conditions] == [
        ("NetworkInterfaceCard", "Kaput|Ruined"),
        ("PrivateLink", "severed"),
    ]
    assert pressure.taint.flag() == "pressure=memory:NoExecute"
    assert shutdown.taint.flag() == "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"
    assert {pressure.on_recovery, shutdown.on_recovery} == {"keep"}  # Tainter never removes


def test_a_condition_type_with_regex_syntax_becomes_a_type_pattern() -> None:
    text = to_yaml(convert_tainter(tainter_toml(type="NIC|Link.*"), "tainter.toml"))
    [rule] = parse_rules(text).condition_taints
    assert (rule.conditions[0].type, rule.conditions[0].type_pattern) == (None, "NIC|Link.*")


def test_a_refused_setting_is_named_by_its_place_in_the_toml() -> None:
    assert problems_of(tainter_toml(effect="NoExecut", status="(")) == [
        "tainter.toml: reconciler.matchers[0].conditions[0].status: '(' is not a valid regular "
        "expression: missing ), unterminated subpattern at position 0",
        "tainter.toml: reconciler.matchers[0].taint.effect: 'NoExecut' is not a taint effect: "
        "use one of NoSchedule, PreferNoSchedule, NoExecute; did you mean 'NoExecute'?",
    ]


def test_an_invalid_type_regex_is_named_as_the_type_tainter_read() -> None:
    assert problems_of(tainter_toml(type="NIC(")) == [
        "tainter.toml: reconciler.matchers[0].conditions[0].type: 'NIC(' is not a valid regular "
        "expression: missing ), unterminated subpattern at position 3"
    ]


def test_out_of_service_without_the_ready_guard_is_refused_at_its_matcher() -> None:
    toml = tainter_toml(key="node.kubernetes.io/out-of-service", type="VMEventScheduled")
    [problem] = problems_of(toml)
    assert problem.startswith(
        "tainter.toml: reconciler.matchers[0]: a rule that applies "
        "node.kubernetes.io/out-of-service must require the node's Ready condition not True"
    )


def test_a_matcher_without_conditions_is_refused() -> None:
    """Tainter would taint every node; nodegate wants at least one condition."""
    toml = tainter_toml().split("[[reconciler.matchers.conditions]]")[0]
    assert problems_of(toml) == [
        "tainter.toml: reconciler.matchers[0].conditions: no [[reconciler.matchers.conditions]]: "
        "Tainter would taint every node; a condition rule needs at least one condition (a "
        "labelTaints rule taints the nodes of a pool)"
    ]


def test_a_key_tainter_would_ignore_is_refused_so_a_typo_cannot_pass() -> None:
    assert problems_of(tainter_toml().replace('status = "Kaput"', 'stauts = "Kaput"')) == [
        "tainter.toml: reconciler.matchers[0].conditions[0].status: required field 'status' is "
        "missing",
        "tainter.toml: reconciler.matchers[0].conditions[0].stauts: unknown key: Tainter reads "
        "only type, status here (and silently ignores the rest, so check its spelling)",
    ]


def test_toml_syntax_errors_name_line_and_column() -> None:
    assert problems_of('[server]\nport = "8080\n') == [
        "tainter.toml:2:13: (document): TOML syntax error: Illegal character '\\n'"
    ]


def test_a_config_without_matchers_is_refused() -> None:
    assert problems_of('[server]\nport = "8080"\n') == [
        "tainter.toml: reconciler.matchers: no [[reconciler.matchers]]: nothing to convert"
    ]


def test_a_non_default_health_port_becomes_the_reconcilers_http_port() -> None:
    conversion = convert_tainter('[server]\nport = "9000"\n' + tainter_toml(), "t.toml")
    assert conversion.reconciler_flags == ("--http-port", "9000")


def test_the_command_prints_the_rules_and_exits_0() -> None:
    result = runner.invoke(app, ["migrate", "tainter", str(EXAMPLES / "tainter.toml")])
    assert result.exit_code == 0
    assert "name: out-of-service" in result.stdout


def test_the_command_exits_1_with_every_problem_on_stderr(tmp_path: Path) -> None:
    config = tmp_path / "tainter.toml"
    config.write_text(tainter_toml(effect="Nope"))
    result = runner.invoke(app, ["migrate", "tainter", str(config)])
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr.startswith(
        f"{config}: reconciler.matchers[0].taint.effect: 'Nope' is not a taint effect"
    )


def test_an_unreadable_config_is_named(tmp_path: Path) -> None:
    result = runner.invoke(app, ["migrate", "tainter", str(tmp_path / "missing.toml")])
    assert result.exit_code == 1
    assert result.stderr == f"{tmp_path / 'missing.toml'}: (document): cannot read file: " + (
        "No such file or directory\n"
    )


def test_numbers_and_booleans_are_read_as_text_as_tainter_reads_them() -> None:
    toml = tainter_toml().replace('status = "Kaput"', "status = true")
    [rule] = parse_rules(to_yaml(convert_tainter(toml, "t.toml"))).condition_taints
    assert rule.conditions[0].status == "true"


@pytest.mark.parametrize(
    ("level", "flags"),
    [
        ('"info"', ()),
        ('"DEBUG"', ("--log-level", "debug")),
        ('"warn"', ("--log-level", "warning")),
        ("1", ("--log-level", "error")),
        ('"trace"', ("--log-level", "debug")),
    ],
)
def test_a_log_level_other_than_info_becomes_the_reconcilers_flag(
    level: str, flags: tuple[str, ...]
) -> None:
    # tracing reads a level's name in any case, or 1 (error) to 5 (trace).
    conversion = convert_tainter(f"[log]\nmax_level = {level}\n{tainter_toml()}", "tainter.toml")

    assert conversion.reconciler_flags == flags
    [note] = [n for n in conversion.notes if n.startswith("[log] max_level")]
    assert note.startswith(f"[log] max_level ({level.strip(chr(34))}): ")


def test_a_log_level_tainter_would_not_start_with_is_refused() -> None:
    assert problems_of(f'[log]\nmax_level = "verbose"\n{tainter_toml()}') == [
        "tainter.toml: log.max_level: 'verbose' is not a level Tainter reads: error, warn, info, "
        "debug or trace (or 1-5)"
    ]
