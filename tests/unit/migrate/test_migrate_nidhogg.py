"""`nodegate migrate nidhogg`: nidhogg's config (uswitch's, or pelotech's with its options) as
nodeAgents rules, one per DaemonSet, each keeping nidhogg's taint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nodegate.cli.main import app
from nodegate.core.decisions.node_agents import (
    agent_readiness,
    lifted_taints,
)
from nodegate.core.decisions.plan import plan
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.loader import load_rules, parse_rules
from nodegate.core.rules.model import NodeAgentRule, NodeRules
from nodegate.core.rules.node import NodeState, NodeTaint
from nodegate.core.text.errors import RulesError
from nodegate.core.text.k8s_names import taint_key_owner
from nodegate.core.text.yaml_input import read_yaml_documents
from nodegate.core.views.daemon_sets import (
    AgentPod,
    slim_agent_pod,
    slim_daemon_set,
)
from nodegate.migrate.conversion import Conversion, YamlFile, to_yaml
from nodegate.migrate.nidhogg import convert_nidhogg
from tests.unit.core.builders import NOW, node
from tests.unit.migrate.support import EXAMPLES, ROOT, runner

KIAM = "nidhogg.uswitch.com/kube-system.kiam"

# uswitch/nidhogg README.md, "Usage": the JSON example and the YAML one.
README_JSON = """\
{
  "nodeSelector": [
    "node-role.kubernetes.io/node",
    "!node-role.kubernetes.io/master",
    "aws.amazon.com/ec2.asg.name in (standard, special)"
  ],
  "daemonsets": [
    {
      "name": "kiam",
      "namespace": "kube-system"
    }
  ]
}
"""
README_YAML = """\
nodeSelector:
  node-role.kubernetes.io/node
daemonsets:
  - name: kiam
    namespace: kube-system
"""
# pelotech/nidhogg docs/README.md, "Usage": the YAML example, with its options.
PELOTECH_YAML = """\
daemonsets:
  - name: kiam
    namespace: kube-system
nodeSelector:
  - "node-role.kubernetes.io/node"
  - "!node-role.kubernetes.io/master"
  - "aws.amazon.com/ec2.asg.name in (standard, special)"
taintNamePrefix: "nidhogg.uswitch.com"
taintRemovalDelayInSeconds: 10
"""
WORKER = {"node-role.kubernetes.io/node": "", "aws.amazon.com/ec2.asg.name": "standard"}


def converted(text: str, **options: Any) -> Conversion:
    return convert_nidhogg(text, "nidhogg.yaml", **options)


def rules_of(text: str, **options: Any) -> NodeRules:
    return parse_rules(to_yaml(converted(text, **options)))


def the_rule(text: str, **options: Any) -> NodeAgentRule:
    [rule] = rules_of(text, **options).node_agents
    return rule


def config(
    selector: str = '["a"]',
    daemon_sets: str = "[{name: kiam, namespace: kube-system}]",
    extra: str = "",
) -> str:
    return f"nodeSelector: {selector}\ndaemonsets: {daemon_sets}\n{extra}"


def problems_of(text: str, **options: Any) -> list[str]:
    with pytest.raises(RulesError) as caught:
        to_yaml(converted(text, **options))
    return [str(p) for p in caught.value.problems]


def notes_of(text: str, **options: Any) -> str:
    return " ".join(converted(text, **options).notes)


# --- the documented examples ---------------------------------------------------------------------


def test_the_readme_json_example_converts_to_the_shipped_rules_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)
    result = runner.invoke(app, ["migrate", "nidhogg", "examples/migrate/nidhogg.json"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (EXAMPLES / "nidhogg.yaml").read_text()
    assert (EXAMPLES / "nidhogg.json").read_text() == README_JSON


def test_the_readme_json_example_becomes_one_continuous_rule_with_nidhoggs_taint() -> None:
    [rule] = load_rules(EXAMPLES / "nidhogg.yaml").node_agents
    assert rule.name == "kube-system-kiam"
    assert [d.ref for d in rule.listed_daemon_sets] == ["kube-system/kiam"]
    assert rule.taint.flag() == f"{KIAM}:NoSchedule"
    assert rule.mode == "continuous"


def test_the_readme_selector_strings_are_anded_into_one_match() -> None:
    rule = the_rule(README_JSON)
    assert rule.match is not None
    assert [(e.key, e.operator, e.values) for e in rule.match.expressions] == [
        ("node-role.kubernetes.io/node", "Exists", ()),
        ("node-role.kubernetes.io/master", "DoesNotExist", ()),
        ("aws.amazon.com/ec2.asg.name", "In", ("standard", "special")),
    ]


def test_for_is_0s_as_nidhogg_puts_the_taint_back_at_once() -> None:
    assert the_rule(README_JSON).hold.total_seconds() == 0
    assert "every rollout of the DaemonSet takes each node out of scheduling" in (
        notes_of(README_JSON)
    )


def test_for_can_be_given_for_rollouts_to_pass() -> None:
    conversion = converted(README_JSON, hold="2m")
    assert parse_rules(to_yaml(conversion)).node_agents[0].hold.total_seconds() == 120
    assert conversion.command == "nodegate migrate nidhogg --for 2m"


def test_the_readme_yaml_scalar_selector_is_applied_as_written_with_a_note() -> None:
    """nidhogg's YAML decoder drops a string where it reads a list, so it ran with no selector;
    the README means the selector."""
    rule = the_rule(README_YAML)
    assert rule.match is not None
    assert [(e.key, e.operator) for e in rule.match.expressions] == [
        ("node-role.kubernetes.io/node", "Exists")
    ]
    assert "nodeSelector is a single string here" in notes_of(README_YAML)


def test_pelotechs_example_keeps_its_prefix_and_says_its_removal_delay_has_no_counterpart() -> None:
    assert the_rule(PELOTECH_YAML).taint.key == KIAM
    assert "taintRemovalDelayInSeconds: 10 has no counterpart" in notes_of(PELOTECH_YAML)


def test_pelotechs_taint_name_prefix_makes_the_taint_key() -> None:
    rule = the_rule(config(extra="taintNamePrefix: pelo.tech\n"))
    assert rule.taint.key == "pelo.tech/kube-system.kiam"


@pytest.mark.parametrize("effect", ["NoSchedule", "PreferNoSchedule", "NoExecute"])
def test_pelotechs_taint_effect_is_the_rules_effect(effect: str) -> None:
    assert the_rule(config(extra=f"taintEffect: {effect}\n")).taint.effect == effect


def test_a_no_execute_effect_is_noted_as_charged_to_the_eviction_budget() -> None:
    text = config(extra="taintEffect: NoExecute\n")
    assert the_rule(text).charged
    assert "eviction budget" in notes_of(text)


def test_several_selector_strings_note_that_pelotech_applied_only_the_last() -> None:
    assert "applied only the last one" in notes_of(README_JSON)
    assert "applied only the last one" not in notes_of(config(selector='["a"]'))


def test_the_mapping_of_labels_nidhogg_read_before_its_selector_strings_matches_each_label() -> (
    None
):
    text = config(selector="{node-role.kubernetes.io/node: ''}")
    rule = the_rule(text)
    assert rule.match is not None
    assert rule.match.labels == {"node-role.kubernetes.io/node": ""}
    assert "format before uswitch#26" in notes_of(text)


def test_every_daemon_set_gets_its_own_rule_and_taint() -> None:
    sets = "[{name: kiam, namespace: kube-system}, {name: fluentd, namespace: logging}]"
    kiam, fluentd = rules_of(config(daemon_sets=sets)).node_agents
    assert (kiam.name, kiam.taint.key) == ("kube-system-kiam", KIAM)
    assert (fluentd.name, fluentd.taint.key) == (
        "logging-fluentd",
        "nidhogg.uswitch.com/logging.fluentd",
    )


def test_rule_names_stay_unique_dns_labels() -> None:
    long = "a" * 60
    sets = (
        "[{name: b.c, namespace: a}, {name: c, namespace: a-b}, "
        f"{{name: {long}, namespace: x}}]"
    )
    names = [r.name for r in rules_of(config(daemon_sets=sets)).node_agents]
    assert names[:2] == ["a-b-c", "a-b-c-2"]
    assert len(names[2]) <= 63


def test_nidhoggs_taint_key_is_not_one_nodegate_reserves_for_another_controller() -> None:
    assert taint_key_owner(KIAM) is None


def test_every_node_is_what_an_absent_selector_means_when_asked() -> None:
    text = "daemonsets: [{name: kiam, namespace: kube-system}]\n"
    assert the_rule(text, every_node=True).match is None


def test_an_empty_selector_string_selects_every_node_as_in_nidhogg() -> None:
    assert the_rule(config(selector='[""]')).match is None


# --- no nodeSelector: each DaemonSet's own (pelotech, its Helm chart's default) -------------------

# pelotech/nidhogg charts/nidhogg: values.yaml's `configuration` has no nodeSelector
# (taintRemovalDelayInSeconds: 5), and templates/configmap.yaml writes it as config.json with
# `toJson`; its handler.go then reads each DaemonSet's spec.template.spec.nodeSelector.
CHART_DEFAULT = (
    '{"daemonsets":[{"name":"fluentd","namespace":"logging"},'
    '{"name":"nvidia","namespace":"kube-system"}],"taintRemovalDelayInSeconds":5}'
)
FLUENTD = "nidhogg.uswitch.com/logging.fluentd"
NVIDIA = "nidhogg.uswitch.com/kube-system.nvidia"
GPU = {"nvidia.com/gpu.present": "true"}
DAEMON_SETS = """apiVersion: v1
kind: List
items:
  - kind: DaemonSet
    metadata: {name: fluentd, namespace: logging}
    spec: {template: {spec: {containers: []}}}
  - kind: DaemonSet
    metadata: {name: nvidia, namespace: kube-system}
    spec: {template: {spec: {nodeSelector: {nvidia.com/gpu.present: "true"}}}}
"""


def daemon_set_file(text: str = DAEMON_SETS, source: str = "ds.yaml") -> YamlFile:
    return YamlFile(source, tuple(read_yaml_documents(text, source)))


def from_cluster(*files: YamlFile, text: str = CHART_DEFAULT, **options: Any) -> Conversion:
    return converted(text, daemon_sets=list(files) or [daemon_set_file()], **options)


def test_the_chart_default_gives_each_daemon_set_its_own_node_selector_as_its_match() -> None:
    fluentd, nvidia = parse_rules(to_yaml(from_cluster())).node_agents
    assert (fluentd.taint.key, fluentd.match) == (FLUENTD, None)  # no nodeSelector: every node
    assert nvidia.taint.key == NVIDIA
    assert nvidia.match is not None
    assert (nvidia.match.labels, nvidia.match.expressions) == (GPU, ())


@pytest.mark.parametrize(
    ("labels", "tainted"),
    [({}, {FLUENTD}), (GPU, {FLUENTD, NVIDIA})],
    ids=["a CPU node: the log agent's taint only", "a GPU node: both"],
)
def test_the_chart_default_taints_a_node_for_the_daemon_sets_whose_node_selector_selects_it(
    labels: dict[str, str], tainted: set[str]
) -> None:
    """Planned with no agent Ready: nidhogg's taints, the GPU one on GPU nodes alone."""
    found = parse_rules(to_yaml(from_cluster()))
    on = node(labels)
    none = {
        r.name: agent_readiness(r, on, [], [], {}, lifted_taints(found)) for r in found.node_agents
    }
    result = plan(on, found, PlanFacts(now=NOW, agents=none))
    assert {c.taint.key for c in result.add_taints} == tainted


def test_the_chart_default_born_taints_are_each_daemon_sets_own() -> None:
    """Born with the taints nidhogg would have put there, no other: a CPU node never carries
    the GPU agent's, even for a moment."""
    found = parse_rules(to_yaml(from_cluster()))
    assert [r.taint.key for r in found.node_agents if r.born_with({})] == [FLUENTD]
    assert [r.taint.key for r in found.node_agents if r.born_with(GPU)] == [FLUENTD, NVIDIA]


def test_the_chart_default_notes_say_the_match_is_a_copy_to_renew() -> None:
    notes = " ".join(from_cluster().notes)
    assert "its rule's match is that nodeSelector as the --daemon-sets files give it" in notes
    assert "when a DaemonSet's nodeSelector changes, run this again" in notes
    assert "a toleration of every one of these taints its nodes can carry" in notes


def test_daemon_sets_come_from_manifests_too_in_default_without_a_namespace() -> None:
    manifests = (
        "kind: DaemonSet\nmetadata: {name: fluentd}\nspec: {template: {spec: {nodeSelector: "
        "{a: b}}}}\n---\nkind: Deployment\nmetadata: {name: fluentd, namespace: default}\n"
    )
    text = '{"daemonsets":[{"name":"fluentd","namespace":"default"}]}'
    match = parse_rules(to_yaml(from_cluster(daemon_set_file(manifests), text=text)))
    assert match.node_agents[0].match is not None
    assert match.node_agents[0].match.labels == {"a": "b"}


def test_a_daemon_set_in_no_file_is_refused_as_nidhogg_tainted_no_node_for_it() -> None:
    only_fluentd = DAEMON_SETS.partition("  - kind: DaemonSet\n    metadata: {name: nvidia")[0]
    assert problems_of(CHART_DEFAULT, daemon_sets=[daemon_set_file(only_fluentd)]) == [
        "nidhogg.yaml:1:57: daemonsets[1]: kube-system/nvidia is not in the --daemon-sets "
        "files (ds.yaml): pelotech's nidhogg reads its nodeSelector from the cluster, and "
        "tainted no node for it while it could not: give the file that holds it (--daemon-sets "
        "<(kubectl get ds -A -o yaml)), or drop it from daemonsets"
    ]


@pytest.mark.parametrize(
    ("selector", "said"),
    [
        pytest.param(
            "[gpu]",
            "ds.yaml:9:30: items[1].spec.template.spec.nodeSelector: must be a mapping of node "
            "labels to their values, all strings",
            id="not a mapping",
        ),
        pytest.param(
            "{gpu: true}",
            "ds.yaml:9:30: items[1].spec.template.spec.nodeSelector: must be a mapping",
            id="a value not a string",
        ),
        pytest.param(
            "{'bad key': 'x'}",
            "ds.yaml:9:45: items[1].spec.template.spec.nodeSelector[\"bad key\"]: 'bad key' is "
            "not a valid Kubernetes key",
            id="a label key Kubernetes refuses",
        ),
    ],
)
def test_a_node_selector_that_is_not_node_labels_is_refused_in_its_file(
    selector: str, said: str
) -> None:
    text = DAEMON_SETS.replace('{nvidia.com/gpu.present: "true"}', selector)
    problems = problems_of(CHART_DEFAULT, daemon_sets=[daemon_set_file(text)])
    assert any(p.startswith(said) for p in problems), problems


def test_a_daemon_set_given_twice_with_two_node_selectors_is_refused_at_the_second() -> None:
    again = DAEMON_SETS.replace("nvidia.com/gpu.present", "example.com/gpu")
    problems = problems_of(
        CHART_DEFAULT, daemon_sets=[daemon_set_file(), daemon_set_file(again, "again.yaml")]
    )
    assert problems == [
        "again.yaml:9:30: items[1].spec.template.spec.nodeSelector: kube-system/nvidia is given "
        "again with another nodeSelector than in ds.yaml: give each DaemonSet once, as the "
        "cluster has it"
    ]


def test_daemon_sets_with_a_node_selector_in_the_config_are_refused() -> None:
    assert problems_of(config(), daemon_sets=[daemon_set_file()]) == [
        "nidhogg.yaml:1:1: nodeSelector: --daemon-sets is for a config without nodeSelector; "
        "this one has one: drop the flag"
    ]


def test_every_node_and_daemon_sets_together_are_refused() -> None:
    [problem] = problems_of(CHART_DEFAULT, every_node=True, daemon_sets=[daemon_set_file()])
    assert "--every-node (uswitch: every node) and --daemon-sets (pelotech" in problem


# --- nidhogg's first-ready annotation (--ready-annotation) --------------------------------------


@pytest.mark.parametrize(
    ("fork", "extra", "key"),
    [
        ("pelotech", "", "nidhogg.uswitch.com/ready-since"),
        ("pelotech", "taintNamePrefix: pelo.tech\n", "pelo.tech/ready-since"),
        ("uswitch", "taintNamePrefix: pelo.tech\n", "nidhogg.uswitch.com/first-time-ready"),
    ],
    ids=["pelotech", "pelotech's prefix", "uswitch's fixed key"],
)
def test_ready_annotation_writes_the_forks_first_ready_annotation(
    fork: str, extra: str, key: str
) -> None:
    rule = the_rule(config(extra=extra), ready_annotation=fork)
    assert rule.first_ready_annotation == key
    assert f"firstReadyAnnotation: {key} is written, as nidhogg wrote it" in notes_of(
        config(extra=extra), ready_annotation=fork
    )


def test_without_ready_annotation_the_notes_say_the_annotation_is_no_longer_written() -> None:
    assert the_rule(config()).first_ready_annotation is None
    assert "run with --ready-annotation pelotech (or uswitch)" in notes_of(config())


def test_an_unknown_ready_annotation_is_refused_at_the_flag() -> None:
    assert problems_of(config(), ready_annotation="vigil") == [
        "nidhogg.yaml: --ready-annotation: 'vigil' is not a nidhogg: give pelotech "
        "(<taintNamePrefix>/ready-since) or uswitch (nidhogg.uswitch.com/first-time-ready)"
    ]


# --- selector strings ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "labels", "expressions"),
    [
        pytest.param("a=b", {"a": "b"}, [], id="k=v: a label"),
        pytest.param("a==b", {"a": "b"}, [], id="k==v: a label"),
        pytest.param("a!=b", {}, [("a", "NotIn", ("b",))], id="k!=v: NotIn"),
        pytest.param("a in (b, c)", {}, [("a", "In", ("b", "c"))], id="in"),
        pytest.param("a notin (b,c)", {}, [("a", "NotIn", ("b", "c"))], id="notin"),
        pytest.param("a", {}, [("a", "Exists", ())], id="k: Exists"),
        pytest.param("!a", {}, [("a", "DoesNotExist", ())], id="!k: DoesNotExist"),
        pytest.param("a=b,a=c", {"a": "b"}, [("a", "In", ("c",))], id="a key equal twice"),
        pytest.param("a,a", {}, [("a", "Exists", ())], id="a requirement repeated once"),
    ],
)
def test_each_selector_form_becomes_its_match(
    selector: str, labels: dict[str, str], expressions: list[tuple[str, str, tuple[str, ...]]]
) -> None:
    match = the_rule(config(selector=f"[{selector!r}]")).match
    assert match is not None
    assert match.labels == labels
    assert [(e.key, e.operator, e.values) for e in match.expressions] == expressions


@pytest.mark.parametrize(
    ("labels", "matches"),
    [({}, True), ({"a": "c"}, True), ({"a": "b"}, False)],
    ids=["without the key", "another value", "the value"],
)
def test_not_equals_matches_a_node_without_the_key_as_in_kubernetes(
    labels: dict[str, str], matches: bool
) -> None:
    match = the_rule(config(selector="['a!=b']")).match
    assert match is not None
    assert match.matches(labels) is matches


# --- planned: nidhogg's taint on the nodes nidhogg tainted -----------------------------------


def kiam_daemon_set() -> Any:
    tolerates = {"tolerations": [{"key": KIAM, "operator": "Exists"}]}
    return slim_daemon_set(
        {
            "metadata": {"namespace": "kube-system", "name": "kiam", "uid": "uid-kiam"},
            "spec": {"template": {"spec": tolerates}},
        }
    )


def kiam_pod(ready: bool) -> AgentPod:
    status = "True" if ready else "False"
    return slim_agent_pod(
        {
            "metadata": {
                "uid": "pod-1",
                "creationTimestamp": "2026-11-21T11:59:00Z",
                "ownerReferences": [{"kind": "DaemonSet", "uid": "uid-kiam", "controller": True}],
                "managedFields": [{"subresource": "status", "time": "2026-11-21T12:00:00Z"}],
            },
            "spec": {"nodeName": "node-a"},
            "status": {
                "conditions": [{"type": "Ready", "status": status}],
                "containerStatuses": [{"ready": ready}],
            },
        }
    )


def taint_changes(on: NodeState, ready: bool) -> tuple[set[str], set[str]]:
    found = rules_of(README_JSON)
    [rule] = found.node_agents
    readiness = agent_readiness(
        rule, on, [kiam_daemon_set()], [kiam_pod(ready)], {}, lifted_taints(found)
    )
    result = plan(on, found, PlanFacts(now=NOW, agents={rule.name: readiness}))
    return (
        {str(c.taint) for c in result.add_taints},
        {str(c.taint) for c in result.remove_taints},
    )


def test_a_node_nidhogg_selects_is_tainted_with_its_key_while_the_pod_is_not_ready() -> None:
    assert taint_changes(node(WORKER), ready=False) == ({f"{KIAM}:NoSchedule"}, set())


@pytest.mark.parametrize(
    "labels",
    [
        {**WORKER, "node-role.kubernetes.io/master": ""},
        {**WORKER, "aws.amazon.com/ec2.asg.name": "gpu"},
        {"aws.amazon.com/ec2.asg.name": "standard"},
    ],
    ids=["a master", "another ASG", "not a node role"],
)
def test_a_node_outside_nidhoggs_selector_is_not_tainted(labels: dict[str, str]) -> None:
    assert taint_changes(node(labels), ready=False) == (set(), set())


def test_nidhoggs_taint_already_on_a_node_is_lifted_once_the_pod_is_ready() -> None:
    tainted = node(WORKER, taints=(NodeTaint(KIAM, "NoSchedule"),))
    assert taint_changes(tainted, ready=True) == (set(), {f"{KIAM}:NoSchedule"})


def test_nidhoggs_taint_already_on_a_node_stays_while_the_pod_is_not_ready() -> None:
    tainted = node(WORKER, taints=(NodeTaint(KIAM, "NoSchedule"),))
    assert taint_changes(tainted, ready=False) == (set(), set())


# --- refused -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "said"),
    [
        pytest.param(
            "daemonsets: [\n", "nidhogg.yaml:2:1: (document): YAML syntax error", id="not YAML"
        ),
        pytest.param("- a\n", "(document): expected nidhogg's config, a mapping", id="a list"),
        pytest.param(
            'nodeSelector: ["a"]\n',
            "daemonsets: no daemonsets: nidhogg watched no DaemonSet",
            id="no daemonsets",
        ),
        pytest.param(
            config(daemon_sets="kiam"),
            "daemonsets: must be a list of {name, namespace}",
            id="daemonsets not a list",
        ),
        pytest.param(
            config(daemon_sets="[kiam]"),
            "daemonsets[0]: must be a mapping {name, namespace}",
            id="a daemonset not a mapping",
        ),
        pytest.param(
            config(daemon_sets="[{name: kiam}]"),
            "daemonsets[0].namespace: every daemonset needs its namespace",
            id="no namespace",
        ),
        pytest.param(
            config(daemon_sets="[{namespace: kube-system, name: [kiam]}]"),
            "daemonsets[0].name: must be a string, found a list",
            id="a name not a string",
        ),
        pytest.param(
            config(daemon_sets="[{name: kiam, namespace: kube-system, image: x}]"),
            "daemonsets[0].image: 'image' is not a key of a daemonset (name, namespace)",
            id="unknown daemonset key",
        ),
        pytest.param(
            config(daemon_sets="[{name: kiam, namespace: a}, {name: kiam, namespace: a}]"),
            "daemonsets[1]: a/kiam is listed twice",
            id="a daemonset twice",
        ),
        pytest.param(
            config(daemon_sets=f"[{{name: {'k' * 60}, namespace: kube-system}}]"),
            "is not a valid taint key (name part 'kube-system.kkk",
            id="taint key too long",
        ),
        pytest.param(
            config(daemon_sets="[{name: Kiam, namespace: kube-system}]"),
            "daemonsets[0].name: 'Kiam' cannot be a DaemonSet's name (a DNS subdomain",
            id="a daemonset name Kubernetes refuses",
        ),
        pytest.param(
            config(extra="daemonSets: []\n"),
            "daemonSets: 'daemonSets' is not a key of nidhogg's config (daemonsets, "
            "nodeSelector, taintNamePrefix, taintEffect, taintRemovalDelayInSeconds); nidhogg "
            "silently ignored it: did you mean 'daemonsets'?",
            id="unknown key",
        ),
        pytest.param(
            config(extra="taintNamePrefix: Not_A_Domain\n"),
            "taintNamePrefix: 'Not_A_Domain' makes taint keys",
            id="prefix not a DNS subdomain",
        ),
        pytest.param(
            config(extra="taintNamePrefix: example.com/nidhogg\n"),
            "taintNamePrefix: 'example.com/nidhogg' makes taint keys",
            id="prefix with a slash",
        ),
        pytest.param(
            config(extra="taintNamePrefix: node.kubernetes.io\n"),
            "taintNamePrefix: taint key 'node.kubernetes.io/kube-system.kiam' belongs to the "
            "node lifecycle controller",
            id="prefix another controller owns",
        ),
        pytest.param(
            config(extra="taintEffect: NoExecte\n"),
            "taintEffect: 'NoExecte' is not a taint effect: use one of NoSchedule, "
            "PreferNoSchedule, NoExecute (pelotech's nidhogg silently used NoSchedule for it); "
            "did you mean 'NoExecute'?",
            id="unknown effect",
        ),
        pytest.param(
            config(extra="taintRemovalDelayInSeconds: 10s\n"),
            "taintRemovalDelayInSeconds: '10s' is not a number of seconds",
            id="delay not a number",
        ),
        pytest.param(
            config(selector="[a, '!b,']"),
            "nidhogg.yaml:1:19: nodeSelector[1]: '!b,' is not a label selector (found 'end of "
            "string', expected: identifier after ','), so nidhogg refused to start with it",
            id="bad selector syntax",
        ),
        pytest.param(
            config(selector="['size > 3']"),
            "nodeSelector[0]: 'size > 3': a nodegate match has no > or <",
            id="greater than",
        ),
        pytest.param(
            config(selector="[[a]]"),
            "nodeSelector[0]: must be a label selector string",
            id="a selector not a string",
        ),
        pytest.param(config(selector="3"), "nodeSelector: must be a list", id="a number"),
        pytest.param(
            "daemonsets: [{name: kiam, namespace: kube-system}]\n",
            "nodeSelector: no nodeSelector: pelotech's nidhogg (v0.6.0 on, its Helm chart's "
            "default) then taints, for each DaemonSet, the nodes its own "
            "spec.template.spec.nodeSelector selects, read from the cluster, which this file "
            "does not hold: give the DaemonSets, --daemon-sets <(kubectl get ds -A -o yaml); "
            "uswitch's nidhogg tainted every node: --every-node",
            id="no selector",
        ),
    ],
)
def test_a_config_that_cannot_be_converted_is_refused_at_its_setting(text: str, said: str) -> None:
    assert any(said in p for p in problems_of(text)), problems_of(text)


def test_a_prefix_that_makes_no_valid_key_is_said_once_at_taint_name_prefix() -> None:
    [problem] = problems_of(config(extra="taintNamePrefix: example.com/nidhogg\n"))
    assert problem.startswith(
        "nidhogg.yaml:3:1: taintNamePrefix: 'example.com/nidhogg' makes taint keys "
        "'example.com/nidhogg/<namespace>.<name>' that the API server refuses"
    )


def test_every_node_with_a_selector_is_refused() -> None:
    assert problems_of(config(), every_node=True) == [
        "nidhogg.yaml:1:1: nodeSelector: --every-node is for a config without nodeSelector; "
        "this one has one: drop the flag"
    ]


def test_a_for_that_is_not_a_duration_is_refused_at_the_flag() -> None:
    assert problems_of(config(), hold="2x") == [
        "nidhogg.yaml: --for: '2x' is not a duration; write a number and a unit (ms, s, m, h), "
        "e.g. '30s', '10m' or '1h30m'"
    ]


def test_every_problem_is_reported_at_once() -> None:
    text = config(selector="['a b']", extra="taintEffect: x\ntaintRemovalDelayInSeconds: -1\n")
    assert [p.split(": ")[1] for p in problems_of(text)] == [
        "nodeSelector[0]",
        "taintEffect",
        "taintRemovalDelayInSeconds",
    ]


# --- the command ---------------------------------------------------------------------------------


def test_the_command_prints_nothing_on_stdout_when_refused(tmp_path: Path) -> None:
    bad = tmp_path / "nidhogg.json"
    bad.write_text('{"nodeSelector": ["a in b"], "daemonsets": []}')
    result = runner.invoke(app, ["migrate", "nidhogg", str(bad)])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert f"{bad}:1:19: nodeSelector[0]: 'a in b' is not a label selector" in result.stderr


def test_the_command_reports_a_file_it_cannot_read(tmp_path: Path) -> None:
    result = runner.invoke(app, ["migrate", "nidhogg", str(tmp_path / "missing.json")])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "cannot read file" in result.stderr


def test_the_command_takes_for_and_every_node(tmp_path: Path) -> None:
    file = tmp_path / "nidhogg.yaml"
    file.write_text("daemonsets: [{name: kiam, namespace: kube-system}]\n")
    result = runner.invoke(app, ["migrate", "nidhogg", "--for", "2m", "--every-node", str(file)])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("# Made by `nodegate migrate nidhogg --for 2m --every-node`")
    [rule] = parse_rules(result.stdout).node_agents
    assert (rule.match, rule.hold.total_seconds()) == (None, 120)


def test_the_chart_default_example_converts_to_the_shipped_rules_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)
    daemon_sets = "examples/migrate/nidhogg-daemon-sets.yaml"
    command = ["migrate", "nidhogg", "--daemon-sets", daemon_sets]
    result = runner.invoke(app, [*command, "examples/migrate/nidhogg-chart.json"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (EXAMPLES / "nidhogg-chart.yaml").read_text()


def test_the_command_takes_ready_annotation(tmp_path: Path) -> None:
    file = tmp_path / "nidhogg.yaml"
    file.write_text(config())
    result = runner.invoke(app, ["migrate", "nidhogg", "--ready-annotation", "uswitch", str(file)])
    assert result.exit_code == 0, result.stderr
    assert "--ready-annotation uswitch`" in result.stdout
    [rule] = parse_rules(result.stdout).node_agents
    assert rule.first_ready_annotation == "nidhogg.uswitch.com/first-time-ready"


def test_the_command_reports_a_daemon_sets_file_it_cannot_read(tmp_path: Path) -> None:
    file = tmp_path / "nidhogg.json"
    file.write_text(CHART_DEFAULT)
    missing = str(tmp_path / "ds.yaml")
    result = runner.invoke(app, ["migrate", "nidhogg", "--daemon-sets", missing, str(file)])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert missing in result.stderr
    assert "cannot read file" in result.stderr


def test_the_rules_say_how_nodes_are_born_with_the_taint() -> None:
    conversion = converted(README_JSON)
    assert conversion.webhook == {"failurePolicy": "Ignore"}
    assert "Each DaemonSet must tolerate its own taint" in " ".join(conversion.notes)
