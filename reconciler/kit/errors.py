"""The kinds an API call fails as, whatever the transport raised: what a caller does next
depends only on the kind (retry later, give up, re-read, forget the object, list again)."""

from __future__ import annotations


class KubeError(Exception):
    """An API call failed."""


class TemporaryError(KubeError):
    """Network trouble, 5xx, 429: retry later with backoff (not before `retry_after`)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ThrottledError(TemporaryError):
    """429: the API server's own flow control (API Priority and Fairness) turned the request
    away. Not a fault: retried no sooner than its Retry-After, and counted apart from failures."""


class PermanentError(KubeError):
    """400, 403, 422...: retrying the same request cannot succeed until something else changes."""

    def __init__(self, message: str, status: int, said: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.said = said or message
        """What the API server said (its Status `message`), for a person to read."""


INVALID_WRITE_STATUSES = frozenset({400, 413, 422})
"""Refusals of a write's content (too large, invalid)."""
ANNOTATIONS_TOO_LONG = "metadata.annotations: Too long"
"""How kube-apiserver refuses an object whose annotations exceed their total size limit."""


def annotations_too_long(err: KubeError) -> bool:
    """A write refused because the object's annotations would pass their size limit: a node
    can fill its own, so the fence's token must not be what tips them over."""
    return (
        isinstance(err, PermanentError)
        and err.status in INVALID_WRITE_STATUSES
        and ANNOTATIONS_TOO_LONG in str(err)
    )


class ConflictError(KubeError):
    """409: the object changed since it was read. Re-read, re-plan, retry."""


class NotFoundError(KubeError):
    """404: the object is gone (a node deleted while we worked on it)."""


class GoneError(KubeError):
    """410: a watch's or a list continuation's resourceVersion is too old; list again."""


class TimedOutError(TemporaryError):
    """No byte arrived within the call's read deadline: the connection is presumed dead (a
    partition that neither closes nor refuses it), so the pool's idle connections, which took
    the same path, are dropped too."""


class WatchStalledError(TimedOutError):
    """A watch delivered nothing (no event, no bookmark, no end) for longer than its liveness
    bound: presumed dead, and resumed from the last resourceVersion on a new connection."""
