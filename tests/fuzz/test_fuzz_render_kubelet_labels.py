"""`nodegate render` never hands kubelet a label it refuses, for any valid rules file.

kubelet exits at start when `--node-labels` carries a kubernetes.io / k8s.io label outside its
allowed set (tests/e2e/test_local_kubelet.py shows it once, on a real kubelet). Generated rules
put such labels everywhere a rules file can hold labels (pool labels, reconcilerLabels, rule
matches); whatever validation lets through, the rendered OKE kubelet flags must only carry
labels kubelet accepts. The oracle below is a transcription of kubelet's own check, not
nodegate's (`core.text.k8s_names`), so a shared mistake cannot hide.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from nodegate.cli.main import app
from nodegate.core.rules.loader import rules_from_data
from nodegate.core.text.errors import RulesError
from tests.fuzz.profiles import fuzz

KUBELET_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "kubernetes.io/os",
        "kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/arch",
    }
)
"""k8s.io/kubelet pkg/apis/well_known_labels.go `kubeletLabels` (v0.36.3)."""
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
"""The same file's `kubeletLabelNamespaces`."""


def kubelet_refuses(key: str) -> bool:
    """kubernetes cmd/kubelet/app/options/options.go (v1.36.3) `ValidateKubeletFlags`:
    `isKubernetesLabel(k) && !kubeletapis.IsKubeletLabel(k)`."""
    namespace = key.split("/", 1)[0] if "/" in key else ""
    kubernetes = any(
        namespace == domain or namespace.endswith("." + domain)
        for domain in ("kubernetes.io", "k8s.io")
    )
    allowed = key in KUBELET_LABELS or any(
        namespace == allowed or namespace.endswith("." + allowed)
        for allowed in KUBELET_LABEL_NAMESPACES
    )
    return kubernetes and not allowed


_PREFIXES = st.sampled_from(
    [
        "",
        "example.com/",
        "node-role.kubernetes.io/",
        "kubernetes.io/",
        "k8s.io/",
        "team.k8s.io/",
        "node.kubernetes.io/",
        "a.node.kubernetes.io/",
        "kubelet.kubernetes.io/",
        "topology.kubernetes.io/",
        "beta.kubernetes.io/",
        "kubernetes.io.example.com/",
        "nodegate.dev/",
    ]
)
_NAMES = st.sampled_from(["gpu", "zone", "os", "arch", "hostname", "pool", "role", "x-1"])
LABEL_KEYS = (
    st.builds(str.__add__, _PREFIXES, _NAMES) | st.sampled_from(sorted(KUBELET_LABELS))
).filter(lambda key: key != "nodegate.dev/pool")
LABEL_VALUES = st.sampled_from(["", "true", "nvidia", "a.b-c_d"])
LABELS = st.dictionaries(LABEL_KEYS, LABEL_VALUES, max_size=4)


@st.composite
def rules_documents(draw: st.DrawFn) -> dict[str, Any]:
    """A rules document with one or two OKE pools and label taint rules matching their labels."""
    pools = [
        {
            "name": f"pool-{index}",
            "provider": "oke",
            "size": 1,
            "labels": draw(LABELS),
            "reconcilerLabels": draw(LABELS),
        }
        for index in range(draw(st.integers(1, 2)))
    ]
    rules = [
        {
            "name": f"rule-{index}",
            "match": {"labels": draw(LABELS.filter(bool))},
            "taint": {"key": f"example.com/t{index}", "value": "x", "effect": "NoSchedule"},
        }
        for index in range(draw(st.integers(0, 2)))
    ]
    return {
        "apiVersion": "nodegate.dev/v1",
        "kind": "NodeRules",
        "labelTaints": rules,
        "nodePools": pools,
    }


def rendered_kubelet_labels(document: dict[str, Any], pool: str) -> list[str]:
    """The label keys in `nodegate render --format kubelet-args` for `pool`, as kubelet splits
    `--node-labels` (comma-separated key=value)."""
    with tempfile.TemporaryDirectory() as directory:
        rules_file = Path(directory) / "rules.yaml"
        rules_file.write_text(yaml.safe_dump(document), encoding="utf-8")
        args = ["render", "--rules", str(rules_file), "--pool", pool, "--format", "kubelet-args"]
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    keys: list[str] = []
    for word in result.stdout.split():
        name, _, value = word.partition("=")
        if name == "--node-labels":
            keys += [pair.partition("=")[0] for pair in value.split(",") if pair]
    return keys


@fuzz
@given(rules_documents())
def test_render_never_hands_kubelet_a_label_it_refuses(document: dict[str, Any]) -> None:
    try:
        rules_from_data(document, "generated.yaml")
    except RulesError:
        return  # not a valid rules file: nothing is rendered from it
    for pool in document["nodePools"]:
        keys = rendered_kubelet_labels(document, pool["name"])
        assert "nodegate.dev/pool" in keys  # the flags were read: the property is not vacuous
        assert not [key for key in keys if kubelet_refuses(key)]
