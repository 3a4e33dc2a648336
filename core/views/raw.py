"""A Kubernetes object as the API server sends it (decoded JSON), read, never written."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

RawObject = Mapping[str, Any]
