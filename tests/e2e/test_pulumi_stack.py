"""The project's own Pulumi project, for real: `Pulumi.yaml` and the `infra/` program run by the
real engine (v3.274.1), its Python host and the Kubernetes provider, on a stack of the
reconciler and a Karpenter pool, against a local control plane running Karpenter's kwok
provider (issue 48).

The engine runs in the repository root, so it reads the repository's `Pulumi.yaml` (`main:
infra/`) and runs `infra/__main__.py` with the repository's `.venv` (the `virtualenv` that
Pulumi.yaml names: the host built here, v3.68.0, predates the engine's passing of runtime
options, so the venv is activated as a user's shell would, `VIRTUAL_ENV` and PATH). Only the
state (a `file://` backend) and the stack's config file (`--config-file`) live in a temporary
directory; the stack is created from a copy of Pulumi.yaml there, so no stack file is written
into the repository.

One story, each step checked on the cluster (Kubernetes API reads), or on what Pulumi plans or
records (`preview --json`, `stack export`) where the step is about that:
a. `pulumi up` creates the Karpenter NodePool and every reconciler object;
b. Karpenter launches a node for a pending pod, and no version of that Node is without the
   rules' startup gate (or Karpenter's own unregistered taint before it);
c. the reconciler, run from the deployed Deployment's args and env under its ServiceAccount,
   on the deployed rules ConfigMap, lifts the gate, and fills the Node admission webhook's
   Secret and caBundle;
d. a rules edit in the stack config previews as an update of the rules ConfigMap alone, and
   after `pulumi up` the running reconciler applies it (what it wrote for the webhook stays);
e. a hand edit of the Deployment shows in `pulumi refresh` (the state records it, the next
   preview plans to put it back, and nothing else, and `up` does);
f. `pulumi destroy` removes every object the stack made; the taints the reconciler put on nodes
   stay (docs/infra.md, "Destroying a stack"), and Karpenter terminates its NodePool's nodes.

The story runs on `rulesSource: configmap`. A second, short stack on the default, objects: one
`pulumi up` makes the NodeRules CRD and then the rules as a NodeRules object (previewed before
the CRD exists), and no rules ConfigMap;
a rules edit previews as an update of that object alone; `destroy` removes both. Measured on 2
cores: the story alone 59 s (its first `up` 15 s, its destroy 10 s); this stack 30-40 s more.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import subprocess
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client
from kubernetes import watch
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError

from nodegate.core.objects.installation import RULES_KEY
from nodegate.core.rules.model import CRD_NAME, PLURAL
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.karpenter import KWOK_NODE_CLASS
from nodegate.localcluster.nodes import SimNode, create_node, wait_until
from nodegate.localcluster.pulumi_tools import (
    PulumiTools,
    ensure_pulumi_built,
    install_kubernetes_plugin,
    pulumi_environment,
)
from nodegate.manifests.crd import GROUP, VERSION
from tests.e2e.conftest import run_karpenter_plane
from tests.e2e.support.pulumi_project import REPO, project_venv, run_pulumi
from tests.e2e.support.reconciler_fixtures import init_daemonset, taints_of
from tests.e2e.support.reconciler_process import ReconcilerProcess, running_reconciler
from tests.e2e.support.shipped_manifests import service_account_kubeconfig, service_account_token

pytestmark = [pytest.mark.pulumi, pytest.mark.karpenter, pytest.mark.timeout(600)]

GATE_KEY = "startup-taint.cluster-autoscaler.kubernetes.io/net-init"
GATE = (GATE_KEY, "NoSchedule")
UNREGISTERED = ("karpenter.sh/unregistered", "NoExecute")
POOL_LABEL = "example.com/pool"
TEAM_LABEL = "example.com/team"
TEAM_TAINT = ("example.com/team", "NoSchedule")
ROLE_LABEL = "example.com/role"
POD_IMAGE = "registry.k8s.io/pause:3.10"
WITHIN = 90.0


# --- the cluster and the tools ---------------------------------------------------------------


@pytest.fixture(scope="module")
def plane(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalControlPlane]:
    yield from run_karpenter_plane(request, tmp_path_factory)


@pytest.fixture(scope="module")
def tools() -> PulumiTools:
    """The cached tools (built at collection by the conftest), the provider installed."""
    built = ensure_pulumi_built()
    install_kubernetes_plugin(built)
    return built


@dataclass
class Stack:
    """One stack of the repository's project: state and config file in a temporary directory."""

    tools: PulumiTools
    name: str
    config_file: Path
    env: dict[str, str]
    timings: dict[str, list[float]] = field(default_factory=dict)

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        started = time.monotonic()
        result = run_pulumi(self.tools, self.env, REPO, *args, "--stack", self.name)
        self.timings.setdefault(args[0], []).append(time.monotonic() - started)
        if check:
            assert result.returncode == 0, (
                f"pulumi {' '.join(args)}:\n{result.stdout[-6000:]}\n{result.stderr[-6000:]}"
            )
        return result

    def with_config(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run(*args, "--config-file", str(self.config_file), check=check)

    def write_config(self, config: dict[str, Any]) -> None:
        """The stack file as a user writes it (the salt `stack init` wrote is kept)."""
        current = yaml.safe_load(self.config_file.read_text(encoding="utf-8")) or {}
        current["config"] = config
        self.config_file.write_text(yaml.safe_dump(current, sort_keys=False), encoding="utf-8")

    def up(self) -> None:
        self.with_config("up", "--yes", "--skip-preview")

    def preview(self) -> dict[str, Any]:
        """`pulumi preview --diff --json`: the steps the engine plans."""
        planned: dict[str, Any] = json.loads(self.with_config("preview", "--diff", "--json").stdout)
        return planned

    def export(self) -> list[dict[str, Any]]:
        """The resources the state records (`pulumi stack export`)."""
        state = json.loads(self.run("stack", "export").stdout)
        resources: list[dict[str, Any]] = state["deployment"].get("resources") or []
        return resources


def changes(plan: dict[str, Any]) -> dict[str, str]:
    """URN type and name -> op of every step that is not `same`."""
    return {
        step["urn"].rsplit("::", 1)[-1]: step["op"]
        for step in plan.get("steps", [])
        if step["op"] != "same"
    }


# --- the stack's rules and config ------------------------------------------------------------


@dataclass(frozen=True)
class Names:
    """Names unique to one test run. Every value starts with letters: a bare hex suffix such as
    `973e38` is a float to the engine's YAML 1.2 reader, though PyYAML writes it unquoted."""

    suffix: str

    @property
    def pool(self) -> str:
        return f"kp-{self.suffix}"

    @property
    def namespace(self) -> str:
        return f"nodegate-{self.suffix}"

    @property
    def reconciler(self) -> str:
        return f"nodegate-reconciler-{self.suffix}"  # ClusterRole names are cluster-wide

    @property
    def init_app(self) -> str:
        return f"net-init-{self.suffix}"

    @property
    def workload(self) -> str:
        return f"work-{self.suffix}"

    @property
    def system_node(self) -> str:
        return f"system-{self.suffix}"


def rules(names: Names, *, team_taint: bool) -> dict[str, Any]:
    """A Karpenter pool gated until its init pod is Ready; with `team_taint`, also a label
    taint for nodes labelled for a team (no pool of the rules has that label: the reconciler's)."""
    text = textwrap.dedent(
        f"""\
        apiVersion: nodegate.dev/v1
        kind: NodeRules
        startupGates:
          - name: net-init
            match: {{labels: {{{POOL_LABEL}: {names.pool}}}}}
            taint: {{key: {GATE_KEY}, value: wait, effect: NoSchedule}}
            readyWhen:
              pods: {{namespace: default, selector: {{app: {names.init_app}}}}}
            timeout: 10m
        nodePools:
          - name: {names.pool}
            provider: aks
            size: 0
            labels: {{{POOL_LABEL}: {names.pool}}}
            autoscaler:
              type: karpenter
              nodeClassRef: {{group: {KWOK_NODE_CLASS["group"]}, kind: {KWOK_NODE_CLASS["kind"]},
                             name: {KWOK_NODE_CLASS["name"]}}}
        """
    )
    document: dict[str, Any] = yaml.safe_load(text)
    if team_taint:
        document["labelTaints"] = [
            {
                "name": "team-ml",
                "match": {"labels": {TEAM_LABEL: "ml"}},
                "taint": {"key": TEAM_TAINT[0], "value": "ml", "effect": TEAM_TAINT[1]},
                "nodeMayLift": True,
            }
        ]
    return document


def stack_config(names: Names, plane: LocalControlPlane, *, team_taint: bool) -> dict[str, Any]:
    return {
        "nodegate:rulesInline": rules(names, team_taint=team_taint),
        "nodegate:reconciler": {
            "image": {"repository": "registry.example.com/nodegate"},
            "namespace": names.namespace,
            "name": names.reconciler,
            # On this test's system node: Karpenter launches nothing for the reconciler.
            "nodeSelector": {ROLE_LABEL: names.system_node},
            # The Node admission webhook: the reconciler fills its Secret and the
            # configuration's caBundle at run time, which the stack must leave alone.
            "webhook": {},
            "kubeconfig": str(plane.kubeconfig_path),
            # The story's edit is the rules ConfigMap's (an installation from before NodeRules
            # objects); the default, objects, is the second stack's.
            "rulesSource": "configmap",
        },
    }


@pytest.fixture
def stack(tools: PulumiTools, tmp_path: Path, unique_name: str) -> Stack:
    """`pulumi stack init` in a directory holding a copy of Pulumi.yaml (it writes the stack's
    salt into a `Pulumi.<stack>.yaml` beside it), then every command in the repository root on
    that file with `--config-file`."""
    backend, init = tmp_path / "state", tmp_path / "init"
    backend.mkdir()
    init.mkdir()
    (init / "Pulumi.yaml").write_bytes((REPO / "Pulumi.yaml").read_bytes())
    env = pulumi_environment(tools, venv=project_venv())
    env.update(
        {
            "PULUMI_BACKEND_URL": f"file://{backend}",
            "PULUMI_CONFIG_PASSPHRASE": "nodegate-e2e",
            # Nothing ambient: the program must reach the cluster the stack config names.
            "KUBECONFIG": str(tmp_path / "no-ambient-kubeconfig"),
        }
    )
    name = f"e2e-{unique_name[-6:]}"
    subprocess.run(
        [str(tools.engine), "-C", str(init), "stack", "init", name, "--non-interactive"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=True,
    )
    return Stack(tools, name, init / f"Pulumi.{name}.yaml", env)


# --- cluster reads -----------------------------------------------------------------------------


def exists(plane: LocalControlPlane, obj: dict[str, Any]) -> bool:
    """Whether the API server has the object (found by apiVersion, kind, name, namespace)."""
    resource = DynamicClient(plane.client).resources.get(  # type: ignore[no-untyped-call]
        api_version=obj["apiVersion"], kind=obj["kind"]
    )
    meta = obj["metadata"]
    try:
        resource.get(name=meta["name"], namespace=meta.get("namespace"))
    except NotFoundError:
        return False
    return True


class NodeVersions:
    """Every version of the pool's Nodes, from a watch started before any of them exists."""

    def __init__(self, core: k8s_client.CoreV1Api, pool: str) -> None:
        self.core = core
        self.selector = f"karpenter.sh/nodepool={pool}"
        self.seen: list[tuple[str, str, set[tuple[str, str]]]] = []
        self.error: BaseException | None = None
        self._stopped = threading.Event()
        self._watch = watch.Watch()  # type: ignore[no-untyped-call]
        listed = core.api_client.sanitize_for_serialization(
            core.list_node(label_selector=self.selector)
        )
        version = listed["metadata"]["resourceVersion"]
        self._thread = threading.Thread(target=self._run, args=(version,), daemon=True)
        self._thread.start()

    def _run(self, version: str) -> None:
        try:
            for event in self._watch.stream(  # type: ignore[no-untyped-call]
                self.core.list_node,
                label_selector=self.selector,
                resource_version=version,
                timeout_seconds=int(WITHIN),
            ):
                node = event["raw_object"]
                self.seen.append((event["type"], node["metadata"]["name"], taint_keys(node)))
        # Reported by `versions()` unless the test had stopped listening (the control plane
        # goes away at teardown under an open watch).
        except Exception as error:
            if not self._stopped.is_set():
                self.error = error

    def versions(self) -> list[tuple[str, str, set[tuple[str, str]]]]:
        assert self.error is None, f"the Node watch failed: {self.error!r}"
        return list(self.seen)

    def stop(self) -> None:
        self._stopped.set()
        self._watch.stop()  # type: ignore[no-untyped-call]


# --- the story -----------------------------------------------------------------------------------


@dataclass
class Story:
    """What the steps share: the cluster, the stack, the names, and what to undo."""

    plane: LocalControlPlane
    stack: Stack
    names: Names
    tmp_path: Path
    cleanup: ExitStack
    marks: dict[str, float] = field(default_factory=dict)
    objects: list[dict[str, Any]] = field(default_factory=list)
    """apiVersion, kind and name (and namespace) of every object the stack records."""
    node: str = ""
    """The node Karpenter launched."""
    reconciler: ReconcilerProcess | None = None
    webhook: tuple[str, str] = ("", "")
    """The webhook's Secret and MutatingWebhookConfiguration, as its Deployment names them."""
    webhook_state: tuple[Any, Any] = (None, None)
    """The webhook Secret's data and the configuration's caBundle the reconciler wrote."""

    @property
    def core(self) -> k8s_client.CoreV1Api:
        return k8s_client.CoreV1Api(self.plane.client)

    @property
    def apps(self) -> k8s_client.AppsV1Api:
        return k8s_client.AppsV1Api(self.plane.client)

    def mark(self, step: str) -> None:
        self.marks[step] = time.monotonic()

    def raw(self, obj: object) -> Any:
        """A client model as the API's JSON (camelCase keys), typed loosely as tests read it."""
        return self.plane.client.sanitize_for_serialization(obj)  # type: ignore[no-untyped-call]

    def deployment(self) -> dict[str, Any]:
        names = self.names
        raw: dict[str, Any] = self.raw(
            self.apps.read_namespaced_deployment(names.reconciler, names.namespace)
        )
        return raw

    def pool_nodes(self) -> list[dict[str, Any]]:
        selector = f"karpenter.sh/nodepool={self.names.pool}"
        nodes: list[dict[str, Any]] = self.raw(self.core.list_node(label_selector=selector))[
            "items"
        ]
        return nodes


RECONCILER_KINDS = [
    "ClusterRole",
    "CustomResourceDefinition",
    "ClusterRoleBinding",
    "ConfigMap",
    "Deployment",
    "MutatingWebhookConfiguration",
    "Namespace",
    "PodDisruptionBudget",
    "Role",
    "RoleBinding",
    "Secret",
    "Service",
    "Service",
    "ServiceAccount",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
]


def test_the_projects_stack_deploys_gates_edits_refreshes_and_destroys_for_real(
    plane: LocalControlPlane, stack: Stack, unique_name: str, tmp_path: Path
) -> None:
    with ExitStack() as cleanup:
        story = Story(plane, stack, Names(unique_name[-6:]), tmp_path, cleanup)
        story.mark("start")
        _scene(story)
        step_a_up_creates_the_nodepool_and_the_reconciler(story)
        step_b_karpenter_launches_a_node_born_gated(story)
        step_c_the_deployed_reconciler_lifts_the_gate(story)
        step_d_a_rules_edit_previews_as_the_configmap_and_is_applied(story)
        step_e_a_hand_edit_shows_in_refresh(story)
        step_f_destroy_removes_the_stacks_objects_and_leaves_taints(story)

    marks = list(story.marks.items())
    steps = ", ".join(
        f"{step} {end - begin:.1f}s" for (_, begin), (step, end) in itertools.pairwise(marks)
    )
    commands = ", ".join(
        f"{command} {'/'.join(f'{t:.1f}' for t in runs)}s"
        for command, runs in stack.timings.items()
    )
    print(f"\nsteps: {steps}\npulumi: {commands}")


def _scene(story: Story) -> None:
    """The reconciler's node (its nodeSelector: Karpenter launches nothing for it), the gate's
    init agent, and a destroy at the end whatever happens (the NodePool takes Karpenter's nodes)."""
    names, core, cleanup = story.names, story.core, story.cleanup
    system = SimNode(name=names.system_node, labels={ROLE_LABEL: names.system_node}, kwok=True)
    create_node(core, system)
    cleanup.callback(_ignore_missing, core.delete_node, names.system_node)
    agent = init_daemonset(names.init_app, {POOL_LABEL: names.pool}, GATE_KEY)
    story.apps.create_namespaced_daemon_set("default", agent)  # type: ignore[arg-type]
    cleanup.callback(
        _ignore_missing, story.apps.delete_namespaced_daemon_set, names.init_app, "default"
    )
    cleanup.callback(story.stack.with_config, "destroy", "--yes", "--skip-preview", check=False)


def step_a_up_creates_the_nodepool_and_the_reconciler(story: Story) -> None:
    names, stack = story.names, story.stack
    stack.write_config(stack_config(names, story.plane, team_taint=False))
    stack.up()
    declared = [
        r
        for r in stack.export()
        if r["type"].startswith("kubernetes:") and not r["type"].startswith("pulumi:providers:")
    ]
    assert sorted(r["outputs"]["kind"] for r in declared) == sorted([*RECONCILER_KINDS, "NodePool"])
    story.objects = [
        {
            "apiVersion": r["outputs"]["apiVersion"],
            "kind": r["outputs"]["kind"],
            "metadata": {
                key: r["outputs"]["metadata"][key]
                for key in ("name", "namespace")
                if key in r["outputs"]["metadata"]
            },
        }
        for r in declared
    ]
    missing = [o for o in story.objects if not exists(story.plane, o)]
    assert missing == [], f"recorded by the stack but not in the cluster: {missing}"
    custom = k8s_client.CustomObjectsApi(story.plane.client)
    nodepool: dict[str, Any] = custom.get_cluster_custom_object(  # type: ignore[assignment]
        "karpenter.sh", "v1", "nodepools", names.pool
    )
    template = nodepool["spec"]["template"]
    assert template["spec"]["startupTaints"] == [
        {"key": GATE_KEY, "value": "wait", "effect": "NoSchedule"}
    ]
    assert template["metadata"]["labels"][POOL_LABEL] == names.pool
    deployment = story.deployment()
    assert deployment["status"].get("readyReplicas") == deployment["spec"]["replicas"], (
        "rollout not awaited"
    )
    story.mark("a. up")


def step_b_karpenter_launches_a_node_born_gated(story: Story) -> None:
    names, core = story.names, story.core
    versions = NodeVersions(core, names.pool)
    story.cleanup.callback(versions.stop)
    story.apps.create_namespaced_deployment("default", _workload(names))  # type: ignore[arg-type]
    story.cleanup.callback(
        _ignore_missing, story.apps.delete_namespaced_deployment, names.workload, "default"
    )

    def registered() -> str | None:
        for node in story.pool_nodes():
            if UNREGISTERED not in taint_keys(node):
                return str(node["metadata"]["name"])
        return None

    story.node = wait_until(registered, WITHIN, "Karpenter launched and registered a node")
    assert GATE in taints_of(core, story.node)
    seen = versions.versions()
    naked = [version for version in seen if not version[2] & {GATE, UNREGISTERED}]
    assert seen, "the watch saw no Node"
    assert naked == [], f"versions of the node with neither the gate nor unregistered: {naked}"
    versions.stop()
    time.sleep(3.0)  # the gate holds: nothing lifts it yet
    assert GATE in taints_of(core, story.node)
    assert not _bound(core, names.workload), "a pod that does not tolerate the gate was bound"
    story.mark("b. node born gated")


def step_c_the_deployed_reconciler_lifts_the_gate(story: Story) -> None:
    """Its container's args as deployed (the ports aside: 0, a free one, outside a pod), its
    env as the kubelet resolves it for one of its pods, its ServiceAccount's token."""
    names, core = story.names, story.core
    deployment = story.deployment()
    pod_spec = deployment["spec"]["template"]["spec"]
    container = pod_spec["containers"][0]
    args = [a for a in container["args"] if not a.startswith("--http-port")]
    args = ["--webhook-port=0" if a.startswith("--webhook-port=") else a for a in args]
    [rules_ref] = [a.split("=", 1)[1] for a in args if a.startswith("--rules-configmap=")]
    namespace, configmap = rules_ref.split("/")
    labels = deployment["spec"]["selector"]["matchLabels"]
    selector = ",".join(f"{key}={value}" for key, value in labels.items())
    pods = story.raw(core.list_namespaced_pod(names.namespace, label_selector=selector))["items"]
    pod = next(p for p in pods if p["spec"].get("nodeName") == names.system_node)
    token = service_account_token(core, names.namespace, pod_spec["serviceAccountName"])
    kubeconfig = service_account_kubeconfig(story.plane, token, story.tmp_path / "sa-kubeconfig")
    story.reconciler = story.cleanup.enter_context(
        running_reconciler(
            kubeconfig, story.tmp_path, *args, env=_downward_env(container["env"], pod)
        )
    )
    wait_until(lambda: GATE not in taints_of(core, story.node), WITHIN, "the gate lifted")
    wait_until(lambda: _bound(core, names.workload), WITHIN, "the workload bound")
    # The webhook's certificates, made and trusted by the reconciler under the deployed RBAC.
    secret = _argument(args, "--webhook-tls-secret")
    configuration = _argument(args, "--webhook-configuration")
    admission = k8s_client.AdmissionregistrationV1Api(story.plane.client)

    def trusted() -> bool:
        webhook = story.raw(admission.read_mutating_webhook_configuration(configuration))
        data = story.raw(core.read_namespaced_secret(secret, names.namespace)).get("data")
        return bool(data) and bool(webhook["webhooks"][0]["clientConfig"].get("caBundle"))

    wait_until(trusted, WITHIN, "the webhook's Secret and caBundle filled by the reconciler")
    story.webhook = (secret, configuration)
    story.webhook_state = _webhook_state(story)
    deployed = story.raw(core.read_namespaced_config_map(configmap, namespace))["data"]
    assert {key: yaml.safe_load(text) for key, text in deployed.items()} == {
        RULES_KEY: rules(names, team_taint=False)
    }
    # The stack's output says which rules the cluster runs (docs/infra.md, "Outputs").
    outputs = json.loads(story.stack.run("stack", "output", "--json").stdout)
    digest = hashlib.sha256(deployed[RULES_KEY].encode("utf-8")).hexdigest()
    assert outputs["reconciler"]["rulesSha256"] == digest
    assert outputs["reconciler"]["namespace"] == names.namespace
    assert outputs["pools"][names.pool]["startupTaints"] == [f"{GATE_KEY}=wait:NoSchedule"]
    story.mark("c. gate lifted")


def step_d_a_rules_edit_previews_as_the_configmap_and_is_applied(story: Story) -> None:
    names, core, stack = story.names, story.core, story.stack
    before = story.deployment()
    stack.write_config(stack_config(names, story.plane, team_taint=True))
    planned = changes(stack.preview())
    assert planned == {"reconciler-configmap-nodegate-rules": "update"}, planned
    for node in (story.node, names.system_node):
        core.patch_node(node, {"metadata": {"labels": {TEAM_LABEL: "ml"}}})
    time.sleep(2.0)
    assert TEAM_TAINT not in taints_of(core, story.node), "tainted before the edit was deployed"
    stack.up()
    for node in (story.node, names.system_node):
        _wait_for_taint(core, node, TEAM_TAINT)
    after = story.deployment()
    assert after["metadata"]["generation"] == before["metadata"]["generation"], "it rolled"
    assert _webhook_state(story) == story.webhook_state, "`up` took what the reconciler wrote"
    assert story.reconciler is not None
    assert story.reconciler.metric("nodegate_errors_total") == 0
    refused = [line for line in story.reconciler.logs().splitlines() if "Forbidden" in line]
    assert refused == [], "the deployed RBAC refused the reconciler something"
    story.mark("d. rules edit")


def step_e_a_hand_edit_shows_in_refresh(story: Story) -> None:
    """`kubectl scale` of the reconciler: refresh records it, the next preview plans to take it
    back and `up` does (with the stack's force: without it, the preview failed on the
    conflict)."""
    names, stack = story.names, story.stack
    replicas: int = story.deployment()["spec"]["replicas"]
    story.apps.patch_namespaced_deployment_scale(
        names.reconciler, names.namespace, {"spec": {"replicas": replicas + 1}}
    )
    stack.with_config("refresh", "--yes", "--skip-preview")
    recorded = next(r for r in stack.export() if r["type"] == "kubernetes:apps/v1:Deployment")
    assert recorded["outputs"]["spec"]["replicas"] == replicas + 1
    plan = stack.preview()
    assert changes(plan) == {f"reconciler-deployment-{names.reconciler}": "update"}
    [step] = [s for s in plan["steps"] if s["op"] == "update"]
    assert set(step["detailedDiff"]) == {"spec.replicas"}, step["detailedDiff"]
    stack.up()  # and takes it back
    assert story.deployment()["spec"]["replicas"] == replicas
    assert _webhook_state(story) == story.webhook_state
    story.mark("e. refresh")


def step_f_destroy_removes_the_stacks_objects_and_leaves_taints(story: Story) -> None:
    """docs/infra.md, "Destroying a stack": every object goes; the taints the reconciler put on
    nodes stay; Karpenter terminates the deleted NodePool's nodes."""
    names, core = story.names, story.core
    story.stack.with_config("destroy", "--yes", "--skip-preview")
    left = [o for o in story.objects if exists(story.plane, o)]
    assert left == [], f"left after destroy: {left}"
    assert story.reconciler is not None
    story.reconciler.stop()  # its pod is gone, and its ServiceAccount's token with it
    assert TEAM_TAINT in taints_of(core, names.system_node), "destroy lifted a taint"
    wait_until(lambda: not story.pool_nodes(), WITHIN, "Karpenter terminated the pool's nodes")
    story.mark("f. destroy")


def test_on_rules_objects_one_up_makes_the_crd_then_the_noderules_object_for_real(
    plane: LocalControlPlane, stack: Stack, unique_name: str
) -> None:
    """`rulesSource: objects` on a cluster without the CRD: the provider plans and applies the
    NodeRules object in the same run as its CRD (the object waits on it), the object read back
    is the stack's rules, and there is no rules ConfigMap."""
    names = Names(unique_name[-6:])
    core = k8s_client.CoreV1Api(plane.client)
    custom = k8s_client.CustomObjectsApi(plane.client)
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
    }
    assert not exists(plane, crd), "the CRD is already there: one `up` would not make both"
    document: dict[str, Any] = {
        "apiVersion": "nodegate.dev/v1",
        "kind": "NodeRules",
        "metadata": {"name": f"rules-{names.suffix}"},
        "spec": {"labelTaints": rules(names, team_taint=True)["labelTaints"]},
    }
    config = stack_config(names, plane, team_taint=False)
    config["nodegate:rulesInline"] = document
    del config["nodegate:reconciler"]["webhook"]
    del config["nodegate:reconciler"]["rulesSource"]  # the default: objects
    resource = f"reconciler-noderules-{document['metadata']['name']}"
    with ExitStack() as cleanup:
        system = SimNode(name=names.system_node, labels={ROLE_LABEL: names.system_node}, kwok=True)
        create_node(core, system)
        cleanup.callback(_ignore_missing, core.delete_node, names.system_node)
        cleanup.callback(stack.with_config, "destroy", "--yes", "--skip-preview", check=False)
        stack.write_config(config)

        planned = changes(stack.preview())
        assert planned[resource] == "create", planned
        stack.up()

        found: dict[str, Any] = custom.get_cluster_custom_object(  # type: ignore[assignment]
            GROUP, VERSION, PLURAL, document["metadata"]["name"]
        )
        assert found["spec"] == document["spec"]
        assert found["metadata"]["labels"]["app.kubernetes.io/instance"] == names.reconciler
        configmaps = core.list_namespaced_config_map(names.namespace).items
        assert "nodegate-rules" not in [c.metadata.name for c in configmaps if c.metadata]
        apps = k8s_client.AppsV1Api(plane.client)
        deployment = plane.client.sanitize_for_serialization(  # type: ignore[no-untyped-call]
            apps.read_namespaced_deployment(names.reconciler, names.namespace)
        )
        assert "--rules-objects" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]

        edited = copy.deepcopy(document)
        edited["spec"]["labelTaints"][0]["taint"]["value"] = "ml-2"
        stack.write_config({**config, "nodegate:rulesInline": edited})
        assert changes(stack.preview()) == {resource: "update"}

        stack.with_config("destroy", "--yes", "--skip-preview")
        with pytest.raises(ApiException) as gone:  # the object, and its kind with the CRD
            custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, document["metadata"]["name"])
        assert gone.value.status == 404
        assert not exists(plane, crd)


def _workload(names: Names) -> dict[str, Any]:
    """A pod for the pool that does not tolerate the gate: pending until Karpenter launches a
    node and the gate is lifted."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": names.workload},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": names.workload}},
            "template": {
                "metadata": {"labels": {"app": names.workload}},
                "spec": {
                    "nodeSelector": {POOL_LABEL: names.pool},
                    "containers": [
                        {
                            "name": "app",
                            "image": POD_IMAGE,
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                        }
                    ],
                },
            },
        },
    }


def _bound(core: k8s_client.CoreV1Api, app: str) -> bool:
    pods = core.list_namespaced_pod("default", label_selector=f"app={app}").items
    return bool(pods) and all(p.spec is not None and p.spec.node_name for p in pods)


def _argument(args: list[str], flag: str) -> str:
    [value] = [a.split("=", 1)[1] for a in args if a.startswith(f"{flag}=")]
    return value


def _webhook_state(story: Story) -> tuple[Any, Any]:
    """The webhook Secret's data and the configuration's caBundle, as they are now."""
    secret, configuration = story.webhook
    admission = k8s_client.AdmissionregistrationV1Api(story.plane.client)
    webhook = story.raw(admission.read_mutating_webhook_configuration(configuration))
    data = story.raw(story.core.read_namespaced_secret(secret, story.names.namespace)).get("data")
    return data, webhook["webhooks"][0]["clientConfig"].get("caBundle")


def _wait_for_taint(core: k8s_client.CoreV1Api, node: str, taint: tuple[str, str]) -> None:
    wait_until(lambda: taint in taints_of(core, node), WITHIN, f"{taint} on {node}")


def taint_keys(node: dict[str, Any]) -> set[tuple[str, str]]:
    """(key, effect) of each taint of a Node as the API's JSON."""
    return {(t["key"], t["effect"]) for t in node["spec"].get("taints") or []}


def _downward_env(env: list[dict[str, Any]], pod: dict[str, Any]) -> dict[str, str]:
    """The container's environment as the kubelet resolves it for `pod` (values and the
    downward API's metadata fields; anything else is not expected)."""
    resolved = {}
    for var in env:
        if "value" in var:
            resolved[var["name"]] = str(var["value"])
            continue
        path = var["valueFrom"]["fieldRef"]["fieldPath"]
        assert path in ("metadata.name", "metadata.namespace"), path
        resolved[var["name"]] = str(pod["metadata"][path.split(".")[1]])
    return resolved


def _ignore_missing(call: Any, *args: Any) -> None:
    try:
        call(*args)
    except ApiException as err:
        if err.status != 404:
            raise
