"""A startup gate lifted once the node's CSI drivers registered (`readyWhen.csiDrivers`): the
node's own CSINode lists every driver, with allocatable where required (the EBS CSI driver's
agent-not-ready check, for drivers without a startup taint of their own)."""

from __future__ import annotations

from typing import Any

import pytest

from nodegate.core.decisions.plan import plan
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.reports.node_waits import NodeContext, waits
from nodegate.core.rules.node import NodeTaint
from nodegate.core.text.errors import RulesError
from nodegate.core.views.csi_nodes import registered_drivers, slim_csinode
from tests.unit.core.builders import NOW, node, rules

GATE = NodeTaint("example.com/storage", "NoSchedule")


def csi_rules(drivers: str, extra: str = "") -> Any:
    return rules(
        f"""\
        startupGates:
          - name: storage
            match: {{labels: {{role: worker}}}}
            taint: {{key: example.com/storage, effect: NoSchedule}}
            readyWhen:
              csiDrivers: {drivers}
        {extra}"""
    )


def lifted(drivers: str, registered: dict[str, bool]) -> bool:
    gated = node({"role": "worker"}, taints=(GATE,))
    result = plan(gated, csi_rules(drivers), PlanFacts(now=NOW, csi_drivers=registered))
    return GATE.identity in {c.taint.identity for c in result.remove_taints}


def test_the_gate_lifts_once_the_driver_reports_allocatable() -> None:
    assert lifted("[{name: ebs.csi.aws.com}]", {"ebs.csi.aws.com": True})


def test_a_driver_registered_without_allocatable_keeps_the_gate() -> None:
    assert not lifted("[{name: ebs.csi.aws.com}]", {"ebs.csi.aws.com": False})


def test_allocatable_is_not_waited_for_when_the_rule_says_so() -> None:
    drivers = "[{name: csi.cert-manager.io, requireAllocatable: false}]"
    assert lifted(drivers, {"csi.cert-manager.io": False})


def test_every_listed_driver_must_be_registered() -> None:
    drivers = "[{name: ebs.csi.aws.com}, {name: efs.csi.aws.com}]"
    assert not lifted(drivers, {"ebs.csi.aws.com": True})
    assert lifted(drivers, {"ebs.csi.aws.com": True, "efs.csi.aws.com": True})


def test_no_csinode_keeps_the_gate() -> None:
    assert not lifted("[{name: ebs.csi.aws.com}]", {})


def csinode(owner_uid: str, allocatable: bool = True) -> dict[str, Any]:
    driver: dict[str, Any] = {"name": "ebs.csi.aws.com", "nodeID": "i-1"}
    if allocatable:
        driver["allocatable"] = {"count": 25}
    return {
        "metadata": {
            "name": "node-a",
            "ownerReferences": [{"kind": "Node", "name": "node-a", "uid": owner_uid}],
        },
        "spec": {"drivers": [driver]},
    }


def test_only_the_nodes_own_csinode_counts() -> None:
    view = slim_csinode(csinode("uid-now"))
    assert registered_drivers(view, "uid-now") == {"ebs.csi.aws.com": True}
    assert registered_drivers(view, "uid-of-a-new-node-of-that-name") == {}
    assert registered_drivers(slim_csinode(csinode("uid-now", allocatable=False)), "uid-now") == {
        "ebs.csi.aws.com": False
    }


def test_the_rules_read_the_drivers() -> None:
    assert csi_rules("[{name: ebs.csi.aws.com}]").reads().csi_drivers == {"ebs.csi.aws.com"}


def test_a_regate_cannot_wait_for_csi_drivers() -> None:
    with pytest.raises(
        RulesError, match="csiDrivers cannot lift a gate put back by regateOnReboot"
    ):
        rules(
            """\
            startupGates:
              - name: storage
                match: {labels: {role: worker}}
                taint: {key: example.com/storage, effect: NoSchedule}
                regateOnReboot: true
                readyWhen:
                  csiDrivers: [{name: ebs.csi.aws.com}]
            """
        )


def test_explain_says_which_drivers_a_gated_node_waits_for() -> None:
    gated = node({"role": "worker"}, taints=(GATE,))
    csi = csi_rules("[{name: ebs.csi.aws.com}, {name: csi.example.com, requireAllocatable: false}]")
    result = plan(gated, csi, PlanFacts(now=NOW))
    said = waits(gated, csi, result, NodeContext(), NOW)
    assert said == (
        "storage: waits for CSI drivers ebs.csi.aws.com with allocatable and csi.example.com "
        "on the node's CSINode; gated for 0s",
    )
