"""Fixtures for the e2e tier: real control planes built from Go modules (see docs/controlplane.md).

Two session-scoped control planes, so each test pays startup once per run:
* `control_plane`: etcd + kube-apiserver. Nothing touches nodes but the tests.
* `scheduling_control_plane`: a separate one that also runs kube-scheduler,
  kube-controller-manager and kwok. Separate because the controller-manager's node-lifecycle
  controller taints nodes that have no kubelet heartbeat, which would disturb the plain tier.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s_client

from nodegate.localcluster.build import (
    ensure_built,
    ensure_karpenter_built,
    ensure_kubelet_built,
    is_built,
    karpenter_is_built,
    kubelet_is_built,
)
from nodegate.localcluster.cluster import LocalControlPlane, describe
from nodegate.localcluster.karpenter import LocalKarpenter
from nodegate.localcluster.pulumi_tools import (
    ensure_pulumi_built,
    pulumi_is_built,
)
from tests.e2e.support.lease_params import keep_lease_params_watched
from tests.e2e.support.node_identity import as_node
from tests.e2e.support.real_kubelet import start_kubelet
from tests.e2e.support.reconciler_fixtures import (
    make_node,
    reconciler,
    records_namespace,
    rules_configmap,
    start_reconciler_with,
)
from tests.e2e.support.reconciler_process import STARTED_IN_THIS_TEST

__all__ = [  # fixtures shared by the e2e tests
    "as_node",
    "make_node",
    "reconciler",
    "records_namespace",
    "rules_configmap",
    "start_kubelet",
    "start_reconciler_with",
]

E2E_DIR = Path(__file__).parent
E2E_TIMEOUT_SECONDS = 300
_BUILD_ERROR = pytest.StashKey[str]()
_LOG_TAILS = pytest.StashKey[list[str]]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test under tests/e2e `e2e`, with a timeout that fits a cluster start."""
    for item in items:
        if E2E_DIR in item.path.parents:
            item.add_marker(pytest.mark.e2e)
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(E2E_TIMEOUT_SECONDS))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the binaries before any test runs, outside the per-test timeout.

    A cold build takes minutes and must not count against the first test; `make test` has
    already built them, so this is usually a no-op stamp check. Output is not captured here,
    so the progress lines reach the terminal.
    """
    if not any(E2E_DIR in item.path.parents for item in session.items):
        return
    try:
        if not is_built():
            ensure_built()
        # Karpenter's kwok provider only for the tests that run it (marker `karpenter`).
        wanted = any(item.get_closest_marker("karpenter") for item in session.items)
        if wanted and not karpenter_is_built():
            ensure_karpenter_built()
        # kubelet and its fake CRI only for the real-kubelet tests (marker `kubelet`).
        kubelets = any(item.get_closest_marker("kubelet") for item in session.items)
        if kubelets and not kubelet_is_built():
            ensure_kubelet_built()
        # The Pulumi engine, host and provider only for the real-engine tier (marker `pulumi`).
        engines = any(item.get_closest_marker("pulumi") for item in session.items)
        if engines and not pulumi_is_built():
            ensure_pulumi_built()
    except Exception as error:  # reported by every e2e fixture instead of aborting the run
        session.config.stash[_BUILD_ERROR] = str(error)


def _tails_dir(config: pytest.Config) -> Path:
    """Where pytest-xdist workers leave their control planes' log tails for the controller,
    which alone prints the terminal summary (`make test` runs this tier on workers)."""
    return config.rootpath / "build" / "test-reports" / "control-plane-logs"


RECONCILER_LOG_TAIL = 6000
"""Characters of each reconciler's log a failed test's report shows."""


def pytest_runtest_setup(item: pytest.Item) -> None:
    STARTED_IN_THIS_TEST.clear()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed test's report carries the log tail of every reconciler it started: in CI the
    logs are gone with the runner, and a timeout says nothing of what the reconciler did."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    if report.when != "call" or not report.failed:
        return
    for log_path in STARTED_IN_THIS_TEST:
        try:
            tail = log_path.read_text(errors="replace")[-RECONCILER_LOG_TAIL:]
        except OSError as err:
            tail = f"(unreadable: {err})"
        report.sections.append((f"reconciler log {log_path.name} (tail)", tail))


def pytest_sessionstart(session: pytest.Session) -> None:
    """The controller (or a run without workers) starts with no tails left by an earlier run."""
    if not hasattr(session.config, "workerinput"):
        shutil.rmtree(_tails_dir(session.config), ignore_errors=True)


def _keep_tails(config: pytest.Config, section: str) -> None:
    worker = getattr(config, "workerinput", {}).get("workerid")
    if worker is None:
        config.stash.setdefault(_LOG_TAILS, []).append(section)
        return
    directory = _tails_dir(config)
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / f"{worker}.log").open("a", encoding="utf-8") as tails:
        tails.write(section + "\n\0")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the components' log tails collected at teardown of a session with failures
    (from this process, or from the files its workers left)."""
    sections: list[str] = terminalreporter.config.stash.get(_LOG_TAILS, []).copy()
    for left in sorted(_tails_dir(terminalreporter.config).glob("*.log")):
        sections += [part for part in left.read_text(encoding="utf-8").split("\0") if part.strip()]
    for section in sections:
        terminalreporter.write_sep("=", "control-plane component logs (tail)")
        terminalreporter.write(section)


def run_control_plane(
    request: pytest.FixtureRequest, *, with_scheduling: bool
) -> Iterator[LocalControlPlane]:
    """Start a control plane, yield it, always stop it and check nothing it started survives."""
    build_error = request.config.stash.get(_BUILD_ERROR, None)
    if build_error is not None:
        pytest.fail(f"control-plane build failed:\n{build_error}", pytrace=False)
    plane = LocalControlPlane(with_scheduling=with_scheduling)
    plane.start()  # raises ControlPlaneError carrying the log tails if startup fails
    keep_lease_params_watched(plane.client)
    print(f"control plane up: {describe(plane)}")
    try:
        yield plane
    finally:
        if request.session.testsfailed:
            _keep_tails(request.config, f"[{describe(plane)}]\n{plane.log_tails()}")
        plane.stop()
        leftovers = plane.leftover_processes()
        if leftovers:
            pytest.fail(
                f"processes started by the harness survived teardown: {', '.join(leftovers)}",
                pytrace=False,
            )


def run_karpenter_plane(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalControlPlane]:
    """A control plane of its own (scheduler, controller-manager, kwok) with Karpenter on it:
    Karpenter provisions for every pending pod it can, so it must not see other tests' pods."""
    logs = tmp_path_factory.mktemp("karpenter")
    for plane in run_control_plane(request, with_scheduling=True):
        karpenter = LocalKarpenter(plane, logs)
        try:
            karpenter.start()
            yield plane
        finally:
            if request.session.testsfailed:
                print(f"karpenter log tail:\n{karpenter.tail()}")
            karpenter.stop()


@pytest.fixture(scope="session")
def control_plane(request: pytest.FixtureRequest) -> Iterator[LocalControlPlane]:
    """etcd + kube-apiserver, shared by the whole session."""
    yield from run_control_plane(request, with_scheduling=False)


@pytest.fixture(scope="session")
def scheduling_control_plane(request: pytest.FixtureRequest) -> Iterator[LocalControlPlane]:
    """A second control plane that also schedules pods and simulates kubelets (kwok)."""
    yield from run_control_plane(request, with_scheduling=True)


@pytest.fixture(scope="session")
def api_client(control_plane: LocalControlPlane) -> k8s_client.ApiClient:
    """The ready admin ApiClient of `control_plane`."""
    return control_plane.client


@pytest.fixture(scope="session")
def core_v1(api_client: k8s_client.ApiClient) -> k8s_client.CoreV1Api:
    """CoreV1Api on `control_plane`."""
    return k8s_client.CoreV1Api(api_client)


@pytest.fixture(scope="session")
def scheduling_core_v1(scheduling_control_plane: LocalControlPlane) -> k8s_client.CoreV1Api:
    """CoreV1Api on `scheduling_control_plane`."""
    return k8s_client.CoreV1Api(scheduling_control_plane.client)


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> str:
    """A DNS-safe name unique to the test, so tests sharing a cluster never collide."""
    base = request.node.name.lower().replace("_", "-")[:40].strip("-")
    return f"{base}-{uuid.uuid4().hex[:6]}"
