"""Node agents (`nodeAgents`): a node carries the rule's taint while the pods of its DaemonSets
(or its CSI drivers) are not Ready on it; bootstrapOnly lifts it once, continuous puts it back
after `for` and lifts it again."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from nodegate.core.decisions.node_agents import (
    AgentReadiness,
    agent_episode_key,
    agent_episode_type,
    agent_episodes,
    agent_readiness,
    cannot_run,
    lifted_taints,
)
from nodegate.core.decisions.plan import plan
from nodegate.core.decisions.sightings import Sighting, is_kept
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.objects.sightings_record import worth_keeping
from nodegate.core.reports.node_waits import NodeContext, waits
from nodegate.core.rules.autoscaler_checks import autoscaler_findings
from nodegate.core.rules.model import NodeAgentRule, NodeRules
from nodegate.core.rules.node import NodeState, NodeTaint
from nodegate.core.rules.registration import gates_for
from nodegate.core.text.errors import RulesError
from nodegate.core.views.daemon_sets import (
    AgentPod,
    slim_agent_pod,
    slim_daemon_set,
)
from tests.unit.core.builders import NOW, node, rules

AGENT = NodeTaint("example.com/agent-not-ready", "NoSchedule")
DS_UID = "uid-cilium"
TOLERATES_ALL = {"tolerations": [{"operator": "Exists"}]}


CILIUM = "[{namespace: kube-system, name: cilium}]"
AGENT_RULE = """\
nodeAgents:
  - name: cilium
    match: {{labels: {{role: worker}}}}
    daemonSets: {daemon_sets}
    taint: {{key: example.com/agent-not-ready, effect: NoSchedule}}
"""


def agent_rules(extra: str = "", daemon_sets: str = CILIUM) -> NodeRules:
    """One rule for the DaemonSets given; `extra`: more of its fields, one per line."""
    fields = "".join(f"    {line.strip()}\n" for line in extra.splitlines() if line.strip())
    return rules(AGENT_RULE.format(daemon_sets=daemon_sets) + fields)


def the_rule(found: NodeRules) -> NodeAgentRule:
    return found.node_agents[0]


def daemon_set(
    name: str = "cilium",
    uid: str = DS_UID,
    template: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
) -> Any:
    return slim_daemon_set(
        {
            "metadata": {
                "namespace": "kube-system",
                "name": name,
                "uid": uid,
                "labels": labels or {},
            },
            "spec": {"template": {"spec": TOLERATES_ALL if template is None else template}},
        }
    )


def pod(
    ready: bool = True,
    owner: str = DS_UID,
    uid: str = "pod-1",
    node_name: str = "node-a",
    written: str = "2026-11-21T12:00:00Z",
    deleting: bool = False,
    transition: str = "2026-11-21T11:59:59Z",
    owner_kind: str = "DaemonSet",
) -> AgentPod:
    meta: dict[str, Any] = {
        "uid": uid,
        "creationTimestamp": "2026-11-21T11:59:00Z",
        "ownerReferences": [{"kind": owner_kind, "uid": owner, "controller": True}],
        "managedFields": [{"subresource": "status", "time": written}],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-11-21T12:00:00Z"
    status = "True" if ready else "False"
    return slim_agent_pod(
        {
            "metadata": meta,
            "spec": {"nodeName": node_name},
            "status": {
                "conditions": [
                    {"type": "Ready", "status": status, "lastTransitionTime": transition}
                ],
                "containerStatuses": [{"ready": ready}],
            },
        }
    )


def readiness(
    found: NodeRules,
    on: NodeState,
    pods: list[AgentPod],
    daemon_sets: list[Any] | None = None,
    csi: dict[str, bool] | None = None,
) -> AgentReadiness:
    sets = [daemon_set()] if daemon_sets is None else daemon_sets
    return agent_readiness(the_rule(found), on, sets, pods, csi or {}, lifted_taints(found))


def facts_for(found: NodeRules, on: NodeState, pods: list[AgentPod], **more: Any) -> PlanFacts:
    return PlanFacts(now=NOW, agents={"cilium": readiness(found, on, pods)}, **more)


def taint_changes(found: NodeRules, on: NodeState, facts: PlanFacts) -> tuple[set[str], set[str]]:
    result = plan(on, found, facts)
    return (
        {c.taint.key for c in result.add_taints},
        {c.taint.key for c in result.remove_taints},
    )


WORKER = {"role": "worker"}


# --- readiness ----------------------------------------------------------------------------------


def test_the_daemon_sets_ready_pod_on_the_node_makes_the_agent_ready() -> None:
    assert readiness(agent_rules(), node(WORKER), [pod()]).ready


def test_a_pod_not_ready_keeps_the_agent_not_ready() -> None:
    found = readiness(agent_rules(), node(WORKER), [pod(ready=False)])
    assert not found.ready
    assert "kube-system/cilium (pod not Ready)" in found.summary()


def test_a_terminating_pod_does_not_count_even_if_ready() -> None:
    assert not readiness(agent_rules(), node(WORKER), [pod(deleting=True)]).ready


def test_a_ready_pod_of_another_owner_does_not_count() -> None:
    """Matched by the DaemonSet's uid, not by labels or names: a pod of another DaemonSet (or
    of an earlier DaemonSet of the same name) says nothing of this one."""
    assert not readiness(agent_rules(), node(WORKER), [pod(owner="uid-other")]).ready


def test_a_ready_pod_on_another_node_does_not_count() -> None:
    assert not readiness(agent_rules(), node(WORKER), [pod(node_name="node-b")]).ready


def test_a_ready_pod_beside_its_surge_replacement_not_ready_yet_keeps_the_agent_ready() -> None:
    """A rolling update with maxSurge: the old pod serves until the new one is Ready, so the
    agent is Ready (pelotech's nidhogg wanted every pod of the DaemonSet on the node Ready, and
    tainted the node for the surge: docs/agents.md, "Coming from nidhogg or Vigil")."""
    old, new = pod(uid="pod-old"), pod(ready=False, uid="pod-new")
    assert readiness(agent_rules(), node(WORKER), [old, new]).ready
    assert readiness(agent_rules(), node(WORKER), [new, old]).ready


def test_a_pod_whose_status_was_last_written_before_the_node_was_created_does_not_count() -> None:
    """The pod of an earlier Node of the same name (the kubelet has not written since)."""
    old = pod(written="2026-11-21T11:00:00Z")
    found = readiness(agent_rules(), node(WORKER), [old])
    assert not found.ready
    assert "Ready before this Node object was created" in found.summary()


def test_a_missing_daemon_set_is_named() -> None:
    found = readiness(agent_rules(), node(WORKER), [pod()], daemon_sets=[])
    assert not found.ready
    assert "kube-system/cilium (DaemonSet not found)" in found.summary()


def test_every_listed_daemon_set_must_be_ready() -> None:
    found = agent_rules(
        daemon_sets="[{namespace: kube-system, name: cilium}, {namespace: kube-system, name: logs}]"
    )
    sets = [daemon_set(), daemon_set("logs", "uid-logs")]
    assert not readiness(found, node(WORKER), [pod()], sets).ready
    both = [pod(), pod(owner="uid-logs", uid="pod-2")]
    assert readiness(found, node(WORKER), both, sets).ready


def test_csi_drivers_count_with_the_daemon_sets() -> None:
    found = agent_rules("csiDrivers: [{name: ebs.csi.aws.com}]")
    assert not readiness(found, node(WORKER), [pod()], csi={}).ready
    assert not readiness(found, node(WORKER), [pod()], csi={"ebs.csi.aws.com": False}).ready
    assert readiness(found, node(WORKER), [pod()], csi={"ebs.csi.aws.com": True}).ready


def episode_of(found: AgentReadiness) -> str:
    [agent] = found.not_ready
    return agent.episode


def test_a_new_pod_starts_a_new_not_ready_episode() -> None:
    first = readiness(agent_rules(), node(WORKER), [pod(ready=False, uid="pod-1")])
    second = readiness(agent_rules(), node(WORKER), [pod(ready=False, uid="pod-2")])
    assert episode_of(first) != episode_of(second)


def test_the_same_pod_not_ready_again_is_a_new_episode() -> None:
    once = readiness(agent_rules(), node(WORKER), [pod(ready=False, transition="t1")])
    again = readiness(agent_rules(), node(WORKER), [pod(ready=False, transition="t2")])
    assert episode_of(once) != episode_of(again)


def test_an_episode_without_a_pod_cannot_be_told_from_the_next() -> None:
    """No pod: nothing the node wrote tells one such episode from another, so a sighting of it
    is not restored after a restart (`sightings_record.restored`)."""
    assert episode_of(readiness(agent_rules(), node(WORKER), [])).endswith("@")
    assert not episode_of(readiness(agent_rules(), node(WORKER), [pod(ready=False)])).endswith("@")


def test_each_agent_has_an_episode_of_its_own() -> None:
    found = agent_rules(
        daemon_sets="[{namespace: kube-system, name: cilium}, {namespace: kube-system, name: dns}]"
    )
    sets = [daemon_set(), daemon_set("dns", "uid-dns")]
    both = readiness(found, node(WORKER), [pod(ready=False)], sets)
    episodes = agent_episodes(found, {"cilium": both})
    assert set(episodes) == {
        (agent_episode_type(the_rule(found)), "kube-system/cilium"),
        (agent_episode_type(the_rule(found)), "kube-system/dns"),
    }


def test_a_pod_no_daemon_set_controls_is_no_agent() -> None:
    """A mirror pod a kubelet labelled like a DaemonSet's (NodeRestriction lets it own it by
    its Node only) is held as nothing."""
    assert pod(owner_kind="Node").node == ""


# --- a listed DaemonSet the DaemonSet controller will not run there (cannotRun) ---------------

DEDICATED = NodeTaint("dedicated", "NoSchedule", "ci")
TOLERATES_AGENT_ONLY = {"tolerations": [{"key": AGENT.key, "operator": "Exists"}]}


def test_a_listed_daemon_set_kept_away_by_another_taint_is_not_waited_for() -> None:
    """The docs' log agent beside the README's dedicated=ci taint: its pod is never made on the
    node, so by default the node does not wait for it (as daemonSets: auto does)."""
    on = node(WORKER, taints=(AGENT, DEDICATED))
    found = readiness(agent_rules(), on, [], [daemon_set(template=TOLERATES_AGENT_ONLY)])
    assert found.ready
    assert [a.agent for a in found.not_awaited] == ["kube-system/cilium"]
    assert "does not tolerate taint dedicated=ci:NoSchedule" in found.summary()
    assert taint_changes(agent_rules(), on, PlanFacts(now=NOW, agents={"cilium": found})) == (
        set(),
        {AGENT.key},
    )


def test_a_listed_daemon_set_whose_node_selector_does_not_select_the_node_is_not_waited_for() -> (
    None
):
    gpu_only = {**TOLERATES_ALL, "nodeSelector": {"gpu": "true"}}
    found = readiness(agent_rules(), node(WORKER), [], [daemon_set(template=gpu_only)])
    assert found.ready
    assert found.not_awaited[0].refused == "its nodeSelector wants gpu=true"


def test_cannot_run_wait_keeps_the_node_waiting_for_a_daemon_set_kept_away() -> None:
    on = node(WORKER, taints=(AGENT, DEDICATED))
    waiting = agent_rules("cannotRun: wait")
    found = readiness(waiting, on, [], [daemon_set(template=TOLERATES_AGENT_ONLY)])
    assert not found.ready
    assert found.not_awaited == ()
    assert found.not_ready[0].refused == "it does not tolerate taint dedicated=ci:NoSchedule"


def test_a_daemon_set_that_can_run_is_waited_for_whatever_cannot_run_says() -> None:
    found = readiness(agent_rules(), node(WORKER, taints=(AGENT,)), [], [daemon_set()])
    assert not found.ready
    assert found.not_ready[0].refused is None


def test_what_cannot_run_is_one_report_per_rule_daemon_set_and_reason() -> None:
    on = node(WORKER, taints=(AGENT, DEDICATED))
    found = readiness(agent_rules(), on, [], [daemon_set(template=TOLERATES_AGENT_ONLY)])
    assert cannot_run({"cilium": found}) == {
        (
            "cilium",
            "kube-system/cilium",
            "it does not tolerate taint dedicated=ci:NoSchedule",
            "skip",
        )
    }


OTHER_AGENT = NodeTaint("example.com/cni-not-ready", "NoSchedule")
TWO_AGENT_RULES = AGENT_RULE.format(daemon_sets=CILIUM) + (
    "  - name: cni\n"
    "    daemonSets: [{namespace: kube-system, name: cni}]\n"
    "    taint: {key: example.com/cni-not-ready, effect: NoSchedule}\n"
)


def test_a_daemon_set_kept_away_only_by_another_agent_rules_taint_is_waited_for() -> None:
    """That taint goes once the other rule's agent is Ready, and then the DaemonSet runs: it
    is not one the DaemonSet controller will never run, so the node waits for it."""
    found = rules(TWO_AGENT_RULES)
    on = node(WORKER, taints=(AGENT, OTHER_AGENT))
    state = agent_readiness(
        found.node_agents[0],
        on,
        [daemon_set(template=TOLERATES_AGENT_ONLY)],
        [],
        {},
        lifted_taints(found),
    )
    assert not state.ready
    assert state.not_awaited == ()
    assert state.not_ready[0].refused is None


def test_a_daemon_set_kept_away_only_by_a_condition_rules_taint_is_waited_for() -> None:
    found = rules(
        AGENT_RULE.format(daemon_sets=CILIUM)
        + "conditionTaints:\n"
        + "  - name: disk\n"
        + '    conditions: [{type: DiskPressure, status: "True"}]\n'
        + "    taint: {key: example.com/disk, effect: NoExecute}\n"
    )
    disk = NodeTaint("example.com/disk", "NoExecute")
    state = agent_readiness(
        found.node_agents[0],
        node(WORKER, taints=(AGENT, disk)),
        [daemon_set(template=TOLERATES_AGENT_ONLY)],
        [],
        {},
        lifted_taints(found),
    )
    assert not state.ready
    assert state.not_awaited == ()


# --- discovery ----------------------------------------------------------------------------------


def auto_rules(extra: str = "") -> NodeRules:
    return agent_rules(extra, daemon_sets="auto")


def test_auto_waits_for_every_daemon_set_that_runs_on_the_node() -> None:
    sets = [daemon_set(), daemon_set("logs", "uid-logs")]
    found = readiness(auto_rules(), node(WORKER), [pod()], sets)
    assert [a.agent for a in found.agents] == ["kube-system/cilium", "kube-system/logs"]
    assert not found.ready


def test_auto_leaves_out_a_daemon_set_whose_node_selector_does_not_match() -> None:
    windows = daemon_set("win", "uid-win", {"nodeSelector": {"kubernetes.io/os": "windows"}})
    found = readiness(auto_rules(), node(WORKER), [pod()], [daemon_set(), windows])
    assert found.ready


GATE = NodeTaint("example.com/init", "NoSchedule")
WITH_GATE = """\
startupGates:
  - name: init
    match: {labels: {role: worker}}
    taint: {key: example.com/init, effect: NoSchedule}
    readyWhen: {annotation: example.com/ready=true}
"""


def test_auto_waits_for_a_daemon_set_that_runs_once_a_gate_is_lifted() -> None:
    """Other rules' lifted taints (gates, other agents) are left out of the toleration check,
    as Vigil leaves out known startup taints: the DaemonSet that runs once they are gone is
    waited for."""
    tolerates_agent = {"tolerations": [{"key": AGENT.key, "operator": "Exists"}]}
    logs = daemon_set("logs", "uid-logs", tolerates_agent)
    gated_rules = rules(WITH_GATE + AGENT_RULE.format(daemon_sets="auto"))
    on = node(WORKER, taints=(AGENT, GATE))
    found = agent_readiness(
        gated_rules.node_agents[0],
        on,
        [daemon_set(), logs],
        [pod()],
        {},
        lifted_taints(gated_rules),
    )
    assert [a.agent for a in found.agents] == ["kube-system/cilium", "kube-system/logs"]


def test_auto_never_waits_for_a_daemon_set_that_does_not_tolerate_the_rules_own_taint() -> None:
    """Its pod is never made on a node carrying the taint: waiting would keep it for ever."""
    intolerant = daemon_set("logs", "uid-logs", {})
    on = node(WORKER, taints=(AGENT,))
    found = readiness(auto_rules(), on, [pod()], [daemon_set(), intolerant])
    assert found.ready


def test_a_listed_daemon_set_that_does_not_tolerate_the_taint_is_named_with_the_fix() -> None:
    found = readiness(agent_rules(), node(WORKER, taints=(AGENT,)), [], [daemon_set(template={})])
    assert "does not tolerate this rule's taint example.com/agent-not-ready:NoSchedule" in (
        found.summary()
    )


def test_auto_leaves_out_a_daemon_set_that_does_not_tolerate_another_taint() -> None:
    intolerant = daemon_set("logs", "uid-logs", {})
    on = node(WORKER, taints=(NodeTaint("example.com/dedicated", "NoSchedule"),))
    found = readiness(auto_rules(), on, [pod()], [daemon_set(), intolerant])
    assert found.ready


def test_auto_excludes_daemon_sets_by_label() -> None:
    excluded = daemon_set("debug", "uid-debug", labels={"nodegate.dev/ignore": "true"})
    found = readiness(
        auto_rules("    excludeDaemonSets: {labels: {nodegate.dev/ignore: 'true'}}"),
        node(WORKER),
        [pod()],
        [daemon_set(), excluded],
    )
    assert found.ready


def test_auto_with_no_daemon_set_for_the_node_is_ready() -> None:
    assert readiness(auto_rules(), node(WORKER), [], []).ready


# --- the taint ----------------------------------------------------------------------------------


def test_nodes_are_born_with_the_agent_taint() -> None:
    assert [r.taint.key for r in gates_for(agent_rules(), WORKER)] == [AGENT.key]


def test_the_taint_is_lifted_when_the_agent_is_ready() -> None:
    tainted = node(WORKER, taints=(AGENT,))
    facts = facts_for(agent_rules(), tainted, [pod()])
    assert taint_changes(agent_rules(), tainted, facts) == (set(), {AGENT.key})


def test_the_taint_stays_while_the_agent_is_not_ready() -> None:
    tainted = node(WORKER, taints=(AGENT,))
    facts = facts_for(agent_rules(), tainted, [pod(ready=False)])
    assert taint_changes(agent_rules(), tainted, facts) == (set(), set())


def test_the_taint_stays_while_the_agents_are_not_looked_up() -> None:
    tainted = node(WORKER, taints=(AGENT,))
    assert taint_changes(agent_rules(), tainted, PlanFacts(now=NOW)) == (set(), set())


def sighted_at(facts: PlanFacts, found: NodeRules, ago: timedelta) -> PlanFacts:
    """`facts` in which each not-Ready agent's episode was first seen `ago`."""
    rule = the_rule(found)
    sightings = {
        agent_episode_key(rule, agent): Sighting(agent.episode, NOW - ago)
        for agent in facts.agents[rule.name].not_ready
    }
    return replace(facts, condition_sightings=sightings)


def test_continuous_puts_the_taint_back_after_for() -> None:
    found = agent_rules("    for: 2m")
    lifted = node(WORKER)
    facts = facts_for(found, lifted, [pod(ready=False)])
    fresh = sighted_at(facts, found, timedelta(seconds=119))
    assert taint_changes(found, lifted, fresh) == (set(), set())
    assert plan(lifted, found, fresh).recheck_after == timedelta(seconds=1)
    due = sighted_at(facts, found, timedelta(seconds=120))
    assert taint_changes(found, lifted, due) == ({AGENT.key}, set())


def test_a_new_episode_counts_for_from_its_own_first_sight() -> None:
    found = agent_rules()
    lifted = node(WORKER)
    facts = facts_for(found, lifted, [pod(ready=False, uid="pod-2")])
    [agent] = facts.agents["cilium"].not_ready
    key = agent_episode_key(the_rule(found), agent)
    old = Sighting("kube-system/cilium:pod-1:False@x", NOW - timedelta(hours=1))
    assert taint_changes(found, lifted, replace(facts, condition_sightings={key: old})) == (
        set(),
        set(),
    )


def test_the_oldest_agent_episode_decides_whatever_another_agent_does() -> None:
    """cilium down for 200 s, dns replaced a moment ago: cilium's `for` is over."""
    found = agent_rules(
        daemon_sets="[{namespace: kube-system, name: cilium}, {namespace: kube-system, name: dns}]"
    )
    sets = [daemon_set(), daemon_set("dns", "uid-dns")]
    lifted = node(WORKER)
    facts = PlanFacts(
        now=NOW, agents={"cilium": readiness(found, lifted, [pod(ready=False)], sets)}
    )
    rule = the_rule(found)
    cilium, dns = facts.agents["cilium"].not_ready
    sightings = {
        agent_episode_key(rule, cilium): Sighting(cilium.episode, NOW - timedelta(seconds=200)),
        agent_episode_key(rule, dns): Sighting(dns.episode, NOW - timedelta(seconds=1)),
    }
    due = replace(facts, condition_sightings=sightings)
    assert taint_changes(found, lifted, due) == ({AGENT.key}, set())


def test_bootstrap_only_never_puts_the_taint_back() -> None:
    found = agent_rules("    mode: bootstrapOnly")
    lifted = node(WORKER)
    facts = facts_for(found, lifted, [pod(ready=False)])
    stale = sighted_at(facts, found, timedelta(days=1))
    assert taint_changes(found, lifted, stale) == (set(), set())


def test_bootstrap_only_lifts_the_taint_it_was_born_with() -> None:
    found = agent_rules("    mode: bootstrapOnly")
    tainted = node(WORKER, taints=(AGENT,))
    assert taint_changes(found, tainted, facts_for(found, tainted, [pod()])) == (set(), {AGENT.key})


def test_a_node_that_no_longer_matches_is_released() -> None:
    tainted = node({"role": "other"}, taints=(AGENT,))
    facts = facts_for(agent_rules(), tainted, [pod(ready=False)])
    assert taint_changes(agent_rules(), tainted, facts) == (set(), {AGENT.key})


def test_the_not_ready_episodes_are_kept_for_a_restart_while_for_counts() -> None:
    found = agent_rules()
    key = (agent_episode_type(the_rule(found)), "kube-system/cilium")
    assert is_kept(key, worth_keeping(node(WORKER), found))
    assert not is_kept(key, worth_keeping(node(WORKER, taints=(AGENT,)), found))
    assert not is_kept(key, worth_keeping(node(WORKER), agent_rules("    mode: bootstrapOnly")))


def test_a_continuous_no_execute_taint_is_charged_to_the_eviction_budget() -> None:
    continuous = the_rule(agent_rules())
    bootstrap = the_rule(agent_rules("    mode: bootstrapOnly"))
    assert continuous.charged
    assert not bootstrap.charged


# --- the rules file -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ("    mode: bootstrapOnly\n    for: 1m", "'for' applies to mode: continuous only"),
        (
            "    excludeDaemonSets: {labels: {a: b}}",
            "excludeDaemonSets applies to daemonSets: auto",
        ),
    ],
)
def test_options_of_the_other_mode_are_refused(extra: str, said: str) -> None:
    with pytest.raises(RulesError, match=said):
        agent_rules(extra)


def test_a_rule_without_agents_is_refused() -> None:
    with pytest.raises(RulesError, match="give 'daemonSets'"):
        rules(
            """\
            nodeAgents:
              - name: empty
                taint: {key: example.com/agent-not-ready, effect: NoSchedule}
            """
        )


def test_a_word_other_than_auto_is_refused_with_the_forms_that_work() -> None:
    with pytest.raises(RulesError, match="write 'auto'"):
        agent_rules(daemon_sets="all")


def test_an_agent_taint_is_checked_against_the_pools_autoscaler_like_a_gate() -> None:
    """Born with it and lifted later: a managed cluster-autoscaler must read it as a startup
    taint, or it adds nodes for pods the tainted node cannot take yet."""
    pool = (
        "nodePools:\n  - name: workers\n    provider: oke\n    size: 1\n"
        "    labels: {role: worker}\n    autoscaler: {type: cluster-autoscaler}\n"
    )
    said = r"nodeAgents\[0\]\.taint\.key: nodeAgents 'cilium' is not"
    with pytest.raises(RulesError, match=said):
        rules(AGENT_RULE.format(daemon_sets=CILIUM) + pool)
    prefixed = AGENT_RULE.format(daemon_sets=CILIUM).replace(
        "example.com/", "startup-taint.cluster-autoscaler.kubernetes.io/"
    )
    assert autoscaler_findings(rules(prefixed + pool)) == []


def test_two_auto_rules_never_wait_for_each_others_blocked_daemon_sets() -> None:
    """x tolerates only a's taint, y only b's: the DaemonSet controller runs neither while both
    taints are on, so neither rule may wait for them (each would keep its taint for ever)."""
    both = rules(
        """\
        nodeAgents:
          - name: a
            daemonSets: auto
            mode: bootstrapOnly
            taint: {key: example.com/a, effect: NoSchedule}
          - name: b
            daemonSets: auto
            mode: bootstrapOnly
            taint: {key: example.com/b, effect: NoSchedule}
        """
    )
    x = daemon_set("x", "uid-x", {"tolerations": [{"key": "example.com/a", "operator": "Exists"}]})
    y = daemon_set("y", "uid-y", {"tolerations": [{"key": "example.com/b", "operator": "Exists"}]})
    born = node(
        taints=(NodeTaint("example.com/a", "NoSchedule"), NodeTaint("example.com/b", "NoSchedule"))
    )
    lifted = lifted_taints(both)
    a, b = (agent_readiness(r, born, [x, y], [], {}, lifted) for r in both.node_agents)
    assert a.ready and b.ready


def test_auto_waits_for_a_daemon_set_kept_away_only_by_the_nodes_start_up_taints() -> None:
    """node.kubernetes.io/not-ready keeps most daemon pods off a node until its kubelet is
    Ready: the DaemonSet runs then, and is waited for."""
    logs = daemon_set(
        "logs", "uid-logs", {"tolerations": [{"key": AGENT.key, "operator": "Exists"}]}
    )
    starting = node(WORKER, taints=(AGENT, NodeTaint("node.kubernetes.io/not-ready", "NoSchedule")))
    found = readiness(auto_rules(), starting, [pod()], [daemon_set(), logs])
    assert [a.agent for a in found.agents] == ["kube-system/cilium", "kube-system/logs"]


def test_a_prefer_no_schedule_agent_taint_needs_no_toleration_to_be_waited_for() -> None:
    """PreferNoSchedule keeps no daemon pod away."""
    soft = rules(
        AGENT_RULE.format(daemon_sets="auto").replace(
            "effect: NoSchedule", "effect: PreferNoSchedule"
        )
    )
    plain = daemon_set("cni", "uid-cni", {})
    on = node(WORKER, taints=(NodeTaint(AGENT.key, "PreferNoSchedule"),))
    assert not agent_readiness(soft.node_agents[0], on, [plain], [], {}).ready


def test_auto_with_namespaces_counts_only_their_daemon_sets() -> None:
    tenant = slim_daemon_set(
        {
            "metadata": {"namespace": "team-a", "name": "sidecar", "uid": "uid-t"},
            "spec": {"template": {"spec": TOLERATES_ALL}},
        }
    )
    scoped = auto_rules("namespaces: [kube-system]")
    found = readiness(scoped, node(WORKER), [pod()], [daemon_set(), tenant])
    assert [a.agent for a in found.agents] == ["kube-system/cilium"]
    assert scoped.reads().agent_namespaces == frozenset({"kube-system"})


def test_explain_says_which_agent_a_tainted_node_waits_for() -> None:
    tainted = node(WORKER, taints=(AGENT,))
    result = plan(tainted, agent_rules(), facts_for(agent_rules(), tainted, [pod(ready=False)]))
    assert waits(tainted, agent_rules(), result, NodeContext(), NOW) == (
        "cilium: waiting for kube-system/cilium (pod not Ready)",
    )


@pytest.mark.parametrize(
    "key",
    [
        "node.cilium.io/agent-not-ready",
        "ebs.csi.aws.com/agent-not-ready",
        "startup-taint.cluster-autoscaler.kubernetes.io/warmup",
        "readiness.k8s.io/network",
    ],
)
def test_auto_waits_for_a_daemon_set_kept_away_by_another_tools_startup_taint(key: str) -> None:
    """Lifted by whoever put it (Cilium, a CSI driver, node-readiness-controller): the
    DaemonSet it keeps away runs then, and is waited for."""
    tolerates_agent = {"tolerations": [{"key": AGENT.key, "operator": "Exists"}]}
    logs = daemon_set("logs", "uid-logs", tolerates_agent)
    starting = node(WORKER, taints=(AGENT, NodeTaint(key, "NoSchedule")))
    found = readiness(auto_rules(), starting, [pod()], [daemon_set(), logs])
    assert "kube-system/logs" in [a.agent for a in found.agents]


def test_another_agent_rules_taint_under_a_startup_prefix_still_counts() -> None:
    """Even under cluster-autoscaler's startup prefix, another nodeAgents rule's taint is not
    left out: two rules each waiting for what the other keeps away would wait for ever."""
    other = NodeTaint("startup-taint.cluster-autoscaler.kubernetes.io/other", "NoSchedule")
    both = rules(
        AGENT_RULE.format(daemon_sets="auto") + "  - name: other\n    daemonSets: auto\n"
        f"    taint: {{key: {other.key}, effect: NoSchedule}}\n"
    )
    tolerates_agent = {"tolerations": [{"key": AGENT.key, "operator": "Exists"}]}
    logs = daemon_set("logs", "uid-logs", tolerates_agent)
    on = node(WORKER, taints=(AGENT, other))
    found = agent_readiness(
        both.node_agents[0], on, [daemon_set(), logs], [pod()], {}, lifted_taints(both)
    )
    assert [a.agent for a in found.agents] == ["kube-system/cilium"]
