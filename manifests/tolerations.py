"""What the reconciler's pods tolerate: the settings' tolerations and, always, its own gates.

The reconciler is what lifts startup gates, so it must be able to run on a node that carries
one, whatever the gate's effect. On a new cluster, a replaced pool or a pool scaled from zero
every node may be gated; a pod that does not tolerate a `NoExecute` gate (Cilium's
`node.cilium.io/agent-not-ready` is one) then stays Pending, and nothing ever lifts the gates
(kubernetes-sigs/node-readiness-controller#98 is the same deadlock).

Why exactly the gates (key and effect, `operator: Exists`) rather than a blanket `NoExecute`
toleration as node-readiness-controller's chart has: a toleration of every `NoExecute` taint
tolerates `node.kubernetes.io/unreachable` and `not-ready` for ever, so a replica on a dead node
is never evicted and the Deployment never replaces it; and it would keep the pods on nodes a
condition rule (or anyone else) taints `NoExecute` to empty them. node-readiness-controller
tolerates broadly only because its gates are any `readiness.k8s.io/*` key and Kubernetes has no
wildcard toleration; nodegate knows every gate key from the rules. `Exists`, not `Equal`: the
value is not part of a gate's identity (key and effect are, as for the planner), and a node
born with another value is still gated.

With rules from NodeRules objects the manifests know only the gates of the rules given to them;
a team's object applied later may bring a `NoExecute` gate, so every `NoExecute` taint is also
tolerated for `DeploySettings.unknown_gate_seconds` (300 s), listed last: a later gate no longer
keeps the reconciler off a pool born gated, the known gates stay tolerated for ever (the first
match decides), and a dead node still evicts the pods, after the 300 s Kubernetes itself gives
an unreachable node.

Pure: rules and settings in, tolerations out (the Deployment's one dependency on the rules:
`nodegate.manifests.build`).

`nodegate validate` prints what the gates mean here (`describe_gate_tolerations`) and needs no
deploy settings: their model is imported by the functions that build tolerations, so a
`validate` does not pay for building it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nodegate.core.rules.model import NodeRules, Taint

if TYPE_CHECKING:
    from nodegate.manifests.settings import DeploySettings, Toleration


def gate_taints(rules: NodeRules) -> tuple[Taint, ...]:
    """Every taint nodes are born with and nodegate lifts (a startup gate's, a node agent's:
    every kind registered as `startup`), one per key and effect, former keys included: a node
    still born with a gate's former key is gated as much as one with its key."""
    taints = {
        taint.identity: taint
        for rule in rules.taint_rules()
        if rule.kind.at_registration == "startup"
        for taint in (rule.taint, *rule.former_taints)
    }
    return tuple(taints.values())


def gate_tolerations(rules: NodeRules) -> tuple[Toleration, ...]:
    """One toleration per gate taint (`gate_taints`; key and effect, any value): the
    reconciler that lifts them must run on nodes that carry them."""
    from nodegate.manifests.settings import Toleration  # noqa: PLC0415  (see the docstring)

    return tuple(
        Toleration(key=t.key, operator="Exists", effect=t.effect) for t in gate_taints(rules)
    )


def pod_tolerations(rules: NodeRules, settings: DeploySettings) -> list[dict[str, Any]]:
    """The Deployment's `tolerations`: the gates' first, then the settings', then, with rules
    from objects, every NoExecute taint for a while (minus repeats).

    The gates come first and are not part of the settings, so no `tolerations` setting can
    drop them; first, because the taint manager evicts by the first toleration that matches a
    `NoExecute` taint, so a setting with `tolerationSeconds` cannot time the pods out of a
    gated node either. Why the NoExecute taints come last: the module docstring.
    """
    from nodegate.manifests.settings import Toleration  # noqa: PLC0415  (see the docstring)

    seconds = settings.unknown_gate_seconds
    unknown = (
        (Toleration(operator="Exists", effect="NoExecute", toleration_seconds=seconds),)
        if settings.rules_source == "objects" and seconds is not None
        else ()
    )
    listed: list[dict[str, Any]] = []
    for toleration in (*gate_tolerations(rules), *settings.tolerations, *unknown):
        entry = toleration.model_dump(by_alias=True, exclude_none=True)
        if entry not in listed:
            listed.append(entry)
    return listed


def describe_gate_tolerations(rules: NodeRules) -> str | None:
    """The line `nodegate validate` prints: what the reconciler's Deployment tolerates because
    of these rules (None: no gates, nothing to say), so a gate's effect surprises no one at
    deploy time. Informational: tolerating exactly its own gates is never the risky part."""
    gates = gate_taints(rules)
    if not gates:
        return None
    listed = ", ".join(f"{t.key}:{t.effect}" for t in gates)
    return (
        f"the reconciler's Deployment tolerates its gates ({listed}, any value) besides the "
        "deploy settings' tolerations"
    )
