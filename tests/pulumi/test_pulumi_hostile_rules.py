"""Rules a stack names that no parser should trust still stop the program with a located
error (Pulumi prints it without a traceback), through the same front door as the CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nodegate.infra.program import InvalidRulesError
from tests.pulumi.harness import run_program


def test_rules_file_that_is_not_utf8_stops_the_program_at_its_line(
    project: Path, oke_example: dict[str, Any]
) -> None:
    text = (project / "rules.yaml").read_bytes()
    (project / "rules.yaml").write_bytes(text.replace(b"# nodegate rules", b"# nodegate r\xe8gles"))
    oke_example["nodegate:rules"] = "rules.yaml"

    run = run_program(oke_example, stack="oke-example", project_dir=project)

    assert isinstance(run.error, InvalidRulesError), repr(run.error)
    assert str(run.error).startswith("rules.yaml:2:13: (document): byte 0xE8 (byte offset")
    assert run.resources == []


def test_inline_rules_nested_too_deep_stop_the_program_with_the_path(
    oke_example: dict[str, Any],
) -> None:
    deep: object = "v"
    for _ in range(200):  # deeper than the loader's bound; JSON-encoded by the harness
        deep = [deep]
    del oke_example["nodegate:rules"]
    oke_example["nodegate:rulesInline"] = {"apiVersion": "nodegate.dev/v1", "labelTaints": deep}

    run = run_program(oke_example, stack="oke-example")

    assert isinstance(run.error, InvalidRulesError), repr(run.error)
    assert str(run.error).startswith(
        "Pulumi.oke-example.yaml (nodegate:rulesInline): labelTaints[0][0]"
    )
    assert "nested deeper than 32 levels" in str(run.error)
    assert run.resources == []
