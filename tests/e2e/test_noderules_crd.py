"""The NodeRules CRD the manifest builder ships, on a real kube-apiserver, through a real kubectl:
accepted and Established, a rules object in the object shape applied with `kubectl apply -f`
and stored as written, a wrong one refused at admission naming the field, and `kubectl get
noderules` showing the printer columns.

NodeRules objects are cluster-scoped and the control plane is the session's: every object a test
makes is deleted after it, and the CRD too when this module made it.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client

from nodegate.core.rules.loader import RulesDocument
from nodegate.core.rules.model import CRD_NAME
from nodegate.localcluster.build import ensure_kubectl_built
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import wait_crd_established
from nodegate.manifests.build import build_manifests
from nodegate.manifests.settings import Manifest
from tests.unit.manifests.support import EXAMPLE_RULES, example_document, settings

VALID = """\
apiVersion: nodegate.dev/v1
kind: NodeRules
metadata: {name: NAME}
spec:
  labelTaints:
    - name: ci-dedicated
      match: {labels: {example.com/dedicated: ci}}
      taint: {key: example.com/dedicated, value: ci, effect: NoSchedule}
      nodeMayLift: true
    - name: tenant-payments
      match: {labels: {node-restriction.kubernetes.io/tenant: payments}}
      taint: {key: example.com/tenant, value: payments, effect: NoSchedule}
      evictionBudget: unlimited
  conditionTaints:
    - name: nic-kaput
      conditions: [{type: NetworkInterfaceCard, status: Kaput}]
      for: 30s
      taint: {key: example.com/nic-kaput, effect: NoExecute}
      evictionBudget: {window: 10m, cluster: {maxShare: 0.5}, perPool: {maxNodes: 2}}
  evictionBudget: {window: 5m, cluster: {maxShare: 0.2, maxNodes: 5}, perZone: {maxNodes: 1}}
"""
"""A valid rules object in the shape of issue 59: a couple of label taints, a condition rule,
eviction budgets (a rule's shorthand, a rule's own, the top level's)."""


def _kubectl(
    plane: LocalControlPlane, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ensure_kubectl_built()), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "KUBECONFIG": str(plane.kubeconfig_path)},
    )


def _shipped_crd() -> Manifest:
    """The CRD as every way in ships it: the manifest builder's first object."""
    objects = build_manifests(example_document(), settings())
    (crd,) = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
    return crd


@pytest.fixture(scope="module")
def crd(control_plane: LocalControlPlane) -> Manifest:
    """The shipped CRD, applied with `kubectl apply -f` and Established. Left for the rest of
    the session: the CRD is cluster-wide, and deleting it under another module's test on this
    control plane took that test's objects away."""
    shipped = _shipped_crd()
    applied = _kubectl(control_plane, "apply", "-f", "-", stdin=yaml.safe_dump(shipped))
    assert applied.returncode == 0, applied.stderr
    wait_crd_established(control_plane.client, CRD_NAME)
    return shipped


@pytest.fixture
def objects(control_plane: LocalControlPlane, crd: Manifest) -> Iterator[Callable[[str], str]]:
    """A name for a NodeRules object of the test's, deleted after it (cluster-scoped)."""
    names: list[str] = []

    def name(base: str) -> str:
        names.append(base)
        return base

    yield name
    for made in names:
        _kubectl(control_plane, "delete", "noderules", made, "--ignore-not-found")


def _stored(plane: LocalControlPlane, name: str) -> dict[str, Any]:
    got = _kubectl(plane, "get", "noderules", name, "-o", "yaml")
    assert got.returncode == 0, got.stderr
    stored = yaml.safe_load(got.stdout)
    assert isinstance(stored, dict)
    return stored


def test_the_shipped_crd_is_accepted_and_established(
    control_plane: LocalControlPlane, crd: Manifest
) -> None:
    live = k8s_client.ApiextensionsV1Api(control_plane.client).read_custom_resource_definition(
        CRD_NAME
    )
    assert live.status is not None
    accepted = {c.type: c.status for c in live.status.conditions or []}
    assert accepted["Established"] == "True"
    assert accepted["NamesAccepted"] == "True"
    names = live.status.accepted_names
    assert names is not None and names.short_names == ["nr"]


def test_kubectl_apply_of_a_valid_rules_object_stores_it_as_written(
    control_plane: LocalControlPlane, objects: Callable[[str], str], unique_name: str
) -> None:
    """Stored as written: nothing pruned (every field is in the schema), no default added."""
    text = VALID.replace("NAME", objects(unique_name))
    RulesDocument.parse(text, "valid.yaml")  # nodegate's loader takes it too

    applied = _kubectl(control_plane, "apply", "-f", "-", stdin=text)

    assert applied.returncode == 0, applied.stderr
    assert _stored(control_plane, unique_name)["spec"] == yaml.safe_load(text)["spec"]


def test_kubectl_apply_of_the_example_rules_file_stores_it_as_written(
    control_plane: LocalControlPlane, objects: Callable[[str], str]
) -> None:
    """examples/rules.yaml is a NodeRules object (issue 59): what the README tells users to
    write is what the API server takes, every field kept."""
    example = yaml.safe_load(EXAMPLE_RULES.read_text(encoding="utf-8"))
    objects(example["metadata"]["name"])

    applied = _kubectl(control_plane, "apply", "-f", str(EXAMPLE_RULES))

    assert applied.returncode == 0, applied.stderr
    assert _stored(control_plane, example["metadata"]["name"])["spec"] == example["spec"]


def test_kubectl_apply_server_side_keeps_the_nulls_written(
    control_plane: LocalControlPlane, objects: Callable[[str], str], unique_name: str
) -> None:
    """A null the model reads (`timeout: null`, `match: null`, `perPool: null`: no per-pool
    limit, where an absent perPool is the default one) is stored, not pruned: the nullable
    fields are nullable. (Client-side `kubectl apply` drops nulls before sending them.)"""
    text = VALID.replace("NAME", objects(unique_name)).replace(
        "perPool: {maxNodes: 2}", "perPool: null"
    ) + (
        "  startupGates:\n"
        "    - name: warm\n"
        "      match: {labels: {pool: gpu}}\n"
        "      taint: {key: example.com/warming, effect: NoSchedule}\n"
        "      readyWhen: {annotation: example.com/ready=true}\n"
        "      timeout: null\n"
        "      completionAnnotation: null\n"
    )
    RulesDocument.parse(text, "nulls.yaml")

    applied = _kubectl(control_plane, "apply", "--server-side", "-f", "-", stdin=text)

    assert applied.returncode == 0, applied.stderr
    assert _stored(control_plane, unique_name)["spec"] == yaml.safe_load(text)["spec"]


@pytest.mark.parametrize(
    ("right", "wrong", "field"),
    [
        ("effect: NoSchedule}", "effect: Sometimes}", "spec.labelTaints[0].taint.effect"),
        ("- name: ci-dedicated\n      match", "- match", "spec.labelTaints[0].name"),
        ("name: tenant-payments", "name: ci-dedicated", "spec.labelTaints[1]: Duplicate value"),
    ],
    ids=["taint-effect-sometimes", "rule-without-a-name", "a-name-twice-in-one-list"],
)
def test_kubectl_apply_of_a_wrong_rules_object_is_refused_naming_the_field(
    control_plane: LocalControlPlane,
    objects: Callable[[str], str],
    unique_name: str,
    right: str,
    wrong: str,
    field: str,
) -> None:
    valid = VALID.replace("NAME", objects(unique_name))
    text = valid.replace(right, wrong, 1)
    assert text != valid

    applied = _kubectl(control_plane, "apply", "-f", "-", stdin=text)

    assert applied.returncode != 0
    assert field in applied.stderr, applied.stderr
    got = _kubectl(control_plane, "get", "noderules", unique_name)
    assert got.returncode != 0 and "NotFound" in got.stderr  # nothing stored


def test_kubectl_get_noderules_prints_the_printer_columns(
    control_plane: LocalControlPlane, objects: Callable[[str], str], unique_name: str
) -> None:
    applied = _kubectl(
        control_plane, "apply", "-f", "-", stdin=VALID.replace("NAME", objects(unique_name))
    )
    assert applied.returncode == 0, applied.stderr

    listed = _kubectl(control_plane, "get", "noderules", unique_name)

    assert listed.returncode == 0, listed.stderr
    header = listed.stdout.splitlines()[0].split()
    assert header == ["NAME", "ACCEPTED", "RULES", "TAINTED", "WAITING", "AGE"]


def test_a_status_written_through_the_subresource_shows_in_kubectl_get(
    control_plane: LocalControlPlane, objects: Callable[[str], str], unique_name: str
) -> None:
    """The reconciler's report, as the status schema describes it, is taken by the status
    subresource and read back by the printer columns."""
    applied = _kubectl(
        control_plane, "apply", "-f", "-", stdin=VALID.replace("NAME", objects(unique_name))
    )
    assert applied.returncode == 0, applied.stderr
    status = {
        "observedGeneration": 1,
        "inForceGeneration": 1,
        "conditions": [
            {
                "type": "Accepted",
                "status": "True",
                "reason": "Valid",
                "message": "3 rules in force",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
                "observedGeneration": 1,
            }
        ],
        "ruleCount": 3,
        "nodesTainted": 2,
        "nodesWaiting": 1,
        "rules": [
            {
                "name": "nic-kaput",
                "kind": "conditionTaint",
                "matched": 4,
                "tainted": 2,
                "waiting": 1,
                "waitingExamples": ["node-a"],
            }
        ],
    }
    patch = yaml.safe_dump({"status": status})
    patched = _kubectl(
        control_plane,
        *("patch", "noderules", unique_name, "--subresource=status", "--type=merge"),
        *("-p", patch),
    )
    assert patched.returncode == 0, patched.stderr

    listed = _kubectl(control_plane, "get", "noderules", unique_name, "--no-headers")

    assert listed.stdout.split()[:5] == [unique_name, "True", "3", "2", "1"]
    assert _stored(control_plane, unique_name)["status"]["rules"][0]["waitingExamples"] == [
        "node-a"
    ]


def test_the_status_subresource_refuses_a_condition_status_outside_true_false_unknown(
    control_plane: LocalControlPlane, objects: Callable[[str], str], unique_name: str
) -> None:
    applied = _kubectl(
        control_plane, "apply", "-f", "-", stdin=VALID.replace("NAME", objects(unique_name))
    )
    assert applied.returncode == 0, applied.stderr
    condition = {
        "type": "Accepted",
        "status": "Maybe",
        "reason": "Valid",
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    patch = yaml.safe_dump({"status": {"conditions": [condition]}})

    patched = _kubectl(
        control_plane,
        *("patch", "noderules", unique_name, "--subresource=status", "--type=merge"),
        *("-p", patch),
    )

    assert patched.returncode != 0
    assert "status.conditions[0].status" in patched.stderr, patched.stderr
