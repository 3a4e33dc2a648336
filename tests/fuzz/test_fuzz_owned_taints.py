"""The `nodegate.dev/owned-taints` annotation is written by the node itself (a kubelet may edit
its own annotations): whatever it holds, reading it returns a set of (key, effect) pairs, never
an exception, and a plan over it never removes a taint no rule ever owned."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from nodegate.core.decisions.plan import parse_ownership, plan
from nodegate.core.decisions.verdicts import PlanFacts
from nodegate.core.rules.loader import load_rules
from nodegate.core.rules.node import NodeState, NodeTaint
from nodegate.core.rules.node_marks import OWNED_TAINTS_ANNOTATION
from tests.fuzz.profiles import fuzz
from tests.fuzz.strategies import ROOT

RULES = load_rules(ROOT / "examples" / "rules.yaml")
FOREIGN = (
    NodeTaint("node.kubernetes.io/unschedulable", "NoSchedule"),
    NodeTaint("karpenter.sh/disrupted", "NoSchedule"),
    NodeTaint("other.io/team", "NoSchedule", "a"),
)
CLAIMS = st.one_of(
    st.text(max_size=300),
    st.lists(
        st.tuples(
            st.sampled_from([t.key for t in FOREIGN] + ["example.com/dedicated", ":", ""]),
            st.sampled_from(["NoSchedule", "NoExecute", "", ":"]),
        ),
        max_size=8,
    ).map(lambda pairs: ",".join(f"{k}:{e}" for k, e in pairs)),
)


@fuzz
@given(CLAIMS)
def test_any_annotation_reads_as_a_set_of_pairs(text: str) -> None:
    owned = parse_ownership(text)
    assert all(isinstance(k, str) and isinstance(e, str) for k, e in owned)


@fuzz
@given(CLAIMS)
def test_no_claim_gets_a_foreign_taint_removed(text: str) -> None:
    node = NodeState(name="n", taints=FOREIGN, annotations={OWNED_TAINTS_ANNOTATION: text})
    result = plan(node, RULES, PlanFacts(now=datetime(2026, 11, 23, tzinfo=UTC)))
    assert result.remove_taints == ()
