"""deploy/reconciler.yaml is the builder's output for the example rules, never a hand copy."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from nodegate.cli.main import app
from tests.unit.manifests.support import EXAMPLE_RULES, REPO, REPOSITORY

DEPLOY = REPO / "deploy" / "reconciler.yaml"
REGENERATE = "make manifests"


def test_deploy_yaml_is_what_make_manifests_generates(monkeypatch: pytest.MonkeyPatch) -> None:
    # The exact command `make manifests` runs, from the repository root.
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(
        app,
        ["manifests", "--rules", "examples/rules.yaml", "--image-repository", REPOSITORY],
    )

    assert result.exit_code == 0, result.output
    assert DEPLOY.read_text(encoding="utf-8") == result.stdout, (
        f"deploy/reconciler.yaml is stale: regenerate it with `{REGENERATE}` and commit it"
    )


def test_deploy_yaml_rules_configmap_holds_the_example_rules() -> None:
    objects: list[dict[str, Any]] = [
        d for d in yaml.safe_load_all(DEPLOY.read_text(encoding="utf-8")) if d
    ]

    configmap = next(o for o in objects if o["kind"] == "ConfigMap")

    assert configmap["data"]["rules.yaml"] == EXAMPLE_RULES.read_text(encoding="utf-8")
