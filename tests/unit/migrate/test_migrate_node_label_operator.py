"""`nodegate migrate node-label-operator`: its environment as persistentLabels and flags."""

from __future__ import annotations

from nodegate.cli.main import app
from nodegate.core.rules.loader import load_rules, parse_rules
from nodegate.migrate.conversion import to_yaml
from nodegate.migrate.defaults import OperatorSettings
from nodegate.migrate.node_label_operator import convert_node_label_operator
from tests.unit.migrate.support import EXAMPLES, env_file, problems_of, runner

SOURCE = "the operator's settings"


def test_its_documented_environment_converts_to_the_shipped_rules_file() -> None:
    """examples/migrate/node-label-operator.env is its deploy/deployment.yaml's env."""
    result = runner.invoke(
        app, ["migrate", "node-label-operator"], env=env_file("node-label-operator.env")
    )
    assert result.exit_code == 0
    assert result.stdout == (EXAMPLES / "node-label-operator.yaml").read_text()


def test_the_rules_persist_its_prefix_keyed_by_node_name_as_it_did() -> None:
    persisted = load_rules(EXAMPLES / "node-label-operator.yaml").persistent_labels
    assert persisted is not None
    assert (persisted.prefixes, persisted.key_by) == (("persist.demo/",), "nodeName")
    assert persisted.persists("persist.demo/type") and not persisted.persists("other/type")


def test_namespace_and_resync_become_reconciler_flags() -> None:
    settings = OperatorSettings(operator_namespace="labels", resync_interval_seconds="60")
    assert convert_node_label_operator(settings).reconciler_flags == (
        "--state-namespace",
        "labels",
        "--resync-seconds",
        "60",
    )


def test_flags_win_over_the_environment() -> None:
    result = runner.invoke(
        app,
        ["migrate", "node-label-operator", "--persist-label-prefix", "team.example.com/"],
        env={"PERSIST_LABEL_PREFIX": "persist.demo/"},
    )
    assert result.exit_code == 0
    [prefix] = parse_rules(result.stdout).persistent_labels.prefixes  # type: ignore[union-attr]
    assert prefix == "team.example.com/"


def test_stable_node_ids_are_one_flag_away() -> None:
    conversion = convert_node_label_operator(OperatorSettings(), key_by="providerID")
    rules = parse_rules(to_yaml(conversion))
    assert rules.persistent_labels.key_by == "providerID"  # type: ignore[union-attr]
    assert conversion.notes[0].startswith(
        "The operator keyed records by node name; keyBy: providerID recognises a re-created node"
    )


def test_refused_settings_are_named_and_reported_together() -> None:
    settings = OperatorSettings(persist_label_prefix="persist.demo", resync_interval_seconds="5m")
    assert problems_of(convert_node_label_operator(settings)) == [
        f"{SOURCE}: PERSIST_LABEL_PREFIX: prefix 'persist.demo' must end with '/', e.g. "
        "'persist.demo/'",
        f"{SOURCE}: RESYNC_INTERVAL_SECONDS: '5m' is not a whole number of seconds above 0, e.g. "
        "300",
    ]


def test_an_unknown_key_by_is_named_by_its_flag() -> None:
    assert problems_of(convert_node_label_operator(OperatorSettings(), key_by="uid")) == [
        f"{SOURCE}: --key-by: 'uid' is not allowed: use 'providerID' or 'nodeName'"
    ]


def test_a_prefix_in_a_namespace_the_platform_owns_is_refused() -> None:
    [problem] = problems_of(
        convert_node_label_operator(OperatorSettings(persist_label_prefix="node.kubernetes.io/"))
    )
    assert problem.startswith(
        f"{SOURCE}: PERSIST_LABEL_PREFIX: prefix 'node.kubernetes.io/' is in a namespace the "
        "platform owns"
    )


def test_a_log_level_other_than_info_becomes_the_reconcilers_flag() -> None:
    def converted(level: str) -> tuple[tuple[str, ...], str]:
        conversion = convert_node_label_operator(OperatorSettings(log_level=level))
        return conversion.reconciler_flags[4:], conversion.notes[-1]

    assert converted("INFO")[0] == ()  # nodegate's default too
    assert converted("debug")[0] == ("--log-level", "debug")  # it read the level in any case
    assert converted("WARN")[0] == ("--log-level", "warning")
    flags, note = converted("CRITICAL")
    assert flags == ("--log-level", "error")
    assert note.startswith("LOG_LEVEL (CRITICAL): --log-level error, nodegate's least")


def test_a_log_level_the_operator_would_not_start_with_is_refused() -> None:
    assert problems_of(convert_node_label_operator(OperatorSettings(log_level="verbose"))) == [
        f"{SOURCE}: LOG_LEVEL: 'verbose' is not a level the operator reads: DEBUG, INFO, "
        "WARNING, ERROR or CRITICAL"
    ]
