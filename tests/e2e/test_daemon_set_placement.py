"""`daemon_set_placement.refusal` agrees with the real DaemonSet controller (v1.36.3) on which
nodes get a DaemonSet's pod: seeded random nodes (labels, taints of every effect, one cordoned)
and DaemonSets (nodeSelector, required node affinity with every operator and matchFields,
tolerations of every shape), every (DaemonSet, node) pair compared once the controller settled."""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from kubernetes import client as k8s_client

from nodegate.core.rules.node import NodeTaint
from nodegate.core.views.daemon_set_placement import placement_of, refusal
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import SimNode, create_node, wait_until
from tests.e2e.support.reconciler_fixtures import PAUSE_IMAGE, own_namespace

pytestmark = pytest.mark.timeout(120)

SEED = 23
NODES = 6
RANDOM_DAEMONSETS = 8
GROUP = "placement.example.com/group"
"""On every node of the test, and in every DaemonSet's nodeSelector: the cluster is shared."""

LABELS = {
    "example.com/tier": ["a", "b"],
    "example.com/zone": ["z1", "z2"],
    "example.com/size": ["3", "7", "12"],
}
TAINTS = [  # (key, value, effect)
    ("example.com/gpu", "present", "NoSchedule"),
    ("example.com/gpu", "absent", "NoSchedule"),
    ("example.com/gpu", "present", "NoExecute"),
    ("example.com/drain", "", "NoExecute"),
    ("example.com/tier", "b", "NoSchedule"),
    ("example.com/soft", "", "PreferNoSchedule"),
]
TOLERATIONS: list[dict[str, str]] = [
    {"key": "example.com/gpu", "operator": "Equal", "value": "present"},
    {"key": "example.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "example.com/gpu", "operator": "Exists", "effect": "NoExecute"},
    {"key": "example.com/drain", "operator": "Exists"},
    {"key": "example.com/tier", "value": "b", "effect": "NoSchedule"},
    {"key": "example.com/tier", "value": "a"},
]
EVERYTHING = {"operator": "Exists"}
CORDONED = ("node.kubernetes.io/unschedulable", "NoSchedule")
SETTLED_FOR = 2.0


def scene(seed: int, names: list[str], group: str) -> tuple[list[SimNode], dict[str, Any]]:
    """The nodes (the first one to be cordoned) and the DaemonSets' template specs, by name."""
    rng = random.Random(seed)
    nodes = [random_node(rng, name, group) for name in names]
    specs = {f"random-{i}": random_template_spec(rng, names) for i in range(RANDOM_DAEMONSETS)}
    return nodes, specs | chosen_template_specs(names)


def uncovered(nodes: list[SimNode], specs: dict[str, Any]) -> set[str]:
    """What the scene leaves out of what it is meant to compare: every label and field
    operator, every taint effect, every toleration."""
    wanted = {f"labels {op}" for op in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")}
    wanted |= {"fields In", "fields NotIn", "NoSchedule", "NoExecute", "PreferNoSchedule"}
    wanted |= {json.dumps(t, sort_keys=True) for t in TOLERATIONS}
    for spec in specs.values():
        selector = (spec.get("affinity") or {}).get("nodeAffinity", {})
        terms = selector.get("requiredDuringSchedulingIgnoredDuringExecution", {})
        for term in terms.get("nodeSelectorTerms", ()):
            wanted -= {f"labels {r['operator']}" for r in term.get("matchExpressions", ())}
            wanted -= {f"fields {r['operator']}" for r in term.get("matchFields", ())}
        wanted -= {json.dumps(t, sort_keys=True) for t in spec.get("tolerations", ())}
    wanted -= {taint["effect"] for node in nodes for taint in node.taints}
    return wanted


def random_node(rng: random.Random, name: str, group: str) -> SimNode:
    labels = {key: rng.choice(values) for key, values in LABELS.items() if rng.random() < 0.7}
    taints: dict[tuple[str, str], dict[str, str]] = {}
    for key, value, effect in rng.sample(TAINTS, rng.randint(0, 3)):
        taints[(key, effect)] = {"key": key, "effect": effect} | ({"value": value} if value else {})
    return SimNode(
        name=name, labels={GROUP: group, **labels}, taints=list(taints.values()), kwok=True
    )


def random_expression(rng: random.Random) -> dict[str, Any]:
    key = rng.choice(list(LABELS))
    operator = rng.choice(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"])
    requirement: dict[str, Any] = {"key": key, "operator": operator}
    if operator in ("In", "NotIn"):
        requirement["values"] = rng.sample(LABELS[key], rng.randint(1, 2))
    elif operator in ("Gt", "Lt"):
        requirement["values"] = [rng.choice(["5", "7", "10"])]
    return requirement


def random_term(rng: random.Random, nodes: list[str]) -> dict[str, Any]:
    term: dict[str, Any] = {
        "matchExpressions": [random_expression(rng) for _ in range(rng.randint(1, 2))]
    }
    if rng.random() < 0.3:
        operator = rng.choice(["In", "NotIn"])
        term |= name_field(operator, rng.choice(nodes))
    return term


def random_template_spec(rng: random.Random, nodes: list[str]) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if rng.random() < 0.3:
        key = rng.choice(list(LABELS))
        spec["nodeSelector"] = {key: rng.choice(LABELS[key])}
    if rng.random() < 0.7:
        spec["affinity"] = required([random_term(rng, nodes) for _ in range(rng.randint(1, 2))])
    tolerations = rng.sample(TOLERATIONS, rng.randint(0, 3))
    if rng.random() < 0.1:
        tolerations.append(EVERYTHING)
    if tolerations:
        spec["tolerations"] = tolerations
    return spec


def required(terms: list[dict[str, Any]]) -> dict[str, Any]:
    selector = {"nodeSelectorTerms": terms}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": selector}}


def expression(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}


def name_field(operator: str, node: str) -> dict[str, Any]:
    return {"matchFields": [{"key": "metadata.name", "operator": operator, "values": [node]}]}


def chosen_template_specs(nodes: list[str]) -> dict[str, dict[str, Any]]:
    """Cases a seed may miss: an empty term beside one that matches, a Gt the API takes but
    the selector cannot parse (its term matches nothing), a template bound to one node, a
    nodeSelector alone."""
    return {
        "empty-term": {"affinity": required([{}, expression("example.com/tier", "Exists")])},
        "unparsable-gt": {
            "affinity": required(
                [expression("example.com/size", "Gt", "big"), name_field("In", nodes[0])]
            ),
            "tolerations": [EVERYTHING],
        },
        "named-node": {"nodeName": nodes[1], "tolerations": [EVERYTHING]},
        "selector": {"nodeSelector": {"example.com/tier": "a"}, "tolerations": [EVERYTHING]},
    }


def daemonset(name: str, group: str, template_spec: dict[str, Any]) -> dict[str, Any]:
    spec = {
        **template_spec,
        "nodeSelector": {GROUP: group, **template_spec.get("nodeSelector", {})},
        "containers": [{"name": "agent", "image": PAUSE_IMAGE}],
        "terminationGracePeriodSeconds": 0,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    }


def raw(response: Any) -> Any:
    return json.loads(response.data)


def target_node(pod: dict[str, Any]) -> str:
    """Where the controller put a daemon pod: its nodeName, or before binding the node its
    affinity names (the controller's `GetTargetNodeName`)."""
    spec = pod["spec"]
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    for term in terms["nodeSelectorTerms"]:
        for field in term.get("matchFields") or ():
            if field["key"] == "metadata.name" and field["operator"] == "In":
                return str(field["values"][0])
    raise AssertionError(f"daemon pod {pod['metadata']['name']} names no node")


def controller_view(
    apps: k8s_client.AppsV1Api, core: k8s_client.CoreV1Api, namespace: str
) -> dict[str, frozenset[str]] | None:
    """Each DaemonSet's nodes with a pod, once its status accounts for them all; else None."""
    placed: dict[str, set[str]] = {}
    for pod in raw(core.list_namespaced_pod(namespace, _preload_content=False))["items"]:
        if pod["metadata"].get("deletionTimestamp"):
            return None
        placed.setdefault(pod["metadata"]["labels"]["app"], set()).add(target_node(pod))
    view = {}
    for ds in raw(apps.list_namespaced_daemon_set(namespace, _preload_content=False))["items"]:
        status, name = ds.get("status") or {}, ds["metadata"]["name"]
        nodes = frozenset(placed.get(name, ()))
        if (
            status.get("observedGeneration") != ds["metadata"]["generation"]
            or status.get("desiredNumberScheduled", -1) != len(nodes)
            or status.get("currentNumberScheduled", -1) != len(nodes)
            or status.get("numberMisscheduled", 0) != 0
        ):
            return None
        view[name] = nodes
    return view


def settled(
    apps: k8s_client.AppsV1Api, core: k8s_client.CoreV1Api, namespace: str, count: int
) -> dict[str, frozenset[str]]:
    """The controller's placements, once they and its status agree and hold for SETTLED_FOR."""
    seen: list[tuple[float, dict[str, frozenset[str]]]] = []

    def steady() -> dict[str, frozenset[str]] | None:
        view = controller_view(apps, core, namespace)
        if view is None or len(view) != count:
            seen.clear()
            return None
        if not seen or seen[0][1] != view:
            seen[:] = [(time.monotonic(), view)]
        return view if time.monotonic() - seen[0][0] >= SETTLED_FOR else None

    return wait_until(steady, 60, "the DaemonSet controller to settle", interval=0.25)


def nodes_as_the_controller_sees_them(
    core: k8s_client.CoreV1Api, names: list[str]
) -> dict[str, tuple[dict[str, str], list[NodeTaint]]]:
    nodes = {}
    for name in names:
        node = raw(core.read_node(name, _preload_content=False))
        taints = [NodeTaint.from_k8s(t) for t in node["spec"].get("taints") or ()]
        nodes[name] = (node["metadata"].get("labels") or {}, taints)
    return nodes


def carries_only(core: k8s_client.CoreV1Api, expected: dict[str, set[tuple[str, str]]]) -> bool:
    """Every node's taints are its own (and the cordon's): the lifecycle controller has lifted
    the not-ready taint a new node is born with."""
    for name, (_, taints) in nodes_as_the_controller_sees_them(core, list(expected)).items():
        if {t.identity for t in taints} != expected[name]:
            return False
    return True


def _kind(reason: str | None) -> str:
    """What kept a pod away, in a word or two, for the summary line."""
    if reason is None:
        return "placed"
    for words, kind in (
        ("nodeSelector", "nodeSelector"),
        ("affinity", "affinity"),
        ("taint", "taint"),
        ("names node", "nodeName"),
    ):
        if words in reason:
            return kind
    return reason


@pytest.fixture
def namespace(scheduling_core_v1: k8s_client.CoreV1Api, unique_name: str) -> Iterator[str]:
    yield from own_namespace(scheduling_core_v1, unique_name)


def test_refusal_agrees_with_the_daemonset_controller_on_every_node(
    scheduling_control_plane: LocalControlPlane,
    scheduling_core_v1: k8s_client.CoreV1Api,
    namespace: str,
    unique_name: str,
) -> None:
    core, apps = scheduling_core_v1, k8s_client.AppsV1Api(scheduling_control_plane.client)
    started = time.monotonic()
    names = [f"{unique_name}-{i}"[:63] for i in range(NODES)]
    sim_nodes, specs = scene(SEED, names, unique_name)
    assert uncovered(sim_nodes, specs) == set(), f"seed {SEED} leaves these out"
    expected = {node.name: {(t["key"], t["effect"]) for t in node.taints} for node in sim_nodes}
    expected[names[0]].add(CORDONED)
    with ExitStack() as stack:
        for node in sim_nodes:
            create_node(core, node)
            stack.callback(core.delete_node, node.name)
        # the node lifecycle controller taints it node.kubernetes.io/unschedulable
        core.patch_node(names[0], {"spec": {"unschedulable": True}})
        wait_until(lambda: carries_only(core, expected), 60, "the nodes to carry only their taints")
        for name, spec in specs.items():
            body = daemonset(name, unique_name, spec)
            apps.create_namespaced_daemon_set(namespace, body)  # type: ignore[arg-type]
        placed_by_controller = settled(apps, core, namespace, len(specs))

        nodes = nodes_as_the_controller_sees_them(core, names)
        mismatches, answers = [], Counter[str]()
        for name, spec in specs.items():
            placement = placement_of(daemonset(name, unique_name, spec)["spec"]["template"]["spec"])
            for node_name, (labels, taints) in nodes.items():
                ours = refusal(placement, node_name, labels, taints)
                theirs = node_name in placed_by_controller[name]
                answers[_kind(ours)] += 1
                if (ours is None) != theirs:
                    mismatches.append(
                        f"DaemonSet {name} on node {node_name}: the controller "
                        f"{'created a pod' if theirs else 'created none'}, refusal() says "
                        f"{ours or 'it goes there'} (template {spec}; node labels {labels}, "
                        f"taints {[str(t) for t in taints]})"
                    )
        print(
            f"{len(specs) * len(nodes)} (DaemonSet, node) pairs compared in "
            f"{time.monotonic() - started:.1f}s; refusal(): {dict(answers)}"
        )
        assert mismatches == [], "\n".join(mismatches)
        assert set(answers) == {"placed", "nodeSelector", "affinity", "taint", "nodeName"}
