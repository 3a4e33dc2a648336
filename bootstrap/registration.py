"""A pool's registration taints and labels, for rendering: `nodegate.core.rules.registration`, with
a conflict reported as the `BootstrapError` every renderer raises.

The derivation itself ("every label taint whose match the pool's labels satisfy, plus every
startup gate whose match they satisfy") is domain logic the Node admission webhook needs too, so
it lives in core; this module only adapts its error to rendering.
"""

from __future__ import annotations

from collections.abc import Callable

from nodegate.bootstrap.errors import BootstrapError
from nodegate.core.rules import registration as core
from nodegate.core.rules.model import NodePool, NodeRules, Taint
from nodegate.core.rules.registration import registration_labels

__all__ = ["permanent_taints", "registration_labels", "registration_taints", "startup_gate_taints"]


def _rendering(
    derive: Callable[[NodeRules, NodePool], tuple[Taint, ...]], rules: NodeRules, pool: NodePool
) -> tuple[Taint, ...]:
    try:
        return derive(rules, pool)
    except core.TaintConflictError as err:
        raise BootstrapError(str(err)) from err


def permanent_taints(rules: NodeRules, pool: NodePool) -> tuple[Taint, ...]:
    return _rendering(core.permanent_taints, rules, pool)


def startup_gate_taints(rules: NodeRules, pool: NodePool) -> tuple[Taint, ...]:
    return _rendering(core.startup_gate_taints, rules, pool)


def registration_taints(rules: NodeRules, pool: NodePool) -> tuple[Taint, ...]:
    return _rendering(core.registration_taints, rules, pool)
