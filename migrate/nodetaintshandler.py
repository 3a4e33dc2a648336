"""nodetaintshandler (github.com/zhangchl007/nodetaintshandler): a Node CREATE webhook adds a
startup taint, a controller lifts it once the node's init DaemonSet pod is Ready, into one
`startupGates` rule plus the Node admission webhook's deployment settings.

What it does, read from its source at fbbabce (pkg/startup/constants.go and controller.go,
pkg/webhook/node_webhook.go, main.go, deploy/deployment.yaml, README.md): its contract is
constants, `startup.k8s.io/initializing=wait:NoSchedule` added on Node CREATE unless the node
has it or is labelled `kubernetes.azure.com/mode=system`; init pods labelled
`startup.k8s.io/component=init`, looked for in every namespace, lift it when PodReady is True
and every container is ready, or when they carry `startup.k8s.io/ready=true`; the lift (a
whole-Node Update retried on conflict) matches the taint by key, value and effect and writes
`startup.k8s.io/completedAt=<unix seconds>`. `STARTUP_BACKFILL=1` (exactly "1") makes the
controller, once at start, add the taint to every node without it and without completedAt that
runs no pod outside kube-system and kube-public (system-pool nodes included). The webhook is
always served (`STARTUP_WEBHOOK` is no longer read); its MutatingWebhookConfiguration has
`timeoutSeconds: 5` and `failurePolicy: Ignore` (Fail until f3b81a0, and the README still asks
for Fail "for strict gating").
"""

from __future__ import annotations

from typing import Any

from nodegate.core.rules.autoscalers import is_ca_gate_key, renamed_key
from nodegate.core.text.errors import DocPath, Problem
from nodegate.migrate.conversion import Conversion, rules_document
from nodegate.migrate.defaults import HandlerSettings

COMMAND = "nodegate migrate nodetaintshandler"
SOURCE = "nodetaintshandler's settings"
GATE = "startup"
READY_ANNOTATION = "startup.k8s.io/ready=true"
COMPLETED_AT = "startup.k8s.io/completedAt"
SYSTEM_MODE_LABEL, SYSTEM_MODE = "kubernetes.azure.com/mode", "system"
AUTOSCALERS = ("none", "cluster-autoscaler", "karpenter")


def convert_nodetaintshandler(settings: HandlerSettings, autoscaler: str = "none") -> Conversion:
    """Its settings as one startup gate and the webhook settings; with an autoscaler in front
    of the nodes, the gate gets cluster-autoscaler's startup prefix and keeps the old key as a
    former key, so nodes born under the old webhook are lifted too."""
    selector, problems = _selector(settings.init_selector)
    if autoscaler not in AUTOSCALERS:
        message = f"'{autoscaler}' is not allowed: use {', '.join(AUTOSCALERS)}"
        problems += (Problem(0, 0, SOURCE, ("--autoscaler",), message),)
    old_key = settings.taint_key
    renamed = autoscaler in ("cluster-autoscaler", "karpenter") and not is_ca_gate_key(old_key)
    key = renamed_key(old_key, None) if renamed else old_key
    backfill = settings.startup_backfill == "1"
    gate: dict[str, Any] = {
        "name": GATE,
        "match": {
            "expressions": [
                {"key": SYSTEM_MODE_LABEL, "operator": "NotIn", "values": [SYSTEM_MODE]}
            ]
        },
        "taint": {"key": key, "value": settings.taint_value, "effect": settings.taint_effect},
        "readyWhen": {
            "pods": {
                "namespace": settings.namespace,
                "selector": selector,
                "readyAnnotation": READY_ANNOTATION,
            }
        },
        "completionAnnotation": {"key": COMPLETED_AT, "format": "unix"},
    }
    if backfill:
        gate["backfill"] = True
    if renamed:
        gate["formerKeys"] = [old_key]
    webhook = {"failurePolicy": settings.failure_policy, "timeoutSeconds": settings.timeout_seconds}
    at: DocPath = ("startupGates", 0)
    return Conversion(
        command=COMMAND,
        source=SOURCE,
        rules=rules_document(startupGates=[gate]),
        notes=_notes(settings, key, renamed, autoscaler, backfill),
        places={
            (*at, "taint"): ("--taint-key",),
            (*at, "taint", "value"): ("--taint-value",),
            (*at, "taint", "effect"): ("--taint-effect",),
            (*at, "formerKeys"): ("--taint-key",),
            (*at, "readyWhen", "pods", "namespace"): ("--namespace",),
            (*at, "readyWhen", "pods", "selector"): ("--init-selector",),
            ("webhook", "failurePolicy"): ("--failure-policy",),
            ("webhook", "timeoutSeconds"): ("--timeout-seconds",),
        },
        problems=problems,
        webhook=webhook,
    )


def _selector(text: str) -> tuple[dict[str, str], tuple[Problem, ...]]:
    """`key=value[,key=value]`, as a label selector of equalities."""
    pairs = [item.strip().partition("=") for item in text.split(",")]
    if all(eq and key for key, eq, _ in pairs):
        return {key: value for key, _, value in pairs}, ()
    example = HandlerSettings().init_selector
    message = f"'{text}' is not key=value (or several, comma-separated), e.g. {example}"
    return {}, (Problem(0, 0, SOURCE, ("--init-selector",), message),)


def _notes(
    settings: HandlerSettings, key: str, renamed: bool, autoscaler: str, backfill: bool
) -> tuple[str, ...]:
    old = settings.taint_key
    notes: list[str] = []
    if renamed:
        effect = settings.taint_effect
        why = (
            f"list {key}:{effect} in your NodePool's startupTaints (Karpenter then neither adds "
            "nodes for pods waiting on a gated one nor consolidates it; cluster-autoscaler, if "
            "it runs too, reads the prefix as a startup taint)"
            if autoscaler == "karpenter"
            else "cluster-autoscaler reads the prefix as a startup taint (no second node per "
            "gated scale-up, and a pool at zero scales up); a managed one (OKE add-on, AKS) "
            "reads nothing else"
        )
        notes.append(
            f"The gate's key becomes {key}: {why}. {old} stays as a former key: nodes born "
            "under the old webhook are lifted with the gate. Before you switch, add a "
            "toleration for the new key to the init DaemonSet and to every DaemonSet that "
            "tolerates the old one (its ds-patcher patched all of kube-system's); keep the old "
            "toleration and formerKeys until no node carries the old key."
        )
    else:
        notes.append(
            f"The gate keeps its key {old}, so the init DaemonSet and the DaemonSets that "
            "tolerate it need no change. If cluster-autoscaler or Karpenter adds these nodes, "
            "run again with --autoscaler: the key then needs the autoscaler's startup prefix."
        )
    notes += [
        f"Nodes labelled {SYSTEM_MODE_LABEL}={SYSTEM_MODE} are skipped, as its webhook skipped "
        "them (the gate's match)"
        + (
            "; its backfill tainted idle system-pool nodes too, nodegate's honours the match."
            if backfill
            else "."
        ),
        f"It recognised the taint only with the value {settings.taint_value}; nodegate owns "
        f"{key}:{settings.taint_effect} whatever its value.",
        f"Init pods: it looked for {settings.init_selector} pods in every namespace; nodegate "
        f"watches {settings.namespace} only (--namespace). Readiness is the same: PodReady and "
        f"every container ready, or {READY_ANNOTATION} on the pod.",
        f"The lift writes {COMPLETED_AT}=<unix seconds> as it did (completionAnnotation), "
        f"besides nodegate's completed.gate.nodegate.dev/{GATE} (RFC 3339); a node carrying "
        "either is never backfilled.",
    ]
    if backfill:
        notes.append(
            "Backfill: it ran once, when its controller started, and counted every pod outside "
            "kube-system and kube-public as a workload; nodegate backfills whenever it sees a "
            "matching node without the gate, and counts every pod but DaemonSet, static and "
            "finished pods."
        )
    elif settings.startup_backfill not in ("", "0"):
        notes.append(
            f"STARTUP_BACKFILL={settings.startup_backfill} did not turn its backfill on (it "
            "reads only '1'), so backfill stays off here."
        )
    notes.append(_policy_note(settings.failure_policy))
    notes.append(
        f"timeoutSeconds {settings.timeout_seconds} is kept from its webhook configuration "
        "(nodegate's default is 2: a registering kubelet waits at most that long)."
    )
    notes.append(
        "Writes: it replaced the whole Node on each lift; nodegate writes only the taints and "
        "annotations it changes, with the resourceVersion it read."
    )
    return tuple(notes)


def _policy_note(policy: str) -> str:
    if policy == "Fail":
        return (
            "failurePolicy Fail, as its README asks for strict gating: no node can register "
            "while no reconciler replica answers. Run at least two replicas on nodes the gate "
            "does not cover (the system pool), or use Ignore with backfill."
        )
    return (
        f"failurePolicy {policy}, as its deploy/deployment.yaml ships it: a node created while "
        "no reconciler replica answers registers ungated (backfill gates it later if it is "
        "still idle). Its README asks for Fail for strict gating: --failure-policy Fail."
    )
