"""Whether the DaemonSet controller would create a DaemonSet's pod on a node, and if not, why. Pure.

A rule that waits for "every DaemonSet whose pod should run on this node" (node agents, as
Vigil does) must find those DaemonSets exactly as the controller that creates their pods does,
or the node waits for a pod that never comes, or stops waiting too early. So this mirrors
Kubernetes v1.36.3 (the version of the local control plane the e2e tier compares it with):

* `pkg/controller/daemon/daemon_controller.go`: `NodeShouldRunDaemonPod` and `predicates`; a
  `spec.template.spec.nodeName` other than the node's refuses it, then the required node affinity,
  then the NoSchedule and NoExecute taints (PreferNoSchedule never keeps a pod away);
* `pkg/controller/daemon/util/daemonset_util.go`: `AddOrUpdateDaemonPodTolerations`, the
  tolerations the controller adds to every daemon pod;
* `k8s.io/component-helpers/scheduling/corev1/nodeaffinity`: `GetRequiredNodeAffinity(pod).Match`
  (the nodeSelector, all of it, and the required terms, any of them; an empty term, or one that
  does not parse, matches nothing), over `k8s.io/apimachinery` labels and fields selectors;
* `k8s.io/component-helpers/scheduling/corev1`: `FindMatchingUntoleratedTaint`, and
  `k8s.io/api/core/v1/toleration.go`: `ToleratesTaint`.

The controller answers two questions. `shouldRun`: it creates a pod on the node (every
NoSchedule and NoExecute taint tolerated). `shouldContinueRunning`: it keeps a pod already
there (only the NoExecute taints must be tolerated: a later NoSchedule taint does not evict).
This module answers the first: a node a rule holds back gets its agents' pods created, and a
pod the controller would not create if it were deleted is not worth waiting for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from nodegate.core.rules.model import Taint
from nodegate.core.rules.node import NodeTaint
from nodegate.core.text.k8s_names import label_value_problem, qualified_name_problem
from nodegate.core.views.raw import RawObject

NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
KEEPS_PODS_AWAY = frozenset({NO_SCHEDULE, NO_EXECUTE})
"""The taint effects the controller checks before it creates a daemon pod."""

NODE_NAME_FIELD = "metadata.name"
"""The one node field a matchFields requirement can name."""


@dataclass(frozen=True)
class Requirement:
    """One matchExpressions (on labels) or matchFields (on the node's name) entry."""

    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class Term:
    """One required nodeSelectorTerm: all its expressions and all its fields must match."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()


@dataclass(frozen=True)
class Toleration:
    key: str = ""
    operator: str = ""
    """'' means Equal."""
    value: str = ""
    effect: str = ""
    """'' tolerates every effect."""


def _exists(key: str, effect: str) -> Toleration:
    return Toleration(key=key, operator="Exists", effect=effect)


DAEMON_TOLERATIONS = (
    _exists("node.kubernetes.io/not-ready", NO_EXECUTE),
    _exists("node.kubernetes.io/unreachable", NO_EXECUTE),
    _exists("node.kubernetes.io/disk-pressure", NO_SCHEDULE),
    _exists("node.kubernetes.io/memory-pressure", NO_SCHEDULE),
    _exists("node.kubernetes.io/pid-pressure", NO_SCHEDULE),
    _exists("node.kubernetes.io/unschedulable", NO_SCHEDULE),
)
"""What the DaemonSet controller adds to every daemon pod (`AddOrUpdateDaemonPodTolerations`)."""
HOST_NETWORK_TOLERATION = _exists("node.kubernetes.io/network-unavailable", NO_SCHEDULE)
"""... and to a daemon pod on the host's network."""


@dataclass(frozen=True)
class Placement:
    """What of a DaemonSet's pod template decides where its pods go, and nothing else (one is
    held per DaemonSet)."""

    node_selector: Mapping[str, str] = field(default_factory=dict)
    terms: tuple[Term, ...] | None = None
    """The required node affinity's terms; None: none required (any node); (): no node."""
    tolerations: tuple[Toleration, ...] = ()
    """The template's, and those the DaemonSet controller adds (`placement_of`)."""
    node_name: str = ""
    """The template's `nodeName`: its pods go to that node only ('' for any)."""


def placement_of(template_spec: RawObject) -> Placement:
    """The placement of a DaemonSet's `spec.template.spec`, as the API returns it."""
    affinity = (template_spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    terms = (
        None
        if required is None
        else tuple(_term(term or {}) for term in required.get("nodeSelectorTerms") or ())
    )
    tolerations = tuple(_toleration(raw or {}) for raw in template_spec.get("tolerations") or ())
    added = DAEMON_TOLERATIONS + (
        (HOST_NETWORK_TOLERATION,) if template_spec.get("hostNetwork") else ()
    )
    return Placement(
        node_selector={
            str(key): _text(value)
            for key, value in (template_spec.get("nodeSelector") or {}).items()
        },
        terms=terms,
        # Added only when absent: the controller replaces an equal one, which tolerates the same.
        tolerations=tolerations + tuple(t for t in added if t not in tolerations),
        node_name=_text(template_spec.get("nodeName")),
    )


def refusal(
    placement: Placement,
    node_name: str,
    labels: Mapping[str, str],
    taints: Iterable[NodeTaint],
    ignoring: frozenset[tuple[str, str]] = frozenset(),
    *,
    comparison_operators: bool = False,
) -> str | None:
    """None when the DaemonSet controller would create this placement's pod on the node; else
    why not, in words, for a person. `ignoring` names (key, effect) taints to leave out: a
    rule's own taint, which stays on the node until the very pods it waits for are Ready.

    `comparison_operators`: whether the cluster runs with the TaintTolerationComparisonOperators
    feature gate (alpha, off by default in v1.36), under which Lt and Gt tolerations compare
    integer taint values; without it they tolerate nothing.
    """
    if placement.node_name and placement.node_name != node_name:
        return f"its pod template names node {placement.node_name}"
    for key, wanted in sorted(placement.node_selector.items()):
        if labels.get(key) != wanted:
            return f"its nodeSelector wants {key}={wanted}"
    if placement.terms is not None and not any(
        _term_matches(term, node_name, labels) for term in placement.terms
    ):
        return _affinity_refusal(placement.terms, node_name, labels)
    for taint in taints:
        if taint.effect not in KEEPS_PODS_AWAY or (taint.key, taint.effect) in ignoring:
            continue
        if not tolerates(placement, taint, comparison_operators=comparison_operators):
            return f"it does not tolerate taint {taint}"
    return None


def tolerates(
    placement: Placement, taint: NodeTaint | Taint, *, comparison_operators: bool = False
) -> bool:
    """Whether one of the placement's tolerations tolerates this taint (`ToleratesTaint`)."""
    return any(_tolerates(t, taint, comparison_operators) for t in placement.tolerations)


# --- parsing -------------------------------------------------------------------------------------


def _text(value: object) -> str:
    """A string field as Go reads it: null is ''."""
    return "" if value is None else str(value)


def _requirement(raw: RawObject) -> Requirement:
    return Requirement(
        key=_text(raw.get("key")),
        operator=_text(raw.get("operator")),
        values=tuple(_text(value) for value in raw.get("values") or ()),
    )


def _term(raw: RawObject) -> Term:
    return Term(
        expressions=tuple(_requirement(r or {}) for r in raw.get("matchExpressions") or ()),
        fields=tuple(_requirement(r or {}) for r in raw.get("matchFields") or ()),
    )


def _toleration(raw: RawObject) -> Toleration:
    return Toleration(
        key=_text(raw.get("key")),
        operator=_text(raw.get("operator")),
        value=_text(raw.get("value")),
        effect=_text(raw.get("effect")),
    )


# --- node affinity -------------------------------------------------------------------------------

_LABEL_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
_INT64 = (-(2**63), 2**63 - 1)
_GO_INT = re.compile(r"[+-]?[0-9]+")
"""What Go's `strconv.ParseInt(s, 10, 64)` reads (within int64)."""
_CANONICAL_INT = re.compile(r"0|-?[1-9][0-9]*")
"""apimachinery's `content.IsDecimalInteger`: no sign but '-', no leading zero."""


def _int64(text: str, pattern: re.Pattern[str]) -> int | None:
    if not pattern.fullmatch(text):
        return None
    number = int(text)
    return number if _INT64[0] <= number <= _INT64[1] else None


def _expression_problem(requirement: Requirement) -> str | None:
    """Why `labels.NewRequirement` refuses this expression (the term then matches nothing)."""
    operator, values = requirement.operator, requirement.values
    if operator not in _LABEL_OPERATORS:
        return f"{operator!r} is not a node selector operator"
    if problem := qualified_name_problem(requirement.key):
        return f"key {requirement.key!r}: {problem}"
    if operator in ("In", "NotIn") and not values:
        return f"{operator} needs values"
    if operator in ("Exists", "DoesNotExist") and values:
        return f"{operator} takes no values"
    if operator in ("Gt", "Lt") and (len(values) != 1 or _int64(values[0], _GO_INT) is None):
        return f"{operator} needs one integer value"
    for value in values:
        if problem := label_value_problem(value):
            return f"value {problem}"
    return None


def _field_problem(requirement: Requirement) -> str | None:
    """Why the field selector refuses this matchFields entry (the term then matches nothing)."""
    if requirement.operator not in ("In", "NotIn"):
        return f"{requirement.operator!r} is not a field selector operator"
    if len(requirement.values) != 1:
        return f"{requirement.operator} on a field needs exactly one value"
    return None


def _term_problem(term: Term) -> str | None:
    problems = [*map(_expression_problem, term.expressions), *map(_field_problem, term.fields)]
    return next((problem for problem in problems if problem), None)


def _expression_matches(requirement: Requirement, labels: Mapping[str, str]) -> bool:
    operator, key, values = requirement.operator, requirement.key, requirement.values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if key not in labels:
        return False
    if operator == "In":
        return labels[key] in values
    have, limit = _int64(labels[key], _GO_INT), _int64(values[0], _GO_INT)
    if have is None or limit is None:
        return False
    return have > limit if operator == "Gt" else have < limit


def _field_matches(requirement: Requirement, fields: Mapping[str, str]) -> bool:
    """A fields.Set reads '' for a field it does not have."""
    equal = fields.get(requirement.key, "") == requirement.values[0]
    return equal if requirement.operator == "In" else not equal


def _failing(term: Term, node_name: str, labels: Mapping[str, str]) -> Requirement | None:
    """The first requirement of a valid, non-empty term the node fails, or None."""
    failing = [r for r in term.expressions if not _expression_matches(r, labels)]
    if node_name:  # a node without a name has no fields to select on
        fields = {NODE_NAME_FIELD: node_name}
        failing += [r for r in term.fields if not _field_matches(r, fields)]
    return failing[0] if failing else None


def _term_matches(term: Term, node_name: str, labels: Mapping[str, str]) -> bool:
    empty = not term.expressions and not term.fields  # an empty term selects nothing
    return not empty and _term_problem(term) is None and _failing(term, node_name, labels) is None


def _affinity_refusal(terms: tuple[Term, ...], node_name: str, labels: Mapping[str, str]) -> str:
    usable = [term for term in terms if term.expressions or term.fields]
    if not usable:
        return "its required node affinity has no term that is not empty, so no node matches"
    if len(usable) > 1:
        return f"none of its {len(usable)} required node-affinity terms matches"
    [term] = usable
    if problem := _term_problem(term):
        return f"its required node-affinity term does not parse ({problem}), so no node matches"
    failed = _failing(term, node_name, labels)
    return f"its required node affinity wants {_wanted(failed)}" if failed else "no term matches"


def _wanted(requirement: Requirement) -> str:
    key, values = requirement.key, ", ".join(requirement.values)
    return {
        "In": f"{key} in ({values})",
        "NotIn": f"{key} not in ({values})",
        "Exists": f"label {key}",
        "DoesNotExist": f"no label {key}",
        "Gt": f"{key} > {values}",
        "Lt": f"{key} < {values}",
    }[requirement.operator]


# --- taints and tolerations ----------------------------------------------------------------------


def _tolerates(
    toleration: Toleration, taint: NodeTaint | Taint, comparison_operators: bool
) -> bool:
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    if toleration.operator == "Exists":
        return True
    if toleration.operator in ("Lt", "Gt") and comparison_operators:
        limit, have = _int64(toleration.value, _CANONICAL_INT), _int64(taint.value, _CANONICAL_INT)
        if limit is None or have is None:
            return False
        return have < limit if toleration.operator == "Lt" else have > limit
    return False
