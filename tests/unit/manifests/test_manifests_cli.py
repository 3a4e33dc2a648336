"""`nodegate manifests` as users call it: exit codes, stdout and stderr."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from nodegate.cli.main import app
from tests.unit.manifests.support import EXAMPLE_RULES, REPOSITORY

runner = CliRunner()


RULES = ["--rules", str(EXAMPLE_RULES)]


def test_prints_yaml_documents_for_kubectl_apply() -> None:
    result = runner.invoke(app, ["manifests", *RULES, "--image-repository", REPOSITORY])

    assert result.exit_code == 0
    kinds = [d["kind"] for d in yaml.safe_load_all(result.stdout) if d]
    assert kinds[:2] == ["CustomResourceDefinition", "Namespace"]
    assert "Deployment" in kinds


def test_without_an_image_repository_it_exits_1_and_says_what_to_give(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NODEGATE_IMAGE_REPOSITORY", raising=False)

    result = runner.invoke(app, ["manifests", *RULES])

    assert result.exit_code == 1
    assert result.stdout == ""
    assert "image.repository: required: give --image-repository" in result.stderr


def test_image_repository_can_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NODEGATE_IMAGE_REPOSITORY", "myacr.azurecr.io/nodegate")

    result = runner.invoke(app, ["manifests", *RULES, "--image-tag", "t1"])

    assert result.exit_code == 0
    assert "image: myacr.azurecr.io/nodegate:t1\n" in result.stdout


def _settings_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "settings.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_on_the_rules_configmap_without_rules_it_exits_2_and_names_the_example(
    tmp_path: Path,
) -> None:
    on_configmap = _settings_file(tmp_path, "rulesSource: configmap\n")

    result = runner.invoke(
        app, ["manifests", "--image-repository", REPOSITORY, "--settings", on_configmap]
    )

    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        "nodegate manifests: give --rules FILE, the NodeRules the reconciler enforces (there "
        "are no default rules; for nodegate's example: --rules examples/rules.yaml, after "
        "reading what it taints)\n"
    )


def test_on_rules_objects_the_installation_needs_no_rules_file() -> None:
    result = runner.invoke(app, ["manifests", "--image-repository", REPOSITORY])

    assert result.exit_code == 0, result.stderr
    kinds = [o["kind"] for o in yaml.safe_load_all(result.stdout)]
    assert "Deployment" in kinds and "ConfigMap" not in kinds and "NodeRules" not in kinds
    assert "# Then the rules, NodeRules objects (the rules file is one), once the CRD is" in (
        result.stdout
    )
    assert result.stderr == ""


def test_on_rules_objects_a_rules_file_given_is_said_to_be_applied_apart() -> None:
    """Before NodeRules objects the same command printed the rules ConfigMap: an upgrade that
    re-runs it must not silently lose the rules."""
    result = runner.invoke(app, ["manifests", *RULES, "--image-repository", REPOSITORY])

    assert result.exit_code == 0
    assert "ConfigMap" not in [o["kind"] for o in yaml.safe_load_all(result.stdout)]
    assert f"the rules of {EXAMPLE_RULES} are not in this output" in result.stderr
    assert f"kubectl apply -f {EXAMPLE_RULES}" in result.stderr
    assert "rulesSource: configmap" in result.stderr
    assert "# Then the rules, NodeRules objects (the rules file is one), once the CRD is " in (
        result.stdout
    )


def test_settings_that_withhold_what_the_rules_read_exit_1_naming_the_setting(
    tmp_path: Path,
) -> None:
    withheld = _settings_file(tmp_path, "access: {pods: false}\n")

    result = runner.invoke(
        app, ["manifests", *RULES, "--image-repository", REPOSITORY, "--settings", withheld]
    )

    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith(f"{withheld}: access.pods is false, but the rules read it")


def test_invalid_rules_exit_1_with_validate_style_lines(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: nodegate.dev/v1\nkind: NodeRules\nlabelTaintz: []\n")

    result = runner.invoke(
        app, ["manifests", "--rules", str(bad), "--image-repository", REPOSITORY]
    )

    assert result.exit_code == 1
    assert result.stderr.startswith(f"{bad}:3:1: labelTaintz: unknown field 'labelTaintz'")


def test_settings_file_is_the_stack_schema_and_flags_override_it(tmp_path: Path) -> None:
    settings = tmp_path / "settings.yaml"
    settings.write_text(
        "image: {repository: iad.ocir.io/tenancy/nodegate, tag: file}\nreplicas: 3\n"
        "namespace: from-file\n"
    )

    result = runner.invoke(
        app,
        [
            "manifests",
            "--rules",
            str(EXAMPLE_RULES),
            "--settings",
            str(settings),
            "--namespace",
            "from-flag",
        ],
    )

    assert result.exit_code == 0, result.stderr
    deployment = next(d for d in yaml.safe_load_all(result.stdout) if d["kind"] == "Deployment")
    assert deployment["metadata"]["namespace"] == "from-flag"
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == (
        "iad.ocir.io/tenancy/nodegate:file"
    )


def test_a_misspelt_setting_gets_a_did_you_mean(tmp_path: Path) -> None:
    settings = tmp_path / "settings.yaml"
    settings.write_text("image: {repository: r.example.com/nodegate}\nreplica: 3\n")

    result = runner.invoke(app, ["manifests", *RULES, "--settings", str(settings)])

    assert result.exit_code == 1
    assert f"{settings}: replica: unknown field 'replica'; did you mean 'replicas'?" in (
        result.stderr
    )
