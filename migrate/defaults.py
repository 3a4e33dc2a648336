"""What each conversion starts from when a setting is not given: the old tools' settings as they
ship them, and nidhogg's converted hold. One declaration each, read by the conversions and shown
by `nodegate migrate`'s options, so a TAB on those options or their --help loads this module
and none of the conversions (nor core, nor pydantic: tests/unit/cli/test_lazy_commands.py).
Each tool's module says where its defaults were read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

LABEL_KEY, LABEL_VALUE, TAINT_EFFECT = "dedicated", "ci", "NoSchedule"
"""The label-to-taint operator's constants as its README and code ship them."""


@dataclass(frozen=True)
class OperatorSettings:
    """The node-label-operator's environment variables, as text, defaults as it has them."""

    persist_label_prefix: str = "persist.demo/"
    operator_namespace: str = "node-label-operator"
    resync_interval_seconds: str = "300"
    log_level: str = "INFO"
    metrics_port: str = "9090"


@dataclass(frozen=True)
class HandlerSettings:
    """nodetaintshandler's settings as text, defaults as it ships them: the taint and init-pod
    constants, the namespace of its init DaemonSet, STARTUP_BACKFILL, and its webhook
    configuration's policy."""

    taint_key: str = "startup.k8s.io/initializing"
    taint_value: str = "wait"
    taint_effect: str = "NoSchedule"
    init_selector: str = "startup.k8s.io/component=init"
    namespace: str = "kube-system"
    startup_backfill: str = ""
    failure_policy: str = "Ignore"
    timeout_seconds: int = 5


HOLD: Final = "0s"
"""nidhogg's converted rules' `for`: nidhogg put its taint back the moment a pod was not Ready."""
