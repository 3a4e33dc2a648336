"""The rules file, as typed, frozen objects.

This is the single definition of the `nodegate.dev/v1` NodeRules schema. The YAML on disk uses
camelCase keys (as Kubernetes manifests do); Python code uses the snake_case attributes.
Validation of one field lives next to the field; checks that span several rules live in
`crosschecks.py`, so they can run on whatever parts of a broken file did parse.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from datetime import timedelta
from functools import cache, cached_property
from typing import Annotated, Any, ClassVar, Literal, Self, get_args, get_origin

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PlainSerializer,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from nodegate.core.rules.autoscalers import (
    STARTUP_TAINT_PREFIX,
    STARTUP_TAINT_PREFIX_FLAG_SINCE,
    STATUS_TAINT_PREFIX,
    Version,
    format_version,
    is_ca_gate_key,
    parse_version,
)
from nodegate.core.rules.node_marks import gate_annotation_keys
from nodegate.core.rules.providers import Provider
from nodegate.core.rules.rule_kinds import ALL_NAMESPACES, NodeReads, RuleKind, TaintRule
from nodegate.core.text.durations import format_duration, parse_duration
from nodegate.core.text.frozen import Frozen, LabelKey, LabelValue, check_key
from nodegate.core.text.k8s_names import (
    CONDITION_RULE_TAINT_KEYS,
    CSI_DRIVER_PATTERN,
    DNS_LABEL_PATTERN,
    DNS_SUBDOMAIN_PATTERN,
    OUT_OF_SERVICE_TAINT,
    PLATFORM_LABEL_DOMAINS,
    in_nodegate_domain,
    label_owned_by_platform,
    taint_key_owner,
)

API_VERSION = "nodegate.dev/v1"
KIND = "NodeRules"
PLURAL = "noderules"
CRD_NAME = f"{PLURAL}.{API_VERSION.partition('/')[0]}"
"""The NodeRules CustomResourceDefinition: cluster admins annotate it to confirm a held update
of rules read from objects (an annotation on a NodeRules object is its team's to write)."""
POOL_LABEL = "nodegate.dev/pool"
"""Label every pool's nodes are born with (kubelet `--node-labels`): the pool a node *claims*.

A kubelet may change it on its own Node at any time, so it selects only what the node could do
to itself (its bootstrap, its gates); membership that grants something comes from
`TRUSTED_POOL_LABEL`."""
ZONE_LABEL = "topology.kubernetes.io/zone"
"""The zone a node reports (a kubelet may change it: the eviction budget's zone scope)."""
TRUSTED_POOL_LABEL = "node-restriction.kubernetes.io/nodegate-pool"
"""The pool a node was *registered in*: NodeRestriction forbids a kubelet to set or change it.

nodegate's Node admission webhook copies `POOL_LABEL` into it when the node is created (the
webhook runs after NodeRestriction, so the kubelet's registration is the provisioning's
bootstrap speaking); Karpenter NodePools and admins may set it too. `reconcilerLabels` are applied
on this label's evidence only (docs/reconciler.md, "Security")."""

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
TAINT_EFFECTS: tuple[str, ...] = get_args(TaintEffect)


def _check_effect(value: object) -> object:
    """Refuse unknown effects with the closest valid one, which a Literal error would not say."""
    if isinstance(value, str) and value not in TAINT_EFFECTS:
        by_case = [e for e in TAINT_EFFECTS if e.lower() == value.lower()]
        close = by_case or difflib.get_close_matches(value, TAINT_EFFECTS, n=1, cutoff=0.5)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise ValueError(
            f"'{value}' is not a taint effect: use one of {', '.join(TAINT_EFFECTS)}{hint}"
        )
    return value


def _check_regex(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as err:
        raise ValueError(f"'{pattern}' is not a valid regular expression: {err}") from err
    return pattern


def _parse_duration(value: object) -> object:
    if isinstance(value, timedelta):
        return value
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a duration; write it as a string such as '30s'")
    return parse_duration(value)


Effect = Annotated[TaintEffect, BeforeValidator(_check_effect)]
Regex = Annotated[str, AfterValidator(_check_regex)]
Duration = Annotated[
    timedelta,
    BeforeValidator(_parse_duration),
    PlainSerializer(format_duration, return_type=str),
    WithJsonSchema({"type": "string", "pattern": r"^(\d+(\.\d+)?(ms|s|m|h))+$"}),
]
RuleName = Annotated[
    str,
    Field(
        pattern=DNS_LABEL_PATTERN,
        max_length=63,
        description="Unique rule name (DNS label); the reason shown in events and metrics.",
    ),
]


class TaintRef(Frozen):
    """A taint another tool declares (e.g. a Karpenter NodePool nodegate does not render):
    described, not owned, so no ownership checks."""

    key: LabelKey
    value: LabelValue = ""
    effect: Effect

    @property
    def identity(self) -> tuple[str, str]:
        return (self.key, self.effect)


class Taint(TaintRef):
    """A node taint. Its identity for ownership is (key, effect), as for the API server."""

    # Keys other controllers own are refused here, except the few open to condition rules
    # (node.kubernetes.io/out-of-service): every other rule kind refuses those itself
    # (`_only_in_condition_rules`), where the error can say why.
    @model_validator(mode="after")
    def _not_owned_by_the_platform(self) -> Taint:
        if is_ca_gate_key(self.key):
            raise ValueError(
                f"'{self.key}' carries cluster-autoscaler's startup-taint prefix, which is for "
                "startupGates only (the autoscaler reads such a taint as temporary); give this "
                "rule a key in your own domain, e.g. 'example.com/dedicated'"
            )
        _refuse_reserved(self.key)
        return self

    # A taint is its key, value and effect, whichever rule it came from: a gate's GateTaint
    # equals the Taint kubelet reads back from the flags (pydantic compares classes too).
    def __eq__(self, other: object) -> bool:
        if isinstance(other, Taint):
            return (self.key, self.value, self.effect) == (other.key, other.value, other.effect)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.key, self.value, self.effect))

    def flag(self) -> str:
        """The `--register-with-taints` form: key=value:Effect, or key:Effect if no value."""
        return (
            f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"
        )


def _refuse_reserved(key: str) -> None:
    owner = taint_key_owner(key)
    if owner and key not in CONDITION_RULE_TAINT_KEYS:
        raise ValueError(
            f"taint key '{key}' belongs to {owner}; nodegate must not add or remove "
            "it. Use a key in your own domain, e.g. 'example.com/dedicated'"
        )


class GateTaint(Taint):
    """A startup gate's taint: it may carry cluster-autoscaler's startup-taint prefix.

    The prefix is in cluster-autoscaler's reserved domain, but a gate is the one rule that
    should use it: the autoscaler then knows the taint is temporary
    (nodegate.core.rules.autoscalers). The planner removes a reserved key only while a current rule
    names it, so lifting works.
    """

    @model_validator(mode="after")
    def _not_owned_by_the_platform(self) -> GateTaint:
        _check_gate_key(self.key)
        return self


def _check_gate_key(key: str) -> str:
    """What a gate's key may be: cluster-autoscaler's startup prefix yes, its status prefix
    and every other reserved key no."""
    if key.startswith(STATUS_TAINT_PREFIX):
        raise ValueError(
            f"'{key}' is a cluster-autoscaler status taint: it means 'ready but "
            "unusable', so the autoscaler counts the node as ready capacity and scales up "
            f"again; a gate is a startup taint: use '{STARTUP_TAINT_PREFIX}"
            f"{key.rpartition('/')[2]}'"
        )
    if not is_ca_gate_key(key):
        _refuse_reserved(key)
    return key


class MatchExpression(Frozen):
    """One label selector requirement, as in Kubernetes' matchExpressions."""

    key: LabelKey
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: tuple[LabelValue, ...] = ()

    @model_validator(mode="after")
    def _values_fit_operator(self) -> MatchExpression:
        needs_values = self.operator in ("In", "NotIn")
        if needs_values and not self.values:
            raise ValueError(f"operator {self.operator} needs a non-empty 'values' list")
        if not needs_values and self.values:
            raise ValueError(f"operator {self.operator} takes no 'values'; remove them")
        return self

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        inside = present and labels[self.key] in self.values
        return inside if self.operator == "In" else not inside


class LabelSelector(Frozen):
    """Which nodes a rule applies to: all `labels` equal and all `expressions` true."""

    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    expressions: tuple[MatchExpression, ...] = ()

    @model_validator(mode="after")
    def _not_empty(self) -> LabelSelector:
        if not self.labels and not self.expressions:
            raise ValueError(
                "an empty match would select every node; give 'labels' or 'expressions'"
            )
        return self

    def matches(self, labels: dict[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.labels.items()) and all(
            e.matches(labels) for e in self.expressions
        )


def _only_in_condition_rules(taint: Taint) -> Taint:
    if taint.key in CONDITION_RULE_TAINT_KEYS:
        raise ValueError(
            f"taint key '{taint.key}' is allowed only in conditionTaints: only a node's "
            "conditions can show that it is really shut down (Ready not True plus the "
            "provider's preemption condition), and on a node that still runs this taint "
            "force-detaches its volumes and deletes its pods"
        )
    return taint


UNLIMITED = "unlimited"
"""A rule's `evictionBudget: unlimited`: its evicting taint goes on every node that needs it."""


class EvictionLimit(Frozen):
    """How many nodes of a scope (the cluster, one pool, one zone) may get an evicting taint
    per window: a share of the scope's nodes, a number, or the smaller of both; never below
    one node, so a single failed node is always tainted at once."""

    max_share: float | None = Field(
        default=None, description="Share of the scope's nodes, e.g. 0.2 (20 %)."
    )
    max_nodes: int | None = Field(default=None, ge=1, description="Number of nodes.")

    @field_validator("max_share")
    @classmethod
    def _a_fraction(cls, share: float | None) -> float | None:
        if share is not None and not 0 < share <= 1:
            hint = f"; for {share:g} % write {share / 100:g}" if 1 < share <= 100 else ""
            raise ValueError(f"maxShare {share:g} is not a share: give 0 < maxShare <= 1{hint}")
        return share

    @model_validator(mode="after")
    def _something(self) -> EvictionLimit:
        if self.max_share is None and self.max_nodes is None:
            raise ValueError("give 'maxShare' (e.g. 0.2), 'maxNodes' (e.g. 5) or both")
        return self


NO_LIMIT = "none"


def _no_limit_word(value: object) -> object:
    """`none` stands for null: no limit in this scope. A word, because `kubectl apply` (client
    side) drops a null from the object it sends, and the default limit would apply instead."""
    if value == NO_LIMIT:
        return None
    if isinstance(value, str):
        raise ValueError(
            f"'{value}' is not a limit: write '{NO_LIMIT}' (no limit in this scope) or an "
            "object such as {maxShare: 0.2} or {maxNodes: 5}"
        )
    return value


def _no_limit_word_schema(schema: dict[str, Any]) -> None:
    schema["anyOf"] = [*schema.get("anyOf", ()), {"const": NO_LIMIT}]


DEFAULT_EVICTION_WINDOW = timedelta(minutes=5)
"""NVIDIA NVSentinel's circuit-breaker example window (docs/rules.md, "Eviction budget")."""
DEFAULT_EVICTION_SHARE = 0.2
"""Karpenter stops node repair when more than 20 % of a NodePool is unhealthy."""


class RuleEvictionBudget(Frozen):
    """At most so many nodes get an evicting taint per `window`, in the cluster and in each
    pool and zone (a node counts in the scopes it is in; unlabelled, it is in the cluster)."""

    window: Duration = Field(
        default=DEFAULT_EVICTION_WINDOW,
        description="The sliding window the limits count taint additions in.",
    )
    cluster: EvictionLimit = Field(
        default=EvictionLimit(max_share=DEFAULT_EVICTION_SHARE),
        description="Limit over all nodes.",
    )
    per_pool: Annotated[EvictionLimit | None, BeforeValidator(_no_limit_word)] = Field(
        default=EvictionLimit(max_share=DEFAULT_EVICTION_SHARE),
        description=f"Limit per node pool (the pool a node registered in, {TRUSTED_POOL_LABEL}); "
        "'none' (or null): no limit.",
        json_schema_extra=_no_limit_word_schema,
    )
    per_zone: Annotated[EvictionLimit | None, BeforeValidator(_no_limit_word)] = Field(
        default=None,
        description="Limit per zone (label topology.kubernetes.io/zone); default none: a node's "
        "kubelet may change its zone label, so a compromised node could move into a zone and "
        "hold that zone's budget (docs/reconciler.md, Security).",
        json_schema_extra=_no_limit_word_schema,
    )

    unlimited: bool = Field(
        default=False,
        description="No limit: the taint goes on every node that needs it at once (e.g. "
        "out-of-service on a mass spot preemption). Shorthand: `evictionBudget: unlimited`.",
    )

    @field_validator("window")
    @classmethod
    def _window_in_range(cls, window: timedelta) -> timedelta:
        if not timedelta(seconds=1) <= window <= timedelta(days=1):
            raise ValueError(
                f"window {format_duration(window)} is out of range: give 1s to 24h, e.g. '5m'"
            )
        return window

    @model_validator(mode="after")
    def _unlimited_alone(self) -> RuleEvictionBudget:
        if self.unlimited and self.model_fields_set - {"unlimited", "no_schedule"}:
            raise ValueError(
                "an unlimited budget takes no window or limits: remove them, or unlimited"
            )
        return self


class EvictionBudget(RuleEvictionBudget):
    """The budget every rule without its own `evictionBudget` shares."""

    no_schedule: bool = Field(
        default=False,
        description="Count NoSchedule taint additions against the budget too (they evict "
        "nothing, so by default they are never held).",
    )


def _budget_shorthand(value: object) -> object:
    """`unlimited` stands for {unlimited: true}; any other word is named, not a type error."""
    if value == UNLIMITED:
        return {"unlimited": True}
    if isinstance(value, str):
        raise ValueError(
            f"'{value}' is not an eviction budget: write '{UNLIMITED}' (no limit for this "
            "rule) or an object such as {window: 5m, cluster: {maxShare: 0.5}}"
        )
    return value


def _budget_shorthand_schema(schema: dict[str, Any]) -> None:
    """The JSON Schema takes the shorthand too (editors, and helm's check of a rules map)."""
    schema["anyOf"] = [*schema.get("anyOf", ()), {"const": UNLIMITED}]


def _top_budget_shorthand_schema(schema: dict[str, Any]) -> None:
    """The top-level budget is no union of its own (never null): its one `$ref` becomes the
    first choice beside the shorthand."""
    schema["anyOf"] = [{"$ref": schema.pop("$ref")}, {"const": UNLIMITED}]


RuleBudget = Annotated[
    RuleEvictionBudget | None,
    BeforeValidator(_budget_shorthand),
    Field(
        default=None,
        description="This rule's own eviction budget ('unlimited': none); default: the "
        "top-level evictionBudget, shared with the other rules.",
        json_schema_extra=_budget_shorthand_schema,
    ),
]


ConditionStatus = Literal["True", "False", "Unknown"]
"""A node condition's status, as the API server allows it (corev1.ConditionStatus)."""
ConditionPolicy = Literal["allOf", "anyOf"]
"""How a list of conditions combines: all must match (allOf), or at least one (anyOf)."""
MAX_CONDITIONS = 32
"""Conditions per rule, at most: node-readiness-controller's own limit (its CRD's MaxItems)."""
CONDITION_TYPE_MAX = 316
"""Longest condition type: metav1.Condition's limit, which node-readiness-controller keeps."""


def _check_condition_type(condition_type: str) -> str:
    if not condition_type:
        raise ValueError("a condition type is empty: name one, e.g. 'Ready'")
    if len(condition_type) > CONDITION_TYPE_MAX:
        raise ValueError(
            f"condition type is {len(condition_type)} characters long; the API server allows "
            f"{CONDITION_TYPE_MAX} at most (metav1.Condition), so no node reports it: shorten it"
        )
    return condition_type


def _check_condition_count(conditions: tuple[Any, ...]) -> tuple[Any, ...]:
    if len(conditions) > MAX_CONDITIONS:
        raise ValueError(
            f"{len(conditions)} conditions: a rule takes {MAX_CONDITIONS} at most (as "
            "node-readiness-controller's); split it into several rules"
        )
    return conditions


ConditionType = Annotated[
    str,
    AfterValidator(_check_condition_type),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": CONDITION_TYPE_MAX}),
]


def _dry_run_field(what: str) -> Any:
    return Field(
        default=False,
        description=f"Plan this rule as if live, but write nothing: {what} is reported as an "
        "Event on the node and the nodegate_dry_run_changes_total metric instead "
        "(docs/rules.md, 'Dry run').",
    )


class LabelTaintRule(Frozen):
    """A label on the node implies a taint; when the label goes, the taint goes."""

    name: RuleName
    match: LabelSelector
    taint: Taint
    node_may_lift: bool = Field(
        default=False,
        description="Accept that the node itself may lift this taint: set it only when `match` "
        "reads a label the node's own kubelet may change (NodeRestriction allows labels outside "
        "kubernetes.io/k8s.io), because a compromised node could then remove the label and "
        "with it the taint. Labels under node-restriction.kubernetes.io/ need no opt-in.",
    )
    eviction_budget: RuleBudget
    dry_run: bool = _dry_run_field("each taint it would add or remove")

    kind: ClassVar[RuleKind] = RuleKind(
        field="labelTaints", plural="label taints", at_registration="permanent"
    )
    charged: ClassVar[bool] = True
    former_taints: ClassVar[tuple[Taint, ...]] = ()

    _taint_allowed = field_validator("taint")(_only_in_condition_rules)

    def reads(self) -> NodeReads:
        return NodeReads(selectors=(self.match,))

    def born_with(self, labels: Mapping[str, str]) -> bool:
        return not self.dry_run and self.match.matches(dict(labels))


class ConditionMatch(Frozen):
    """One node condition that must hold. `status` (and `reason`) are full-match regexes."""

    type: ConditionType | None = Field(default=None, description="Condition type, exact.")
    type_pattern: Regex | None = Field(default=None, description="Condition type, regex.")
    status: Regex = Field(description="Full-match regex on the condition's status.")
    reason: Regex | None = Field(default=None, description="Full-match regex on the reason.")
    default_status: ConditionStatus | None = Field(
        default=None,
        description="The status this condition counts as while the node does not report it "
        "(`status` and `reason` are matched against it, the reason as empty). Omitted: an "
        "unreported condition never matches. Only with an exact `type`.",
    )

    @model_validator(mode="after")
    def _one_type(self) -> ConditionMatch:
        if (self.type is None) == (self.type_pattern is None):
            raise ValueError("give exactly one of 'type' (exact) or 'typePattern' (regex)")
        if self.default_status is not None and self.type_pattern is not None:
            raise ValueError(
                "defaultStatus needs an exact 'type': with typePattern there is no one condition "
                "whose absence it could stand for; name the condition type, or drop defaultStatus"
            )
        return self

    def matches_type(self, condition_type: str) -> bool:
        if self.type is not None:
            return condition_type == self.type
        return re.fullmatch(self.type_pattern or "", condition_type) is not None


class GateCondition(ConditionMatch):
    """A node condition that lifts a startup gate: an exact type, and only as reported."""

    @field_validator("type_pattern")
    @classmethod
    def _exact_type(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            raise ValueError(
                "a gate's condition needs an exact 'type' (a gate lifts once, on named evidence): "
                "replace typePattern with type"
            )
        return pattern

    @field_validator("default_status")
    @classmethod
    def _no_default(cls, status: str | None) -> str | None:
        if status is not None:
            raise ValueError(
                "a gate must not lift on a condition the node has not reported, so defaultStatus "
                "is not allowed in readyWhen.conditions (node-readiness-controller refuses it "
                "with bootstrap-only too); remove it"
            )
        return status


class ConditionTaintRule(Frozen):
    """Node conditions imply a taint: all listed conditions must match (`conditionPolicy:
    allOf`, the default) or at least one (`anyOf`), for `for` if set."""

    name: RuleName
    conditions: Annotated[
        tuple[ConditionMatch, ...], Field(min_length=1), AfterValidator(_check_condition_count)
    ]
    condition_policy: ConditionPolicy = Field(
        default="allOf",
        description="allOf: taint while every listed condition matches; anyOf: while at least "
        "one does.",
    )
    taint: Taint
    hold: Duration = Field(
        default=timedelta(0),
        alias="for",
        description="How long the conditions must have matched before the taint is added.",
    )
    on_recovery: Literal["remove", "keep"] = Field(
        default="remove",
        description="When the conditions stop matching: remove the taint, or keep it for a human.",
    )
    match: LabelSelector | None = Field(
        default=None, description="Optional: apply this rule only to nodes with these labels."
    )
    eviction_budget: RuleBudget
    dry_run: bool = _dry_run_field("each taint it would add or remove")

    kind: ClassVar[RuleKind] = RuleKind(
        field="conditionTaints", plural="condition taints", at_registration="never"
    )
    charged: ClassVar[bool] = True
    former_taints: ClassVar[tuple[Taint, ...]] = ()

    def reads(self) -> NodeReads:
        return NodeReads(
            selectors=(self.match,) if self.match is not None else (), conditions=self.conditions
        )

    def born_with(self, labels: Mapping[str, str]) -> bool:
        return False  # conditions are reported after registration

    @model_validator(mode="after")
    def _out_of_service_only_on_shut_down_nodes(self) -> ConditionTaintRule:
        """An error, not a warning: a rules ConfigMap edit reaches the cluster with nobody
        reading warnings, and this taint on a running node corrupts data (docs/rules.md)."""
        if self.taint.key != OUT_OF_SERVICE_TAINT:
            return self
        if self.condition_policy == "anyOf":
            raise ValueError(
                f"a rule that applies {OUT_OF_SERVICE_TAINT} needs all its conditions (Ready not "
                "True and the shutdown evidence): remove conditionPolicy: anyOf"
            )
        if any(c.default_status is not None for c in self.conditions):
            raise ValueError(
                f"a rule that applies {OUT_OF_SERVICE_TAINT} acts on reported conditions only: "
                "a node that reports nothing yet is not shown to be shut down; remove "
                "defaultStatus"
            )
        ready_guards = [c for c in self.conditions if c.type == "Ready"]
        if not any(re.fullmatch(c.status, "True") is None for c in ready_guards):
            raise ValueError(
                f"a rule that applies {OUT_OF_SERVICE_TAINT} must require the node's Ready "
                'condition not True: add {type: Ready, status: "False|Unknown"} (a status that '
                "never matches True); on a node that still runs, this taint force-detaches its "
                "volumes and deletes its pods"
            )
        if len(self.conditions) == len(ready_guards):
            raise ValueError(
                f"a rule that applies {OUT_OF_SERVICE_TAINT} must also require the condition "
                "that says the node was shut down (the provider's preemption or termination "
                "condition): Ready is not True on a node that is only cut off from the API "
                "server and still writes to its volumes"
            )
        return self


class PersistentLabels(Frozen):
    """Labels that survive node deletion and re-creation (restored onto the new Node)."""

    prefixes: tuple[str, ...] = ()
    keys: tuple[LabelKey, ...] = ()
    key_by: Literal["providerID", "nodeName"] = Field(default="providerID", alias="keyBy")
    forget_after: Duration = Field(
        default=timedelta(days=30),
        alias="forgetAfter",
        description="How long the record of a deleted node is kept (its labels come back if "
        "the node returns within this time); then it is garbage-collected.",
    )
    dry_run: bool = _dry_run_field("each label it would restore (nothing is recorded or restored)")

    @model_validator(mode="after")
    def _prefixes_are_domains(self) -> PersistentLabels:
        for prefix in self.prefixes:
            if not prefix.endswith("/"):
                raise ValueError(
                    f"prefix '{prefix}' must end with '/', e.g. '{prefix.rstrip('/')}/'"
                )
            check_key(prefix + "x")
            if label_owned_by_platform(prefix + "x"):
                raise ValueError(
                    f"prefix '{prefix}' is in a namespace the platform owns "
                    f"({', '.join(PLATFORM_LABEL_DOMAINS)}): persist your own prefix instead"
                )
        for key in self.keys:
            if label_owned_by_platform(key):
                raise ValueError(
                    f"'{key}' is a label the platform or kubelet owns "
                    f"({', '.join(PLATFORM_LABEL_DOMAINS)}): it is never persisted"
                )
        if not self.prefixes and not self.keys:
            raise ValueError("list at least one of 'prefixes' or 'keys'")
        return self

    def persists(self, key: str) -> bool:
        return key in self.keys or any(key.startswith(p) for p in self.prefixes)


def _check_annotation(text: str) -> str:
    key, eq, _ = text.partition("=")
    if not eq:
        raise ValueError(f"'{text}' must be 'key=value', e.g. 'nodegate.dev/ready=true'")
    check_key(key)
    return text


AnnotationPair = Annotated[str, AfterValidator(_check_annotation)]


def _pair(text: str | None) -> tuple[str, str] | None:
    if text is None:
        return None
    key, _, value = text.partition("=")
    return key, value


class InitPods(Frozen):
    """The per-node init pod (e.g. of an init DaemonSet) whose readiness lifts a startup gate."""

    namespace: str = Field(pattern=DNS_LABEL_PATTERN, max_length=63)
    selector: dict[LabelKey, LabelValue] = Field(min_length=1)
    ready_annotation: AnnotationPair | None = Field(
        default=None,
        description="`key=value` on the init pod that lifts the gate before the pod is Ready "
        "(nodetaintshandler's startup.k8s.io/ready=true).",
    )
    require_annotation: bool = Field(
        default=False,
        description="Only `readyAnnotation` on the pod counts, not the pod's readiness.",
    )

    @model_validator(mode="after")
    def _annotation_if_required(self) -> InitPods:
        if self.require_annotation and self.ready_annotation is None:
            raise ValueError(
                "requireAnnotation needs readyAnnotation, e.g. 'example.com/ready=true'"
            )
        return self

    @property
    def ready_annotation_pair(self) -> tuple[str, str] | None:
        return _pair(self.ready_annotation)

    @property
    def label_selector(self) -> str:
        """The selector as the API takes it (`k=v,k2=v2`), for a narrowed watch."""
        return ",".join(f"{k}={v}" for k, v in sorted(self.selector.items()))


class CsiDriver(Frozen):
    """A CSI driver whose node plugin the node's kubelet must have registered: its CSINode lists
    the driver (the EBS CSI driver's own agent-not-ready check, for drivers without one)."""

    name: str = Field(
        pattern=CSI_DRIVER_PATTERN,
        max_length=63,
        description="The driver's name, as its CSIDriver object and the CSINode list it "
        "(e.g. ebs.csi.aws.com).",
    )
    require_allocatable: bool = Field(
        default=True,
        description="Count the driver only once it reports how many volumes the node can "
        "attach (allocatable.count): until then the scheduler may place more volumes on the "
        "node than it can attach. Set false for a driver that never reports it.",
    )


class ReadyWhen(Frozen):
    """A gate is lifted when the node's init pod is Ready, the node has this annotation, or
    its conditions say so: any one signal lifts it."""

    pods: InitPods | None = None
    annotation: AnnotationPair | None = None
    conditions: Annotated[tuple[GateCondition, ...], AfterValidator(_check_condition_count)] = (
        Field(
            default=(),
            description="Node conditions that lift the gate, as the node reports them (an "
            "unreported condition never lifts it), combined by conditionPolicy.",
        )
    )
    condition_policy: ConditionPolicy = Field(
        default="allOf",
        description="allOf: the gate lifts once every listed condition matches; anyOf: once "
        "one does.",
    )
    csi_drivers: tuple[CsiDriver, ...] = Field(
        default=(),
        max_length=16,
        description="CSI drivers the node's CSINode must list (all of them): the gate lifts "
        "once each node plugin has registered with the kubelet.",
    )

    @model_validator(mode="after")
    def _something(self) -> ReadyWhen:
        if not any((self.pods, self.annotation, self.conditions, self.csi_drivers)):
            raise ValueError(
                "give 'pods', 'annotation', 'conditions' or 'csiDrivers' (several: any one "
                "lifts the gate)"
            )
        if "condition_policy" in self.model_fields_set and not self.conditions:
            raise ValueError(
                "conditionPolicy combines 'conditions', and there are none: add conditions or "
                "remove conditionPolicy"
            )
        return self

    @property
    def annotation_pair(self) -> tuple[str, str] | None:
        return _pair(self.annotation)


def _check_former_key(key: str) -> str:
    """A former key is lifted like the gate's own key, so it is held to the same checks."""
    _check_gate_key(key)
    if key in CONDITION_RULE_TAINT_KEYS:
        raise ValueError(
            f"taint key '{key}' is allowed only in conditionTaints; it was never a gate's key"
        )
    return key


FormerKey = Annotated[str, AfterValidator(check_key), AfterValidator(_check_former_key)]


class CompletionAnnotation(Frozen):
    """An extra Node annotation written when the gate is lifted, in a format another tool's
    readers expect (nodetaintshandler's `startup.k8s.io/completedAt=<unix seconds>`)."""

    key: LabelKey
    format: Literal["rfc3339", "unix"] = Field(
        default="rfc3339",
        description="rfc3339: '2026-11-23T10:00:00Z'; unix: whole seconds since the epoch, "
        "as text ('1795428000').",
    )

    @field_validator("key")
    @classmethod
    def _not_nodegates_own(cls, key: str) -> str:
        if in_nodegate_domain(key):
            raise ValueError(
                f"'{key}' is in nodegate's own namespace, where it keeps its records "
                "(completed.gate.nodegate.dev/<gate> is written anyway); use the key your "
                "dashboards read, e.g. 'startup.k8s.io/completedAt'"
            )
        return key


class StartupGate(Frozen):
    """A taint a node is born with, lifted once the node is ready (never added afterwards)."""

    name: RuleName
    match: LabelSelector
    taint: GateTaint
    ready_when: ReadyWhen
    timeout: Duration | None = Field(
        default=None,
        description="How long to wait for readiness, from the node's creation (from the "
        "reboot, for a gate put back by regateOnReboot); none waits forever.",
    )
    on_timeout: Literal["keep", "lift"] = Field(
        default="keep", description="After the timeout: keep the gate (and report) or lift it."
    )
    min_hold: Duration | None = Field(
        default=None,
        description="The gate stays at least this long after the node's creation (after the "
        "reboot, for a gate put back by regateOnReboot), even if ready.",
    )
    regate_on_reboot: bool = Field(
        default=False,
        description="Put the gate back when the node reboots (its bootID changes), to be "
        "lifted again by the same readiness; otherwise a lifted gate never comes back.",
    )
    backfill: bool = Field(
        default=False,
        description="Add the gate to a matching node that joined without it and runs no "
        "workload pods yet (only DaemonSet and static pods); a busy node is never touched.",
    )
    former_keys: tuple[FormerKey, ...] = Field(
        default=(),
        description="Keys this gate's taint had before a switch (e.g. nodetaintshandler's "
        "startup.k8s.io/initializing), with the gate's effect: a node carrying one is gated "
        "and it is lifted with the gate. Never added, backfilled or put back.",
    )
    completion_annotation: CompletionAnnotation | None = Field(
        default=None,
        description="Also write this annotation when the gate is lifted (besides "
        "completed.gate.nodegate.dev/<gate>); a node carrying it is never backfilled.",
    )
    dry_run: bool = Field(
        default=False,
        description="Try the gate out without gating: it is not rendered into bootstrap or "
        "the webhook and never added; on a node that carries its taint anyway (e.g. another "
        "tool's), its lift is reported as an Event and the nodegate_dry_run_changes_total "
        "metric, not done (docs/gates.md, 'Dry run').",
    )

    kind: ClassVar[RuleKind] = RuleKind(
        field="startupGates", plural="startup gates", at_registration="startup"
    )
    charged: ClassVar[bool] = False
    eviction_budget: ClassVar[None] = None

    _taint_allowed = field_validator("taint")(_only_in_condition_rules)

    def reads(self) -> NodeReads:
        """Its readiness signals, the completion annotation (a node carrying one is not
        backfilled), its own records, and the bootID when a reboot puts it back."""
        ready = self.ready_when
        annotations = set(gate_annotation_keys(self))
        if (pair := ready.annotation_pair) is not None:
            annotations.add(pair[0])
        if self.completion_annotation is not None:
            annotations.add(self.completion_annotation.key)
        return NodeReads(
            selectors=(self.match,),
            conditions=ready.conditions,
            annotations=frozenset(annotations),
            pods=(ready.pods,) if ready.pods is not None else (),
            csi_drivers=frozenset(d.name for d in ready.csi_drivers),
            boot_id=self.regate_on_reboot,
            workload_pods=self.backfill,
        )

    def born_with(self, labels: Mapping[str, str]) -> bool:
        return not self.dry_run and self.match.matches(dict(labels))

    @model_validator(mode="after")
    def _csi_drivers_lift_once(self) -> StartupGate:
        if self.regate_on_reboot and self.ready_when.csi_drivers:
            raise ValueError(
                "readyWhen.csiDrivers cannot lift a gate put back by regateOnReboot: the CSINode "
                "keeps listing a driver across the reboot, so it says nothing of the new boot; "
                "lift re-gates with pods, an annotation or conditions, or drop regateOnReboot"
            )
        return self

    @model_validator(mode="after")
    def _min_hold_within_timeout(self) -> StartupGate:
        # Both count from the same moment: a minHold at or past the timeout would keep a ready
        # node gated longer than an unready one (onTimeout: lift), or report a ready node as
        # timed out (keep).
        hold, timeout = self.min_hold, self.timeout
        if hold is not None and timeout is not None and hold >= timeout:
            raise ValueError(
                f"minHold ({_seconds(hold)}) must be shorter than timeout ({_seconds(timeout)}): "
                "both count from the node's creation (or its reboot); shorten minHold or "
                "lengthen timeout"
            )
        return self

    @field_validator("former_keys")
    @classmethod
    def _former_keys_are_other_keys(
        cls, keys: tuple[str, ...], info: ValidationInfo
    ) -> tuple[str, ...]:
        taint = info.data.get("taint")
        if isinstance(taint, Taint) and taint.key in keys:
            raise ValueError(
                f"'{taint.key}' is the gate's own key; list only keys its taint had before"
            )
        if len(set(keys)) != len(keys):
            raise ValueError("a key is listed twice; list each once")
        return keys

    @property
    def former_taints(self) -> tuple[GateTaint, ...]:
        """The gate's former taints: its value and effect under each former key."""
        return tuple(
            GateTaint(key=key, value=self.taint.value, effect=self.taint.effect)
            for key in self.former_keys
        )


AUTO = "auto"
"""`daemonSets: auto`: every DaemonSet the DaemonSet controller would run a pod of on the node."""
DEFAULT_AGENT_HOLD = timedelta(minutes=2)
"""How long a continuous node agent may be not Ready before its taint comes back: a rolling
update replaces a node's pod in a few seconds to a minute (the old pod's graceful termination,
then the new one's image pull and readiness probe), and must not take the node out of
scheduling; a crashed agent is back in CrashLoopBackOff's first minutes or is not coming back
(docs/agents.md, "Rollouts")."""


class DaemonSetRef(Frozen):
    """A DaemonSet by namespace and name: its pod on the node (owned by this DaemonSet's uid)."""

    namespace: str = Field(pattern=DNS_LABEL_PATTERN, max_length=63)
    name: str = Field(pattern=DNS_SUBDOMAIN_PATTERN, max_length=253)

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


def _auto_or_list(value: object) -> object:
    if isinstance(value, str) and value != AUTO:
        raise ValueError(
            f"'{value}' is not a list of DaemonSets: write '{AUTO}' (every DaemonSet that runs "
            "on the node) or a list such as [{namespace: kube-system, name: cilium}]"
        )
    return value


class NodeAgentRule(Frozen):
    """A taint on matching nodes while their node agents (the pods of DaemonSets, the node
    plugins of CSI drivers) are not Ready: lifted once (bootstrapOnly, a startup gate) or for
    as long as they stay Ready (continuous: put back after they fail for `for`)."""

    name: RuleName
    match: LabelSelector | None = Field(
        default=None, description="The nodes it applies to; omitted: every node."
    )
    daemon_sets: Annotated[
        tuple[DaemonSetRef, ...] | Literal["auto"], BeforeValidator(_auto_or_list)
    ] = Field(
        default=(),
        description="The DaemonSets whose pod on the node must be Ready (running, Ready, "
        "owned by the DaemonSet): a list, or 'auto' for every DaemonSet the DaemonSet "
        "controller would run on the node (nodeSelector, required node affinity, tolerations "
        "of the node's taints other than this rule's).",
    )
    exclude_daemon_sets: LabelSelector | None = Field(
        default=None,
        description="With daemonSets: auto, DaemonSets with these labels do not count.",
    )
    namespaces: tuple[Annotated[str, Field(pattern=DNS_LABEL_PATTERN, max_length=63)], ...] = Field(
        default=(),
        description="With daemonSets: auto, the namespaces whose DaemonSets count (default: "
        "every namespace; name the platform's, so no tenant's DaemonSet takes nodes out of "
        "scheduling).",
    )
    cannot_run: Literal["skip", "wait"] = Field(
        default="skip",
        description="A listed DaemonSet whose pod the DaemonSet controller will not make on a "
        "node (its nodeSelector or required node affinity does not select it, or it does not "
        "tolerate another taint the node carries): skip, the node does not wait for it (as "
        "with daemonSets: auto, and as nidhogg does with each DaemonSet's own selector); "
        "wait, the node keeps the taint until that changes. Either way it is reported once "
        "(a NodeAgentCannotRun Warning Event, nodegate_node_agents_cannot_run).",
    )
    csi_drivers: tuple[CsiDriver, ...] = Field(
        default=(),
        max_length=16,
        description="CSI drivers the node's CSINode must list (all of them), besides the pods.",
    )
    taint: GateTaint
    mode: Literal["continuous", "bootstrapOnly"] = Field(
        default="continuous",
        description="continuous: the taint comes back when an agent has not been Ready for "
        "`for`, and goes when it is Ready again; bootstrapOnly: lifted once, never put back.",
    )
    hold: Duration = Field(
        default=DEFAULT_AGENT_HOLD,
        alias="for",
        description="continuous: how long an agent may be not Ready (or missing) before the "
        "taint comes back; long enough for a rolling update of its DaemonSet.",
    )
    eviction_budget: RuleBudget
    dry_run: bool = _dry_run_field("each taint it would add or remove")
    first_ready_annotation: LabelKey | None = Field(
        default=None,
        description="Also write this Node annotation, with the time (2006-01-02T15:04:05Z, "
        "UTC), the first time the node carries none of the taints of the rules naming it and "
        "each of them has decided (its agents Ready, or the node not matched); never changed "
        "or removed afterwards. nidhogg's: pelotech's <taintNamePrefix>/ready-since, uswitch's "
        "nidhogg.uswitch.com/first-time-ready (docs/agents.md).",
    )

    kind: ClassVar[RuleKind] = RuleKind(
        field="nodeAgents", plural="node agents", at_registration="startup"
    )
    former_taints: ClassVar[tuple[Taint, ...]] = ()

    _taint_allowed = field_validator("taint")(_only_in_condition_rules)

    @field_validator("first_ready_annotation")
    @classmethod
    def _first_ready_not_nodegates_own(cls, key: str | None) -> str | None:
        if key is not None and in_nodegate_domain(key):
            raise ValueError(
                f"'{key}' is in nodegate's own namespace, where it keeps its records; use the "
                "key your automation reads, e.g. 'nidhogg.uswitch.com/ready-since'"
            )
        return key

    @property
    def charged(self) -> bool:
        """A continuous agent taint comes back on a running node: NoExecute there evicts."""
        return self.mode == "continuous"

    @property
    def discovers(self) -> bool:
        return self.daemon_sets == AUTO

    @property
    def listed_daemon_sets(self) -> tuple[DaemonSetRef, ...]:
        return () if isinstance(self.daemon_sets, str) else self.daemon_sets

    def reads(self) -> NodeReads:
        listed = {d.namespace for d in self.listed_daemon_sets}
        searched = set(self.namespaces) or {ALL_NAMESPACES}
        return NodeReads(
            selectors=(self.match,) if self.match is not None else (),
            annotations=frozenset(filter(None, (self.first_ready_annotation,))),
            csi_drivers=frozenset(d.name for d in self.csi_drivers),
            agent_namespaces=frozenset(searched if self.discovers else listed),
            every_label=self.discovers,
        )

    def born_with(self, labels: Mapping[str, str]) -> bool:
        return not self.dry_run and (self.match is None or self.match.matches(dict(labels)))

    @model_validator(mode="after")
    def _consistent(self) -> NodeAgentRule:
        if not self.daemon_sets and not self.csi_drivers:
            raise ValueError(
                "give 'daemonSets' (a list, or 'auto') or 'csiDrivers': the agents the node "
                "waits for"
            )
        for field in ("exclude_daemon_sets", "namespaces"):
            if field in self.model_fields_set and not self.discovers:
                raise ValueError(
                    f"{to_camel(field)} applies to daemonSets: auto only; remove it, or list "
                    "the DaemonSets"
                )
        refs = [d.ref for d in self.listed_daemon_sets]
        if len(set(refs)) != len(refs):
            raise ValueError("a DaemonSet is listed twice; list each once")
        if self.mode == "bootstrapOnly":
            for field in ("hold", "eviction_budget"):
                if field in self.model_fields_set:
                    name = "for" if field == "hold" else to_camel(field)
                    raise ValueError(
                        f"'{name}' applies to mode: continuous only (a bootstrapOnly taint is "
                        f"never put back); remove it"
                    )
        return self


def _seconds(duration: timedelta) -> str:
    return f"{int(duration.total_seconds())}s"


class CaFlags(Frozen):
    """A self-managed cluster-autoscaler's startup-taint flags, as it is run."""

    startup_taint: tuple[LabelKey, ...] = Field(
        default=(), description="Keys given to `--startup-taint` (CA >= 1.29)."
    )
    ignore_taint: tuple[LabelKey, ...] = Field(
        default=(), description="Keys given to the deprecated `--ignore-taint`."
    )
    startup_taint_prefix: tuple[Annotated[str, Field(min_length=1)], ...] = Field(
        default=(), description="Prefixes given to `--startup-taint-prefix` (CA >= 1.36)."
    )


class NodeClassRef(Frozen):
    """A Karpenter NodePool's `nodeClassRef`: the provider's node class it launches from."""

    group: Annotated[str, Field(min_length=1)]
    kind: Annotated[str, Field(min_length=1)]
    name: Annotated[str, Field(min_length=1)]


_CA_FIELDS = ("managed", "flags")
_KARPENTER_FIELDS = ("node_pool", "node_class_ref", "requirements", "external_startup_taints")


AutoscalerType = Literal["none", "cluster-autoscaler", "karpenter"]
AUTOSCALER_TYPES: tuple[str, ...] = get_args(AutoscalerType)


class Autoscaler(Frozen):
    """Which node autoscaler adds this pool's nodes; startup gates are checked against it."""

    type: AutoscalerType
    managed: bool | None = Field(
        default=None,
        description="cluster-autoscaler: the provider's (OKE add-on, AKS; default) or your own.",
    )
    version: str | None = Field(
        default=None,
        description="cluster-autoscaler: its version, e.g. '1.31' (required when not managed). "
        "karpenter: the Karpenter (sigs.k8s.io/karpenter) version its provider is built on, "
        "e.g. 'v1.13.0' (karpenter-provider-oci v1.0.0: v1.6.2); from v1.13.0 a "
        "readiness.k8s.io/ key is a startup taint without being listed.",
    )
    flags: CaFlags | None = Field(
        default=None, description="Self-managed cluster-autoscaler: its startup-taint flags."
    )
    node_pool: str | None = Field(
        default=None,
        pattern=DNS_SUBDOMAIN_PATTERN,
        max_length=253,
        description="karpenter: the Karpenter NodePool's name (default: this pool's name).",
    )
    node_class_ref: NodeClassRef | None = Field(
        default=None,
        description="karpenter: the NodePool's nodeClassRef (default on aks: AKS node "
        "auto-provisioning's AKSNodeClass 'default').",
    )
    requirements: tuple[MatchExpression, ...] | None = Field(
        default=None, description="karpenter: the NodePool's requirements."
    )
    external_startup_taints: tuple[TaintRef, ...] | None = Field(
        default=None,
        description="karpenter: the NodePool is not nodegate's (e.g. AKS NAP's own); these are "
        "its startupTaints, which must hold every gate of the pool.",
    )

    @model_validator(mode="after")
    def _fields_fit_type(self) -> Autoscaler:
        ca = self.type == "cluster-autoscaler"
        for field in (*_CA_FIELDS, *_KARPENTER_FIELDS):
            belongs = "cluster-autoscaler" if field in _CA_FIELDS else "karpenter"
            if getattr(self, field) is not None and belongs != self.type:
                raise ValueError(f"'{to_camel(field)}' applies to type {belongs} only; remove it")
        if self.type == "none" and self.version is not None:
            raise ValueError(
                "'version' applies to types cluster-autoscaler and karpenter only; remove it"
            )
        if self.version is not None and self.parsed_version is None:
            what = "cluster-autoscaler" if ca else "Karpenter"
            form = (
                "'1.31' or '1.31.2'"
                if ca
                else "'v1.13.0' (the sigs.k8s.io/karpenter version your provider is built on)"
            )
            raise ValueError(
                f"version '{self.version}' is not a {what} version; write it as {form}"
            )
        if ca:
            self._check_cluster_autoscaler()
        if self.external_startup_taints is not None and (
            self.node_class_ref is not None or self.requirements is not None
        ):
            raise ValueError(
                "externalStartupTaints describe a NodePool nodegate does not render; "
                "nodeClassRef and requirements apply only to one it renders: keep one or the other"
            )
        return self

    def _check_cluster_autoscaler(self) -> None:
        if self.is_managed and self.flags is not None:
            raise ValueError(
                "a managed cluster-autoscaler (OKE add-on, AKS) exposes no startup-taint flags "
                "(Azure/AKS#3276); remove 'flags', or set managed: false for your own autoscaler"
            )
        if not self.is_managed and self.version is None:
            raise ValueError(
                "a self-managed cluster-autoscaler needs its 'version' (e.g. '1.31'): which "
                "startup-taint prefixes and flags it knows depends on it"
            )
        since = STARTUP_TAINT_PREFIX_FLAG_SINCE
        version = self.parsed_version
        if self.flags and self.flags.startup_taint_prefix and version and version < since:
            raise ValueError(
                f"--startup-taint-prefix exists from cluster-autoscaler {format_version(since)}; "
                f"version {self.version} has no such flag: name each key in startupTaint instead"
            )

    @property
    def is_managed(self) -> bool:
        return self.managed is not False

    @property
    def parsed_version(self) -> Version | None:
        """The cluster-autoscaler or Karpenter version given; None when not given (unknown)."""
        return None if self.version is None else parse_version(self.version)


def _autoscaler_shorthand(value: object) -> object:
    """`autoscaler: karpenter` (the README's words) stands for {type: karpenter}, as any type
    alone does; another word or scalar is named with what to write instead."""
    if value is None or isinstance(value, dict):
        return value
    if value in AUTOSCALER_TYPES:
        return {"type": value}
    close = difflib.get_close_matches(str(value), AUTOSCALER_TYPES, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    raise ValueError(
        f"{value!r} is not an autoscaler: write its type ({', '.join(AUTOSCALER_TYPES)}; "
        "e.g. `autoscaler: karpenter`, short for {type: karpenter}) or a mapping such as "
        f"{{type: cluster-autoscaler, managed: false, version: '1.31'}}{hint}"
    )


def _autoscaler_shorthand_schema(schema: dict[str, Any]) -> None:
    schema["anyOf"] = [*schema.get("anyOf", ()), {"enum": list(AUTOSCALER_TYPES)}]


class NodePool(Frozen):
    """A cloud node pool whose nodes are born with the rules' taints and labels."""

    name: RuleName
    provider: Provider
    size: int = Field(ge=0, le=1000)
    labels: dict[LabelKey, LabelValue] = Field(
        default_factory=dict, description="Set by the kubelet at registration."
    )
    reconciler_labels: dict[LabelKey, LabelValue] = Field(
        default_factory=dict,
        description=(
            "Labels a kubelet may not set on itself (NodeRestriction), e.g. "
            "node-role.kubernetes.io/*; the reconciler applies them after registration."
        ),
    )
    autoscaler: Annotated[Autoscaler | None, BeforeValidator(_autoscaler_shorthand)] = Field(
        default=None,
        description="The autoscaler that adds this pool's nodes. Default: none, or AKS's "
        "managed cluster-autoscaler when the stack config gives the pool `autoscaling`. "
        "Shorthand: `autoscaler: karpenter` for {type: karpenter} (any type alone).",
        json_schema_extra=_autoscaler_shorthand_schema,
    )

    @property
    def autoscaler_type(self) -> str:
        return "none" if self.autoscaler is None else self.autoscaler.type

    @property
    def karpenter_node_pool(self) -> str:
        """The Karpenter NodePool's name (meaningful for karpenter pools only)."""
        return (self.autoscaler.node_pool if self.autoscaler else None) or self.name

    def eventual_labels(self) -> dict[str, str]:
        """Every label this pool's nodes end up with once the reconciler has run."""
        return {**self.labels, **self.reconciler_labels, POOL_LABEL: self.name}


class NodeRules(Frozen):
    """The whole rules file."""

    api_version: Literal["nodegate.dev/v1"] = Field(alias="apiVersion")
    kind: Literal["NodeRules"]
    label_taints: tuple[LabelTaintRule, ...] = ()
    condition_taints: tuple[ConditionTaintRule, ...] = ()
    persistent_labels: PersistentLabels | None = None
    startup_gates: tuple[StartupGate, ...] = ()
    node_agents: tuple[NodeAgentRule, ...] = ()
    node_pools: tuple[NodePool, ...] = ()
    eviction_budget: Annotated[EvictionBudget, BeforeValidator(_budget_shorthand)] = Field(
        default=EvictionBudget(),
        description="How many nodes may get an evicting (NoExecute) taint per window "
        "('unlimited': none).",
        json_schema_extra=_top_budget_shorthand_schema,
    )

    def pool(self, name: str) -> NodePool | None:
        return next((p for p in self.node_pools if p.name == name), None)

    @classmethod
    @cache
    def rule_kinds(cls) -> tuple[tuple[str, type[TaintRule]], ...]:
        """(attribute, class) of each list of taint-making rules, in the file's order: every
        field whose items are a rule kind (`rule_kinds.TaintRule`)."""
        found: list[tuple[str, type[TaintRule]]] = []
        for attribute, info in cls.model_fields.items():
            items = get_args(info.annotation)
            is_list = get_origin(info.annotation) is tuple and items
            if is_list and isinstance(getattr(items[0], "kind", None), RuleKind):
                found.append((attribute, items[0]))
        return tuple(found)

    def taint_rules(self) -> tuple[TaintRule, ...]:
        """Every taint-making rule, of every kind, in the file's order: what consumers iterate
        (never `label_taints`, `condition_taints`... one by one). Computed once per rules: a
        plan asks several times."""
        return self._taint_rules

    @cached_property
    def _taint_rules(self) -> tuple[TaintRule, ...]:
        kinds = self.rule_kinds()
        return tuple(rule for attribute, _ in kinds for rule in getattr(self, attribute))

    def reads(self) -> NodeReads:
        """Everything the rules read from a node: each rule's reads, the pool labels and each
        pool's labels (the persisted labels are matched by prefix: `PersistentLabels.persists`,
        which the caller applies). Computed once per rules: every watch event asks."""
        return self._reads

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy (pydantic's), without the cached reads of the rules it was copied from."""
        copied = super().model_copy(update=update, deep=deep)
        for cached in ("_reads", "_taint_rules"):
            copied.__dict__.pop(cached, None)
        return copied

    @cached_property
    def _reads(self) -> NodeReads:
        reads = NodeReads(label_keys=frozenset({POOL_LABEL, TRUSTED_POOL_LABEL, ZONE_LABEL}))
        for rule in self.taint_rules():
            reads |= rule.reads()
        for pool in self.node_pools:
            reads |= NodeReads(label_keys=frozenset({*pool.labels, *pool.reconciler_labels}))
        if self.node_agents:
            # A gate's init pods kept away by an agent taint deadlock the two: their DaemonSets
            # show it (`agent_deadlocks`).
            init = {g.ready_when.pods.namespace for g in self.startup_gates if g.ready_when.pods}
            reads |= NodeReads(agent_namespaces=frozenset(init))
        return reads

    def owned_taints(self) -> frozenset[tuple[str, str]]:
        """(key, effect) of every taint some rule adds or keeps; with the former taints, the
        only ones a current rule lets nodegate remove."""
        return frozenset(r.taint.identity for r in self.taint_rules())

    def former_gate_taints(self) -> frozenset[tuple[str, str]]:
        """(key, effect) of the rules' former taints (a gate's former keys): removed only when
        their gate is lifted, never added, and never recorded as owned (a key dropped from
        formerKeys is left)."""
        return frozenset(t.identity for r in self.taint_rules() for t in r.former_taints)


NO_RULES = NodeRules.model_validate({"apiVersion": API_VERSION, "kind": KIND})
"""Rules with nothing in them: what an installation built without a rules file tolerates, and
what the webhook admits a node with before any rules arrive."""


def rules_json_schema() -> dict[str, Any]:
    """JSON Schema of the rules (by alias) with their apiVersion and kind: a NodeRules
    object's spec beside them (`rules_object.rules_file_json_schema` is the file's)."""
    schema = NodeRules.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "nodegate NodeRules (nodegate.dev/v1)"
    return schema
