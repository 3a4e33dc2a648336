"""The container's command-line flags, derived from the reconciler's settings model.

The Deployment says what it wants as `ReconcilerSettings` values (field names, groups nested);
`reconcile_argv` checks them against that model and writes them as the flags `nodegate
reconcile` parses back into the same settings (`nodegate.core.text.flags`). No flag name or default
is written here: a new flag is a new field of `nodegate.reconciler.settings`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodegate.core.text.flags import flag_argv
from nodegate.reconciler.settings import ReconcilerSettings


def reconcile_argv(values: Mapping[str, Any]) -> list[str]:
    """`--flag=value` for each value, in the model's field order (ValidationError if the
    settings they make would be refused by `nodegate reconcile`)."""
    ReconcilerSettings.model_validate(values)
    return flag_argv(ReconcilerSettings, values)
