"""A process's memory and CPU as the kernel accounts them (Linux /proc), children included."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcUsage:
    peak_rss_mib: float  # VmHWM: the high-water mark of resident memory
    rss_mib: float
    cpu_seconds: float  # user + system


def usage(pid: int) -> ProcUsage:
    status = {
        line.split(":", 1)[0]: line.split(":", 1)[1]
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if ":" in line
    }
    # Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return ProcUsage(
        peak_rss_mib=int(status["VmHWM"].split()[0]) / 1024,
        rss_mib=int(status["VmRSS"].split()[0]) / 1024,
        cpu_seconds=(int(stat[11]) + int(stat[12])) / _TICKS,
    )
