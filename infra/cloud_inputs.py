"""Pure helpers that turn rendered bootstrap into the exact bytes a cloud API receives.

Kept apart from the components so the same functions serve the program's up-front checks, the
components' `.apply` callbacks and the tests, and so that the same rules always produce the
same provider inputs (a rules edit that does not touch a pool must not diff it).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

AKS_POOL_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")
"""AKS agent pool names: lowercase letter first, lowercase letters and digits, at most 12."""

AKS_WINDOWS_POOL_NAME_MAX = 6
"""Windows agent pool names are limited to 6 characters by AKS."""


PATCH_FORCE = "pulumi.com/patchForce"
"""pulumi-kubernetes' annotation: apply this object's fields with server-side apply's `force`."""


def stack_owned(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """`metadata` of a Kubernetes object the stack owns, with `pulumi.com/patchForce: "true"`:
    `pulumi up` then takes back a field someone changed by hand (`kubectl scale` of the
    reconciler's Deployment) instead of failing on the server-side apply conflict with that
    field's new manager (found by the real engine, tests/e2e/test_pulumi_stack.py). Only the
    fields the program declares are taken; what controllers write beside them stays theirs."""
    annotations = {**(metadata.get("annotations") or {}), PATCH_FORCE: "true"}
    return {**metadata, "annotations": annotations}


def sha256_hex(text: str) -> str:
    """SHA-256 of `text`, as hex: the digest the stack exports so a rollout can be traced to one
    rendering (what a pool's nodes boot with, `bootstrap_sha256`) or one rules text (the
    reconciler's `rules_sha256`)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def taint_identity(spec: str) -> tuple[str, str]:
    """(key, effect) of a `key=value:Effect` or `key:Effect` string, as the API server keys it."""
    key_value, _, effect = spec.rpartition(":")
    return key_value.partition("=")[0], effect


def agent_pool_name_problem(name: str, *, windows: bool = False) -> str | None:
    """Why AKS would refuse `name` as an agent pool name, or None if it is fine."""
    if not AKS_POOL_NAME.fullmatch(name):
        return (
            f"'{name}' is not a valid AKS agent pool name: start with a lowercase letter, then "
            "lowercase letters and digits only, at most 12 characters"
        )
    if windows and len(name) > AKS_WINDOWS_POOL_NAME_MAX:
        return (
            f"'{name}' is too long for a Windows agent pool: AKS allows at most "
            f"{AKS_WINDOWS_POOL_NAME_MAX} characters"
        )
    return None
