"""The webhook serves the rules in force, never an update the blast-radius guard holds: the
leader its own, a standby the one whose digest the leader wrote on the Lease."""

from __future__ import annotations

import textwrap
import time

import pytest

from nodegate.core.decisions.blast_radius import rules_digest
from nodegate.core.rules.loader import parse_rules
from nodegate.core.rules.model import NodeRules
from nodegate.reconciler.nodes.rules import served_rules
from nodegate.reconciler.nodes.rules.rules_source import RulesUpdate
from nodegate.reconciler.nodes.rules.served_rules import ServedRules

HEADER = "apiVersion: nodegate.dev/v1\nkind: NodeRules\n"
OLD = HEADER
NEW = HEADER + textwrap.dedent(
    """\
    startupGates:
      - name: warmup
        match: {labels: {pool: gpu}}
        taint: {key: startup.example.com/init, value: wait, effect: NoSchedule}
        readyWhen: {annotation: example.com/ready=true}
    """
)


def update(text: str) -> RulesUpdate:
    return RulesUpdate(parse_rules(text), rules_digest(text), "test")


def test_the_leader_serves_its_rules_in_force_not_the_latest_update() -> None:
    in_force = update(OLD)
    served = ServedRules(lambda: in_force)
    served.offer(in_force)
    served.offer(update(NEW))  # held by the guard: not in force
    assert served() == in_force.rules


def test_a_standby_serves_the_update_the_leader_names_on_the_lease() -> None:
    note: list[str | None] = [rules_digest(OLD)]
    served = ServedRules(lambda: None, lambda: note[0])
    served.offer(update(OLD))
    served.offer(update(NEW))
    assert served() == update(OLD).rules
    note[0] = rules_digest(NEW)  # confirmed: the leader applies it and says so
    assert served() == update(NEW).rules


def test_a_standby_keeps_serving_what_it_served_until_it_has_read_the_leaders_rules() -> None:
    note: list[str | None] = [rules_digest(OLD)]
    served = ServedRules(lambda: None, lambda: note[0])
    served.offer(update(OLD))
    assert served() == update(OLD).rules
    note[0] = rules_digest(NEW)  # not read here yet
    assert served() == update(OLD).rules


def test_with_nothing_in_force_anywhere_nothing_is_served() -> None:
    served = ServedRules(lambda: None, lambda: None)
    served.offer(update(NEW))
    assert served() is None


def test_the_leader_writes_the_digest_of_its_rules_in_force() -> None:
    in_force = update(NEW)
    assert ServedRules(lambda: in_force).digest_in_force() == rules_digest(NEW)
    assert ServedRules(lambda: None).digest_in_force() is None


def test_a_standby_that_never_read_the_leaders_rules_takes_them_from_the_status_record() -> None:
    """After a restart while an update is held, the rules source holds the held text only, and
    the leader put its rules back from the status record: a new standby reads them there, once,
    off the review's path, instead of serving nothing."""
    asked: list[int] = []

    def recorded() -> tuple[str, NodeRules] | None:
        asked.append(1)
        return rules_digest(NEW), parse_rules(NEW)

    served = ServedRules(lambda: None, lambda: rules_digest(NEW), recorded)
    served.offer(update(OLD))  # the held update, as the standby read it from the source

    assert served() is None  # the record is read in the background
    served_rules = wait_for(served)

    assert served_rules == parse_rules(NEW)
    assert len(asked) == 1


def test_a_record_naming_other_rules_is_not_served() -> None:
    served = ServedRules(
        lambda: None, lambda: rules_digest(NEW), lambda: (rules_digest(OLD), parse_rules(OLD))
    )

    served()
    time.sleep(0.2)

    assert served() is None


def test_a_record_written_after_the_lease_note_is_read_again_and_served(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The leader writes its new digest on the Lease before its status record write lands: a
    standby that read the record too early reads it again, not never."""
    monkeypatch.setattr(served_rules, "ASK_AGAIN_SECONDS", 0.05)
    record = [(rules_digest(OLD), parse_rules(OLD))]
    served = ServedRules(lambda: None, lambda: rules_digest(NEW), lambda: record[0])
    served()
    time.sleep(0.2)
    assert served() is None
    record[0] = (rules_digest(NEW), parse_rules(NEW))  # the record write lands

    assert wait_for(served) == parse_rules(NEW)


def wait_for(served: ServedRules) -> NodeRules:
    deadline = time.monotonic() + 5
    while (rules := served()) is None:
        assert time.monotonic() < deadline, "the status record's rules never served"
        time.sleep(0.01)
    return rules
