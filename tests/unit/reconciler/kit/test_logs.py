"""The reconciler's log lines: JSON for a pipeline or text for a person (`--log-format`), from
the level asked for up (`--log-level`), each carrying the `extra={...}` context."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from nodegate.reconciler.kit.logs import configure_logging

log = logging.getLogger("nodegate.test")


@pytest.fixture(autouse=True)
def nodegate_logging_restored() -> Iterator[None]:
    logger = logging.getLogger("nodegate")
    handlers, level, propagate = logger.handlers[:], logger.level, logger.propagate
    yield
    logger.handlers[:], logger.propagate = handlers, propagate
    logger.setLevel(level)


def lines(level: str, fmt: str) -> list[str]:
    """What nodegate's loggers write, configured so, for one line at each level."""
    stream = io.StringIO()
    configure_logging(level, fmt, stream=stream, root=False)
    log.debug("step", extra={"node": "n1"})
    log.info("reconciler starting", extra={"http_port": 8080, "rules_source": "ns/rules"})
    log.warning("write refused", extra={"node": "n1", "reason": 'a quoted "value" here'})
    log.error("gave up")
    return stream.getvalue().splitlines()


def test_json_lines_carry_the_context_as_keys() -> None:
    entries = [json.loads(line) for line in lines("info", "json")]

    assert [(e["level"], e["msg"]) for e in entries] == [
        ("info", "reconciler starting"),
        ("warning", "write refused"),
        ("error", "gave up"),
    ]
    assert entries[0]["http_port"] == 8080
    assert entries[0]["rules_source"] == "ns/rules"
    assert entries[0]["logger"] == "nodegate.test"


def test_text_lines_read_as_time_level_logger_message_then_key_value() -> None:
    first = lines("info", "text")[0]

    time, level, logger, rest = first.split(" ", 3)
    assert time.endswith("+00:00") and "T" in time
    assert (level, logger) == ("info", "nodegate.test:")
    assert rest == "reconciler starting http_port=8080 rules_source=ns/rules"


def test_a_text_value_with_spaces_or_quotes_is_quoted_so_the_line_still_splits() -> None:
    warning = lines("info", "text")[1]

    assert warning.endswith('write refused node=n1 reason="a quoted \\"value\\" here"')


@pytest.mark.parametrize(
    ("level", "messages"),
    [
        ("debug", ["step", "reconciler starting", "write refused", "gave up"]),
        ("info", ["reconciler starting", "write refused", "gave up"]),
        ("warning", ["write refused", "gave up"]),
        ("error", ["gave up"]),
    ],
    ids=["debug", "info", "warning", "error"],
)
def test_the_level_asked_for_and_above_are_written(level: str, messages: list[str]) -> None:
    assert [json.loads(line)["msg"] for line in lines(level, "json")] == messages


def test_a_text_value_that_is_not_a_string_is_compact_json() -> None:
    stream = io.StringIO()
    configure_logging("info", "text", stream=stream, root=False)

    log.info("rules applied", extra={"rules": ["a", "b"], "held": None, "share": 0.5})

    assert stream.getvalue().endswith('rules applied rules=["a","b"] held=null share=0.5\n')


def test_a_traceback_follows_a_text_line() -> None:
    stream = io.StringIO()
    configure_logging("info", "text", stream=stream, root=False)
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("loop failed", extra={"loop": "rules"})

    first, *rest = stream.getvalue().splitlines()
    assert first.endswith("error nodegate.test: loop failed loop=rules")
    assert rest[0] == "Traceback (most recent call last):"
    assert rest[-1] == "ValueError: boom"
