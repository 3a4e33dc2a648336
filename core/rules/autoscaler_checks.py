"""Startup gates checked against the autoscaler in front of each pool, each finding with its fix.

One pure function, used by `nodegate validate` (the rules alone) and by the Pulumi program
(where the stack config can make an AKS pool autoscaled by AKS's managed cluster-autoscaler).
Errors stop the rules everywhere; warnings are printed and do not.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from nodegate.core.rules.autoscalers import (
    CA_MAX_TOTAL_UNREADY_PERCENTAGE,
    CA_OK_TOTAL_UNREADY_COUNT,
    CA_STARTUP_WINDOW,
    CAPACITY_TYPE_LABEL,
    CAPACITY_TYPES,
    IGNORE_PREFIX_SINCE,
    KARPENTER_NRC_PREFIX_SINCE,
    KPO_KARPENTER_VERSION,
    STARTUP_PREFIX_SINCE,
    STARTUP_TAINT_PREFIX,
    STARTUP_TAINT_PREFIX_FLAG_SINCE,
    format_version,
    is_ca_gate_key,
    karpenter_knows_nrc_prefix,
    prefix_known,
    renamed_key,
)
from nodegate.core.rules.model import Autoscaler, NodePool, NodeRules, StartupGate
from nodegate.core.rules.providers import default_node_classes, provider_profile
from nodegate.core.rules.rule_kinds import TaintRule
from nodegate.core.text.durations import format_duration
from nodegate.core.text.errors import DocPath, Severity
from nodegate.core.text.k8s_names import READINESS_TAINT_PREFIX, is_readiness_taint

MANAGED_CA = Autoscaler(type="cluster-autoscaler", managed=True)
"""What an AKS pool with `autoscaling` in the stack config runs when the rules say nothing."""


@dataclass(frozen=True)
class Finding:
    """One thing to fix (error) or to know (warning), at a path in the rules document."""

    pool: str
    """The pool whose autoscaler the finding is about."""
    severity: Severity
    path: DocPath
    message: str


def autoscaler_findings(
    rules: NodeRules, overrides: Mapping[str, Autoscaler] | None = None
) -> list[Finding]:
    """Every finding for every pool's gates; `overrides` give pools without an `autoscaler`
    in the rules the one their stack config implies (by pool name)."""
    findings: list[Finding] = []
    for index, pool in enumerate(rules.node_pools):
        autoscaler = pool.autoscaler or (overrides or {}).get(pool.name)
        if autoscaler is None or autoscaler.type == "none":
            continue
        findings += _pool_findings(index, pool, autoscaler)
        labels = pool.eventual_labels()
        for attribute, kind in rules.rule_kinds():
            if kind.kind.at_registration != "startup":
                continue
            for at, rule in enumerate(getattr(rules, attribute)):
                if rule.born_with(labels):
                    findings += _gate_findings((kind.kind.field, at), rule, pool, autoscaler)
    return findings


def _pool_findings(index: int, pool: NodePool, autoscaler: Autoscaler) -> Iterator[Finding]:
    path: DocPath = ("nodePools", index, "autoscaler")
    yield from _capacity_types(path, pool, autoscaler)
    rendered = autoscaler.type == "karpenter" and autoscaler.external_startup_taints is None
    default = provider_profile(pool.provider).karpenter_node_class
    if rendered and default is None and autoscaler.node_class_ref is None:
        defaults = default_node_classes()
        classes = ", ".join(f"{c.offered_by}'s {c.kind} '{c.name}'" for c in defaults.values())
        yield Finding(
            pool.name,
            "error",
            path,
            f"pool '{pool.name}' ({pool.provider}) runs on Karpenter: give its nodeClassRef "
            "({group, kind, name} of your Karpenter provider's node class); only "
            f"{', '.join(defaults)} pools have a default "
            f"({classes})",
        )


def _capacity_types(path: DocPath, pool: NodePool, karpenter: Autoscaler) -> Iterator[Finding]:
    """A capacity type Karpenter does not know matches no offering: a pool that never grows."""
    for at, requirement in enumerate(karpenter.requirements or ()):
        if requirement.key != CAPACITY_TYPE_LABEL:
            continue
        for value_at, value in enumerate(requirement.values):
            if value in CAPACITY_TYPES:
                continue
            oracle = (
                "; karpenter-provider-oci launches OCI preemptible instances for spot"
                if value.lower() == "preemptible"
                else ""
            )
            yield Finding(
                pool.name,
                "error",
                (*path, "requirements", at, "values", value_at),
                f"'{value}' is not a Karpenter capacity type (pool '{pool.name}'): use "
                f"{', '.join(CAPACITY_TYPES)}{oracle}",
            )


def _gate_findings(
    at: DocPath, gate: TaintRule, pool: NodePool, autoscaler: Autoscaler
) -> Iterator[Finding]:
    """The findings of one rule a node of the pool is born with and nodegate lifts (every kind
    registered as `startup`; `at`: its place in the file): the autoscaler must read its taint
    as temporary."""
    if autoscaler.type == "karpenter":
        yield from _karpenter(at, gate, pool, autoscaler)
        return
    yield from _cluster_autoscaler_key(at, gate, pool, autoscaler)
    if isinstance(gate, StartupGate):  # the one kind with a timeout
        yield from _cluster_autoscaler_timeout(at, gate, pool)


def _cluster_autoscaler_key(
    at: DocPath, gate: TaintRule, pool: NodePool, ca: Autoscaler
) -> Iterator[Finding]:
    key = gate.taint.key
    version = ca.parsed_version
    if prefix_known(key, version) or (not ca.is_managed and _flag_covers(ca, key)):
        return
    who = (
        "a managed cluster-autoscaler (OKE add-on, AKS: no --startup-taint flag)"
        if ca.is_managed
        else f"cluster-autoscaler {ca.version}"
    )
    old = version is not None and version < STARTUP_PREFIX_SINCE
    fix = f"rename the key '{renamed_key(key, version)}'" + (
        f" (before {format_version(STARTUP_PREFIX_SINCE)} cluster-autoscaler knows only the "
        "deprecated ignore-taint. prefix)"
        if old
        else ""
    )
    if is_ca_gate_key(key):
        since = (
            STARTUP_PREFIX_SINCE if key.startswith(STARTUP_TAINT_PREFIX) else IGNORE_PREFIX_SINCE
        )
        problem = (
            f"pool '{pool.name}' runs {who}, which reads this prefix as a startup taint only "
            f"from {format_version(since)} on"
        )
    else:
        called = "gate" if isinstance(gate, StartupGate) else gate.kind.field
        problem = (
            f"{called} '{gate.name}' is not a startup taint to {who} in front of pool "
            f"'{pool.name}': it would count a gated node as ready capacity the pending pods "
            "cannot use and add another node, and never scale the pool up from zero"
        )
    path: DocPath = (*at, "taint", "key")
    if ca.is_managed:
        nrc = (
            f" (a managed autoscaler takes no --startup-taint-prefix, so it never reads "
            f"{READINESS_TAINT_PREFIX} keys as startup taints)"
            if is_readiness_taint(key)
            else ""
        )
        yield Finding(pool.name, "error", path, f"{problem}; {fix}{nrc}")
        return
    flag = "--ignore-taint" if old else "--startup-taint"
    listed = (
        f"the key (startupTaint) or the prefix (startupTaintPrefix: [{READINESS_TAINT_PREFIX}])"
        if is_readiness_taint(key)
        else "the key"
    )
    yield Finding(
        pool.name,
        "warning",
        path,
        f"{problem}, unless the autoscaler runs with {flag}={key}{_prefix_flag(key, ca)}: if "
        f"it does, list {listed} in the pool's autoscaler.flags; otherwise {fix}",
    )


def _prefix_flag(key: str, ca: Autoscaler) -> str:
    """For a node-readiness-controller key: the prefix flag that covers every such gate."""
    if not is_readiness_taint(key):
        return ""
    since = STARTUP_TAINT_PREFIX_FLAG_SINCE
    version = ca.parsed_version
    if version is not None and version < since:
        return (
            f" (--startup-taint-prefix={READINESS_TAINT_PREFIX}, which covers every "
            f"{READINESS_TAINT_PREFIX} gate, needs cluster-autoscaler {format_version(since)})"
        )
    return f" or --startup-taint-prefix={READINESS_TAINT_PREFIX}"


def _flag_covers(ca: Autoscaler, key: str) -> bool:
    # (The model refuses a prefix flag on a cluster-autoscaler older than the flag.)
    flags = ca.flags
    return flags is not None and (
        key in flags.startup_taint
        or key in flags.ignore_taint
        or any(key.startswith(p) for p in flags.startup_taint_prefix)
    )


def _cluster_autoscaler_timeout(
    at: DocPath, gate: StartupGate, pool: NodePool
) -> Iterator[Finding]:
    window = format_duration(CA_STARTUP_WINDOW)
    consequence = (
        f"a node still gated after {window} counts as unready to cluster-autoscaler "
        f"(--max-node-startup-time), and more than {CA_OK_TOTAL_UNREADY_COUNT} unready nodes "
        f"that are also over {CA_MAX_TOTAL_UNREADY_PERCENTAGE}% of the cluster stop it "
        "cluster-wide"
    )
    if gate.timeout is None:
        yield Finding(
            pool.name,
            "warning",
            at,
            f"gate '{gate.name}' on autoscaled pool '{pool.name}' waits forever: {consequence}; "
            f"set a timeout below {window} (and onTimeout: lift if the node is usable anyway)",
        )
    elif gate.timeout >= CA_STARTUP_WINDOW:
        yield Finding(
            pool.name,
            "warning",
            (*at, "timeout"),
            f"timeout {format_duration(gate.timeout)} of gate '{gate.name}' on autoscaled pool "
            f"'{pool.name}' reaches cluster-autoscaler's {window} start-up window: "
            f"{consequence}; set it below {window}",
        )


def _karpenter(
    at: DocPath, gate: TaintRule, pool: NodePool, karpenter: Autoscaler
) -> Iterator[Finding]:
    declared = karpenter.external_startup_taints
    if declared is None:  # nodegate renders the NodePool: every gate is in its startupTaints
        return
    if gate.taint.identity in {t.identity for t in declared}:
        return
    version = karpenter.parsed_version
    key = gate.taint.key
    if is_readiness_taint(key) and karpenter_knows_nrc_prefix(version):
        return  # an ephemeral taint to this Karpenter, listed or not (karpenter#3025)
    yield Finding(
        pool.name,
        "error",
        (*at, "taint"),
        f"gate {key}:{gate.taint.effect} is not in the startupTaints of Karpenter "
        f"NodePool '{pool.karpenter_node_pool}' (pool '{pool.name}'): Karpenter would read the "
        "gated node as unusable for the pending pods and keep provisioning new ones; add "
        f"{{key: {key}, effect: {gate.taint.effect}}} to that NodePool's "
        "spec.template.spec.startupTaints and to this pool's autoscaler.externalStartupTaints"
        + _karpenter_key_advice(key, version),
    )


def _karpenter_key_advice(key: str, version: tuple[int, int] | None) -> str:
    """The other way out: a `readiness.k8s.io/` key on a Karpenter that treats it as startup."""
    since = f"v{format_version(KARPENTER_NRC_PREFIX_SINCE)}.0"
    if version is not None and karpenter_knows_nrc_prefix(version):
        name = key.rpartition("/")[2]
        return (
            f", or rename the gate '{READINESS_TAINT_PREFIX}{name}': Karpenter from {since} treats "
            f"{READINESS_TAINT_PREFIX} keys as startup taints without being listed"
        )
    if is_readiness_taint(key):
        kpo = f"v{format_version(KPO_KARPENTER_VERSION)}.2"
        said = (
            "no autoscaler.version is given"
            if version is None
            else f"Karpenter v{format_version(version)} is older"
        )
        return (
            f"; Karpenter from {since} treats {READINESS_TAINT_PREFIX} keys as startup taints "
            f"without being listed, but {said} (karpenter-provider-oci v1.0.0 is built on "
            f"{kpo}): if yours is that new, set autoscaler.version"
        )
    return ""
