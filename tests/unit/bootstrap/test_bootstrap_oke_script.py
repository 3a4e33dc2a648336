"""The rendered OKE boot script, run: it retries the metadata service and falls back to IPv6.

bash runs the exact script a node gets, with `curl` and `sleep` replaced by fakes on PATH and
OKE's init script path moved into a temporary directory. The fake metadata service answers
(per address) after a given number of failed requests, with a base64 init script that records
the arguments it was run with.
"""

from __future__ import annotations

import base64
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from nodegate.bootstrap.oke import FETCH_ATTEMPTS, OKE_INIT_PATH, kubelet_extra_args
from nodegate.bootstrap.oke import render_oke_bootstrap_script as render
from tests.unit.bootstrap.support import rules_and_pool

IPV4 = "169.254.169.254"
IPV6 = "[fd00:c1::a9fe:a9fe]"
NEVER = 10_000

FAKE_CURL = """#!/bin/bash
url="${@: -1}"
case "$url" in
  *169.254.169.254*) key=ipv4 ;;
  *fd00:c1::a9fe:a9fe*) key=ipv6 ;;
  *) exit 2 ;;
esac
count=$(( $(cat "$STATE/$key.count" 2>/dev/null || echo 0) + 1 ))
echo "$count" >"$STATE/$key.count"
[ "$count" -gt "$(cat "$STATE/$key.fails")" ] || exit 22
printf '%s' "$INIT_B64"
"""


@dataclass
class Boot:
    returncode: int
    stderr: str
    init_args: str | None
    requests: dict[str, int]


def boot(tmp_path: Path, *, ipv4_fails: int, ipv6_fails: int) -> Boot:
    rules, pool = rules_and_pool("example", "ci")
    bin_dir, state = tmp_path / "bin", tmp_path / "state"
    bin_dir.mkdir()
    state.mkdir()
    (bin_dir / "curl").write_text(FAKE_CURL)
    (bin_dir / "sleep").write_text("#!/bin/sh\nexit 0\n")
    for tool in ("curl", "sleep"):
        (bin_dir / tool).chmod(0o755)
    (state / "ipv4.fails").write_text(str(ipv4_fails))
    (state / "ipv6.fails").write_text(str(ipv6_fails))
    recorded = tmp_path / "init-args"
    init_script = f'#!/bin/bash\nprintf "%s" "$*" >{recorded}\n'
    script = render(rules, pool).replace(OKE_INIT_PATH, str(tmp_path / "oke-init.sh"))
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "STATE": str(state),
        "INIT_B64": base64.b64encode(init_script.encode()).decode(),
    }
    done = subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    requests = {
        key: int((state / f"{key}.count").read_text()) if (state / f"{key}.count").exists() else 0
        for key in ("ipv4", "ipv6")
    }
    args = recorded.read_text() if recorded.exists() else None
    return Boot(done.returncode, done.stderr, args, requests)


def test_answering_ipv4_runs_oke_init_with_the_flags_and_never_asks_ipv6(tmp_path: Path) -> None:
    result = boot(tmp_path, ipv4_fails=0, ipv6_fails=0)

    rules, pool = rules_and_pool("example", "ci")
    assert result.returncode == 0, result.stderr
    assert result.init_args == f"--kubelet-extra-args {kubelet_extra_args(rules, pool)}"
    assert result.requests == {"ipv4": 1, "ipv6": 0}


def test_ipv6_only_node_falls_back_to_the_ipv6_metadata_address(tmp_path: Path) -> None:
    result = boot(tmp_path, ipv4_fails=NEVER, ipv6_fails=0)

    assert result.returncode == 0, result.stderr
    assert result.init_args is not None
    assert result.requests == {"ipv4": 1, "ipv6": 1}


def test_a_metadata_service_that_answers_late_is_retried(tmp_path: Path) -> None:
    result = boot(tmp_path, ipv4_fails=NEVER, ipv6_fails=3)

    assert result.returncode == 0, result.stderr
    assert result.init_args is not None
    assert result.requests == {"ipv4": 4, "ipv6": 4}
    assert "attempt 3 of 10" in result.stderr


@pytest.mark.timeout(60)
def test_no_metadata_service_fails_the_boot_after_every_attempt(tmp_path: Path) -> None:
    result = boot(tmp_path, ipv4_fails=NEVER, ipv6_fails=NEVER)

    assert result.returncode != 0
    assert result.init_args is None
    assert result.requests == {"ipv4": FETCH_ATTEMPTS, "ipv6": FETCH_ATTEMPTS}
    assert "could not fetch OKE's init script" in result.stderr
