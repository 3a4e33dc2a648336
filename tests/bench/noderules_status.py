"""What a NodeRules object's status costs at N nodes: its size as stored (what every `kubectl
get noderules -o yaml` reads) and the CPU of counting every node against every rule
(`core/reports/rules_objects.py`, the leader's status chore, every 30 s).

`python -m tests.bench.noderules_status --nodes 5000` (`make bench-noderules`): no control
plane. One object of R label taint rules and R/4 condition rules over N nodes, half of them
labelled for each rule, a quarter of those not tainted yet; printed as a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime

from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.reports.rules_objects import ObjectFacts, object_status, rule_counts
from nodegate.core.rules.merge import RulesObject, merge
from nodegate.core.rules.node import NodeCondition, NodeState, NodeTaint

NOW = datetime(2026, 12, 6, tzinfo=UTC)


def spec(rules: int) -> dict[str, object]:
    return {
        "labelTaints": [
            {
                "name": f"label-{r}",
                "match": {"labels": {f"example.com/l{r}": "yes"}},
                "taint": {"key": f"example.com/l{r}", "effect": "NoSchedule"},
                "nodeMayLift": True,
            }
            for r in range(rules)
        ],
        "conditionTaints": [
            {
                "name": f"condition-{r}",
                "conditions": [{"type": f"Broken{r}", "status": "True"}],
                "taint": {"key": f"example.com/c{r}", "effect": "NoSchedule"},
            }
            for r in range(max(1, rules // 4))
        ],
    }


def nodes(count: int, rules: int) -> list[NodeState]:
    found = []
    for i in range(count):
        labels = {f"example.com/l{r}": "yes" for r in range(rules) if (i + r) % 2 == 0}
        taints = tuple(
            NodeTaint(f"example.com/l{r}", "NoSchedule")
            for r in range(rules)
            if (i + r) % 2 == 0 and (i + r) % 8 != 0
        )
        conditions = (NodeCondition("Broken0", "True"),) if i % 10 == 0 else ()
        found.append(NodeState(f"node-{i:05}", labels, taints=taints, conditions=conditions))
    return found


def measure(count: int, rules: int) -> tuple[int, float, int]:
    document = spec(rules)
    merged = merge([RulesObject("team", 1, document)], {})
    states = nodes(count, rules)
    started = time.process_time()
    counts = rule_counts(merged.rules, ((n, PlanFacts(NOW)) for n in states))
    cpu = time.process_time() - started
    facts = ObjectFacts(1, merged.verdicts["team"], document, 1)
    status = object_status(facts, counts, None, NOW)
    return len(json.dumps(status)), cpu, status["nodesTainted"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--rules", type=int, nargs="+", default=[4, 20])
    args = parser.parse_args()
    print("| nodes | rules in the object | status (JSON bytes) | counting CPU (ms) | tainted |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for count in args.nodes:
        for rules in args.rules:
            size, cpu, tainted = measure(count, rules)
            total = rules + max(1, rules // 4)
            print(f"| {count:,} | {total} | {size:,} | {cpu * 1000:,.0f} | {tainted:,} |")


if __name__ == "__main__":
    main()
