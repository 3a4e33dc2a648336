"""Helpers for the manifest tests: rules documents and settings to build from."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nodegate.core.rules.loader import RulesDocument
from nodegate.localcluster.gotool import GoError, find_go
from nodegate.manifests.build import build_manifests
from nodegate.manifests.settings import DeploySettings, Manifest

REPO = Path(__file__).resolve().parents[3]
EXAMPLE_RULES = REPO / "examples" / "rules.yaml"
REPOSITORY = "registry.example.com/nodegate"
API_SERVER_METRICS = (
    "apiserver_admission_webhook_fail_open_count",
    "apiserver_admission_webhook_rejection_count",
)
"""kube-apiserver's own counters (Kubernetes >= 1.24) read by the webhook alerts and the
dashboard (manifests/observability.py): they see the calls that never reached the reconciler.
Selected by the webhook's `name` label, since the API server's series carry no namespace;
tests/e2e/test_webhook.py checks them on a real API server."""

NO_POD_GATES = """\
apiVersion: nodegate.dev/v1
kind: NodeRules
labelTaints:
  - name: ci-dedicated
    match: {labels: {example.com/dedicated: ci}}
    taint: {key: example.com/dedicated, value: ci, effect: NoSchedule}
    nodeMayLift: true
startupGates:
  - name: warmup
    match: {labels: {pool: gpu}}
    taint: {key: startup.example.com/initializing, value: wait, effect: NoSchedule}
    readyWhen: {annotation: example.com/ready=true}
"""


def example_document() -> RulesDocument:
    return RulesDocument.parse(EXAMPLE_RULES.read_text(encoding="utf-8"), "examples/rules.yaml")


def settings(**overrides: Any) -> DeploySettings:
    return DeploySettings.model_validate({"image": {"repository": REPOSITORY}, **overrides})


ON_CONFIGMAP = {"rulesSource": "configmap"}
"""Rules from the rules ConfigMap: the rules known at build time decide what is granted. Also
what e2e tests on a shared control plane install with: NodeRules objects are cluster-scoped
and an installation on objects merges every one, so each test's installation keeps its rules
apart in a ConfigMap of its own namespace (the objects path has tests of its own)."""


def every_option(**overrides: Any) -> DeploySettings:
    """Settings that switch every optional object on."""
    return settings(
        grafanaDashboard={},
        prometheusRule={"labels": {"release": "kube-prometheus-stack"}},
        image={"repository": REPOSITORY, "pullSecrets": ["regcred"]},
        **overrides,
    )


def build(document: RulesDocument | None = None, /, **overrides: Any) -> list[Manifest]:
    return build_manifests(document or example_document(), settings(**overrides))


def one(objects: list[Manifest], kind: str, name: str | None = None) -> Manifest:
    found = [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {len(found)}"
    return found[0]


def built_tool(build: Callable[[], Path], what: str, target: str) -> Path:
    """A Go tool from the harness's cache, built first if cold. Only a machine without Go may
    skip; any build failure is the test's failure, with the build's message and `make target`."""
    try:
        find_go()
    except GoError as error:
        pytest.skip(f"no Go toolchain to build {what}: {error}")
    try:
        return build()
    except Exception as error:
        pytest.fail(f"{what} could not be built (make {target}):\n{error}", pytrace=False)
