"""A Deployment's container as a container engine runs it, read from the manifest itself.

The container e2e test must run the image exactly as the shipped Deployment does, so this
translates the pod template field by field (command, args, env, user, securityContext,
resources, probes, the service account token) and refuses any field it does not translate, so a
new field in the manifest cannot be silently left out of the test.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from nodegate.image.engine import Engine
from nodegate.image.errors import ImageError

Manifest = Mapping[str, Any]

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where the kubelet mounts the token, ca.crt and namespace; the client's in-cluster config
reads them there, with KUBERNETES_SERVICE_HOST/PORT."""

_FIELD_REFS = {"metadata.name", "metadata.namespace"}
_QUANTITY = re.compile(r"(?P<number>\d+(?:\.\d+)?)(?P<unit>Ki|Mi|Gi|Ti|k|M|G|T|m)?")
_UNITS = {
    None: 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}
DEFAULT_GRACE_SECONDS = 30
# Pod-template fields that are translated, or that only steer the scheduler and so change
# nothing in how the container runs (priorityClassName, tolerations, affinity, ...).
_POD_TEMPLATE_FIELDS = {
    "containers",
    "securityContext",
    "serviceAccountName",
    "automountServiceAccountToken",
    "terminationGracePeriodSeconds",
    "priorityClassName",
    "tolerations",
    "affinity",
    "nodeSelector",
    "topologySpreadConstraints",
    # Service environment variables; the builder sets it false, and the engine run adds none.
    "enableServiceLinks",
}
_CONTAINER_FIELDS = {
    "name",
    "image",
    "imagePullPolicy",
    "command",
    "args",
    "env",
    "ports",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "resources",
    "securityContext",
    "terminationMessagePolicy",  # where the kubelet reads a failure message from: no effect here
}
_PROBE_TIMING = {
    "periodSeconds",
    "initialDelaySeconds",
    "timeoutSeconds",
    "failureThreshold",
    "successThreshold",
}


@dataclass(frozen=True)
class HttpProbe:
    """One httpGet probe with its port resolved to a number."""

    kind: str
    """livenessProbe, readinessProbe or startupProbe."""
    path: str
    port: int


@dataclass(frozen=True)
class ContainerRun:
    """Everything about one container of the pod template that the engine must reproduce."""

    image: str
    """The image the manifest names (the caller may run a locally built one instead)."""
    command: tuple[str, ...] | None
    """Replaces the image's entrypoint when set (Kubernetes `command`)."""
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    user: str | None
    """`uid[:gid]` from runAsUser/runAsGroup (container over pod), else the image's USER."""
    read_only_root: bool
    security_flags: tuple[str, ...]
    resource_flags: tuple[str, ...]
    probes: tuple[HttpProbe, ...]
    service_account: str | None
    """Whose token is mounted at SERVICE_ACCOUNT_DIR; None if automounting is off."""
    namespace: str
    grace_seconds: int
    """terminationGracePeriodSeconds: how long a stop waits after SIGTERM before SIGKILL."""


def deployment_container(
    deployment: Manifest, *, pod_name: str, container: str | None = None, source: str = ""
) -> ContainerRun:
    """Translate `container` (default: the first) of the Deployment's pod template."""
    where = f"{source}: " if source else ""
    meta = deployment.get("metadata", {})
    namespace = str(meta.get("namespace", "default"))
    where += f"Deployment {namespace}/{meta.get('name', '?')}: "
    pod = deployment.get("spec", {}).get("template", {}).get("spec", {})
    _refuse_unknown(pod, _POD_TEMPLATE_FIELDS, f"{where}spec.template.spec")
    containers: Sequence[Manifest] = pod.get("containers", [])
    index = next((i for i, c in enumerate(containers) if container in (None, c.get("name"))), None)
    if index is None:
        raise ImageError(f"{where}no container {container or ''} in spec.template.spec.containers")
    spec = containers[index]
    path = f"{where}spec.template.spec.containers[{index}]"
    _refuse_unknown(spec, _CONTAINER_FIELDS, path)
    pod_security = pod.get("securityContext", {})
    security = spec.get("securityContext", {})
    ports = {str(p["name"]): int(p["containerPort"]) for p in spec.get("ports", []) if "name" in p}
    automount = pod.get("automountServiceAccountToken", True)
    command = spec.get("command")
    return ContainerRun(
        image=str(spec.get("image", "")),
        command=tuple(str(a) for a in command) if command is not None else None,
        args=tuple(str(a) for a in spec.get("args", [])),
        env=_env(spec.get("env", []), pod_name, namespace, f"{path}.env"),
        user=_user(pod_security, security, path),
        read_only_root=bool(security.get("readOnlyRootFilesystem", False)),
        security_flags=_security_flags(pod_security, security, path),
        resource_flags=_resource_flags(spec.get("resources", {}), f"{path}.resources"),
        probes=_probes(spec, ports, path),
        service_account=str(pod.get("serviceAccountName", "default")) if automount else None,
        namespace=namespace,
        grace_seconds=int(pod.get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS)),
    )


def in_cluster_env(server_url: str) -> dict[str, str]:
    """The environment a kubelet gives a pod for reaching the API server."""
    url = urlsplit(server_url)
    if url.hostname is None or url.port is None:
        raise ImageError(f"API server URL {server_url!r} has no host:port")
    return {"KUBERNETES_SERVICE_HOST": url.hostname, "KUBERNETES_SERVICE_PORT": str(url.port)}


def run_argv(
    engine: Engine,
    run: ContainerRun,
    *,
    image: str,
    name: str,
    hostname: str,
    isolation: Sequence[str],
    service_account_dir: str | None,
    extra_env: Mapping[str, str],
    network: str = "host",
) -> list[str]:
    """`run --detach` for `run`, with the token directory mounted where the kubelet puts it."""
    argv = [engine.name, "run", "--detach", "--name", name, "--hostname", hostname, *isolation]
    argv.append(f"--network={network}")
    if run.read_only_root:
        # A read-only rootfs in Kubernetes has no writable /tmp; podman would add tmpfs mounts.
        argv.append("--read-only")
        if engine.name == "podman":
            argv.append("--read-only-tmpfs=false")
    if run.user is not None:
        argv += ["--user", run.user]
    argv += run.security_flags
    argv += run.resource_flags
    for key, value in [*run.env, *sorted(extra_env.items())]:
        argv += ["--env", f"{key}={value}"]
    if run.service_account is not None:
        if service_account_dir is None:
            raise ImageError(
                f"the pod mounts the token of ServiceAccount {run.service_account}: "
                "give its directory (token, ca.crt, namespace)"
            )
        argv += ["--volume", f"{service_account_dir}:{SERVICE_ACCOUNT_DIR}:ro"]
    if run.command is not None:
        argv += ["--entrypoint", run.command[0]]
        return [*argv, image, *run.command[1:], *run.args]
    return [*argv, image, *run.args]


def quantity(value: str | int | float, where: str) -> float:
    """A Kubernetes resource quantity (`256Mi`, `500m`, `1.5`) as a plain number."""
    match = _QUANTITY.fullmatch(str(value))
    if match is None:
        raise ImageError(f"{where}: {value!r} is not a resource quantity such as 256Mi or 500m")
    number = float(match["number"])
    if match["unit"] == "m":
        return number / 1000
    return number * _UNITS[match["unit"]]


def _refuse_unknown(fields: Mapping[str, Any], known: set[str], path: str) -> None:
    unknown = sorted(set(fields) - known)
    if unknown:
        raise ImageError(
            f"{path}.{unknown[0]}: not translated to the container engine; teach "
            "nodegate.image.pod this field so the image test keeps running the pod as shipped"
        )


def _env(
    entries: Sequence[Manifest], pod_name: str, namespace: str, path: str
) -> tuple[tuple[str, str], ...]:
    env = []
    for i, entry in enumerate(entries):
        if "value" in entry:
            env.append((str(entry["name"]), str(entry["value"])))
            continue
        field = entry.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        if field not in _FIELD_REFS:
            raise ImageError(
                f"{path}[{i}]: only value and fieldRef {sorted(_FIELD_REFS)} are translated"
            )
        env.append((str(entry["name"]), pod_name if field == "metadata.name" else namespace))
    return tuple(env)


def _user(pod: Manifest, container: Manifest, path: str) -> str | None:
    uid = container.get("runAsUser", pod.get("runAsUser"))
    gid = container.get("runAsGroup", pod.get("runAsGroup"))
    non_root = container.get("runAsNonRoot", pod.get("runAsNonRoot", False))
    if non_root and (uid is None or int(uid) == 0):
        raise ImageError(
            f"{path}.securityContext: runAsNonRoot needs a non-zero runAsUser here "
            "(the kubelet would check the image's USER; this translation does not)"
        )
    if uid is None:
        return None
    return f"{int(uid)}:{int(gid)}" if gid is not None else str(int(uid))


def _seccomp(profile: Manifest | None, path: str) -> list[str]:
    kind = (profile or {}).get("type", "RuntimeDefault")
    if kind == "RuntimeDefault":
        return []  # the engine's default profile is the runtime default
    if kind == "Unconfined":
        return ["--security-opt", "seccomp=unconfined"]
    raise ImageError(f"{path}.seccompProfile: type {kind} is not translated")


_POD_SECURITY = {"runAsUser", "runAsGroup", "runAsNonRoot", "seccompProfile"}
_CONTAINER_SECURITY = {
    "runAsUser",
    "runAsGroup",
    "runAsNonRoot",
    "seccompProfile",
    "readOnlyRootFilesystem",
    "allowPrivilegeEscalation",
    "capabilities",
    "privileged",
}


def _security_flags(pod: Manifest, container: Manifest, path: str) -> tuple[str, ...]:
    pod_path = path.rsplit(".containers[", 1)[0]
    _refuse_unknown(pod, _POD_SECURITY, f"{pod_path}.securityContext")
    _refuse_unknown(container, _CONTAINER_SECURITY, f"{path}.securityContext")
    flags = _seccomp(
        container.get("seccompProfile", pod.get("seccompProfile")), f"{path}.securityContext"
    )
    if container.get("privileged", False):
        flags.append("--privileged")
    if container.get("allowPrivilegeEscalation") is False:
        flags += ["--security-opt", "no-new-privileges"]
    capabilities = container.get("capabilities", {})
    _refuse_unknown(capabilities, {"add", "drop"}, f"{path}.securityContext.capabilities")
    for cap in capabilities.get("drop", []):
        flags += ["--cap-drop", str(cap)]
    for cap in capabilities.get("add", []):
        flags += ["--cap-add", str(cap)]
    return tuple(flags)


def _resource_flags(resources: Manifest, path: str) -> tuple[str, ...]:
    """Limits become the engine's limits; requests only steer the scheduler."""
    _refuse_unknown(resources, {"limits", "requests"}, path)
    limits = resources.get("limits", {})
    _refuse_unknown(limits, {"memory", "cpu"}, f"{path}.limits")
    flags = []
    if "memory" in limits:
        flags.append(f"--memory={int(quantity(limits['memory'], f'{path}.limits.memory'))}b")
    if "cpu" in limits:
        flags.append(f"--cpus={quantity(limits['cpu'], f'{path}.limits.cpu'):g}")
    return tuple(flags)


def _probes(spec: Manifest, ports: Mapping[str, int], path: str) -> tuple[HttpProbe, ...]:
    probes = []
    for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
        probe = spec.get(kind)
        if probe is None:
            continue
        _refuse_unknown(probe, {"httpGet", *_PROBE_TIMING}, f"{path}.{kind}")
        http = probe["httpGet"]
        _refuse_unknown(http, {"path", "port", "scheme"}, f"{path}.{kind}.httpGet")
        if http.get("scheme", "HTTP") != "HTTP":
            raise ImageError(f"{path}.{kind}.httpGet.scheme: only HTTP is translated")
        port = http["port"]
        if isinstance(port, str) and not port.isdigit():
            if port not in ports:
                raise ImageError(f"{path}.{kind}.httpGet.port: no container port named {port!r}")
            port = ports[port]
        probes.append(HttpProbe(kind=kind, path=str(http.get("path", "/")), port=int(port)))
    return tuple(probes)
