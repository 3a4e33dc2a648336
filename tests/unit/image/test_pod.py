"""The shipped Deployment's container, translated field by field into an engine's `run`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from nodegate.image.engine import DOCKER, PODMAN
from nodegate.image.errors import ImageError
from nodegate.image.pod import (
    SERVICE_ACCOUNT_DIR,
    ContainerRun,
    deployment_container,
    in_cluster_env,
    quantity,
    run_argv,
)

MANIFEST = Path(__file__).resolve().parents[3] / "deploy" / "reconciler.yaml"


def shipped() -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]
    deployment: dict[str, Any] = next(d for d in docs if d["kind"] == "Deployment")
    return deployment


def deployment(container: dict[str, Any], **pod: Any) -> dict[str, Any]:
    spec = {"containers": [{"name": "c", "image": "img:1", **container}], **pod}
    return {"metadata": {"name": "d", "namespace": "ns"}, "spec": {"template": {"spec": spec}}}


def argv(run: ContainerRun, engine: Any = PODMAN) -> list[str]:
    return run_argv(
        engine,
        run,
        image="sha256:abc",
        name="ctr",
        hostname="pod-1",
        isolation=["--runtime", "runc"],
        service_account_dir="/tmp/sa",
        extra_env={"KUBERNETES_SERVICE_HOST": "127.0.0.1"},
    )


def test_the_shipped_pod_runs_non_root_read_only_with_no_capabilities() -> None:
    run = deployment_container(shipped(), pod_name="pod-1")
    assert run.user == "65532:65532"  # runAsUser and runAsGroup, as the Deployment says
    assert run.read_only_root
    flags = list(run.security_flags)
    assert flags[flags.index("--cap-drop") + 1] == "ALL"
    assert flags[flags.index("--security-opt") + 1] == "no-new-privileges"
    assert {p.path for p in run.probes} == {"/healthz", "/readyz"}


def test_env_field_refs_take_the_pods_name_and_namespace() -> None:
    env = {"name": "ME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    ns = {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}
    run = deployment_container(
        deployment({"env": [env, ns, {"name": "A", "value": "1"}]}), pod_name="p"
    )
    assert run.env == (("ME", "p"), ("NS", "ns"), ("A", "1"))


def test_named_probe_ports_resolve_to_the_container_port() -> None:
    probe = {"httpGet": {"path": "/readyz", "port": "http"}, "periodSeconds": 5}
    spec = {"ports": [{"name": "http", "containerPort": 8080}], "readinessProbe": probe}
    [resolved] = deployment_container(deployment(spec), pod_name="p").probes
    assert (resolved.kind, resolved.path, resolved.port) == ("readinessProbe", "/readyz", 8080)


def test_podman_run_is_read_only_without_podmans_extra_tmpfs() -> None:
    run = deployment_container(
        deployment({"securityContext": {"readOnlyRootFilesystem": True}}), pod_name="p"
    )
    assert {"--read-only", "--read-only-tmpfs=false"} <= set(argv(run))
    assert "--read-only-tmpfs=false" not in argv(run, DOCKER)


def test_args_follow_the_image_and_the_entrypoint_is_kept_without_command() -> None:
    run = deployment_container(deployment({"args": ["--a=1", "--b"]}), pod_name="p")
    line = argv(run)
    assert line[-3:] == ["sha256:abc", "--a=1", "--b"]
    assert "--entrypoint" not in line


def test_command_replaces_the_entrypoint() -> None:
    run = deployment_container(
        deployment({"command": ["python", "-m", "x"], "args": ["y"]}), pod_name="p"
    )
    line = argv(run)
    assert line[line.index("--entrypoint") + 1] == "python"
    assert line[-4:] == ["sha256:abc", "-m", "x", "y"]


def test_the_service_account_token_is_mounted_where_the_kubelet_puts_it() -> None:
    run = deployment_container(deployment({}, serviceAccountName="sa"), pod_name="p")
    assert run.service_account == "sa"
    line = argv(run)
    assert line[line.index("--volume") + 1] == f"/tmp/sa:{SERVICE_ACCOUNT_DIR}:ro"


def test_no_token_is_mounted_when_automount_is_off() -> None:
    run = deployment_container(deployment({}, automountServiceAccountToken=False), pod_name="p")
    assert run.service_account is None
    assert "--volume" not in argv(run)


def test_memory_and_cpu_limits_become_engine_limits_and_requests_do_not() -> None:
    resources = {
        "requests": {"cpu": "50m", "memory": "96Mi"},
        "limits": {"memory": "256Mi", "cpu": "500m"},
    }
    run = deployment_container(deployment({"resources": resources}), pod_name="p")
    assert run.resource_flags == (f"--memory={256 * 2**20}b", "--cpus=0.5")


def test_run_as_user_and_group_from_the_pod_unless_the_container_overrides() -> None:
    pod_security = {"runAsUser": 1000, "runAsGroup": 2000}
    run = deployment_container(
        deployment({"securityContext": {"runAsUser": 65532}}, securityContext=pod_security),
        pod_name="p",
    )
    assert run.user == "65532:2000"


@pytest.mark.parametrize(
    ("container", "pod", "where"),
    [
        (
            {"securityContext": {"procMount": "Unmasked"}},
            {},
            r"containers\[0\]\.securityContext\.procMount",
        ),
        ({}, {"volumes": []}, r"spec\.template\.spec\.volumes"),
        ({"volumeMounts": []}, {}, r"containers\[0\]\.volumeMounts"),
        ({"livenessProbe": {"exec": {"command": ["true"]}}}, {}, r"livenessProbe\.exec"),
        ({"securityContext": {"capabilities": {"drop": ["ALL"], "x": 1}}}, {}, r"capabilities\.x"),
    ],
    ids=["security-field", "volumes", "volume-mounts", "exec-probe", "capabilities-field"],
)
def test_untranslated_fields_are_refused_naming_their_path(
    container: dict[str, Any], pod: dict[str, Any], where: str
) -> None:
    with pytest.raises(ImageError, match=rf"Deployment ns/d: .*{where}: not translated"):
        deployment_container(deployment(container, **pod), pod_name="p")


def test_env_from_a_secret_is_refused() -> None:
    env = [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]
    with pytest.raises(ImageError, match=r"containers\[0\]\.env\[0\]: only value and fieldRef"):
        deployment_container(deployment({"env": env}), pod_name="p")


def test_run_as_non_root_without_a_user_is_refused() -> None:
    security = {"runAsNonRoot": True}
    with pytest.raises(ImageError, match="runAsNonRoot needs a non-zero runAsUser"):
        deployment_container(deployment({"securityContext": security}), pod_name="p")


def test_a_probe_on_an_unknown_port_name_is_refused() -> None:
    probe = {"httpGet": {"path": "/healthz", "port": "metrics"}}
    with pytest.raises(ImageError, match="no container port named 'metrics'"):
        deployment_container(deployment({"livenessProbe": probe}), pod_name="p")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("256Mi", 256 * 2**20),
        ("1Gi", 2**30),
        ("500m", 0.5),
        ("2", 2),
        ("1.5", 1.5),
        ("128M", 128e6),
    ],
)
def test_quantities(text: str, value: float) -> None:
    assert quantity(text, "x") == value


def test_a_bad_quantity_names_its_place() -> None:
    with pytest.raises(ImageError, match=r"^limits\.memory: '256MB' is not a resource quantity"):
        quantity("256MB", "limits.memory")


def test_in_cluster_env_points_at_the_api_server() -> None:
    assert in_cluster_env("https://127.0.0.1:6443") == {
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": "6443",
    }
