"""`LocalKubelet`: a real kubelet v1.36 that registers one named Node with a local control plane.

What nodegate renders (`--register-with-taints`, `--node-labels`, a `KubeletConfiguration`
drop-in) only matters if a real kubelet accepts it and registers a Node that carries it, and a
fake Node creator cannot tell (kwok accepts labels kubelet refuses to start with). So the e2e
tier runs the real kubelet, built from the control plane's own Kubernetes module, against a fake
CRI (`fakecri`: k8s.io/cri-client's in-memory runtime; containers "run" when started, so pods
turn Ready too, but nothing executes).

kubelet bind-mounts its root dir and writes /var/lib/kubelet/device-plugins and
/var/log/containers whatever `--root-dir` says, so it runs in a private mount namespace with
tmpfs over /var/lib and /var/log: nothing it mounts or writes there outlives it, and kubelets of
parallel test runs never share those paths. It also writes iptables chains (KUBE-FIREWALL, a
DROP rule in INPUT) into the host's network namespace, which it shares to reach the API server on
loopback; it skips that when it finds no `iptables`, so it runs with a PATH without one.
Needs root and util-linux `unshare`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from nodegate.localcluster import paths
from nodegate.localcluster.build import ensure_kubelet_built
from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.ports import free_port
from nodegate.localcluster.processes import ManagedProcess, StartedWhileUsed, pid_exists

PRIVATE_TMPFS = ("/var/lib", "/var/log")
"""Hidden by a tmpfs inside kubelet's mount namespace (the paths kubelet writes regardless)."""
KUBELET_OWN_DIRS = ("/var/lib/kubelet/device-plugins", "/var/log/containers")
IPTABLES_TOOLS = ("iptables", "ip6tables")
DROPIN_NAME = "50-nodegate.conf"
_SOCKET_TIMEOUT_SECONDS = 10.0
_POLL_SECONDS = 0.05


class KubeletError(RuntimeError):
    """The kubelet (or its fake CRI) could not be started here."""


def why_no_kubelet() -> str | None:
    """Why a real kubelet cannot run on this machine (not root, no `unshare`), else None."""
    if os.geteuid() != 0:
        return "a real kubelet needs root (it mounts in a private mount namespace)"
    if shutil.which("unshare") is None:
        return "a real kubelet needs util-linux `unshare` for its private mount namespace"
    return None


def base_config(
    cri_socket: Path, *, port: int, healthz_port: int, static_pods: Path
) -> dict[str, Any]:
    """The KubeletConfiguration that lets kubelet run on a test machine and nothing more.

    cgroup v1 must be allowed (`failCgroupV1`, refused by default since 1.35); QoS cgroups and
    node-allocatable enforcement are off (nothing runs, and with a drop-in dir an empty
    `enforceNodeAllocatable` is re-defaulted to `[pods]`, which refuses to start here); every
    port is a free loopback one, the read-only port closed. Registration settings are left to
    the flags and drop-ins under test."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": "127.0.0.1",
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "containerRuntimeEndpoint": f"unix://{cri_socket}",
        "failCgroupV1": False,
        "failSwapOn": False,
        "cgroupDriver": "cgroupfs",
        "cgroupsPerQOS": False,
        "enforceNodeAllocatable": ["none"],
        "staticPodPath": str(static_pods),
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "resolvConf": "",
    }


def path_without_iptables(path: str) -> str:
    """`path` (a PATH value) without the directories holding an iptables tool: kubelet then
    logs "No iptables support" and leaves the host's firewall alone."""
    kept = [
        directory
        for directory in path.split(os.pathsep)
        if directory and not any((Path(directory) / tool).exists() for tool in IPTABLES_TOOLS)
    ]
    return os.pathsep.join(kept)


def private_namespace_argv(argv: Sequence[str]) -> list[str]:
    """`argv` run in a private mount namespace with a tmpfs over each of PRIVATE_TMPFS.

    `unshare` and the shell both exec, so the process started is kubelet itself: its pid is
    the one to signal, and the namespace (with its mounts) is gone when it exits."""
    mounts = " && ".join(f"mount -t tmpfs nodegate-kubelet {target}" for target in PRIVATE_TMPFS)
    dirs = " ".join(KUBELET_OWN_DIRS)
    script = f'{mounts} && mkdir -p {dirs} && exec "$0" "$@"'
    unshare = shutil.which("unshare") or "unshare"
    return [unshare, "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script, *argv]


class LocalKubelet(StartedWhileUsed):
    """One kubelet for `node_name` on `plane`, with its fake CRI; a context manager.

    `flags` are extra kubelet flags exactly as a node's KUBELET_EXTRA_ARGS carries them;
    `dropin` is a KubeletConfiguration drop-in written into a `--config-dir` of its own."""

    def __init__(
        self,
        plane: LocalControlPlane,
        node_name: str,
        *,
        flags: Sequence[str] = (),
        dropin: str | None = None,
    ) -> None:
        self.plane = plane
        self.node_name = node_name
        self.flags = list(flags)
        self.dropin = dropin
        self._workdir: Path | None = None
        self._processes: list[ManagedProcess] = []
        self._started_pids: dict[int, str] = {}
        self.started_at = 0.0
        """`time.monotonic()` when kubelet was spawned: registration latency counts from here."""

    @property
    def workdir(self) -> Path:
        """The kubelet's temporary directory (root dir, config, logs); gone after stop."""
        if self._workdir is None:
            raise KubeletError("kubelet is not running")
        return self._workdir

    def start(self) -> LocalKubelet:
        """Start the fake CRI, wait for its socket, then spawn kubelet (without waiting for it:
        tests watch the Node, or the exit of a kubelet that refuses its flags)."""
        reason = why_no_kubelet()
        if reason is not None:
            raise KubeletError(reason)
        binaries = ensure_kubelet_built()
        # Short: kubelet's unix sockets live under it, and a socket path has 107 bytes at most.
        work = self._workdir = Path(tempfile.mkdtemp(prefix="nodegate-kubelet-"))
        try:
            socket = work / "cri.sock"
            self._spawn("fakecri", [str(binaries / paths.FAKE_CRI), f"--endpoint=unix://{socket}"])
            self._wait_for_socket(socket)
            (work / "static-pods").mkdir()
            config = base_config(
                socket, port=free_port(), healthz_port=free_port(), static_pods=work / "static-pods"
            )
            (work / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
            argv = [
                str(binaries / paths.KUBELET),
                f"--kubeconfig={self.plane.node_kubeconfig(self.node_name)}",
                f"--config={work / 'config.yaml'}",
                f"--root-dir={work / 'root'}",
                f"--cert-dir={work / 'pki'}",
                f"--hostname-override={self.node_name}",
                "--v=2",
            ]
            if self.dropin is not None:
                (work / "config.d").mkdir()
                (work / "config.d" / DROPIN_NAME).write_text(self.dropin, encoding="utf-8")
                argv.append(f"--config-dir={work / 'config.d'}")
            self.started_at = time.monotonic()
            environment = {"PATH": path_without_iptables(os.environ.get("PATH", os.defpath))}
            self._spawn("kubelet", private_namespace_argv([*argv, *self.flags]), environment)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """SIGTERM (then SIGKILL) kubelet, then the fake CRI, by pid; remove the workdir."""
        for process in reversed(self._processes):
            process.stop()
        self._processes.clear()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def is_running(self) -> bool:
        """True while the kubelet process has not exited."""
        return self._kubelet().is_alive()

    def returncode(self) -> int | None:
        """kubelet's exit status once it exited, else None."""
        return self._kubelet().returncode()

    def log(self) -> str:
        """kubelet's whole log so far (the command line first)."""
        return self._kubelet().log_path.read_text(encoding="utf-8", errors="replace")

    def log_tails(self, lines: int = 40) -> str:
        """The last lines of kubelet's and the fake CRI's logs, for a failing test."""
        return "".join(
            f"----- {process.name}, {process.log_path} -----\n{process.tail(lines)}"
            for process in self._processes
        )

    def leftover_processes(self) -> list[str]:
        """`name (pid N)` for every process this instance started that still exists."""
        return [
            f"{name} (pid {pid})" for pid, name in self._started_pids.items() if pid_exists(pid)
        ]

    def _kubelet(self) -> ManagedProcess:
        for process in self._processes:
            if process.name == "kubelet":
                return process
        raise KubeletError("kubelet was not started")

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        process = ManagedProcess(name, argv, self.workdir / f"{name}.log", env)
        process.start()
        self._processes.append(process)
        assert process.pid is not None
        self._started_pids[process.pid] = name

    def _wait_for_socket(self, socket: Path) -> None:
        deadline = time.monotonic() + _SOCKET_TIMEOUT_SECONDS
        while not socket.exists():
            if not self._processes[-1].is_alive() or time.monotonic() > deadline:
                raise KubeletError(f"fake CRI did not serve {socket}:\n{self.log_tails()}")
            time.sleep(_POLL_SECONDS)
