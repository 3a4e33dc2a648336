"""node-readiness-controller (github.com/kubernetes-sigs/node-readiness-controller): its
NodeReadinessRules, continuous ones into `conditionTaints`, bootstrap-only ones into
`startupGates` lifted by node conditions.

What it does, read from its source at e5ff8d1 (api/v1alpha1/nodereadinessrule_types.go, its
CRD, internal/webhook/nodereadinessgaterule_webhook.go, internal/controller/
nodereadinessrule_controller.go `evaluateRuleForNode`, node_controller.go, helper.go): a rule
names 1-32 node conditions (`type`, `requiredStatus`, `defaultStatus`: the status a condition
the node does not report counts as, Unknown when not given), combined by `conditionPolicy`
(allOf, the default: the taint goes when all are satisfied; anyOf: when one is; on main since
#315, after the v0.5.0 cut), one taint whose key must start with `readiness.k8s.io/` (CEL on the
CRD), a non-empty `nodeSelector`, `enforcementMode` and `dryRun`. While the conditions are not
satisfied it adds the taint (matched by key and effect), adopting one already there (Event
`TaintAdopted`); once they are, it removes it (`TaintRemoved`). bootstrap-only: the removal
writes `readiness.k8s.io/bootstrap-completed-<rule uid>` (value `{"rule-name":"<name>"}`; the
older `...-<rule name>` key is still read) and the rule never touches that node again; its
webhook refuses `defaultStatus` and `anyOf` with bootstrap-only. dryRun: nodes are not
evaluated, the rule's status gets `dryRunResults`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from nodegate.core.rules.model import TAINT_EFFECTS
from nodegate.core.text.errors import DocPath
from nodegate.core.text.k8s_names import READINESS_TAINT_PREFIX
from nodegate.migrate.conversion import (
    Conversion,
    Found,
    Place,
    YamlFile,
    as_text,
    rule_name,
    rules_document,
)

COMMAND: Final = "nodegate migrate node-readiness-controller"
API_VERSION: Final = "readiness.node.x-k8s.io/v1alpha1"
KIND: Final = "NodeReadinessRule"
LIST_KINDS: Final = ("List", "NodeReadinessRuleList")
STATUSES: Final = ("True", "False", "Unknown")
NRC_DEFAULT_STATUS: Final = "Unknown"
"""What node-readiness-controller counts an unreported condition as when the rule gives no
defaultStatus (`GetDefaultStatus`)."""
MODES: Final = ("bootstrap-only", "continuous")
POLICIES: Final = ("allOf", "anyOf")
MAX_CONDITIONS: Final = 32
COMPLETED_PREFIX: Final = "readiness.k8s.io/bootstrap-completed-"
"""node-readiness-controller's completion record: + the rule's uid (helper.go
`bootstrapAnnotationKey`), or + its name (`legacyBootstrapAnnotationKey`, still read)."""

_SPEC_KEYS: Final = (
    "conditions",
    "conditionPolicy",
    "enforcementMode",
    "taint",
    "nodeSelector",
    "dryRun",
)
_CONDITION_KEYS: Final = ("type", "requiredStatus", "defaultStatus")
_TAINT_KEYS: Final = ("key", "value", "effect", "timeAdded")
_SELECTOR_KEYS: Final = ("matchLabels", "matchExpressions")


@dataclass
class _Rule:
    """One NodeReadinessRule as read, and where it stood."""

    place: Place
    name: str
    uid: str | None
    spec: dict[str, Any]


def convert_node_readiness_controller(
    files: Sequence[YamlFile], keep_completion_annotation: bool = False
) -> Conversion:
    """Every NodeReadinessRule in `files` (one document, several, or a List as `kubectl get
    nrr -o yaml` prints it) as nodegate rules; problems at their file, line and path."""
    sources = ", ".join(f.source for f in files)
    found = Found(Place(sources or "the input", ()))
    rules = [rule for nrc_file in files for rule in _rules_in(nrc_file, found)]
    if not rules and not found.problems:
        found.add((), f"no {KIND} found: give files holding {KIND} objects")
    conditions: list[dict[str, Any]] = []
    gates: list[dict[str, Any]] = []
    places: dict[DocPath, DocPath | Place] = {}
    renamed: list[str] = []
    taken: list[str] = []
    legacy_keys: list[str] = []
    for rule in rules:
        if not _valid_spec(rule, found):
            continue
        name = rule_name(rule.name, taken)
        taken.append(name)
        if name != rule.name:
            renamed.append(f"'{rule.name}' is '{name}'")
        if rule.spec["enforcementMode"] == "continuous":
            at: DocPath = ("conditionTaints", len(conditions))
            conditions.append(_condition_taint(name, rule.spec))
        else:
            at = ("startupGates", len(gates))
            gate = _gate(name, rule.spec)
            if keep_completion_annotation:
                gate["completionAnnotation"] = {"key": COMPLETED_PREFIX + (rule.uid or rule.name)}
                if rule.uid is None:
                    legacy_keys.append(rule.name)
            gates.append(gate)
        places.update(_places(at, rule))
    sections: dict[str, Any] = {}
    if conditions:
        sections["conditionTaints"] = conditions
    if gates:
        sections["startupGates"] = gates
    command = COMMAND + (" --keep-completion-annotation" if keep_completion_annotation else "")
    return Conversion(
        command=command,
        source=sources,
        rules=rules_document(**sections),
        notes=_notes(conditions, gates, keep_completion_annotation, legacy_keys, renamed),
        places=places,
        problems=tuple(found.problems),
        webhook={"failurePolicy": "Ignore"} if gates else None,
    )


# --- reading ---------------------------------------------------------------------------------


def _rules_in(nrc_file: YamlFile, found: Found) -> list[_Rule]:
    several = len(nrc_file.documents) > 1
    rules: list[_Rule] = []
    for index, (document, positions) in enumerate(nrc_file.documents):
        prefix: DocPath = ("document", index) if several else ()
        top = Place(nrc_file.source, (), positions, prefix)
        if not isinstance(document, dict):
            found.under(top).add(
                (),
                f"expected a {KIND} mapping (or a List of them), found {type(document).__name__}",
            )
            continue
        placed: list[tuple[Place, object]] = [(top, document)]
        if document.get("kind") in LIST_KINDS:
            items = document.get("items")
            if not isinstance(items, list):
                message = f"a {document['kind']} needs 'items': a list of {KIND}"
                found.under(top).add(("items",), message)
                continue
            placed = [(top.at("items", n), item) for n, item in enumerate(items)]
        rules += filter(None, (_rule(place, item, found) for place, item in placed))
    return rules


def _rule(place: Place, item: object, found: Found) -> _Rule | None:
    found = found.under(place)
    if not isinstance(item, dict):
        found.add((), f"expected a {KIND} mapping, found {type(item).__name__}")
        return None
    api_version, kind = item.get("apiVersion"), item.get("kind")
    if (api_version, kind) != (API_VERSION, KIND):
        found.add(
            ("kind",) if api_version == API_VERSION else ("apiVersion",),
            f"{api_version}/{kind} is not node-readiness-controller's: expected apiVersion "
            f"{API_VERSION}, kind {KIND} (or a List of them, as `kubectl get nrr -o yaml` "
            "prints)",
        )
        return None
    metadata = item.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if not isinstance(name, str) or not name:
        found.add(("metadata", "name"), "every rule needs its metadata.name")
        return None
    uid = metadata.get("uid") if isinstance(metadata, dict) else None
    spec = item.get("spec")
    if not isinstance(spec, dict):
        found.add(
            ("spec",),
            "needs a spec mapping (conditions, taint, enforcementMode, nodeSelector)",
        )
        return None
    return _Rule(place, name, uid if isinstance(uid, str) and uid else None, spec)


def _valid_spec(rule: _Rule, found: Found) -> bool:
    """What node-readiness-controller's CRD and webhook would refuse, refused here too."""
    before = len(found.problems)
    found, spec, at = found.under(rule.place), rule.spec, ("spec",)
    _unknown_keys(found, at, spec, _SPEC_KEYS, "spec")
    mode = spec.get("enforcementMode")
    if mode not in MODES:
        found.add((*at, "enforcementMode"), _choice("enforcementMode", mode, MODES))
    policy = spec.get("conditionPolicy", "allOf")
    if policy not in POLICIES:
        found.add((*at, "conditionPolicy"), _choice("conditionPolicy", policy, POLICIES))
    elif policy == "anyOf" and mode == "bootstrap-only":
        found.add(
            (*at, "conditionPolicy"),
            "anyOf is not allowed with enforcementMode bootstrap-only (node-readiness-"
            "controller's webhook refuses it: the node would count as bootstrapped when one "
            "component is ready); remove conditionPolicy, or use enforcementMode continuous",
        )
    _check_conditions(spec, mode, found)
    _check_taint(spec, found)
    _check_selector(spec, found)
    if not isinstance(spec.get("dryRun", False), bool):
        found.add((*at, "dryRun"), "dryRun must be true or false")
    return len(found.problems) == before


def _check_conditions(spec: dict[str, Any], mode: object, found: Found) -> None:
    at: DocPath = ("spec", "conditions")
    conditions = spec.get("conditions")
    if not isinstance(conditions, list) or not conditions:
        found.add(at, 'needs 1 to 32 conditions, e.g. [{type: Ready, requiredStatus: "True"}]')
        return
    if len(conditions) > MAX_CONDITIONS:
        found.add(
            at,
            f"{len(conditions)} conditions: node-readiness-controller "
            f"allows {MAX_CONDITIONS} at most; split the rule",
        )
    seen: set[str] = set()
    for n, condition in enumerate(conditions):
        here: DocPath = (*at, n)
        if not isinstance(condition, dict):
            found.add(here, "a condition is a mapping {type, requiredStatus}")
            continue
        _unknown_keys(found, here, condition, _CONDITION_KEYS, "a condition")
        kind = condition.get("type")
        if not isinstance(kind, str) or not kind:
            found.add((*here, "type"), "every condition needs its type, e.g. Ready")
        elif kind in seen:
            found.add(
                (*here, "type"),
                f"condition type '{kind}' is listed twice "
                "(node-readiness-controller keys conditions by type); list it once",
            )
        else:
            seen.add(kind)
        required = condition.get("requiredStatus")
        if required not in STATUSES:
            found.add((*here, "requiredStatus"), _choice("requiredStatus", required, STATUSES))
        if "defaultStatus" not in condition:
            continue
        default = condition["defaultStatus"]
        if default not in STATUSES:
            found.add((*here, "defaultStatus"), _choice("defaultStatus", default, STATUSES))
        elif mode == "bootstrap-only":
            found.add(
                (*here, "defaultStatus"),
                "defaultStatus is not allowed with enforcementMode bootstrap-only "
                "(node-readiness-controller's webhook refuses it: a node must not pass its "
                "bootstrap on a condition it has not reported); remove it",
            )


def _check_taint(spec: dict[str, Any], found: Found) -> None:
    at: DocPath = ("spec", "taint")
    taint = spec.get("taint")
    if not isinstance(taint, dict):
        found.add(at, f"needs a taint {{key: {READINESS_TAINT_PREFIX}<name>, effect: NoSchedule}}")
        return
    _unknown_keys(found, at, taint, _TAINT_KEYS, "taint")
    key = taint.get("key")
    if not isinstance(key, str) or not key.startswith(READINESS_TAINT_PREFIX):
        found.add(
            (*at, "key"),
            f"taint key {key!r} does not start with '{READINESS_TAINT_PREFIX}': node-readiness-"
            "controller's CRD refuses it, so this is not a rule it ran. nodegate itself "
            "accepts other keys (any key no other controller owns, e.g. startup-taint."
            "cluster-autoscaler.kubernetes.io/<name> for a managed cluster-autoscaler): fix "
            "the key here, or write that rule for nodegate directly",
        )
    effect = taint.get("effect")
    if effect not in TAINT_EFFECTS:
        found.add((*at, "effect"), _choice("taint effect", effect, TAINT_EFFECTS))


def _check_selector(spec: dict[str, Any], found: Found) -> None:
    at: DocPath = ("spec", "nodeSelector")
    selector = spec.get("nodeSelector")
    empty = (
        "needs a non-empty nodeSelector (node-readiness-controller's webhook refuses an "
        "empty one, which would select every node): give matchLabels or matchExpressions"
    )
    if not isinstance(selector, dict):
        found.add(at, empty)
        return
    _unknown_keys(found, at, selector, _SELECTOR_KEYS, "nodeSelector")
    labels, expressions = selector.get("matchLabels"), selector.get("matchExpressions")
    if labels is not None and not isinstance(labels, dict):
        found.add((*at, "matchLabels"), "matchLabels is a mapping of label: value")
    if expressions is not None and not isinstance(expressions, list):
        found.add(
            (*at, "matchExpressions"),
            "matchExpressions is a list of {key, operator, values}",
        )
    if not labels and not expressions:
        found.add(at, empty)


def _choice(what: str, value: object, allowed: Sequence[str]) -> str:
    if value is None:
        return f"{what} is required: use {', '.join(allowed)}"
    close = difflib.get_close_matches(str(value), allowed, n=1, cutoff=0.5)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return f"{value!r} is not a valid {what}: use {', '.join(allowed)}{hint}"


def _unknown_keys(
    found: Found, at: DocPath, mapping: dict[Any, Any], known: Sequence[str], where: str
) -> None:
    for key in map(str, mapping):
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            hint = f"did you mean '{close[0]}'? " if close else ""
            message = f"'{key}' is not a field of {where} ({', '.join(known)}): {hint}remove it"
            found.add((*at, key), message)


# --- writing ---------------------------------------------------------------------------------


def _selector(spec: dict[str, Any]) -> dict[str, Any]:
    selector = spec["nodeSelector"]
    match: dict[str, Any] = {}
    if selector.get("matchLabels"):
        match["labels"] = {str(k): as_text(v) for k, v in selector["matchLabels"].items()}
    if selector.get("matchExpressions"):
        match["expressions"] = [
            {k: (list(map(as_text, v)) if k == "values" else v) for k, v in e.items()}
            if isinstance(e, dict)
            else e
            for e in selector["matchExpressions"]
        ]
    return match


def _taint(spec: dict[str, Any]) -> dict[str, Any]:
    taint = spec["taint"]
    out = {"key": taint["key"]}
    if taint.get("value") not in (None, ""):
        out["value"] = as_text(taint["value"])
    out["effect"] = taint["effect"]
    return out


def every_status_but(required: str) -> str:
    """A full-match regex for every status but `required`, as node-readiness-controller
    compares (status != requiredStatus): a status outside True/False/Unknown, which the API
    server does not refuse on a Node, counts as unsatisfied there and here."""
    return f"(?!{re.escape(required)}$).*"


def _condition_taint(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Tainted while node-readiness-controller's conditions do not hold: each condition
    negated (every status but the required one, the unreported status as it counted it), and
    the policy with them (not all satisfied = any unsatisfied; none satisfied = all
    unsatisfied)."""
    conditions = [
        {
            "type": c["type"],
            "status": every_status_but(c["requiredStatus"]),
            "defaultStatus": c.get("defaultStatus", NRC_DEFAULT_STATUS),
        }
        for c in spec["conditions"]
    ]
    nrc_policy = spec.get("conditionPolicy", "allOf")
    rule: dict[str, Any] = {
        "name": name,
        "match": _selector(spec),
        "conditions": conditions,
        "conditionPolicy": "anyOf" if nrc_policy == "allOf" else "allOf",
        "taint": _taint(spec),
    }
    if spec.get("dryRun"):
        rule["dryRun"] = True
    return rule


def _gate(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Lifted once every condition has its required status as the node reports it; added to a
    matching idle node that joined without it (node-readiness-controller added it to any)."""
    gate: dict[str, Any] = {
        "name": name,
        "match": _selector(spec),
        "taint": _taint(spec),
        "readyWhen": {
            "conditions": [
                {"type": c["type"], "status": c["requiredStatus"]} for c in spec["conditions"]
            ]
        },
        "backfill": True,
    }
    if spec.get("dryRun"):
        gate["dryRun"] = True
    return gate


def _places(at: DocPath, rule: _Rule) -> dict[DocPath, DocPath | Place]:
    """Each generated field -> the rule's setting it came from."""

    place = rule.place.at
    spec = ("spec",)
    conditions = (
        (*at, "readyWhen", "conditions") if at[0] == "startupGates" else (*at, "conditions")
    )
    mapping: dict[DocPath, DocPath | Place] = {
        at: place(),
        (*at, "name"): place("metadata", "name"),
        (*at, "match"): place(*spec, "nodeSelector"),
        (*at, "match", "labels"): place(*spec, "nodeSelector", "matchLabels"),
        (*at, "match", "expressions"): place(*spec, "nodeSelector", "matchExpressions"),
        (*at, "taint"): place(*spec, "taint"),
        (*at, "conditionPolicy"): place(*spec, "conditionPolicy"),
        (*at, "dryRun"): place(*spec, "dryRun"),
        (*at, "completionAnnotation"): place("metadata", "uid" if rule.uid else "name"),
        conditions: place(*spec, "conditions"),
    }
    for n in range(len(rule.spec["conditions"])):
        mapping[(*conditions, n)] = place(*spec, "conditions", n)
        mapping[(*conditions, n, "status")] = place(*spec, "conditions", n, "requiredStatus")
    return mapping


# --- notes -----------------------------------------------------------------------------------


def _notes(
    conditions: Sequence[dict[str, Any]],
    gates: Sequence[dict[str, Any]],
    keep: bool,
    legacy_keys: Sequence[str],
    renamed: Sequence[str],
) -> tuple[str, ...]:
    unknown_gates = [
        g["name"]
        for g in gates
        if any(c["status"] == "Unknown" for c in g["readyWhen"]["conditions"])
    ]
    notes: list[str] = []
    if conditions:
        notes.append(
            "continuous rules are conditionTaints that taint while their conditions do not "
            "hold: each condition matches every status but its requiredStatus, NRC's "
            "defaultStatus (Unknown where it gave none) is each condition's defaultStatus, so "
            "a node that reports nothing yet is tainted as NRC tainted it, and the policy is "
            "inverted with them (allOf: tainted while any one is unsatisfied, conditionPolicy: "
            "anyOf; anyOf: while all are, conditionPolicy: allOf)."
        )
    if gates:
        notes.append(
            "bootstrap-only rules are startup gates lifted by readyWhen.conditions (every "
            "requiredStatus, as reported) and never put back, as NRC's. NRC added the taint "
            "itself to any matching node that had not completed, busy or not; nodegate births "
            "nodes with the gate (`nodegate render` for the pools in nodePools, Karpenter's "
            "startupTaints, or the Node admission webhook below) and, with backfill: true, "
            "adds it to a matching node that joined without it only while the node runs no "
            "workload pods."
        )
        notes.append(_completion_note(keep, legacy_keys))
    if unknown_gates:
        notes.append(
            f"requiredStatus Unknown ({', '.join(unknown_gates)}): NRC counted a condition the "
            "node does not report as Unknown, so silence passed the bootstrap; a nodegate gate "
            "lifts only on conditions the node reports."
        )
    notes.append(
        "What nodegate adds: a gate timeout (timeout, onTimeout: keep or lift) and minHold; "
        "regateOnReboot (NRC never put a bootstrap taint back); the eviction budget, a "
        "breaker that gives a NoExecute taint to at most 20% of the nodes per 5 minutes by "
        "default; autoscaler checks per pool (nodePools[].autoscaler: Karpenter from v1.13.0 "
        "and a cluster-autoscaler 1.36 run with --startup-taint-prefix=readiness.k8s.io/ read "
        "these keys as startup taints, a managed cluster-autoscaler never does)."
    )
    notes.append(
        "Status: NRC wrote status.nodeEvaluations, appliedNodes and failedNodes on each rule "
        "(5,000 nodes at most, its #111); nodegate writes nothing to the rules: each change "
        "is an Event on the node and a metric, and `nodegate explain` says for a node what "
        "each rule decides and why."
    )
    notes.append(
        "Taint keys: NRC's CRD accepts only readiness.k8s.io/ keys; nodegate accepts any key "
        "no other controller owns, e.g. startup-taint.cluster-autoscaler.kubernetes.io/<name> "
        "for a gate a managed cluster-autoscaler must read as a startup taint (NRC's #279)."
    )
    if any(rule.get("dryRun") for rule in (*conditions, *gates)):
        notes.append(
            "dryRun: NRC evaluated no node for such a rule and summed what it would do in "
            "status.dryRunResults; nodegate plans the rule as if live and reports each change "
            "it would make as an Event and the nodegate_dry_run_changes_total metric; a "
            "dry-run gate is not rendered into bootstrap or the webhook."
        )
    notes.append(
        "Side by side: a rule owns a taint with its key and effect already on a node (NRC's "
        "TaintAdopted), and nodegate never touches readiness.k8s.io/ taints no rule of its own "
        "names. Hand over without a window (docs/gates.md): add these rules with dryRun: true, "
        "scale NRC to zero, drop dryRun (nodegate adopts the taints), then remove each "
        "NodeReadinessRule's finalizer and delete it (deleting one while NRC runs strips its "
        "taint from every node it selects). NRC's specs were immutable; nodegate rules are "
        "edited in place, "
        "and the blast-radius guard holds an edit that would change many nodes at once."
    )
    if renamed:
        notes.append(
            "Rule names are DNS labels here (shown in Events and metrics): "
            + ", ".join(renamed)
            + "."
        )
    return tuple(notes)


def _completion_note(keep: bool, legacy_keys: Sequence[str]) -> str:
    if not keep:
        return (
            "Completion: nodegate records a lift as completed.gate.nodegate.dev/<gate>, not "
            f"{COMPLETED_PREFIX}<rule uid>: tools that read NRC's annotation see no new "
            "completions, and a node NRC completed is not completed to nodegate (an idle one "
            "may be backfilled, then lifted once its conditions hold). Run with "
            "--keep-completion-annotation to keep NRC's key."
        )
    legacy = (
        f" {', '.join(legacy_keys)} had no metadata.uid (a file, not `kubectl get nrr -o "
        f"yaml`): their key is the older {COMPLETED_PREFIX}<rule name>, which NRC reads too."
        if legacy_keys
        else ""
    )
    return (
        f"Completion: each gate's lift also writes NRC's {COMPLETED_PREFIX}<rule uid> "
        "(completionAnnotation), so NRC and tools that test for the key see completed nodes, "
        "and nodegate never backfills a node NRC completed. Its value is the lift's time "
        '(RFC 3339), where NRC wrote {"rule-name": "<rule>"}.' + legacy
    )
