"""Structured logs, one line each, with the `extra={...}` fields: JSON objects (the fields as
keys) for a log pipeline, or text (`key=value` after the message) for a person at a terminal.

A few lines of stdlib instead of a logging dependency: the only need is lines that carry the
extra fields.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import TextIO

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def _time(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")


def _extra(record: logging.LogRecord) -> dict[str, object]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": _time(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(_extra(record))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    """`TIME LEVEL LOGGER: message key=value ...`; a value with a space, a quote or an `=` is
    quoted as JSON, so the line still splits into its fields; a traceback follows on its own
    lines."""

    def format(self, record: logging.LogRecord) -> str:
        fields = " ".join(f"{k}={_text_value(v)}" for k, v in _extra(record).items())
        line = f"{_time(record)} {record.levelname.lower()} {record.name}: {record.getMessage()}"
        line = f"{line} {fields}" if fields else line
        if record.exc_info:
            line = f"{line}\n{self.formatException(record.exc_info)}"
        return line


def _text_value(value: object) -> str:
    """A string as it is, anything else as compact JSON; quoted as a JSON string where a space
    (or, in a string, a quote or an `=`) would blur where the field ends."""
    if isinstance(value, str):
        blurs = not value or any(c.isspace() or c in '"=' for c in value)
        return json.dumps(value) if blurs else value
    text = json.dumps(value, default=str, separators=(",", ":"))
    return json.dumps(text) if any(c.isspace() for c in text) else text


def configure_logging(
    level: str = "info", fmt: str = "json", stream: TextIO | None = None, root: bool = True
) -> None:
    """Lines at `level` (debug, info, warning, error) and above, as `fmt` (json or text), to
    `stream` (stderr). `root=False` configures only nodegate's loggers, for a reconciler running
    inside another program (the demo) that keeps its own logging."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    logger = logging.getLogger() if root else logging.getLogger("nodegate")
    logger.handlers[:] = [handler]
    logger.setLevel(level.upper())
    if not root:
        logger.propagate = False
    logging.getLogger("kubernetes").setLevel(logging.WARNING)
    logging.getLogger("urllib3").setLevel(logging.WARNING)
    # urllib3 warns on each connect retry ("Retrying ... after connection broken"): during an
    # outage that is a line per attempt, which the informers and the elector already say once.
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
