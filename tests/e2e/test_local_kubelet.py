"""The real kubelet itself: it leaves nothing behind, and it refuses what nodegate refuses.

A restricted label (`node-role.kubernetes.io/...`) is accepted by kwok and by a test that
creates Node objects, but a real kubelet exits at once; `nodegate render` refuses the rules
file that would put it in `--node-labels` (tests/fuzz/test_fuzz_render_kubelet_labels.py shows
it never emits one for any valid rules file).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException

from nodegate.localcluster.kubelet import KUBELET_OWN_DIRS
from nodegate.localcluster.nodes import wait_until
from tests.ansible.playbooks import ROOT
from tests.e2e.support.real_kubelet import StartKubelet, first_version, taint_set
from tests.e2e.support.rendered_kubelet_args import render_result

pytestmark = pytest.mark.kubelet

RESTRICTED_LABEL = "node-role.kubernetes.io/gpu"
KUBELET_REFUSAL = "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels"
EXIT_TIMEOUT_SECONDS = 20.0


def host_state() -> dict[str, object]:
    """What a kubelet could leave on the host: mounts, its own directories, firewall chains."""
    mounts = Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines()
    iptables_save = shutil.which("iptables-save")
    rules = (
        subprocess.run([iptables_save], capture_output=True, text=True, check=True).stdout
        if iptables_save
        else ""
    )
    return {
        "kubelet mounts": [line for line in mounts if "kubelet" in line],
        "kubelet dirs": {path: Path(path).exists() for path in KUBELET_OWN_DIRS},
        "KUBE chains": [line for line in rules.splitlines() if "KUBE-" in line],
    }


def test_a_running_then_stopped_kubelet_leaves_no_process_mount_directory_or_firewall_rule(
    start_kubelet: StartKubelet, core_v1: k8s_client.CoreV1Api, unique_name: str
) -> None:
    before = host_state()
    kubelet = start_kubelet(unique_name)
    registered = f"metadata.name={unique_name}"
    wait_until(
        lambda: core_v1.list_node(field_selector=registered).items,
        EXIT_TIMEOUT_SECONDS,
        "registration",
    )
    assert host_state() == before, "the running kubelet changed the host"
    workdir = kubelet.workdir
    kubelet.stop()
    assert not kubelet.leftover_processes()
    assert not workdir.exists()
    assert host_state() == before


def test_kubelet_refuses_a_restricted_label_that_nodegate_refuses_to_render(
    start_kubelet: StartKubelet, core_v1: k8s_client.CoreV1Api, unique_name: str, tmp_path: Path
) -> None:
    rules = tmp_path / "rules.yaml"
    example = (ROOT / "examples" / "rules.yaml").read_text(encoding="utf-8")
    restricted = f"labels: {{{RESTRICTED_LABEL}: 'true', example.com/accelerator: nvidia,"
    rules.write_text(example.replace("labels: {example.com/accelerator: nvidia,", restricted, 1))
    refused = render_result(rules, "gpu", "--format", "kubelet-args")
    assert refused.returncode == 1
    assert f"a kubelet may not set '{RESTRICTED_LABEL}'" in refused.stderr

    kubelet = start_kubelet(unique_name, [f"--node-labels={RESTRICTED_LABEL}=true"])
    wait_until(lambda: not kubelet.is_running(), EXIT_TIMEOUT_SECONDS, "kubelet to exit")
    assert kubelet.returncode() != 0
    assert KUBELET_REFUSAL in kubelet.log()
    with pytest.raises(ApiException) as missing:
        core_v1.read_node(unique_name)
    assert missing.value.status == 404


def test_a_dropin_given_to_the_harness_is_merged_over_its_base_config(
    start_kubelet: StartKubelet, core_v1: k8s_client.CoreV1Api, unique_name: str
) -> None:
    dropin = (
        "apiVersion: kubelet.config.k8s.io/v1beta1\n"
        "kind: KubeletConfiguration\n"
        "registerWithTaints:\n"
        '  - {key: e2e.example.com/dropin, value: "yes", effect: NoSchedule}\n'
    )
    first = first_version(core_v1, unique_name, lambda: start_kubelet(unique_name, dropin=dropin))
    assert ("e2e.example.com/dropin", "yes", "NoSchedule") in taint_set(first.taints)
