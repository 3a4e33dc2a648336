"""Hostile rules text reaching a running reconciler: each one refused with a located Warning,
the process alive and within its memory limit, and the next good rules applied."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from kubernetes import client as k8s_client

from nodegate.localcluster.cluster import LocalControlPlane
from nodegate.localcluster.nodes import wait_until
from tests.e2e.support.reconciler_fixtures import (
    RULES,
    TIMEOUT,
    wait_for_event,
    wait_for_taints,
)
from tests.e2e.support.reconciler_process import ReconcilerProcess, running_reconciler

MEMORY_LIMIT_MIB = 256  # the shipped Deployment's limit
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)
HOSTILE = {
    "control-character": RULES.replace("value: ci,", "value: c\x01i,"),
    "alias-bomb": ALIAS_BOMB,
    "deep-nesting": "labelTaints: " + "[" * 5000 + "]" * 5000 + "\n",
}
TEAM_RULE = """\
  - name: team-x
    match: {labels: {example.com/team: x}}
    taint: {key: example.com/team, value: x, effect: NoSchedule}
    nodeMayLift: true
"""


def rss_mib(process: ReconcilerProcess) -> float:
    for line in Path(f"/proc/{process.process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def wait_for_refusal(process: ReconcilerProcess, count: float, what: str) -> None:
    def refused() -> bool:
        return process.metric("nodegate_rules_rejected_total") >= count

    wait_until(refused, TIMEOUT, f"{what} refused")


def test_hostile_rules_in_the_configmap_are_refused_and_the_next_good_ones_apply(
    reconciler: ReconcilerProcess,
    core_v1: k8s_client.CoreV1Api,
    rules_configmap: Callable[..., str],
    make_node: Callable[..., str],
) -> None:
    cm_name = rules_configmap(RULES).split("/")[1]
    for kind, text in HOSTILE.items():
        started = time.monotonic()
        refusals_before = reconciler.metric("nodegate_rules_rejected_total")
        rules_configmap(text)
        wait_for_refusal(reconciler, refusals_before + 1, kind)
        took = time.monotonic() - started
        print(f"{kind}: refused in {took:.2f}s, peak RSS {rss_mib(reconciler):.0f} MiB")
        assert reconciler.get("/healthz")[0] == 200
    refusals = wait_for_event(core_v1, cm_name, "RulesRejected")
    messages = " ".join(e.message or "" for e in refusals)
    assert "control character" in messages
    assert "alias" in messages.lower()
    assert "nest" in messages.lower() or "deep" in messages.lower()
    assert rss_mib(reconciler) < MEMORY_LIMIT_MIB

    rules_configmap(RULES.replace("labelTaints:\n", "labelTaints:\n" + TEAM_RULE, 1))
    name = make_node(labels={"example.com/team": "x"})
    wait_for_taints(core_v1, name, lambda t: ("example.com/team", "NoSchedule") in t)


def test_a_mounted_rules_file_that_is_not_utf8_is_refused_and_a_fixed_one_applies(
    control_plane: LocalControlPlane,
    core_v1: k8s_client.CoreV1Api,
    make_node: Callable[..., str],
    tmp_path: Path,
) -> None:
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(RULES)
    args = ("--rules-file", str(rules_file), "--no-leader-elect")
    with running_reconciler(control_plane.kubeconfig_path, tmp_path, *args) as process:
        rules_file.write_bytes(RULES.encode().replace(b"value: ci,", b"value: c\xe9i,"))
        wait_until(lambda: process.metric("nodegate_rules_rejected_total") >= 1, TIMEOUT, "refusal")
        assert "UTF-8" in process.logs()
        assert process.get("/healthz")[0] == 200
        rules_file.write_text(RULES.replace("labelTaints:\n", "labelTaints:\n" + TEAM_RULE, 1))
        name = make_node(labels={"example.com/team": "x"})
        wait_for_taints(core_v1, name, lambda t: ("example.com/team", "NoSchedule") in t)
