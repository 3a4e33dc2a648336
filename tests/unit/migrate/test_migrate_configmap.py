"""`nodegate migrate configmap`: the rules ConfigMap (the source before NodeRules objects) as a
NodeRules object, with how to switch an installation without a moment with no rules."""

from __future__ import annotations

from pathlib import Path

import yaml

from nodegate.cli.main import app
from nodegate.core.rules.loader import parse_rules
from tests.unit.migrate.support import runner

RULES = """\
apiVersion: nodegate.dev/v1
kind: NodeRules
labelTaints:
  - name: ci
    match: {labels: {example.com/dedicated: ci}}
    taint: {key: example.com/dedicated, value: ci, effect: NoSchedule}
    nodeMayLift: true
"""


def _configmap(tmp_path: Path, data: dict[str, str]) -> Path:
    path = tmp_path / "cm.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "nodegate-rules", "namespace": "nodegate-system"},
                "data": data,
            }
        )
    )
    return path


def test_the_rules_of_the_configmap_become_an_object_named_after_it(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["migrate", "configmap", str(_configmap(tmp_path, {"rules.yaml": RULES}))]
    )
    assert result.exit_code == 0, result.stderr
    converted = yaml.safe_load(result.stdout)
    assert converted["metadata"] == {"name": "nodegate-rules"}
    assert parse_rules(result.stdout) == parse_rules(RULES)
    assert "rulesSource: objects" in result.stdout


def test_rules_already_an_object_keep_their_name(tmp_path: Path) -> None:
    text = RULES.replace("kind: NodeRules\n", "kind: NodeRules\nmetadata: {name: team-ci}\nspec:\n")
    text = text.replace("labelTaints:", "  labelTaints:").replace("\n  - ", "\n    - ")
    text = text.replace("\n    match", "\n      match").replace("\n    taint", "\n      taint")
    text = text.replace("\n    nodeMayLift", "\n      nodeMayLift")
    result = runner.invoke(
        app, ["migrate", "configmap", str(_configmap(tmp_path, {"rules.yaml": text}))]
    )
    assert result.exit_code == 0, result.stderr
    assert yaml.safe_load(result.stdout)["metadata"] == {"name": "team-ci"}


def test_invalid_rules_are_refused_naming_the_key_and_the_place(tmp_path: Path) -> None:
    bad = RULES.replace("effect: NoSchedule", "effect: Sometimes")
    path = _configmap(tmp_path, {"rules.yaml": bad})
    result = runner.invoke(app, ["migrate", "configmap", str(path)])
    assert result.exit_code == 1
    assert f"{path} key rules.yaml:6:" in result.stderr
    assert "labelTaints[0].taint.effect" in result.stderr
    assert result.stdout == ""


def test_a_configmap_without_rules_says_to_give_the_key(tmp_path: Path) -> None:
    path = _configmap(tmp_path, {"other": "x"})
    result = runner.invoke(app, ["migrate", "configmap", str(path)])
    assert result.exit_code == 1
    assert "holds rules under 0 keys (none): give --key" in result.stderr


def test_a_configmap_in_a_list_is_refused_at_its_own_line(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text(
        "apiVersion: v1\n"
        "kind: List\n"
        "items:\n"
        "  - apiVersion: v1\n"
        "    kind: ConfigMap\n"
        "    metadata: {name: nodegate-rules}\n"
        "    data:\n"
        "      other: x\n"
    )
    result = runner.invoke(app, ["migrate", "configmap", str(path)])
    assert result.exit_code == 1
    assert f"{path}:7:5: data:" in result.stderr
    assert "holds rules under 0 keys (none): give --key" in result.stderr


def test_other_kinds_in_a_list_are_passed_over(tmp_path: Path) -> None:
    configmap = yaml.safe_load(_configmap(tmp_path, {"rules.yaml": RULES}).read_text())
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token"}}
    path = tmp_path / "list.yaml"
    path.write_text(
        yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [secret, configmap]})
    )
    result = runner.invoke(app, ["migrate", "configmap", str(path)])
    assert result.exit_code == 0, result.stderr
    assert parse_rules(result.stdout) == parse_rules(RULES)
