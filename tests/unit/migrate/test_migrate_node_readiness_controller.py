"""`nodegate migrate node-readiness-controller`: NodeReadinessRules (files, several documents,
the List `kubectl get nrr -o yaml` prints) as validated rules, every field carried over, a
located error for what node-readiness-controller itself would refuse, and the notes."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

from nodegate.cli.main import app
from nodegate.core.rules.loader import parse_rules
from nodegate.core.rules.model import NodeRules
from nodegate.core.text.yaml_input import read_yaml_documents
from nodegate.migrate.conversion import Conversion, YamlFile, to_yaml
from nodegate.migrate.node_readiness_controller import convert_node_readiness_controller
from tests.unit.migrate.support import EXAMPLES, ROOT, problems_of, runner

NRC = Path(__file__).parent / "nrc"
KUBECTL_LIST = NRC / "kubectl-get-nrr.yaml"
COPIED = sorted(
    p for p in NRC.rglob("*.yaml") if p.name not in ("kubectl-get-nrr.yaml", "any-of-rule.yaml")
)


def convert(*texts: str, keep: bool = False) -> Conversion:
    """Each text as one input file, named in.yaml, in2.yaml, ..."""
    files = [
        YamlFile(name, tuple(read_yaml_documents(text, name)))
        for name, text in zip(["in.yaml", "in2.yaml", "in3.yaml"], texts, strict=False)
    ]
    return convert_node_readiness_controller(files, keep_completion_annotation=keep)


def convert_files(*paths: Path, keep: bool = False) -> Conversion:
    return convert(*(p.read_text() for p in paths), keep=keep)


def rules_of(conversion: Conversion) -> NodeRules:
    return parse_rules(to_yaml(conversion), "<converted>")


def rule(
    name: str = "r",
    mode: str = "continuous",
    conditions: str = '[{type: TestReady, requiredStatus: "True"}]',
    extra: str = "",
    taint: str = "{key: readiness.k8s.io/TestReady, effect: NoSchedule, value: pending}",
    selector: str = "{matchLabels: {e2e-test: x}}",
) -> str:
    """One NodeReadinessRule; line 6 is conditions, 7 the taint, 8 the mode, 9 the selector."""
    return textwrap.dedent(
        f"""\
        apiVersion: readiness.node.x-k8s.io/v1alpha1
        kind: NodeReadinessRule
        metadata:
          name: {name}
        spec:
          conditions: {conditions}
          taint: {taint}
          enforcementMode: {mode}
          nodeSelector: {selector}
        """
    ) + (textwrap.indent(textwrap.dedent(extra), "  ") if extra else "")


# --- node-readiness-controller's own files ----------------------------------------------------


@pytest.mark.parametrize("path", COPIED, ids=lambda p: str(p.relative_to(NRC)))
def test_every_rule_file_of_node_readiness_controller_converts_and_validates(path: Path) -> None:
    documents = read_yaml_documents(path.read_text(), str(path))
    rules = rules_of(convert_files(path))
    assert len(rules.condition_taints) + len(rules.startup_gates) == len(documents)


def test_kubectl_get_nrr_output_converts_every_item() -> None:
    rules = rules_of(convert_files(KUBECTL_LIST))
    assert [r.name for r in rules.condition_taints] == [
        "dryrun-test-rule",
        "gpu-driver-any",
        "multi-condition-rule",
        "problem-gate-rule",
    ]
    assert [g.name for g in rules.startup_gates] == ["nodereadinessrule-sample"]


def test_the_shipped_example_is_what_the_command_prints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = runner.invoke(
        app,
        [
            "migrate",
            "node-readiness-controller",
            "examples/migrate/node-readiness-controller-rules.yaml",
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (EXAMPLES / "node-readiness-controller.yaml").read_text()


# --- every field -----------------------------------------------------------------------------


def test_a_continuous_rule_becomes_a_condition_taint_on_every_other_status() -> None:
    [taint] = rules_of(convert(rule())).condition_taints
    [condition] = taint.conditions
    assert condition.type == "TestReady"
    assert [s for s in ("True", "False", "Unknown") if re.fullmatch(condition.status, s)] == [
        "False",
        "Unknown",
    ]
    assert (taint.taint.key, taint.taint.value, taint.taint.effect) == (
        "readiness.k8s.io/TestReady",
        "pending",
        "NoSchedule",
    )
    assert taint.on_recovery == "remove" and not taint.dry_run


@pytest.mark.parametrize("required", ["True", "False", "Unknown"])
def test_the_required_status_is_negated_for_every_status_a_node_may_report(required: str) -> None:
    conditions = f'[{{type: C, requiredStatus: "{required}"}}]'
    [taint] = rules_of(convert(rule(conditions=conditions))).condition_taints
    reported = ("True", "False", "Unknown", "TRUE", "Maybe", "", f"{required}x")
    matching = [s for s in reported if re.fullmatch(taint.conditions[0].status, s)]
    assert matching == [s for s in reported if s != required]


def test_an_unreported_condition_counts_as_unknown_as_in_node_readiness_controller() -> None:
    [taint] = rules_of(convert(rule())).condition_taints
    assert taint.conditions[0].default_status == "Unknown"


def test_default_status_is_carried_over() -> None:
    conditions = '[{type: MaintenanceRequired, requiredStatus: "False", defaultStatus: "False"}]'
    [taint] = rules_of(convert(rule(conditions=conditions))).condition_taints
    assert re.fullmatch(taint.conditions[0].status, "True")
    assert not re.fullmatch(taint.conditions[0].status, "False")
    assert taint.conditions[0].default_status == "False"


@pytest.mark.parametrize(
    ("nrc_policy", "policy"),
    [(None, "anyOf"), ("allOf", "anyOf"), ("anyOf", "allOf")],
)
def test_the_condition_policy_is_inverted_with_the_conditions(
    nrc_policy: str | None, policy: str
) -> None:
    conditions = '[{type: A, requiredStatus: "True"}, {type: B, requiredStatus: "True"}]'
    extra = f"conditionPolicy: {nrc_policy}\n" if nrc_policy else ""
    [taint] = rules_of(convert(rule(conditions=conditions, extra=extra))).condition_taints
    assert taint.condition_policy == policy
    assert [c.type for c in taint.conditions] == ["A", "B"]


def test_a_bootstrap_only_rule_becomes_a_gate_lifted_by_the_conditions() -> None:
    conditions = '[{type: A, requiredStatus: "True"}, {type: B, requiredStatus: "False"}]'
    rules = rules_of(convert(rule(mode="bootstrap-only", conditions=conditions)))
    [gate] = rules.startup_gates
    assert rules.condition_taints == ()
    assert [(c.type, c.status) for c in gate.ready_when.conditions] == [
        ("A", "True"),
        ("B", "False"),
    ]
    assert gate.ready_when.condition_policy == "allOf"
    assert gate.ready_when.pods is None and gate.ready_when.annotation is None
    assert gate.backfill and not gate.regate_on_reboot and gate.timeout is None
    assert (gate.taint.key, gate.taint.value) == ("readiness.k8s.io/TestReady", "pending")


def test_a_taint_without_value_gets_none() -> None:
    taint = "{key: readiness.k8s.io/x, effect: NoExecute}"
    [converted] = rules_of(convert(rule(taint=taint))).condition_taints
    assert (converted.taint.value, converted.taint.effect) == ("", "NoExecute")


def test_match_labels_and_expressions_become_the_match() -> None:
    selector = (
        '{matchLabels: {node-role.kubernetes.io/worker: ""}, matchExpressions: ['
        "{key: node-role.kubernetes.io/control-plane, operator: DoesNotExist}, "
        "{key: example.com/gpu, operator: In, values: [a, b]}]}"
    )
    [taint] = rules_of(convert(rule(selector=selector))).condition_taints
    assert taint.match is not None
    assert taint.match.labels == {"node-role.kubernetes.io/worker": ""}
    assert [(e.key, e.operator, e.values) for e in taint.match.expressions] == [
        ("node-role.kubernetes.io/control-plane", "DoesNotExist", ()),
        ("example.com/gpu", "In", ("a", "b")),
    ]


@pytest.mark.parametrize("mode", ["continuous", "bootstrap-only"])
def test_dry_run_is_carried_over(mode: str) -> None:
    rules = rules_of(convert(rule(mode=mode, extra="dryRun: true\n")))
    flags = [r.dry_run for r in rules.condition_taints] + [g.dry_run for g in rules.startup_gates]
    assert flags == [True]


def test_keep_completion_annotation_uses_the_rule_uid_from_kubectl() -> None:
    rules = rules_of(convert_files(KUBECTL_LIST, keep=True))
    [gate] = rules.startup_gates
    assert gate.completion_annotation is not None
    uid = _kubectl_item("nodereadinessrule-sample")["metadata"]["uid"]
    assert gate.completion_annotation.key == f"readiness.k8s.io/bootstrap-completed-{uid}"


def test_keep_completion_annotation_without_uid_uses_the_legacy_name_key() -> None:
    conversion = convert(rule(name="cni", mode="bootstrap-only"), keep=True)
    [gate] = rules_of(conversion).startup_gates
    assert gate.completion_annotation is not None
    assert gate.completion_annotation.key == "readiness.k8s.io/bootstrap-completed-cni"
    assert any("cni had no metadata.uid" in note for note in conversion.notes)


def test_without_keep_no_completion_annotation_is_written() -> None:
    [gate] = rules_of(convert(rule(mode="bootstrap-only"))).startup_gates
    assert gate.completion_annotation is None


def test_a_name_that_is_not_a_dns_label_is_renamed_and_said() -> None:
    conversion = convert(rule(name="gpu.driver.example.com"))
    [taint] = rules_of(conversion).condition_taints
    assert taint.name == "gpu-driver-example-com"
    assert any(
        "'gpu.driver.example.com' is 'gpu-driver-example-com'" in n for n in conversion.notes
    )


def test_several_files_and_documents_convert_together() -> None:
    gate = rule(
        name="b", mode="bootstrap-only", taint="{key: readiness.k8s.io/b, effect: NoSchedule}"
    )
    two = rule(name="a") + "---\n" + gate
    rules = rules_of(
        convert(two, rule(name="c", taint="{key: readiness.k8s.io/c, effect: NoSchedule}"))
    )
    assert [r.name for r in rules.condition_taints] == ["a", "c"]
    assert [g.name for g in rules.startup_gates] == ["b"]


def test_status_and_metadata_are_ignored() -> None:
    text = rule() + "status:\n  appliedNodes: [n1]\n  nodeEvaluations: []\n"
    assert len(rules_of(convert(text)).condition_taints) == 1


def _kubectl_item(name: str) -> dict[str, Any]:
    [(listed, _)] = read_yaml_documents(KUBECTL_LIST.read_text(), "kubectl")
    return next(i for i in listed["items"] if i["metadata"]["name"] == name)


# --- rules node-readiness-controller would refuse: located errors ----------------------------


def test_a_bad_enforcement_mode_is_located_with_the_closest_mode() -> None:
    assert problems_of(convert(rule(mode="bootstrap"))) == [
        "in.yaml:8:3: spec.enforcementMode: 'bootstrap' is not a valid enforcementMode: use "
        "bootstrap-only, continuous; did you mean 'bootstrap-only'?"
    ]


def test_any_of_with_bootstrap_only_is_refused_as_its_webhook_does() -> None:
    [problem] = problems_of(convert(rule(mode="bootstrap-only", extra="conditionPolicy: anyOf\n")))
    assert problem.startswith("in.yaml:10:3: spec.conditionPolicy: anyOf is not allowed with ")
    assert "remove conditionPolicy, or use enforcementMode continuous" in problem


def test_default_status_with_bootstrap_only_is_refused_at_the_condition() -> None:
    conditions = '[{type: A, requiredStatus: "True", defaultStatus: "False"}]'
    [problem] = problems_of(convert(rule(mode="bootstrap-only", conditions=conditions)))
    assert problem.startswith(
        "in.yaml:6:50: spec.conditions[0].defaultStatus: defaultStatus is not allowed with "
        "enforcementMode bootstrap-only"
    )


def test_a_taint_key_outside_readiness_k8s_io_is_refused_saying_nodegate_takes_it() -> None:
    taint = "{key: example.com/ready, effect: NoSchedule}"
    [problem] = problems_of(convert(rule(taint=taint)))
    assert problem.startswith(
        "in.yaml:7:11: spec.taint.key: taint key 'example.com/ready' does not start with "
        "'readiness.k8s.io/': node-readiness-controller's CRD refuses it"
    )
    assert "nodegate itself accepts other keys" in problem


def test_an_empty_node_selector_is_refused() -> None:
    [problem] = problems_of(convert(rule(selector="{}")))
    assert problem.startswith("in.yaml:9:3: spec.nodeSelector: needs a non-empty nodeSelector")


def test_an_unknown_spec_field_is_refused_with_the_closest_field() -> None:
    [problem] = problems_of(convert(rule(extra="dryrun: true\n")))
    assert problem == (
        "in.yaml:10:3: spec.dryrun: 'dryrun' is not a field of spec (conditions, "
        "conditionPolicy, enforcementMode, taint, nodeSelector, dryRun): did you mean "
        "'dryRun'? remove it"
    )


def test_a_bad_required_status_is_refused() -> None:
    [problem] = problems_of(convert(rule(conditions="[{type: A, requiredStatus: true}]")))
    assert "spec.conditions[0].requiredStatus: True is not a valid requiredStatus" in problem


def test_another_kind_is_refused() -> None:
    text = rule().replace("kind: NodeReadinessRule", "kind: Node")
    [problem] = problems_of(convert(text))
    assert problem.startswith("in.yaml:2:1: kind: readiness.node.x-k8s.io/v1alpha1/Node is not ")


def test_a_problem_in_the_second_document_names_the_document_and_its_line() -> None:
    text = rule(name="a") + "---\n" + rule(name="b", mode="sometimes")
    [problem] = problems_of(convert(text))
    assert problem.startswith("in.yaml:18:3: document[1].spec.enforcementMode: 'sometimes'")


def test_a_problem_in_a_list_item_names_the_item() -> None:
    items = [
        textwrap.indent(rule(name=n, mode=m), "  ").replace("  apiVersion", "- apiVersion")
        for n, m in (("a", "continuous"), ("b", "x"))
    ]
    text = "apiVersion: v1\nkind: List\nitems:\n" + "".join(items)
    [problem] = problems_of(convert(text))
    assert problem.startswith("in.yaml:20:5: items[1].spec.enforcementMode: 'x' is not")


def test_what_nodegate_refuses_is_named_by_the_rules_setting() -> None:
    """Validation of the generated rules, mapped back: a selector label key nodegate refuses."""
    [problem] = problems_of(convert(rule(selector="{matchLabels: {'bad key': x}}")))
    assert problem.startswith(
        "in.yaml:9:32: spec.nodeSelector.matchLabels[\"bad key\"]: 'bad key' is not a valid "
        "Kubernetes key"
    )


def test_two_gates_with_one_taint_are_refused_at_the_second_rule() -> None:
    a = rule(name="a", mode="bootstrap-only")
    b = rule(name="b", mode="bootstrap-only", selector="{matchLabels: {e2e-test: y}}")
    [problem] = problems_of(convert(a, b))
    assert problem.startswith("in2.yaml:7:3: spec.taint: taint readiness.k8s.io/TestReady")


def test_no_rule_at_all_is_refused() -> None:
    assert problems_of(convert("")) == [
        "in.yaml: (document): no NodeReadinessRule found: give files holding NodeReadinessRule "
        "objects"
    ]


# --- notes -----------------------------------------------------------------------------------


def _notes(conversion: Conversion) -> str:
    return "\n".join(conversion.notes)


def test_continuous_rules_get_the_inversion_note_and_no_gate_notes() -> None:
    notes = _notes(convert(rule()))
    assert "the policy is inverted with them" in notes
    assert "startup gates" not in notes and "Completion" not in notes


def test_gates_get_the_backfill_and_completion_notes_and_the_webhook() -> None:
    conversion = convert(rule(mode="bootstrap-only"))
    notes = _notes(conversion)
    assert "backfill: true" in notes and "the policy is inverted" not in notes
    assert "Run with --keep-completion-annotation to keep NRC's key" in notes
    assert conversion.webhook == {"failurePolicy": "Ignore"}


def test_keep_says_what_value_nrc_wrote() -> None:
    notes = _notes(convert(rule(mode="bootstrap-only"), keep=True))
    assert 'where NRC wrote {"rule-name": "<rule>"}' in notes


def test_continuous_only_needs_no_webhook() -> None:
    assert convert(rule()).webhook is None


@pytest.mark.parametrize(
    "phrase",
    [
        "a gate timeout (timeout, onTimeout",
        "regateOnReboot",
        "the eviction budget, a breaker",
        "Karpenter from v1.13.0",
        "--startup-taint-prefix=readiness.k8s.io/",
        "status.nodeEvaluations",
        "`nodegate explain`",
        "NRC's CRD accepts only readiness.k8s.io/ keys",
        "TaintAdopted",
    ],
)
def test_every_conversion_says_what_nodegate_adds_and_does_differently(phrase: str) -> None:
    assert phrase in _notes(convert(rule()))


def test_a_gate_waiting_for_unknown_is_told_silence_no_longer_lifts_it() -> None:
    conditions = '[{type: A, requiredStatus: "Unknown"}]'
    assert "so silence passed the bootstrap" not in _notes(convert(rule(mode="bootstrap-only")))
    notes = _notes(convert(rule(mode="bootstrap-only", conditions=conditions)))
    assert "requiredStatus Unknown (r): NRC counted a condition" in notes


def test_the_dry_run_note_only_with_a_dry_run_rule() -> None:
    assert "nodegate_dry_run_changes_total" not in _notes(convert(rule()))
    assert "nodegate_dry_run_changes_total" in _notes(convert(rule(extra="dryRun: true\n")))


# --- the command -----------------------------------------------------------------------------


def test_the_command_prints_every_problem_of_every_file_and_exits_1(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(rule(mode="x"))
    missing = tmp_path / "missing.yaml"
    result = runner.invoke(app, ["migrate", "node-readiness-controller", str(bad), str(missing)])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert f"{missing}: (document): cannot read file" in result.stderr


def test_the_command_reports_a_refused_rule_at_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(rule(mode="x"))
    result = runner.invoke(app, ["migrate", "node-readiness-controller", str(bad)])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"{bad}:8:3: spec.enforcementMode: 'x' is not")


def test_the_command_takes_keep_completion_annotation() -> None:
    result = runner.invoke(
        app,
        [
            "migrate",
            "node-readiness-controller",
            "--keep-completion-annotation",
            str(NRC / "test/e2e/testdata/bootstrap-only-rule.yaml"),
        ],
    )
    assert result.exit_code == 0, result.stderr
    assert "--keep-completion-annotation" in result.stdout.splitlines()[0]
    rules = parse_rules(result.stdout, "<stdout>")
    assert rules.startup_gates[0].completion_annotation is not None
