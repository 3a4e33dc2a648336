"""Checks that span several rules, run over the raw document.

They read the plain data rather than the typed model so that they still run (and report) when
other parts of the file are broken: a user fixes every problem in one pass.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nodegate.core.rules.model import POOL_LABEL, TRUSTED_POOL_LABEL, NodeRules
from nodegate.core.rules.providers import PROFILES, provider_profile
from nodegate.core.text.errors import DocPath
from nodegate.core.text.errors import format_path as _at
from nodegate.core.text.k8s_names import kubelet_may_set_label

RawProblem = tuple[DocPath, str]
RULE_SECTIONS = tuple(kind.kind.field for _, kind in NodeRules.rule_kinds())
"""Every list of taint-making rules (`NodeRules.rule_kinds`): names and taints are unique
across them."""
STARTUP_SECTIONS = frozenset(
    kind.kind.field for _, kind in NodeRules.rule_kinds() if kind.kind.at_registration == "startup"
)
"""The lists of rules nodes are born gated by and nodegate lifts: their taint must be their own
(lifting it would fight another rule that wants it)."""


def _items(doc: dict[str, Any], section: str) -> Iterator[tuple[int, dict[str, Any]]]:
    items = doc.get(section)
    if isinstance(items, list):
        for index, item in enumerate(items):
            if isinstance(item, dict):
                yield index, item


def _duplicate_names(doc: dict[str, Any]) -> Iterator[RawProblem]:
    seen: dict[str, DocPath] = {}
    for section in RULE_SECTIONS:
        for index, rule in _items(doc, section):
            name = rule.get("name")
            if not isinstance(name, str):
                continue
            if name in seen:
                yield (
                    (section, index, "name"),
                    f"rule name '{name}' is already used by {_at(seen[name])}; rule names are "
                    "the reason shown in events and metrics and must be unique",
                )
            else:
                seen[name] = (section, index)


def _conflicting_taints(doc: dict[str, Any]) -> Iterator[RawProblem]:
    first: dict[tuple[str, str], tuple[DocPath, str, str]] = {}
    for section in RULE_SECTIONS:
        for index, rule in _items(doc, section):
            taint = rule.get("taint")
            if not isinstance(taint, dict):
                continue
            key, effect, value = taint.get("key"), taint.get("effect"), str(taint.get("value", ""))
            if not (isinstance(key, str) and isinstance(effect, str)):
                continue
            here: DocPath = (section, index, "taint")
            if (key, effect) not in first:
                first[(key, effect)] = (here, section, value)
                continue
            other_path, other_section, other_value = first[(key, effect)]
            if STARTUP_SECTIONS & {section, other_section}:
                yield (
                    here,
                    f"taint {key}:{effect} is also the taint of {_at(other_path)}; a startup "
                    "gate's taint must be its own (lifting the gate would fight the other rule)",
                )
            elif value != other_value:
                yield (
                    (*here, "value"),
                    f"taint {key}:{effect} wants value '{value}' but {_at(other_path)} wants "
                    f"'{other_value}'; a node can carry one {key}:{effect} taint, so give both "
                    "rules the same value or different keys",
                )


def _former_keys(doc: dict[str, Any]) -> Iterator[RawProblem]:
    """A gate's former key is retired: the gate lifts it, so no other rule may use it, and no
    two gates may claim it (each would lift it on its own readiness)."""
    in_use: dict[str, DocPath] = {}
    for section in RULE_SECTIONS:
        for index, rule in _items(doc, section):
            taint = rule.get("taint")
            key = taint.get("key") if isinstance(taint, dict) else None
            if isinstance(key, str):
                in_use.setdefault(key, (section, index, "taint", "key"))
    claimed: dict[str, DocPath] = {}
    for index, gate in _items(doc, "startupGates"):
        former = gate.get("formerKeys")
        for position, key in enumerate(former if isinstance(former, list) else []):
            if not isinstance(key, str):
                continue
            here: DocPath = ("startupGates", index, "formerKeys", position)
            used = in_use.get(key)
            if used is not None and used[:2] != ("startupGates", index):
                yield (
                    here,
                    f"'{key}' is the taint key of {_at(used[:2])}; a former key is retired and "
                    "lifted with this gate, so no current rule may use it: drop it here, or "
                    "change that rule's key",
                )
            elif key in claimed and claimed[key][:2] != ("startupGates", index):
                yield (
                    here,
                    f"'{key}' is already a former key of {_at(claimed[key][:2])}; each gate "
                    "would lift it on its own readiness: list it under one gate",
                )
            claimed.setdefault(key, here)


def _annotations(doc: dict[str, Any]) -> Iterator[RawProblem]:
    """Each startup gate's completionAnnotation is its own (each gate would overwrite the
    other's time). The node-agent rules naming one firstReadyAnnotation share it (written once,
    when the node is without all their taints); a startup gate writing the same key would
    overwrite it."""
    gates: dict[str, DocPath] = {}
    for index, gate in _items(doc, "startupGates"):
        annotation = gate.get("completionAnnotation")
        key = annotation.get("key") if isinstance(annotation, dict) else None
        if not isinstance(key, str):
            continue
        if key in gates:
            yield (
                ("startupGates", index, "completionAnnotation", "key"),
                f"'{key}' is also the completionAnnotation of {_at(gates[key])}; each gate "
                "would overwrite the other's time: give each gate its own key",
            )
        gates.setdefault(key, ("startupGates", index))
    for index, rule in _items(doc, "nodeAgents"):
        key = rule.get("firstReadyAnnotation")
        if isinstance(key, str) and key in gates:
            yield (
                ("nodeAgents", index, "firstReadyAnnotation"),
                f"'{key}' is also the completionAnnotation of {_at(gates[key])}; each would "
                "write its own time in it: give each its own key",
            )


def _pool_labels(doc: dict[str, Any]) -> Iterator[RawProblem]:
    seen_pools: dict[str, int] = {}
    for index, pool in _items(doc, "nodePools"):
        name = pool.get("name")
        if isinstance(name, str):
            if name in seen_pools:
                yield (
                    ("nodePools", index, "name"),
                    f"pool name '{name}' is already used by nodePools[{seen_pools[name]}]",
                )
            seen_pools.setdefault(name, index)
        # A provider the model refuses has no profile: the model reports it.
        profile = PROFILES.get(str(pool.get("provider")))
        labels = _mapping(pool.get("labels"))
        extra = _mapping(pool.get("reconcilerLabels"))
        for section, keys in (("labels", labels), ("reconcilerLabels", extra)):
            for key in keys:
                path: DocPath = ("nodePools", index, section, str(key))
                if key == TRUSTED_POOL_LABEL:
                    yield (
                        path,
                        f"'{TRUSTED_POOL_LABEL}' is set when the node registers, from "
                        f"'{POOL_LABEL}' (by nodegate's Node admission webhook); remove it",
                    )
                    continue
                if key == POOL_LABEL:
                    yield (
                        path,
                        f"'{POOL_LABEL}' is set by nodegate itself to the pool's name; remove it",
                    )
                elif section == "labels" and not kubelet_may_set_label(str(key)):
                    yield (
                        path,
                        f"a kubelet may not set '{key}' on its own Node (NodeRestriction; "
                        "kubelet refuses kubernetes.io/k8s.io labels outside its allowed set); "
                        f"move it to nodePools[{index}].reconcilerLabels and the reconciler "
                        "applies it right after the node registers",
                    )
                elif profile and (domain := profile.reserved_label_domain(str(key))):
                    yield (
                        path,
                        f"{profile.title} reserves the '{domain}' label namespace; '{key}' would "
                        "be refused",
                    )
                if section == "labels" and key in extra:
                    yield path, f"'{key}' is also in reconcilerLabels; set it in one place only"


def _mapping(value: object) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}


def _selector_keys(match: object) -> Iterator[tuple[DocPath, str]]:
    """(path under the rule, key) of every label a selector reads."""
    selector = _mapping(match)
    for key in _mapping(selector.get("labels")):
        yield ("match", "labels", str(key)), str(key)
    expressions = selector.get("expressions")
    for index, expression in enumerate(expressions if isinstance(expressions, list) else []):
        key = _mapping(expression).get("key")
        if isinstance(key, str):
            yield ("match", "expressions", index, "key"), key


def _node_liftable_label_rules(doc: dict[str, Any]) -> Iterator[RawProblem]:
    """A label rule whose input the node itself may change lets a compromised node lift its
    own taint (remove the label, or add the one a NotIn/DoesNotExist excludes): refused unless
    the rule says it accepts that (docs/reconciler.md, "Security")."""
    for index, rule in _items(doc, "labelTaints"):
        if rule.get("nodeMayLift") is True:
            continue
        for path, key in _selector_keys(rule.get("match")):
            if not kubelet_may_set_label(key):
                continue
            name = key.rpartition("/")[2]
            yield (
                ("labelTaints", index, *path),
                f"'{key}' is a label the node's own kubelet may set and remove "
                "(NodeRestriction allows it), so a compromised node could lift this taint by "
                f"changing it. Match a label only admins and provisioning can write instead, "
                f"e.g. 'node-restriction.kubernetes.io/{name}' (set it in the pool's "
                "reconcilerLabels, a Karpenter NodePool's labels, or with kubectl), or accept "
                f"the risk with labelTaints[{index}].nodeMayLift: true",
            )


def cross_rule_problems(doc: dict[str, Any]) -> list[RawProblem]:
    return [
        *_duplicate_names(doc),
        *_conflicting_taints(doc),
        *_former_keys(doc),
        *_annotations(doc),
        *_pool_labels(doc),
        *_node_liftable_label_rules(doc),
    ]


def pool_problems(rules: NodeRules) -> Iterator[RawProblem]:
    """Checks that need the typed rules: what each pool's nodes would be born with."""
    for pool in rules.node_pools:
        profile = provider_profile(pool.provider)
        field = profile.taints_need_values_in
        if field is None:
            continue
        labels = pool.eventual_labels()
        for index, rule in enumerate(rules.label_taints):
            if rule.match.matches(labels) and not rule.taint.value:
                yield (
                    ("labelTaints", index, "taint"),
                    f"taint {rule.taint.key}:{rule.taint.effect} has no value but goes into the "
                    f"{field} of {profile.title} pool '{pool.name}', which {profile.title} takes "
                    'only as key=value:Effect; give the taint a value, e.g. value: "present"',
                )
