"""The label-to-taint kopf operator (github.com/ronsevetoci/oke-label-taint-operator): one label
implies a taint with the same key and value, into one `labelTaints` rule.

What it does, read from label_to_taint_operator.py at 514dd46: its settings are three constants
(`LABEL_KEY = "dedicated"`, `LABEL_VALUE = "ci"`, `TAINT_EFFECT = "NoSchedule"`); on every Node
ADDED/MODIFIED event it adds `LABEL_KEY=LABEL_VALUE:TAINT_EFFECT` when the node carries the label
with that value, and removes that exact taint when it does not, patching the whole taint list
without a resourceVersion. Its README recommends registering nodes with the same taint through
`--register-with-taints` in `oke-init.sh`, and periodic reconciliation as a fallback.
"""

from __future__ import annotations

from nodegate.core.text.errors import Problem, RulesError
from nodegate.core.text.k8s_names import (
    kubelet_may_set_label,
    label_value_problem,
    qualified_name_problem,
)
from nodegate.migrate.conversion import Conversion, rule_name, rules_document
from nodegate.migrate.defaults import LABEL_KEY, LABEL_VALUE, TAINT_EFFECT

COMMAND = "nodegate migrate label-to-taint"
SOURCE = "the operator's constants (LABEL_KEY, LABEL_VALUE, TAINT_EFFECT)"


def convert_label_to_taint(
    label_key: str = LABEL_KEY, label_value: str = LABEL_VALUE, effect: str = TAINT_EFFECT
) -> Conversion:
    """The operator's three constants as one label taint rule."""
    # Checked here, before they are used twice (label and taint), so each is reported once.
    problems = [
        Problem(0, 0, SOURCE, (flag,), f"'{text}': {problem}")
        for flag, text, problem in (
            ("--label-key", label_key, qualified_name_problem(label_key)),
            ("--label-value", label_value, label_value_problem(label_value)),
        )
        if problem
    ]
    if problems:
        raise RulesError(problems)
    taint = f"{label_key}={label_value}:{effect}"
    notes = [
        "Born tainted: instead of typing --register-with-taints into oke-init.sh, add the pool "
        f"under nodePools with labels {{{label_key}: {label_value}}}; `nodegate render --pool "
        f"NAME` then writes --register-with-taints={taint} into its cloud-init, derived from "
        "this rule.",
        f"A node carrying {label_key}:{effect} with another value: the operator added a second "
        "one (which the API refuses, so it failed on every event); nodegate owns "
        f"{label_key}:{effect} and sets the value to '{label_value}'.",
        "Periodic reconciliation, the operator's optional fallback, is built in: a full pass "
        "every --resync-seconds (default 300).",
        "Writes: the operator replaced the whole taint list without a resourceVersion, so a "
        "taint another controller added at the same moment could be lost; nodegate writes "
        "with the resourceVersion it read and re-plans on a conflict.",
    ]
    if effect == "NoExecute":
        notes.append("nodegate adds timeAdded to the NoExecute taint; the operator did not.")
    rule: dict[str, object] = {
        "name": rule_name(f"{label_key.rpartition('/')[2]}-{label_value}", []),
        "match": {"labels": {label_key: label_value}},
        "taint": {"key": label_key, "value": label_value, "effect": effect},
    }
    if kubelet_may_set_label(label_key):
        rule["nodeMayLift"] = True
        notes.append(
            f"Trust: '{label_key}' is a label the node's own kubelet may change, so a compromised "
            "node could lift this taint by removing it (as it could under the operator). The "
            "rule says so (nodeMayLift: true); to close that, match a "
            f"'node-restriction.kubernetes.io/{label_key.rpartition('/')[2]}' label instead, "
            "which only admins and provisioning can set (docs/reconciler.md, Security)."
        )
    return Conversion(
        command=COMMAND,
        source=SOURCE,
        rules=rules_document(labelTaints=[rule]),
        notes=tuple(notes),
        places={
            ("labelTaints", 0, "taint", "key"): ("--label-key",),
            ("labelTaints", 0, "taint", "value"): ("--label-value",),
            ("labelTaints", 0, "taint", "effect"): ("--effect",),
            ("labelTaints", 0, "taint"): ("--label-key",),
        },
    )
