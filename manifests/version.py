"""The installed nodegate's version: the default image tag (the image follows the package)."""

from __future__ import annotations

from functools import cache
from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "nodegate"


@cache
def package_version() -> str:
    """The version pip installed (pyproject.toml's `version`), e.g. '0.1.0'."""
    try:
        return version(DISTRIBUTION)
    # Only a source tree that was never installed has no metadata; say how to fix it.
    except PackageNotFoundError as err:
        raise RuntimeError(
            "nodegate is not installed, so its version (the default image tag) is unknown: "
            "run `make setup`, or give the image tag explicitly"
        ) from err
