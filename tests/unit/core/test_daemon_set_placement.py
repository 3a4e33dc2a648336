"""Whether the DaemonSet controller would create a DaemonSet's pod on a node, and why not
(`daemon_set_placement`): each of its rules by example, then the whole predicate against a
reference transcribed from Kubernetes v1.36.3 over random raw objects (hypothesis)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodegate.core.rules.node import NodeTaint
from nodegate.core.views.daemon_set_placement import (
    Placement,
    Toleration,
    placement_of,
    refusal,
    tolerates,
)

Spec = dict[str, Any]


def refused(
    spec: Spec,
    *,
    node: str = "node-a",
    labels: dict[str, str] | None = None,
    taints: Iterable[NodeTaint] = (),
    ignoring: frozenset[tuple[str, str]] = frozenset(),
    comparison_operators: bool = False,
) -> str | None:
    return refusal(
        placement_of(spec),
        node,
        labels or {},
        tuple(taints),
        ignoring,
        comparison_operators=comparison_operators,
    )


def required(*terms: dict[str, Any]) -> Spec:
    """A template spec whose required node affinity has these terms."""
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
            }
        }
    }


def expression(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}


def name_field(operator: str, *values: str) -> dict[str, Any]:
    return {"matchFields": [{"key": "metadata.name", "operator": operator, "values": list(values)}]}


def tolerating(*tolerations: dict[str, str], host_network: bool = False) -> Spec:
    return {"tolerations": list(tolerations), "hostNetwork": host_network}


GPU = NodeTaint("example.com/gpu", "NoSchedule", "present")


# --- the template's nodeName --------------------------------------------------------------------


def test_a_template_naming_another_node_is_refused_there() -> None:
    assert refused({"nodeName": "node-b"}) == "its pod template names node node-b"


def test_a_template_naming_this_node_is_placed_here() -> None:
    assert refused({"nodeName": "node-a"}) is None


# --- nodeSelector -------------------------------------------------------------------------------


def test_without_a_node_selector_or_affinity_the_pod_goes_to_any_node() -> None:
    assert refused({}) is None


def test_the_node_selector_wants_every_one_of_its_labels() -> None:
    spec = {"nodeSelector": {"kubernetes.io/os": "windows", "role": "worker"}}
    reason = refused(spec, labels={"kubernetes.io/os": "linux", "role": "worker"})
    assert reason == "its nodeSelector wants kubernetes.io/os=windows"


def test_a_node_selector_is_met_by_equal_labels_whatever_else_the_node_carries() -> None:
    spec = {"nodeSelector": {"role": "worker"}}
    assert refused(spec, labels={"role": "worker", "zone": "a"}) is None


def test_a_node_selector_for_an_empty_value_wants_the_label_present() -> None:
    spec = {"nodeSelector": {"role": ""}}
    assert refused(spec) == "its nodeSelector wants role="
    assert refused(spec, labels={"role": ""}) is None


def test_the_node_selector_and_the_required_affinity_must_both_match() -> None:
    spec = {"nodeSelector": {"role": "worker"}, **required(expression("zone", "Exists"))}
    assert refused(spec, labels={"role": "worker"}) == "its required node affinity wants label zone"
    assert refused(spec, labels={"zone": "a"}) == "its nodeSelector wants role=worker"


# --- required node affinity: terms --------------------------------------------------------------


def test_a_required_affinity_without_terms_matches_no_node() -> None:
    reason = refused(required())
    assert reason == "its required node affinity has no term that is not empty, so no node matches"


def test_an_empty_term_matches_no_node() -> None:
    assert refused(required({})) is not None


def test_an_empty_term_does_not_stop_another_term_from_matching() -> None:
    assert refused(required({}, expression("zone", "Exists")), labels={"zone": "a"}) is None


def test_any_one_term_matching_places_the_pod() -> None:
    spec = required(expression("zone", "In", "a"), expression("zone", "In", "b"))
    assert refused(spec, labels={"zone": "b"}) is None
    assert (
        refused(spec, labels={"zone": "c"}) == "none of its 2 required node-affinity terms matches"
    )


def test_every_expression_of_a_term_must_match() -> None:
    both = {
        "matchExpressions": [
            {"key": "zone", "operator": "Exists"},
            {"key": "gpu", "operator": "In", "values": ["a", "b"]},
        ]
    }
    assert refused(required(both), labels={"zone": "a"}) == (
        "its required node affinity wants gpu in (a, b)"
    )
    assert refused(required(both), labels={"zone": "a", "gpu": "b"}) is None


@pytest.mark.parametrize(
    ("operator", "values", "labels", "placed"),
    [
        ("In", ["a", "b"], {"k": "b"}, True),
        ("In", ["a", "b"], {"k": "c"}, False),
        ("In", ["a"], {}, False),
        ("NotIn", ["a", "b"], {"k": "c"}, True),
        ("NotIn", ["a", "b"], {"k": "a"}, False),
        ("NotIn", ["a"], {}, True),
        ("Exists", [], {"k": ""}, True),
        ("Exists", [], {}, False),
        ("DoesNotExist", [], {}, True),
        ("DoesNotExist", [], {"k": "a"}, False),
        ("Gt", ["5"], {"k": "6"}, True),
        ("Gt", ["5"], {"k": "5"}, False),
        ("Gt", ["5"], {"k": "007"}, True),
        ("Gt", ["5"], {"k": "seven"}, False),
        ("Gt", ["5"], {}, False),
        ("Lt", ["5"], {"k": "4"}, True),
        ("Lt", ["5"], {"k": "5"}, False),
        ("Lt", ["5"], {"k": "-10"}, True),
    ],
    ids=[
        "in-one-of-the-values",
        "in-another-value",
        "in-label-absent",
        "notin-another-value",
        "notin-one-of-the-values",
        "notin-label-absent",
        "exists-empty-value",
        "exists-label-absent",
        "doesnotexist-label-absent",
        "doesnotexist-label-present",
        "gt-greater",
        "gt-equal",
        "gt-leading-zero-reads-as-decimal",
        "gt-label-not-an-integer",
        "gt-label-absent",
        "lt-less",
        "lt-equal",
        "lt-negative-label",
    ],
)
def test_each_operator_on_labels(
    operator: str, values: list[str], labels: dict[str, str], placed: bool
) -> None:
    assert (refused(required(expression("k", operator, *values)), labels=labels) is None) is placed


@pytest.mark.parametrize(
    "term",
    [
        expression("k", "Equals", "a"),
        expression("k", "In"),
        expression("k", "Exists", "a"),
        expression("k", "Gt", "five"),
        expression("k", "Lt", "1", "2"),
        expression("bad key", "Exists"),
        expression("k", "In", "not a label value"),
        name_field("In", "node-a", "node-b"),
        name_field("Exists"),
    ],
    ids=[
        "unknown-operator",
        "in-without-values",
        "exists-with-values",
        "gt-not-an-integer",
        "lt-two-values",
        "invalid-key",
        "invalid-value",
        "field-two-values",
        "field-exists",
    ],
)
def test_a_term_that_does_not_parse_matches_no_node(term: dict[str, Any]) -> None:
    labels = {"k": "a"}
    assert refused(required(term), labels=labels, node="node-a") is not None
    assert refused(required(term, expression("k", "Exists")), labels=labels) is None


def test_the_refusal_says_why_a_lone_term_does_not_parse() -> None:
    assert refused(required(expression("k", "Gt", "five"))) == (
        "its required node-affinity term does not parse (Gt needs one integer value), "
        "so no node matches"
    )


# --- required node affinity: matchFields --------------------------------------------------------


def test_match_fields_in_selects_the_node_by_name() -> None:
    assert refused(required(name_field("In", "node-a")), node="node-a") is None
    assert refused(required(name_field("In", "node-a")), node="node-b") == (
        "its required node affinity wants metadata.name in (node-a)"
    )


def test_match_fields_not_in_keeps_the_pod_off_the_named_node() -> None:
    assert refused(required(name_field("NotIn", "node-a")), node="node-a") is not None
    assert refused(required(name_field("NotIn", "node-a")), node="node-b") is None


def test_fields_and_expressions_of_one_term_must_both_match() -> None:
    term = {**name_field("In", "node-a"), **expression("zone", "Exists")}
    assert refused(required(term), node="node-a") is not None
    assert refused(required(term), node="node-a", labels={"zone": "a"}) is None
    assert refused(required(term), node="node-b", labels={"zone": "a"}) is not None


def test_a_field_other_than_the_name_reads_as_empty() -> None:
    """Only metadata.name is a node field; the API refuses others, a field selector reads ''."""
    uid = {"matchFields": [{"key": "metadata.uid", "operator": "NotIn", "values": ["x"]}]}
    assert refused(required(uid)) is None


# --- taints and tolerations ---------------------------------------------------------------------


def test_an_untolerated_no_schedule_taint_keeps_the_pod_away() -> None:
    assert (
        refused({}, taints=[GPU]) == "it does not tolerate taint example.com/gpu=present:NoSchedule"
    )


def test_an_untolerated_no_execute_taint_keeps_the_pod_away() -> None:
    taint = NodeTaint("example.com/drain", "NoExecute")
    assert refused({}, taints=[taint]) == "it does not tolerate taint example.com/drain:NoExecute"


def test_a_prefer_no_schedule_taint_never_keeps_the_pod_away() -> None:
    assert refused({}, taints=[NodeTaint("example.com/gpu", "PreferNoSchedule")]) is None


def test_an_ignored_taint_does_not_keep_the_pod_away() -> None:
    assert refused({}, taints=[GPU], ignoring=frozenset({GPU.identity})) is None


def test_a_taint_is_ignored_by_key_and_effect() -> None:
    other_effect = frozenset({("example.com/gpu", "NoExecute")})
    assert refused({}, taints=[GPU], ignoring=other_effect) is not None


def test_an_equal_toleration_wants_the_same_value() -> None:
    toleration = {"key": "example.com/gpu", "operator": "Equal", "value": "present"}
    assert refused(tolerating(toleration), taints=[GPU]) is None
    other = NodeTaint("example.com/gpu", "NoSchedule", "absent")
    assert refused(tolerating(toleration), taints=[other]) is not None


def test_a_toleration_without_operator_is_an_equal_one() -> None:
    toleration = {"key": "example.com/gpu", "value": "present"}
    assert refused(tolerating(toleration), taints=[GPU]) is None
    assert refused(tolerating({"key": "example.com/gpu"}), taints=[GPU]) is not None


def test_an_exists_toleration_tolerates_any_value_of_its_key() -> None:
    toleration = {"key": "example.com/gpu", "operator": "Exists"}
    assert refused(tolerating(toleration), taints=[GPU]) is None
    assert refused(tolerating(toleration), taints=[NodeTaint("other", "NoSchedule")]) is not None


def test_an_exists_toleration_without_key_tolerates_every_taint() -> None:
    taints = [GPU, NodeTaint("example.com/drain", "NoExecute", "now")]
    assert refused(tolerating({"operator": "Exists"}), taints=taints) is None


def test_a_toleration_without_effect_tolerates_every_effect() -> None:
    toleration = {"key": "example.com/gpu", "operator": "Exists"}
    taints = [GPU, NodeTaint("example.com/gpu", "NoExecute")]
    assert refused(tolerating(toleration), taints=taints) is None


def test_a_toleration_of_another_effect_does_not_tolerate() -> None:
    toleration = {"key": "example.com/gpu", "operator": "Exists", "effect": "NoExecute"}
    assert refused(tolerating(toleration), taints=[GPU]) is not None


def test_an_unknown_toleration_operator_tolerates_nothing() -> None:
    toleration = {"key": "example.com/gpu", "operator": "Matches", "value": "present"}
    assert refused(tolerating(toleration), taints=[GPU]) is not None


@pytest.mark.parametrize(
    ("key", "effect"),
    [
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ],
)
def test_the_controller_makes_every_daemon_pod_tolerate(key: str, effect: str) -> None:
    assert refused({}, taints=[NodeTaint(key, effect)]) is None


def test_a_new_nodes_not_ready_no_schedule_taint_keeps_daemon_pods_away() -> None:
    """The controller adds not-ready for NoExecute only, not the NoSchedule a node is born with."""
    assert refused({}, taints=[NodeTaint("node.kubernetes.io/not-ready", "NoSchedule")]) == (
        "it does not tolerate taint node.kubernetes.io/not-ready:NoSchedule"
    )


def test_network_unavailable_is_tolerated_by_host_network_pods_only() -> None:
    taint = NodeTaint("node.kubernetes.io/network-unavailable", "NoSchedule")
    assert refused(tolerating(host_network=True), taints=[taint]) is None
    assert refused(tolerating(host_network=False), taints=[taint]) is not None


def test_a_toleration_the_template_has_is_not_added_again() -> None:
    own = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
    tolerations = placement_of(tolerating(own)).tolerations
    assert len(tolerations) == len(set(tolerations))


@pytest.mark.parametrize(
    ("operator", "limit", "value", "tolerated"),
    [
        ("Lt", "10", "9", True),
        ("Lt", "10", "10", False),
        ("Gt", "10", "11", True),
        ("Gt", "10", "-3", False),
        ("Gt", "10", "011", False),
        ("Gt", "+1", "2", False),
        ("Lt", "10", "", False),
    ],
    ids=[
        "lt-less",
        "lt-equal",
        "gt-greater",
        "gt-negative",
        "leading-zero-is-not-an-integer",
        "plus-sign-is-not-an-integer",
        "empty-is-not-an-integer",
    ],
)
def test_lt_and_gt_tolerations_compare_integers_under_the_feature_gate(
    operator: str, limit: str, value: str, tolerated: bool
) -> None:
    toleration = {"key": "example.com/slots", "operator": operator, "value": limit}
    taint = NodeTaint("example.com/slots", "NoSchedule", value)
    reason = refused(tolerating(toleration), taints=[taint], comparison_operators=True)
    assert (reason is None) is tolerated


def test_lt_and_gt_tolerations_tolerate_nothing_without_the_feature_gate() -> None:
    toleration = {"key": "example.com/slots", "operator": "Lt", "value": "10"}
    taint = NodeTaint("example.com/slots", "NoSchedule", "9")
    assert refused(tolerating(toleration), taints=[taint]) is not None


def test_tolerates_answers_for_one_taint() -> None:
    placement = placement_of(tolerating({"key": "example.com/gpu", "operator": "Exists"}))
    assert tolerates(placement, NodeTaint("example.com/gpu", "NoSchedule", "present"))
    assert not tolerates(placement, NodeTaint("example.com/other", "NoSchedule"))


# --- reading the template -----------------------------------------------------------------------


def test_null_fields_read_as_absent() -> None:
    spec = {"nodeSelector": None, "affinity": None, "tolerations": None, "nodeName": None}
    assert refused(spec) is None


def test_a_null_required_affinity_is_no_requirement() -> None:
    spec = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": None}}}
    assert placement_of(spec).terms is None


def test_node_taints_as_the_api_returns_them_are_read() -> None:
    taint = NodeTaint.from_k8s(
        {"key": "example.com/gpu", "value": "present", "effect": "NoSchedule"}
    )
    assert refused({}, taints=[taint]) is not None


# --- properties: against a reference transcribed from Kubernetes v1.36.3 -------------------------
#
# Small alphabets, so that keys, values and names collide; the reference knows which of them
# are valid and which read as integers by table, instead of by code of its own.

KEYS = ["a", "b", "x.io/c"]
INVALID_KEY = "bad key"
VALUES = ["1", "2", "10", "007", "-1", "x", ""]
VALID_LABEL_VALUES = {"1", "2", "10", "007", "x", ""}  # '-1' does not start alphanumeric
GO_INTS = {"1": 1, "2": 2, "10": 10, "007": 7, "-1": -1}  # strconv.ParseInt
CANONICAL_INTS = {"1": 1, "2": 2, "10": 10, "-1": -1}  # content.IsDecimalInteger, then ParseInt
NODES = ["n1", "n2"]
LABEL_OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
TAINT_KEYS = [
    "a",
    "b",
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unschedulable",
    "node.kubernetes.io/network-unavailable",
]
EFFECTS = ["NoSchedule", "NoExecute", "PreferNoSchedule"]
ADDED = [
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
]


def _absent_or(value: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), value)


@st.composite
def requirements(draw: st.DrawFn) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "key": draw(st.sampled_from([*KEYS, INVALID_KEY])),
        "operator": draw(st.sampled_from([*LABEL_OPERATORS, "Eq"])),
    }
    values: list[str] = draw(st.lists(st.sampled_from(VALUES), max_size=2))
    listed = bool(values) or draw(st.booleans())  # no values: an empty list, or none at all
    if listed:
        raw["values"] = values
    return raw


@st.composite
def field_requirements(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "key": draw(st.sampled_from(["metadata.name", "metadata.name", "metadata.uid"])),
        "operator": draw(st.sampled_from(["In", "NotIn", "Exists"])),
        "values": draw(st.lists(st.sampled_from([*NODES, ""]), max_size=2)),
    }


@st.composite
def terms(draw: st.DrawFn) -> dict[str, Any]:
    term: dict[str, Any] = {}
    if expressions := draw(st.lists(requirements(), max_size=2)):
        term["matchExpressions"] = expressions
    if fields := draw(st.lists(field_requirements(), max_size=1)):
        term["matchFields"] = fields
    return term


@st.composite
def tolerations(draw: st.DrawFn) -> dict[str, Any]:
    raw = {
        "key": draw(st.sampled_from(["", *TAINT_KEYS])),
        "operator": draw(st.sampled_from(["", "Equal", "Exists", "Lt", "Gt", "Near"])),
        "value": draw(st.sampled_from(VALUES)),
        "effect": draw(st.sampled_from(["", *EFFECTS])),
    }
    return {k: v for k, v in raw.items() if v or draw(st.booleans())}


@st.composite
def template_specs(draw: st.DrawFn, only: str | None = None) -> Spec:
    """Raw template specs; `only` 'affinity' or 'tolerations' leaves out every other part, so
    that part decides every example."""
    spec: Spec = {"hostNetwork": draw(st.booleans())}
    if only is None and draw(st.booleans()):
        spec["nodeSelector"] = draw(
            st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2)
        )
    if only == "affinity" or (only is None and draw(st.booleans())):
        spec |= required(*draw(st.lists(terms(), max_size=3)))
    if only in (None, "tolerations"):
        spec["tolerations"] = draw(_absent_or(st.lists(tolerations(), max_size=4)))
    if only is None:
        spec["nodeName"] = draw(st.sampled_from([None, None, "", "", *NODES]))
    return spec


@st.composite
def nodes(draw: st.DrawFn, tainted: bool = True) -> tuple[str, dict[str, str], list[NodeTaint]]:
    labels = draw(st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3))
    taints = draw(
        st.lists(
            st.builds(
                NodeTaint,
                key=st.sampled_from(TAINT_KEYS),
                effect=st.sampled_from(EFFECTS),
                value=st.sampled_from(VALUES),
            ),
            max_size=3 if tainted else 0,
        )
    )
    return draw(st.sampled_from(NODES)), labels, taints


def _reference_expression(raw: dict[str, Any], labels: dict[str, str]) -> bool | None:
    """labels.NewRequirement then Requirement.Matches; None: it does not parse."""
    key, operator, values = raw["key"], raw["operator"], raw.get("values") or []
    if key == INVALID_KEY or any(v not in VALID_LABEL_VALUES for v in values):
        return None
    if operator in ("In", "NotIn") and not values:
        return None
    if operator in ("Exists", "DoesNotExist") and values:
        return None
    if operator in ("Gt", "Lt") and (len(values) != 1 or values[0] not in GO_INTS):
        return None
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    if operator in ("Gt", "Lt"):
        if labels.get(key) not in GO_INTS:
            return False
        have, limit = GO_INTS[labels[key]], GO_INTS[values[0]]
        return have > limit if operator == "Gt" else have < limit
    return None


def _reference_field(raw: dict[str, Any], node: str) -> bool | None:
    """fields.OneTerm(Not)EqualSelector over {metadata.name: node}; None: it does not parse."""
    if raw["operator"] not in ("In", "NotIn") or len(raw["values"]) != 1:
        return None
    equal = ({"metadata.name": node}.get(raw["key"], "")) == raw["values"][0]
    return equal if raw["operator"] == "In" else not equal


def _reference_term(term: dict[str, Any], node: str, labels: dict[str, str]) -> bool:
    """nodeaffinity's nodeSelectorTerm: empty or unparsable matches nothing; else all of it."""
    expressions = [_reference_expression(r, labels) for r in term.get("matchExpressions", [])]
    fields = [_reference_field(r, node) for r in term.get("matchFields", [])]
    results = expressions + fields
    if not results or None in results:
        return False
    return all(results)


def _reference_tolerates(raw: dict[str, Any], taint: NodeTaint, comparisons: bool) -> bool:
    """k8s.io/api core/v1 Toleration.ToleratesTaint."""
    if raw.get("effect") and raw["effect"] != taint.effect:
        return False
    if raw.get("key") and raw["key"] != taint.key:
        return False
    operator, value = raw.get("operator", ""), raw.get("value", "")
    if operator in ("", "Equal"):
        return bool(value == taint.value)
    if operator == "Exists":
        return True
    if operator in ("Lt", "Gt") and comparisons:
        if value not in CANONICAL_INTS or taint.value not in CANONICAL_INTS:
            return False
        limit, have = CANONICAL_INTS[value], CANONICAL_INTS[taint.value]
        return have < limit if operator == "Lt" else have > limit
    return False


def reference(
    spec: Spec, node: str, labels: dict[str, str], taints: list[NodeTaint], comparisons: bool
) -> bool:
    """NodeShouldRunDaemonPod's shouldRun, over a raw template spec."""
    if spec.get("nodeName") and spec["nodeName"] != node:
        return False
    for key, value in (spec.get("nodeSelector") or {}).items():
        if key not in labels or labels[key] != value:
            return False
    affinity = spec.get("affinity")
    if affinity is not None:
        terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        if not any(_reference_term(t, node, labels) for t in terms["nodeSelectorTerms"]):
            return False
    added = [{"key": k, "operator": "Exists", "effect": e} for k, e in ADDED]
    if spec.get("hostNetwork"):
        added.append(
            {
                "key": "node.kubernetes.io/network-unavailable",
                "operator": "Exists",
                "effect": "NoSchedule",
            }
        )
    everything = (spec.get("tolerations") or []) + added
    return all(
        any(_reference_tolerates(t, taint, comparisons) for t in everything)
        for taint in taints
        if taint.effect in ("NoSchedule", "NoExecute")
    )


PROPERTY = settings(max_examples=100, deadline=None)


@settings(max_examples=300, deadline=None)
@given(template_specs(), nodes(), st.booleans())
def test_the_predicate_agrees_with_the_kubernetes_rules(
    spec: Spec, node: tuple[str, dict[str, str], list[NodeTaint]], comparisons: bool
) -> None:
    name, labels, taints = node
    answer = refusal(placement_of(spec), name, labels, taints, comparison_operators=comparisons)
    assert (answer is None) is reference(spec, name, labels, taints, comparisons), answer


@settings(max_examples=300, deadline=None)
@given(template_specs(only="affinity"), nodes(tainted=False))
def test_node_affinity_agrees_with_the_kubernetes_rules(
    spec: Spec, node: tuple[str, dict[str, str], list[NodeTaint]]
) -> None:
    name, labels, taints = node
    answer = refusal(placement_of(spec), name, labels, taints)
    assert (answer is None) is reference(spec, name, labels, taints, False), answer


@settings(max_examples=300, deadline=None)
@given(template_specs(only="tolerations"), nodes(), st.booleans())
def test_tolerations_agree_with_the_kubernetes_rules(
    spec: Spec, node: tuple[str, dict[str, str], list[NodeTaint]], comparisons: bool
) -> None:
    name, labels, taints = node
    answer = refusal(placement_of(spec), name, labels, taints, comparison_operators=comparisons)
    assert (answer is None) is reference(spec, name, labels, taints, comparisons), answer


@PROPERTY
@given(template_specs(), nodes(), st.data())
def test_ignoring_a_taint_answers_as_if_the_node_had_none_of_that_key_and_effect(
    spec: Spec, node: tuple[str, dict[str, str], list[NodeTaint]], data: st.DataObject
) -> None:
    name, labels, taints = node
    ignoring = frozenset(
        data.draw(st.sets(st.sampled_from([t.identity for t in taints] or [("a", "NoSchedule")])))
    )
    kept = [t for t in taints if t.identity not in ignoring]
    answer = refusal(placement_of(spec), name, labels, taints, ignoring)
    assert (answer is None) is reference(spec, name, labels, kept, False)


@PROPERTY
@given(template_specs(), nodes(), tolerations())
def test_adding_a_toleration_never_turns_a_placement_into_a_refusal(
    spec: Spec, node: tuple[str, dict[str, str], list[NodeTaint]], toleration: dict[str, Any]
) -> None:
    name, labels, taints = node
    if refusal(placement_of(spec), name, labels, taints) is None:
        more = {**spec, "tolerations": [*(spec.get("tolerations") or []), toleration]}
        assert refusal(placement_of(more), name, labels, taints) is None


@PROPERTY
@given(template_specs(), nodes(), st.data())
def test_removing_a_taint_never_turns_a_placement_into_a_refusal(
    spec: Spec, node: tuple[str, dict[str, str], list[NodeTaint]], data: st.DataObject
) -> None:
    name, labels, taints = node
    if taints and refusal(placement_of(spec), name, labels, taints) is None:
        gone = data.draw(st.integers(0, len(taints) - 1))
        fewer = taints[:gone] + taints[gone + 1 :]
        assert refusal(placement_of(spec), name, labels, fewer) is None


@PROPERTY
@given(template_specs(), nodes(), st.data())
def test_ignoring_a_taint_never_turns_a_placement_into_a_refusal(
    spec: Spec, node: tuple[str, dict[str, str], list[NodeTaint]], data: st.DataObject
) -> None:
    name, labels, taints = node
    if taints and refusal(placement_of(spec), name, labels, taints) is None:
        ignored = data.draw(st.sampled_from(taints)).identity
        assert refusal(placement_of(spec), name, labels, taints, frozenset({ignored})) is None


@PROPERTY
@given(st.lists(tolerations(), max_size=3), st.booleans(), nodes())
def test_a_lone_taint_refuses_exactly_when_it_is_not_tolerated(
    raw: list[dict[str, Any]], host_network: bool, node: tuple[str, dict[str, str], list[NodeTaint]]
) -> None:
    name, labels, taints = node
    placement: Placement = placement_of({"tolerations": raw, "hostNetwork": host_network})
    for taint in taints:
        answer = refusal(placement, name, labels, [taint])
        blocking = taint.effect in ("NoSchedule", "NoExecute")
        tolerated = tolerates(placement, taint)
        assert (answer is None) is (not blocking or tolerated)


def test_a_placement_built_by_hand_has_only_the_tolerations_it_is_given() -> None:
    placement = Placement(tolerations=(Toleration(key="a", operator="Exists"),))
    cordoned = NodeTaint("node.kubernetes.io/unschedulable", "NoSchedule")
    assert refusal(placement, "n1", {}, [cordoned]) is not None
