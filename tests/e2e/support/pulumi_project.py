"""This repository as a Pulumi project, for the real-engine tier (marker `pulumi`)."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]


def project_venv() -> Path:
    """The venv `Pulumi.yaml` names (`runtime.options.virtualenv`, relative to the project):
    `make setup`'s `.venv`, whose pulumi-kubernetes is the provider's release. Read from the
    file, so the venv the tests activate is the one a user's Pulumi would use."""
    project = yaml.safe_load((REPO / "Pulumi.yaml").read_text(encoding="utf-8"))
    return REPO / str(project["runtime"]["options"]["virtualenv"])
