"""kubelet's registration flags, written in one place and read back the way kubelet reads them.

`--register-with-taints=k=v:Effect,k:Effect` and `--node-labels=k=v,k=` only take effect when a
node first registers. Parsing mirrors kubelet (Kubernetes `pkg/util/flag.RegisterWithTaintsVar`
and `pkg/util/taints.ParseTaints`, component-base `cliflag.MapStringString`, kubelet's check for
kubernetes.io labels) so the renderer can prove its own output is read back exactly as meant.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeGuard

from nodegate.bootstrap.errors import BootstrapError
from nodegate.core.rules.model import TAINT_EFFECTS, Taint, TaintEffect
from nodegate.core.text.k8s_names import (
    kubelet_may_set_label,
    label_value_problem,
    qualified_name_problem,
)

REGISTER_WITH_TAINTS = "--register-with-taints"
NODE_LABELS = "--node-labels"


def format_kubelet_flags(taints: Sequence[Taint], labels: Mapping[str, str]) -> tuple[str, ...]:
    """The two flags, in the order given; a flag with nothing to carry is left out."""
    flags: list[str] = []
    if taints:
        flags.append(f"{REGISTER_WITH_TAINTS}={','.join(t.flag() for t in taints)}")
    if labels:
        flags.append(f"{NODE_LABELS}={','.join(f'{k}={v}' for k, v in labels.items())}")
    return tuple(flags)


def proven_kubelet_flags(
    taints: Sequence[Taint], labels: Mapping[str, str], owner: str
) -> tuple[str, ...]:
    """`format_kubelet_flags`, parsed back the way kubelet parses them; BootstrapError naming
    `owner` (e.g. "pool 'gpu'") if kubelet would refuse, drop or read anything differently."""
    flags = format_kubelet_flags(taints, labels)
    args = " ".join(flags)
    try:
        read_back = parse_kubelet_flags(args)
    except BootstrapError as err:
        raise BootstrapError(f"{owner}: {err}") from err
    if read_back != (tuple(taints), dict(labels)):
        raise BootstrapError(f"{owner}: kubelet would read {args!r} differently")
    return flags


def parse_kubelet_flags(args: str) -> tuple[tuple[Taint, ...], dict[str, str]]:
    """Registration taints and labels as kubelet would read them from `args`; BootstrapError if
    kubelet would refuse (or silently drop) any of them.

    `args` is split on whitespace without quote removal, as an unquoted shell expansion of
    `--kubelet-extra-args` is. `--flag=value` and `--flag value` are both accepted (pflag). The
    last `--register-with-taints` wins; `--node-labels` given twice merge. Other flags are ignored.
    """
    taints: tuple[Taint, ...] = ()
    labels: dict[str, str] = {}
    words = iter(args.split())
    for word in words:
        name, eq, value = word.partition("=")
        if name not in (REGISTER_WITH_TAINTS, NODE_LABELS):
            continue
        if not eq:
            value = next(words, "")
            if not value:
                raise BootstrapError(f"{name} has no value")
        if name == REGISTER_WITH_TAINTS:
            taints = _parse_taints(value)
        else:
            labels.update(_parse_labels(value))
    return taints, labels


def _parse_taints(value: str) -> tuple[Taint, ...]:
    if not value:
        return ()
    taints: list[Taint] = []
    seen: set[tuple[str, str]] = set()
    for spec in value.split(","):
        taint = _parse_taint(spec)
        if taint.identity in seen:
            raise BootstrapError(
                f"{REGISTER_WITH_TAINTS}: duplicated taints with the same key and effect: {spec}"
            )
        seen.add(taint.identity)
        taints.append(taint)
    return tuple(taints)


def _parse_taint(spec: str) -> Taint:
    invalid = f"{REGISTER_WITH_TAINTS}: invalid taint spec '{spec}'"
    if spec.endswith("-"):
        raise BootstrapError(f"{invalid}: a trailing '-' means removal, which kubelet ignores")
    if spec.count(":") != 1:
        raise BootstrapError(f"{invalid}: write key=value:Effect or key:Effect")
    key_value, _, effect = spec.partition(":")
    if key_value.count("=") > 1:
        raise BootstrapError(f"{invalid}: more than one '='")
    key, _, taint_value = key_value.partition("=")
    if problem := qualified_name_problem(key):
        raise BootstrapError(f"{invalid}: key: {problem}")
    if taint_value and (problem := label_value_problem(taint_value)):
        raise BootstrapError(f"{invalid}: value: {problem}")
    if not _is_effect(effect):
        raise BootstrapError(f"{invalid}: effect must be one of {', '.join(TAINT_EFFECTS)}")
    # Built without nodegate's own policy checks (reserved keys): this reads what kubelet reads.
    return Taint.model_construct(key=key, value=taint_value, effect=effect)


def _is_effect(value: str) -> TypeGuard[TaintEffect]:
    return value in TAINT_EFFECTS


def _parse_labels(value: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    for pair in value.split(","):
        if not pair:
            continue
        key, eq, label_value = pair.partition("=")
        if not eq:
            raise BootstrapError(f"{NODE_LABELS}: malformed pair '{pair}', expect key=value")
        key, label_value = key.strip(), label_value.strip()
        if problem := qualified_name_problem(key) or label_value_problem(label_value):
            raise BootstrapError(f"{NODE_LABELS}: invalid label '{pair}': {problem}")
        if not kubelet_may_set_label(key):
            raise BootstrapError(
                f"{NODE_LABELS}: kubelet refuses to set '{key}' on its own Node (unknown "
                "kubernetes.io/k8s.io label)"
            )
        labels[key] = label_value
    return labels
