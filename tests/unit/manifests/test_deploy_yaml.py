"""deploy/*.yaml are the builder's output for the example rules, never hand copies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from nodegate.cli.main import app
from tests.unit.manifests.support import REPO, REPOSITORY

DEPLOY = REPO / "deploy" / "reconciler.yaml"
DEPLOY_WEBHOOK = REPO / "deploy" / "reconciler-webhook.yaml"
REGENERATE = "make manifests"

# The exact commands `make manifests` runs, from the repository root.
GENERATED = {
    DEPLOY: ["--rules", "examples/rules.yaml"],
    DEPLOY_WEBHOOK: [
        "--rules",
        "examples/aks-webhook-rules.yaml",
        "--settings",
        "deploy/webhook-settings.yaml",
    ],
}


def _objects(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


@pytest.mark.parametrize("deployed", list(GENERATED), ids=lambda p: p.name)
def test_deploy_yaml_is_what_make_manifests_generates(
    deployed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(
        app, ["manifests", *GENERATED[deployed], "--image-repository", REPOSITORY]
    )

    assert result.exit_code == 0, result.output
    assert deployed.read_text(encoding="utf-8") == result.stdout, (
        f"deploy/{deployed.name} is stale: regenerate it with `{REGENERATE}` and commit it"
    )


def test_deploy_yaml_reads_the_rules_from_noderules_objects_and_carries_none() -> None:
    objects = _objects(DEPLOY)
    deployment = next(o for o in objects if o["kind"] == "Deployment")

    assert "--rules-objects" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not [o for o in objects if o["kind"] in ("ConfigMap", "NodeRules")]


def test_webhook_deploy_yaml_registers_the_node_webhook_with_ignore_policy() -> None:
    objects = _objects(DEPLOY_WEBHOOK)

    configuration = next(o for o in objects if o["kind"] == "MutatingWebhookConfiguration")

    (webhook,) = configuration["webhooks"]
    assert webhook["failurePolicy"] == "Ignore"
    assert webhook["rules"][0]["operations"] == ["CREATE"]
    assert webhook["rules"][0]["resources"] == ["nodes"]
