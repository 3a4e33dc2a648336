"""A rules update the front door refuses never takes the last good rules out of force: the rules
watcher wired to the controller as `nodegate reconcile` wires them (reconciler/main.py), on a
fake rules ConfigMap. The e2e tier runs the same on a real API server
(test_reconciler.py::test_invalid_rules_update_is_refused_and_the_last_good_rules_stay_in_force).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from nodegate.core.decisions.blast_radius import rules_digest
from nodegate.reconciler.kit.events import EventRecorder
from nodegate.reconciler.kit.kube import RawObject
from nodegate.reconciler.nodes.controller import Controller
from nodegate.reconciler.nodes.metrics import Metrics
from nodegate.reconciler.nodes.rules.rules_source import RulesWatcher
from nodegate.reconciler.settings import ReconcilerSettings
from tests.unit.reconciler.kit.fakes import FakeApi
from tests.unit.reconciler.nodes.test_controller import (
    CI_RULES,
    CI_TAINT,
    ci_node,
    relist_until_cached,
    synced,
)

NS = "nodegate-system"
MISSPELT = CI_RULES.replace("effect: NoSchedule", "effect: NoSchedul")


def rules_configmap(text: str, resource_version: str) -> RawObject:
    return {
        "metadata": {
            "name": "rules",
            "namespace": NS,
            "uid": "uid-rules",
            "resourceVersion": resource_version,
        },
        "data": {"rules.yaml": text},
    }


@contextmanager
def watching(api: FakeApi, controller: Controller) -> Iterator[Metrics]:
    """The rules ConfigMap watched, every valid update offered to the controller."""
    metrics = Metrics()
    watcher = RulesWatcher(
        ReconcilerSettings(rules_configmap=f"{NS}/rules", state_namespace=NS),
        api,
        EventRecorder(api, "default", "test"),
        metrics.rules_source,
        controller.offer_rules,
        lambda: controller.rules_in_force.generation,
    )
    stop = threading.Event()
    thread = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield metrics
    finally:
        stop.set()
        thread.join(5)


def wait_until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 5
    while not check():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.01)


def refused(metrics: Metrics) -> float:
    return metrics.registry.get_sample_value("nodegate_rules_rejected_total") or 0.0


def test_an_invalid_update_leaves_the_last_good_rules_in_force() -> None:
    api = FakeApi()
    api.configmaps[(NS, "rules")] = rules_configmap(CI_RULES, "1")
    controller = synced(api)
    with watching(api, controller) as metrics:
        wait_until(lambda: controller.rules_in_force.applied is not None, "the good rules in force")
        api.push_watch("MODIFIED", rules_configmap(MISSPELT, "2"))
        wait_until(lambda: refused(metrics) == 1, "the misspelt update refused")

    applied = controller.rules_in_force.applied
    assert applied is not None
    assert (applied.generation, applied.update.digest) == (1, rules_digest(CI_RULES))
    # And they still act: a CI node that arrives after the refusal is tainted by them.
    api.add_node(ci_node("late"))
    relist_until_cached(controller, "late")
    controller.process("late")
    assert CI_TAINT in api.nodes["late"]["spec"]["taints"]
