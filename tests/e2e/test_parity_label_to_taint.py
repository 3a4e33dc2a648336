"""Parity with the label-to-taint operator: its README's usage, replayed on the real API server
with examples/migrate/label-to-taint.yaml (what `nodegate migrate label-to-taint` prints)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kubernetes import client as k8s_client

from nodegate.bootstrap.kubelet_flags import parse_kubelet_flags
from nodegate.bootstrap.oke import kubelet_extra_args
from nodegate.core.rules.loader import load_rules
from nodegate.core.rules.model import NodePool
from nodegate.core.rules.node_marks import OWNED_TAINTS_ANNOTATION
from nodegate.localcluster.nodes import wait_until
from tests.e2e.support.reconciler_fixtures import (
    TIMEOUT,
    Start,
    patch_labels,
    read_node,
    wait_for_taints,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "migrate" / "label-to-taint.yaml"
TAINT = ("dedicated", "NoSchedule")


def test_label_a_node_and_the_taint_follows_the_label_both_ways(
    start_reconciler_with: Start, core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str]
) -> None:
    start_reconciler_with(EXAMPLE.read_text())
    name = make_node()
    patch_labels(core_v1, name, {"dedicated": "ci"})  # kubectl label nodes NODE dedicated=ci
    taints = wait_for_taints(core_v1, name, lambda t: TAINT in t)
    assert taints[TAINT]["value"] == "ci"
    patch_labels(core_v1, name, {"dedicated": None})  # kubectl label nodes NODE dedicated-
    wait_for_taints(core_v1, name, lambda t: TAINT not in t)


def test_a_node_registered_as_its_readme_recommends_keeps_its_taint_from_birth(
    start_reconciler_with: Start, core_v1: k8s_client.CoreV1Api, make_node: Callable[..., str]
) -> None:
    """The README's oke-init.sh --register-with-taints, here derived from the rule for a pool."""
    rules = load_rules(EXAMPLE)
    pool = NodePool(name="ci", provider="oke", size=1, labels={"dedicated": "ci"})
    flags = kubelet_extra_args(rules.model_copy(update={"node_pools": (pool,)}), pool)
    taints, labels = parse_kubelet_flags(flags)
    start_reconciler_with(EXAMPLE.read_text())

    name = make_node(labels=labels, taints=[t.model_dump() for t in taints])
    annotations = wait_until(
        lambda: (
            (a := read_node(core_v1, name)["metadata"].get("annotations") or {}).get(
                OWNED_TAINTS_ANNOTATION
            )
            and a
        ),
        TIMEOUT,
        "ownership recorded",
    )
    assert annotations[OWNED_TAINTS_ANNOTATION] == "dedicated:NoSchedule"
    assert wait_for_taints(core_v1, name, lambda t: TAINT in t)[TAINT]["value"] == "ci"
