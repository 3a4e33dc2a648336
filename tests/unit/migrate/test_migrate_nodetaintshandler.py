"""`nodegate migrate nodetaintshandler`: its constants and environment as one startup gate,
with the Node admission webhook's settings; the autoscaler's prefix on autoscaled pools."""

from __future__ import annotations

from itertools import takewhile
from typing import Any

import pytest
from ruamel.yaml import YAML

from nodegate.cli.main import app
from nodegate.core.decisions.plan import plan
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.loader import RulesDocument, load_rules, parse_rules
from nodegate.core.rules.node import NodeTaint
from nodegate.manifests.build import build_manifests
from nodegate.manifests.settings import DeploySettings
from nodegate.migrate.conversion import to_yaml
from nodegate.migrate.defaults import HandlerSettings
from nodegate.migrate.nodetaintshandler import convert_nodetaintshandler
from tests.unit.core.builders import NOW, node, ready_pods
from tests.unit.migrate.support import EXAMPLES, env_file, problems_of, runner

SOURCE = "nodetaintshandler's settings"
PREFIXED = "startup-taint.cluster-autoscaler.kubernetes.io/initializing"


def test_its_documented_environment_converts_to_the_shipped_rules_file() -> None:
    """examples/migrate/nodetaintshandler.env is its deploy/deployment.yaml's env with the
    backfill its README offers."""
    result = runner.invoke(
        app, ["migrate", "nodetaintshandler"], env=env_file("nodetaintshandler.env")
    )
    assert result.exit_code == 0
    assert result.stdout == (EXAMPLES / "nodetaintshandler.yaml").read_text()


def test_the_gate_uses_its_exact_keys() -> None:
    [gate] = load_rules(EXAMPLES / "nodetaintshandler.yaml").startup_gates
    assert (gate.taint.key, gate.taint.value, gate.taint.effect) == (
        "startup.k8s.io/initializing",
        "wait",
        "NoSchedule",
    )
    pods = gate.ready_when.pods
    assert pods is not None
    assert (pods.namespace, pods.selector) == ("kube-system", {"startup.k8s.io/component": "init"})
    assert pods.ready_annotation == "startup.k8s.io/ready=true" and not pods.require_annotation
    assert gate.completion_annotation is not None
    assert (gate.completion_annotation.key, gate.completion_annotation.format) == (
        "startup.k8s.io/completedAt",
        "unix",
    )
    assert gate.backfill and gate.former_keys == ()


@pytest.mark.parametrize(
    ("labels", "gated"),
    [
        ({"kubernetes.azure.com/mode": "system"}, False),
        ({"kubernetes.azure.com/mode": "user"}, True),
        ({}, True),
    ],
    ids=["aks-system", "aks-user", "not-aks"],
)
def test_only_aks_system_pool_nodes_are_skipped(labels: dict[str, str], gated: bool) -> None:
    [gate] = load_rules(EXAMPLES / "nodetaintshandler.yaml").startup_gates
    assert gate.match.matches(labels) == gated


@pytest.mark.parametrize("value", ["", "0", "true"])
def test_backfill_is_on_only_for_startup_backfill_1(value: str) -> None:
    conversion = convert_nodetaintshandler(HandlerSettings(startup_backfill=value))
    [gate] = parse_rules(to_yaml(conversion)).startup_gates
    assert not gate.backfill
    said = any("did not turn its backfill on" in note for note in conversion.notes)
    assert said == (value == "true")


@pytest.mark.parametrize("autoscaler", ["cluster-autoscaler", "karpenter"])
def test_autoscaled_pools_get_the_prefixed_key_and_keep_the_old_one_as_former(
    autoscaler: str,
) -> None:
    conversion = convert_nodetaintshandler(HandlerSettings(), autoscaler)
    [gate] = parse_rules(to_yaml(conversion)).startup_gates
    assert gate.taint.key == PREFIXED
    assert gate.former_keys == ("startup.k8s.io/initializing",)
    assert "add a toleration for the new key to the init DaemonSet" in conversion.notes[0]


def test_without_an_autoscaler_the_key_stays() -> None:
    [gate] = parse_rules(to_yaml(convert_nodetaintshandler(HandlerSettings()))).startup_gates
    assert gate.taint.key == "startup.k8s.io/initializing" and gate.former_keys == ()


def test_a_key_that_already_has_the_prefix_is_kept_without_a_former_key() -> None:
    settings = HandlerSettings(taint_key=PREFIXED)
    [gate] = parse_rules(to_yaml(convert_nodetaintshandler(settings, "karpenter"))).startup_gates
    assert gate.taint.key == PREFIXED and gate.former_keys == ()


def header_settings(text: str) -> dict[str, Any]:
    """The webhook settings block printed in the comment header, read back as YAML."""
    lines = text.splitlines()
    start = lines.index("#   webhook:")
    block = [line[4:] for line in takewhile(lambda x: x.startswith("#   "), lines[start:])]
    settings: dict[str, Any] = YAML(typ="safe").load("\n".join(block))
    return settings


@pytest.mark.parametrize("policy", ["Ignore", "Fail"])
def test_the_printed_webhook_settings_are_what_nodegate_manifests_deploys(policy: str) -> None:
    text = to_yaml(convert_nodetaintshandler(HandlerSettings(failure_policy=policy)))
    settings = DeploySettings.model_validate(
        {"image": {"repository": "registry.example.com/nodegate"}, **header_settings(text)}
    )
    objects = build_manifests(RulesDocument.parse(text, "rules.yaml"), settings)
    [configuration] = [o for o in objects if o["kind"] == "MutatingWebhookConfiguration"]
    [webhook] = configuration["webhooks"]
    assert (webhook["failurePolicy"], webhook["timeoutSeconds"]) == (policy, 5)


def test_refused_settings_are_named_by_their_flags_and_reported_together() -> None:
    settings = HandlerSettings(
        taint_effect="NoSchedul",
        init_selector="startup.k8s.io/component",
        failure_policy="fail",
        timeout_seconds=60,
    )
    assert problems_of(convert_nodetaintshandler(settings, "cluster_autoscaler")) == [
        f"{SOURCE}: --autoscaler: 'cluster_autoscaler' is not allowed: use none, "
        "cluster-autoscaler, karpenter",
        f"{SOURCE}: --failure-policy: 'fail' is not allowed: use 'Ignore' or 'Fail'",
        f"{SOURCE}: --init-selector: 'startup.k8s.io/component' is not key=value (or several, "
        "comma-separated), e.g. startup.k8s.io/component=init",
        f"{SOURCE}: --taint-effect: 'NoSchedul' is not a taint effect: use one of NoSchedule, "
        "PreferNoSchedule, NoExecute; did you mean 'NoSchedule'?",
        f"{SOURCE}: --timeout-seconds: Input should be less than or equal to 30 (got 60)",
    ]


def test_a_reserved_taint_key_is_refused_by_its_flag() -> None:
    [problem] = problems_of(
        convert_nodetaintshandler(HandlerSettings(taint_key="node.kubernetes.io/initializing"))
    )
    assert problem.startswith(
        f"{SOURCE}: --taint-key: taint key 'node.kubernetes.io/initializing' belongs to"
    )


def test_the_gate_lifts_both_keys_once_its_init_pod_is_ready() -> None:
    """The converted rules, planned: a node born under the old webhook and one under the new
    key are both ungated by the init pod."""
    rules = parse_rules(to_yaml(convert_nodetaintshandler(HandlerSettings(), "karpenter")))
    ready = PlanFacts(now=NOW, gate_pod_signals=ready_pods({"startup": NOW}))
    for key in ("startup.k8s.io/initializing", PREFIXED):
        gated = node(taints=(NodeTaint(key, "NoSchedule", "wait"),))
        assert [c.taint.key for c in plan(gated, rules, ready).remove_taints] == [key]
