"""The names of the reconciler's own objects and records, and its log settings: one declaration
each, for the manifest builder, the reconciler's settings and the day-2 CLI. The default names,
and the annotation that confirms held rules, are declared below core, with nothing imported, so
a command's options can show them without loading core (`nodegate.defaults.names`). The
records' formats are this package's other modules. Pure."""

from __future__ import annotations

from typing import Literal

RULES_KEY = "rules.yaml"
"""Key of the rules text in the rules ConfigMap (and in the status record)."""
QUARANTINE_INFIX = "-quarantined-"
"""An unreadable record's copy is named `<record><infix><stamp>`."""

LogLevel = Literal["debug", "info", "warning", "error"]
"""The least severe of the reconciler's log lines written (its `--log-level`, the deploy
setting `logLevel`)."""
LogFormat = Literal["json", "text"]
"""How each log line is written: `json`, one object a line with the context as keys, for a log
pipeline; `text`, a line a person reads (its `--log-format`, the deploy setting `logFormat`)."""


def fence_policy_name(installation: str) -> str:
    """The ValidatingAdmissionPolicy (and binding) that fences the installation's writes."""
    return f"{installation}-fence"


def quarantine_name(record: str, stamp: str) -> str:
    """The name of an unreadable record's copy (at most 253 characters, as the API allows)."""
    return f"{record}{QUARANTINE_INFIX}{stamp}"[:253]


def is_quarantine_of(name: str, record: str) -> bool:
    return name.startswith(f"{record}{QUARANTINE_INFIX}")
