"""Structured JSON logs, one object per line, with the `extra={...}` fields as keys.

A dozen lines of stdlib instead of a logging dependency: the only need is JSON lines that
carry the extra fields.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import TextIO

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(level: str = "INFO", stream: TextIO | None = None, root: bool = True) -> None:
    """JSON lines to `stream` (stderr). `root=False` configures only nodegate's loggers, for a
    reconciler running inside another program (the demo) that keeps its own logging."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger() if root else logging.getLogger("nodegate")
    logger.handlers[:] = [handler]
    logger.setLevel(level)
    if not root:
        logger.propagate = False
    logging.getLogger("kubernetes").setLevel(logging.WARNING)
    logging.getLogger("urllib3").setLevel(logging.WARNING)
    # urllib3 warns on each connect retry ("Retrying ... after connection broken"): during an
    # outage that is a line per attempt, which the informers and the elector already say once.
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
