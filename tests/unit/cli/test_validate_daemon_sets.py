"""`nodegate validate RULES --daemon-sets FILE`: a DaemonSet a nodeAgents rule waits for must
tolerate the rule's taint, or its pod never runs on the nodes that carry it."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from nodegate.cli.main import app

runner = CliRunner()

RULES = """\
apiVersion: nodegate.dev/v1
kind: NodeRules
nodeAgents:
  - name: cilium
    daemonSets: [{namespace: kube-system, name: cilium}]
    taint: {key: example.com/agent-not-ready, effect: NoSchedule}
"""


def daemon_set(tolerations: str) -> str:
    return f"""\
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: cilium, namespace: kube-system}}
spec:
  selector: {{matchLabels: {{app: cilium}}}}
  template:
    metadata: {{labels: {{app: cilium}}}}
    spec:
      tolerations: {tolerations}
      containers: [{{name: agent, image: cilium}}]
"""


def validate(tmp_path: Path, daemon_sets: str) -> tuple[int, str, str]:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    manifests = tmp_path / "ds.yaml"
    manifests.write_text(daemon_sets)
    result = runner.invoke(app, ["validate", str(rules), "--daemon-sets", str(manifests)])
    return result.exit_code, result.stdout, result.stderr


def test_a_daemon_set_that_tolerates_the_taint_passes(tmp_path: Path) -> None:
    code, _, err = validate(
        tmp_path, daemon_set("[{key: example.com/agent-not-ready, operator: Exists}]")
    )
    assert (code, err) == (0, "")


def test_a_daemon_set_that_does_not_tolerate_the_taint_fails_with_the_fix(tmp_path: Path) -> None:
    code, _, err = validate(tmp_path, daemon_set("[]"))
    assert code == 1
    assert "DaemonSet kube-system/cilium does not tolerate the rule's taint" in err
    assert "{key: example.com/agent-not-ready, operator: Exists, effect: NoSchedule}" in err


def test_a_daemon_set_in_a_list_counts(tmp_path: Path) -> None:
    listed = "apiVersion: v1\nkind: List\nitems:\n" + "".join(
        f"  {line}\n" if i else f"- {line}\n"
        for i, line in enumerate(daemon_set("[{operator: Exists}]").splitlines())
    )
    assert validate(tmp_path, listed)[0] == 0


def test_a_daemon_set_missing_from_the_files_is_said_not_failed(tmp_path: Path) -> None:
    code, out, _ = validate(tmp_path, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    assert code == 0
    assert "DaemonSet kube-system/cilium not found in the --daemon-sets files" in out
