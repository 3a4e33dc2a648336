"""The image `make image` built runs the reconciler exactly as the shipped Deployment runs it.

The container gets what a kubelet gives the pod: the Deployment's args (its command is the
image's ENTRYPOINT), env, user, securityContext and limits, read from deploy/reconciler.yaml and
translated by `nodegate.image.pod`; the ServiceAccount token mounted where the in-cluster config
reads it, with KUBERNETES_SERVICE_HOST/PORT; the rules: examples/rules.yaml, applied as the
NodeRules object beside it. Host networking reaches the API server on 127.0.0.1.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client
from packaging.utils import canonicalize_name

from nodegate.image import contents
from nodegate.image.build import BuiltImage, list_distributions, read_record
from nodegate.image.engine import (
    Engine,
    find_engine,
    host_hard_limits,
    inspect_image,
    run_isolation_flags,
)
from nodegate.image.errors import ImageError
from nodegate.image.pod import deployment_container, in_cluster_env, run_argv
from nodegate.image.wheelhouse import IMAGE_EXTRAS
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import wait_until
from tests.e2e.support.reconciler_fixtures import TIMEOUT, node_events, wait_for_taints
from tests.e2e.support.reconciler_process import free_port, http_get, metric_total
from tests.e2e.support.shipped_manifests import (
    apply_all_but_the_deployment,
    example_rules_applied,
    manifest_objects,
    service_account_token,
    the_deployment,
)

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 60.0
HTTP_PORT_FLAG = "--http-port="
NOT_FOUND = 404


@dataclasses.dataclass
class Container:
    """One container started by the `containers` fixture (which always removes it)."""

    engine: Engine
    name: str
    id: str = ""
    pid: int = 0

    def _engine(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.engine.name, *args], capture_output=True, text=True, check=False
        )

    def state(self) -> dict[str, Any]:
        done = self._engine("container", "inspect", self.name)
        if done.returncode != 0:
            return {}
        state: dict[str, Any] = json.loads(done.stdout)[0]["State"]
        return state

    def running(self) -> bool:
        return bool(self.state().get("Running"))

    def logs(self) -> str:
        done = self._engine("logs", self.name)
        return done.stdout + done.stderr

    def stop(self, grace_seconds: int) -> int:
        """SIGTERM, then SIGKILL after the pod's grace period, as the kubelet does."""
        done = self._engine("stop", "--time", str(grace_seconds), self.name)
        assert done.returncode == 0, done.stderr
        return int(self.state()["ExitCode"])


@pytest.fixture(scope="module")
def built() -> tuple[Engine, BuiltImage]:
    try:
        record = read_record(ROOT)
        engine = find_engine()
    except ImageError as err:
        pytest.fail(str(err), pytrace=False)
    if engine.name != record.engine or inspect_image(engine, record.id) is None:
        pytest.fail(f"{engine.name} has no image {record.id}: run `make image`", pytrace=False)
    return engine, record


@pytest.fixture
def containers(built: tuple[Engine, BuiltImage]) -> Iterator[Callable[[list[str]], Container]]:
    """Start containers; afterwards, pass or fail, remove them and check nothing is left."""
    engine, _ = built
    started: list[Container] = []

    def start(argv: list[str]) -> Container:
        container = Container(engine, argv[argv.index("--name") + 1])
        started.append(container)
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        assert done.returncode == 0, f"{' '.join(argv)}\n{done.stderr}"
        container.id = done.stdout.strip().splitlines()[-1]
        container.pid = int(container.state().get("Pid") or 0)
        return container

    yield start
    for container in started:
        subprocess.run(
            [engine.name, "rm", "--force", container.name], capture_output=True, check=False
        )
    leftovers = [c.name for c in started if c.state()]
    leftovers += [f"pid {c.pid}" for c in started if c.pid and _alive(c.pid, "nodegate")]
    leftovers += [f"pid {pid}" for c in started if c.id for pid in _processes_naming(c.id)]
    assert not leftovers, f"left behind after the test: {leftovers}"


def _alive(pid: int, marker: str) -> bool:
    try:
        return marker in Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
    except OSError:
        return False


def _processes_naming(container_id: str) -> list[int]:
    """Host processes (conmon, the runtime) whose command line names the container."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if container_id in cmdline.read_text(errors="replace"):
                pids.append(int(cmdline.parent.name))
        except OSError:
            continue
    return pids


def test_the_image_holds_the_package_and_its_runtime_dependencies_only(
    built: tuple[Engine, BuiltImage],
) -> None:
    engine, record = built
    print(f"{record.tag} ({record.id}): {record.size_bytes / 1e6:.1f} MB")
    listing = list_distributions(engine, record.id, host_hard_limits())
    installed = {canonicalize_name(name) for name in listing}
    assert installed == contents.runtime_closure("nodegate", listing, IMAGE_EXTRAS)
    assert not installed & {"pulumi", "pytest", "hypothesis", "mypy", "setuptools", "pip"}
    config = (inspect_image(engine, record.id) or {})["Config"]
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["python", "-m", "nodegate.cli", "reconcile"]


def test_the_image_holds_no_harness_package(built: tuple[Engine, BuiltImage]) -> None:
    # The local control plane, the image builder and the demo are development tooling
    # (harness/); the image's nodegate is the product alone.
    engine, record = built
    program = (
        "import json, nodegate, pathlib;"
        "print(json.dumps([p.name for d in nodegate.__path__ for p in pathlib.Path(d).iterdir()]))"
    )
    argv = [
        engine.name,
        "run",
        "--rm",
        "--network=none",
        *run_isolation_flags(engine, host_hard_limits()),
    ]
    done = subprocess.run(
        [*argv, "--entrypoint", "python", record.id, "-c", program],
        capture_output=True,
        text=True,
        check=True,
    )
    packages = set(json.loads(done.stdout))
    assert "core" in packages
    assert not packages & {"localcluster", "image", "demo"}


def test_the_image_has_no_compiler(built: tuple[Engine, BuiltImage]) -> None:
    engine, record = built
    compilers = ("gcc", "cc", "c++", "clang", "make")
    program = f"import shutil; print([c for c in {compilers!r} if shutil.which(c)])"
    argv = [
        engine.name,
        "run",
        "--rm",
        "--network=none",
        *run_isolation_flags(engine, host_hard_limits()),
    ]
    done = subprocess.run(
        [*argv, "--entrypoint", "python", record.id, "-c", program],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "[]"


def _process_status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return dict(line.split(":\t", 1) for line in lines if ":\t" in line)


def _root_mount_options(pid: int) -> set[str]:
    """Mount options of the process's / (mountinfo field 6)."""
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[4] == "/":
            return set(fields[5].split(","))
    raise AssertionError(f"no / in /proc/{pid}/mountinfo")


def _service_account_dir(
    core_v1: k8s_client.CoreV1Api, plane: LocalControlPlane, namespace: str, name: str, path: Path
) -> Path:
    """token, ca.crt and namespace, readable by any UID, as the kubelet's projected volume."""
    path.mkdir(mode=0o755)
    (path / "token").write_text(service_account_token(core_v1, namespace, name))
    shutil.copyfile(str(plane.client.configuration.ssl_ca_cert), path / "ca.crt")
    (path / "namespace").write_text(namespace)
    for file in path.iterdir():
        file.chmod(0o644)
    path.chmod(0o755)
    return path


@pytest.fixture
def shipped(api_client: k8s_client.ApiClient) -> Iterator[list[dict[str, Any]]]:
    """deploy/reconciler.yaml applied but its Deployment (the test runs its container), then
    the example rules as the NodeRules object it reads."""
    objects = manifest_objects()
    apply_all_but_the_deployment(api_client, objects)
    with example_rules_applied(api_client):
        yield objects


def test_the_image_reconciles_serves_probes_and_hands_back_its_lease_on_sigterm(
    built: tuple[Engine, BuiltImage],
    shipped: list[dict[str, Any]],
    containers: Callable[[list[str]], Container],
    control_plane: LocalControlPlane,
    api_client: k8s_client.ApiClient,
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    tmp_path: Path,
) -> None:
    engine, record = built
    objects = shipped
    deployment = the_deployment(objects)
    pod_name = f"{deployment['metadata']['name']}-{uuid.uuid4().hex[:10]}"
    run = deployment_container(deployment, pod_name=pod_name, source="deploy/reconciler.yaml")
    assert run.service_account is not None
    sa_dir = _service_account_dir(
        core_v1, control_plane, run.namespace, run.service_account, tmp_path / "sa"
    )
    # With host networking the pod's ports are the host's: serve on a free one instead.
    http_port = free_port()
    [shipped_port] = {p.port for p in run.probes}
    assert f"{HTTP_PORT_FLAG}{shipped_port}" in run.args
    args = [f"{HTTP_PORT_FLAG}{http_port}" if a.startswith(HTTP_PORT_FLAG) else a for a in run.args]
    run = dataclasses.replace(run, args=tuple(args))
    lease_ns = next(a.split("=", 1)[1] for a in args if a.startswith("--lease-namespace="))
    node = make_node(labels={"example.com/dedicated": "ci"})

    container = containers(
        run_argv(
            engine,
            run,
            image=record.id,
            name=f"nodegate-e2e-{pod_name}",
            hostname=pod_name,
            isolation=run_isolation_flags(engine, host_hard_limits()),
            service_account_dir=str(sa_dir),
            extra_env=in_cluster_env(control_plane.server_url),
        )
    )

    def probes_pass() -> bool:
        if not container.running():
            pytest.fail(f"container exited: {container.state()}\n{container.logs()[-3000:]}")
        return all(http_get(http_port, probe.path)[0] == 200 for probe in run.probes)

    wait_until(probes_pass, START_TIMEOUT, "the Deployment's probes pass")
    # What the securityContext must give the running process, seen from the host.
    status = _process_status(container.pid)
    assert status["Uid"].split() == ["65532"] * 4
    assert (status["CapEff"], status["CapBnd"], status["NoNewPrivs"]) == ("0" * 16, "0" * 16, "1")
    assert status["Seccomp"] == "2"  # a filter: the runtime's default profile
    assert "ro" in _root_mount_options(container.pid)
    wait_for_taints(core_v1, node, lambda t: ("example.com/dedicated", "NoSchedule") in t)
    wait_until(
        lambda: [
            e
            for e in node_events(core_v1, node)
            if e.reason == "NodegateUpdated" and (e.reporting_instance or "").startswith(pod_name)
        ],
        TIMEOUT,
        "an event from the container's reconciler",
    )
    code, metrics = http_get(http_port, "/metrics")
    assert code == 200
    assert metric_total(metrics, "nodegate_is_leader") == 1
    assert metric_total(metrics, "nodegate_node_writes_total") >= 1
    coordination = k8s_client.CoordinationV1Api(api_client)
    lease = coordination.read_namespaced_lease("nodegate-reconciler", lease_ns)
    assert lease.spec is not None
    assert (lease.spec.holder_identity or "").startswith(pod_name)

    started = time.monotonic()
    exit_code = container.stop(run.grace_seconds)
    stop_seconds = time.monotonic() - started
    logs = container.logs()
    assert exit_code == 0, logs[-3000:]
    assert stop_seconds < run.grace_seconds, "needed SIGKILL: SIGTERM did not stop it"
    lease = coordination.read_namespaced_lease("nodegate-reconciler", lease_ns)
    assert lease.spec is not None
    assert not lease.spec.holder_identity, "the Lease was not handed back"
    assert "Traceback" not in logs
    assert "Forbidden" not in logs
    print(f"stopped in {stop_seconds:.1f} s; log tail:\n{logs[-1500:]}")
