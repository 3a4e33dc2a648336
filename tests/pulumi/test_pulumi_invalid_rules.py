"""Invalid rules stop `pulumi up` before anything is declared, with `nodegate validate`'s text."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nodegate.core.rules.loader import load_rules, parse_rules
from nodegate.core.text.errors import RulesError
from nodegate.infra.program import InvalidRulesError, InvalidStackConfigError
from tests.pulumi.harness import run_program

BROKEN_RULES = """\
apiVersion: nodegate.dev/v1
kind: NodeRules
labelTaints:
  - name: ci-dedicated
    match: {labels: {example.com/dedicated: ci}}
    taint: {key: example.com/dedicated, value: ci, effect: Noschedule}
    nodeMayLift: true
nodePools:
  - name: ci
    provider: oke
    size: -1
    labels: {example.com/dedicated: ci}
"""


@pytest.fixture
def broken(project: Path, oke_example: dict[str, Any]) -> dict[str, Any]:
    """The oke-example stack pointed at a rules file with two errors."""
    (project / "rules.yaml").write_text(BROKEN_RULES, encoding="utf-8")
    oke_example["nodegate:rules"] = "rules.yaml"
    return oke_example


def validate_message(project: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """What `nodegate validate rules.yaml` reports, run from the project directory."""
    monkeypatch.chdir(project)
    with pytest.raises(RulesError) as raised:
        load_rules("rules.yaml")
    return "\n".join(str(p) for p in raised.value.problems)


def test_invalid_rules_stop_the_program_with_the_validate_text(
    broken: dict[str, Any], project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = run_program(broken, stack="oke-example", project_dir=project)

    assert isinstance(run.error, InvalidRulesError)
    assert str(run.error) == validate_message(project, monkeypatch)
    assert str(run.error).splitlines() == [
        "rules.yaml:6:52: labelTaints[0].taint.effect: 'Noschedule' is not a taint effect: use "
        "one of NoSchedule, PreferNoSchedule, NoExecute; did you mean 'NoSchedule'?",
        "rules.yaml:11:5: nodePools[0].size: Input should be greater than or equal to 0 (got -1)",
    ]


def test_invalid_rules_message_equals_the_nodegate_validate_cli_output(
    broken: dict[str, Any], project: Path
) -> None:
    cli = subprocess.run(
        [sys.executable, "-m", "nodegate.cli", "validate", "rules.yaml"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert cli.returncode == 1, cli.stderr

    run = run_program(broken, stack="oke-example", project_dir=project)

    assert str(run.error) == cli.stderr.strip()


def test_invalid_rules_declare_no_resources(broken: dict[str, Any], project: Path) -> None:
    run = run_program(broken, stack="oke-example", project_dir=project)

    assert run.error is not None
    assert run.resources == []


def test_invalid_inline_rules_name_the_stack_key(oke_example: dict[str, Any]) -> None:
    del oke_example["nodegate:rules"]
    oke_example["nodegate:rulesInline"] = {
        "apiVersion": "nodegate.dev/v1",
        "kind": "NodeRules",
        "nodePools": [{"name": "ci", "provider": "gke", "size": 1}],
    }

    run = run_program(oke_example, stack="oke-example")

    assert isinstance(run.error, InvalidRulesError)
    assert str(run.error) == (
        "Pulumi.oke-example.yaml (nodegate:rulesInline): nodePools[0].provider: 'gke' is not "
        "allowed: use 'oke' or 'aks'"
    )
    assert run.resources == []


def test_missing_rules_file_names_the_path_tried(
    oke_example: dict[str, Any], project: Path
) -> None:
    oke_example["nodegate:rules"] = "no-such-rules.yaml"

    run = run_program(oke_example, stack="oke-example", project_dir=project)

    assert isinstance(run.error, InvalidRulesError)
    assert str(run.error) == (
        f"{project / 'no-such-rules.yaml'}: (document): cannot read file: No such file or directory"
    )
    assert run.resources == []


def test_inline_rules_declare_the_same_objects_as_the_rules_file(
    oke_example: dict[str, Any], example_rules_text: str
) -> None:
    import yaml

    from_file = run_program(oke_example, stack="oke-example")
    del oke_example["nodegate:rules"]
    oke_example["nodegate:rulesInline"] = yaml.safe_load(example_rules_text)

    inline = run_program(oke_example, stack="oke-example")

    assert inline.error is None
    assert "reconciler-noderules-example" in {r.name for r in inline.resources}
    assert {r.name: r.canonical() for r in inline.resources} == {
        r.name: r.canonical() for r in from_file.resources
    }


def test_on_the_rules_configmap_inline_rules_declare_the_same_inputs_as_the_rules_file(
    oke_example: dict[str, Any], example_rules_text: str
) -> None:
    import yaml

    oke_example["nodegate:reconciler"]["rulesSource"] = "configmap"
    from_file = run_program(oke_example, stack="oke-example")
    del oke_example["nodegate:rules"]
    oke_example["nodegate:rulesInline"] = yaml.safe_load(example_rules_text)

    inline = run_program(oke_example, stack="oke-example")

    assert inline.error is None
    rules_configmap = "reconciler-configmap-nodegate-rules"
    assert {r.name: r.canonical() for r in inline.resources if r.name != rules_configmap} == {
        r.name: r.canonical() for r in from_file.resources if r.name != rules_configmap
    }
    # The ConfigMap holds the inline rules as YAML: other text, the same validated rules.
    [inline_text, file_text] = [
        next(r for r in run.resources if r.name == rules_configmap).inputs["data"]["rules.yaml"]
        for run in (inline, from_file)
    ]
    assert parse_rules(inline_text) == parse_rules(file_text)


def test_reconciler_settings_that_withhold_what_the_rules_read_fail_before_anything_is_declared(
    oke_example: dict[str, Any],
) -> None:
    oke_example["nodegate:reconciler"]["access"] = {"pods": False}

    run = run_program(oke_example, stack="oke-example")

    assert isinstance(run.error, InvalidStackConfigError)
    assert str(run.error).startswith(
        "Pulumi.oke-example.yaml (nodegate:reconciler): access.pods is false, but the rules read it"
    )
    assert run.resources == []
