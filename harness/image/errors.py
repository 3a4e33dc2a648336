"""The one error kind of the image tooling: a message that says what failed and what to do."""

from __future__ import annotations


class ImageError(RuntimeError):
    """The image cannot be built or run here; the message names the cause and the fix."""
