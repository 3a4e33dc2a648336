"""Rules that wait for each other on a node (`agent_deadlocks`): a startup gate waits for its init
pods, a node-agent rule for its DaemonSets' pods, and the DaemonSet controller makes neither
where a taint its DaemonSet does not tolerate is; a cycle of such waits never ends. Seen with
the DaemonSets, possible from the rules alone."""

from __future__ import annotations

from typing import Any

from nodegate.core.decisions.agent_deadlocks import (
    Deadlock,
    birth_deadlocks,
    deadlocks,
    never_runs,
    node_scene,
)
from nodegate.core.rules.model import NodeRules
from nodegate.core.rules.node import NodeTaint
from nodegate.core.views.daemon_sets import (
    DaemonSetView,
    slim_daemon_set,
)
from tests.unit.core.builders import node, rules

GATE = {"key": "example.com/booting", "operator": "Exists"}
AGENT = {"key": "example.com/agents-not-ready", "operator": "Exists"}
POOL = """\
nodePools:
  - {name: workers, provider: oke, size: 3, labels: {example.com/pool: workers}}
"""
BOOT = """\
startupGates:
  - name: boot
    match: {labels: {example.com/pool: workers}}
    taint: {key: example.com/booting, effect: NoSchedule}
    readyWhen: {pods: {namespace: kube-system, selector: {app: boot-init}}}
"""
AGENTS = """\
nodeAgents:
  - name: agents
    match: {labels: {example.com/pool: workers}}
    daemonSets: auto
    taint: {key: example.com/agents-not-ready, effect: NoSchedule}
"""
GATE_AND_AGENTS = rules(BOOT + AGENTS + POOL)


def daemon_set(
    ref: str, *tolerations: dict[str, str], spec: dict[str, Any] | None = None
) -> DaemonSetView:
    namespace, name = ref.split("/")
    return slim_daemon_set(
        {
            "metadata": {"namespace": namespace, "name": name, "uid": f"uid-{name}"},
            "spec": {
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"tolerations": list(tolerations), **(spec or {})},
                }
            },
        }
    )


INIT = "kube-system/boot-init"
LOGS = "logging/fluent-bit"


def only(found: tuple[Deadlock, ...]) -> Deadlock:
    [deadlock] = found
    return deadlock


# --- a gate and an agent rule ---------------------------------------------------------------------


def test_init_pods_the_agent_taint_keeps_away_and_an_agent_the_gate_keeps_away_deadlock() -> None:
    found = only(
        birth_deadlocks(GATE_AND_AGENTS, [daemon_set(INIT, GATE), daemon_set(LOGS, AGENT)])
    )
    assert found.certain and found.rules == ("boot", "agents")
    assert found.where == ("pool 'workers'",)
    message = found.message()
    assert "startupGates 'boot' and nodeAgents 'agents' wait for each other" in message
    assert (
        "add to kube-system/boot-init's spec.template.spec.tolerations "
        "{key: example.com/agents-not-ready, operator: Exists, effect: NoSchedule}" in message
    )
    assert (
        "add to logging/fluent-bit's spec.template.spec.tolerations "
        "{key: example.com/booting, operator: Exists, effect: NoSchedule}" in message
    )


def test_an_init_daemon_set_that_tolerates_the_agent_taint_ends_it() -> None:
    found = birth_deadlocks(
        GATE_AND_AGENTS, [daemon_set(INIT, GATE, AGENT), daemon_set(LOGS, AGENT)]
    )
    assert found == ()


def test_agents_that_tolerate_the_gate_end_it() -> None:
    found = birth_deadlocks(
        GATE_AND_AGENTS, [daemon_set(INIT, GATE), daemon_set(LOGS, AGENT, GATE)]
    )
    assert found == ()


def test_a_daemon_set_that_does_not_run_on_the_pool_is_not_waited_for() -> None:
    """Its nodeSelector names the pool label another value: discovery leaves it out there."""
    elsewhere = {"nodeSelector": {"example.com/pool": "gpu"}}
    found = birth_deadlocks(
        GATE_AND_AGENTS, [daemon_set(INIT, GATE), daemon_set(LOGS, AGENT, spec=elsewhere)]
    )
    assert found == ()


def test_from_the_rules_alone_a_gate_and_an_agent_rule_on_one_pool_may_deadlock() -> None:
    found = only(birth_deadlocks(GATE_AND_AGENTS))
    assert not found.certain
    message = found.message()
    assert message.startswith("startupGates 'boot' and nodeAgents 'agents' may wait for each other")
    assert (
        "give the DaemonSet of the pods of startupGates 'boot' the toleration "
        "{key: example.com/agents-not-ready, operator: Exists, effect: NoSchedule}" in message
    )
    assert "--daemon-sets" in message


def test_rules_on_different_pools_never_wait_for_each_other() -> None:
    apart = rules(
        BOOT
        + AGENTS.replace("pool: workers", "pool: ci")
        + POOL
        + "  - {name: ci, provider: oke, size: 3, labels: {example.com/pool: ci}}\n"
    )
    assert birth_deadlocks(apart) == ()


def test_without_pools_a_node_both_rules_match_is_looked_at() -> None:
    found = only(birth_deadlocks(rules(BOOT + AGENTS)))
    assert found.where == ("nodes both startupGates 'boot' and nodeAgents 'agents' match",)


def test_a_gate_also_lifted_by_its_timeout_says_until_when() -> None:
    lifting = rules(BOOT + "    timeout: 10m\n    onTimeout: lift\n" + AGENTS + POOL)
    found = only(birth_deadlocks(lifting, [daemon_set(INIT, GATE), daemon_set(LOGS, AGENT)]))
    assert found.escapes == ("startupGates 'boot' times out (10m, onTimeout: lift)",)
    assert "keep their taints until startupGates 'boot' times out" in found.message()


def test_a_gate_also_lifted_by_an_annotation_says_so() -> None:
    annotated = rules(
        BOOT.replace("readyWhen: {pods:", "readyWhen: {annotation: example.com/ready=true, pods:")
        + AGENTS
        + POOL
    )
    found = only(birth_deadlocks(annotated, [daemon_set(INIT, GATE), daemon_set(LOGS, AGENT)]))
    assert found.escapes == ("startupGates 'boot''s readyWhen.annotation lifts it",)


# --- two agent rules ------------------------------------------------------------------------------

LISTED = """\
nodeAgents:
  - name: cni
    daemonSets: [{namespace: kube-system, name: cni}]
    taint: {key: example.com/cni-not-ready, effect: NoSchedule}
    cannotRun: CANNOT_RUN
  - name: logs
    daemonSets: [{namespace: logging, name: fluent-bit}]
    taint: {key: example.com/logs-not-ready, effect: NoSchedule}
    cannotRun: CANNOT_RUN
"""
CNI = {"key": "example.com/cni-not-ready", "operator": "Exists"}
LOGS_TAINT = {"key": "example.com/logs-not-ready", "operator": "Exists"}
EACH_ITS_OWN = [daemon_set("kube-system/cni", CNI), daemon_set(LOGS, LOGS_TAINT)]


def listed(cannot_run: str) -> NodeRules:
    return rules(LISTED.replace("CANNOT_RUN", cannot_run))


def test_listed_agents_that_must_wait_and_do_not_tolerate_each_others_taint_deadlock() -> None:
    found = only(birth_deadlocks(listed("wait"), EACH_ITS_OWN))
    assert found.certain and found.rules == ("cni", "logs")


def test_listed_agents_that_skip_what_cannot_run_never_deadlock() -> None:
    assert birth_deadlocks(listed("skip"), EACH_ITS_OWN) == ()


def test_two_discovering_rules_never_deadlock() -> None:
    """Discovery waits only for DaemonSets that run beside the other rules' taints: here each
    tolerates its own rule's taint only, so neither rule waits for either."""
    auto = rules(
        AGENTS
        + """\
  - name: more
    daemonSets: auto
    taint: {key: example.com/more-not-ready, effect: NoSchedule}
"""
    )
    more = {"key": "example.com/more-not-ready", "operator": "Exists"}
    assert birth_deadlocks(auto) == ()
    assert birth_deadlocks(auto, [daemon_set(LOGS, AGENT), daemon_set("logging/more", more)]) == ()


# --- on a node as it stands -----------------------------------------------------------------------

BORN = (
    NodeTaint("example.com/booting", "NoSchedule"),
    NodeTaint("example.com/agents-not-ready", "NoSchedule"),
)
WORKER = node({"example.com/pool": "workers"}, BORN)
SETS = [daemon_set(INIT, GATE), daemon_set(LOGS, AGENT)]


def test_a_node_carrying_both_taints_shows_the_deadlock() -> None:
    found = only(deadlocks(GATE_AND_AGENTS, node_scene(WORKER), SETS))
    assert found.certain and found.where == ("node node-a",)


def test_a_daemon_set_whose_pod_is_on_the_node_already_is_not_kept_away() -> None:
    """A pod made before the taint came back (a continuous agent taint) stays: nothing waits."""
    assert deadlocks(GATE_AND_AGENTS, node_scene(WORKER), SETS, frozenset({"uid-fluent-bit"})) == ()


def test_a_node_that_lost_one_of_the_taints_shows_none() -> None:
    lifted = node({"example.com/pool": "workers"}, BORN[1:])
    assert deadlocks(GATE_AND_AGENTS, node_scene(lifted), SETS) == ()


# --- three rules ----------------------------------------------------------------------------------

THREE = """\
  - name: logs
    match: {labels: {example.com/pool: workers}}
    daemonSets: [{namespace: logging, name: fluent-bit}]
    taint: {key: example.com/logs-not-ready, effect: NoSchedule}
    cannotRun: wait
"""


def test_a_cycle_through_three_rules_is_found() -> None:
    """boot waits for logs (its init pods do not tolerate that taint), logs for agents
    (fluent-bit does not tolerate theirs), agents for boot (the metrics agent does not tolerate
    the gate)."""
    found = only(
        birth_deadlocks(
            rules(BOOT + AGENTS + THREE + POOL),
            [
                daemon_set(INIT, GATE, AGENT),
                daemon_set(LOGS, LOGS_TAINT, GATE),
                daemon_set("monitoring/metrics", AGENT, LOGS_TAINT),
            ],
        )
    )
    assert found.rules == ("boot", "logs", "agents")
    assert "wait for one another" in found.message()


def test_a_longer_cycle_through_rules_that_also_wait_on_each_other_is_said_as_the_shorter() -> None:
    """Every rule here waits on every other: the two-rule cycles are said, the three-rule one
    (which a chord shortens) is not."""
    found = birth_deadlocks(rules(BOOT + AGENTS + THREE + POOL))
    assert sorted(d.rules for d in found) == [("boot", "agents"), ("boot", "logs")]


# --- a listed DaemonSet a pool never runs ---------------------------------------------------------

CI = """\
labelTaints:
  - name: ci
    match: {labels: {example.com/pool: ci}}
    nodeMayLift: true
    taint: {key: dedicated, value: ci, effect: NoSchedule}
nodeAgents:
  - name: logs
    daemonSets: [{namespace: logging, name: fluent-bit}]
    taint: {key: example.com/logs-not-ready, effect: NoSchedule}
    cannotRun: CANNOT_RUN
nodePools:
  - {name: ci, provider: oke, size: 3, labels: {example.com/pool: ci}}
"""


def test_a_listed_daemon_set_a_pools_label_taint_keeps_away_is_waited_for_ever_under_wait() -> None:
    [found] = never_runs(rules(CI.replace("CANNOT_RUN", "wait")), [daemon_set(LOGS, LOGS_TAINT)])
    assert found.waits and found.where == ("pool 'ci'",)
    message = found.message()
    assert "it does not tolerate taint dedicated=ci:NoSchedule" in message
    assert "keep example.com/logs-not-ready:NoSchedule for ever" in message
    assert "{key: dedicated, operator: Exists, effect: NoSchedule}" in message


def test_under_skip_the_same_daemon_set_is_only_said() -> None:
    [found] = never_runs(rules(CI.replace("CANNOT_RUN", "skip")), [daemon_set(LOGS, LOGS_TAINT)])
    assert not found.waits
    assert "does not wait for logging/fluent-bit on pool 'ci' (cannotRun: skip)" in found.message()


# --- what the reconciler watches to see it --------------------------------------------------------


def test_beside_agent_rules_the_daemon_sets_of_the_gates_init_pods_are_read() -> None:
    scoped = rules(BOOT + AGENTS + "    namespaces: [logging]\n")
    assert scoped.reads().agent_namespaces == {"logging", "kube-system"}


def test_gates_alone_read_no_daemon_sets() -> None:
    assert rules(BOOT).reads().agent_namespaces == frozenset()
