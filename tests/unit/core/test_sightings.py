"""First sights (`core.decisions.sightings`): node-written times are tokens, and since when a state
holds is when nodegate first saw its episode."""

from __future__ import annotations

from datetime import timedelta

from nodegate.core.decisions.sightings import (
    RESTORED_MARGIN,
    Sighting,
    condition_episodes,
    condition_key,
    condition_token,
    earliest,
    first_sight,
    latest,
    track,
)
from nodegate.core.rules.node import NodeCondition
from tests.unit.core.builders import NOW

KAPUT = NodeCondition("NetworkInterfaceCard", "Kaput", "", NOW - timedelta(hours=3))


def test_an_episode_seen_again_keeps_its_first_sight() -> None:
    first = track(None, {"k": "t1"}, NOW)
    again = track(first, {"k": "t1"}, NOW + timedelta(seconds=30))

    assert again == {"k": Sighting("t1", NOW, witnessed=False)}


def test_a_new_token_is_a_new_episode_seen_begin() -> None:
    first = track(None, {"k": "t1"}, NOW)
    flapped = track(first, {"k": "t2"}, NOW + timedelta(seconds=5))

    assert flapped == {"k": Sighting("t2", NOW + timedelta(seconds=5), witnessed=True)}


def test_what_the_first_look_finds_was_not_seen_begin() -> None:
    assert track(None, {"k": "t"}, NOW)["k"].witnessed is False
    assert track({}, {"k": "t"}, NOW)["k"].witnessed is True
    assert track({}, {"k": "t"}, NOW, witnessing=False)["k"].witnessed is False


def test_an_episode_no_longer_shown_is_forgotten() -> None:
    assert track({"k": Sighting("t", NOW)}, {}, NOW) == {}


def test_an_episode_not_sighted_yet_holds_from_now() -> None:
    seen = {("A", "True"): Sighting("old", NOW - timedelta(minutes=5))}

    assert first_sight(seen, ("A", "True"), "new", NOW) == NOW
    assert first_sight(seen, ("A", "True"), "old", NOW) == NOW - timedelta(minutes=5)


def test_a_conditions_episode_is_its_state_and_the_time_the_node_wrote_as_text() -> None:
    assert condition_key(KAPUT) == ("NetworkInterfaceCard", "Kaput")
    assert condition_token(KAPUT) == "NetworkInterfaceCard=Kaput@2026-11-21T09:00:00Z"
    assert condition_token(NodeCondition("A", "True")) == "A=True@"


def test_only_conditions_the_rules_read_are_sighted() -> None:
    ready = NodeCondition("Ready", "True")

    assert condition_episodes([KAPUT, ready], lambda t: t != "Ready") == {
        condition_key(KAPUT): condition_token(KAPUT)
    }


def test_a_condition_type_reported_twice_is_sighted_as_the_planner_reads_it_the_first() -> None:
    again = NodeCondition("NetworkInterfaceCard", "Kaput", "", NOW)

    assert condition_episodes([KAPUT, again], lambda _t: True) == {
        condition_key(KAPUT): condition_token(KAPUT)
    }


def test_a_restored_sighting_is_later_for_a_hold_and_earlier_for_a_boot() -> None:
    """Another process read the server's clock: up to `RESTORED_MARGIN` off this one's."""
    restored = Sighting("t", NOW, restored=True)

    assert latest(restored) == NOW + RESTORED_MARGIN
    assert earliest(restored) == NOW - RESTORED_MARGIN
    assert latest(Sighting("t", NOW)) == earliest(Sighting("t", NOW)) == NOW
