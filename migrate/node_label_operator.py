"""The node-label-operator (github.com/miajohansson9/Demo, its kopf + ConfigMap version): labels
with one prefix survive node deletion and re-creation, into `persistentLabels`.

What it does, read from controller/main.py at 0ee8e9c: settings from the environment,
`PERSIST_LABEL_PREFIX` (default `persist.demo/`), `OPERATOR_NAMESPACE` (`node-label-operator`,
where its ConfigMaps live), `RESYNC_INTERVAL_SECONDS` (300), `METRICS_PORT` (9090) and
`LOG_LEVEL` (INFO). One ConfigMap `node-labels-<node name>` per node holds `state.json`; on node
create the ConfigMap is authoritative (stored labels are applied, overwriting other values),
on update the node is (the ConfigMap follows, removals included), a deleted node's ConfigMap is
kept forever, and a timer resyncs every node into its ConfigMap.
"""

from __future__ import annotations

from nodegate.core.objects.installation import LogLevel
from nodegate.core.text.errors import Problem
from nodegate.migrate.conversion import (
    Conversion,
    log_level,
    rules_document,
)
from nodegate.migrate.defaults import OperatorSettings

COMMAND = "nodegate migrate node-label-operator"
SOURCE = "the operator's settings"
_LOG_LEVELS: dict[str, tuple[LogLevel, str]] = {
    "NOTSET": ("debug", ", nodegate's most detailed"),
    "DEBUG": ("debug", ""),
    "INFO": ("info", ""),
    "WARN": ("warning", ""),
    "WARNING": ("warning", ""),
    "ERROR": ("error", ""),
    "CRITICAL": ("error", ", nodegate's least (it writes no critical level)"),
    "FATAL": ("error", ", nodegate's least (it writes no critical level)"),
}
"""LOG_LEVEL as the operator reads it (`getattr(logging, LOG_LEVEL.upper())`), as nodegate's
level, and why it is not the same."""


def convert_node_label_operator(
    settings: OperatorSettings, key_by: str = "nodeName", forget_after: str = "720h"
) -> Conversion:
    """The operator's settings as `persistentLabels` plus the reconciler flags they become
    (its log level too)."""
    resync, problems = _seconds(settings.resync_interval_seconds)
    level = settings.log_level
    nearest = _LOG_LEVELS.get(level.upper())
    if nearest is None:
        message = (
            f"'{level}' is not a level the operator reads: DEBUG, INFO, WARNING, ERROR or CRITICAL"
        )
        problems += (Problem(0, 0, SOURCE, ("LOG_LEVEL",), message),)
    log_flags, log_note = log_level(f"LOG_LEVEL ({level})", nearest)
    if key_by == "nodeName":
        keyed = (
            "The operator keyed records by node name; keyBy: nodeName keeps that. Its users "
            "asked for stable node IDs: with --key-by providerID an AKS VMSS instance re-imaged "
            "under a new name gets its labels back (an OKE instance replaced under the same name "
            "gets a new providerID: keep nodeName there)."
        )
    else:
        keyed = (
            f"The operator keyed records by node name; keyBy: {key_by} recognises a re-created "
            "node by its spec.providerID instead (a node with none falls back to its name): an "
            "OKE instance replaced under the same name gets a new providerID, so its labels do "
            "not come back."
        )
    notes = [
        keyed,
        "A new node that already carries a persisted label: the operator overwrote it with the "
        "stored value; nodegate never overwrites a label a new node carries.",
        "Records: nodegate keeps its own (nodegate-labels-<sha256> ConfigMaps, record.json) and "
        "does not read the operator's node-labels-<node> ConfigMaps. Labels on nodes that exist "
        "when you switch are captured from the nodes; records of nodes deleted before the "
        "switch are not carried over.",
        "A deleted node's record: the operator kept it forever; nodegate forgets it after "
        f"forgetAfter ({forget_after} here).",
        "A record that is not valid JSON: the operator treated it as empty; nodegate "
        "quarantines it (a copy is kept, with a Warning Event) and captures a fresh one.",
        "Failed restores are counted (nodegate_label_restore_failures_total{reason}) and "
        "alerted on: NodegateLabelRestoresFailing, in the PrometheusRule `nodegate manifests "
        "--prometheus-rule` writes.",
        f"METRICS_PORT ({settings.metrics_port}): nodegate serves /metrics with /healthz and "
        "/readyz on --http-port (default 8080).",
        log_note,
    ]
    return Conversion(
        command=COMMAND,
        source=SOURCE,
        rules=rules_document(
            persistentLabels={
                "prefixes": [settings.persist_label_prefix],
                "keyBy": key_by,
                "forgetAfter": forget_after,
            }
        ),
        notes=tuple(notes),
        reconciler_flags=(
            "--state-namespace",
            settings.operator_namespace,
            "--resync-seconds",
            resync,
            *log_flags,
        ),
        places={
            ("persistentLabels",): ("PERSIST_LABEL_PREFIX",),
            ("persistentLabels", "keyBy"): ("--key-by",),
            ("persistentLabels", "forgetAfter"): ("--forget-after",),
        },
        problems=problems,
    )


def _seconds(text: str) -> tuple[str, tuple[Problem, ...]]:
    """RESYNC_INTERVAL_SECONDS as the operator reads it (`int(...)`), and above zero."""
    try:
        seconds = int(text)
    except ValueError:
        seconds = 0
    if seconds > 0:
        return str(seconds), ()
    message = f"'{text}' is not a whole number of seconds above 0, e.g. 300"
    return text, (Problem(0, 0, SOURCE, ("RESYNC_INTERVAL_SECONDS",), message),)
