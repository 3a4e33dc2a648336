"""`LocalControlPlane`: a real etcd + kube-apiserver (optionally scheduler, controller-manager
and kwok) on loopback ports, for tests that must see what a real API server does.

Fakes cannot tell the truth about optimistic concurrency, JSON-patch `test` ops, admission or
the scheduler honouring taints; nodegate's correctness depends on exactly those, so the e2e tier
runs the real binaries. Everything lives in one temporary directory that is removed on exit.
"""

from __future__ import annotations

import atexit
import json
import shutil
import ssl
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path

from kubernetes import client as k8s_client

from nodegate.localcluster import components, paths
from nodegate.localcluster.build import ensure_built
from nodegate.localcluster.certs import (
    ClientIdentity,
    ControlPlanePKI,
    create_pki,
    issue_client_identity,
    issue_node_identity,
)
from nodegate.localcluster.kubeconfig import write_kubeconfig
from nodegate.localcluster.ports import free_port
from nodegate.localcluster.processes import ManagedProcess, StartedWhileUsed, pid_exists

DEFAULT_STARTUP_TIMEOUT_SECONDS = 120.0
_POLL_SECONDS = 0.2
_START_ATTEMPTS = 3
_PORT_TAKEN = "address already in use"


class ControlPlaneError(RuntimeError):
    """The control plane failed to start; the message carries the components' log tails."""


class LocalControlPlane(StartedWhileUsed):
    """Context manager owning every process and file of one local control plane."""

    def __init__(
        self,
        *,
        with_scheduling: bool = False,
        bin_dir: Path | None = None,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT_SECONDS,
        audit_policy: str | None = None,
        kwok_stage_overrides: Mapping[str, Path] | None = None,
        extra_args: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        """`audit_policy` (an audit.k8s.io/v1 Policy as YAML text) turns on the API server's
        audit log at `audit_log_path`: the benchmarks count each client's writes there.
        `kwok_stage_overrides` replaces cached kwok Stage files by file name (e.g. a heartbeat
        stage with another period). `extra_args` appends flags to a component's command line by
        component name (e.g. a higher `--kube-api-qps` for kube-controller-manager)."""
        self.with_scheduling = with_scheduling
        self._audit_policy = audit_policy
        self._kwok_stage_overrides = dict(kwok_stage_overrides or {})
        self._extra_args = {name: list(args) for name, args in (extra_args or {}).items()}
        self._bin_dir = bin_dir
        self._startup_timeout = startup_timeout
        self._workdir: Path | None = None
        self._pki: ControlPlanePKI | None = None
        self._processes: list[ManagedProcess] = []
        self._started_pids: dict[int, str] = {}
        self._client: k8s_client.ApiClient | None = None
        self.server_url = ""
        self.startup_seconds = 0.0

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> LocalControlPlane:
        """Start every component and return once the API server is ready; on any failure stop
        what was started and raise ControlPlaneError with the log tails."""
        started = time.monotonic()
        for attempt in range(1, _START_ATTEMPTS + 1):
            atexit.register(self.stop)
            try:
                self._start(started + self._startup_timeout)
            except BaseException as error:
                tails = self.log_tails()
                self.stop()
                if not isinstance(error, ControlPlaneError | TimeoutError):
                    raise
                # A free port can be taken by another process before our component binds it.
                if _PORT_TAKEN in tails and attempt < _START_ATTEMPTS:
                    continue
                raise ControlPlaneError(f"{error}\n{tails}") from error
            break
        self._client = self.api_client()
        self.startup_seconds = time.monotonic() - started
        return self

    def stop(self) -> None:
        """Stop components in reverse start order (SIGTERM, then SIGKILL), remove the workdir."""
        if self._client is not None:
            self._client.close()  # type: ignore[no-untyped-call]  # unannotated in the client
            self._client = None
        for process in reversed(self._processes):
            process.stop()
        self._processes.clear()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
        self._pki = None
        atexit.unregister(self.stop)

    def leftover_processes(self) -> list[str]:
        """`name (pid N)` for every process this instance started that still exists.

        Teardown asserts this is empty: a component that survives its stop would keep ports and
        CPU busy for the rest of the run and hide bugs in the shutdown path.
        """
        return [
            f"{name} (pid {pid})" for pid, name in self._started_pids.items() if pid_exists(pid)
        ]

    def component_pids(self) -> dict[str, int]:
        """`name -> pid` of the running components (the benchmarks read their CPU and memory)."""
        return {
            process.name: process.pid
            for process in self._processes
            if process.pid is not None and process.is_alive()
        }

    # -- faults, for the tests that prove recovery ------------------------------------------

    def kill_component(self, name: str) -> None:
        """SIGKILL one component (e.g. `kube-apiserver`), as a crash or an OOM kill would."""
        self._component(name).kill()

    def start_component(self, name: str, timeout: float = DEFAULT_STARTUP_TIMEOUT_SECONDS) -> None:
        """Start a stopped component again with the same flags, ports and data; for the API
        server, return once it is ready again."""
        process = self._component(name)
        process.start()
        assert process.pid is not None
        self._started_pids[process.pid] = name
        if name == "kube-apiserver":
            deadline = time.monotonic() + timeout
            self._wait_for(f"{self.server_url}/readyz", self._tls_context(), deadline, name)

    def _component(self, name: str) -> ManagedProcess:
        for process in self._processes:
            if process.name == name:
                return process
        raise ControlPlaneError(f"no component named {name}")

    # -- what tests use ---------------------------------------------------------------------

    @property
    def workdir(self) -> Path:
        """The temporary directory with certs, etcd data and logs (gone after stop)."""
        if self._workdir is None:
            raise ControlPlaneError("control plane is not running")
        return self._workdir

    @property
    def kubeconfig_path(self) -> Path:
        """An admin kubeconfig for this control plane."""
        return self.workdir / "kubeconfig"

    @property
    def audit_log_path(self) -> Path:
        """The API server's audit log (JSON lines); exists only with `audit_policy`."""
        return self.workdir / "logs" / "audit.log"

    @property
    def client(self) -> k8s_client.ApiClient:
        """The ready admin ApiClient created at start (closed by stop)."""
        if self._client is None:
            raise ControlPlaneError("control plane is not running")
        return self._client

    def api_client(self, identity: ClientIdentity | None = None) -> k8s_client.ApiClient:
        """A fresh official-client ApiClient as `identity` (default: the admin); caller closes."""
        pki = self._require_pki()
        configuration = k8s_client.Configuration(host=self.server_url)
        configuration.ssl_ca_cert = str(pki.ca_cert)
        configuration.cert_file = str(identity.cert if identity else pki.admin_cert)
        configuration.key_file = str(identity.key if identity else pki.admin_key)
        return k8s_client.ApiClient(configuration)

    def node_identity(self, node_name: str) -> ClientIdentity:
        """Kubelet credentials for `node_name` (`system:node:<name>` in `system:nodes`).

        What a compromised node holds: Node authorization and NodeRestriction apply to it.
        """
        return issue_node_identity(self._require_pki(), node_name, self.workdir / "identities")

    def node_kubeconfig(self, node_name: str) -> Path:
        """A kubeconfig for `node_name`'s kubelet credentials (for a real kubelet or kubectl)."""
        return self._kubeconfig_for(self.node_identity(node_name), node_name)

    def user_kubeconfig(self, user: str, group: str | None = None) -> Path:
        """A kubeconfig for a plain `user` (not in `system:masters`): RBAC and API Priority and
        Fairness treat it as they treat a controller's ServiceAccount."""
        directory = self.workdir / "identities"
        identity = issue_client_identity(self._require_pki(), user, group, directory)
        return self._kubeconfig_for(identity, user.replace(":", "_"))

    def _kubeconfig_for(self, identity: ClientIdentity, stem: str) -> Path:
        path = self.workdir / "identities" / f"{stem}.kubeconfig"
        return write_kubeconfig(path, self.server_url, self._require_pki(), identity)

    def _require_pki(self) -> ControlPlanePKI:
        if self._pki is None:
            raise ControlPlaneError("control plane is not running")
        return self._pki

    def log_tails(self, lines: int = 40) -> str:
        """The last lines of every component's log, for printing when something failed."""
        parts = []
        for process in self._processes:
            state = "running" if process.is_alive() else f"exited {process.returncode()}"
            parts.append(f"----- {process.name} ({state}), {process.log_path} -----\n")
            parts.append(process.tail(lines))
        return "".join(parts)

    # -- internals --------------------------------------------------------------------------

    def _start(self, deadline: float) -> None:
        bin_dir = self._bin_dir or ensure_built()
        self._workdir = Path(tempfile.mkdtemp(prefix="nodegate-controlplane-"))
        logs = self._workdir / "logs"
        logs.mkdir()
        self._pki = pki = create_pki(self._workdir / "pki")

        etcd = components.EtcdEndpoints(client_port=free_port(), peer_port=free_port())
        self._spawn(
            "etcd",
            components.etcd_argv(bin_dir, self._workdir / "etcd", etcd),
            logs,
        )
        self._wait_for(f"{etcd.client_url}/health", None, deadline, "etcd")

        port = free_port()
        self.server_url = f"https://127.0.0.1:{port}"
        apiserver = components.apiserver_argv(
            bin_dir,
            self._workdir / "apiserver-certs",
            pki,
            etcd,
            secure_port=port,
            service_account_admission=self.with_scheduling,
        )
        if self._audit_policy is not None:
            policy = self._workdir / "audit-policy.yaml"
            policy.write_text(self._audit_policy)
            apiserver += components.audit_argv(policy, self.audit_log_path)
        self._spawn("kube-apiserver", apiserver, logs)
        write_kubeconfig(self.kubeconfig_path, self.server_url, pki)
        self._wait_for(f"{self.server_url}/readyz", self._tls_context(), deadline, "kube-apiserver")

        if self.with_scheduling:
            kubeconfig = self.kubeconfig_path
            self._spawn("kube-scheduler", components.scheduler_argv(bin_dir, kubeconfig), logs)
            self._spawn(
                "kube-controller-manager",
                components.controller_manager_argv(bin_dir, kubeconfig, pki),
                logs,
            )
            stages = [
                self._kwok_stage_overrides.get(stage.name, stage)
                for stage in sorted(paths.kwok_stages_dir(bin_dir).glob("*.yaml"))
            ]
            configuration = self._workdir / "kwok-configuration.yaml"
            configuration.write_text(components.KWOK_CONFIGURATION)
            self._spawn(
                "kwok", components.kwok_argv(bin_dir, kubeconfig, configuration, stages), logs
            )
            self._wait_for_default_service_account(deadline)

    def _spawn(self, name: str, argv: list[str], logs: Path) -> None:
        argv = argv + self._extra_args.get(name, [])
        process = ManagedProcess(name, argv, logs / f"{name}.log")
        process.start()
        self._processes.append(process)
        assert process.pid is not None
        self._started_pids[process.pid] = name

    def _check_alive(self) -> None:
        for process in self._processes:
            if not process.is_alive():
                raise ControlPlaneError(
                    f"{process.name} exited with status {process.returncode()} during startup"
                )

    def _tls_context(self) -> ssl.SSLContext:
        assert self._pki is not None
        context = ssl.create_default_context(cafile=str(self._pki.ca_cert))
        context.load_cert_chain(str(self._pki.admin_cert), str(self._pki.admin_key))
        return context

    def _wait_for(
        self, url: str, context: ssl.SSLContext | None, deadline: float, what: str
    ) -> None:
        """Poll `url` until it answers 200; fail early if a component died."""
        last_error = "no answer yet"
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                with urllib.request.urlopen(url, timeout=2, context=context) as response:
                    if response.status == 200:
                        return
                    last_error = f"HTTP {response.status}"
            except (urllib.error.URLError, OSError) as error:
                last_error = str(error)
            time.sleep(_POLL_SECONDS)
        raise TimeoutError(f"{what} not ready at {url} in time: {last_error}")

    def _wait_for_default_service_account(self, deadline: float) -> None:
        """Pods are rejected until the controller-manager created `default/default`; waiting for
        it also proves the controller-manager is up and talking to the API server."""
        url = f"{self.server_url}/api/v1/namespaces/default/serviceaccounts/default"
        self._wait_for(url, self._tls_context(), deadline, "default ServiceAccount")


def describe(plane: LocalControlPlane) -> str:
    """One line for logs: where the API server is and how long startup took."""
    return json.dumps(
        {
            "server": plane.server_url,
            "kubeconfig": str(plane.kubeconfig_path),
            "with_scheduling": plane.with_scheduling,
            "startup_seconds": round(plane.startup_seconds, 2),
        }
    )
