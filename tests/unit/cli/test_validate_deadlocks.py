"""`nodegate validate`: rules that would wait for each other on a pool's nodes (a startup gate whose
init pods do not tolerate an agent taint, an agent rule waiting for a DaemonSet the gate keeps
away) are refused when the DaemonSets show it, and a warning when only the rules say they may."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from nodegate.cli.main import app
from tests.unit.core.test_agent_deadlocks import CI as CI_POOL_RULES

runner = CliRunner()

RULES = """\
apiVersion: nodegate.dev/v1
kind: NodeRules
startupGates:
  - name: boot
    match: {labels: {example.com/pool: workers}}
    taint: {key: example.com/booting, effect: NoSchedule}
    readyWhen: {pods: {namespace: kube-system, selector: {app: boot-init}}}
nodeAgents:
  - name: agents
    match: {labels: {example.com/pool: workers}}
    daemonSets: auto
    taint: {key: example.com/agents-not-ready, effect: NoSchedule}
nodePools:
  - {name: workers, provider: oke, size: 3, labels: {example.com/pool: workers}}
"""
INIT_TOLERATES = "[{key: example.com/booting, operator: Exists}]"


def daemon_sets(init_tolerates: str = INIT_TOLERATES) -> str:
    return f"""\
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: boot-init, namespace: kube-system}}
spec:
  template:
    metadata: {{labels: {{app: boot-init}}}}
    spec: {{tolerations: {init_tolerates}}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: fluent-bit, namespace: logging}}
spec:
  template:
    metadata: {{labels: {{app: fluent-bit}}}}
    spec: {{tolerations: [{{key: example.com/agents-not-ready, operator: Exists}}]}}
"""


def validate(
    tmp_path: Path, manifests: str | None = None, text: str = RULES
) -> tuple[int, str, str]:
    rules = tmp_path / "rules.yaml"
    rules.write_text(text)
    args = ["validate", str(rules)]
    if manifests is not None:
        (tmp_path / "ds.yaml").write_text(manifests)
        args += ["--daemon-sets", str(tmp_path / "ds.yaml")]
    result = runner.invoke(app, args)
    return result.exit_code, result.stdout, result.stderr


def test_the_daemon_sets_showing_the_deadlock_refuse_the_rules_naming_both_and_the_fix(
    tmp_path: Path,
) -> None:
    code, _, err = validate(tmp_path, daemon_sets())
    assert code == 1
    assert (
        f"{tmp_path / 'rules.yaml'}:4:5: startupGates[0]: startupGates 'boot' and nodeAgents "
        in err
    )
    assert "'agents' wait for each other on pool 'workers'" in err
    assert (
        "add to kube-system/boot-init's spec.template.spec.tolerations "
        "{key: example.com/agents-not-ready, operator: Exists, effect: NoSchedule}" in err
    )


def test_the_toleration_it_names_ends_it(tmp_path: Path) -> None:
    fixed = daemon_sets(
        "[{key: example.com/booting, operator: Exists}, "
        "{key: example.com/agents-not-ready, operator: Exists}]"
    )
    assert validate(tmp_path, fixed)[::2] == (0, "")


def test_a_gate_that_lifts_on_its_timeout_makes_it_a_warning(tmp_path: Path) -> None:
    lifting = RULES.replace(
        "    readyWhen:", "    timeout: 10m\n    onTimeout: lift\n    readyWhen:"
    )
    code, _, err = validate(tmp_path, daemon_sets(), lifting)
    assert code == 0
    assert "warning: startupGates[0]" in err
    assert "keep their taints until startupGates 'boot' times out (10m, onTimeout: lift)" in err


def test_from_the_rules_alone_it_is_a_warning_saying_what_to_check(tmp_path: Path) -> None:
    code, out, err = validate(tmp_path)
    assert code == 0
    assert ":4:5: warning: startupGates[0]: startupGates 'boot' and nodeAgents 'agents' may " in err
    assert "--daemon-sets" in err
    assert "1 warnings" in out


def test_an_init_daemon_set_missing_from_the_files_leaves_it_a_warning(tmp_path: Path) -> None:
    only_logs = daemon_sets().split("---\n")[1]
    code, _, err = validate(tmp_path, only_logs)
    assert code == 0
    assert "warning: startupGates[0]" in err
    assert "waits for its pods (kube-system, app=boot-init), whose DaemonSet must tolerate" in err


CI = "apiVersion: nodegate.dev/v1\nkind: NodeRules\n" + CI_POOL_RULES
"""The core tests' pool whose label taint keeps the log agent away, as a rules file."""
LOGS = """\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: fluent-bit, namespace: logging}
spec:
  template:
    spec: {tolerations: [{key: example.com/logs-not-ready, operator: Exists}]}
"""


def validate_ci(tmp_path: Path, cannot_run: str) -> tuple[int, str, str]:
    (tmp_path / "rules.yaml").write_text(CI.replace("CANNOT_RUN", cannot_run))
    (tmp_path / "ds.yaml").write_text(LOGS)
    args = ["validate", str(tmp_path / "rules.yaml"), "--daemon-sets", str(tmp_path / "ds.yaml")]
    result = runner.invoke(app, args)
    return result.exit_code, result.stdout, result.stderr


def test_a_listed_daemon_set_a_pool_never_runs_refuses_a_rule_that_must_wait_for_it(
    tmp_path: Path,
) -> None:
    code, _, err = validate_ci(tmp_path, "wait")
    assert code == 1
    assert "nodeAgents[0].daemonSets: nodeAgents 'logs': the DaemonSet controller never runs" in err
    assert "keep example.com/logs-not-ready:NoSchedule for ever" in err


def test_a_rule_that_skips_it_is_told(tmp_path: Path) -> None:
    code, out, err = validate_ci(tmp_path, "skip")
    assert (code, err) == (0, "")
    assert "info: nodeAgents 'logs' does not wait for logging/fluent-bit on pool 'ci'" in out
