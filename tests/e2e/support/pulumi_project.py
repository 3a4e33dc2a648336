"""This repository as a Pulumi project, for the real-engine tier (marker `pulumi`)."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

import yaml

from nodegate.localcluster.pulumi_tools import PulumiTools

REPO = Path(__file__).resolve().parents[3]


def project_venv() -> Path:
    """The venv `Pulumi.yaml` names (`runtime.options.virtualenv`, relative to the project):
    `make setup`'s `.venv`, whose pulumi-kubernetes is the provider's release. Read from the
    file, so the venv the tests activate is the one a user's Pulumi would use."""
    project = yaml.safe_load((REPO / "Pulumi.yaml").read_text(encoding="utf-8"))
    return REPO / str(project["runtime"]["options"]["virtualenv"])


def run_pulumi(
    tools: PulumiTools, env: Mapping[str, str], cwd: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    """One `pulumi` command as CI runs it (non-interactive, no stdin, 5 minutes at most); the
    caller judges the result."""
    return subprocess.run(
        [str(tools.engine), *args, "--non-interactive"],
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
