"""The kubelet flags a node really ends up with, read out of what nodegate renders.

Not a second rendering path: the OKE user_data printed by `nodegate render` is run by bash, the
way cloud-init runs it, with `curl` (the metadata service) and `oke` replaced by recorders, and
the arguments it hands OKE's init script (Oracle Linux) or `oke bootstrap` (Ubuntu) are read
back. The environment file the Ansible role writes is sourced by bash, as the kubelet unit's
`$KUBELET_EXTRA_ARGS` expands it. The script runs in a private mount namespace with a tmpfs
over the directory of OKE_INIT_PATH, so the init script it writes there never reaches the host.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
from pathlib import Path

from nodegate.bootstrap.oke import OKE_INIT_PATH

KUBELET_EXTRA_ARGS = "--kubelet-extra-args"
_TIMEOUT_SECONDS = 60
_RECORDER = '#!/bin/bash\nprintf "%s\\n" "$@" >"$RECORDED"\n'
_FAKE_CURL = '#!/bin/bash\nprintf "%s" "$INIT_B64"\n'


def render(rules: Path, pool: str, *args: str) -> str:
    """`nodegate render --rules RULES --pool POOL ARGS...`: the CLI a user runs, its stdout."""
    done = render_result(rules, pool, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def render_result(rules: Path, pool: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The same run, whatever its outcome (exit code, stdout, stderr)."""
    cli = Path(sys.executable).parent / "nodegate"
    return subprocess.run(
        [str(cli), "render", "--rules", str(rules), "--pool", pool, *args],
        capture_output=True,
        text=True,
        timeout=_TIMEOUT_SECONDS,
        check=False,
    )


def oke_boot_kubelet_flags(user_data: str, workdir: Path) -> list[str]:
    """Boot `user_data` (nodegate's OKE script) with recorders for OKE's init script and `oke`;
    return the words of its `--kubelet-extra-args` value, split as OKE's init script splits it
    into kubelet's command line (unquoted: on whitespace)."""
    bin_dir, recorded = workdir / "bin", workdir / "recorded-args"
    bin_dir.mkdir(parents=True)
    for tool, text in (("curl", _FAKE_CURL), ("oke", _RECORDER), ("sleep", "#!/bin/sh\n")):
        (bin_dir / tool).write_text(text, encoding="utf-8")
        (bin_dir / tool).chmod(0o755)
    script = workdir / "user-data"
    script.write_text(user_data, encoding="utf-8")
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
        "RECORDED": str(recorded),
        "INIT_B64": base64.b64encode(_RECORDER.encode()).decode(),
    }
    unshare = shutil.which("unshare") or "unshare"
    init_dir = Path(OKE_INIT_PATH).parent.resolve()  # /var/run is /run
    private_run = f'mount -t tmpfs nodegate-boot {init_dir} && exec bash "$0"'
    argv = [unshare, "--mount", "--propagation", "private", "--", "/bin/sh", "-c", private_run]
    done = subprocess.run(
        [*argv, str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=_TIMEOUT_SECONDS,
        check=False,
    )
    assert done.returncode == 0, f"the rendered user_data failed:\n{done.stderr}"
    words = recorded.read_text(encoding="utf-8").splitlines()
    return words[words.index(KUBELET_EXTRA_ARGS) + 1].split()


def env_file_kubelet_flags(env_file: Path) -> list[str]:
    """`$KUBELET_EXTRA_ARGS` of a kubelet environment file, as the kubelet unit expands it."""
    done = subprocess.run(
        ["bash", "-c", 'set -a; . "$0"; printf "%s\\n" $KUBELET_EXTRA_ARGS', str(env_file)],
        capture_output=True,
        text=True,
        timeout=_TIMEOUT_SECONDS,
        check=True,
    )
    return done.stdout.splitlines()
