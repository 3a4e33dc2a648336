"""Go-style durations ("30s", "1h30m"), the format Kubernetes users already write."""

from __future__ import annotations

import re
from datetime import timedelta

_PART_RE = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> timedelta:
    """Parse '90s', '30m', '1h30m'; raise ValueError with the accepted format otherwise."""
    stripped = text.strip()
    parts = _PART_RE.findall(stripped)
    if not stripped or "".join(num + unit for num, unit in parts) != stripped:
        raise ValueError(
            f"'{text}' is not a duration; write a number and a unit (ms, s, m, h), "
            "e.g. '30s', '10m' or '1h30m'"
        )
    return timedelta(seconds=sum(float(num) * _UNIT_SECONDS[unit] for num, unit in parts))


def format_duration(value: timedelta) -> str:
    """The shortest Go-style text for a duration (used in schema defaults and explain)."""
    total = int(value.total_seconds())
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    return text + (f"{seconds}s" if seconds or not text else "")
