"""Helpers shared by the bootstrap tests: the rules sets, their pools, and golden files.

Golden files live in golden/<rules set>/ and are reviewed like code. A mismatch fails the test;
run with NODEGATE_UPDATE_GOLDEN=1 to rewrite them, then review the diff.
"""

from __future__ import annotations

import base64
import gzip
import os
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path

import pytest

from nodegate.core.rules.loader import load_rules, parse_rules
from nodegate.core.rules.model import NodePool, NodeRules

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
GOLDEN = HERE / "golden"
UPDATE_GOLDEN = os.environ.get("NODEGATE_UPDATE_GOLDEN") == "1"


def example_rules() -> NodeRules:
    """The rules file shipped with nodegate (examples/rules.yaml)."""
    text = files("nodegate.examples").joinpath("rules.yaml").read_text(encoding="utf-8")
    return parse_rules(text, "examples/rules.yaml")


def awkward_rules() -> NodeRules:
    return load_rules(FIXTURES / "awkward-rules.yaml")


def autoscaled_rules() -> NodeRules:
    """Pools behind cluster-autoscaler (OKE add-on, AKS) and Karpenter (AKS NAP)."""
    return load_rules(FIXTURES / "autoscaled-rules.yaml")


def oracle_karpenter_rules() -> NodeRules:
    """Pools Karpenter runs on OKE with Oracle's provider: spot, mixed and on-demand."""
    return load_rules(FIXTURES / "oracle-karpenter-rules.yaml")


RULE_SETS: dict[str, Callable[[], NodeRules]] = {
    "example": example_rules,
    "awkward": awkward_rules,
    "autoscaled": autoscaled_rules,
    "oracle": oracle_karpenter_rules,
}


def pools(provider: str) -> list[tuple[str, NodePool]]:
    """(rules set name, pool) for every pool of `provider` in every rules set that has a cloud
    node pool (Karpenter pools have none: see `karpenter_pool_params`)."""
    return [
        (name, pool)
        for name, load in RULE_SETS.items()
        for pool in load().node_pools
        if pool.provider == provider and pool.autoscaler_type != "karpenter"
    ]


def pool_params(provider: str) -> list[object]:
    """pytest params (rule set, pool name) with readable ids, e.g. 'example-ci'."""
    return [
        pytest.param(rule_set, pool.name, id=f"{rule_set}-{pool.name}")
        for rule_set, pool in pools(provider)
    ]


def karpenter_pool_params() -> list[object]:
    """pytest params (rule set, pool name) for every pool Karpenter runs."""
    return [
        pytest.param(name, pool.name, id=f"{name}-{pool.name}")
        for name, load in RULE_SETS.items()
        for pool in load().node_pools
        if pool.autoscaler_type == "karpenter"
    ]


def rules_and_pool(rule_set: str, pool_name: str) -> tuple[NodeRules, NodePool]:
    rules = RULE_SETS[rule_set]()
    pool = rules.pool(pool_name)
    assert pool is not None, f"{rule_set} has no pool {pool_name}"
    return rules, pool


def check_golden(relative: str, actual: str) -> None:
    """Compare `actual` with golden/<relative> byte for byte (or rewrite it on request)."""
    path = GOLDEN / relative
    if UPDATE_GOLDEN:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(actual.encode("utf-8"))
        return
    if not path.exists():
        pytest.fail(f"golden file {path} is missing; create it with NODEGATE_UPDATE_GOLDEN=1")
    expected = path.read_bytes().decode("utf-8")
    assert actual == expected, (
        f"rendering differs from golden file {path}; if the change is intended, rerun with "
        "NODEGATE_UPDATE_GOLDEN=1 and review the diff"
    )


def decode_payload(value: str) -> str:
    """What cloud-init reads from an OKE metadata payload: base64, gunzipped when gzipped."""
    raw = base64.b64decode(value)
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return raw.decode("utf-8")
