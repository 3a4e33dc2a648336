"""What one node should look like under the rules, and the smallest change that gets it there.

Pure: no API calls, no clock. The caller passes the facts the planner cannot see on the Node
itself (the time, which init pods are Ready, which persisted labels to restore). The reconciler,
`nodegate explain`, the demo and the benchmarks all call this one function. Label and condition
taints are decided here; startup gates in `gate_plan.py`; the plan merges both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta

from nodegate.core.decisions.agent_plan import first_ready_annotations
from nodegate.core.decisions.dry_run import (
    PERSISTENT_LABELS_RULE,
    DryRunAction,
    DryRunChange,
    dry_run_rules,
    hands_off,
)
from nodegate.core.decisions.node_trust import pool_membership, registration_seal, seal_taint
from nodegate.core.decisions.rule_outcomes import rule_outcome
from nodegate.core.decisions.verdicts import PlanFacts, RuleDecision, RuleOutcome
from nodegate.core.rules.conditions import condition_types_read
from nodegate.core.rules.model import POOL_LABEL, TRUSTED_POOL_LABEL, NodeRules
from nodegate.core.rules.node import NodeState, NodeTaint, format_time
from nodegate.core.rules.node_marks import OWNED_TAINTS_ANNOTATION
from nodegate.core.rules.registration import TaintConflictError, registration_taints
from nodegate.core.text.k8s_names import is_readiness_taint, taint_key_owner


@dataclass(frozen=True)
class TaintChange:
    taint: NodeTaint
    rules: tuple[str, ...]
    why: str


@dataclass(frozen=True)
class LabelChange:
    key: str
    value: str
    why: str


@dataclass(frozen=True)
class NodePlan:
    """The changes one node needs. Empty means: zero writes."""

    node: str
    decisions: tuple[RuleDecision, ...] = ()
    add_taints: tuple[TaintChange, ...] = ()
    remove_taints: tuple[TaintChange, ...] = ()
    set_labels: tuple[LabelChange, ...] = ()
    owned_annotation: str | None = None
    """New value of the ownership annotation; None: unchanged; '': remove it."""
    recheck_after: timedelta | None = None
    """When the verdict may change with time alone (a `for` hold or gate timeout running)."""
    warnings: tuple[str, ...] = ()
    set_annotations: tuple[tuple[str, str | None], ...] = ()
    """Annotations to set (None: remove): startup gates' completion and re-gate records."""
    lifted_gates: tuple[str, ...] = ()
    timed_out_gates: tuple[str, ...] = ()
    gates_put_back: tuple[str, ...] = ()
    """Gates this plan adds back: re-gated after a reboot, or backfilled."""
    adopted_taints: tuple[TaintChange, ...] = ()
    """Taints already on the node, unclaimed, that this plan records as owned (the owned
    annotation carries them): each is reported as adopted once written."""
    dry_run: tuple[DryRunChange, ...] = ()
    """What the dry-run rules would change: reported, never written
    (`nodegate.core.decisions.dry_run`)."""

    @property
    def is_empty(self) -> bool:
        return (
            not (self.add_taints or self.remove_taints or self.set_labels or self.set_annotations)
            and self.owned_annotation is None
        )

    def taints_only(self) -> NodePlan | None:
        """This plan's taint changes alone, if it has any besides other changes.

        What the API server refuses in a node write is almost always metadata the node itself
        can spoil (its own annotations filled to the size limit, a label it set): the taints,
        which protect workloads and lift gates, must not be held hostage by it.
        """
        has_other = (
            bool(self.set_labels or self.set_annotations) or self.owned_annotation is not None
        )
        if not (self.add_taints or self.remove_taints) or not has_other:
            return None
        return replace(
            self, set_labels=(), set_annotations=(), owned_annotation=None, adopted_taints=()
        )


def plan(node: NodeState, rules: NodeRules, facts: PlanFacts) -> NodePlan:
    """The changes that make `node` what `rules` want. Only rule-owned taints are ever removed;
    the dry-run rules' changes are reported (`NodePlan.dry_run`), never written."""
    dry = dry_run_rules(rules)
    restore_dry = rules.persistent_labels is not None and rules.persistent_labels.dry_run
    live = _plan_once(node, rules, facts, dry, restore=not restore_dry)
    if not dry and not (restore_dry and facts.restored_labels):
        return live
    full = _plan_once(node, rules, facts, frozenset(), restore=True)
    return replace(live, dry_run=_would_be(full, live, dry))


def _plan_once(
    node: NodeState, rules: NodeRules, facts: PlanFacts, dry: frozenset[str], restore: bool
) -> NodePlan:
    """The plan with the `dry` rules' verdicts left out (their taints hands-off), and with the
    persisted labels restored or not."""
    if not restore:
        facts = replace(facts, restored_labels={})
    label_changes = _label_changes(node, rules, facts)
    labels = {**node.labels, **{c.key: c.value for c in label_changes}}
    outcomes = [rule_outcome(node, labels, rule, facts) for rule in rules.taint_rules()]
    rechecks = [o.recheck for o in outcomes if o.recheck is not None]
    live = [o for o in outcomes if o.decision.rule not in dry]
    warnings = [o.warning for o in live if o.warning]
    if (claim := pool_membership(node.labels, node.taints, rules).untrusted_claim) is not None:
        warnings.append(
            f"node claims pool '{claim}' but carries no {TRUSTED_POOL_LABEL} label (set when it "
            "registers): its reconcilerLabels are not applied"
        )

    decisions = [o.decision for o in outcomes] + [d for o in outcomes for d in o.former]
    decisions = [_waiting(d, node, facts) for d in decisions]
    settled = _settle(
        node,
        rules,
        facts,
        [d for d in decisions if d.rule not in dry],
        live,
        hands_off(rules) if dry else frozenset(),
    )
    return replace(
        settled,
        decisions=tuple(decisions),
        set_labels=tuple(label_changes),
        recheck_after=min(rechecks) if rechecks else None,
        warnings=tuple(warnings),
        timed_out_gates=tuple(o.decision.rule for o in live if o.timed_out),
    )


def _settle(
    node: NodeState,
    rules: NodeRules,
    facts: PlanFacts,
    decisions: list[RuleDecision],
    outcomes: list[RuleOutcome],
    untouched: frozenset[tuple[str, str]],
) -> NodePlan:
    """The taint, ownership and gate-record changes the verdicts call for; `untouched` taints
    (named by dry-run rules only) are neither added, removed nor claimed anew."""
    wanted: dict[tuple[str, str], list[RuleDecision]] = {}
    kept: dict[tuple[str, str], list[RuleDecision]] = {}
    for d in decisions:
        if d.verdict == "want":
            wanted.setdefault(d.taint.identity, []).append(d)
        elif d.verdict == "keep":
            kept.setdefault(d.taint.identity, []).append(d)

    add: list[TaintChange] = []
    remove: list[TaintChange] = []
    for identity, wanting in sorted(wanted.items()):
        desired = wanting[0].taint
        current = node.taint(identity)
        names = tuple(sorted({d.rule for d in wanting}))
        if current is not None and current.value == desired.value:
            continue
        if current is not None:
            remove.append(TaintChange(current, names, f"value changes to '{desired.value}'"))
        time_added = format_time(facts.now) if desired.effect == "NoExecute" else None
        why = "; ".join(sorted({d.why for d in wanting}))
        add.append(
            TaintChange(
                NodeTaint(desired.key, desired.effect, desired.value, time_added), names, why
            )
        )

    owned = removable_taints(node, rules, facts.previously_owned) - untouched
    releasing = {d.taint.identity: d for d in decisions if d.verdict == "release"}
    for taint in node.taints:
        identity = taint.identity
        if identity in wanted or identity in kept or identity not in owned:
            continue
        if identity in releasing:
            reason = releasing[identity]
            remove.append(TaintChange(taint, (reason.rule,), reason.why))
        else:
            remove.append(TaintChange(taint, (), "no rule in the rules file owns it any more"))

    remove += _seal_removal(node)
    removed = {c.taint.identity for c in remove}
    after = [t for t in node.taints if t.identity not in removed] + [c.taint for c in add]
    # Former gate keys are lifted, never claimed: once dropped from formerKeys, they are left.
    former = rules.former_gate_taints()
    claimed = parse_ownership(node.annotations.get(OWNED_TAINTS_ANNOTATION, ""))
    managed = sorted(
        {
            t.identity
            for t in after
            if t.identity in wanted
            or (t.identity in kept.keys() - former)
            or (t.identity in untouched and t.identity in claimed)
        }
    )
    annotation = ",".join(f"{key}:{effect}" for key, effect in managed)
    current_annotation = node.annotations.get(OWNED_TAINTS_ANNOTATION)
    new_annotation = None if annotation == (current_annotation or "") else annotation

    added = {c.taint.identity for c in add}
    adopted = _adopted(node, rules, managed, claimed | added, {**kept, **wanted})
    lifted = [o for o in outcomes if o.lift and o.carried & removed]
    put_back = [o for o in outcomes if o.put_back and o.decision.taint.identity in added]
    recorded = [o for o in outcomes if o.recorded]
    annotations = [a for o in (*lifted, *put_back, *recorded) for a in o.annotations]
    annotations += first_ready_annotations(
        node, rules, (o.decision for o in outcomes), after, facts.now
    )
    return NodePlan(
        node=node.name,
        add_taints=tuple(add),
        remove_taints=tuple(sorted(remove, key=lambda c: c.taint.identity)),
        owned_annotation=new_annotation,
        set_annotations=tuple(annotations),
        lifted_gates=tuple(g.decision.rule for g in lifted),
        gates_put_back=tuple(g.decision.rule for g in put_back),
        adopted_taints=adopted,
    )


def _adopted(
    node: NodeState,
    rules: NodeRules,
    managed: list[tuple[str, str]],
    not_new: set[tuple[str, str]] | frozenset[tuple[str, str]],
    deciding: Mapping[tuple[str, str], list[RuleDecision]],
) -> tuple[TaintChange, ...]:
    """Taints this plan claims that were on the node, unclaimed, before nodegate wanted them
    (another tool's, or left by hand): adopted, so they are reported. A taint the node's own
    pool is born with (nodegate's bootstrap put it there) is not adoption."""
    found = [i for i in managed if i not in not_new and node.taint(i) is not None]
    if not found:
        return ()
    pool = rules.pool(node.labels.get(POOL_LABEL, ""))
    try:
        born = {t.identity for t in registration_taints(rules, pool)} if pool is not None else set()
    except TaintConflictError:
        born = set()  # rules built in code, never a validated file: nothing is born with
    why = "already on the node, not claimed: adopted"
    return tuple(
        TaintChange(taint, tuple(sorted({d.rule for d in deciding.get(i, ())})), why)
        for i in found
        if i not in born and (taint := node.taint(i)) is not None
    )


def _would_be(full: NodePlan, live: NodePlan, dry: frozenset[str]) -> tuple[DryRunChange, ...]:
    """What the plan with every rule live does that the written plan does not, by rule."""
    why_of = {d.rule: d.why for d in full.decisions}
    lifted = set(full.lifted_gates) - set(live.lifted_gates)
    put_back = set(full.gates_put_back) - set(live.gates_put_back)
    changes = [DryRunChange(g, "lift_gate", g, why_of.get(g, "")) for g in sorted(lifted)]
    changes += [DryRunChange(g, "put_back_gate", g, why_of.get(g, "")) for g in sorted(put_back)]
    live_adds = {(c.taint.identity, c.taint.value) for c in live.add_taints}
    for c in full.add_taints:
        if (c.taint.identity, c.taint.value) not in live_adds:
            changes += _by_dry_rule(c, "add_taint", dry, put_back)
    live_removes = {c.taint.identity for c in live.remove_taints}
    for c in full.remove_taints:
        if c.taint.identity not in live_removes:
            changes += _by_dry_rule(c, "remove_taint", dry, lifted)
    live_adopted = {c.taint.identity for c in live.adopted_taints}
    for c in full.adopted_taints:
        if c.taint.identity not in live_adopted:
            changes += _by_dry_rule(c, "adopt_taint", dry, set())
    live_labels = {(c.key, c.value) for c in live.set_labels}
    changes += [
        DryRunChange(PERSISTENT_LABELS_RULE, "restore_label", f"{c.key}={c.value}", c.why)
        for c in full.set_labels
        if (c.key, c.value) not in live_labels
    ]
    return tuple(changes)


def _by_dry_rule(
    change: TaintChange, action: DryRunAction, dry: frozenset[str], reported: set[str]
) -> list[DryRunChange]:
    """One would-be change per dry-run rule behind it (a gate's lift or put-back is reported
    once, as such, not again as its taint's removal or addition)."""
    names = [r for r in change.rules if r in dry and r not in reported]
    if not change.rules:
        names = ["(deleted rule)"]
    return [DryRunChange(r, action, str(change.taint), change.why) for r in names]


def _waiting(decision: RuleDecision, node: NodeState, facts: PlanFacts) -> RuleDecision:
    """A wanted taint that is not on the node and waits for the eviction budget: kept out."""
    why = facts.budget_waiting.get(decision.rule)
    if why is None or decision.verdict != "want" or node.taint(decision.taint.identity) is not None:
        return decision
    return replace(decision, verdict="keep", why=why)


OWNERSHIP_ANNOTATION_LIMIT = 64 * 1024
"""Longer annotations are not read at all: a real one lists a handful of taints."""


def parse_ownership(text: str) -> frozenset[tuple[str, str]]:
    """Read the ownership annotation ('key:Effect,key:Effect'); unreadable parts are skipped.

    The node itself can write this annotation (a kubelet may edit its own Node's annotations),
    so what it says is only ever a claim, intersected with what rules owned (`removable_taints`).
    """
    if len(text) > OWNERSHIP_ANNOTATION_LIMIT:
        return frozenset()
    owned = set()
    for item in text.split(","):
        key, sep, effect = item.strip().rpartition(":")
        if sep and key and effect:
            owned.add((key, effect))
    return frozenset(owned)


def removable_taints(
    node: NodeState, rules: NodeRules, previously_owned: frozenset[tuple[str, str]]
) -> frozenset[tuple[str, str]]:
    """The taints nodegate may remove from this node, and no others.

    A current rule's taint, or a taint that the node's ownership annotation claims *and* that
    some earlier accepted rules owned (so a deleted rule still cleans up after itself). A claim
    alone is never enough, and a key another controller owns (`node.kubernetes.io/*`,
    Karpenter, the autoscaler...) or a `readiness.k8s.io/` key (node-readiness-controller's,
    which may run side by side) is never removable unless a current rule names it. A gate's
    former keys are named by a current rule too (the planner only ever releases them with
    their gate). A claimed `readiness.k8s.io/` taint whose key a current rule still names
    under another effect is nodegate's own (the rule's effect was edited, as node-readiness-
    controller would delete and re-create the rule): it goes, or the node keeps both.
    """
    current = rules.owned_taints() | rules.former_gate_taints()
    current_keys = {key for key, _ in current}
    claimed = parse_ownership(node.annotations.get(OWNED_TAINTS_ANNOTATION, ""))
    earlier = {
        identity
        for identity in claimed & previously_owned
        if taint_key_owner(identity[0]) is None
        and (not is_readiness_taint(identity[0]) or identity[0] in current_keys)
    }
    return current | earlier


def _seal_removal(node: NodeState) -> list[TaintChange]:
    """The registration seal goes in the write that records it as the trusted pool label."""
    seal = registration_seal(node.taints)
    if seal is None:
        return []
    why = (
        f"registration seal of pool '{seal}' lifted (recorded as {TRUSTED_POOL_LABEL} if "
        "the rules have that pool)"
    )
    return [TaintChange(seal_taint(seal), (), why)]


def _label_changes(node: NodeState, rules: NodeRules, facts: PlanFacts) -> list[LabelChange]:
    changes: dict[str, LabelChange] = {}
    for key, value in sorted(facts.restored_labels.items()):
        if key not in node.labels:
            changes[key] = LabelChange(key, value, "restored persisted label")
    seal = registration_seal(node.taints)
    if seal is not None and TRUSTED_POOL_LABEL not in node.labels and rules.pool(seal):
        changes[TRUSTED_POOL_LABEL] = LabelChange(
            TRUSTED_POOL_LABEL, seal, "pool the node registered in (its registration seal)"
        )
    pool = pool_membership(node.labels, node.taints, rules).pool
    if pool is not None:
        for key, value in sorted(pool.reconciler_labels.items()):
            if node.labels.get(key) != value:
                changes[key] = LabelChange(key, value, f"reconcilerLabels of pool '{pool.name}'")
    return [changes[k] for k in sorted(changes)]


def _conditions_read(node: NodeState, rules: NodeRules) -> tuple[tuple[str, str, str], ...]:
    """The conditions as the rules read them: types no rule reads are left out, and so is a
    reason no rule matches on, so a node churning them costs no reconcile. Their times are not
    read either: since when a state holds is nodegate's first sight (`sightings`), taken as the
    event arrives, and a hold is looked at again when it is due."""
    read = condition_types_read(rules)
    return tuple(
        sorted(
            (c.type, c.status, c.reason if read.reads_reason(c.type) else "")
            for c in node.conditions
            if read(c.type)
        )
    )


def labels_read(rules: NodeRules) -> Callable[[str], bool]:
    """Whether the planner (or the label records, or the eviction budget's scope) reads the
    label `key` under `rules`: every key a rule reads (`NodeRules.reads`: its selectors, the
    pool labels and each pool's labels) and the persisted ones. A node changing any other label
    costs no reconcile."""
    reads = rules.reads()
    if reads.every_label:
        return lambda key: True
    keys = reads.labels()
    persisted = rules.persistent_labels
    return lambda key: key in keys or (persisted is not None and persisted.persists(key))


def annotations_read(rules: NodeRules | None) -> frozenset[str]:
    """The node annotations the planner reads under `rules`: the rules' own (`NodeRules.reads`)
    and the ownership record. The reconciler's cache keeps these (and nodegate's domain)."""
    read = rules.reads().annotations if rules is not None else frozenset()
    return read | {OWNED_TAINTS_ANNOTATION}


def relevant_view(node: NodeState, rules: NodeRules) -> tuple[object, ...]:
    """Everything the planner reads from a node; equal views mean equal plans.

    The reconciler compares views of the old and new object on every watch event, so a heartbeat
    or status update, or a label or annotation no rule reads, that changes nothing here costs no
    work.
    """
    read_annotations = annotations_read(rules)
    reads = labels_read(rules)
    return (
        tuple(sorted((k, v) for k, v in node.labels.items() if reads(k))),
        tuple(sorted((k, v) for k, v in node.annotations.items() if k in read_annotations)),
        tuple(sorted((t.key, t.effect, t.value) for t in node.taints)),
        _conditions_read(node, rules),
        node.created,
        node.boot_id if rules.reads().boot_id else "",
        # What identifies the machine a persisted-label record is kept for (set once at
        # registration, or later while empty): its record is looked up again when it changes.
        (node.provider_id, node.system_uuid) if rules.persistent_labels is not None else (),
    )
