"""Refusals of `formerKeys` and `completionAnnotation`: a former key is held to a gate key's
checks and must be retired everywhere else; a completion annotation stays out of nodegate's
own records."""

from __future__ import annotations

import textwrap

import pytest

from nodegate.core.rules.loader import parse_rules
from tests.unit.core.test_validation import HEADER, problems_of


def gate(former_keys: str, name: str = "switch", key: str = "example.com/new") -> str:
    return textwrap.indent(
        textwrap.dedent(
            f"""\
            - name: {name}
              match: {{labels: {{pool: gpu}}}}
              taint: {{key: {key}, value: wait, effect: NoSchedule}}
              readyWhen: {{annotation: example.com/ready=true}}
              formerKeys: {former_keys}
            """
        ),
        "  ",
    )


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (
            "node.kubernetes.io/initializing",
            "taint key 'node.kubernetes.io/initializing' belongs to the node lifecycle "
            "controller and kubelet; nodegate must not add or remove it. Use a key in your own "
            "domain, e.g. 'example.com/dedicated'",
        ),
        (
            "status-taint.cluster-autoscaler.kubernetes.io/init",
            "'status-taint.cluster-autoscaler.kubernetes.io/init' is a cluster-autoscaler status "
            "taint: it means 'ready but unusable', so the autoscaler counts the node as ready "
            "capacity and scales up again; a gate is a startup taint: use "
            "'startup-taint.cluster-autoscaler.kubernetes.io/init'",
        ),
        (
            "node.kubernetes.io/out-of-service",
            "taint key 'node.kubernetes.io/out-of-service' is allowed only in conditionTaints; "
            "it was never a gate's key",
        ),
    ],
    ids=["reserved", "status-taint", "out-of-service"],
)
def test_a_former_key_is_checked_like_a_gate_key(key: str, message: str) -> None:
    assert problems_of("startupGates:\n" + gate(f"[{key}]")) == [
        f"rules.yaml:8:18: startupGates[0].formerKeys[0]: {message}"
    ]


def test_the_autoscalers_startup_prefix_is_a_valid_former_key() -> None:
    """Switching back from the prefixed key is a switch like any other."""
    prefixed = "startup-taint.cluster-autoscaler.kubernetes.io/init"
    rules = parse_rules(HEADER + "startupGates:\n" + gate(f"[{prefixed}]"))
    assert rules.former_gate_taints() == {(prefixed, "NoSchedule")}


def test_the_gates_own_key_is_no_former_key() -> None:
    assert problems_of("startupGates:\n" + gate("[example.com/new, example.com/old]")) == [
        "rules.yaml:8:5: startupGates[0].formerKeys: 'example.com/new' is the gate's own key; "
        "list only keys its taint had before"
    ]


def test_a_former_key_another_rule_uses_is_refused() -> None:
    body = textwrap.dedent(
        """\
        labelTaints:
          - name: old
            match: {labels: {pool: gpu}}
            taint: {key: example.com/old, value: x, effect: NoExecute}
            nodeMayLift: true
        startupGates:
        """
    ) + gate("[example.com/old]")
    assert problems_of(body) == [
        "rules.yaml:13:18: startupGates[0].formerKeys[0]: 'example.com/old' is the taint key of "
        "labelTaints[0]; a former key is retired and lifted with this gate, so no current rule "
        "may use it: drop it here, or change that rule's key"
    ]


def test_two_gates_may_not_share_a_former_key() -> None:
    body = (
        "startupGates:\n"
        + gate("[example.com/old]")
        + gate("[example.com/old]", name="other", key="example.com/other")
    )
    assert problems_of(body) == [
        "rules.yaml:13:18: startupGates[1].formerKeys[0]: 'example.com/old' is already a former "
        "key of startupGates[0]; each gate would lift it on its own readiness: list it under one "
        "gate"
    ]


def test_a_completion_annotation_in_nodegates_domain_is_refused() -> None:
    body = "startupGates:\n" + gate("[]") + "    completionAnnotation: {key: nodegate.dev/done}\n"
    assert problems_of(body) == [
        "rules.yaml:9:28: startupGates[0].completionAnnotation.key: 'nodegate.dev/done' is in "
        "nodegate's own namespace, where it keeps its records (completed.gate.nodegate.dev/<gate> "
        "is written anyway); use the key your dashboards read, e.g. 'startup.k8s.io/completedAt'"
    ]


def test_two_gates_may_not_write_the_same_completion_annotation() -> None:
    done = "    completionAnnotation: {key: startup.k8s.io/completedAt, format: unix}\n"
    body = (
        "startupGates:\n"
        + gate("[]")
        + done
        + gate("[]", name="other", key="example.com/other")
        + done
    )
    assert problems_of(body) == [
        "rules.yaml:15:28: startupGates[1].completionAnnotation.key: 'startup.k8s.io/completedAt' "
        "is also the completionAnnotation of startupGates[0]; each gate would overwrite the "
        "other's time: give each gate its own key"
    ]


def test_an_unknown_completion_format_names_the_two() -> None:
    body = (
        "startupGates:\n" + gate("[]") + "    completionAnnotation: {key: a.io/b, format: epoch}\n"
    )
    assert problems_of(body) == [
        "rules.yaml:9:41: startupGates[0].completionAnnotation.format: 'epoch' is not allowed: "
        "use 'rfc3339' or 'unix'"
    ]
