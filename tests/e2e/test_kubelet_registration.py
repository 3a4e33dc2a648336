"""Born tainted, proven by a real kubelet: kubelet v1.36.3 registers what nodegate renders.

For the example rules' OKE pools (the Oracle Linux user_data and the Ubuntu `oke bootstrap`
one) and for the files the Ansible kubelet role writes (flags, and the KubeletConfiguration
drop-in), a real kubelet gets exactly the flags those artefacts hand it (tests.e2e.
rendered_kubelet_args), and the Node's FIRST version carries exactly the pool's registration
taints and labels. Then, with the reconciler running, the init pod that kubelet itself reports
Ready lifts the startup gate. kubelet runs over a fake CRI: its pods' containers "run" in memory,
but the Node, the pod's Ready condition and every write about them are kubelet's own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client

from nodegate.core.rules.loader import load_rules
from nodegate.core.rules.model import InitPods, NodePool, Taint
from nodegate.core.rules.registration import (
    permanent_taints,
    registration_labels,
    registration_taints,
)
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import wait_until
from tests.ansible.playbooks import ROOT, install_collection, inventory, run_playbook
from tests.e2e.support.real_kubelet import (
    KUBELET_NOT_READY,
    KUBELET_OWN_LABELS,
    FirstVersion,
    StartKubelet,
    first_version,
    taint_set,
)
from tests.e2e.support.reconciler_fixtures import RECONCILES, TIMEOUT, taints_of
from tests.e2e.support.reconciler_process import ReconcilerProcess, running_reconciler
from tests.e2e.support.rendered_kubelet_args import (
    env_file_kubelet_flags,
    oke_boot_kubelet_flags,
    render,
)

pytestmark = pytest.mark.kubelet

EXAMPLE_RULES = ROOT / "examples" / "rules.yaml"
GATED_POOL = "gpu"
INIT_POD_IMAGE = "registry.k8s.io/pause:3.10"


def example_pool(name: str) -> NodePool:
    [pool] = [p for p in load_rules(EXAMPLE_RULES).node_pools if p.name == name]
    return pool


def assert_born_with(first: FirstVersion, pool_name: str) -> None:
    """The first version holds the pool's registration taints and labels, and besides them
    only what kubelet adds to every Node (its not-ready taint, its own labels)."""
    rules, pool = load_rules(EXAMPLE_RULES), example_pool(pool_name)
    rendered = registration_taints(rules, pool)
    assert rendered, "every example OKE pool is born with a taint"
    assert taint_set(first.taints) == taint_set([*map(_taint, rendered), KUBELET_NOT_READY])
    assert {k: v for k, v in first.labels.items() if k not in KUBELET_OWN_LABELS} == (
        registration_labels(pool)
    )
    assert set(first.labels) - set(registration_labels(pool)) == KUBELET_OWN_LABELS


def _taint(taint: Taint) -> dict[str, str]:
    return {"key": taint.key, "value": taint.value, "effect": taint.effect}


@pytest.fixture(scope="module")
def role_flags(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """Run examples/ansible/nodes.yml (role nodegate.nodegate.kubelet) for the gated pool in
    flags mode and in config mode, each into a root of its own; the kubelet flags each left in
    its environment file (config mode's point at the drop-in directory the role wrote)."""
    work = tmp_path_factory.mktemp("kubelet-role")
    collections = install_collection(work / "collection")
    hosts = inventory(work, {"nodegate_nodes": {"nodegate_pool": GATED_POOL}})
    flags: dict[str, list[str]] = {}
    for mode in ("flags", "config"):
        root = work / mode
        (root / "etc/default").mkdir(parents=True)
        env_file = root / "etc/default/kubelet"
        settings = {
            "nodegate_rules_file": str(EXAMPLE_RULES),
            "nodegate_kubelet_mode": mode,
            "nodegate_kubelet_env_file": str(env_file),
            "nodegate_kubelet_config_dir": str(root / "etc/kubernetes/kubelet.conf.d"),
            "nodegate_kubelet_restart": False,
        }
        run = run_playbook(work, collections, "nodes.yml", hosts, settings)
        assert run.returncode == 0, run.text()
        flags[mode] = env_file_kubelet_flags(env_file)
    return flags


@pytest.fixture(scope="module")
def example_reconciler(
    control_plane: LocalControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ReconcilerProcess]:
    """`nodegate reconcile` on the example rules file, for this module's kubelets' nodes."""
    logs = tmp_path_factory.mktemp("reconciler")
    with running_reconciler(
        control_plane.kubeconfig_path,
        logs,
        "--rules-file",
        str(EXAMPLE_RULES),
        "--no-leader-elect",
        "--max-untaint-share",
        "1",
    ) as process:
        yield process
    print(process.logs()[-3000:])


@pytest.mark.parametrize("family", ["oracle-linux", "ubuntu"])
@pytest.mark.parametrize("pool", ["ci", "gpu"])
def test_an_oke_node_registers_with_exactly_its_pools_taints_and_labels(
    pool: str,
    family: str,
    start_kubelet: StartKubelet,
    core_v1: k8s_client.CoreV1Api,
    unique_name: str,
    tmp_path: Path,
) -> None:
    user_data = render(EXAMPLE_RULES, pool, "--image-family", family)
    flags = oke_boot_kubelet_flags(user_data, tmp_path)
    first = first_version(core_v1, unique_name, lambda: start_kubelet(unique_name, flags))
    print(f"{pool}/{family}: first version {first.seconds:.2f}s after kubelet started")
    assert_born_with(first, pool)


@pytest.mark.parametrize("mode", ["flags", "config"])
def test_a_self_managed_node_registers_with_exactly_what_the_kubelet_role_wrote(
    mode: str,
    role_flags: dict[str, list[str]],
    start_kubelet: StartKubelet,
    core_v1: k8s_client.CoreV1Api,
    unique_name: str,
) -> None:
    flags = role_flags[mode]
    if mode == "config":  # the taints can only come from the drop-in
        assert not [f for f in flags if f.startswith("--register-with-taints")], flags
    first = first_version(core_v1, unique_name, lambda: start_kubelet(unique_name, flags))
    print(f"ansible {mode}: first version {first.seconds:.2f}s after kubelet started")
    assert_born_with(first, GATED_POOL)


@pytest.mark.parametrize("form", ["oke-oracle-linux", "ansible-config"])
def test_a_real_kubelets_node_is_born_gated_and_lifted_once_kubelet_reports_its_init_pod_ready(
    form: str,
    example_reconciler: ReconcilerProcess,
    role_flags: dict[str, list[str]],
    start_kubelet: StartKubelet,
    core_v1: k8s_client.CoreV1Api,
    unique_name: str,
    tmp_path: Path,
) -> None:
    rules = load_rules(EXAMPLE_RULES)
    [gate] = rules.startup_gates
    gate_id = (gate.taint.key, gate.taint.effect)
    if form == "ansible-config":
        flags = role_flags["config"]
    else:
        flags = oke_boot_kubelet_flags(render(EXAMPLE_RULES, GATED_POOL), tmp_path)
    reconciles = example_reconciler.metric(RECONCILES)
    first = first_version(core_v1, unique_name, lambda: start_kubelet(unique_name, flags))
    assert (gate.taint.key, gate.taint.value, gate.taint.effect) in taint_set(first.taints)

    wait_until(lambda: example_reconciler.metric(RECONCILES) > reconciles, TIMEOUT, "reconcile")
    assert gate_id in taints_of(core_v1, unique_name), "lifted before the init pod was Ready"

    init_pods = gate.ready_when.pods
    assert init_pods is not None
    pod = _init_pod(core_v1, unique_name, init_pods)
    try:
        ready = wait_until(
            lambda: _ready_by_kubelet(core_v1, pod, init_pods.namespace), TIMEOUT, f"{pod} Ready"
        )
        print(f"{pod} Ready by kubelet at {ready}")
        taints = wait_until(
            lambda: None if gate_id in (t := taints_of(core_v1, unique_name)) else t,
            TIMEOUT,
            f"gate lifted on {unique_name}",
        )
        permanent = permanent_taints(rules, example_pool(GATED_POOL))
        assert set(taints) >= {(t.key, t.effect) for t in permanent}
    finally:
        core_v1.delete_namespaced_pod(pod, init_pods.namespace, grace_period_seconds=0)


def _init_pod(core_v1: k8s_client.CoreV1Api, node: str, init_pods: InitPods) -> str:
    """The gate's init pod, bound to `node` as its DaemonSet controller would bind it."""
    name = f"init-{node}"[:63]
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": dict(init_pods.selector)},
        "spec": {
            "nodeName": node,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "init", "image": INIT_POD_IMAGE}],
        },
    }
    core_v1.create_namespaced_pod(init_pods.namespace, body)  # type: ignore[arg-type]
    return name


def _ready_by_kubelet(core_v1: k8s_client.CoreV1Api, pod: str, namespace: str) -> str | None:
    """The Ready condition's transition time once kubelet (its status writer) set it True."""
    response: Any = core_v1.read_namespaced_pod(pod, namespace, _preload_content=False)
    read = json.loads(response.data)
    ready = [
        c
        for c in read["status"].get("conditions", [])
        if c["type"] == "Ready" and c["status"] == "True"
    ]
    writers = {
        f["manager"]
        for f in read["metadata"].get("managedFields", [])
        if f.get("subresource") == "status"
    }
    return str(ready[0]["lastTransitionTime"]) if ready and writers == {"kubelet"} else None
