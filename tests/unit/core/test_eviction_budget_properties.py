"""Properties of the eviction budget's arithmetic, over random arrivals, pools, zones, windows."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from nodegate.core.decisions.eviction_budget import SHARED, Census, Grant, Place, check, limit
from nodegate.core.rules.model import EvictionBudget, EvictionLimit
from tests.unit.core.builders import NOW

POOLS = ("a", "b", None)
ZONES = ("z1", "z2", None)


@st.composite
def limits(draw: st.DrawFn) -> EvictionLimit:
    share = draw(st.none() | st.floats(0.01, 1.0))
    number = draw(st.none() | st.integers(1, 6)) if share is not None else draw(st.integers(1, 6))
    return EvictionLimit(max_share=share, max_nodes=number)


@st.composite
def budgets(draw: st.DrawFn) -> EvictionBudget:
    return EvictionBudget(
        window=timedelta(seconds=draw(st.integers(1, 60))),
        cluster=draw(limits()),
        per_pool=draw(st.none() | limits()),
        per_zone=draw(st.none() | limits()),
    )


@st.composite
def arrivals(draw: st.DrawFn) -> list[tuple[int, str, Place]]:
    """(second, node, place) of nodes asking for an evicting taint, in time order."""
    count = draw(st.integers(1, 40))
    nodes = [
        (f"n{i}", Place(draw(st.sampled_from(POOLS)), draw(st.sampled_from(ZONES))))
        for i in range(count)
    ]
    asks = draw(st.lists(st.tuples(st.integers(0, 180), st.sampled_from(nodes)), max_size=80))
    return [(second, node, place) for second, (node, place) in sorted(asks, key=lambda a: a[0])]


def _census(arrived: list[tuple[int, str, Place]]) -> Census:
    places = {node: place for _, node, place in arrived}
    pools: dict[str, int] = {}
    zones: dict[str, int] = {}
    for place in places.values():
        if place.pool:
            pools[place.pool] = pools.get(place.pool, 0) + 1
        if place.zone:
            zones[place.zone] = zones.get(place.zone, 0) + 1
    return Census(len(places), pools, zones)


def _run(budget: EvictionBudget, arrived: list[tuple[int, str, Place]]) -> list[Grant]:
    nodes = _census(arrived)
    granted: list[Grant] = []
    for second, node, place in arrived:
        now = NOW + timedelta(seconds=second)
        if check(budget, SHARED, granted, node, place, nodes, now).allowed:
            granted.append(Grant(SHARED, node, place, now))
    return granted


def _in_window(granted: list[Grant], at: Grant, window: timedelta) -> list[Grant]:
    return [g for g in granted if at.at - window < g.at <= at.at]


@settings(max_examples=300, deadline=None)
@given(budgets(), arrivals())
def test_no_window_ever_holds_more_nodes_than_any_scopes_limit(
    budget: EvictionBudget, arrived: list[tuple[int, str, Place]]
) -> None:
    nodes = _census(arrived)
    granted = _run(budget, arrived)
    for grant in granted:
        recent = {g.node: g for g in _in_window(granted, grant, budget.window)}.values()
        assert len(recent) <= limit(budget.cluster, nodes.nodes)
        if budget.per_pool and grant.place.pool:
            pool = [g for g in recent if g.place.pool == grant.place.pool]
            assert len(pool) <= limit(budget.per_pool, nodes.pools[grant.place.pool])
        if budget.per_zone and grant.place.zone:
            zone = [g for g in recent if g.place.zone == grant.place.zone]
            assert len(zone) <= limit(budget.per_zone, nodes.zones[grant.place.zone])


@settings(max_examples=300, deadline=None)
@given(budgets(), arrivals())
def test_a_node_that_waits_is_let_through_when_its_retry_time_comes(
    budget: EvictionBudget, arrived: list[tuple[int, str, Place]]
) -> None:
    nodes = _census(arrived)
    granted: list[Grant] = []
    for second, node, place in arrived:
        now = NOW + timedelta(seconds=second)
        verdict = check(budget, SHARED, granted, node, place, nodes, now)
        if verdict.allowed:
            granted.append(Grant(SHARED, node, place, now))
            continue
        assert verdict.retry_at is not None and verdict.retry_at > now
        assert check(budget, SHARED, granted, node, place, nodes, verdict.retry_at).allowed


@settings(max_examples=200, deadline=None)
@given(budgets(), arrivals())
def test_a_node_is_held_only_while_a_scope_is_full(
    budget: EvictionBudget, arrived: list[tuple[int, str, Place]]
) -> None:
    nodes = _census(arrived)
    granted: list[Grant] = []
    for second, node, place in arrived:
        now = NOW + timedelta(seconds=second)
        verdict = check(budget, SHARED, granted, node, place, nodes, now)
        if verdict.allowed:
            granted.append(Grant(SHARED, node, place, now))
        else:
            assert verdict.spent >= verdict.limit
